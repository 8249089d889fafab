// Kernel choice per op family (kernel-choice.h, ggml-cpu.h): the override really switches the
// kernel a node runs (reported and observable in the bits), GGML_PREC_F32 keeps flash attention on
// F32 products whatever is forced, and a spec the library does not understand changes nothing.
// The numerical checks of every kernel are in test-backend-ops (each case forced to each kernel).

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "support/isa_levels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

// Restores the environment's (or the table's) choice after each test.
class KernelChoice : public ::testing::Test {
  protected:
    void TearDown() override {
        if (!ggml_cpu_set_kernel_override(getenv("GGML_CPU_KERNEL"))) ggml_cpu_set_kernel_override(nullptr);
    }
};

std::vector<std::string> runnable_kernels() {
    std::vector<std::string> ks;
    if (ggml_cpu_has_avx512()) ks.push_back("f32fma");
    if (ggml_cpu_has_avx512_bf16()) ks.push_back("bf16dot");
    return ks;
}

// One op graph with seeded inputs on the CPU backend.
struct one_op {
    ggml_context *             ctx = nullptr;
    ggml_backend_t             be  = nullptr;
    ggml_backend_buffer_t      buf = nullptr;
    ggml_cgraph *              gf  = nullptr;
    ggml_tensor *              out = nullptr;
    std::vector<ggml_tensor *> inputs;

    one_op() {
        ctx = ggml_init({64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true});
        be  = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(be, 2);
    }
    ~one_op() {
        if (buf) ggml_backend_buffer_free(buf);
        ggml_backend_free(be);
        ggml_free(ctx);
    }
    ggml_tensor * in(ggml_type t, int64_t n0, int64_t n1, int64_t n2 = 1) {
        ggml_tensor * x = ggml_new_tensor_3d(ctx, t, n0, n1, n2);
        inputs.push_back(x);
        return x;
    }
    void finish(ggml_tensor * o) {
        out = o;
        gf  = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
        buf = ggml_backend_alloc_ctx_tensors(ctx, be);
        ASSERT_NE(buf, nullptr);
        std::mt19937                          rng(7);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        for (ggml_tensor * x : inputs) {
            std::vector<float> f(ggml_nelements(x));
            for (float & v : f) v = u(rng);
            std::vector<uint8_t> bytes(ggml_nbytes(x));
            if (ggml_is_quantized(x->type)) ggml_quantize_chunk(x->type, f.data(), bytes.data(), 0, ggml_nrows(x), x->ne[0], nullptr);
            else if (x->type == GGML_TYPE_F32) memcpy(bytes.data(), f.data(), bytes.size());
            else if (x->type == GGML_TYPE_F16) ggml_fp32_to_fp16_row(f.data(), (ggml_fp16_t *) bytes.data(), (int64_t) f.size());
            else ggml_fp32_to_bf16_row_ref(f.data(), (ggml_bf16_t *) bytes.data(), (int64_t) f.size());
            ggml_backend_tensor_set(x, bytes.data(), 0, bytes.size());
        }
    }
    std::vector<float> run() {
        EXPECT_EQ(ggml_backend_graph_compute(be, gf), GGML_STATUS_SUCCESS);
        std::vector<float> r(ggml_nelements(out));
        ggml_backend_tensor_get(out, r.data(), 0, r.size() * sizeof(float));
        return r;
    }
};

std::string kernel_of(one_op & g) { return ggml_backend_cpu_node_kernel(g.be, g.out); }

// The x86 GEMM levels this CPU can run (ops-mul-mat-x86.cpp), each with the prefix its kernel
// names carry: avx2 and avx_vnni run the AVX2 kernels, avx512 the AVX-512 ones. (amx, opt-in and
// untested on hardware, is left out.)
struct gemm_level {
    std::string isa, prefix;
};
std::vector<gemm_level> gemm_levels() {
    std::vector<gemm_level> out;
    for (const std::string & lv : test_isa::runnable_levels()) {
        if (lv == "avx2" || lv == "avx_vnni") out.push_back({lv, "avx2"});
        if (lv == "avx512") out.push_back({lv, "avx512"});
    }
    return out;
}

TEST_F(KernelChoice, each_runnable_kernel_runs_bf16_mul_mat_when_forced) {
    // M = 40 rows: above the small-M thresholds, so the packed GEMM (where the choice is) runs
    one_op g;
    ggml_tensor * w = g.in(GGML_TYPE_BF16, 96, 70);
    ggml_tensor * x = g.in(GGML_TYPE_F32, 96, 40);
    g.finish(ggml_mul_mat(g.ctx, w, x));
    for (const gemm_level & lv : gemm_levels()) {
        test_isa::scoped_cap cap(lv.isa.c_str());
        SCOPED_TRACE("isa " + lv.isa);
        std::vector<std::vector<float>> results;
        std::vector<std::string>        ks = {"f32fma"};
        if (lv.prefix == "avx512" && ggml_cpu_has_avx512_bf16()) ks.push_back("bf16dot");
        for (const std::string & k : ks) {
            ASSERT_TRUE(ggml_cpu_set_kernel_override(("mul_mat_bf16=" + k).c_str()));
            EXPECT_STREQ(ggml_cpu_get_kernel("mul_mat_bf16"), k.c_str());
            EXPECT_EQ(kernel_of(g), lv.prefix + " " + k);
            results.push_back(g.run());
        }
        if (results.size() == 2) {
            // bf16dot rounds the activations to BF16, f32fma does not: the bits must differ, or the
            // override did not switch the kernel that ran
            EXPECT_NE(results[0], results[1]);
        }
        // below AVX-512 no CPU has vdpbf16ps: forcing it is refused
        if (lv.prefix == "avx2") {
            EXPECT_FALSE(ggml_cpu_set_kernel_override("mul_mat_bf16=bf16dot"));
        }
    }
    ggml_backend_cpu_set_use_ref(g.be, true);
    EXPECT_EQ(kernel_of(g), "portable");
    ggml_backend_cpu_set_use_ref(g.be, false);
    test_isa::scoped_cap cap("portable");
    EXPECT_EQ(kernel_of(g), "portable");
}

TEST_F(KernelChoice, f16_activations_name_the_fast_kernel_they_are_widened_for) {
    if (gemm_levels().empty()) GTEST_SKIP() << "no AVX2: the portable GEMM runs every type";
    // upstream's conv_2d composition: an F16 im2col matrix as src1; it is widened to F32 and runs
    // the level's GEMM, so the label must not say "portable" (bench rows would misname it)
    one_op g;
    ggml_tensor * w = g.in(GGML_TYPE_F16, 96, 70);
    ggml_tensor * x = g.in(GGML_TYPE_F16, 96, 40);
    g.finish(ggml_mul_mat(g.ctx, w, x));
    // and the small-M path (M = 3 rows), widened the same way
    one_op        gs;
    ggml_tensor * ws = gs.in(GGML_TYPE_F16, 96, 70);
    ggml_tensor * xs = gs.in(GGML_TYPE_BF16, 96, 3);
    gs.finish(ggml_mul_mat(gs.ctx, ws, xs));
    for (const gemm_level & lv : gemm_levels()) {
        test_isa::scoped_cap cap(lv.isa.c_str());
        // the avx2 GEMM widens F16/BF16 src1 while packing (and swaps operands for im2col shapes);
        // the avx512 level has no such plan and runs the AVX2 kernel for these nodes (the next
        // lower level with a kernel: widening the whole src1 first for the AVX-512 GEMM made
        // stable-diffusion.cpp's sampling 2.5x slower on Zen 4); never portable
        EXPECT_EQ(kernel_of(g).rfind("avx2 f32fma", 0), 0u) << kernel_of(g) << " at " << lv.isa;
        EXPECT_EQ(kernel_of(gs).rfind("avx2 small-M dot (f32)", 0), 0u) << kernel_of(gs) << " at " << lv.isa;
    }
    ggml_backend_cpu_set_use_ref(g.be, true);
    EXPECT_EQ(kernel_of(g), "portable");
}

// AArch64: float MUL_MAT runs the NEON GEMM (ops-mul-mat-neon.cpp) at every ARM level (neon,
// dotprod, i8mm), the packed 8 x 12 kernel above 16 activation rows and the small-M dot products
// up to 16; the name says which and which weight type was widened; use_ref and a cap of portable
// name (and run) the portable kernel. Results equal the portable kernel's up to summation order.
TEST_F(KernelChoice, arm_float_mul_mat_names_the_neon_gemm_at_every_arm_level) {
#if !defined(__aarch64__)
    GTEST_SKIP() << "AArch64 only (ops-mul-mat-neon.cpp)";
#else
    for (ggml_type wt : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16})
    for (ggml_type xt : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (int64_t M : {3, 40}) {
        SCOPED_TRACE(std::string("w ") + ggml_type_name(wt) + ", x " + ggml_type_name(xt) + ", M " + std::to_string(M));
        one_op g;
        ggml_tensor * w = g.in(wt, 101, 30);
        ggml_tensor * x = g.in(xt, 101, M);
        g.finish(ggml_mul_mat(g.ctx, w, x));
        std::vector<float> base;
        {
            test_isa::scoped_cap cap("portable");
            EXPECT_EQ(kernel_of(g), "portable");
            base = g.run();
        }
        const std::string path   = M > 16 ? "neon f32fma" : "neon small-M dot (f32";
        const std::string widen  = wt == GGML_TYPE_F16 ? "f16 weights widened" : wt == GGML_TYPE_BF16 ? "bf16 weights widened" : "";
        int               levels = 0;
        for (const std::string & lv : test_isa::runnable_levels()) {
            if (lv == "portable") continue;
            ++levels;
            test_isa::scoped_cap cap(lv.c_str());
            SCOPED_TRACE("isa " + lv);
            const std::string k = kernel_of(g);
            EXPECT_EQ(k.rfind(path, 0), 0u) << k;
            if (!widen.empty()) EXPECT_NE(k.find(widen), std::string::npos) << k;
            const std::vector<float> got = g.run();
            ASSERT_EQ(got.size(), base.size());
            for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], base[i], 1e-4f) << "element " << i;
        }
        EXPECT_GE(levels, 1) << "every AArch64 CPU has the neon level";
        ggml_backend_cpu_set_use_ref(g.be, true);
        EXPECT_EQ(kernel_of(g), "portable");
    }
#endif
}

TEST_F(KernelChoice, q3_K_without_a_tile_runs_the_dequantizing_gemm_unless_vecdot_is_forced) {
    std::vector<gemm_level> levels = gemm_levels();
#if defined(__aarch64__)
    // the NEON GEMM (ops-mul-mat-neon.cpp) runs the route at every ARM level
    for (const std::string & lv : test_isa::runnable_levels())
        if (lv != "portable") levels.push_back({lv, "neon"});
#endif
    if (levels.empty()) GTEST_SKIP() << "the route needs an F32 GEMM level (AVX2, AVX-512 or NEON)";
    one_op g;
    ggml_tensor * w = g.in(GGML_TYPE_Q3_K, 512, 40);
    ggml_tensor * x = g.in(GGML_TYPE_F32, 512, 24);
    g.finish(ggml_mul_mat(g.ctx, w, x));
    ASSERT_TRUE(ggml_cpu_set_kernel_override("mul_mat_quant=vecdot"));
    EXPECT_EQ(kernel_of(g), "portable vec_dot_ref");
    const std::vector<float> ref = g.run();
    for (const gemm_level & lv : levels) {
        test_isa::scoped_cap cap(lv.isa.c_str());
        SCOPED_TRACE("isa " + lv.isa);
        ASSERT_TRUE(ggml_cpu_set_kernel_override("mul_mat_quant=vnni"));
        EXPECT_EQ(kernel_of(g), lv.prefix + " f32fma, weights and activations dequantized");
        const std::vector<float> routed = g.run();
        // the same products (F32 instead of integer sums): close, and not the same code path's bits
        double max_rel = 0, scale = 0;
        for (size_t i = 0; i < ref.size(); ++i) scale = std::max(scale, (double) std::fabs(ref[i]));
        for (size_t i = 0; i < ref.size(); ++i) max_rel = std::max(max_rel, std::fabs((double) routed[i] - ref[i]) / scale);
        EXPECT_LT(max_rel, 1e-5);
        EXPECT_NE(routed, ref);
    }
}

TEST_F(KernelChoice, f32fma_bf16_mul_mat_equals_f32_gemm_of_the_widened_weights) {
    if (gemm_levels().empty()) GTEST_SKIP() << "no AVX2: the portable GEMM runs every type";
    // f32fma widens BF16 exactly while packing and runs the F32 micro-kernel: bit-identical to
    // the F32 GEMM given the same weights in F32, at every level (and through the small-M path)
    for (int64_t M : {33, 3}) {
    one_op gb, gf32;
    ggml_tensor * wb = gb.in(GGML_TYPE_BF16, 300, 45);
    ggml_tensor * xb = gb.in(GGML_TYPE_F32, 300, M);
    gb.finish(ggml_mul_mat(gb.ctx, wb, xb));
    ggml_tensor * wf = gf32.in(GGML_TYPE_F32, 300, 45);
    ggml_tensor * xf = gf32.in(GGML_TYPE_F32, 300, M);
    gf32.finish(ggml_mul_mat(gf32.ctx, wf, xf));
    // the same values: BF16 weights widened, the same activations
    std::vector<uint16_t> wbits(300 * 45);
    ggml_backend_tensor_get(wb, wbits.data(), 0, wbits.size() * 2);
    std::vector<float> wv(wbits.size());
    for (size_t i = 0; i < wv.size(); ++i) {
        const uint32_t u = (uint32_t) wbits[i] << 16;
        memcpy(&wv[i], &u, 4);
    }
    ggml_backend_tensor_set(wf, wv.data(), 0, wv.size() * 4);
    std::vector<float> xv(300 * M);
    ggml_backend_tensor_get(xb, xv.data(), 0, xv.size() * 4);
    ggml_backend_tensor_set(xf, xv.data(), 0, xv.size() * 4);

    ASSERT_TRUE(ggml_cpu_set_kernel_override("mul_mat_bf16=f32fma"));
    for (const gemm_level & lv : gemm_levels()) {
        test_isa::scoped_cap cap(lv.isa.c_str());
        EXPECT_EQ(gb.run(), gf32.run()) << "isa " << lv.isa << ", M " << M;
    }
    }
}

TEST_F(KernelChoice, flash_attention_follows_the_override_and_prec_f32_keeps_f32) {
    // the AVX-512 kernel's two product kernels; below avx512 (CPU or cap) the AVX2 kernel runs
    // F32 products whatever is forced (flash_attention_names_the_kernel_of_each_level)
    const std::string isa = ggml_cpu_get_isa();
    if (isa != "avx512" && isa != "amx") GTEST_SKIP() << "level " << isa << ": no AVX-512 flash attention";
    for (ggml_prec prec : {GGML_PREC_DEFAULT, GGML_PREC_F32}) {
        for (ggml_type kv : {GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_F32}) {
            one_op g;
            ggml_tensor * q = g.in(GGML_TYPE_F32, 64, 20, 2);
            ggml_tensor * k = g.in(kv, 64, 30, 2);
            ggml_tensor * v = g.in(kv, 64, 30, 2);
            ggml_tensor * o = ggml_flash_attn_ext(g.ctx, q, k, v, nullptr, 0.125f, 0.0f, 0.0f);
            ggml_flash_attn_ext_set_prec(o, prec);
            g.finish(o);
            std::vector<std::vector<float>> results;
            for (const std::string & kn : runnable_kernels()) {
                ASSERT_TRUE(ggml_cpu_set_kernel_override(("flash_attn=" + kn).c_str()));
                // bf16 products only without a request for F32 precision
                const bool bf = kn == "bf16dot" && prec == GGML_PREC_DEFAULT;
                EXPECT_EQ(kernel_of(g), bf ? "avx512 bf16dot" : "avx512 f32fma")
                    << ggml_type_name(kv) << " prec " << (int) prec << " forced " << kn;
                results.push_back(g.run());
            }
            if (results.size() == 2) {
                const bool differ = results[0] != results[1];
                EXPECT_EQ(differ, prec == GGML_PREC_DEFAULT)
                    << ggml_type_name(kv) << " prec " << (int) prec;
            }
        }
    }
}

TEST_F(KernelChoice, flash_attention_names_the_kernel_of_each_level) {
    // ops-flash-attn.cpp by level: avx512 -> the AVX-512 kernel, avx2 / avx_vnni -> the AVX2 kernel
    // (F32 products only), below -> portable. The node's name and ggml_cpu_get_kernel("flash_attn")
    // say what runs, and each level's result matches the portable kernel's (F32 sums in another
    // order: a few ulp). test-backend-ops checks every level against the reference.
    for (ggml_type kv : {GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_F32}) {
        one_op g;
        ggml_tensor * q = g.in(GGML_TYPE_F32, 80, 30, 4);
        ggml_tensor * k = g.in(kv, 80, 150, 2);
        ggml_tensor * v = g.in(kv, 80, 150, 2);
        ggml_tensor * o = ggml_flash_attn_ext(g.ctx, q, k, v, nullptr, 0.11f, 0.0f, 0.0f);
        ggml_flash_attn_ext_set_prec(o, GGML_PREC_F32);
        g.finish(o);
        std::vector<float> base;
        {
            test_isa::scoped_cap cap("portable");
            EXPECT_EQ(kernel_of(g), "portable");
            EXPECT_STREQ(ggml_cpu_get_kernel("flash_attn"), "portable");
            base = g.run();
        }
        for (const gemm_level & lv : gemm_levels()) {
            test_isa::scoped_cap cap(lv.isa.c_str());
            SCOPED_TRACE("isa " + lv.isa + ", kv " + ggml_type_name(kv));
            if (lv.prefix == "avx2") {
                EXPECT_EQ(kernel_of(g), "avx2 f32fma");
                EXPECT_STREQ(ggml_cpu_get_kernel("flash_attn"), "f32fma");
                // no vdpbf16ps below avx512: forcing bf16dot is refused and the name stays
                EXPECT_FALSE(ggml_cpu_set_kernel_override("flash_attn=bf16dot"));
                EXPECT_EQ(kernel_of(g), "avx2 f32fma");
            } else {
                EXPECT_EQ(kernel_of(g), "avx512 f32fma"); // GGML_PREC_F32: F32 products
            }
            const std::vector<float> got = g.run();
            ASSERT_EQ(got.size(), base.size());
            for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], base[i], 1e-5f) << "element " << i;
        }
    }
}

TEST_F(KernelChoice, a_spec_it_does_not_understand_changes_nothing) {
    if (!ggml_cpu_has_avx512()) GTEST_SKIP() << "no AVX-512: no kernel choice on this CPU";
    ASSERT_TRUE(ggml_cpu_set_kernel_override("f32fma"));
    for (const char * bad : {"fast", "flash_attn=", "flash_attn=bf17", "matmul=f32fma", "f32fma,,", "=f32fma",
                             "mul_mat_bf16=f32fma,flash_attn=nope"}) {
        EXPECT_FALSE(ggml_cpu_set_kernel_override(bad)) << bad;
        EXPECT_STREQ(ggml_cpu_get_kernel("mul_mat_bf16"), "f32fma") << bad;
        EXPECT_STREQ(ggml_cpu_get_kernel("flash_attn"), "f32fma") << bad;
    }
    if (!ggml_cpu_has_avx512_bf16()) {
        EXPECT_FALSE(ggml_cpu_set_kernel_override("bf16dot")) << "a kernel this CPU cannot run";
    } else {
        EXPECT_TRUE(ggml_cpu_set_kernel_override("mul_mat_bf16=bf16dot,flash_attn=f32fma"));
        EXPECT_STREQ(ggml_cpu_get_kernel("mul_mat_bf16"), "bf16dot");
        EXPECT_STREQ(ggml_cpu_get_kernel("flash_attn"), "f32fma");
    }
    EXPECT_EQ(ggml_cpu_get_kernel("no_such_family"), nullptr);
    EXPECT_TRUE(ggml_cpu_set_kernel_override(nullptr));
    EXPECT_TRUE(ggml_cpu_set_kernel_override("auto"));
    EXPECT_NE(ggml_cpu_kernel_table_row(), nullptr);
    EXPECT_GT(strlen(ggml_cpu_model_name()), 0u);
}

} // namespace

namespace {

// GGML_CPU_KERNEL is read once, at the first choice; each check runs in a fresh process ("threadsafe"
// death tests re-execute the binary), where the statement below makes that first choice.
TEST(KernelChoiceEnv, GGML_CPU_KERNEL_sets_the_choice_and_a_bad_value_is_reported_and_ignored) {
    if (!ggml_cpu_has_avx512()) GTEST_SKIP() << "no AVX-512: no kernel choice on this CPU";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            setenv("GGML_CPU_KERNEL", "mul_mat_bf16=f32fma", 1);
            const bool forced = strcmp(ggml_cpu_get_kernel("mul_mat_bf16"), "f32fma") == 0;
            // the other family keeps the table's choice
            const std::string fa = ggml_cpu_get_kernel("flash_attn");
            ggml_cpu_set_kernel_override(nullptr);
            exit(forced && fa == ggml_cpu_get_kernel("flash_attn") ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
    EXPECT_EXIT(
        {
            setenv("GGML_CPU_KERNEL", "mul_mat_bf16=fastest", 1);
            const std::string mm = ggml_cpu_get_kernel("mul_mat_bf16");
            ggml_cpu_set_kernel_override(nullptr); // the table's choice
            exit(mm == ggml_cpu_get_kernel("mul_mat_bf16") ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "GGML_CPU_KERNEL='mul_mat_bf16=fastest' ignored");
}

} // namespace

// Quantized weights (issue 14): mul_mat_quant chooses between the integer tiles of the active level
// (AVX512-VNNI or AVX2) and the portable vec_dot_ref per output; both compute the same integer block sums, so their results agree to F32
// summation order, and each is reported for the node.
TEST(KernelChoiceQuant, mul_mat_quant_follows_the_override) {
    struct restore {
        ~restore() { if (!ggml_cpu_set_kernel_override(getenv("GGML_CPU_KERNEL"))) ggml_cpu_set_kernel_override(nullptr); }
    } guard;
    one_op        g;
    const int64_t K = 512, N = 70, M = 40;
    ggml_tensor * w = ggml_new_tensor_2d(g.ctx, GGML_TYPE_Q4_K, K, N); // filled below (finish fills floats only)
    ggml_tensor * x = g.in(GGML_TYPE_F32, K, M);
    g.finish(ggml_mul_mat(g.ctx, w, x));
    {
        std::mt19937                          rng(3);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        std::vector<float>                    f(K * N);
        for (float & v : f) v = u(rng);
        std::vector<uint8_t> q(ggml_nbytes(w));
        ggml_quantize_chunk(GGML_TYPE_Q4_K, f.data(), q.data(), 0, N, K, nullptr);
        ggml_backend_tensor_set(w, q.data(), 0, q.size());
    }
    // the integer tiles ("tiles"; "vnni" is its older name) at every level that has them, named by
    // the level that runs (an AVX-512 CPU without VNNI runs the AVX2 tiles)
    ASSERT_TRUE(ggml_cpu_set_kernel_override("mul_mat_quant=vecdot"));
    EXPECT_STREQ(ggml_cpu_get_kernel("mul_mat_quant"), "vecdot");
    EXPECT_EQ(kernel_of(g), "portable vec_dot_ref");
    const std::vector<float> ref = g.run();
    for (const std::string & lv : test_isa::runnable_levels()) {
        if (lv == "portable") continue;
        test_isa::scoped_cap cap(lv.c_str());
        SCOPED_TRACE("isa " + lv);
        const bool        arm  = lv == "neon" || lv == "dotprod" || lv == "i8mm"; // each AArch64 level has its own q4_K tile
        const std::string tile = arm ? lv + " q4_K" : lv == "avx512" && ggml_cpu_has_avx512_vnni() ? "avx512 vnni q4_K" : "avx2 q4_K";
        for (const char * k : {"tiles", "vnni"}) {
            ASSERT_TRUE(ggml_cpu_set_kernel_override((std::string("mul_mat_quant=") + k).c_str()));
            EXPECT_STREQ(ggml_cpu_get_kernel("mul_mat_quant"), "tiles") << k;
            EXPECT_EQ(kernel_of(g), tile);
            const std::vector<float> got = g.run();
            for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-5 * (1 + std::fabs(ref[i]))) << i;
        }
    }
    {
        // below avx2 / neon the tiles cannot run: the choice falls back to vecdot
        test_isa::scoped_cap cap("portable");
        ASSERT_TRUE(ggml_cpu_set_kernel_override("mul_mat_quant=auto"));
        EXPECT_STREQ(ggml_cpu_get_kernel("mul_mat_quant"), "vecdot");
        EXPECT_EQ(kernel_of(g), "portable vec_dot_ref");
    }
    // use_ref forces the portable kernel whatever the choice
    ggml_backend_cpu_set_use_ref(g.be, true);
    EXPECT_EQ(kernel_of(g), "portable vec_dot_ref");

    // a bare kernel name applies to the families it belongs to; kernels of another family are refused
    ASSERT_TRUE(ggml_cpu_set_kernel_override("vecdot"));
    EXPECT_STREQ(ggml_cpu_get_kernel("mul_mat_quant"), "vecdot");
    ASSERT_TRUE(ggml_cpu_set_kernel_override("mul_mat_quant=vecdot,mul_mat_bf16=auto"));
    for (const char * bad : {"mul_mat_quant=f32fma", "mul_mat_bf16=vnni", "mul_mat_bf16=tiles", "flash_attn=vecdot",
                             "mul_mat_quant=bf16dot"}) {
        EXPECT_FALSE(ggml_cpu_set_kernel_override(bad)) << bad;
        EXPECT_STREQ(ggml_cpu_get_kernel("mul_mat_quant"), "vecdot") << bad;
    }
}
