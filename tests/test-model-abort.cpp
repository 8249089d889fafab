// test-model-abort.cpp — the Krea2 block stack stopped at EVERY abort poll through the scheduler
// (issue 15 item 19). A first run counts the polls of the CPU backend's abort callback (between
// nodes, inside native kernels, inside the extension kernels through the parallel service); then
// for every i the callback asks to stop from poll i on: the forward must report the abort, and a
// rerun on the same runner must give the uninterrupted output bit for bit.
//
// Polls between nodes and at each extension run's start happen at fixed points; polls inside
// long kernels are rate-limited by the runtime, so a run may poll a few times more or less than
// the counting run. The checks hold either way: an abort requested is an abort reported, a run
// whose poll i never came is complete and identical.

#include "model/krea2.h"
#include "model/runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

namespace {

krea2::config small_config() {
    krea2::config c;
    c.hidden      = 256;
    c.heads       = 2;
    c.kv_heads    = 1;
    c.mlp         = 512;
    c.blocks      = 2;
    c.tokens      = 40;
    c.text_tokens = 8;
    return c;
}

struct poller {
    std::atomic<long> polls{0};
    long              stop_from = -1; // poll index from which to ask to stop (-1: never)
    std::atomic<bool> requested{false};

    static bool poll(void * data) {
        poller *   p = static_cast<poller *>(data);
        const long i = p->polls.fetch_add(1);
        if (p->stop_from >= 0 && i >= p->stop_from) {
            p->requested = true;
            return true;
        }
        return false;
    }
};

bool same_bits(const std::vector<float> & a, const std::vector<float> & b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct abort_case {
    const char * name;
    krea2::wtype type;
    bool         rope_ext, fusion;
    int          blocks; // 2: aborts in the second graph too, after the first completed
};

void abort_at_every_poll(const abort_case & ac) {
    SCOPED_TRACE(ac.name);
    krea2::config c = small_config();
    c.blocks        = ac.blocks;
    krea2::runner       r;
    std::string         err;
    ASSERT_TRUE(r.init(2, err)) << err;
    krea2::model            m;
    krea2::synthetic_source src(11);
    ASSERT_TRUE(m.load(c, ac.type, &src, err)) << err;
    const std::vector<float> x    = krea2::synthetic_input(c, 11);
    const std::vector<float> tvec = krea2::synthetic_tvec(c, 11);
    krea2::build_options     bo;
    bo.rope_ext = ac.rope_ext;
    bo.fusion   = ac.fusion;

    krea2::runner::result base;
    ASSERT_TRUE(r.forward(m, bo, x, tvec, base, err)) << err;

    poller counting;
    r.set_abort_callback(&poller::poll, &counting);
    krea2::runner::result counted;
    ASSERT_TRUE(r.forward(m, bo, x, tvec, counted, err)) << err;
    ASSERT_TRUE(same_bits(counted.out, base.out)) << "polling changed the result";
    const long n = counting.polls.load();
    // at least one poll per computed node of each block graph
    ASSERT_GT(n, 20 * c.blocks) << "the abort callback is hardly polled";

    int aborted = 0;
    for (long i = 0; i < n + 3; ++i) {
        poller p;
        p.stop_from = i;
        r.set_abort_callback(&poller::poll, &p);
        krea2::runner::result res;
        const bool            ok = r.forward(m, bo, x, tvec, res, err);
        if (p.requested) {
            ASSERT_FALSE(ok) << "abort asked at poll " << i << " of " << n << " but the forward completed";
            ASSERT_TRUE(res.aborted) << "poll " << i << ": " << err;
            ++aborted;
        } else {
            ASSERT_TRUE(ok) << "poll " << i << ": " << err;
            ASSERT_FALSE(res.aborted);
            ASSERT_TRUE(same_bits(res.out, base.out)) << "poll " << i << " (never reached): different output";
        }
        // the same runner, uninterrupted: the same bits as before any abort
        r.set_abort_callback(nullptr, nullptr);
        krea2::runner::result again;
        ASSERT_TRUE(r.forward(m, bo, x, tvec, again, err)) << "rerun after an abort at poll " << i << ": " << err;
        ASSERT_TRUE(same_bits(again.out, base.out)) << "rerun after an abort at poll " << i << " differs";
    }
    std::printf("%s: %ld polls counted, %d runs aborted\n", ac.name, n, aborted);
    EXPECT_GE(aborted, 20 * c.blocks); // every node boundary is a fixed poll point
}

TEST(Krea2Abort, Int8FusedAtEveryPoll) { abort_at_every_poll({"int8 fused", krea2::wtype::int8, true, true, 2}); }
TEST(Krea2Abort, Int8UnfusedAtEveryPoll) { abort_at_every_poll({"int8 extension kernels", krea2::wtype::int8, true, false, 1}); }
TEST(Krea2Abort, F32NativeAtEveryPoll) { abort_at_every_poll({"f32 native", krea2::wtype::f32, false, true, 1}); }
TEST(Krea2Abort, Bf16AtEveryPoll) { abort_at_every_poll({"bf16", krea2::wtype::bf16, true, true, 1}); }

} // namespace
