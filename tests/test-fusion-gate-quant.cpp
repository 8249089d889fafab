// test-fusion-gate-quant.cpp — the CPU backend's ggml_ext_cpu_unary_v1 service (its result is
// the UNARY node's, bit for bit, on the fast and the portable kernels, wherever an element sits)
// and the two gated-quantize fusion rules built on it (src/core/cpu/gate-quant.cpp):
//   SIGMOID(g) -> MUL -> sd.quantize_i8_convrot   (sd.cpu.sigmoid_mul_quantize)
//   SILU(g)    -> MUL -> sd.quantize_i8_convrot   (sd.cpu.swiglu_quantize, with the SILU moved
//                                                  next to its MUL by the rule's optimize step)
// Every fused result is compared byte for byte with the same graph run with fusion off.
//
// Compiled with -ffp-contract=off like the kernels.

#include "cpu/cpu_kernels.h"
#include "ggml_extensions.h"
#include "support/sd-fusion-test.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using backend_holder = sd_fusion_test::cpu_backend;
using sd_fusion_test::expect_bitwise_equal;
using sd_fusion_test::fusion_scope;

// ---------------------------------------------------------------------------------------------
// Environment

const ggml_ext_cpu_unary_v1 * unary_service() {
    EXPECT_TRUE(sd_ggml_register_extensions());
    return (const ggml_ext_cpu_unary_v1 *) ggml_backend_reg_get_proc_address(ggml_backend_cpu_reg(),
                                                                             GGML_EXT_CPU_UNARY_V1);
}

// Wider than the norm tests' default range: the activations' saturation is reached.
std::vector<float> random_values(const std::string & name, int64_t n, float lo = -4.0f, float hi = 4.0f) {
    return sd_fusion_test::random_values(name, n, lo, hi);
}

// Values that exercise the activations' special cases: saturation, ±0, ±inf, NaN, subnormals.
const float k_specials[] = {0.0f,   -0.0f,  1.0f,   -1.0f,  20.0f,  -20.0f,  88.0f,  -88.0f, 100.0f, -100.0f,
                            1e-40f, -1e-40f, 1e30f, -1e30f, 0.5f,   -0.5f,   3.0f,   -3.0f,  1e-30f, -1e-30f};

std::vector<float> special_values(int64_t n) {
    const float        inf = std::numeric_limits<float>::infinity();
    const float        nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> v   = random_values("special", n, -30.0f, 30.0f);
    const size_t       ns  = sizeof(k_specials) / sizeof(k_specials[0]);
    for (int64_t i = 0; i < n; i += 3) v[(size_t) i] = (i / 3) % 11 == 5 ? ((i / 3) % 2 ? inf : -inf) : k_specials[(i / 3) % ns];
    if (n > 7) v[7] = nan;
    return v;
}

void expect_bytes_equal(const std::vector<uint8_t> & a, const std::vector<uint8_t> & b, const std::string & what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << what << ": byte " << i;
}

// ---------------------------------------------------------------------------------------------
// The service

// The UNARY node's output for x laid out as [n, rows], computed by the backend directly.
std::vector<float> unary_node(ggml_backend_t b, ggml_unary_op op, const std::vector<float> & x, int64_t n, int64_t rows) {
    ggml_init_params p{ggml_tensor_overhead() * 8 + ggml_graph_overhead(), nullptr, true};
    ggml_context *   ctx = ggml_init(p);
    ggml_tensor *    t   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, rows);
    ggml_tensor *    y   = ggml_unary(ctx, t, op);
    ggml_cgraph *    gf  = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, b);
    ggml_backend_tensor_set(t, x.data(), 0, ggml_nbytes(t));
    EXPECT_EQ(ggml_backend_graph_compute(b, gf), GGML_STATUS_SUCCESS);
    std::vector<float> out((size_t) (n * rows));
    ggml_backend_tensor_get(y, out.data(), 0, ggml_nbytes(y));
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    return out;
}

TEST(CpuUnaryService, apply_equals_unary_node_bitwise) {
    const ggml_ext_cpu_unary_v1 * svc = unary_service();
    ASSERT_NE(svc, nullptr);
    ASSERT_GE(svc->version, 1u);
    const ggml_unary_op ops[] = {GGML_UNARY_OP_SILU, GGML_UNARY_OP_SIGMOID, GGML_UNARY_OP_GELU,
                                 GGML_UNARY_OP_GELU_QUICK, GGML_UNARY_OP_GELU_ERF, GGML_UNARY_OP_TANH, GGML_UNARY_OP_EXP};
    for (bool use_ref : {false, true}) {
        backend_holder bh(2, use_ref);
        for (ggml_unary_op op : ops) {
            for (int64_t n : {1, 7, 16, 17, 63, 64, 65, 100, 1000}) {
                const int64_t            rows = 3;
                const std::vector<float> x    = special_values(n * rows);
                const std::vector<float> want = unary_node(bh.b, op, x, n, rows);
                const std::string        what = std::string(ggml_unary_op_name(op)) + " n=" + std::to_string(n) +
                                         (use_ref ? " use_ref" : "");
                // row by row, as a fused kernel calls it
                std::vector<float> got(x.size(), 7.0f);
                for (int64_t r = 0; r < rows; ++r) {
                    ASSERT_TRUE(svc->apply_f32(bh.b, op, n, x.data() + r * n, got.data() + r * n));
                }
                expect_bitwise_equal(got, want, what + " per row");
                // one call over all rows and one from an odd start: an element's result does not
                // depend on its position (lane-wise math, masked tails)
                std::fill(got.begin(), got.end(), 7.0f);
                ASSERT_TRUE(svc->apply_f32(bh.b, op, n * rows, x.data(), got.data()));
                expect_bitwise_equal(got, want, what + " whole buffer");
                if (n * rows > 3) {
                    std::vector<float> part(x.size() - 3);
                    ASSERT_TRUE(svc->apply_f32(bh.b, op, (int64_t) part.size(), x.data() + 3, part.data()));
                    expect_bitwise_equal(part, std::vector<float>(want.begin() + 3, want.end()), what + " offset 3");
                }
                // in place
                std::vector<float> io = x;
                ASSERT_TRUE(svc->apply_f32(bh.b, op, n * rows, io.data(), io.data()));
                expect_bitwise_equal(io, want, what + " in place");
            }
        }
    }
}

TEST(CpuUnaryService, fast_and_portable_kernels_are_both_reached) {
    // use_ref must select a different kernel where the CPU has the AVX-512 one; where it does
    // not, both runs are the portable kernel and the check is vacuous (so only count)
    const ggml_ext_cpu_unary_v1 * svc = unary_service();
    ASSERT_NE(svc, nullptr);
    backend_holder fast(1, false), ref(1, true);
    const std::vector<float> x = random_values("fast-vs-ref", 4096);
    std::vector<float>       a(x.size()), b(x.size());
    ASSERT_TRUE(svc->apply_f32(fast.b, GGML_UNARY_OP_SILU, (int64_t) x.size(), x.data(), a.data()));
    ASSERT_TRUE(svc->apply_f32(ref.b, GGML_UNARY_OP_SILU, (int64_t) x.size(), x.data(), b.data()));
    expect_bitwise_equal(b, unary_node(ref.b, GGML_UNARY_OP_SILU, x, (int64_t) x.size(), 1), "portable");
    expect_bitwise_equal(a, unary_node(fast.b, GGML_UNARY_OP_SILU, x, (int64_t) x.size(), 1), "fast");
    int differ = 0;
    for (size_t i = 0; i < x.size(); ++i) differ += memcmp(&a[i], &b[i], 4) != 0;
    RecordProperty("fast_vs_portable_differing_elements", differ);
}

TEST(CpuUnaryService, rejects_ops_it_does_not_offer) {
    const ggml_ext_cpu_unary_v1 * svc = unary_service();
    ASSERT_NE(svc, nullptr);
    backend_holder bh(1, false);
    float          x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
    EXPECT_FALSE(svc->apply_f32(bh.b, GGML_UNARY_OP_XIELU, 4, x, y));
    EXPECT_FALSE(svc->apply_f32(bh.b, GGML_UNARY_OP_COUNT, 4, x, y));
    EXPECT_FALSE(svc->apply_f32(bh.b, GGML_UNARY_OP_SILU, -1, x, y));
    EXPECT_TRUE(svc->apply_f32(bh.b, GGML_UNARY_OP_SILU, 0, nullptr, nullptr));
    EXPECT_EQ(y[0], 0.0f);
}

// ---------------------------------------------------------------------------------------------
// Fusion graphs

enum class rule { sigmoid, swiglu };

const char * kernel_of(rule r) {
    return r == rule::sigmoid ? SD_CPU_KERNEL_SIGMOID_MUL_QUANTIZE : SD_CPU_KERNEL_SWIGLU_QUANTIZE;
}

struct gate_case {
    rule    r;
    int64_t K;
    int64_t ne1, ne2; // rows = ne1 * ne2
    int     group;
    bool    u_first = true;     // MUL(u, other) rather than MUL(other, u)
    bool    strided = false;    // g and other are row-strided views of wider tensors
    bool    specials = false;   // NaN/inf/saturating values in some rows

    std::string name() const {
        return std::string(r == rule::sigmoid ? "sigmoid" : "swiglu") + " K=" + std::to_string(K) +
               " rows=" + std::to_string(ne1) + "x" + std::to_string(ne2) + " group=" + std::to_string(group) +
               (u_first ? " u*o" : " o*u") + (strided ? " strided" : "") + (specials ? " specials" : "");
    }
};

// What else the graph contains (rejection cases)
enum class variant { plain, u_consumed, mul_consumed, mul_output, broadcast, gelu, u_times_u, crossed_writer };

struct gate_graph : sd_fusion_test::graph_base {
    gate_case                  c;
    std::vector<ggml_tensor *> inputs;
    ggml_tensor *              u = nullptr, *mul = nullptr, *q = nullptr, *extra = nullptr;

    ggml_tensor * input(const char * name, int64_t ne0, int64_t ne1, int64_t ne2) {
        ggml_tensor * t = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, ne0, ne1, ne2);
        ggml_set_name(t, name);
        ggml_set_input(t);
        inputs.push_back(t);
        return t;
    }

    gate_graph(const gate_case & gc, variant v = variant::plain) : graph_base(64), c(gc) {
        const int64_t wide = c.strided ? c.K + 5 : c.K;
        ggml_tensor * g    = input("g", wide, c.ne1, c.ne2);
        ggml_tensor * o    = input("o", wide, v == variant::broadcast ? 1 : c.ne1, c.ne2);
        if (c.strided) {
            g = ggml_view_3d(ctx, g, c.K, c.ne1, c.ne2, g->nb[1], g->nb[2], 4 * sizeof(float));
            o = ggml_view_3d(ctx, o, c.K, o->ne[1], c.ne2, o->nb[1], o->nb[2], 0);
        }
        const ggml_unary_op op = v == variant::gelu ? GGML_UNARY_OP_GELU
                                 : c.r == rule::sigmoid ? GGML_UNARY_OP_SIGMOID
                                                        : GGML_UNARY_OP_SILU;
        u = ggml_unary(ctx, g, op);
        ggml_tensor * other = o;
        if (c.r == rule::swiglu) {
            // the SwiGLU layout: the activation is built before the up branch's producer, so the
            // two are not adjacent until the rule's optimize step moves the activation
            ggml_build_forward_expand(gf, u);
            if (v == variant::crossed_writer) {
                // the producer in between overwrites the activation's input: moving it is unsafe
                other = ggml_scale_inplace(ctx, g, 0.5f);
            } else {
                other = ggml_scale(ctx, o, 1.25f);
            }
        }
        if (v == variant::u_times_u) other = u;
        mul = c.u_first ? ggml_mul(ctx, u, other) : ggml_mul(ctx, other, u);
        q   = ggml_quantize_i8_convrot(ctx, mul, c.group);
        EXPECT_NE(q, nullptr) << ggml_ext_last_error();
        ggml_set_output(q);
        if (v == variant::u_consumed) extra = ggml_scale(ctx, u, 3.0f);
        if (v == variant::mul_consumed) extra = ggml_scale(ctx, mul, 3.0f);
        if (v == variant::mul_output) ggml_set_output(mul);
        ggml_build_forward_expand(gf, q);
        if (extra) {
            ggml_set_output(extra);
            ggml_build_forward_expand(gf, extra);
        }
    }
    // Non-finite values in some rows only (so the others show that they stay exact): g row 1
    // holds a NaN, o row 3 an inf; g row 5 saturates the activation (±100, ±1e30, ±0,
    // subnormals) but stays finite after the product.
    static void special_rows(const ggml_tensor * t, std::vector<float> & v) {
        const int64_t ne0  = t->ne[0];
        const int64_t rows = (int64_t) v.size() / ne0;
        const bool    is_g = std::string(t->name) == "g";
        const size_t  ns   = sizeof(k_specials) / sizeof(k_specials[0]);
        if (is_g && rows > 1) v[(size_t) (1 * ne0 + ne0 / 2)] = std::numeric_limits<float>::quiet_NaN();
        if (!is_g && rows > 3) v[(size_t) (3 * ne0 + 1)] = std::numeric_limits<float>::infinity();
        if (is_g && rows > 5) {
            for (int64_t i = 0; i < ne0; i += 2) v[(size_t) (5 * ne0 + i)] = k_specials[(i / 2) % ns];
        }
    }

    void fill() {
        for (ggml_tensor * t : inputs) {
            if (t->buffer == nullptr) continue; // not part of this variant's graph
            std::vector<float> v = random_values(std::string(t->name) + c.name(), ggml_nelements(t));
            if (c.specials) special_rows(t, v);
            ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
        }
    }
};

// The defined bytes of a packed quantize output: the rows padded to a multiple of four, then
// one F32 scale per row (the tensor's last row is only partly used by the scales).
std::vector<uint8_t> get_bytes(const ggml_tensor * t) {
    const int64_t        K = t->ne[0], rows = t->src[0]->ne[1] * t->src[0]->ne[2] * t->src[0]->ne[3];
    std::vector<uint8_t> v((size_t) (K * ((rows + 3) / 4 * 4) + 4 * rows));
    ggml_backend_tensor_get(t, v.data(), 0, v.size());
    return v;
}

// The scheduler that knows both gate rules' 3-node steps (fused_step(kernel) names the one
// expected, so picking the other rule fails).
struct sched_run : sd_fusion_test::sched_run {
    explicit sched_run(ggml_backend_t b) :
        sd_fusion_test::sched_run(b, {SD_CPU_KERNEL_SIGMOID_MUL_QUANTIZE, SD_CPU_KERNEL_SWIGLU_QUANTIZE}, 3) {}
};

struct run_result {
    std::vector<uint8_t> q;
    std::vector<float>   extra;
    bool                 fused = false;
};

run_result run(const gate_case & c, ggml_backend_t b, bool fusion, variant v = variant::plain) {
    fusion_scope fs(fusion);
    gate_graph   g(c, v);
    sched_run    s(b);
    run_result   r;
    s.compute(g);
    r.q     = get_bytes(g.q);
    r.fused = s.fused_step(kernel_of(c.r));
    if (g.extra) {
        r.extra.resize((size_t) ggml_nelements(g.extra));
        ggml_backend_tensor_get(g.extra, r.extra.data(), 0, ggml_nbytes(g.extra));
    }
    return r;
}

// The quantized output is not trivial (a test that compares two all-zero buffers proves nothing).
void expect_nontrivial(const std::vector<uint8_t> & q, const gate_case & c, const std::string & what) {
    const size_t n  = (size_t) (c.K * c.ne1 * c.ne2); // the quantized rows, before the padding
    size_t       nz = 0;
    for (size_t i = 0; i < n; ++i) nz += q[i] != 0;
    EXPECT_GT(nz, n / 2) << what;
}

void check_fused_equals_unfused(const gate_case & c, ggml_backend_t b, const std::string & tag) {
    const std::string what = c.name() + tag;
    run_result        ref  = run(c, b, false);
    run_result        got  = run(c, b, true);
    EXPECT_FALSE(ref.fused) << what << ": fused with fusion off";
    EXPECT_TRUE(got.fused) << what << ": the scheduler did not select " << kernel_of(c.r);
    expect_nontrivial(ref.q, c, what);
    expect_bytes_equal(got.q, ref.q, what + ": fused vs unfused");
}

std::vector<gate_case> shape_cases(rule r) {
    std::vector<gate_case> cs;
    // K odd multiples of the group; rows 1, 3, 5, 17 (not multiples of 4)
    const int64_t Ks[][2] = {{1, 7}, {4, 12}, {16, 48}, {64, 192}, {256, 768}};
    for (auto & kg : Ks) {
        for (int64_t rows : {1, 3, 5, 17}) cs.push_back({r, kg[1], rows, 1, (int) kg[0]});
    }
    cs.push_back({r, 80, 3, 2, 16});                     // rows over two dims
    cs.push_back({r, 48, 5, 1, 16, false});              // the other operand order
    cs.push_back({r, 256, 3, 2, 64, true, true});        // strided rows
    cs.push_back({r, 256, 5, 1, 256, false, true});      // strided rows, other order
    cs.push_back({r, 1000, 3, 1, 4});                    // a longer row with a masked tail
    // groups above 256 (rotated in memory after the in-register 256-point part)
    cs.push_back({r, 3072, 5, 1, 1024});
    cs.push_back({r, 8192, 3, 1, 4096, true, true});     // strided rows
    cs.push_back({r, 16384, 3, 1, 16384, false, true});  // one group per row, strided rows
    return cs;
}

TEST(SigmoidMulQuantFusion, fused_equals_unfused_chain) {
    for (int nt : {1, 2}) {
        backend_holder bh(nt, false);
        for (const gate_case & c : shape_cases(rule::sigmoid)) check_fused_equals_unfused(c, bh.b, " threads=" + std::to_string(nt));
    }
}

TEST(SigmoidMulQuantFusion, fused_equals_unfused_chain_on_portable_kernels) {
    for (int nt : {1, 2}) {
        backend_holder bh(nt, true);
        for (const gate_case & c : shape_cases(rule::sigmoid)) {
            check_fused_equals_unfused(c, bh.b, " use_ref threads=" + std::to_string(nt));
        }
    }
}

TEST(SwigluQuantFusion, fused_equals_unfused_chain) {
    for (int nt : {1, 2}) {
        backend_holder bh(nt, false);
        for (const gate_case & c : shape_cases(rule::swiglu)) check_fused_equals_unfused(c, bh.b, " threads=" + std::to_string(nt));
    }
}

TEST(SwigluQuantFusion, fused_equals_unfused_chain_on_portable_kernels) {
    for (int nt : {1, 2}) {
        backend_holder bh(nt, true);
        for (const gate_case & c : shape_cases(rule::swiglu)) {
            check_fused_equals_unfused(c, bh.b, " use_ref threads=" + std::to_string(nt));
        }
    }
}

// NaN, ±inf and saturating inputs: rows with a non-finite product quantize to zeros with a NaN
// scale in both runs; everything else matches bit for bit too.
TEST(GateQuantFusion, nan_inf_rows_equal_unfused) {
    for (bool use_ref : {false, true}) {
        backend_holder bh(2, use_ref);
        for (rule r : {rule::sigmoid, rule::swiglu}) {
            for (int group : {1, 16, 256}) {
                gate_case c{r, 512, 7, 1, group};
                c.specials = true;
                check_fused_equals_unfused(c, bh.b, use_ref ? " use_ref" : "");
                // the NaN rows really are there: a zero quantized row with a NaN scale
                const std::vector<uint8_t> q = run(c, bh.b, true).q;
                const float * scales = (const float *) (q.data() + c.K * 8);
                for (int i = 0; i < 7; ++i) {
                    EXPECT_EQ((bool) std::isnan(scales[i]), i == 1 || i == 3) << c.name() << " row " << i;
                }
            }
        }
    }
}

TEST(GateQuantFusion, fusion_disable_setting_is_honored) {
    backend_holder bh(2, false);
    for (rule r : {rule::sigmoid, rule::swiglu}) {
        const gate_case c{r, 64, 5, 1, 16};
        EXPECT_FALSE(run(c, bh.b, false).fused);
        EXPECT_TRUE(run(c, bh.b, true).fused);
    }
}

// Chains this rule must leave alone: the result is still the unfused one.
TEST(GateQuantFusion, rejects_chains_it_does_not_compute) {
    backend_holder bh(2, false);
    const variant  vs[] = {variant::u_consumed, variant::mul_consumed, variant::mul_output,
                           variant::broadcast,  variant::gelu,         variant::u_times_u};
    const char *   names[] = {"activation consumed outside", "product consumed outside", "product is an output",
                              "broadcast operand", "other activation (gelu)", "activation times itself"};
    for (rule r : {rule::sigmoid, rule::swiglu}) {
        for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); ++i) {
            const gate_case c{r, 64, 5, 1, 16};
            const std::string what = c.name() + ": " + names[i];
            run_result        ref  = run(c, bh.b, false, vs[i]);
            run_result        got  = run(c, bh.b, true, vs[i]);
            EXPECT_FALSE(got.fused) << what;
            expect_bytes_equal(got.q, ref.q, what);
            expect_bitwise_equal(got.extra, ref.extra, what + " (extra output)");
        }
    }
}

// The producer between the SILU and its MUL writes the SILU's input in place: moving the SILU
// after it would read the overwritten values, so the delay must be refused and nothing fused.
TEST(SwigluQuantFusion, unsafe_reorder_is_refused) {
    backend_holder  bh(2, false);
    const gate_case c{rule::swiglu, 64, 5, 1, 16};
    run_result      ref = run(c, bh.b, false, variant::crossed_writer);
    run_result      got = run(c, bh.b, true, variant::crossed_writer);
    EXPECT_FALSE(got.fused);
    expect_nontrivial(ref.q, c, "crossed writer");
    expect_bytes_equal(got.q, ref.q, "crossed writer: result vs unfused");
}

// The fused output is pre-allocated over an input (the activation's input g and the other
// operand): every row must be read before any packed output lands on it.
TEST(GateQuantFusion, output_overlapping_input_uses_scratch) {
    backend_holder bh(2, false);
    for (rule r : {rule::sigmoid, rule::swiglu}) {
        // swiglu's other operand is produced inside the graph: only g is an input of its step
        for (int which = 0; which < (r == rule::sigmoid ? 2 : 1); ++which) {
            const gate_case            c{r, 256, 17, 1, 64};
            const std::vector<uint8_t> want = run(c, bh.b, false).q;

            gate_graph  g(c);
            ggml_tensor * in = which == 0 ? g.inputs[0] : g.inputs[1];
            const size_t          bytes = 256 * ((std::max(ggml_nbytes(in), ggml_nbytes(g.q)) + 255) / 256);
            ggml_backend_buffer_t buf   = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), bytes + 4096);
            char *                base  = (char *) ggml_backend_buffer_get_base(buf);
            ASSERT_EQ(ggml_backend_tensor_alloc(buf, in, base), GGML_STATUS_SUCCESS);
            ASSERT_EQ(ggml_backend_tensor_alloc(buf, g.q, base + 64), GGML_STATUS_SUCCESS);
            {
                sched_run s(bh.b);
                s.compute(g);
                ggml_ext_step_info info{};
                EXPECT_TRUE(s.fused_step(kernel_of(r), &info)) << c.name();
                EXPECT_GE(info.workspace_bytes, ggml_nbytes(g.q)) << "overlap known at prepare: scratch requested";
                expect_bytes_equal(get_bytes(g.q), want, c.name() + " overlapping output");
            }
            ggml_backend_buffer_free(buf);
        }
    }
}

bool always_abort(void *) { return true; }

TEST(GateQuantFusion, abort_callback_stops_the_fused_step) {
    backend_holder bh(2, false);
    for (rule r : {rule::sigmoid, rule::swiglu}) {
        const gate_case c{r, 64, 17, 1, 16};
        gate_graph      g(c);
        sched_run       s(bh.b);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s.sched, g.gf));
        ASSERT_TRUE(s.fused_step(kernel_of(r)));
        g.fill();
        ggml_backend_cpu_set_abort_callback(bh.b, always_abort, nullptr);
        EXPECT_EQ(ggml_backend_sched_graph_compute(s.sched, g.gf), GGML_STATUS_ABORTED);
        ggml_backend_cpu_set_abort_callback(bh.b, nullptr, nullptr);
        EXPECT_EQ(ggml_backend_sched_graph_compute(s.sched, g.gf), GGML_STATUS_SUCCESS) << "backend stays usable";
    }
}

TEST(GateQuantFusion, rules_claim_no_single_node_support) {
    ASSERT_TRUE(sd_ggml_register_extensions());
    backend_holder     bh(1, false);
    ggml_init_params   p{ggml_tensor_overhead() * 8, nullptr, true};
    ggml_context *     ctx = ggml_init(p);
    ggml_tensor *      x   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 3);
    ggml_tensor *      s   = ggml_sigmoid(ctx, x);
    ggml_tensor *      m   = ggml_mul(ctx, s, x);
    ggml_backend_dev_t dev = ggml_backend_get_device(bh.b);
    // native support stays what it was; the rules add none
    EXPECT_EQ(ggml_backend_dev_supports_op(dev, s), ggml_ext_dev_supports_native_op(dev, s));
    EXPECT_EQ(ggml_backend_dev_supports_op(dev, m), ggml_ext_dev_supports_native_op(dev, m));
    ggml_free(ctx);
}

} // namespace
