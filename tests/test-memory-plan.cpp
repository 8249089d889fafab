// test-memory-plan.cpp — src/model/memory_plan (issue 15 item 18): the available memory read from
// meminfo and cgroup v1/v2 files (fake trees here), the peak estimate's structure (weights exactly
// the layout's bytes, growing with tokens, blocks and the F32 check), and suggest_fit proposing
// the largest token count that fits.

#include "model/memory_plan.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace {

constexpr size_t GiB = (size_t) 1 << 30;

struct fake_tree {
    std::string root;
    fake_tree() {
        root = ::testing::TempDir() + "sdx-memplan-" + std::to_string((long) getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name();
        mkdir(root.c_str(), 0700);
    }
    ~fake_tree() { std::system(("rm -rf '" + root + "'").c_str()); }
    void write(const std::string & rel, const std::string & text) {
        size_t      p   = 0;
        while ((p = rel.find('/', p)) != std::string::npos) { // mkdir -p of the parents
            mkdir((root + "/" + rel.substr(0, p)).c_str(), 0700);
            ++p;
        }
        std::ofstream(root + "/" + rel) << text;
    }
    std::string path(const std::string & rel) const { return root + "/" + rel; }
};

TEST(MemoryPlan, MemAvailableWithoutLimits) {
    fake_tree t;
    t.write("meminfo", "MemTotal:       24684084 kB\nMemFree: 1 kB\nMemAvailable:    8388608 kB\n");
    t.write("cgroup", "0::/\n");
    const krea2::available_memory a = krea2::query_available_memory_from(t.path("meminfo"), t.path("cgroup"), t.path("sys"));
    EXPECT_EQ(a.bytes, 8 * GiB);
    EXPECT_EQ(a.source, "MemAvailable");
}

TEST(MemoryPlan, CgroupV2LimitOfAnAncestor) {
    fake_tree t;
    t.write("meminfo", "MemAvailable:    8388608 kB\n");
    t.write("cgroup", "0::/a/b\n");
    t.write("sys/a/memory.max", std::to_string(4 * GiB) + "\n");
    t.write("sys/a/memory.current", std::to_string(GiB) + "\n");
    t.write("sys/a/memory.stat", "anon 1\ninactive_file " + std::to_string(GiB / 2) + "\nactive_file 7\n");
    t.write("sys/a/b/memory.max", "max\n");
    t.write("sys/a/b/memory.current", "123\n");
    const krea2::available_memory a = krea2::query_available_memory_from(t.path("meminfo"), t.path("cgroup"), t.path("sys"));
    EXPECT_EQ(a.bytes, 4 * GiB - GiB + GiB / 2); // limit - (usage - reclaimable file pages)
    EXPECT_EQ(a.source, "cgroup memory.max");
}

TEST(MemoryPlan, CgroupV1LimitAndItsNoLimitValue) {
    fake_tree t;
    t.write("meminfo", "MemAvailable:    8388608 kB\n");
    t.write("cgroup", "5:cpu,cpuacct:/x\n4:memory:/x\n0::/\n");
    t.write("sys/memory/memory.limit_in_bytes", "9223372036854771712\n"); // v1's "no limit"
    t.write("sys/memory/memory.usage_in_bytes", "5000\n");
    t.write("sys/memory/x/memory.limit_in_bytes", std::to_string(2 * GiB) + "\n");
    t.write("sys/memory/x/memory.usage_in_bytes", std::to_string(3 * GiB / 2) + "\n");
    const krea2::available_memory a = krea2::query_available_memory_from(t.path("meminfo"), t.path("cgroup"), t.path("sys"));
    EXPECT_EQ(a.bytes, GiB / 2);
    EXPECT_EQ(a.source, "cgroup memory.limit_in_bytes");
}

TEST(MemoryPlan, UnreadableFilesMeanUnknown) {
    const krea2::available_memory a =
        krea2::query_available_memory_from("/nonexistent/meminfo", "/nonexistent/cgroup", "/nonexistent");
    EXPECT_EQ(a.bytes, SIZE_MAX);
}

krea2::config small() {
    krea2::config c;
    c.hidden      = 256;
    c.heads       = 2;
    c.kv_heads    = 1;
    c.mlp         = 512;
    c.blocks      = 4;
    c.tokens      = 1024;
    c.text_tokens = 32;
    return c;
}

std::vector<krea2::phase_spec> run_phases(bool check) {
    krea2::build_options bo, nb;
    nb.rope_ext = false;
    std::vector<krea2::phase_spec> p = {{krea2::wtype::int8, bo, 0}};
    if (check) p.push_back({krea2::wtype::f32, nb, 1});
    return p;
}

size_t need(krea2::runner & r, const krea2::config & c, bool check) {
    krea2::memory_estimate e;
    std::string            err;
    EXPECT_TRUE(krea2::estimate_memory(r, c, run_phases(check), e, err)) << err;
    return e.total;
}

TEST(MemoryPlan, EstimateStructure) {
    krea2::runner r;
    std::string   err;
    ASSERT_TRUE(r.init(2, err)) << err;
    const krea2::config    c = small();
    krea2::memory_estimate e;
    ASSERT_TRUE(krea2::estimate_memory(r, c, run_phases(true), e, err)) << err;
    // the F32 check's weights are the largest; the components add up to the peak
    EXPECT_EQ(e.peak_phase, 1);
    EXPECT_EQ(e.weights, krea2::model::weight_bytes_for(c, krea2::wtype::f32));
    EXPECT_GT(e.process, 0u); // the process's own resident memory (code, libraries, drivers)
    EXPECT_EQ(e.total, e.weights + e.compute + e.cpu_work + e.host + e.process + krea2::RUNTIME_OVERHEAD_BYTES);
    EXPECT_GT(e.compute, (size_t) (c.hidden * c.tokens * 4)); // at least a few activations
    // more tokens, more blocks, the check: each needs more
    krea2::config more = c;
    more.tokens        = 2048;
    EXPECT_GT(need(r, more, true), need(r, c, true));
    more        = c;
    more.blocks = 8;
    EXPECT_GT(need(r, more, true), need(r, c, true));
    EXPECT_GT(need(r, c, true), need(r, c, false));
    // an invalid config is an error, not a guess
    krea2::config bad = c;
    bad.hidden        = 300;
    EXPECT_FALSE(krea2::estimate_memory(r, bad, run_phases(true), e, err));
}

TEST(MemoryPlan, SuggestsTheLargestTokensThatFit) {
    krea2::runner r;
    std::string   err;
    ASSERT_TRUE(r.init(2, err)) << err;
    const krea2::config c     = small();
    krea2::config       half  = c;
    half.tokens               = 512;
    // suggestions keep suggest_headroom to spare (process sizes differ between runs)
    const size_t        room  = krea2::suggest_headroom(need(r, half, true));
    const size_t        avail = need(r, half, true) + room + 1000;
    ASSERT_LT(avail, need(r, c, true));
    const std::string s = krea2::suggest_fit(r, c, run_phases(true), avail, 1, true);
    const size_t      p = s.find("--tokens ");
    ASSERT_NE(p, std::string::npos) << s;
    const long t = std::atol(s.c_str() + p + 9);
    EXPECT_GE(t, 512) << s;
    EXPECT_LT(t, 1024) << s;
    EXPECT_EQ(t % 64, 0) << s;
    krea2::config fit = c, over = c;
    fit.tokens        = t;
    over.tokens       = t + 64;
    const size_t spare = krea2::suggest_headroom(avail);
    EXPECT_LE(need(r, fit, true) + spare, avail);
    EXPECT_GT(need(r, over, true) + spare, avail) << "a larger token count would have fitted";
    // nothing fits: no suggestion
    EXPECT_EQ(krea2::suggest_fit(r, c, run_phases(true), 1000, 1, true), "");
}

} // namespace
