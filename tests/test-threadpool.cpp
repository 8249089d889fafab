// CPU threading: results independent of the thread count, a persistent pool (no thread churn),
// ggml_threadpool_run semantics, and aborting between nodes and inside a long mul_mat.

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <dirent.h>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

namespace {

int count_threads() {
    int   n = 0;
    DIR * d = opendir("/proc/self/task");
    if (!d) return -1;
    while (dirent * e = readdir(d)) if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

void fill_random(ggml_tensor * t, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937                          rng(seed);
    std::uniform_real_distribution<float> u(lo, hi);
    const int64_t                         n = ggml_nelements(t);
    if (t->type == GGML_TYPE_F32) {
        std::vector<float> v((size_t) n);
        for (float & x : v) x = u(rng);
        ggml_backend_tensor_set(t, v.data(), 0, v.size() * sizeof(float));
    } else {
        std::vector<ggml_fp16_t> v((size_t) n);
        for (auto & x : v) x = ggml_fp32_to_fp16(u(rng));
        ggml_backend_tensor_set(t, v.data(), 0, v.size() * sizeof(ggml_fp16_t));
    }
}

std::vector<float> get_f32(const ggml_tensor * t) {
    std::vector<float> v((size_t) ggml_nelements(t));
    ggml_backend_tensor_get(t, v.data(), 0, v.size() * sizeof(float));
    return v;
}

// A mixed graph; outputs are flagged so every intermediate of interest can be read.
struct mixed_graph {
    ggml_context *             ctx = nullptr;
    ggml_backend_buffer_t      wbuf = nullptr;
    ggml_gallocr_t             galloc = nullptr;
    ggml_cgraph *              g = nullptr;
    std::vector<ggml_tensor *> exact_outs; // kernels that do not change per-element reduction order
    std::vector<ggml_tensor *> mm_outs;    // matmul-based: allowed a tiny tolerance

    explicit mixed_graph(ggml_backend_t be) {
        ctx = ggml_init({256 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true});
        ggml_tensor * w  = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, 96, 80);
        ggml_tensor * w2 = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 80, 96);
        ggml_tensor * x  = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 96, 37, 3);
        wbuf             = ggml_backend_alloc_ctx_tensors(ctx, be);
        fill_random(w, 1); fill_random(w2, 2); fill_random(x, 3);

        ggml_tensor * n1 = ggml_norm(ctx, x, 1e-5f);
        ggml_tensor * r1 = ggml_rms_norm(ctx, x, 1e-6f);
        ggml_tensor * e1 = ggml_mul(ctx, ggml_silu(ctx, n1), r1);
        ggml_tensor * sm = ggml_soft_max_ext(ctx, ggml_scale(ctx, e1, 3.0f), nullptr, 0.7f, 0.0f);
        ggml_tensor * gl = ggml_swiglu(ctx, ggml_cont(ctx, ggml_transpose(ctx, ggml_reshape_2d(ctx, sm, 111, 96))));
        exact_outs = {n1, r1, e1, sm, gl};
        ggml_tensor * m1 = ggml_mul_mat(ctx, w, e1);        // [80, 37, 3]
        ggml_tensor * a1 = ggml_gelu(ctx, m1);
        ggml_tensor * m2 = ggml_mul_mat(ctx, w2, a1);       // [96, 37, 3]
        ggml_tensor * o  = ggml_add(ctx, ggml_soft_max(ctx, m2), x);
        mm_outs = {m1, a1, m2, o};
        g = ggml_new_graph(ctx);
        for (ggml_tensor * t : exact_outs) { ggml_set_output(t); ggml_build_forward_expand(g, t); }
        for (ggml_tensor * t : mm_outs) { ggml_set_output(t); ggml_build_forward_expand(g, t); }
        galloc = ggml_gallocr_new(ggml_backend_get_default_buffer_type(be));
        GGML_ASSERT(ggml_gallocr_alloc_graph(galloc, g));
    }
    ~mixed_graph() {
        ggml_gallocr_free(galloc);
        ggml_backend_buffer_free(wbuf);
        ggml_free(ctx);
    }
};

TEST(Threads, ResultsIndependentOfThreadCount) {
    ggml_backend_t be = ggml_backend_cpu_init();
    mixed_graph    mg(be);
    ggml_backend_cpu_set_n_threads(be, 1);
    ASSERT_EQ(ggml_backend_graph_compute(be, mg.g), GGML_STATUS_SUCCESS);
    std::vector<std::vector<float>> ref_exact, ref_mm;
    for (ggml_tensor * t : mg.exact_outs) ref_exact.push_back(get_f32(t));
    for (ggml_tensor * t : mg.mm_outs) ref_mm.push_back(get_f32(t));
    for (int nt : {2, 3, 4, 7}) {
        ggml_backend_cpu_set_n_threads(be, nt);
        ASSERT_EQ(ggml_backend_graph_compute(be, mg.g), GGML_STATUS_SUCCESS);
        for (size_t i = 0; i < mg.exact_outs.size(); i++) {
            const auto v = get_f32(mg.exact_outs[i]);
            EXPECT_EQ(memcmp(v.data(), ref_exact[i].data(), v.size() * sizeof(float)), 0)
                << ggml_op_desc(mg.exact_outs[i]) << " differs between 1 and " << nt << " threads";
        }
        for (size_t i = 0; i < mg.mm_outs.size(); i++) {
            const auto v = get_f32(mg.mm_outs[i]);
            for (size_t j = 0; j < v.size(); j++) {
                ASSERT_NEAR(v[j], ref_mm[i][j], 1e-5 * (1.0 + std::fabs(ref_mm[i][j])))
                    << ggml_op_desc(mg.mm_outs[i]) << " element " << j << " with " << nt << " threads";
            }
        }
    }
    ggml_backend_free(be);
}

TEST(Threads, PoolIsPersistent) {
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(be, 3);
    mixed_graph mg(be);
    ASSERT_EQ(ggml_backend_graph_compute(be, mg.g), GGML_STATUS_SUCCESS); // pool may start lazily
    const int before = count_threads();
    for (int i = 0; i < 100; i++) ASSERT_EQ(ggml_backend_graph_compute(be, mg.g), GGML_STATUS_SUCCESS);
    const int after = count_threads();
    EXPECT_EQ(after, before);
    EXPECT_LE(after, 1 + 3 + 2); // main + pool workers (+ slack for the test runner)
    ggml_backend_free(be);
}

TEST(Threads, ExternalThreadpoolRunsOnAllThreads) {
    ggml_threadpool_params p = ggml_threadpool_params_default(3);
    EXPECT_EQ(p.n_threads, 3);
    EXPECT_EQ(p.poll, 50u);
    EXPECT_FALSE(p.paused);
    ggml_threadpool_params q;
    ggml_threadpool_params_init(&q, 3);
    EXPECT_TRUE(ggml_threadpool_params_match(&p, &q));
    ggml_threadpool_t tp = ggml_threadpool_new(&p);
    ASSERT_NE(tp, nullptr);
    EXPECT_EQ(ggml_threadpool_get_n_threads(tp), 3);

    struct rec {
        std::mutex                  mu;
        std::set<int>               ith;
        std::set<std::thread::id>   tids;
        std::atomic<int>            calls{0};
        int                         nth = -1;
        std::thread::id             caller;
    } r;
    r.caller = std::this_thread::get_id();
    auto fn = [](int ith, int nth, void * data) {
        auto *                      rr = (rec *) data;
        std::lock_guard<std::mutex> lk(rr->mu);
        rr->ith.insert(ith);
        rr->tids.insert(std::this_thread::get_id());
        rr->nth = nth;
        rr->calls++;
        if (ith == 0) { EXPECT_EQ(std::this_thread::get_id(), rr->caller); }
    };
    for (int rep = 0; rep < 50; rep++) {
        r.ith.clear(); r.tids.clear(); r.calls = 0;
        ggml_threadpool_run(tp, 3, fn, &r);
        ASSERT_EQ(r.calls.load(), 3);
        EXPECT_EQ(r.nth, 3);
        EXPECT_EQ(r.ith, (std::set<int>{0, 1, 2}));
        EXPECT_EQ(r.tids.size(), 3u);
    }
    r.ith.clear(); r.calls = 0;
    ggml_threadpool_run(tp, 2, fn, &r); // fewer threads than the pool
    EXPECT_EQ(r.calls.load(), 2);
    EXPECT_EQ(r.ith, (std::set<int>{0, 1}));

    // pause/resume and use by a backend
    ggml_threadpool_pause(tp);
    ggml_threadpool_resume(tp);
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_backend_cpu_set_threadpool(be, tp);
    ggml_backend_cpu_set_n_threads(be, 3);
    {
        mixed_graph mg(be);
        ASSERT_EQ(ggml_backend_graph_compute(be, mg.g), GGML_STATUS_SUCCESS);
    }
    ggml_backend_free(be);
    ggml_threadpool_free(tp);
}

// ---------------------------------------------------------------------------------------------
// abort

// Asks to stop on the `stop_at`-th poll of the abort callback: by count, never by time, so the
// outcome does not depend on the machine's speed or load.
struct counted_abort {
    int              stop_at;
    std::atomic<int> polls{0};
    explicit counted_abort(int n) : stop_at(n) {}
    static bool cb(void * data) {
        auto * c = (counted_abort *) data;
        return ++c->polls >= c->stop_at;
    }
};

void set_flag(ggml_tensor * dst, int ith, int, void * ud) {
    if (ith == 0) *(std::atomic<bool> *) ud = true;
    (void) dst;
}

TEST(Abort, StopsALongGraphBetweenNodesAndBackendStaysUsable) {
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(be, 2);
    ggml_context * ctx = ggml_init({1024 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true});
    const int64_t  n   = 256;
    ggml_tensor *  w   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, n);
    ggml_tensor *  x   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, n);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(ctx, be);
    fill_random(w, 4, -0.06f, 0.06f);
    fill_random(x, 5);
    ggml_tensor * t = x;
    for (int i = 0; i < 400; i++) t = ggml_mul_mat(ctx, w, t); // ~6.7 GFLOP in total
    std::atomic<bool> tail_ran{false};
    ggml_tensor * args[1] = {t};
    ggml_tensor * tail = ggml_custom_4d(ctx, GGML_TYPE_F32, 1, 1, 1, 1, args, 1, set_flag, 1, &tail_ran);
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, tail);
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_get_default_buffer_type(be));
    ASSERT_TRUE(ggml_gallocr_alloc_graph(galloc, g));

    // The executor polls at least once after every node, so the 10th poll comes well before the
    // 401st node whatever the kernels' own polling does.
    counted_abort ca(10);
    ggml_backend_cpu_set_abort_callback(be, counted_abort::cb, &ca);
    EXPECT_EQ(ggml_backend_graph_compute(be, g), GGML_STATUS_ABORTED);
    EXPECT_FALSE(tail_ran.load()) << "the last node ran: the graph was not aborted";
    EXPECT_EQ(ca.polls.load(), 10) << "the callback was polled again after it asked to stop";

    // the same backend computes the next graph correctly (abort state does not stick)
    ggml_backend_cpu_set_abort_callback(be, nullptr, nullptr);
    ggml_context * ctx2 = ggml_init({16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true});
    ggml_tensor *  a    = ggml_new_tensor_1d(ctx2, GGML_TYPE_F32, 1000);
    ggml_tensor *  s    = ggml_scale(ctx2, ggml_add(ctx2, a, a), 0.25f);
    ggml_cgraph *  g2   = ggml_new_graph(ctx2);
    ggml_build_forward_expand(g2, s);
    ggml_gallocr_t galloc2 = ggml_gallocr_new(ggml_backend_get_default_buffer_type(be));
    ASSERT_TRUE(ggml_gallocr_alloc_graph(galloc2, g2));
    std::vector<float> in(1000);
    for (int i = 0; i < 1000; i++) in[i] = (float) i;
    ggml_backend_tensor_set(a, in.data(), 0, in.size() * sizeof(float));
    ASSERT_EQ(ggml_backend_graph_compute(be, g2), GGML_STATUS_SUCCESS);
    const auto out = get_f32(s);
    for (int i = 0; i < 1000; i++) ASSERT_EQ(out[i], 0.5f * i);

    // and the long graph itself completes once no abort is requested (on a small scale: 1 node)
    ggml_gallocr_free(galloc2);
    ggml_free(ctx2);
    ggml_gallocr_free(galloc);
    ggml_backend_buffer_free(wbuf);
    ggml_free(ctx);
    ggml_backend_free(be);
}

TEST(Abort, StopsInsideASingleLongMulMat) {
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(be, 2);
    ggml_context * ctx = ggml_init({16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true});
    // ~8.6 GFLOP in one node, as 8 matrices of 2048 x 1024 x 512: every kernel splits it into
    // several work units per thread, each over 1 GFLOP (milliseconds even at AVX-512 peak).
    ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2048, 1024);
    ggml_tensor * x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 2048, 512, 8);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(ctx, be);
    fill_random(w, 6);
    fill_random(x, 7);
    ggml_tensor * y = ggml_mul_mat(ctx, w, x);
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, y);
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_get_default_buffer_type(be));
    ASSERT_TRUE(ggml_gallocr_alloc_graph(galloc, g));
    ggml_backend_tensor_memset(y, 0xFF, 0, ggml_nbytes(y)); // NaN sentinel

    // One node: the executor's own poll comes only after it. Thread 0 polls before each of its
    // work units, at most once per millisecond of wall time; each unit is over a millisecond of
    // CPU time and load only stretches wall time, so it polls before every unit from the second
    // on, whatever the load. Its share is at least 8 units, so the 3rd poll (the stop) leaves
    // some of its units unwritten, and no further poll may follow it.
    counted_abort ca(3);
    ggml_backend_cpu_set_abort_callback(be, counted_abort::cb, &ca);
    EXPECT_EQ(ggml_backend_graph_compute(be, g), GGML_STATUS_ABORTED)
        << "the abort callback was only polled between nodes";
    const auto out = get_f32(y);
    size_t untouched = 0;
    for (float v : out) untouched += std::isnan(v);
    EXPECT_GT(untouched, 0u) << "every output element was written: the mul_mat was not stopped";
    EXPECT_EQ(ca.polls.load(), 3) << "the callback was polled again after it asked to stop";

    ggml_gallocr_free(galloc);
    ggml_backend_buffer_free(wbuf);
    ggml_free(ctx);
    ggml_backend_free(be);
}

} // namespace
