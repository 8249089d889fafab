// test-fusion-norm-quant.cpp — the CPU fusion rule sd.cpu.rms_norm_mod_quantize
// (src/core/cpu/norm-quant.cpp):
//   RMS_NORM -> MUL(w[K]) -> MUL(scale[K,1,1]) -> ADD -> ADD(shift[K,1,1]) -> sd.quantize_i8_convrot
// (the Krea2 modulated norm feeding the attention / MLP GEMMs) and the short chain
//   RMS_NORM -> MUL(w[K]) -> sd.quantize_i8_convrot.
// The fused step must be chosen by the scheduler and give the same bytes as the same graph run
// with fusion off, on the backend's fast kernels and with use_ref (portable kernels), for any
// thread count, group, odd K and row count, strided x and non-finite rows; it must decline
// chains it does not compute (external uses, outputs, swapped sources, other broadcasts, an
// operand that is an intermediate, writes outside the match) and stay correct when its output
// overlaps its input. (A non-F32 operand cannot be exercised: the CPU backend has no
// F32 x F16 binary op, so such a graph does not run at all; the rule checks the types anyway.)
//
// Compiled with -ffp-contract=off: the scalar sanity reference must round like the native ops.

#include "cpu/cpu_kernels.h"
#include "cpu/int8-impl.h"
#include "ggml_extensions.h"
#include "support/isa_levels.h"
#include "support/sd-fusion-test.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using sd_fusion_test::cpu_backend;
using sd_fusion_test::fusion_scope;
using sd_fusion_test::path_scope;
using sd_fusion_test::random_values;

// ---------------------------------------------------------------------------------------------
// Environment

ggml_backend_t cpu() {
    static cpu_backend env(2);
    return env.b;
}

// Inputs are filled by name after allocation; `tweak` may change the values first (non-finite
// injection).
using graph_env = sd_fusion_test::f32_graph;

// The scheduler (default: on the shared backend) that knows this rule's step.
struct sched_run : sd_fusion_test::sched_run {
    explicit sched_run(ggml_backend_t b = nullptr) :
        sd_fusion_test::sched_run(b ? b : cpu(), {SD_CPU_KERNEL_RMS_NORM_MOD_QUANTIZE}) {}
};

// The defined bytes of a packed quantizer output: K * pad4(rows) I8 (padding rows zero), then
// one F32 scale per row. (The bytes after the last scale are not defined by the schema.)
int64_t defined_bytes(const ggml_tensor * q, int64_t rows) {
    return q->ne[0] * sd_int8::pad_up(rows, 4) + rows * (int64_t) sizeof(float);
}

std::vector<uint8_t> get_bytes(const ggml_tensor * q, int64_t rows) {
    std::vector<uint8_t> v((size_t) defined_bytes(q, rows));
    ggml_backend_tensor_get(q, v.data(), 0, v.size());
    return v;
}

void expect_bytes_equal(const std::vector<uint8_t> & a, const std::vector<uint8_t> & b, int64_t K, int64_t rows,
                        const char * what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    const size_t scales = (size_t) (K * sd_int8::pad_up(rows, 4));
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i] == b[i]) continue;
        if (i < scales) {
            FAIL() << what << ": quantized byte of row " << i / (size_t) K << " col " << i % (size_t) K << ": "
                   << (int) (int8_t) a[i] << " vs " << (int) (int8_t) b[i];
        } else {
            FAIL() << what << ": scale of row " << (i - scales) / 4;
        }
    }
}

float scale_of(const std::vector<uint8_t> & q, int64_t K, int64_t rows, int64_t r) {
    float s;
    memcpy(&s, q.data() + K * sd_int8::pad_up(rows, 4) + r * 4, sizeof(float));
    return s;
}

// ---------------------------------------------------------------------------------------------
// The chain

struct nq_case {
    int64_t K;
    int64_t r1, r2, r3; // x [K, r1, r2, r3]
    int     group;
    bool    strided;    // x is a view with padded rows into a larger parent
    bool    modulated;  // 6-node chain (else the 3-node Norm -> Mul -> ConvRot)
    int64_t rows() const { return r1 * r2 * r3; }
};

std::string case_name(const nq_case & c) {
    char b[160];
    snprintf(b, sizeof(b), "K=%lld x=[%lld,%lld,%lld] group=%d %s %s", (long long) c.K, (long long) c.r1,
             (long long) c.r2, (long long) c.r3, c.group, c.strided ? "strided" : "contiguous",
             c.modulated ? "modulated" : "short");
    return b;
}

enum class variant {
    normal,
    swapped_add,     // ADD(t, h) instead of ADD(h, t)
    weight_per_row,  // w [K, r1]: a broadcast the rule does not compute
    mod_per_batch,   // scale [K, 1, r2]
    norm_inplace,    // RMS_NORM in place on x: a write outside the match
    inplace_ops,     // MUL(norm, w) and both ADDs in place on their first source (still fused)
    weight_is_norm,  // MUL(norm, norm) on a single row: the "weight" is an intermediate
};

struct nq_graph {
    graph_env     g;
    ggml_tensor * x = nullptr, * w = nullptr, * ms = nullptr, * sh = nullptr;
    ggml_tensor * nrm = nullptr, * mul = nullptr, * mod = nullptr, * sum = nullptr, * act = nullptr;
    ggml_tensor * q = nullptr;

    nq_graph(const nq_case & c, variant v = variant::normal, float eps = 1e-5f) {
        if (c.strided) {
            ggml_tensor * p = g.input("x_parent", c.K + 5, c.r1 + 1, c.r2 + 1, c.r3);
            x = ggml_view_4d(g.ctx, p, c.K, c.r1, c.r2, c.r3, p->nb[1], p->nb[2], p->nb[3], 2 * sizeof(float));
        } else {
            x = g.input("x", c.K, c.r1, c.r2, c.r3);
        }
        if (v == variant::weight_per_row) w = g.input("w2d", c.K, c.r1);
        else if (v != variant::weight_is_norm) w = g.input("w", c.K);
        const bool inpl = v == variant::inplace_ops;
        nrm = v == variant::norm_inplace ? ggml_rms_norm_inplace(g.ctx, x, eps) : ggml_rms_norm(g.ctx, x, eps);
        mul = inpl ? ggml_mul_inplace(g.ctx, nrm, w) : ggml_mul(g.ctx, nrm, v == variant::weight_is_norm ? nrm : w);
        act = mul;
        if (c.modulated) {
            ms  = v == variant::mod_per_batch ? g.input("ms3", c.K, 1, c.r2) : g.input("ms", c.K, 1, 1);
            sh  = g.input("sh", c.K, 1, 1);
            mod = ggml_mul(g.ctx, mul, ms);
            sum = v == variant::swapped_add ? ggml_add(g.ctx, mod, mul)
                : inpl                      ? ggml_add_inplace(g.ctx, mul, mod)
                                            : ggml_add(g.ctx, mul, mod);
            act = inpl ? ggml_add_inplace(g.ctx, sum, sh) : ggml_add(g.ctx, sum, sh);
        }
        q = ggml_quantize_i8_convrot(g.ctx, act, c.group);
    }
    std::vector<ggml_tensor *> intermediates() const {
        std::vector<ggml_tensor *> v = {nrm, mul};
        if (mod) v.insert(v.end(), {mod, sum, act});
        return v;
    }
};

// The chain run through the scheduler with fusion on or off on backend b (default: the shared
// one); the rule must take it exactly when fusion is on (its step copied to *info). Returns the
// defined output bytes.
std::vector<uint8_t> run_chain(const nq_case & c, bool fusion, ggml_backend_t b = nullptr, variant v = variant::normal,
                               const graph_env::tweak_fn & tweak = {}, ggml_ext_step_info * info = nullptr) {
    fusion_scope fs(fusion);
    nq_graph     f(c, v);
    f.g.tweak = tweak;
    f.g.build({f.q});
    sched_run s(b);
    EXPECT_EQ(s.run(f.g), GGML_STATUS_SUCCESS);
    EXPECT_EQ(s.fused_step(info), fusion) << (fusion ? "the scheduler did not select the fusion"
                                                     : "fused with fusion off");
    return get_bytes(f.q, c.rows());
}

// The same graph run node by node (fusion off) on backend b.
std::vector<uint8_t> unfused_result(const nq_case & c, ggml_backend_t b = nullptr, variant v = variant::normal,
                                    const graph_env::tweak_fn & tweak = {}) {
    return run_chain(c, false, b, v, tweak);
}

// ---------------------------------------------------------------------------------------------
// Fused == unfused

TEST(NormModQuantFusion, fused_equals_unfused_chain) {
    // at every instruction-set level this CPU can run: each has its own rms_norm / rotation code
    for (const std::string & lv : test_isa::runnable_levels()) {
        test_isa::scoped_cap cap(lv.c_str());
        SCOPED_TRACE("isa " + lv);
        // odd K (multiples of the group), row counts not multiples of 4, every group
        const int64_t Ks[][2] = {{1, 5}, {4, 12}, {16, 48}, {64, 192}, {256, 768}};
        for (const auto & kg : Ks) {
            for (int64_t rows : {1, 3, 5, 17}) {
                for (bool modulated : {true, false}) {
                    const nq_case c{kg[1], rows, 1, 1, (int) kg[0], false, modulated};
                    for (int threads : {1, 2}) {
                        for (bool use_ref : {false, true}) {
                            SCOPED_TRACE(case_name(c) + " threads=" + std::to_string(threads) +
                                         (use_ref ? " use_ref" : ""));
                            cpu_backend                b(threads, use_ref);
                            const std::vector<uint8_t> want = unfused_result(c, b);
                            ggml_ext_step_info         info{};
                            const std::vector<uint8_t> got = run_chain(c, true, b, variant::normal, {}, &info);
                            EXPECT_EQ(info.n_nodes, modulated ? 6 : 3);
                            expect_bytes_equal(got, want, c.K, rows, "fused vs unfused");
                        }
                    }
                }
            }
        }
    }
}

TEST(NormModQuantFusion, fused_equals_unfused_on_both_quantizer_paths) {
    // the quantizer's row path (portable, AVX2, AVX-512) is chosen at prepare, as for the
    // standalone sd.quantize_i8_convrot.v1 kernel
    // every quantizer path this CPU may run (the others are named as skipped)
    for (sd_int8::path p : sd_fusion_test::available_paths({sd_int8::path::portable, sd_int8::path::avx2, sd_int8::path::vnni, sd_int8::path::neon, sd_int8::path::dotprod, sd_int8::path::i8mm})) {
        path_scope ps(p);
        for (const nq_case & c : {nq_case{768, 5, 1, 1, 256, false, true}, nq_case{192, 17, 1, 1, 64, false, true},
                                  nq_case{20, 3, 1, 1, 4, false, false}}) {
            SCOPED_TRACE(case_name(c) + " path=" + sd_int8::path_name(p));
            const std::vector<uint8_t> want = unfused_result(c);
            expect_bytes_equal(run_chain(c, true), want, c.K, c.rows(), "fused vs unfused");
        }
    }
}

// Groups above 256 (real Krea2 files use 1024 and 16384), strided and contiguous x, odd row
// counts, on every quantizer path and the portable norm.
TEST(NormModQuantFusion, large_groups_fused_equals_unfused) {
    const nq_case cases[] = {
        {3072, 5, 1, 1, 1024, true, true},
        {8192, 3, 1, 1, 4096, false, false},
        {16384, 3, 1, 1, 16384, true, true},
        {16384, 1, 3, 1, 1024, true, false},
    };
    // every quantizer path this CPU may run (the others are named as skipped)
    for (sd_int8::path p : sd_fusion_test::available_paths({sd_int8::path::portable, sd_int8::path::avx2, sd_int8::path::vnni, sd_int8::path::neon, sd_int8::path::dotprod, sd_int8::path::i8mm})) {
        path_scope ps(p);
        for (const nq_case & c : cases) {
            for (bool use_ref : {false, true}) {
                SCOPED_TRACE(case_name(c) + " path=" + sd_int8::path_name(p) + (use_ref ? " use_ref" : ""));
                cpu_backend                b(2, use_ref);
                const std::vector<uint8_t> want = unfused_result(c, b);
                expect_bytes_equal(run_chain(c, true, b), want, c.K, c.rows(), "fused vs unfused");
            }
        }
    }
}

// The rows of the DiT (3072, 6144, 16384 + 256 wide) at every instruction-set level: the fused
// norm reproduces that level's RMS_NORM rounding (the fast levels share one, portable has its own).
TEST(NormModQuantFusion, dit_widths_fused_equals_unfused_at_every_level) {
    const nq_case cases[] = {{3072, 3, 1, 1, 256, false, true}, {6144, 2, 1, 1, 1024, true, false},
                             {16384 + 256, 2, 1, 1, 256, false, true}};
    for (const std::string & lv : test_isa::runnable_levels()) {
        test_isa::scoped_cap cap(lv.c_str());
        for (const nq_case & c : cases) {
            SCOPED_TRACE(case_name(c) + " isa " + lv);
            cpu_backend                b(2, false);
            const std::vector<uint8_t> want = unfused_result(c, b);
            expect_bytes_equal(run_chain(c, true, b), want, c.K, c.rows(), "fused vs unfused");
        }
    }
}

TEST(NormModQuantFusion, strided_and_multidimensional_x) {
    // at every instruction-set level this CPU can run: each has its own rms_norm / rotation code
    for (const std::string & lv : test_isa::runnable_levels()) {
        test_isa::scoped_cap cap(lv.c_str());
        SCOPED_TRACE("isa " + lv);
        const nq_case cases[] = {
            {256, 5, 1, 1, 256, true, true}, {64, 3, 2, 1, 16, false, true}, {48, 3, 2, 2, 16, true, true},
            {12, 1, 3, 3, 4, true, false},
        };
        for (const nq_case & c : cases) {
            for (bool use_ref : {false, true}) {
                SCOPED_TRACE(case_name(c) + (use_ref ? " use_ref" : ""));
                cpu_backend                b(2, use_ref);
                const std::vector<uint8_t> want = unfused_result(c, b);
                expect_bytes_equal(run_chain(c, true, b), want, c.K, c.rows(), "fused vs unfused");
            }
        }
    }
}

// The chain is what the rule says: with group 1 (no rotation) every quantized value times its
// row scale is within half a step of the double-precision modulated norm.
// In-place MUL/ADD write only storage inside the match (the norm's), so the rule still applies.
TEST(NormModQuantFusion, in_place_intermediates_are_fused) {
    for (bool modulated : {true, false}) {
        const nq_case c{192, 5, 1, 1, 64, false, modulated};
        SCOPED_TRACE(case_name(c));
        const std::vector<uint8_t> want = unfused_result(c);
        expect_bytes_equal(run_chain(c, true, nullptr, variant::inplace_ops), want, c.K, c.rows(),
                           "fused in-place chain vs unfused");
    }
}

TEST(NormModQuantFusion, result_dequantizes_to_the_modulated_norm) {
    const nq_case c{37, 6, 1, 1, 1, false, true};
    const float   eps = 1e-5f;
    nq_graph      f(c);
    f.g.build({f.q});
    sched_run s;
    ASSERT_EQ(s.run(f.g), GGML_STATUS_SUCCESS);
    ASSERT_TRUE(s.fused_step());
    const std::vector<uint8_t> got = get_bytes(f.q, c.rows());
    const std::vector<float>   xv = random_values("x", c.K * c.rows()), wv = random_values("w", c.K),
                             mv = random_values("ms", c.K), sv = random_values("sh", c.K);
    for (int64_t r = 0; r < c.rows(); ++r) {
        const float * xr = xv.data() + r * c.K;
        double        ss = 0.0;
        for (int64_t i = 0; i < c.K; ++i) ss += (double) xr[i] * xr[i];
        const double inv = 1.0 / std::sqrt(ss / (double) c.K + eps);
        const float  s   = scale_of(got, c.K, c.rows(), r);
        ASSERT_TRUE(std::isfinite(s) && s > 0.0f);
        for (int64_t i = 0; i < c.K; ++i) {
            const double h   = xr[i] * inv * wv[(size_t) i];
            const double a   = h + h * mv[(size_t) i] + sv[(size_t) i];
            const double deq = (double) (int8_t) got[(size_t) (r * c.K + i)] * s;
            ASSERT_NEAR(deq, a, 0.5 * s + 1e-5 * (1.0 + std::fabs(a))) << "row " << r << " col " << i;
        }
    }
    // padding rows 6, 7 are zero
    for (int64_t i = c.rows() * c.K; i < 8 * c.K; ++i) ASSERT_EQ(got[(size_t) i], 0) << "padding byte " << i;
}

TEST(NormModQuantFusion, non_finite_rows_equal_unfused) {
    // row 1: a NaN; row 2: +Inf (its norm scale is 0, so Inf * 0 = NaN); row 4: huge but finite
    // values whose squares overflow float (not double)
    const nq_case c{256, 5, 1, 1, 64, false, true};
    auto          tweak = [&](const ggml_tensor * t, std::vector<float> & v) {
        if (strcmp(t->name, "x") != 0) return;
        v[(size_t) (1 * c.K + 7)] = std::numeric_limits<float>::quiet_NaN();
        v[(size_t) (2 * c.K + 0)] = std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < c.K; ++i) v[(size_t) (4 * c.K + i)] *= 1e30f;
    };
    for (bool use_ref : {false, true}) {
        SCOPED_TRACE(use_ref ? "use_ref" : "fast kernels");
        cpu_backend                b(2, use_ref);
        const std::vector<uint8_t> want = unfused_result(c, b, variant::normal, tweak);
        EXPECT_TRUE(std::isnan(scale_of(want, c.K, c.rows(), 1)));
        EXPECT_TRUE(std::isnan(scale_of(want, c.K, c.rows(), 2)));
        EXPECT_TRUE(std::isfinite(scale_of(want, c.K, c.rows(), 0)));
        expect_bytes_equal(run_chain(c, true, b, variant::normal, tweak), want, c.K, c.rows(), "fused vs unfused");
    }
}

// ---------------------------------------------------------------------------------------------
// Switch, rejection, overlap, abort

TEST(NormModQuantFusion, fusion_disable_setting_is_honored) {
    const nq_case              c{256, 3, 1, 1, 256, false, true};
    const std::vector<uint8_t> want = unfused_result(c);
    for (bool on : {false, true}) {
        SCOPED_TRACE(on ? "fusion on" : "fusion off");
        sd_ggml_set_fusion_enabled(on);
        nq_graph f(c);
        f.g.build({f.q});
        sched_run s;
        ASSERT_EQ(s.run(f.g), GGML_STATUS_SUCCESS);
        EXPECT_EQ(s.fused_step(), on);
        expect_bytes_equal(get_bytes(f.q, c.rows()), want, c.K, c.rows(), "result vs unfused");
    }
    sd_ggml_set_fusion_enabled(true);
}

TEST(NormModQuantFusion, rejects_intermediate_with_external_consumer) {
    const nq_case              c{64, 5, 1, 1, 16, false, true};
    const std::vector<uint8_t> want = unfused_result(c);
    for (int which = 0; which < 5; ++which) {
        SCOPED_TRACE("intermediate " + std::to_string(which));
        nq_graph      f(c);
        ggml_tensor * other = ggml_scale(f.g.ctx, f.intermediates()[(size_t) which], 2.0f);
        f.g.build({f.q, other});
        sched_run s;
        ASSERT_EQ(s.run(f.g), GGML_STATUS_SUCCESS);
        EXPECT_FALSE(s.fused_step()) << "fused although an intermediate is used outside the match";
        expect_bytes_equal(get_bytes(f.q, c.rows()), want, c.K, c.rows(), "unfused result");
    }
}

TEST(NormModQuantFusion, rejects_intermediate_output_flag) {
    const nq_case              c{64, 3, 1, 1, 64, false, true};
    const std::vector<uint8_t> want = unfused_result(c);
    for (int which = 0; which < 5; ++which) {
        SCOPED_TRACE("intermediate " + std::to_string(which));
        nq_graph f(c);
        f.g.build({f.q, f.intermediates()[(size_t) which]});
        sched_run s;
        ASSERT_EQ(s.run(f.g), GGML_STATUS_SUCCESS);
        EXPECT_FALSE(s.fused_step()) << "fused although an intermediate is a graph output";
        expect_bytes_equal(get_bytes(f.q, c.rows()), want, c.K, c.rows(), "unfused result");
    }
}

TEST(NormModQuantFusion, rejects_other_source_order_broadcast_and_type) {
    const struct {
        variant v;
        nq_case c;
        const char * what;
    } cases[] = {
        {variant::swapped_add, {64, 3, 2, 1, 16, false, true}, "ADD(t, h)"},
        {variant::weight_per_row, {64, 3, 2, 1, 16, false, true}, "weight [K, rows]"},
        {variant::weight_per_row, {64, 3, 1, 1, 16, false, false}, "weight [K, rows], short chain"},
        {variant::mod_per_batch, {64, 3, 2, 1, 16, false, true}, "scale [K, 1, batch]"},
        {variant::norm_inplace, {64, 3, 2, 1, 16, false, true}, "RMS_NORM in place on x"},
        {variant::weight_is_norm, {64, 1, 1, 1, 16, false, true}, "MUL(norm, norm), one row"},
        {variant::weight_is_norm, {64, 1, 1, 1, 16, false, false}, "MUL(norm, norm), one row, short chain"},
    };
    for (const auto & t : cases) {
        SCOPED_TRACE(t.what);
        const std::vector<uint8_t> want = unfused_result(t.c, nullptr, t.v);
        // the unfused chain is not degenerate (a rejection test on all-zero output proves little)
        EXPECT_TRUE(std::isfinite(scale_of(want, t.c.K, t.c.rows(), 0)) && scale_of(want, t.c.K, t.c.rows(), 0) > 0.0f);
        nq_graph f(t.c, t.v);
        f.g.build({f.q});
        sched_run s;
        ASSERT_EQ(s.run(f.g), GGML_STATUS_SUCCESS);
        EXPECT_FALSE(s.fused_step()) << "fused a chain the rule does not compute";
        expect_bytes_equal(get_bytes(f.q, t.c.rows()), want, t.c.K, t.c.rows(), "unfused result");
    }
}

TEST(NormModQuantFusion, output_overlapping_input_is_handled) {
    // x and the packed output share storage (pre-allocated that way): every row of x must be read
    // before any output byte lands on it, i.e. the kernel goes through scratch
    for (bool modulated : {true, false}) {
        const nq_case c{256, 9, 1, 1, 64, false, modulated};
        SCOPED_TRACE(case_name(c));
        const std::vector<uint8_t> want = unfused_result(c);
        nq_graph                   f(c);
        f.g.build({f.q});
        const size_t          bytes = std::max(ggml_nbytes(f.x), ggml_nbytes(f.q));
        ggml_backend_buffer_t buf   = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), bytes + 4096);
        char *                base  = (char *) ggml_backend_buffer_get_base(buf);
        ASSERT_EQ(ggml_backend_tensor_alloc(buf, f.x, base), GGML_STATUS_SUCCESS);
        ASSERT_EQ(ggml_backend_tensor_alloc(buf, f.q, base), GGML_STATUS_SUCCESS);
        {
            sched_run s;
            ASSERT_EQ(s.run(f.g), GGML_STATUS_SUCCESS);
            ggml_ext_step_info info{};
            EXPECT_TRUE(s.fused_step(&info));
            EXPECT_GE(info.workspace_bytes, ggml_nbytes(f.q)) << "overlap known at prepare: scratch requested";
            expect_bytes_equal(get_bytes(f.q, c.rows()), want, c.K, c.rows(), "overlapping fused vs unfused");
        }
        ggml_backend_buffer_free(buf);
    }
}

TEST(NormModQuantFusion, no_workspace_without_overlap) {
    const nq_case c{256, 5, 1, 1, 256, false, true};
    nq_graph      f(c);
    f.g.build({f.q});
    sched_run s;
    ASSERT_EQ(s.run(f.g), GGML_STATUS_SUCCESS);
    ggml_ext_step_info info{};
    ASSERT_TRUE(s.fused_step(&info));
    EXPECT_EQ(info.workspace_bytes, 0u);
}

bool always_abort(void *) { return true; }

TEST(NormModQuantFusion, abort_callback_stops_the_kernel) {
    cpu_backend b(2, false);
    ggml_backend_cpu_set_abort_callback(b, always_abort, nullptr);
    const nq_case c{256, 33, 1, 1, 256, false, true};
    nq_graph      f(c);
    f.g.build({f.q});
    sched_run s(b);
    EXPECT_EQ(s.run(f.g), GGML_STATUS_ABORTED);
    EXPECT_TRUE(s.fused_step());
}

} // namespace
