// test-sched-plan-hooks.cpp — the backend plan hooks (plan_begin / plan_end / ext_step_end of
// ggml_backend_i) as the scheduler drives them: what plan_begin is told about a split's plan
// (steps, kernels, registration flags, workspace, identity), a REPLAYED answer, and the cases
// that keep ordinary fragment execution (evaluation callbacks, pipeline copies, direct backend
// graph calls). Part of the test-sched binary; the TEST device records the hook calls.

#include "support/test-backend.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr int64_t N = 64;

// ---------------------------------------------------------------------------------------------
// Toy extension kernels on the TEST device: elementwise MUL and ADD of same-shape F32 tensors
// (TEST buffers are host memory, so they compute directly)

struct kernel_calls {
    int    executes  = 0;
    size_t workspace = 0; // what prepare asks for
};

bool same_shape_f32(const ggml_tensor * n) {
    return n->type == GGML_TYPE_F32 && ggml_is_contiguous(n) && n->src[0] && n->src[1] &&
           n->src[0]->type == GGML_TYPE_F32 && n->src[1]->type == GGML_TYPE_F32 && ggml_is_contiguous(n->src[0]) &&
           ggml_is_contiguous(n->src[1]) && ggml_are_same_shape(n, n->src[0]) && ggml_are_same_shape(n, n->src[1]);
}

bool binary_supports(ggml_backend_dev_t, const ggml_tensor * n, void *) {
    return same_shape_f32(n);
}

ggml_status binary_prepare(ggml_backend_dev_t, const ggml_ext_nodes *, void ** state, size_t * ws, void * ud) {
    *state = nullptr;
    *ws    = static_cast<kernel_calls *>(ud)->workspace;
    return GGML_STATUS_SUCCESS;
}

ggml_status binary_execute(ggml_backend_t, const ggml_ext_nodes * nodes, void *, void *, size_t, void * ud) {
    static_cast<kernel_calls *>(ud)->executes++;
    const ggml_tensor * n = nodes->nodes[0];
    const float *       a = (const float *) n->src[0]->data;
    const float *       b = (const float *) n->src[1]->data;
    float *             y = (float *) n->data;
    for (int64_t i = 0; i < ggml_nelements(n); i++) {
        y[i] = n->op == GGML_OP_MUL ? a[i] * b[i] : a[i] + b[i];
    }
    return GGML_STATUS_SUCCESS;
}

void register_binary(ggml_backend_dev_t dev, const char * name, ggml_op op, uint32_t flags, kernel_calls * calls) {
    ggml_ext_kernel_desc d = {};
    d.name                 = name;
    d.op                   = op;
    d.supports             = binary_supports;
    d.prepare              = binary_prepare;
    d.execute              = binary_execute;
    d.user_data            = calls;
    ASSERT_TRUE(ggml_ext_register_kernel_ex(dev, &d, flags)) << ggml_ext_last_error();
}

// ---------------------------------------------------------------------------------------------
// out = (sqr(x) * y + z) / 4: sqr and scale native, mul and add through the kernels above

float input_value(int which, int64_t i) {
    return 0.01f * (float) ((i * 7 + which * 13) % 23) - 0.1f;
}

struct graph_fixture {
    ggml_context * ctx = nullptr;
    ggml_cgraph *  gf  = nullptr;
    ggml_tensor *  in[3] = {};
    ggml_tensor *  out   = nullptr;

    graph_fixture() {
        ctx = ggml_init({ ggml_tensor_overhead() * 32 + ggml_graph_overhead(), nullptr, true });
        const char * names[3] = { "x", "y", "z" };
        for (int k = 0; k < 3; k++) {
            in[k] = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, N);
            ggml_set_name(in[k], names[k]);
            ggml_set_input(in[k]);
        }
        ggml_tensor * s = ggml_sqr(ctx, in[0]);
        ggml_tensor * m = ggml_mul(ctx, s, in[1]);
        ggml_tensor * a = ggml_add(ctx, m, in[2]);
        out             = ggml_scale(ctx, a, 0.25f);
        ggml_set_output(out);
        gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
    }
    ~graph_fixture() { ggml_free(ctx); }

    void fill_inputs() {
        for (int k = 0; k < 3; k++) {
            std::vector<float> v(N);
            for (int64_t i = 0; i < N; i++) v[i] = input_value(k, i);
            ggml_backend_tensor_set(in[k], v.data(), 0, sizeof(float) * N);
        }
    }

    void expect_result() {
        std::vector<float> y(N);
        ggml_backend_tensor_get(out, y.data(), 0, sizeof(float) * N);
        for (int64_t i = 0; i < N; i++) {
            const float x = input_value(0, i);
            EXPECT_FLOAT_EQ(y[i], (x * x * input_value(1, i) + input_value(2, i)) * 0.25f) << "element " << i;
        }
    }
};

// A TEST backend (native SQR, MUL, ADD, SCALE; recording plan hooks) and the CPU.
struct hooked_backends {
    ggml_backend_dev_t   dev;
    ggml_backend_t       test;
    ggml_backend_t       cpu;
    ggml_backend_sched_t sched = nullptr;

    explicit hooked_backends(bool parallel = false, bool replay = false) {
        dev  = test_backend::new_device({ GGML_OP_SQR, GGML_OP_MUL, GGML_OP_ADD, GGML_OP_SCALE });
        test = test_backend::init(dev);
        test_backend::enable_plan_hooks(test, replay);
        cpu                        = ggml_backend_cpu_init();
        ggml_backend_t backends[2] = { test, cpu };
        sched = ggml_backend_sched_new(backends, nullptr, 2, 256, parallel, false);
    }
    ~hooked_backends() {
        ggml_backend_sched_free(sched);
        ggml_backend_free(test);
        ggml_backend_free(cpu);
    }
    test_backend::stats & stats() const { return test_backend::get_stats(test); }

    // Every node on TEST; allocates, fills the inputs and computes.
    ggml_status run(graph_fixture & g) {
        for (int i = 0; i < ggml_graph_n_nodes(g.gf); i++) {
            ggml_backend_sched_set_tensor_backend(sched, ggml_graph_node(g.gf, i), test);
        }
        EXPECT_TRUE(ggml_backend_sched_alloc_graph(sched, g.gf));
        g.fill_inputs();
        return ggml_backend_sched_graph_compute(sched, g.gf);
    }
};

int count_calls(const test_backend::stats & st, const char * what) {
    return (int) std::count(st.calls.begin(), st.calls.end(), std::string(what));
}

// ---------------------------------------------------------------------------------------------

TEST(PlanHooks, scheduled_plan_is_bracketed_by_plan_begin_and_plan_end) {
    hooked_backends hb;
    kernel_calls    mul, add;
    register_binary(hb.dev, "hooks.mul", GGML_OP_MUL, GGML_EXT_KERNEL_CAPTURE_SAFE, &mul);
    register_binary(hb.dev, "hooks.add", GGML_OP_ADD, GGML_EXT_KERNEL_CAPTURE_SAFE, &add);
    graph_fixture g;
    ASSERT_EQ(hb.run(g), GGML_STATUS_SUCCESS);
    g.expect_result();
    g.fill_inputs();
    ASSERT_EQ(ggml_backend_sched_graph_compute(hb.sched, g.gf), GGML_STATUS_SUCCESS);
    g.expect_result();

    // once per split and compute: begin, the plan's fragments and extension steps, end
    const std::vector<std::string> one = { "begin", "graph", "ext_step_end", "ext_step_end", "graph", "end" };
    std::vector<std::string>       two = one;
    two.insert(two.end(), one.begin(), one.end());
    EXPECT_EQ(hb.stats().calls, two);
    EXPECT_EQ(hb.stats().plans.size(), 2u);
    EXPECT_EQ(mul.executes, 2);
    EXPECT_EQ(add.executes, 2);
}

TEST(PlanHooks, plan_begin_receives_the_steps_with_kernels_and_registration_flags) {
    hooked_backends hb;
    kernel_calls    mul, add;
    add.workspace = 256;
    register_binary(hb.dev, "hooks.mul", GGML_OP_MUL,
                    GGML_EXT_KERNEL_CAPTURE_SAFE | GGML_EXT_KERNEL_REPLAY_REUSABLE, &mul);
    register_binary(hb.dev, "hooks.add", GGML_OP_ADD, GGML_EXT_KERNEL_CAPTURE_SAFE, &add);
    graph_fixture g;
    ASSERT_EQ(hb.run(g), GGML_STATUS_SUCCESS);
    g.expect_result();

    ASSERT_EQ(hb.stats().plans.size(), 1u);
    const test_backend::plan_record & p = hb.stats().plans[0];
    EXPECT_EQ(p.i_start, 0);
    EXPECT_EQ(p.i_end, 4);
    ASSERT_EQ(p.steps.size(), 4u); // sqr | mul | add | scale
    EXPECT_EQ(p.steps[0].kernel, "");
    EXPECT_EQ(p.steps[0].first, 0);
    EXPECT_EQ(p.steps[1].kernel, "hooks.mul");
    EXPECT_EQ(p.steps[1].first, 1);
    EXPECT_EQ(p.steps[1].n_nodes, 1);
    EXPECT_EQ(p.steps[1].flags, (uint32_t) (GGML_EXT_KERNEL_CAPTURE_SAFE | GGML_EXT_KERNEL_REPLAY_REUSABLE));
    EXPECT_EQ(p.steps[1].workspace, 0u);
    EXPECT_EQ(p.steps[2].kernel, "hooks.add");
    EXPECT_EQ(p.steps[2].flags, (uint32_t) GGML_EXT_KERNEL_CAPTURE_SAFE);
    EXPECT_EQ(p.steps[2].workspace, 256u);
    EXPECT_EQ(p.steps[3].kernel, "");
    EXPECT_EQ(p.steps[3].first, 3);
    EXPECT_EQ(p.n_ext_steps, 2);
    EXPECT_TRUE(p.has_workspace);
    EXPECT_GE(p.workspace_bytes, 256u);
    EXPECT_NE(p.identity, nullptr);
    EXPECT_TRUE(p.all_capture_safe);
    EXPECT_FALSE(p.all_replay_reusable); // hooks.add did not opt in to reuse across rebuilds
}

TEST(PlanHooks, capture_safe_plan_when_every_extension_opts_in) {
    hooked_backends hb;
    kernel_calls    mul, add;
    const uint32_t  reusable = GGML_EXT_KERNEL_CAPTURE_SAFE | GGML_EXT_KERNEL_REPLAY_REUSABLE;
    register_binary(hb.dev, "hooks.mul", GGML_OP_MUL, reusable, &mul);
    register_binary(hb.dev, "hooks.add", GGML_OP_ADD, reusable, &add);
    graph_fixture g;
    ASSERT_EQ(hb.run(g), GGML_STATUS_SUCCESS);
    ASSERT_EQ(hb.stats().plans.size(), 1u);
    EXPECT_TRUE(hb.stats().plans[0].all_capture_safe);
    EXPECT_TRUE(hb.stats().plans[0].all_replay_reusable);
    EXPECT_FALSE(hb.stats().plans[0].has_workspace); // no step asked for one
}

TEST(PlanHooks, mixed_plans_containing_an_extension_without_the_flag_retain_ordinary_dispatch) {
    hooked_backends hb;
    kernel_calls    mul, add;
    register_binary(hb.dev, "hooks.mul", GGML_OP_MUL, GGML_EXT_KERNEL_CAPTURE_SAFE, &mul);
    register_binary(hb.dev, "hooks.add", GGML_OP_ADD, 0, &add); // the original registration behaviour
    graph_fixture g;
    ASSERT_EQ(hb.run(g), GGML_STATUS_SUCCESS);
    g.expect_result();
    ASSERT_EQ(hb.stats().plans.size(), 1u);
    EXPECT_FALSE(hb.stats().plans[0].all_capture_safe);
    EXPECT_FALSE(hb.stats().plans[0].all_replay_reusable);
    EXPECT_EQ(hb.stats().plans[0].steps[2].flags, 0u);
}

TEST(PlanHooks, native_only_plan_has_no_extension_steps) {
    hooked_backends hb; // no kernels registered
    graph_fixture   g;
    ASSERT_EQ(hb.run(g), GGML_STATUS_SUCCESS);
    g.expect_result();
    ASSERT_EQ(hb.stats().plans.size(), 1u);
    const test_backend::plan_record & p = hb.stats().plans[0];
    EXPECT_EQ(p.n_ext_steps, 0);
    ASSERT_EQ(p.steps.size(), 1u);
    EXPECT_EQ(p.steps[0].n_nodes, 4);
    EXPECT_EQ(hb.stats().calls, (std::vector<std::string>{ "begin", "graph", "end" }));
}

TEST(PlanHooks, replayed_plan_skips_execution_and_plan_end_is_still_called) {
    hooked_backends hb(/*parallel=*/false, /*replay=*/true);
    kernel_calls    mul, add;
    register_binary(hb.dev, "hooks.mul", GGML_OP_MUL, GGML_EXT_KERNEL_CAPTURE_SAFE, &mul);
    register_binary(hb.dev, "hooks.add", GGML_OP_ADD, GGML_EXT_KERNEL_CAPTURE_SAFE, &add);
    graph_fixture g;
    ASSERT_EQ(hb.run(g), GGML_STATUS_SUCCESS);
    // the backend said it launched the work itself: no native node, no extension step ran here
    EXPECT_EQ(hb.stats().calls, (std::vector<std::string>{ "begin", "end" }));
    EXPECT_EQ(hb.stats().nodes_computed, 0);
    EXPECT_EQ(mul.executes, 0);
    EXPECT_EQ(add.executes, 0);
}

TEST(PlanHooks, plan_identity_changes_when_the_scheduler_rebuilds_its_plan) {
    hooked_backends hb;
    kernel_calls    mul, add;
    register_binary(hb.dev, "hooks.mul", GGML_OP_MUL, GGML_EXT_KERNEL_CAPTURE_SAFE, &mul);
    register_binary(hb.dev, "hooks.add", GGML_OP_ADD, GGML_EXT_KERNEL_CAPTURE_SAFE, &add);
    {
        graph_fixture g;
        ASSERT_EQ(hb.run(g), GGML_STATUS_SUCCESS);
        ASSERT_EQ(ggml_backend_sched_graph_compute(hb.sched, g.gf), GGML_STATUS_SUCCESS);
    }
    ggml_backend_sched_reset(hb.sched);
    {
        graph_fixture g; // the same structure, a rebuilt plan
        ASSERT_EQ(hb.run(g), GGML_STATUS_SUCCESS);
        g.expect_result();
    }
    const std::vector<test_backend::plan_record> & plans = hb.stats().plans;
    ASSERT_EQ(plans.size(), 3u);
    EXPECT_EQ(plans[0].identity, plans[1].identity); // the same plan computed twice
    EXPECT_NE(plans[1].identity, plans[2].identity); // rebuilt after the reset
    EXPECT_NE(plans[2].identity, nullptr);
}

TEST(PlanHooks, evaluation_callbacks_retain_their_previous_behavior) {
    hooked_backends hb;
    kernel_calls    mul, add;
    register_binary(hb.dev, "hooks.mul", GGML_OP_MUL, GGML_EXT_KERNEL_CAPTURE_SAFE, &mul);
    register_binary(hb.dev, "hooks.add", GGML_OP_ADD, GGML_EXT_KERNEL_CAPTURE_SAFE, &add);
    int observed = 0;
    ggml_backend_sched_set_eval_callback(
        hb.sched,
        [](ggml_tensor *, bool ask, void * ud) {
            if (!ask) ++*static_cast<int *>(ud);
            return true;
        },
        &observed);
    graph_fixture g;
    ASSERT_EQ(hb.run(g), GGML_STATUS_SUCCESS);
    g.expect_result();
    EXPECT_GT(observed, 0);
    EXPECT_EQ(count_calls(hb.stats(), "begin"), 0);
    EXPECT_EQ(count_calls(hb.stats(), "end"), 0);
    // fragment execution: every extension step is still completed on its own
    EXPECT_EQ(count_calls(hb.stats(), "ext_step_end"), 2);
}

TEST(PlanHooks, multiple_pipeline_copies_retain_their_previous_behavior) {
    hooked_backends hb(/*parallel=*/true);
    ASSERT_GT(ggml_backend_sched_get_n_copies(hb.sched), 1);
    kernel_calls mul, add;
    register_binary(hb.dev, "hooks.mul", GGML_OP_MUL, GGML_EXT_KERNEL_CAPTURE_SAFE, &mul);
    register_binary(hb.dev, "hooks.add", GGML_OP_ADD, GGML_EXT_KERNEL_CAPTURE_SAFE, &add);
    graph_fixture g;
    ASSERT_EQ(hb.run(g), GGML_STATUS_SUCCESS);
    g.expect_result();
    EXPECT_EQ(count_calls(hb.stats(), "begin"), 0);
    EXPECT_EQ(count_calls(hb.stats(), "end"), 0);
    EXPECT_EQ(count_calls(hb.stats(), "ext_step_end"), 2);
}

TEST(PlanHooks, direct_backend_graph_calls_retain_their_previous_behavior) {
    ggml_backend_dev_t dev  = test_backend::new_device({ GGML_OP_SQR, GGML_OP_MUL, GGML_OP_ADD, GGML_OP_SCALE });
    ggml_backend_t     test = test_backend::init(dev);
    test_backend::enable_plan_hooks(test);
    kernel_calls mul, add;
    register_binary(dev, "hooks.mul", GGML_OP_MUL, GGML_EXT_KERNEL_CAPTURE_SAFE, &mul);
    register_binary(dev, "hooks.add", GGML_OP_ADD, GGML_EXT_KERNEL_CAPTURE_SAFE, &add);
    {
        graph_fixture  g;
        ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_dev_buffer_type(dev));
        ASSERT_TRUE(ggml_gallocr_alloc_graph(ga, g.gf));
        g.fill_inputs();
        EXPECT_EQ(ggml_backend_graph_compute(test, g.gf), GGML_STATUS_SUCCESS);
        g.expect_result();
        ggml_gallocr_free(ga);
    }
    const test_backend::stats & st = test_backend::get_stats(test);
    EXPECT_EQ(count_calls(st, "begin"), 0);
    EXPECT_EQ(count_calls(st, "end"), 0);
    EXPECT_EQ(count_calls(st, "ext_step_end"), 2); // each extension step completes on its own
    EXPECT_EQ(mul.executes, 1);
    EXPECT_EQ(add.executes, 1);
    ggml_backend_free(test);
}

} // namespace
