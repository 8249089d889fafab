// Upstream ggml API that stable-diffusion-class clients call outside of single ops: timers,
// host-tensor element helpers (ggml-cpu.h), ggml_graph_compute_with_ctx on context-allocated
// tensors (a small UNet-like chain), CPU feature queries, ggml_backend_load_all, op names.

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct ctx_guard {
    ggml_context * ctx;
    explicit ctx_guard(size_t mem) {
        ggml_init_params p = {mem, nullptr, false};
        ctx                = ggml_init(p);
    }
    ~ctx_guard() { ggml_free(ctx); }
};

TEST(ClientApi, TimersAreMonotonicAndConsistent) {
    ggml_time_init();
    const int64_t us0 = ggml_time_us();
    const int64_t ms0 = ggml_time_ms();
    const int64_t us1 = ggml_time_us();
    EXPECT_GE(us1, us0);
    EXPECT_GE(ms0, us0 / 1000 - 1); // same clock, coarser unit
    EXPECT_LE(ms0, us1 / 1000 + 1);
    EXPECT_GT(ggml_cycles_per_ms(), 0);
}

TEST(ClientApi, ElementHelpersFollowStrides) {
    ctx_guard     g(1 << 20);
    ggml_tensor * t = ggml_new_tensor_4d(g.ctx, GGML_TYPE_F32, 5, 4, 3, 2);
    ggml_set_f32(t, 1.5f);
    for (int i = 0; i < ggml_nelements(t); i++) ASSERT_EQ(ggml_get_f32_1d(t, i), 1.5f);
    ggml_set_f32_nd(t, 4, 3, 2, 1, -7.0f);
    EXPECT_EQ(ggml_get_f32_nd(t, 4, 3, 2, 1), -7.0f);
    EXPECT_EQ(ggml_get_f32_1d(t, (int) ggml_nelements(t) - 1), -7.0f); // last element in memory

    // a transposed view: nd indices are logical, so they follow the swapped strides
    ggml_tensor * tv = ggml_transpose(g.ctx, t);
    ggml_set_f32_nd(tv, 2, 1, 0, 0, 9.0f); // = t[1, 2, 0, 0]
    EXPECT_EQ(ggml_get_f32_nd(t, 1, 2, 0, 0), 9.0f);

    ggml_tensor * h = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F16, 3, 2);
    ggml_set_f32(h, 0.333333f);
    EXPECT_EQ(ggml_get_f32_nd(h, 2, 1, 0, 0), ggml_fp16_to_fp32(ggml_fp32_to_fp16(0.333333f)));

    ggml_tensor * it = ggml_new_tensor_2d(g.ctx, GGML_TYPE_I32, 4, 3);
    ggml_set_i32(it, 42);
    ggml_set_i32_nd(it, 3, 2, 0, 0, -5);
    EXPECT_EQ(ggml_get_i32_nd(it, 0, 0, 0, 0), 42);
    EXPECT_EQ(ggml_get_i32_nd(it, 3, 2, 0, 0), -5);
    EXPECT_EQ(ggml_get_i32_1d(it, 11), -5);
}

// conv_2d (upstream composition) -> group_norm -> upscale nearest -> conv_2d_direct, in a
// context-allocated graph: the composition and the primitive must agree, and nearest upscale
// must copy exactly.
TEST(ClientApi, GraphComputeWithCtxRunsAnImageChain) {
    ctx_guard     g(64 << 20);
    ggml_tensor * x  = ggml_new_tensor_4d(g.ctx, GGML_TYPE_F32, 9, 7, 8, 1);
    ggml_tensor * k1 = ggml_new_tensor_4d(g.ctx, GGML_TYPE_F32, 3, 3, 8, 8);
    for (int i = 0; i < ggml_nelements(x); i++) ggml_set_f32_1d(x, i, std::sin(0.37f * (float) i));
    for (int i = 0; i < ggml_nelements(k1); i++) ggml_set_f32_1d(k1, i, std::cos(0.11f * (float) i) * 0.2f);

    ggml_tensor * c_mm  = ggml_conv_2d(g.ctx, k1, x, 1, 1, 1, 1, 1, 1);
    ggml_tensor * c_dir = ggml_conv_2d_direct(g.ctx, k1, x, 1, 1, 1, 1, 1, 1);
    ggml_tensor * gn    = ggml_group_norm(g.ctx, c_mm, 4, 1e-6f);
    ggml_tensor * up    = ggml_upscale(g.ctx, gn, 2, GGML_SCALE_MODE_NEAREST);
    ggml_cgraph * gf    = ggml_new_graph(g.ctx);
    ggml_build_forward_expand(gf, c_dir);
    ggml_build_forward_expand(gf, up);
    ASSERT_EQ(ggml_graph_compute_with_ctx(g.ctx, gf, 2), GGML_STATUS_SUCCESS);

    ASSERT_EQ(c_mm->ne[0], 9);
    ASSERT_EQ(c_mm->ne[2], 8);
    double max_err = 0;
    for (int i = 0; i < ggml_nelements(c_mm); i++) {
        max_err = std::fmax(max_err, std::fabs(ggml_get_f32_1d(c_mm, i) - ggml_get_f32_1d(c_dir, i)));
    }
    EXPECT_LT(max_err, 1e-4);
    ASSERT_EQ(up->ne[0], 18);
    ASSERT_EQ(up->ne[1], 14);
    for (int c = 0; c < 8; c++)
        for (int y = 0; y < 14; y++)
            for (int xx = 0; xx < 18; xx++) {
                ASSERT_EQ(ggml_get_f32_nd(up, xx, y, c, 0), ggml_get_f32_nd(gn, xx / 2, y / 2, c, 0));
            }
    // group_norm output: zero mean per group of 2 channels
    for (int grp = 0; grp < 4; grp++) {
        double s = 0;
        for (int c = 2 * grp; c < 2 * grp + 2; c++)
            for (int y = 0; y < 7; y++)
                for (int xx = 0; xx < 9; xx++) s += ggml_get_f32_nd(gn, xx, y, c, 0);
        EXPECT_NEAR(s / (2 * 7 * 9), 0.0, 1e-5);
    }
}

TEST(ClientApi, CpuFeatureQueriesAreConsistent) {
    if (ggml_cpu_has_avx512()) {
        EXPECT_EQ(ggml_cpu_has_avx2(), 1);
        EXPECT_EQ(ggml_cpu_has_avx(), 1);
        EXPECT_EQ(ggml_cpu_has_fma(), 1);
    }
    if (ggml_cpu_has_avx2()) {
        EXPECT_EQ(ggml_cpu_has_avx(), 1);
    }
    if (ggml_cpu_has_avx()) {
        EXPECT_EQ(ggml_cpu_has_sse3(), 1);
    }
#if defined(__x86_64__)
    EXPECT_EQ(ggml_cpu_has_neon(), 0);
    EXPECT_EQ(ggml_cpu_has_sve(), 0);
#endif
}

#if defined(__x86_64__) && defined(__linux__)
// The feature queries come from CPUID (cpu-features.cpp), not from the compiler's
// __builtin_cpu_supports (clang 14 does not know every feature name); the kernel's view of the
// same CPU is /proc/cpuinfo's flags line.
TEST(ClientApi, CpuFeatureQueriesMatchProcCpuinfo) {
    std::ifstream in("/proc/cpuinfo");
    std::string   line;
    std::set<std::string> flags;
    while (std::getline(in, line)) {
        if (line.rfind("flags", 0) != 0) continue;
        std::istringstream words(line.substr(line.find(':') + 1));
        for (std::string w; words >> w;) flags.insert(w);
        break;
    }
    if (flags.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
    const struct {
        const char * flag;
        int (*query)(void);
    } pairs[] = {
        {"pni", ggml_cpu_has_sse3},           {"ssse3", ggml_cpu_has_ssse3}, {"avx", ggml_cpu_has_avx},
        {"avx2", ggml_cpu_has_avx2},          {"fma", ggml_cpu_has_fma},     {"f16c", ggml_cpu_has_f16c},
        {"bmi2", ggml_cpu_has_bmi2},          {"avx_vnni", ggml_cpu_has_avx_vnni},
        {"avx512f", ggml_cpu_has_avx512},     {"avx512vbmi", ggml_cpu_has_avx512_vbmi},
        {"avx512_vnni", ggml_cpu_has_avx512_vnni}, {"avx512_bf16", ggml_cpu_has_avx512_bf16},
    };
    for (const auto & p : pairs) EXPECT_EQ(p.query(), flags.count(p.flag) ? 1 : 0) << p.flag;
}
#endif

TEST(ClientApi, LoadAllKeepsTheBuiltInRegistry) {
    ggml_backend_load_all();
    ggml_backend_load_all_from_path("/nonexistent");
    ASSERT_GE(ggml_backend_reg_count(), 1u);
    EXPECT_NE(ggml_backend_reg_by_name("CPU"), nullptr);
}

TEST(ClientApi, NewOpsHaveUpstreamNames) {
    EXPECT_STREQ(ggml_op_name(GGML_OP_IM2COL), "IM2COL");
    EXPECT_STREQ(ggml_op_name(GGML_OP_CONV_2D), "CONV_2D");
    EXPECT_STREQ(ggml_op_name(GGML_OP_UPSCALE), "UPSCALE");
    EXPECT_STREQ(ggml_op_name(GGML_OP_GROUP_NORM), "GROUP_NORM");
    EXPECT_STREQ(ggml_op_name(GGML_OP_MUL_MAT_ID), "MUL_MAT_ID");
    EXPECT_STREQ(ggml_op_name(GGML_OP_MAP_CUSTOM3), "MAP_CUSTOM3");
    // every op has a name and a symbol
    for (int op = 0; op < GGML_OP_COUNT; op++) {
        EXPECT_STRNE(ggml_op_name((ggml_op) op), "UNKNOWN");
        EXPECT_NE(ggml_op_symbol((ggml_op) op), nullptr);
    }
}

// op_params layouts that clients read back (upstream's slots)
TEST(ClientApi, OpParamsLayouts) {
    ctx_guard     g(1 << 20);
    ggml_tensor * k = ggml_new_tensor_4d(g.ctx, GGML_TYPE_F16, 3, 3, 4, 5);
    ggml_tensor * x = ggml_new_tensor_4d(g.ctx, GGML_TYPE_F32, 10, 9, 4, 2);
    ggml_tensor * ic = ggml_im2col(g.ctx, k, x, 2, 1, 1, 0, 1, 2, true, GGML_TYPE_F16);
    const int32_t want[7] = {2, 1, 1, 0, 1, 2, 1};
    EXPECT_EQ(memcmp(ic->op_params, want, sizeof(want)), 0);
    EXPECT_EQ(ic->src[0], k);
    EXPECT_EQ(ic->src[1], x);
    EXPECT_EQ(ic->type, GGML_TYPE_F16);

    ggml_tensor * up = ggml_interpolate(g.ctx, x, 20, 18, 4, 2, GGML_SCALE_MODE_BILINEAR | GGML_SCALE_FLAG_ALIGN_CORNERS);
    EXPECT_EQ(up->op_params[0], 1 | (1 << 8));

    ggml_tensor * gn = ggml_group_norm(g.ctx, x, 32, 1e-6f);
    float eps;
    memcpy(&eps, &gn->op_params[1], sizeof(eps));
    EXPECT_EQ(gn->op_params[0], 32);
    EXPECT_EQ(eps, 1e-6f);

    ggml_tensor * p2 = ggml_pool_2d(g.ctx, x, GGML_OP_POOL_AVG, 3, 2, 2, 1, 1.0f, 0.0f);
    const int32_t want_p2[7] = {GGML_OP_POOL_AVG, 3, 2, 2, 1, 1, 0};
    EXPECT_EQ(memcmp(p2->op_params, want_p2, sizeof(want_p2)), 0);

    ggml_tensor * pc = ggml_pad_ext_circular(g.ctx, x, 1, 2, 0, 0, 0, 0, 0, 0);
    EXPECT_EQ(pc->op, GGML_OP_PAD);
    EXPECT_EQ(pc->op_params[8], 1);

    ggml_tensor * cl = ggml_clamp(g.ctx, x, -1.0f, 1.0f);
    EXPECT_EQ(cl->view_src, x); // in place, as upstream
}

} // namespace
