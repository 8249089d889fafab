// test-sd-ops.cpp — the sd operator library (src/core): schemas and their validation messages,
// the CPU sd.rope_apply.v1 kernel against a scalar reference and against the native op chain it
// replaces (dit-workloads.md §4.3), the RMSNorm -> Mul -> RoPE fusion (equal to the chain, chosen
// by the scheduler, refused for external uses / outputs, overlap-safe), registration, and the
// attention selection (CPU runs neither Sage nor Sol; the helper picks flash attention).
//
// Compiled with -ffp-contract=off: the scalar references must round like the native ops.

#include "reference-sd/native-rope-chain.h"
#include "reference-sd/sd-ref.h"
#include "support/isa_levels.h"
#include "support/sd-fusion-test.h"
#include "support/test-backend.h"

#include "attention.h"
#include "cpu/cpu_kernels.h"
#include "ggml_extensions.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using sd_fusion_test::cpu_backend;
using sd_fusion_test::expect_bitwise_equal;
using sd_fusion_test::f32_graph;
using sd_fusion_test::get_f32;
using sd_fusion_test::input_values;

// The real CPU device with the sd extensions registered, a 3-thread backend (odd partitions of
// every kernel)
ggml_backend_t cpu() {
    static cpu_backend env(3);
    return env.b;
}

ggml_backend_dev_t cpu_dev() {
    return ggml_backend_get_device(cpu());
}

// A graph of F32 inputs; compute_direct defaults to the shared backend.
struct graph_env : f32_graph {
    void compute_direct(ggml_backend_t backend = nullptr) { f32_graph::compute_direct(backend ? backend : cpu()); }
};

struct rope_case {
    int64_t d, H, L, N, n_freq;
    bool    strided; // x is a view with padded rows/heads/positions
};

const rope_case k_rope_cases[] = {
    {128, 4, 5, 2, 64, false}, {128, 3, 7, 2, 64, true}, {7, 3, 5, 2, 3, true},   {34, 3, 4, 1, 17, false},
    {130, 2, 3, 2, 64, true},  {2, 1, 1, 1, 1, false},   {64, 5, 9, 3, 16, true}, {50, 2, 6, 2, 21, true},
};

std::string case_name(const rope_case & c, int mode) {
    char b[128];
    snprintf(b, sizeof(b), "d=%lld H=%lld L=%lld N=%lld n_freq=%lld %s mode=%d", (long long) c.d, (long long) c.H,
             (long long) c.L, (long long) c.N, (long long) c.n_freq, c.strided ? "strided" : "contiguous", mode);
    return b;
}

// x [d, H, L, N]: the parent itself or a strided view into a larger parent
ggml_tensor * make_x(graph_env & g, const rope_case & c) {
    if (!c.strided) return g.input("x", c.d, c.H, c.L, c.N);
    ggml_tensor * p = g.input("x_parent", c.d + 3, c.H + 1, c.L + 2, c.N);
    return ggml_view_4d(g.ctx, p, c.d, c.H, c.L, c.N, p->nb[1], p->nb[2], p->nb[3], sizeof(float));
}

// strides of x in floats and its base inside the parent's host copy
struct host_x {
    std::vector<float> data;
    int64_t            s1, s2, s3, offset;
};

host_x read_x(const ggml_tensor * x) {
    const ggml_tensor * base = x->view_src ? x->view_src : x;
    host_x              h;
    h.data   = input_values(base);
    h.s1     = (int64_t) (x->nb[1] / sizeof(float));
    h.s2     = (int64_t) (x->nb[2] / sizeof(float));
    h.s3     = (int64_t) (x->nb[3] / sizeof(float));
    h.offset = (int64_t) (x->view_offs / sizeof(float));
    return h;
}

// ---------------------------------------------------------------------------------------------
// RoPE kernel

TEST(RopeApply, kernel_matches_scalar_reference) {
    // at every instruction-set level this CPU can run: each has its own rms_norm / rotation code
    for (const std::string & lv : test_isa::runnable_levels()) {
        test_isa::scoped_cap cap(lv.c_str());
        SCOPED_TRACE("isa " + lv);
        for (const rope_case & c : k_rope_cases) {
            for (int mode = 0; mode < 2; ++mode) {
                SCOPED_TRACE(case_name(c, mode));
                graph_env     g;
                ggml_tensor * x   = make_x(g, c);
                ggml_tensor * pe  = g.input("pe", 2, 2, c.n_freq, c.L);
                ggml_tensor * out = sd_rope_apply(g.ctx, x, pe, mode);
                ASSERT_NE(out, nullptr) << ggml_ext_last_error();
                EXPECT_EQ(out->ne[0], c.d);
                EXPECT_EQ(out->ne[1], c.L);
                EXPECT_EQ(out->ne[2], c.H * c.N);
                g.build({out});
                g.compute_direct();

                host_x             hx = read_x(x);
                std::vector<float> pv = input_values(pe);
                std::vector<float> ref((size_t) ggml_nelements(out));
                sd_ref::rope_apply(hx.data.data() + hx.offset, c.d, c.H, c.L, c.N, hx.s1, hx.s2, hx.s3, pv.data(),
                                   c.n_freq, mode, ref.data());
                expect_bitwise_equal(get_f32(out), ref, "kernel vs reference");
            }
        }
    }
}

TEST(RopeApply, kernel_equals_native_chain) {
    // at every instruction-set level this CPU can run: each has its own rms_norm / rotation code
    for (const std::string & lv : test_isa::runnable_levels()) {
        test_isa::scoped_cap cap(lv.c_str());
        SCOPED_TRACE("isa " + lv);
        for (const rope_case & c : k_rope_cases) {
            for (int mode = 0; mode < 2; ++mode) {
                SCOPED_TRACE(case_name(c, mode));
                graph_env     g;
                ggml_tensor * x     = make_x(g, c);
                ggml_tensor * pe    = g.input("pe", 2, 2, c.n_freq, c.L);
                ggml_tensor * op    = sd_rope_apply(g.ctx, x, pe, mode);
                ggml_tensor * chain = native_rope_chain(g.ctx, x, pe, mode);
                ASSERT_NE(op, nullptr);
                ASSERT_TRUE(ggml_are_same_shape(op, chain));
                g.build({op, chain});
                g.compute_direct();
                expect_bitwise_equal(get_f32(op), get_f32(chain), "custom op vs native chain");
            }
        }
    }
}

TEST(RopeApply, capability_query_includes_the_cpu_kernel) {
    graph_env     g;
    ggml_tensor * op = sd_rope_apply(g.ctx, g.input("x", 8, 2, 3), g.input("pe", 2, 2, 4, 3), 0);
    ASSERT_NE(op, nullptr);
    EXPECT_TRUE(ggml_backend_dev_supports_op(cpu_dev(), op));
    EXPECT_FALSE(ggml_ext_dev_supports_native_op(cpu_dev(), op)); // only the registered kernel runs it
}

TEST(RopeApply, output_overlapping_input_uses_scratch) {
    const rope_case c{16, 3, 5, 2, 8, false};
    for (int mode = 0; mode < 2; ++mode) {
        graph_env     g;
        ggml_tensor * x   = g.input("x", c.d, c.H, c.L, c.N);
        ggml_tensor * pe  = g.input("pe", 2, 2, c.n_freq, c.L);
        ggml_tensor * out = sd_rope_apply(g.ctx, x, pe, mode);
        ASSERT_NE(out, nullptr);
        g.build({out});
        // x and out share storage (as an allocator reusing x for out would place them)
        const size_t          pe_off = 256 * ((ggml_nbytes(x) + 255) / 256);
        ggml_backend_buffer_t buf    = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(),
                                                                      pe_off + ggml_nbytes(pe) + 256);
        char *                base   = (char *) ggml_backend_buffer_get_base(buf);
        ASSERT_EQ(ggml_backend_tensor_alloc(buf, x, base), GGML_STATUS_SUCCESS);
        ASSERT_EQ(ggml_backend_tensor_alloc(buf, pe, base + pe_off), GGML_STATUS_SUCCESS);
        ASSERT_EQ(ggml_backend_tensor_alloc(buf, out, base), GGML_STATUS_SUCCESS);
        g.fill();
        host_x             hx = read_x(x);
        std::vector<float> pv = input_values(pe);
        std::vector<float> ref((size_t) ggml_nelements(out));
        sd_ref::rope_apply(hx.data.data(), c.d, c.H, c.L, c.N, hx.s1, hx.s2, hx.s3, pv.data(), c.n_freq, mode,
                           ref.data());
        ASSERT_EQ(ggml_backend_graph_compute(cpu(), g.gf), GGML_STATUS_SUCCESS);
        expect_bitwise_equal(get_f32(out), ref, "in-place rope vs reference");
        ggml_backend_buffer_free(buf);
    }
}

bool always_abort(void *) {
    return true;
}

TEST(RopeApply, abort_callback_stops_the_kernel) {
    (void) cpu(); // registers the sd extensions (each test may run alone)
    ggml_backend_t b = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(b, 2);
    ggml_backend_cpu_set_abort_callback(b, always_abort, nullptr);
    graph_env     g;
    ggml_tensor * out = sd_rope_apply(g.ctx, g.input("x", 8, 2, 3), g.input("pe", 2, 2, 4, 3), 0);
    g.build({out});
    g.ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    ASSERT_TRUE(ggml_gallocr_alloc_graph(g.ga, g.gf));
    g.fill();
    EXPECT_EQ(ggml_backend_graph_compute(b, g.gf), GGML_STATUS_ABORTED);
    ggml_backend_free(b);
}

// ---------------------------------------------------------------------------------------------
// RMSNorm -> Mul -> RoPE fusion

struct fusion_graph {
    graph_env     g;
    ggml_tensor * x   = nullptr;
    ggml_tensor * w   = nullptr;
    ggml_tensor * pe  = nullptr;
    ggml_tensor * nrm = nullptr;
    ggml_tensor * mul = nullptr;
    ggml_tensor * out = nullptr;

    // native == true: the same chain with the native rope op chain instead of the custom op
    fusion_graph(const rope_case & c, int mode, bool inplace_mul, bool native, float eps = 1e-6f) {
        x   = make_x(g, c);
        w   = g.input("w", c.d);
        pe  = g.input("pe", 2, 2, c.n_freq, c.L);
        nrm = ggml_rms_norm(g.ctx, x, eps);
        mul = inplace_mul ? ggml_mul_inplace(g.ctx, nrm, w) : ggml_mul(g.ctx, nrm, w);
        out = native ? native_rope_chain(g.ctx, mul, pe, mode) : sd_rope_apply(g.ctx, mul, pe, mode);
    }
};

// The scheduler (default: on the shared backend) that knows this rule's 3-node step.
struct sched_run : sd_fusion_test::sched_run {
    explicit sched_run(ggml_backend_t b = nullptr) :
        sd_fusion_test::sched_run(b ? b : cpu(), {SD_CPU_KERNEL_RMS_NORM_MUL_ROPE}, 3) {}
};

std::vector<float> native_chain_result(const rope_case & c, int mode, float eps = 1e-6f) {
    fusion_graph ref(c, mode, false, true, eps);
    ref.g.build({ref.out});
    ref.g.compute_direct();
    return get_f32(ref.out);
}

TEST(RmsNormMulRopeFusion, fusion_selected_and_equals_native_chain) {
    // at every instruction-set level this CPU can run: each has its own rms_norm / rotation code
    for (const std::string & lv : test_isa::runnable_levels()) {
        test_isa::scoped_cap cap(lv.c_str());
        SCOPED_TRACE("isa " + lv);
        const rope_case cases[] = {
            {128, 4, 5, 2, 64, true}, {128, 3, 4, 1, 64, false}, {130, 2, 3, 2, 64, true}, {7, 3, 5, 2, 3, true},
            {50, 2, 6, 2, 21, false},
        };
        for (const rope_case & c : cases) {
            for (int mode = 0; mode < 2; ++mode) {
                for (int inplace = 0; inplace < 2; ++inplace) {
                    SCOPED_TRACE(case_name(c, mode) + (inplace ? " in-place mul" : ""));
                    std::vector<float> want = native_chain_result(c, mode);

                    fusion_graph f(c, mode, inplace, false);
                    ASSERT_NE(f.out, nullptr) << ggml_ext_last_error();
                    f.g.build({f.out});
                    sched_run s;
                    s.compute(f.g);
                    EXPECT_TRUE(s.fused_step()) << "the scheduler did not select the fusion";
                    expect_bitwise_equal(get_f32(f.out), want, "fused vs native chain");

                    // and against the math (double reference), to make sure the chain is what we think
                    host_x             hx = read_x(f.x);
                    std::vector<float> wv = input_values(f.w), pv = input_values(f.pe);
                    std::vector<float> normed((size_t) (c.d * c.H * c.L * c.N));
                    for (int64_t n = 0; n < c.N; ++n)
                        for (int64_t l = 0; l < c.L; ++l)
                            for (int64_t h = 0; h < c.H; ++h) {
                                const float * row = hx.data.data() + hx.offset + h * hx.s1 + l * hx.s2 + n * hx.s3;
                                sd_ref::rms_norm_mul(row, wv.data(), normed.data() + ((n * c.L + l) * c.H + h) * c.d,
                                                     c.d, 1e-6f);
                            }
                    std::vector<float> ref(want.size());
                    sd_ref::rope_apply(normed.data(), c.d, c.H, c.L, c.N, c.d, c.d * c.H, c.d * c.H * c.L, pv.data(),
                                       c.n_freq, mode, ref.data());
                    std::vector<float> got = get_f32(f.out);
                    for (size_t i = 0; i < ref.size(); ++i) {
                        ASSERT_NEAR(got[i], ref[i], 2e-6f * (1.0f + std::fabs(ref[i])) * 8) << "element " << i;
                    }
                }
            }
        }
    }
}

// Fusion disable setting (sd_ggml_set_fusion_enabled / SD_DISABLE_FUSION): while off, the rule
// declines and the same graph runs node by node with the same result; back on, it fuses again.
TEST(RmsNormMulRopeFusion, fusion_disable_setting_is_honored) {
    const rope_case    c{128, 4, 5, 2, 64, true};
    std::vector<float> want = native_chain_result(c, 0);
    ASSERT_TRUE(sd_ggml_fusion_enabled());
    for (bool on : {false, true}) {
        SCOPED_TRACE(on ? "fusion on" : "fusion off");
        sd_ggml_set_fusion_enabled(on);
        fusion_graph f(c, 0, false, false);
        ASSERT_NE(f.out, nullptr) << ggml_ext_last_error();
        f.g.build({f.out});
        sched_run s;
        s.compute(f.g);
        EXPECT_EQ(s.fused_step(), on);
        expect_bitwise_equal(get_f32(f.out), want, "result vs native chain");
    }
    sd_ggml_set_fusion_enabled(true);
}

TEST(RmsNormMulRopeFusion, unfused_direct_compute_equals_native_chain) {
    // direct compute never fuses: RMS_NORM and MUL run natively, the rope node on its kernel
    const rope_case c{128, 3, 5, 2, 64, true};
    for (int mode = 0; mode < 2; ++mode) {
        std::vector<float> want = native_chain_result(c, mode);
        fusion_graph       f(c, mode, false, false);
        f.g.build({f.out});
        f.g.compute_direct();
        expect_bitwise_equal(get_f32(f.out), want, "unfused vs native chain");
    }
}

TEST(RmsNormMulRopeFusion, fusion_rejects_intermediate_with_external_consumer) {
    const rope_case c{32, 2, 3, 1, 16, false};
    for (int which = 0; which < 2; ++which) {
        fusion_graph  f(c, 0, false, false);
        ggml_tensor * other = ggml_scale(f.g.ctx, which == 0 ? f.nrm : f.mul, 2.0f); // a consumer outside the match
        f.g.build({f.out, other});
        sched_run s;
        s.compute(f.g);
        EXPECT_FALSE(s.fused_step()) << "fused although intermediate " << which << " is used outside the match";
        expect_bitwise_equal(get_f32(f.out), native_chain_result(c, 0), "unfused result");
    }
}

TEST(RmsNormMulRopeFusion, fusion_rejects_intermediate_output_flag) {
    const rope_case c{32, 2, 3, 1, 16, false};
    for (int which = 0; which < 2; ++which) {
        fusion_graph f(c, 1, false, false);
        f.g.build({f.out, which == 0 ? f.nrm : f.mul});
        sched_run s;
        s.compute(f.g);
        EXPECT_FALSE(s.fused_step()) << "fused although intermediate " << which << " is a graph output";
        expect_bitwise_equal(get_f32(f.out), native_chain_result(c, 1), "unfused result");
    }
}

TEST(RmsNormMulRopeFusion, fusion_rejects_norm_writing_storage_outside_the_match) {
    // RMS_NORM in place on the graph input: its write lands outside the match, so the central
    // legality checks keep the ops (the fused kernel would not leave that side effect)
    const rope_case c{32, 2, 3, 1, 16, false};
    graph_env       g;
    ggml_tensor *   x   = g.input("x", c.d, c.H, c.L, c.N);
    ggml_tensor *   w   = g.input("w", c.d);
    ggml_tensor *   pe  = g.input("pe", 2, 2, c.n_freq, c.L);
    ggml_tensor *   out = sd_rope_apply(g.ctx, ggml_mul(g.ctx, ggml_rms_norm_inplace(g.ctx, x, 1e-6f), w), pe, 0);
    ASSERT_NE(out, nullptr);
    g.build({out});
    sched_run s;
    s.compute(g);
    EXPECT_FALSE(s.fused_step());
    expect_bitwise_equal(get_f32(out), native_chain_result(c, 0), "unfused result");
}

TEST(RmsNormMulRopeFusion, fusion_rejects_non_vector_weight) {
    const rope_case c{16, 2, 3, 1, 8, false};
    graph_env       g;
    ggml_tensor *   x   = g.input("x", c.d, c.H, c.L, c.N);
    ggml_tensor *   w   = g.input("w2d", c.d, c.H); // broadcast over positions only: not this rule
    ggml_tensor *   pe  = g.input("pe", 2, 2, c.n_freq, c.L);
    ggml_tensor *   out = sd_rope_apply(g.ctx, ggml_mul(g.ctx, ggml_rms_norm(g.ctx, x, 1e-5f), w), pe, 0);
    g.build({out});
    sched_run s;
    s.compute(g);
    EXPECT_FALSE(s.fused_step());
}

TEST(RmsNormMulRopeFusion, fusion_handles_output_overlapping_input) {
    // x and the fused output share storage (pre-allocated that way): the kernel must read every
    // row of x before any output row lands on it, i.e. go through scratch
    const rope_case c{32, 3, 4, 2, 16, false};
    for (int mode = 0; mode < 2; ++mode) {
        std::vector<float> want = native_chain_result(c, mode, 1e-6f);
        fusion_graph       f(c, mode, false, false);
        f.g.build({f.out});
        const size_t          x_bytes = 256 * ((ggml_nbytes(f.x) + 255) / 256);
        ggml_backend_buffer_t buf     = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), x_bytes + 8192);
        char *                base    = (char *) ggml_backend_buffer_get_base(buf);
        ASSERT_EQ(ggml_backend_tensor_alloc(buf, f.x, base), GGML_STATUS_SUCCESS);
        ASSERT_EQ(ggml_backend_tensor_alloc(buf, f.out, base), GGML_STATUS_SUCCESS);
        {
            sched_run s;
            s.compute(f.g);
            ggml_ext_step_info info{};
            EXPECT_TRUE(s.fused_step(&info));
            EXPECT_GE(info.workspace_bytes, ggml_nbytes(f.out)) << "overlap known at prepare: scratch requested";
            expect_bitwise_equal(get_f32(f.out), want, "overlapping fused vs native chain");
        }
        ggml_backend_buffer_free(buf);
    }
}

TEST(RmsNormMulRopeFusion, fusion_runs_on_any_thread_count) {
    const rope_case c{128, 5, 7, 1, 64, true};
    std::vector<float> want = native_chain_result(c, 0);
    for (int nt : {1, 2, 4}) {
        ggml_backend_t b = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(b, nt);
        {
            fusion_graph f(c, 0, true, false);
            f.g.build({f.out});
            sched_run s(b);
            s.compute(f.g);
            EXPECT_TRUE(s.fused_step());
            expect_bitwise_equal(get_f32(f.out), want, "fused with n threads");
        }
        ggml_backend_free(b);
    }
}

// The fused kernel follows the rounding of whichever rms_norm path the backend runs, including
// the portable one forced with ggml_backend_cpu_set_use_ref.
TEST(RmsNormMulRopeFusion, fusion_equals_native_chain_on_portable_kernels) {
    ASSERT_TRUE(sd_ggml_register_extensions());
    ggml_backend_t b = ggml_backend_cpu_init();
    ggml_backend_cpu_set_use_ref(b, true);
    const rope_case cases[] = {
        {128, 5, 7, 1, 64, true}, {128, 4, 5, 2, 64, true}, {130, 2, 3, 2, 64, true}, {1000, 3, 9, 1, 64, true},
    };
    for (const rope_case & c : cases) {
        fusion_graph ref(c, 0, false, true);
        ref.g.build({ref.out});
        sched_run rs(b);
        rs.compute(ref.g);
        const std::vector<float> want = get_f32(ref.out);

        fusion_graph f(c, 0, false, false);
        f.g.build({f.out});
        sched_run s(b);
        s.compute(f.g);
        EXPECT_TRUE(s.fused_step());
        expect_bitwise_equal(get_f32(f.out), want, "fused vs native chain, portable kernels");
    }
    ggml_backend_free(b);
}

// ---------------------------------------------------------------------------------------------
// Malformed constructions: NULL with the reason (naming the operator) in ggml_ext_last_error()

struct malformed : ::testing::Test {
    graph_env g;
    ggml_tensor * f32(int64_t a, int64_t b = 1, int64_t c = 1, int64_t d = 1) {
        return ggml_new_tensor_4d(g.ctx, GGML_TYPE_F32, a, b, c, d);
    }
    ggml_tensor * typed(ggml_type t, int64_t a, int64_t b = 1, int64_t c = 1, int64_t d = 1) {
        return ggml_new_tensor_4d(g.ctx, t, a, b, c, d);
    }
    void expect_rejected(ggml_tensor * t, const char * op, const char * phrase) {
        EXPECT_EQ(t, nullptr);
        const std::string err = ggml_ext_last_error();
        EXPECT_NE(err.find(op), std::string::npos) << err;
        EXPECT_NE(err.find(phrase), std::string::npos) << "message: " << err << "\nexpected: " << phrase;
    }
};

TEST_F(malformed, rope_rejects_wrong_types_shapes_and_layouts) {
    ggml_tensor * x  = f32(16, 2, 5, 1);
    ggml_tensor * pe = f32(2, 2, 8, 5);
    ASSERT_NE(sd_rope_apply(g.ctx, x, pe, 0), nullptr);
    expect_rejected(sd_rope_apply(g.ctx, typed(GGML_TYPE_F16, 16, 2, 5), pe, 0), SD_OP_ROPE_APPLY, "x must be F32");
    expect_rejected(sd_rope_apply(g.ctx, x, typed(GGML_TYPE_F16, 2, 2, 8, 5), 0), SD_OP_ROPE_APPLY, "pe must be F32");
    expect_rejected(sd_rope_apply(g.ctx, x, f32(4, 8, 5), 0), SD_OP_ROPE_APPLY, "pe must be [2, 2, n_freq, L]");
    expect_rejected(sd_rope_apply(g.ctx, x, f32(2, 2, 9, 5), 0), SD_OP_ROPE_APPLY, "n_freq = 9");
    expect_rejected(sd_rope_apply(g.ctx, x, f32(2, 2, 8, 4), 0), SD_OP_ROPE_APPLY, "pe has 4 positions");
    expect_rejected(sd_rope_apply(g.ctx, x, pe, 2), SD_OP_ROPE_APPLY, "mode must be 0");
    ggml_tensor * xt = ggml_permute(g.ctx, f32(2, 16, 5), 1, 0, 2, 3); // [16, 2, 5] with nb0 != 4
    expect_rejected(sd_rope_apply(g.ctx, xt, pe, 0), SD_OP_ROPE_APPLY, "rows must be contiguous");
    ggml_tensor * pe_t = ggml_permute(g.ctx, f32(2, 2, 5, 8), 0, 1, 3, 2);
    expect_rejected(sd_rope_apply(g.ctx, x, pe_t, 0), SD_OP_ROPE_APPLY, "pe must be contiguous");
}

TEST_F(malformed, quantize_rejects_bad_groups_types_and_layouts) {
    ASSERT_NE(ggml_quantize_i8_convrot(g.ctx, f32(256, 3), 256), nullptr);
    expect_rejected(ggml_quantize_i8_convrot(g.ctx, f32(256, 3), 8), SD_OP_QUANTIZE_I8_CONVROT, "group must be a power of 4");
    expect_rejected(ggml_quantize_i8_convrot(g.ctx, f32(256, 3), 512), SD_OP_QUANTIZE_I8_CONVROT, "group must be a power of 4");
    expect_rejected(ggml_quantize_i8_convrot(g.ctx, f32(96, 3), 64), SD_OP_QUANTIZE_I8_CONVROT, "does not divide K");
    expect_rejected(ggml_quantize_i8_convrot(g.ctx, typed(GGML_TYPE_F16, 64, 3), 4), SD_OP_QUANTIZE_I8_CONVROT,
                    "x must be F32");
    ggml_tensor * nc = ggml_transpose(g.ctx, f32(3, 64));
    expect_rejected(ggml_quantize_i8_convrot(g.ctx, nc, 4), SD_OP_QUANTIZE_I8_CONVROT, "x must be contiguous");
}

TEST_F(malformed, quantize_output_has_the_packed_layout) {
    // rows = 5 -> pad4 = 8 quantized rows, then ceil(5*4/64) = 1 row for the scales
    ggml_tensor * q = ggml_quantize_i8_convrot(g.ctx, f32(64, 5), 16);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->type, GGML_TYPE_I8);
    EXPECT_EQ(q->ne[0], 64);
    EXPECT_EQ(q->ne[1], 9);
    ggml_tensor * q2 = ggml_quantize_i8_convrot(g.ctx, f32(4, 3, 2), 4); // rows 6 -> 8 + ceil(24/4) = 14
    ASSERT_NE(q2, nullptr);
    EXPECT_EQ(q2->ne[1], 14);
}

TEST_F(malformed, linear_i8_rejects_bad_weights_scales_and_inputs) {
    const int64_t K = 64, N = 32;
    ggml_tensor * w  = typed(GGML_TYPE_I8, K, N);
    ggml_tensor * ws = f32(N);
    ggml_tensor * b  = f32(N);
    ggml_tensor * x  = f32(K, 5, 2);

    ggml_tensor * y = ggml_mul_mat_i8_tensorwise(g.ctx, w, x, ws, b, 16);
    ASSERT_NE(y, nullptr) << ggml_ext_last_error();
    EXPECT_EQ(y->ne[0], N);
    EXPECT_EQ(y->ne[1], 5);
    EXPECT_EQ(y->ne[2], 2);
    EXPECT_NE(ggml_mul_mat_i8_tensorwise(g.ctx, w, x, f32(1, N), nullptr, 0), nullptr) << "[1, N] scale";
    EXPECT_NE(ggml_mul_mat_i8_tensorwise(g.ctx, w, x, f32(N, 1), nullptr, 0), nullptr) << "[N, 1] scale";

    expect_rejected(ggml_mul_mat_i8_tensorwise(g.ctx, f32(K, N), x, ws, b, 0), SD_OP_LINEAR_I8, "weight must be I8");
    expect_rejected(ggml_mul_mat_i8_tensorwise(g.ctx, w, x, f32(N / 2, 2), b, 0), SD_OP_LINEAR_I8,
                    "weight_scale must have shape [32]");
    expect_rejected(ggml_mul_mat_i8_tensorwise(g.ctx, w, x, f32(N + 1), b, 0), SD_OP_LINEAR_I8,
                    "weight_scale must have shape");
    expect_rejected(ggml_mul_mat_i8_tensorwise(g.ctx, w, x, typed(GGML_TYPE_F16, N), b, 0), SD_OP_LINEAR_I8,
                    "weight_scale must be F32");
    expect_rejected(ggml_mul_mat_i8_tensorwise(g.ctx, w, x, ws, f32(N - 1), 0), SD_OP_LINEAR_I8,
                    "bias must have shape");
    expect_rejected(ggml_mul_mat_i8_tensorwise(g.ctx, w, f32(K + 1, 5), ws, b, 0), SD_OP_LINEAR_I8,
                    "must equal the weight's K");
    expect_rejected(ggml_mul_mat_i8_tensorwise(g.ctx, w, x, ws, b, 8), SD_OP_LINEAR_I8, "ConvRot group must be");
    expect_rejected(ggml_mul_mat_i8_tensorwise(g.ctx, w, typed(GGML_TYPE_F16, K, 5), ws, b, 0), SD_OP_LINEAR_I8,
                    "needs F32 activations");
    expect_rejected(ggml_mul_mat_i8_tensorwise(g.ctx, w, ggml_transpose(g.ctx, f32(5, K)), ws, b, 0), SD_OP_LINEAR_I8,
                    "F32 input must be contiguous");

    // plain I8 activations need one scale per row
    ggml_tensor * xi = typed(GGML_TYPE_I8, K, 5, 2);
    EXPECT_NE(ggml_mul_mat_i8_tensorwise(g.ctx, w, xi, ws, b, 0, f32(10)), nullptr) << ggml_ext_last_error();
    expect_rejected(ggml_mul_mat_i8_tensorwise(g.ctx, w, xi, ws, b, 0), SD_OP_LINEAR_I8, "needs input_scale");
    expect_rejected(ggml_mul_mat_i8_tensorwise(g.ctx, w, xi, ws, b, 0, f32(9)), SD_OP_LINEAR_I8,
                    "input_scale has 9 values");

    // packed ConvRot input: rows come from the quantized tensor; its group must match
    ggml_tensor * packed = ggml_quantize_i8_convrot(g.ctx, x, 16);
    ASSERT_NE(packed, nullptr);
    ggml_tensor * yp = ggml_mul_mat_i8_tensorwise(g.ctx, w, packed, ws, nullptr, 16);
    ASSERT_NE(yp, nullptr) << ggml_ext_last_error();
    EXPECT_EQ(yp->ne[1], 5);
    EXPECT_EQ(yp->ne[2], 2);
    expect_rejected(ggml_mul_mat_i8_tensorwise(g.ctx, w, packed, ws, nullptr, 64), SD_OP_LINEAR_I8,
                    "quantized with group 16");
    expect_rejected(ggml_mul_mat_i8_tensorwise(g.ctx, w, packed, ws, nullptr, 16, f32(10)), SD_OP_LINEAR_I8,
                    "input_scale not allowed");
    // a view of the packed tensor is plain I8 (its scales are not where kind 1 expects them)
    ggml_tensor * view = ggml_view_2d(g.ctx, packed, K, 10, packed->nb[1], 0);
    expect_rejected(ggml_mul_mat_i8_tensorwise(g.ctx, w, view, ws, nullptr, 16), SD_OP_LINEAR_I8, "needs input_scale");
}

TEST_F(malformed, linear_i8_tensorwise_helper_shapes) {
    const int64_t K = 64, N = 32;
    ggml_tensor * w  = typed(GGML_TYPE_I8, K, N);
    ggml_tensor * ws = f32(N);
    ggml_tensor * b  = f32(N);
    // scale != 1: x*scale -> GEMM without bias -> /scale -> + bias
    ggml_tensor * y = ggml_ext_linear_i8_tensorwise(g.ctx, f32(K, 3), w, ws, b, 16, 0.25f);
    ASSERT_NE(y, nullptr) << ggml_ext_last_error();
    EXPECT_EQ(y->op, GGML_OP_ADD);
    EXPECT_EQ(y->src[0]->op, GGML_OP_SCALE);
    ggml_tensor * gemm = y->src[0]->src[0];
    EXPECT_EQ(ggml_ext_get_op(gemm), sd_op_linear_i8());
    EXPECT_EQ(gemm->src[1]->op, GGML_OP_SCALE);
    // scale == 1: the bias goes into the GEMM node
    ggml_tensor * y1 = ggml_ext_linear_i8_tensorwise(g.ctx, f32(K, 3), w, ws, b, 16, 1.0f);
    ASSERT_NE(y1, nullptr);
    EXPECT_EQ(ggml_ext_get_op(y1), sd_op_linear_i8());
    sd_linear_i8_attrs a;
    ggml_ext_get_attrs(y1, &a, sizeof(a));
    EXPECT_EQ(a.flags, SD_LINEAR_I8_HAS_WEIGHT_SCALE | SD_LINEAR_I8_HAS_BIAS);
    EXPECT_EQ(a.input_kind, SD_LINEAR_I8_INPUT_F32);
    EXPECT_EQ(a.group, 16);
    // more than 1024 batch entries: 2-D around the GEMM, 4-D result
    ggml_tensor * yb = ggml_ext_linear_i8_tensorwise(g.ctx, f32(K, 2, 1100), w, ws, b, 0, 1.0f);
    ASSERT_NE(yb, nullptr);
    EXPECT_EQ(yb->ne[0], N);
    EXPECT_EQ(yb->ne[1], 2);
    EXPECT_EQ(yb->ne[2], 1100);
    // packed input with a pre-scale is not possible
    ggml_tensor * packed = ggml_quantize_i8_convrot(g.ctx, f32(K, 3), 16);
    EXPECT_EQ(ggml_ext_linear_i8_tensorwise(g.ctx, packed, w, ws, b, 16, 0.5f), nullptr);
}

TEST_F(malformed, sage_rejects_bad_scale_and_shapes) {
    ggml_tensor * q = f32(64, 10, 8, 1);
    ggml_tensor * k = f32(64, 12, 2, 1);
    ggml_tensor * v = f32(64, 12, 2, 1);
    ggml_tensor * o = ggml_sage_attn(g.ctx, q, k, v, 0.125f, 0);
    ASSERT_NE(o, nullptr);
    EXPECT_EQ(o->ne[0], 64);
    EXPECT_EQ(o->ne[1], 8);
    EXPECT_EQ(o->ne[2], 10);
    expect_rejected(ggml_sage_attn(g.ctx, q, k, v, 0.0f, 0), SD_OP_SAGE_ATTN, "scale must be positive");
    expect_rejected(ggml_sage_attn(g.ctx, q, k, v, INFINITY, 0), SD_OP_SAGE_ATTN, "scale must be positive");
    expect_rejected(ggml_sage_attn(g.ctx, q, k, v, 0.1f, -1), SD_OP_SAGE_ATTN, "mode must be >= 0");
    expect_rejected(ggml_sage_attn(g.ctx, q, k, f32(64, 11, 2, 1), 0.1f, 0), SD_OP_SAGE_ATTN, "same shape");
    expect_rejected(ggml_sage_attn(g.ctx, q, f32(64, 12, 3, 1), f32(64, 12, 3, 1), 0.1f, 0), SD_OP_SAGE_ATTN,
                    "multiple of kv heads");
    expect_rejected(ggml_sage_attn(g.ctx, typed(GGML_TYPE_I8, 64, 10, 8), k, v, 0.1f, 0), SD_OP_SAGE_ATTN,
                    "must be F32, F16 or BF16");
}

TEST_F(malformed, sol_rejects_bad_scale_tau_and_layouts) {
    ggml_tensor * q = f32(128, 10, 3, 2);
    ggml_tensor * k = f32(128, 12, 3, 2);
    ggml_tensor * v = f32(128, 12, 3, 2);
    ggml_tensor * o = ggml_sol_attn(g.ctx, q, k, v, 0.088f, 0.5f);
    ASSERT_NE(o, nullptr);
    EXPECT_EQ(o->ne[0], 128);
    EXPECT_EQ(o->ne[1], 3);
    EXPECT_EQ(o->ne[2], 10);
    EXPECT_EQ(o->ne[3], 2);
    expect_rejected(ggml_sol_attn(g.ctx, q, k, v, -1.0f, 0.5f), SD_OP_SOL_ATTN, "scale must be positive");
    expect_rejected(ggml_sol_attn(g.ctx, q, k, v, NAN, 0.5f), SD_OP_SOL_ATTN, "scale must be positive");
    expect_rejected(ggml_sol_attn(g.ctx, q, k, v, INFINITY, 0.5f), SD_OP_SOL_ATTN, "scale must be positive");
    expect_rejected(ggml_sol_attn(g.ctx, q, k, v, 0.1f, INFINITY), SD_OP_SOL_ATTN, "tau must be finite");
    expect_rejected(ggml_sol_attn(g.ctx, q, k, v, 0.1f, NAN), SD_OP_SOL_ATTN, "tau must be finite");
    ggml_tensor * qp = ggml_permute(g.ctx, f32(128, 3, 10, 2), 0, 2, 1, 3);
    expect_rejected(ggml_sol_attn(g.ctx, qp, k, v, 0.1f, 0.5f), SD_OP_SOL_ATTN, "q must be contiguous");
    expect_rejected(ggml_sol_attn(g.ctx, f32(64, 10, 3, 2), k, v, 0.1f, 0.5f), SD_OP_SOL_ATTN, "head dim must be 128");
    expect_rejected(ggml_sol_attn(g.ctx, typed(GGML_TYPE_F16, 128, 10, 3, 2), k, v, 0.1f, 0.5f), SD_OP_SOL_ATTN,
                    "q must be F32");
    expect_rejected(ggml_sol_attn(g.ctx, q, f32(128, 12, 2, 2), f32(128, 12, 2, 2), 0.1f, 0.5f), SD_OP_SOL_ATTN,
                    "same heads and batch");
}

// ---------------------------------------------------------------------------------------------
// Registration

TEST(Registration, register_extensions_is_idempotent_and_thread_safe) {
    std::atomic<int>         ok{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i) threads.emplace_back([&] { ok += sd_ggml_register_extensions() ? 1 : 0; });
    for (auto & t : threads) t.join();
    EXPECT_EQ(ok.load(), 4);
    EXPECT_TRUE(sd_ggml_register_extensions());
    EXPECT_NE(ggml_ext_find_op(SD_OP_ROPE_APPLY), 0);
    EXPECT_EQ(ggml_ext_find_op(SD_OP_ROPE_APPLY), sd_op_rope_apply());
    EXPECT_EQ(ggml_ext_find_op(SD_OP_SOL_ATTN), sd_op_sol_attn());
    graph_env     g;
    ggml_tensor * op = sd_rope_apply(g.ctx, g.input("x", 8, 2, 3), g.input("pe", 2, 2, 4, 3), 0);
    EXPECT_TRUE(ggml_backend_dev_supports_op(cpu_dev(), op));
}

TEST(Registration, cpu_registrar_checks_the_device_kind) {
    // a GPU-type device: the CPU registrar registers nothing there
    ggml_backend_dev_t gpu = test_backend::new_device(std::set<ggml_op>{GGML_OP_ADD});
    EXPECT_TRUE(sd_register_cpu_extensions(gpu));
    graph_env     g;
    ggml_tensor * op = sd_rope_apply(g.ctx, g.input("x", 8, 2, 3), g.input("pe", 2, 2, 4, 3), 0);
    EXPECT_FALSE(ggml_backend_dev_supports_op(gpu, op));
    // a fresh CPU-type device gets the kernels; a second registration is a duplicate
    ggml_backend_dev_t cpu2 = test_backend::new_cpu_device();
    EXPECT_FALSE(ggml_backend_dev_supports_op(cpu2, op));
    EXPECT_TRUE(sd_register_cpu_extensions(cpu2));
    EXPECT_TRUE(ggml_backend_dev_supports_op(cpu2, op));
    EXPECT_FALSE(sd_register_cpu_extensions(cpu2));
}

TEST(Registration, fusion_rule_claims_no_single_node_support) {
    // the only single-node claim is sd.rope_apply.v1; RMS_NORM and MUL stay native
    graph_env     g;
    ggml_tensor * n = ggml_rms_norm(g.ctx, g.input("x", 8, 2, 3), 1e-5f);
    ggml_tensor * m = ggml_mul(g.ctx, n, g.input("w", 8));
    EXPECT_TRUE(ggml_backend_dev_supports_op(cpu_dev(), n));
    EXPECT_TRUE(ggml_ext_dev_supports_native_op(cpu_dev(), n));
    EXPECT_TRUE(ggml_ext_dev_supports_native_op(cpu_dev(), m));
}

// ---------------------------------------------------------------------------------------------
// Attention selection

struct attn_inputs {
    graph_env     g;
    ggml_tensor * q;
    ggml_tensor * k;
    ggml_tensor * v;
    attn_inputs(int64_t D, int64_t Lq, int64_t Lk, int64_t H, int64_t Hkv, int64_t N) {
        q = g.input("q", D, Lq, H, N);
        k = g.input("k", D, Lk, Hkv, N);
        v = g.input("v", D, Lk, Hkv, N);
    }
};

TEST(Attention, cpu_does_not_advertise_sage_or_sol) {
    attn_inputs   a(128, 6, 7, 2, 2, 1);
    ggml_tensor * sage = ggml_sage_attn(a.g.ctx, a.q, a.k, a.v, 0.1f, 0);
    ggml_tensor * sol  = ggml_sol_attn(a.g.ctx, a.q, a.k, a.v, 0.1f, 0.0f);
    ASSERT_NE(sage, nullptr);
    ASSERT_NE(sol, nullptr);
    EXPECT_FALSE(ggml_backend_dev_supports_op(cpu_dev(), sage));
    EXPECT_FALSE(ggml_backend_dev_supports_op(cpu_dev(), sol));
}

TEST(Attention, helper_picks_flash_attention_when_sage_is_unsupported) {
    const int64_t D = 64, Lq = 9, Lk = 11, H = 4, Hkv = 2, N = 2;
    const float   scale = 1.0f / 8.0f;
    attn_inputs   a(D, Lq, Lk, H, Hkv, N);
    ggml_tensor * o = sd_attention(a.g.ctx, cpu_dev(), a.q, a.k, a.v, scale, true);
    ASSERT_NE(o, nullptr);
    EXPECT_EQ(o->op, GGML_OP_FLASH_ATTN_EXT);
    EXPECT_EQ(ggml_ext_get_op(o), 0);
    a.g.build({o});
    a.g.compute_direct();
    std::vector<float> ref((size_t) ggml_nelements(o));
    std::vector<float> q = input_values(a.q), k = input_values(a.k), v = input_values(a.v);
    sd_ref::sage_attn(q.data(), k.data(), v.data(), D, Lq, Lk, H, Hkv, N, scale, 0, ref.data());
    std::vector<float> got = get_f32(o);
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-4f) << "element " << i;
}

TEST(Attention, helper_uses_mul_mat_softmax_where_flash_is_unsupported) {
    const int64_t D = 32, Lq = 5, Lk = 7, H = 4, Hkv = 2, N = 1;
    const float   scale = 0.2f;
    // a device without FLASH_ATTN_EXT: the helper builds the MUL_MAT/SOFT_MAX form (run on CPU here)
    ggml_backend_dev_t no_flash = test_backend::new_device(
        std::set<ggml_op>{GGML_OP_MUL_MAT, GGML_OP_SOFT_MAX, GGML_OP_CONT, GGML_OP_CPY});
    attn_inputs   a(D, Lq, Lk, H, Hkv, N);
    ggml_tensor * o = sd_attention(a.g.ctx, no_flash, a.q, a.k, a.v, scale, true);
    ASSERT_NE(o, nullptr);
    EXPECT_NE(o->op, GGML_OP_FLASH_ATTN_EXT);
    EXPECT_EQ(o->ne[0], D);
    EXPECT_EQ(o->ne[1], H);
    EXPECT_EQ(o->ne[2], Lq);
    a.g.build({o});
    a.g.compute_direct();
    std::vector<float> ref((size_t) ggml_nelements(o));
    std::vector<float> q = input_values(a.q), k = input_values(a.k), v = input_values(a.v);
    sd_ref::attention(q.data(), k.data(), v.data(), D, Lq, Lk, H, Hkv, N, scale, ref.data());
    std::vector<float> got = get_f32(o);
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-4f) << "element " << i;
}

TEST(Attention, sol_reference_is_dense_attention_in_flash_layout) {
    // the Sol reference (for checking GPU kernels later) agrees with CPU flash attention
    const int64_t L = 6, Lk = 5, heads = 2, batch = 2;
    const float   scale = 0.0883883f;
    attn_inputs   a(128, L, Lk, heads, heads, batch);
    ggml_tensor * o = ggml_flash_attn_ext(a.g.ctx, a.q, a.k, a.v, nullptr, scale, 0.0f, 0.0f);
    ggml_flash_attn_ext_set_prec(o, GGML_PREC_F32);
    a.g.build({o});
    a.g.compute_direct();
    std::vector<float> ref((size_t) ggml_nelements(o));
    std::vector<float> q = input_values(a.q), k = input_values(a.k), v = input_values(a.v);
    sd_ref::sol_attn(q.data(), k.data(), v.data(), L, Lk, heads, batch, scale, 0.25f, ref.data());
    std::vector<float> got = get_f32(o);
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-4f) << "element " << i;
}

TEST(AttentionDeathTest, scheduler_cannot_place_sage_node_and_fails) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    // a custom node never falls back to another algorithm: with no device running it, the
    // scheduler stops with an error instead of computing something else
    EXPECT_DEATH(
        {
            attn_inputs   a(64, 4, 4, 2, 2, 1);
            ggml_tensor * o = ggml_sage_attn(a.g.ctx, a.q, a.k, a.v, 0.125f, 0);
            a.g.build({o});
            sched_run s;
            ggml_backend_sched_alloc_graph(s.sched, a.g.gf);
        },
        "no backend supports node");
}

} // namespace
