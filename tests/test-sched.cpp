// test-sched.cpp — ggml_backend_sched: backend assignment, splits and copies, pipeline copies,
// reservation, evaluation callbacks, and how the scheduler drives extension kernels, fusion,
// plans and workspaces. A second device ("TEST", tests/support/test-backend.h) keeps its own
// memory, so copies between it and the CPU really happen; its results are real (CPU kernels).
//
// Kernels are registered on fresh devices (TEST devices or clones of the CPU device) so that no
// registration leaks into another test; the real CPU device stays untouched and serves as the
// reference.

#include "support/test-backend.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext.h"
#include "ggml-graph.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

// ---------------------------------------------------------------------------------------------
// Graph fixtures: weights in their own context/buffer, inputs flagged INPUT, data by name

using build_fn = std::function<ggml_tensor *(ggml_context * weights, ggml_context * graph)>;

std::vector<float> values_for(const char * name, int64_t n) {
    std::mt19937                          rng((uint32_t) std::hash<std::string>()(name));
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float>                    v((size_t) n);
    for (float & x : v) x = dist(rng);
    return v;
}

void fill_by_name(ggml_tensor * t) {
    ASSERT_EQ(t->type, GGML_TYPE_F32);
    std::vector<float> v = values_for(t->name, ggml_nelements(t));
    ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
}

std::vector<float> get_f32(const ggml_tensor * t) {
    std::vector<float> v((size_t) ggml_nelements(t));
    ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
    return v;
}

struct built {
    ggml_context *        w    = nullptr;
    ggml_context *        g    = nullptr;
    ggml_backend_buffer_t wbuf = nullptr;
    ggml_cgraph *         gf   = nullptr;
    ggml_tensor *         out  = nullptr;

    ~built() {
        ggml_backend_buffer_free(wbuf);
        ggml_free(w);
        ggml_free(g);
    }

    ggml_tensor * get(const char * name) { return ggml_graph_get_tensor(gf, name); }

    void fill_inputs() {
        for (int i = 0; i < ggml_graph_n_leafs(gf); i++) {
            ggml_tensor * leaf = ggml_graph_leaf(gf, i);
            if (leaf->flags & GGML_TENSOR_FLAG_INPUT) fill_by_name(leaf);
        }
    }
};

std::unique_ptr<built> build(const build_fn & f, ggml_backend_buffer_type_t weights_buft) {
    auto b = std::make_unique<built>();
    b->w   = ggml_init({ ggml_tensor_overhead() * 64, nullptr, true });
    b->g   = ggml_init({ ggml_tensor_overhead() * 1024 + ggml_graph_overhead_custom(1024, false), nullptr, true });
    b->out = f(b->w, b->g);
    ggml_set_output(b->out);
    b->gf = ggml_new_graph_custom(b->g, 1024, false);
    ggml_build_forward_expand(b->gf, b->out);
    if (ggml_get_first_tensor(b->w) != nullptr) {
        b->wbuf = ggml_backend_alloc_ctx_tensors_from_buft(b->w, weights_buft);
        ggml_backend_buffer_set_usage(b->wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        for (ggml_tensor * t = ggml_get_first_tensor(b->w); t; t = ggml_get_next_tensor(b->w, t)) fill_by_name(t);
    }
    return b;
}

// The same graph on the plain CPU device, allocated by a single-buffer gallocr.
std::vector<float> reference(const build_fn & f) {
    auto           b   = build(f, ggml_backend_cpu_buffer_type());
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_gallocr_t ga  = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    EXPECT_TRUE(ggml_gallocr_alloc_graph(ga, b->gf));
    b->fill_inputs();
    EXPECT_EQ(ggml_backend_graph_compute(cpu, b->gf), GGML_STATUS_SUCCESS);
    std::vector<float> out = get_f32(b->out);
    ggml_gallocr_free(ga);
    ggml_backend_free(cpu);
    return out;
}

std::vector<float> run(ggml_backend_sched_t s, built & b) {
    EXPECT_TRUE(ggml_backend_sched_alloc_graph(s, b.gf));
    b.fill_inputs();
    EXPECT_EQ(ggml_backend_sched_graph_compute(s, b.gf), GGML_STATUS_SUCCESS);
    return get_f32(b.out);
}

void expect_close(const std::vector<float> & a, const std::vector<float> & b, float tol = 1e-5f) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); i++) {
        ASSERT_NEAR(a[i], b[i], tol * (1.0f + std::fabs(b[i]))) << "element " << i;
    }
}

ggml_tensor * input(ggml_context * g, const char * name, int64_t ne0, int64_t ne1 = 1) {
    ggml_tensor * t = ggml_new_tensor_2d(g, GGML_TYPE_F32, ne0, ne1);
    ggml_set_name(t, name);
    ggml_set_input(t);
    return t;
}

ggml_tensor * weight(ggml_context * w, const char * name, int64_t ne0, int64_t ne1 = 1) {
    ggml_tensor * t = ggml_new_tensor_2d(w, GGML_TYPE_F32, ne0, ne1);
    ggml_set_name(t, name);
    return t;
}

ggml_tensor * named(ggml_tensor * t, const char * name) {
    ggml_set_name(t, name);
    return t;
}

// Two backends: TEST (priority) and CPU.
struct two_backends {
    ggml_backend_dev_t   dev;
    ggml_backend_t       test;
    ggml_backend_t       cpu;
    ggml_backend_sched_t sched = nullptr;

    explicit two_backends(std::set<enum ggml_op> ops, bool parallel = false) {
        dev  = test_backend::new_device(std::move(ops));
        test = test_backend::init(dev);
        cpu  = ggml_backend_cpu_init();
        make_sched(parallel);
    }
    void make_sched(bool parallel) {
        ggml_backend_sched_free(sched);
        ggml_backend_t backends[2] = { test, cpu };
        sched                      = ggml_backend_sched_new(backends, nullptr, 2, 2048, parallel, false);
    }
    ~two_backends() {
        ggml_backend_sched_free(sched);
        ggml_backend_free(test);
        ggml_backend_free(cpu);
    }
    ggml_backend_buffer_type_t test_buft() const { return ggml_backend_dev_buffer_type(dev); }
    test_backend::stats &      stats() const { return test_backend::get_stats(test); }
};

// A model with weights on the TEST device: mm = W x, act = sqr(mm), out = act + b.
ggml_tensor * mm_sqr_add(ggml_context * w, ggml_context * g) {
    ggml_tensor * W  = weight(w, "W", 16, 8);
    ggml_tensor * bv = weight(w, "b", 8, 4);
    ggml_tensor * x  = input(g, "x", 16, 4);
    ggml_tensor * mm = named(ggml_mul_mat(g, W, x), "mm");
    ggml_tensor * a  = named(ggml_sqr(g, mm), "act");
    return named(ggml_add(g, a, bv), "out");
}

// ---------------------------------------------------------------------------------------------
// Assignment

TEST(SchedAssign, preallocated_weights_pin_their_device) {
    two_backends tb({ GGML_OP_MUL_MAT, GGML_OP_SQR, GGML_OP_ADD });
    auto         b = build(mm_sqr_add, tb.test_buft());
    ggml_backend_sched_split_graph(tb.sched, b->gf);
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(tb.sched, b->get("W")), tb.test);
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(tb.sched, b->get("mm")), tb.test);
    // expansion carries the TEST assignment over the following supported ops
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(tb.sched, b->get("act")), tb.test);
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(tb.sched, b->get("out")), tb.test);
    // splitting rewrote srcs to copies: graphs are single-use, so compute a fresh one
    ggml_backend_sched_reset(tb.sched);
    auto b2 = build(mm_sqr_add, tb.test_buft());
    expect_close(run(tb.sched, *b2), reference(mm_sqr_add));
    EXPECT_EQ(ggml_backend_sched_get_n_splits(tb.sched), 1);
}

TEST(SchedAssign, input_tensors_go_to_cpu) {
    two_backends tb({ GGML_OP_MUL_MAT, GGML_OP_SQR, GGML_OP_ADD });
    auto         b = build(mm_sqr_add, tb.test_buft());
    ggml_backend_sched_split_graph(tb.sched, b->gf);
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(tb.sched, b->get("x")), tb.cpu);
}

TEST(SchedAssign, supports_op_decides_and_cpu_is_the_fallback) {
    // TEST lacks SQR: it falls back to the CPU, the ADD reading a TEST weight goes back
    two_backends tb({ GGML_OP_MUL_MAT, GGML_OP_ADD });
    auto         b = build(mm_sqr_add, tb.test_buft());
    ggml_backend_sched_split_graph(tb.sched, b->gf);
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(tb.sched, b->get("mm")), tb.test);
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(tb.sched, b->get("act")), tb.cpu);
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(tb.sched, b->get("out")), tb.test);
    EXPECT_EQ(ggml_backend_sched_get_n_splits(tb.sched), 3);
    ggml_backend_sched_reset(tb.sched);
    auto b2 = build(mm_sqr_add, tb.test_buft());
    expect_close(run(tb.sched, *b2), reference(mm_sqr_add));
    EXPECT_EQ(tb.stats().nodes_computed, 2); // mm and out
}

TEST(SchedAssign, unsupported_everywhere_but_cpu_runs_on_cpu) {
    two_backends tb({});
    build_fn     f = [](ggml_context *, ggml_context * g) {
        ggml_tensor * x = input(g, "x", 32);
        return named(ggml_scale(g, ggml_sqr(g, x), 0.5f), "out");
    };
    auto b = build(f, ggml_backend_cpu_buffer_type());
    EXPECT_EQ(run(tb.sched, *b), reference(f));
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(tb.sched, b->out), tb.cpu);
    EXPECT_EQ(tb.stats().graph_computes, 0);
    EXPECT_EQ(ggml_backend_sched_get_n_splits(tb.sched), 1);
}

TEST(SchedAssign, set_tensor_backend_pins) {
    two_backends tb({ GGML_OP_MUL_MAT, GGML_OP_SQR, GGML_OP_ADD });
    auto         b = build(mm_sqr_add, tb.test_buft());
    ggml_backend_sched_set_tensor_backend(tb.sched, b->get("act"), tb.cpu);
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(tb.sched, b->get("act")), tb.cpu);
    expect_close(run(tb.sched, *b), reference(mm_sqr_add));
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(tb.sched, b->get("act")), tb.cpu);
    EXPECT_EQ(ggml_backend_sched_get_n_splits(tb.sched), 3);
    // the pin lasts until reset
    ggml_backend_sched_reset(tb.sched);
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(tb.sched, b->get("act")), nullptr);
}

TEST(SchedAssign, inplace_writer_runs_where_its_memory_lives) {
    // TEST runs the mul_mat (its weight lives there) but not SILU; the in-place SILU writes the
    // mul_mat's memory, so both must end up on one backend that runs both (the CPU): a SILU on
    // the CPU writing TEST memory is what crashed Vulkan in test-ext-differential-vulkan (the
    // TEST device's plain host memory hides it, hence the assignment check)
    two_backends tb({ GGML_OP_MUL_MAT });
    build_fn     f = [](ggml_context * w, ggml_context * g) {
        ggml_tensor * W  = weight(w, "W", 16, 8);
        ggml_tensor * x  = input(g, "x", 16, 4);
        ggml_tensor * mm = named(ggml_mul_mat(g, W, x), "mm");
        return named(ggml_silu_inplace(g, mm), "out");
    };
    auto b = build(f, tb.test_buft());
    ggml_backend_sched_split_graph(tb.sched, b->gf);
    ggml_backend_t mm_b  = ggml_backend_sched_get_tensor_backend(tb.sched, b->get("mm"));
    ggml_backend_t out_b = ggml_backend_sched_get_tensor_backend(tb.sched, b->get("out"));
    ASSERT_NE(out_b, nullptr);
    EXPECT_TRUE(ggml_backend_supports_op(out_b, b->get("out")));
    EXPECT_TRUE(ggml_backend_supports_buft(out_b, ggml_backend_get_default_buffer_type(mm_b)))
        << "the in-place SILU runs on " << ggml_backend_name(out_b) << ", its memory lives on " << ggml_backend_name(mm_b);
    ggml_backend_sched_reset(tb.sched);
    auto b2 = build(f, tb.test_buft());
    expect_close(run(tb.sched, *b2), reference(f));
}

TEST(SchedAssign, last_backend_must_be_cpu) {
    ggml_backend_dev_t dev  = test_backend::new_device(std::set<enum ggml_op>{});
    ggml_backend_t     test = test_backend::init(dev);
    ggml_backend_t     backends[1] = { test };
    EXPECT_DEATH(ggml_backend_sched_new(backends, nullptr, 1, 64, false, false), "CPU");
    ggml_backend_free(test);
}

// ---------------------------------------------------------------------------------------------
// Splits and copies

TEST(SchedSplits, inputs_are_copied_and_srcs_rewritten) {
    two_backends tb({ GGML_OP_MUL_MAT, GGML_OP_ADD });
    auto         b = build(mm_sqr_add, tb.test_buft());
    ggml_tensor * mm = b->get("mm");
    ggml_tensor * x  = b->get("x");
    ASSERT_EQ(mm->src[1], x);
    expect_close(run(tb.sched, *b), reference(mm_sqr_add));
    // x lives on the CPU, the TEST split reads its copy
    ASSERT_NE(mm->src[1], x);
    EXPECT_STREQ(mm->src[1]->name, "TEST#x#0");
    EXPECT_TRUE(test_backend::is_test_buft(ggml_backend_buffer_get_type(mm->src[1]->buffer)));
    // act (CPU) reads a copy of mm, out (TEST) a copy of act
    EXPECT_STREQ(b->get("act")->src[0]->name, "CPU#mm#0");
    EXPECT_STREQ(b->get("out")->src[0]->name, "TEST#act#0");
}

TEST(SchedSplits, results_equal_cpu_only_over_repeated_computes) {
    two_backends             tb({ GGML_OP_MUL_MAT, GGML_OP_ADD });
    auto                     b   = build(mm_sqr_add, tb.test_buft());
    const std::vector<float> ref = reference(mm_sqr_add);
    expect_close(run(tb.sched, *b), ref);
    for (int i = 0; i < 3; i++) {
        b->fill_inputs(); // in-place ops may have reused the inputs' memory
        EXPECT_EQ(ggml_backend_sched_graph_compute(tb.sched, b->gf), GGML_STATUS_SUCCESS);
        expect_close(get_f32(b->out), ref);
    }
}

TEST(SchedSplits, cpu_only_scheduler_has_one_split) {
    ggml_backend_t       cpu = ggml_backend_cpu_init();
    ggml_backend_sched_t s   = ggml_backend_sched_new(&cpu, nullptr, 1, 256, false, false);
    auto                 b   = build(mm_sqr_add, ggml_backend_cpu_buffer_type());
    expect_close(run(s, *b), reference(mm_sqr_add));
    EXPECT_EQ(ggml_backend_sched_get_n_splits(s), 1);
    EXPECT_GT(ggml_backend_sched_get_buffer_size(s, cpu), 0u);
    ggml_backend_sched_free(s);
    ggml_backend_free(cpu);
}

TEST(SchedSplits, pipeline_copies_work) {
    two_backends tb({ GGML_OP_MUL_MAT, GGML_OP_ADD }, /*parallel=*/true);
    EXPECT_EQ(ggml_backend_sched_get_n_copies(tb.sched), 4);
    const std::vector<float> ref = reference(mm_sqr_add);
    for (int it = 0; it < 6; it++) {
        // a new graph each evaluation, as an application would build it
        ggml_backend_sched_reset(tb.sched);
        auto b = build(mm_sqr_add, tb.test_buft());
        expect_close(run(tb.sched, *b), ref);
        EXPECT_EQ(ggml_backend_sched_get_n_splits(tb.sched), 3);
    }
}

TEST(SchedSplits, reserve_then_alloc_does_not_reallocate) {
    two_backends tb({ GGML_OP_MUL_MAT, GGML_OP_ADD });
    {
        auto measure = build(mm_sqr_add, tb.test_buft());
        ASSERT_TRUE(ggml_backend_sched_reserve(tb.sched, measure->gf));
    }
    const size_t test_size = ggml_backend_sched_get_buffer_size(tb.sched, tb.test);
    const size_t cpu_size  = ggml_backend_sched_get_buffer_size(tb.sched, tb.cpu);
    EXPECT_GT(test_size, 0u);
    EXPECT_GT(cpu_size, 0u);

    ggml_backend_buffer_t first_buf = nullptr;
    for (int it = 0; it < 3; it++) {
        ggml_backend_sched_reset(tb.sched);
        auto b = build(mm_sqr_add, tb.test_buft());
        expect_close(run(tb.sched, *b), reference(mm_sqr_add));
        // the same compute buffer serves every allocation
        ggml_backend_buffer_t buf = b->get("mm")->buffer;
        if (first_buf == nullptr) first_buf = buf;
        EXPECT_EQ(buf, first_buf);
        EXPECT_EQ(ggml_backend_sched_get_buffer_size(tb.sched, tb.test), test_size);
        EXPECT_EQ(ggml_backend_sched_get_buffer_size(tb.sched, tb.cpu), cpu_size);
    }
}

TEST(SchedSplits, reserve_size_reports_without_allocating) {
    two_backends tb({ GGML_OP_MUL_MAT, GGML_OP_ADD });
    auto         measure  = build(mm_sqr_add, tb.test_buft());
    size_t       sizes[2] = { 0, 0 };
    ggml_backend_sched_reserve_size(tb.sched, measure->gf, sizes);
    EXPECT_GT(sizes[0], 0u);
    EXPECT_GT(sizes[1], 0u);
    EXPECT_EQ(ggml_backend_sched_get_buffer_size(tb.sched, tb.test), 0u);
    auto measure2 = build(mm_sqr_add, tb.test_buft());
    ASSERT_TRUE(ggml_backend_sched_reserve(tb.sched, measure2->gf));
    EXPECT_EQ(ggml_backend_sched_get_buffer_size(tb.sched, tb.test), sizes[0]);
    EXPECT_EQ(ggml_backend_sched_get_buffer_size(tb.sched, tb.cpu), sizes[1]);
}

TEST(SchedSplits, alloc_twice_without_reset_asserts) {
    ggml_backend_t       cpu = ggml_backend_cpu_init();
    ggml_backend_sched_t s   = ggml_backend_sched_new(&cpu, nullptr, 1, 256, false, false);
    auto                 b   = build(mm_sqr_add, ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b->gf));
    EXPECT_DEATH(ggml_backend_sched_alloc_graph(s, b->gf), "already allocated");
    ggml_backend_sched_free(s);
    ggml_backend_free(cpu);
}

// ---------------------------------------------------------------------------------------------
// Evaluation callback

struct cb_log {
    std::vector<std::string> asked, observed;
    std::string              want;
    bool                     stop = false; // answer false when observing
};

bool eval_cb(ggml_tensor * t, bool ask, void * ud) {
    auto * log = static_cast<cb_log *>(ud);
    if (ask) {
        log->asked.push_back(t->name);
        return log->want == t->name;
    }
    log->observed.push_back(t->name);
    return !log->stop;
}

ggml_tensor * sqr_mul_add_scale(ggml_context *, ggml_context * g) {
    ggml_tensor * x = input(g, "x", 8);
    ggml_tensor * y = input(g, "y", 8);
    ggml_tensor * a = named(ggml_sqr(g, x), "sqr");
    ggml_tensor * m = named(ggml_mul(g, a, y), "mul");
    ggml_tensor * s = named(ggml_add(g, m, x), "add");
    return named(ggml_scale(g, s, 2.0f), "scale");
}

TEST(SchedEval, eval_callback_asks_every_node_and_observes_wanted_ones) {
    ggml_backend_t       cpu = ggml_backend_cpu_init();
    ggml_backend_sched_t s   = ggml_backend_sched_new(&cpu, nullptr, 1, 256, false, false);
    cb_log               log;
    log.want = "mul";
    ggml_backend_sched_set_eval_callback(s, eval_cb, &log);
    auto b = build(sqr_mul_add_scale, ggml_backend_cpu_buffer_type());
    expect_close(run(s, *b), reference(sqr_mul_add_scale));
    EXPECT_EQ(log.asked.size(), 4u);
    ASSERT_EQ(log.observed.size(), 1u);
    EXPECT_EQ(log.observed[0], "mul");
    ggml_backend_sched_free(s);
    ggml_backend_free(cpu);
}

TEST(SchedEval, eval_callback_false_stops_the_current_split) {
    ggml_backend_t       cpu = ggml_backend_cpu_init();
    ggml_backend_sched_t s   = ggml_backend_sched_new(&cpu, nullptr, 1, 256, false, false);
    cb_log               log;
    log.want = "mul";
    log.stop = true;
    ggml_backend_sched_set_eval_callback(s, eval_cb, &log);
    auto b = build(sqr_mul_add_scale, ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(ggml_backend_sched_alloc_graph(s, b->gf));
    b->fill_inputs();
    EXPECT_EQ(ggml_backend_sched_graph_compute(s, b->gf), GGML_STATUS_SUCCESS);
    EXPECT_EQ(log.asked.size(), 2u); // sqr, mul; add and scale never run
    EXPECT_EQ(log.observed, std::vector<std::string>{ "mul" });
    EXPECT_NE(get_f32(b->out), reference(sqr_mul_add_scale));
    ggml_backend_sched_free(s);
    ggml_backend_free(cpu);
}

TEST(SchedEval, eval_callback_false_leaves_later_splits_running) {
    two_backends tb({ GGML_OP_MUL_MAT, GGML_OP_ADD });
    cb_log       log;
    log.want = "mm";
    log.stop = true;
    ggml_backend_sched_set_eval_callback(tb.sched, eval_cb, &log);
    auto b = build(mm_sqr_add, tb.test_buft());
    // the stop only ends the TEST split that computed mm; the CPU and TEST splits after it run
    expect_close(run(tb.sched, *b), reference(mm_sqr_add));
    EXPECT_EQ(log.observed, std::vector<std::string>{ "mm" });
}

// ---------------------------------------------------------------------------------------------
// Extensions through the scheduler

struct counters {
    int    supports = 0, match = 0, prepare = 0, execute = 0, destroy = 0;
    size_t workspace = 0;
    std::vector<size_t> seen_ws;
};

bool f32c(const ggml_tensor * t) {
    return t != nullptr && t->type == GGML_TYPE_F32 && ggml_is_contiguous(t);
}

bool silu_supports(ggml_backend_dev_t, const ggml_tensor * n, void * ud) {
    static_cast<counters *>(ud)->supports++;
    return ggml_get_unary_op(n) == GGML_UNARY_OP_SILU && f32c(n) && f32c(n->src[0]);
}

ggml_status count_prepare(ggml_backend_dev_t, const ggml_ext_nodes *, void ** state, size_t * ws, void * ud) {
    auto * c = static_cast<counters *>(ud);
    c->prepare++;
    *state = new int(1);
    *ws    = c->workspace;
    return GGML_STATUS_SUCCESS;
}

void count_destroy(void * state, void * ud) {
    static_cast<counters *>(ud)->destroy++;
    delete static_cast<int *>(state);
}

ggml_status silu_execute(ggml_backend_t, const ggml_ext_nodes * nodes, void *, void * ws, size_t ws_size,
                         void * ud) {
    auto * c = static_cast<counters *>(ud);
    c->execute++;
    c->seen_ws.push_back(ws ? ws_size : 0);
    const ggml_tensor * n = nodes->nodes[0];
    const float *       x = (const float *) n->src[0]->data;
    float *             y = (float *) n->data;
    for (int64_t i = 0; i < ggml_nelements(n); i++) y[i] = x[i] / (1.0f + std::exp(-x[i]));
    return GGML_STATUS_SUCCESS;
}

void register_silu(ggml_backend_dev_t dev, counters * c) {
    ggml_ext_kernel_desc d = {};
    d.name                 = "test.silu";
    d.op                   = GGML_OP_UNARY;
    d.supports             = silu_supports;
    d.prepare              = count_prepare;
    d.execute              = silu_execute;
    d.destroy              = count_destroy;
    d.user_data            = c;
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d)) << ggml_ext_last_error();
}

// MUL -> ADD fusion: out = a * b + c, rounded after each op like the native pair.
int mul_add_match(ggml_backend_dev_t, const ggml_cgraph * g, int first, void * ud) {
    static_cast<counters *>(ud)->match++;
    ggml_cgraph * graph = const_cast<ggml_cgraph *>(g);
    if (first + 1 >= ggml_graph_n_nodes(graph)) return 0;
    ggml_tensor * m = ggml_graph_node(graph, first);
    ggml_tensor * a = ggml_graph_node(graph, first + 1);
    if (m->op != GGML_OP_MUL || a->op != GGML_OP_ADD || a->src[0] != m) return 0;
    if (!f32c(m) || !f32c(m->src[0]) || !f32c(m->src[1]) || !f32c(a) || !f32c(a->src[1])) return 0;
    if (!ggml_are_same_shape(m, m->src[0]) || !ggml_are_same_shape(m, m->src[1]) ||
        !ggml_are_same_shape(a, a->src[1])) {
        return 0;
    }
    return 2;
}

ggml_status mul_add_execute(ggml_backend_t, const ggml_ext_nodes * nodes, void *, void * ws, size_t ws_size,
                            void * ud) {
    auto * c = static_cast<counters *>(ud);
    c->execute++;
    c->seen_ws.push_back(ws ? ws_size : 0);
    const ggml_tensor * m   = nodes->nodes[0];
    const ggml_tensor * out = nodes->nodes[nodes->n_nodes - 1];
    const float *       a   = (const float *) m->src[0]->data;
    const float *       b   = (const float *) m->src[1]->data;
    const float *       d   = (const float *) out->src[1]->data;
    float *             y   = (float *) out->data;
    for (int64_t i = 0; i < ggml_nelements(out); i++) {
        const float p = a[i] * b[i];
        y[i]          = p + d[i];
    }
    return GGML_STATUS_SUCCESS;
}

void register_mul_add(ggml_backend_dev_t dev, counters * c) {
    ggml_ext_kernel_desc d = {};
    d.name                 = "test.mul_add";
    d.op                   = GGML_OP_NONE; // fusion only
    d.match                = mul_add_match;
    d.prepare              = count_prepare;
    d.execute              = mul_add_execute;
    d.destroy              = count_destroy;
    d.user_data            = c;
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d)) << ggml_ext_last_error();
}

ggml_tensor * mul_add_graph(ggml_context *, ggml_context * g) {
    ggml_tensor * x = input(g, "x", 64);
    ggml_tensor * y = input(g, "y", 64);
    ggml_tensor * z = input(g, "z", 64);
    ggml_tensor * s = named(ggml_sqr(g, x), "sqr");
    ggml_tensor * m = named(ggml_mul(g, s, y), "mul");
    ggml_tensor * a = named(ggml_add(g, m, z), "add");
    return named(ggml_scale(g, a, 0.25f), "out");
}

// A scheduler over one CPU-type clone device (fresh registrations).
struct cpu_clone {
    ggml_backend_dev_t   dev;
    ggml_backend_t       cpu;
    ggml_backend_sched_t sched = nullptr;

    explicit cpu_clone(bool parallel = false) {
        dev = test_backend::new_cpu_device();
        cpu = test_backend::init_cpu(dev);
        make_sched(parallel);
    }
    void make_sched(bool parallel) {
        ggml_backend_sched_free(sched);
        sched = ggml_backend_sched_new(&cpu, nullptr, 1, 1024, parallel, false);
    }
    ~cpu_clone() {
        ggml_backend_sched_free(sched);
        ggml_backend_free(cpu);
    }
};

int count_fused_steps(ggml_backend_sched_t s, const char * kernel = nullptr) {
    int n = 0;
    for (int i = 0; i < ggml_ext_sched_n_steps(s); i++) {
        ggml_ext_step_info info;
        EXPECT_TRUE(ggml_ext_sched_get_step(s, i, &info));
        if (info.fused && (kernel == nullptr || (info.kernel && strcmp(info.kernel, kernel) == 0))) n++;
    }
    return n;
}

TEST(SchedExt, capability_includes_extension_kernels) {
    // TEST has no native SILU; a kernel registered on it makes the scheduler keep SILU there
    two_backends tb({ GGML_OP_MUL_MAT, GGML_OP_ADD });
    counters     c;
    register_silu(tb.dev, &c);
    build_fn f = [](ggml_context * w, ggml_context * g) {
        ggml_tensor * W  = weight(w, "W", 16, 8);
        ggml_tensor * bv = weight(w, "b", 8, 4);
        ggml_tensor * mm = named(ggml_mul_mat(g, W, input(g, "x", 16, 4)), "mm");
        ggml_tensor * a  = named(ggml_silu(g, mm), "act");
        return named(ggml_add(g, a, bv), "out");
    };
    auto b = build(f, tb.test_buft());
    expect_close(run(tb.sched, *b), reference(f), 1e-5f);
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(tb.sched, b->get("act")), tb.test);
    EXPECT_EQ(ggml_backend_sched_get_n_splits(tb.sched), 1);
    EXPECT_EQ(c.execute, 1);
    EXPECT_EQ(tb.stats().nodes_computed, 2); // mm and out natively, act by the kernel
    bool found = false;
    for (int i = 0; i < ggml_ext_sched_n_steps(tb.sched); i++) {
        ggml_ext_step_info info;
        ASSERT_TRUE(ggml_ext_sched_get_step(tb.sched, i, &info));
        if (info.kernel && strcmp(info.kernel, "test.silu") == 0) {
            found = true;
            EXPECT_EQ(info.backend, tb.test);
            EXPECT_EQ(info.n_nodes, 1);
            EXPECT_FALSE(info.fused);
        }
    }
    EXPECT_TRUE(found);
}

TEST(SchedExt, kernel_on_other_device_does_not_move_ops) {
    // the kernel lives on a different TEST device: SILU still falls back to the CPU
    two_backends       tb({ GGML_OP_MUL_MAT, GGML_OP_ADD });
    counters           c;
    ggml_backend_dev_t other = test_backend::new_device(std::set<enum ggml_op>{});
    register_silu(other, &c);
    build_fn f = [](ggml_context * w, ggml_context * g) {
        ggml_tensor * W = weight(w, "W", 16, 8);
        ggml_tensor * a = named(ggml_silu(g, ggml_mul_mat(g, W, input(g, "x", 16, 4))), "act");
        return named(ggml_scale(g, a, 3.0f), "out");
    };
    auto b = build(f, tb.test_buft());
    expect_close(run(tb.sched, *b), reference(f));
    EXPECT_EQ(ggml_backend_sched_get_tensor_backend(tb.sched, b->get("act")), tb.cpu);
    EXPECT_EQ(c.execute, 0);
}

TEST(SchedExt, fusion_selected_by_scheduler) {
    cpu_clone cc;
    counters  c;
    register_mul_add(cc.dev, &c);
    auto b = build(mul_add_graph, ggml_backend_cpu_buffer_type());
    const std::vector<float> out = run(cc.sched, *b);
    EXPECT_EQ(out, reference(mul_add_graph)); // same rounding order: bit-exact
    EXPECT_EQ(count_fused_steps(cc.sched, "test.mul_add"), 1);
    EXPECT_EQ(c.execute, 1);
    for (int i = 0; i < ggml_ext_sched_n_steps(cc.sched); i++) {
        ggml_ext_step_info info;
        ASSERT_TRUE(ggml_ext_sched_get_step(cc.sched, i, &info));
        if (info.fused) {
            EXPECT_EQ(info.n_nodes, 2);
            EXPECT_EQ(info.split, 0);
            EXPECT_EQ(info.backend, cc.cpu);
            EXPECT_STREQ(ggml_graph_node(b->gf, info.first_node)->name, "mul");
        }
    }
}

TEST(SchedExt, fusion_off_with_eval_callback) {
    cpu_clone cc;
    counters  c;
    register_mul_add(cc.dev, &c);
    cb_log log;
    log.want = "mul";
    ggml_backend_sched_set_eval_callback(cc.sched, eval_cb, &log);
    auto b = build(mul_add_graph, ggml_backend_cpu_buffer_type());
    EXPECT_EQ(run(cc.sched, *b), reference(mul_add_graph));
    EXPECT_EQ(count_fused_steps(cc.sched), 0);
    EXPECT_EQ(c.execute, 0);
    EXPECT_EQ(log.observed, std::vector<std::string>{ "mul" }); // the intermediate still exists
}

TEST(SchedExt, fusion_off_when_callback_set_after_alloc) {
    cpu_clone cc;
    counters  c;
    register_mul_add(cc.dev, &c);
    auto b = build(mul_add_graph, ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(ggml_backend_sched_alloc_graph(cc.sched, b->gf));
    EXPECT_EQ(count_fused_steps(cc.sched), 1);
    cb_log log;
    log.want = "mul";
    ggml_backend_sched_set_eval_callback(cc.sched, eval_cb, &log);
    b->fill_inputs();
    EXPECT_EQ(ggml_backend_sched_graph_compute(cc.sched, b->gf), GGML_STATUS_SUCCESS);
    EXPECT_EQ(get_f32(b->out), reference(mul_add_graph));
    EXPECT_EQ(count_fused_steps(cc.sched), 0);
    EXPECT_EQ(c.execute, 0);
    EXPECT_EQ(log.observed, std::vector<std::string>{ "mul" });
}

TEST(SchedExt, fusion_off_with_pipeline_copies) {
    cpu_clone cc(/*parallel=*/true);
    counters  c;
    register_mul_add(cc.dev, &c);
    auto b = build(mul_add_graph, ggml_backend_cpu_buffer_type());
    EXPECT_EQ(run(cc.sched, *b), reference(mul_add_graph));
    EXPECT_EQ(count_fused_steps(cc.sched), 0);
    EXPECT_EQ(c.execute, 0);
    EXPECT_EQ(c.match, 0);
}

TEST(SchedExt, plans_reused_across_executions) {
    cpu_clone cc;
    counters  c;
    register_mul_add(cc.dev, &c);
    auto b = build(mul_add_graph, ggml_backend_cpu_buffer_type());
    const std::vector<float> ref = reference(mul_add_graph);
    EXPECT_EQ(run(cc.sched, *b), ref);
    const int matches = c.match;
    for (int i = 0; i < 4; i++) {
        b->fill_inputs();
        EXPECT_EQ(ggml_backend_sched_graph_compute(cc.sched, b->gf), GGML_STATUS_SUCCESS);
        EXPECT_EQ(get_f32(b->out), ref);
    }
    EXPECT_EQ(c.prepare, 1);
    EXPECT_EQ(c.execute, 5);
    EXPECT_EQ(c.match, matches); // no re-matching either
    EXPECT_EQ(c.destroy, 0);
}

TEST(SchedExt, plans_rebuilt_after_realloc) {
    cpu_clone cc;
    counters  c;
    register_mul_add(cc.dev, &c);
    const std::vector<float> ref = reference(mul_add_graph);
    {
        auto b = build(mul_add_graph, ggml_backend_cpu_buffer_type());
        EXPECT_EQ(run(cc.sched, *b), ref);
    }
    EXPECT_EQ(c.prepare, 1);
    ggml_backend_sched_reset(cc.sched);
    EXPECT_EQ(c.destroy, 1); // reset releases the plans
    EXPECT_EQ(ggml_ext_sched_n_steps(cc.sched), 0);
    {
        auto b = build(mul_add_graph, ggml_backend_cpu_buffer_type());
        EXPECT_EQ(run(cc.sched, *b), ref);
    }
    EXPECT_EQ(c.prepare, 2);
    EXPECT_EQ(count_fused_steps(cc.sched), 1);
}

TEST(SchedExt, sched_buffer_size_includes_workspace) {
    constexpr size_t WS = 1 << 20;
    size_t           plain = 0;
    {
        cpu_clone cc;
        auto      b = build(mul_add_graph, ggml_backend_cpu_buffer_type());
        ASSERT_TRUE(ggml_backend_sched_reserve(cc.sched, b->gf));
        plain = ggml_backend_sched_get_buffer_size(cc.sched, cc.cpu);
    }
    cpu_clone cc;
    counters  c;
    c.workspace = WS;
    register_mul_add(cc.dev, &c);
    {
        auto   b        = build(mul_add_graph, ggml_backend_cpu_buffer_type());
        size_t sizes[1] = { 0 };
        ggml_backend_sched_reserve_size(cc.sched, b->gf, sizes);
        EXPECT_GE(sizes[0], plain + WS);
    }
    {
        auto b = build(mul_add_graph, ggml_backend_cpu_buffer_type());
        ASSERT_TRUE(ggml_backend_sched_reserve(cc.sched, b->gf));
    }
    const size_t with_ws = ggml_backend_sched_get_buffer_size(cc.sched, cc.cpu);
    EXPECT_GE(with_ws, plain + WS);
    EXPECT_EQ(c.prepare, 2); // measurement prepares before any address exists
    EXPECT_EQ(c.execute, 0);
    // execution sees the reserved workspace, and the reservation does not grow
    auto b = build(mul_add_graph, ggml_backend_cpu_buffer_type());
    EXPECT_EQ(run(cc.sched, *b), reference(mul_add_graph));
    ASSERT_EQ(c.seen_ws.size(), 1u);
    EXPECT_GE(c.seen_ws[0], WS);
    EXPECT_EQ(ggml_backend_sched_get_buffer_size(cc.sched, cc.cpu), with_ws);
}

TEST(SchedExt, workspace_is_max_over_plans_per_backend) {
    // two fused steps in one plan share one workspace of the larger request
    cpu_clone cc;
    counters  c;
    c.workspace = 4096;
    register_mul_add(cc.dev, &c);
    build_fn f = [](ggml_context *, ggml_context * g) {
        ggml_tensor * x  = input(g, "x", 64);
        ggml_tensor * y  = input(g, "y", 64);
        ggml_tensor * a  = named(ggml_add(g, ggml_mul(g, ggml_sqr(g, x), y), x), "a1");
        ggml_tensor * a2 = named(ggml_add(g, ggml_mul(g, ggml_sqr(g, a), y), x), "a2");
        return named(ggml_scale(g, a2, 0.5f), "out");
    };
    auto b = build(f, ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(ggml_backend_sched_reserve(cc.sched, b->gf));
    size_t cpu_compute = 0;
    {
        cpu_clone plain;
        auto      b2 = build(f, ggml_backend_cpu_buffer_type());
        ASSERT_TRUE(ggml_backend_sched_reserve(plain.sched, b2->gf));
        cpu_compute = ggml_backend_sched_get_buffer_size(plain.sched, plain.cpu);
    }
    const size_t total = ggml_backend_sched_get_buffer_size(cc.sched, cc.cpu);
    EXPECT_GE(total, cpu_compute + 4096);
    EXPECT_LT(total, cpu_compute + 2 * 4096);
}

TEST(SchedExt, prepare_error_propagates_as_compute_status) {
    cpu_clone cc;
    counters  c;
    register_mul_add(cc.dev, &c);
    // replace prepare's answer through a second rule with higher priority
    struct failing {
        static ggml_status prepare(ggml_backend_dev_t, const ggml_ext_nodes *, void ** state, size_t * ws, void *) {
            *state = nullptr;
            *ws    = 0;
            return GGML_STATUS_FAILED;
        }
    };
    ggml_ext_kernel_desc d = {};
    d.name                 = "test.mul_add_failing";
    d.op                   = GGML_OP_NONE;
    d.priority             = 10;
    d.match                = mul_add_match;
    d.prepare              = failing::prepare;
    d.execute              = mul_add_execute;
    d.user_data            = &c;
    ASSERT_TRUE(ggml_ext_register_kernel(cc.dev, &d));
    auto b = build(mul_add_graph, ggml_backend_cpu_buffer_type());
    EXPECT_EQ(ggml_backend_sched_graph_compute(cc.sched, b->gf), GGML_STATUS_FAILED);
    EXPECT_EQ(c.execute, 0);
}

TEST(SchedExt, execute_error_propagates_and_native_is_not_retried) {
    two_backends tb({ GGML_OP_MUL_MAT, GGML_OP_ADD });
    struct failing {
        static ggml_status execute(ggml_backend_t, const ggml_ext_nodes *, void *, void *, size_t, void * ud) {
            static_cast<counters *>(ud)->execute++;
            return GGML_STATUS_ABORTED;
        }
    };
    counters             c;
    ggml_ext_kernel_desc d = {};
    d.name                 = "test.silu_failing";
    d.op                   = GGML_OP_UNARY;
    d.supports             = silu_supports;
    d.execute              = failing::execute;
    d.user_data            = &c;
    ASSERT_TRUE(ggml_ext_register_kernel(tb.dev, &d));
    build_fn f = [](ggml_context * w, ggml_context * g) {
        ggml_tensor * W = weight(w, "W", 16, 8);
        ggml_tensor * a = named(ggml_silu(g, ggml_mul_mat(g, W, input(g, "x", 16, 4))), "act");
        return named(ggml_add(g, a, a), "out");
    };
    auto b = build(f, tb.test_buft());
    ASSERT_TRUE(ggml_backend_sched_alloc_graph(tb.sched, b->gf));
    b->fill_inputs();
    EXPECT_EQ(ggml_backend_sched_graph_compute(tb.sched, b->gf), GGML_STATUS_ABORTED);
    EXPECT_EQ(c.execute, 1);
    EXPECT_EQ(tb.stats().nodes_computed, 1); // mm only: neither act nor what follows ran natively
}

// Kernel for MUL_MAT -> TRANSPOSE -> CONT: out = (W x)^T computed from W and x directly, so x
// must still hold its values when out is written.
int mm_t_match(ggml_backend_dev_t, const ggml_cgraph * g, int first, void * ud) {
    static_cast<counters *>(ud)->match++;
    ggml_cgraph * graph = const_cast<ggml_cgraph *>(g);
    if (first + 2 >= ggml_graph_n_nodes(graph)) return 0;
    ggml_tensor * mm = ggml_graph_node(graph, first);
    ggml_tensor * tr = ggml_graph_node(graph, first + 1);
    ggml_tensor * ct = ggml_graph_node(graph, first + 2);
    if (mm->op != GGML_OP_MUL_MAT || tr->op != GGML_OP_TRANSPOSE || ct->op != GGML_OP_CONT) return 0;
    if (tr->src[0] != mm || ct->src[0] != tr || !f32c(mm->src[0]) || !f32c(mm->src[1])) return 0;
    return 3;
}

ggml_status mm_t_execute(ggml_backend_t, const ggml_ext_nodes * nodes, void *, void *, size_t, void * ud) {
    static_cast<counters *>(ud)->execute++;
    const ggml_tensor * mm  = nodes->nodes[0];
    const ggml_tensor * out = nodes->nodes[2];
    const ggml_tensor * W   = mm->src[0];
    const ggml_tensor * x   = mm->src[1];
    const int64_t       K = W->ne[0], N = W->ne[1], M = x->ne[1];
    const float *       w = (const float *) W->data;
    const float *       xv = (const float *) x->data;
    float *             y  = (float *) out->data;
    // writes row by row while reading x: an overlap with x would corrupt later rows
    for (int64_t n = 0; n < N; n++) {
        for (int64_t m = 0; m < M; m++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++) acc += w[n * K + k] * xv[m * K + k];
            y[n * M + m] = acc;
        }
    }
    return GGML_STATUS_SUCCESS;
}

ggml_tensor * mm_t_graph(ggml_context * w, ggml_context * g) {
    ggml_tensor * W  = weight(w, "W", 8, 8);
    ggml_tensor * in = input(g, "in", 8, 4);
    ggml_tensor * x  = named(ggml_scale(g, in, 1.0f), "x"); // computed: memory of the compute buffer
    ggml_tensor * mm = named(ggml_mul_mat(g, W, x), "mm");
    ggml_tensor * tr = named(ggml_transpose(g, mm), "tr");
    return named(ggml_cont(g, tr), "out");
}

bool overlaps(const ggml_tensor * a, const ggml_tensor * b) {
    const char * a0 = (const char *) a->data;
    const char * b0 = (const char *) b->data;
    return a0 < b0 + ggml_nbytes(b) && b0 < a0 + ggml_nbytes(a);
}

TEST(SchedExt, fused_inputs_stay_allocated_through_final_node) {
    // premise: without fusion the allocator frees x after mm and places out on x's memory
    {
        cpu_clone cc;
        auto      b = build(mm_t_graph, ggml_backend_cpu_buffer_type());
        expect_close(run(cc.sched, *b), reference(mm_t_graph));
        EXPECT_TRUE(overlaps(b->get("x"), b->out)) << "test premise: the allocator reuses x's memory for out";
    }
    cpu_clone cc;
    counters  c;
    ggml_ext_kernel_desc d = {};
    d.name                 = "test.mm_t";
    d.op                   = GGML_OP_NONE;
    d.match                = mm_t_match;
    d.execute              = mm_t_execute;
    d.user_data            = &c;
    ASSERT_TRUE(ggml_ext_register_kernel(cc.dev, &d));
    auto b = build(mm_t_graph, ggml_backend_cpu_buffer_type());
    expect_close(run(cc.sched, *b), reference(mm_t_graph));
    EXPECT_EQ(c.execute, 1);
    EXPECT_EQ(count_fused_steps(cc.sched, "test.mm_t"), 1);
    EXPECT_FALSE(overlaps(b->get("x"), b->out));
    EXPECT_FALSE(overlaps(b->get("mm"), b->out)); // intermediates keep their allocation
}

TEST(SchedExt, fusion_never_crosses_a_split) {
    // MUL on TEST (pinned), ADD on the CPU: a rule on TEST must not fuse across the cut
    two_backends tb({ GGML_OP_MUL, GGML_OP_ADD, GGML_OP_SQR, GGML_OP_SCALE });
    counters     ct;
    register_mul_add(tb.dev, &ct);
    auto b = build(mul_add_graph, ggml_backend_cpu_buffer_type());
    ggml_backend_sched_set_tensor_backend(tb.sched, b->get("mul"), tb.test);
    ggml_backend_sched_set_tensor_backend(tb.sched, b->get("add"), tb.cpu);
    EXPECT_EQ(run(tb.sched, *b), reference(mul_add_graph));
    EXPECT_EQ(count_fused_steps(tb.sched), 0);
    EXPECT_EQ(ct.execute, 0);
}

TEST(SchedExt, fusion_on_test_device_with_copied_inputs) {
    // the fused range's inputs are copies made by the scheduler
    two_backends tb({ GGML_OP_MUL, GGML_OP_ADD, GGML_OP_SQR, GGML_OP_SCALE });
    counters     c;
    register_mul_add(tb.dev, &c);
    auto b = build(mul_add_graph, ggml_backend_cpu_buffer_type());
    ggml_backend_sched_set_tensor_backend(tb.sched, b->get("sqr"), tb.test);
    EXPECT_EQ(run(tb.sched, *b), reference(mul_add_graph));
    EXPECT_EQ(count_fused_steps(tb.sched, "test.mul_add"), 1);
    EXPECT_EQ(c.execute, 1);
    EXPECT_STREQ(b->get("mul")->src[1]->name, "TEST#y#0");
}

} // namespace

int main(int argc, char ** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    ::testing::FLAGS_gtest_death_test_style = "threadsafe";
    return RUN_ALL_TESTS();
}
