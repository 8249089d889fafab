// test-fusion-linear-epilogue.cpp — the CPU fusion sd.cpu.linear_i8_gate_residual:
// sd.linear_i8.v1 -> MUL(., gate[N]) -> ADD(residual, .) (the Krea2 block's wo / mlp_down
// epilogues) and the plain sd.linear_i8.v1 -> ADD(residual). The fused result must be
// bit-identical to the same graph run with fusion off, on every INT8 path (portable, VNNI), every
// activation kind (F32, packed, plain I8), with and without weight scale and bias, on odd shapes
// (N not a multiple of 16 / 64, K not a multiple of 4, K longer than one VNNI k-block), thread
// counts 1 and 2, the backend's portable kernels (use_ref), NaN rows; the rule declines chains it
// does not compute (external consumers, output flags, other broadcasts, the linear as its own
// gate / residual) and the result stays correct; an output in place over the residual (exactly,
// or partly overlapping it) gives the non-overlapping result.
//
// Compiled with -ffp-contract=off like the kernels.

#include "cpu/cpu_kernels.h"
#include "cpu/int8-impl.h"
#include "ggml_extensions.h"
#include "support/sd-fusion-test.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using sd_int8::path;

// ---------------------------------------------------------------------------------------------
// Environment

using backend_holder = sd_fusion_test::cpu_backend;
using sd_fusion_test::expect_bitwise_equal;
using sd_fusion_test::fusion_scope;
using sd_fusion_test::get_f32;
using sd_fusion_test::path_scope;

std::vector<path> test_paths() {
    return sd_fusion_test::available_paths({path::portable, path::avx2, path::vnni, path::neon, path::dotprod, path::i8mm});
}

// ---------------------------------------------------------------------------------------------
// Inputs: values are generated from the tensor's name, so two graphs built alike get the same
// data; inputs are never read back (the allocator may reuse consumed memory).

enum class fill_kind { normal, positive, int8 };

struct graph_env : sd_fusion_test::graph_base {
    std::vector<std::pair<ggml_tensor *, fill_kind>>        inputs;
    std::function<void(const char *, std::vector<float> &)> tweak; // e.g. NaN rows

    ggml_tensor * input(const char * name, ggml_type type, fill_kind f, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1) {
        ggml_tensor * t = ggml_new_tensor_3d(ctx, type, ne0, ne1, ne2);
        ggml_set_name(t, name);
        ggml_set_input(t);
        inputs.emplace_back(t, f);
        return t;
    }
    void fill() {
        for (auto & in : inputs) {
            ggml_tensor * t = in.first;
            if (!t->buffer) continue; // created but not used by this graph's variant
            std::mt19937  rng((uint32_t) std::hash<std::string>()(t->name));
            const int64_t n = ggml_nelements(t);
            if (in.second == fill_kind::int8) {
                std::uniform_int_distribution<int> d(-127, 127);
                std::vector<int8_t>                v((size_t) n);
                for (auto & x : v) x = (int8_t) d(rng);
                ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
                continue;
            }
            std::vector<float> v((size_t) n);
            if (in.second == fill_kind::positive) {
                std::uniform_real_distribution<float> d(0.001f, 0.05f);
                for (auto & x : v) x = d(rng);
            } else {
                std::normal_distribution<float> d(0.0f, 2.0f);
                for (auto & x : v) x = d(rng);
            }
            if (tweak) tweak(t->name, v);
            ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
        }
    }
};

// The scheduler that knows this rule's step.
struct sched_run : sd_fusion_test::sched_run {
    explicit sched_run(ggml_backend_t b) : sd_fusion_test::sched_run(b, {SD_CPU_KERNEL_LINEAR_I8_GATE_RESIDUAL}) {}
};

// ---------------------------------------------------------------------------------------------
// The chain

enum act_kind { K_F32 = 0, K_PACKED = 1, K_I8 = 2 };

struct chain_case {
    int64_t  K, N, rows;
    int      group;
    act_kind kind;
    bool     has_ws, has_b;
};

std::string case_name(const chain_case & c) {
    return "K=" + std::to_string(c.K) + " N=" + std::to_string(c.N) + " rows=" + std::to_string(c.rows) +
           " group=" + std::to_string(c.group) + " kind=" + std::to_string((int) c.kind) +
           (c.has_ws ? " ws" : "") + (c.has_b ? " bias" : "");
}

enum class shape {
    gate_3d,         // gate [N,1,1], ADD(residual, mul): the Krea2 form
    gate_1d,         // gate [N]
    add_swapped,     // ADD(mul, residual)
    mul_swapped,     // MUL(gate, lin) (rows == 1 only: the shapes must agree)
    no_gate,         // lin -> ADD(residual): the plain variant
    gate_full,       // gate [N, rows]: not a per-channel broadcast
    gate_rows,       // gate [1, rows]: broadcast over channels
    residual_bcast,  // ADD(mul, r[N]): residual broadcast over rows
    residual_is_lin, // ADD(lin, MUL(lin, gate))
    gate_is_lin,     // MUL(lin, lin) (rows == 1)
};

struct chain_graph {
    graph_env     g;
    ggml_tensor * lin = nullptr, *mul = nullptr, *out = nullptr, *gate = nullptr, *res = nullptr;

    chain_graph(const chain_case & c, shape s) {
        ggml_context * ctx = g.ctx;
        ggml_tensor *  w   = g.input("w", GGML_TYPE_I8, fill_kind::int8, c.K, c.N);
        ggml_tensor *  ws  = c.has_ws ? g.input("ws", GGML_TYPE_F32, fill_kind::positive, c.N) : nullptr;
        ggml_tensor *  b   = c.has_b ? g.input("b", GGML_TYPE_F32, fill_kind::normal, c.N) : nullptr;
        ggml_tensor *  xs  = nullptr, *in = nullptr;
        if (c.kind == K_I8) {
            in = g.input("xi", GGML_TYPE_I8, fill_kind::int8, c.K, c.rows);
            xs = g.input("xs", GGML_TYPE_F32, fill_kind::positive, c.rows);
        } else {
            ggml_tensor * x = g.input("x", GGML_TYPE_F32, fill_kind::normal, c.K, c.rows);
            in              = c.kind == K_PACKED ? ggml_quantize_i8_convrot(ctx, x, c.group <= 1 ? 1 : c.group) : x;
            EXPECT_NE(in, nullptr) << ggml_ext_last_error();
        }
        lin = ggml_mul_mat_i8_tensorwise(ctx, w, in, ws, b, c.group, xs);
        EXPECT_NE(lin, nullptr) << ggml_ext_last_error();
        if (!lin) return;
        switch (s) {
            case shape::no_gate: break;
            case shape::gate_1d: gate = g.input("gate", GGML_TYPE_F32, fill_kind::normal, c.N); break;
            case shape::gate_full: gate = g.input("gate_full", GGML_TYPE_F32, fill_kind::normal, c.N, c.rows); break;
            case shape::gate_rows: gate = g.input("gate_rows", GGML_TYPE_F32, fill_kind::normal, 1, c.rows); break;
            case shape::gate_is_lin: gate = lin; break;
            default: gate = g.input("gate", GGML_TYPE_F32, fill_kind::normal, c.N, 1, 1); break;
        }
        res = s == shape::residual_bcast ? g.input("res_b", GGML_TYPE_F32, fill_kind::normal, c.N)
                                         : g.input("res", GGML_TYPE_F32, fill_kind::normal, c.N, c.rows);
        if (s == shape::no_gate) {
            out = ggml_add(ctx, res, lin);
            return;
        }
        mul = s == shape::mul_swapped ? ggml_mul(ctx, gate, lin) : ggml_mul(ctx, lin, gate);
        switch (s) {
            case shape::add_swapped:
            case shape::residual_bcast: out = ggml_add(ctx, mul, res); break;
            case shape::residual_is_lin: out = ggml_add(ctx, lin, mul); break;
            default: out = ggml_add(ctx, res, mul); break;
        }
    }
};

// Builds the chain, runs it through a scheduler on `be` with fusion on or off, returns the result.
std::vector<float> run_chain(const chain_case & c, shape s, ggml_backend_t be, bool fusion, bool * fused,
                             const std::function<void(const char *, std::vector<float> &)> & tweak = {}) {
    fusion_scope  fs(fusion);
    chain_graph   cg(c, s);
    if (!cg.out) {
        ADD_FAILURE() << "graph not built";
        return {};
    }
    cg.g.tweak = tweak;
    cg.g.build({cg.out});
    sched_run r(be);
    r.compute(cg.g);
    ggml_ext_step_info info{};
    *fused = r.fused_step(&info);
    if (*fused) {
        EXPECT_EQ(info.n_nodes, s == shape::no_gate ? 2 : 3);
    }
    return get_f32(cg.out);
}

// fused == unfused bit for bit, and the rule was selected (or not, as `expect_fused` says)
void check_case(const chain_case & c, shape s, ggml_backend_t be, bool expect_fused,
                const std::function<void(const char *, std::vector<float> &)> & tweak = {}) {
    bool                     f_on = false, f_off = true;
    const std::vector<float> want = run_chain(c, s, be, false, &f_off, tweak);
    const std::vector<float> got  = run_chain(c, s, be, true, &f_on, tweak);
    EXPECT_FALSE(f_off) << "fused with fusion disabled";
    EXPECT_EQ(f_on, expect_fused) << (expect_fused ? "the rule was not selected" : "the rule fused a chain it must decline");
    expect_bitwise_equal(got, want, "fused vs unfused");
}

const std::vector<chain_case> & cases() {
    static const std::vector<chain_case> v = {
        // K, N, rows, group, kind, ws, bias
        {64, 67, 5, 16, K_F32, true, false},   {50, 37, 7, 1, K_F32, true, true},     {96, 130, 13, 4, K_F32, false, true},
        {256, 16, 1, 256, K_F32, true, true},  {64, 67, 13, 64, K_PACKED, true, true}, {52, 33, 7, 4, K_PACKED, false, false},
        {48, 129, 1, 16, K_PACKED, true, false}, {50, 37, 5, 1, K_I8, true, true},     {95, 70, 13, 0, K_I8, false, false},
        {128, 64, 7, 0, K_I8, true, false},
        // longer than one VNNI k-block (8192): partial sums between k-blocks
        {9001, 37, 5, 1, K_I8, true, true},    {9216, 67, 7, 256, K_F32, true, false},
    };
    return v;
}

// ---------------------------------------------------------------------------------------------
// Tests

TEST(LinearGateResidualFusion, fused_equals_unfused_chain) {
    for (int nt : {1, 2}) {
        backend_holder bh(nt);
        for (path p : test_paths()) {
            path_scope ps(p);
            for (const chain_case & c : cases()) {
                SCOPED_TRACE(std::string(sd_int8::path_name(p)) + " threads=" + std::to_string(nt) + " " + case_name(c));
                check_case(c, shape::gate_3d, bh.b, true);
                if (::testing::Test::HasFatalFailure()) return;
            }
        }
    }
}

TEST(LinearGateResidualFusion, operand_orders_and_gate_forms) {
    backend_holder bh(2);
    for (path p : test_paths()) {
        path_scope ps(p);
        SCOPED_TRACE(sd_int8::path_name(p));
        check_case({64, 67, 5, 16, K_F32, true, true}, shape::gate_1d, bh.b, true);
        check_case({64, 67, 5, 16, K_PACKED, true, true}, shape::add_swapped, bh.b, true);
        check_case({50, 37, 1, 1, K_I8, true, true}, shape::mul_swapped, bh.b, true);
        check_case({9001, 37, 1, 1, K_I8, true, true}, shape::mul_swapped, bh.b, true);
    }
}

TEST(LinearGateResidualFusion, plain_residual_variant) {
    backend_holder bh(2);
    for (path p : test_paths()) {
        path_scope ps(p);
        for (const chain_case & c : cases()) {
            SCOPED_TRACE(std::string(sd_int8::path_name(p)) + " " + case_name(c));
            check_case(c, shape::no_gate, bh.b, true);
        }
    }
}

// The backend's portable kernels run the unfused MUL / ADD; the fused epilogue must match them too.
TEST(LinearGateResidualFusion, fused_equals_unfused_on_portable_kernels) {
    backend_holder bh(2, true);
    for (path p : test_paths()) {
        path_scope ps(p);
        for (const chain_case & c : cases()) {
            SCOPED_TRACE(std::string(sd_int8::path_name(p)) + " " + case_name(c));
            check_case(c, shape::gate_3d, bh.b, true);
        }
    }
}

// A row whose activations contain NaN is NaN throughout (scale NaN); the chain keeps it NaN.
TEST(LinearGateResidualFusion, nan_rows_behave_like_the_chain) {
    backend_holder bh(2);
    auto           nan_row = [](const char * name, std::vector<float> & v) {
        if (strcmp(name, "x") == 0) v[64 + 3] = NAN; // row 1 of K = 64
        if (strcmp(name, "res") == 0) v[2] = NAN;    // one residual element of row 0
    };
    for (path p : test_paths()) {
        path_scope ps(p);
        SCOPED_TRACE(sd_int8::path_name(p));
        check_case({64, 67, 5, 16, K_F32, true, true}, shape::gate_3d, bh.b, true, nan_row);
        bool                     fused = false;
        const std::vector<float> y     = run_chain({64, 67, 5, 16, K_F32, true, true}, shape::gate_3d, bh.b, true, &fused, nan_row);
        ASSERT_EQ(y.size(), (size_t) (67 * 5));
        for (int64_t n = 0; n < 67; ++n) EXPECT_TRUE(std::isnan(y[67 + n])) << "row 1 channel " << n;
        EXPECT_TRUE(std::isnan(y[2]));
        EXPECT_FALSE(std::isnan(y[3]));
    }
}

TEST(LinearGateResidualFusion, fusion_disable_setting_is_honored) {
    backend_holder   bh(2);
    const chain_case c{64, 67, 5, 16, K_F32, true, true};
    bool             fused = true;
    run_chain(c, shape::gate_3d, bh.b, false, &fused);
    EXPECT_FALSE(fused);
    run_chain(c, shape::gate_3d, bh.b, true, &fused);
    EXPECT_TRUE(fused);
}

TEST(LinearGateResidualFusion, declines_other_broadcasts_and_self_operands) {
    backend_holder bh(2);
    for (path p : test_paths()) {
        path_scope ps(p);
        SCOPED_TRACE(sd_int8::path_name(p));
        check_case({64, 67, 5, 16, K_F32, true, true}, shape::gate_full, bh.b, false);
        check_case({64, 67, 5, 16, K_F32, true, true}, shape::gate_rows, bh.b, false);
        check_case({64, 67, 5, 16, K_F32, true, true}, shape::residual_bcast, bh.b, false);
        check_case({64, 67, 5, 16, K_F32, true, true}, shape::residual_is_lin, bh.b, false);
        check_case({64, 67, 1, 16, K_F32, true, true}, shape::gate_is_lin, bh.b, false);
    }
}

// A consumer outside the chain, or an output flag, on the linear's output or the product: the
// fused kernel would not write them, so the chain must run unfused (and still be right).
TEST(LinearGateResidualFusion, declines_external_consumer_or_output_flag) {
    backend_holder   bh(2);
    const chain_case c{64, 67, 5, 16, K_PACKED, true, true};
    for (path p : test_paths()) {
        path_scope ps(p);
        for (int which = 0; which < 4; ++which) {
            SCOPED_TRACE(std::string(sd_int8::path_name(p)) + " case " + std::to_string(which));
            std::vector<float> want, other_want;
            for (bool fusion : {false, true}) {
                fusion_scope  fs(fusion);
                chain_graph   cg(c, shape::gate_3d);
                ggml_tensor * mid = which % 2 == 0 ? cg.lin : cg.mul;
                ggml_tensor * other = which < 2 ? ggml_scale(cg.g.ctx, mid, 0.5f) : mid;
                cg.g.build({cg.out, other});
                sched_run r(bh.b);
                r.compute(cg.g);
                EXPECT_FALSE(r.fused_step());
                if (!fusion) {
                    want       = get_f32(cg.out);
                    other_want = get_f32(other);
                } else {
                    expect_bitwise_equal(get_f32(cg.out), want, "result");
                    expect_bitwise_equal(get_f32(other), other_want, "external consumer");
                }
            }
        }
    }
}

// The output placed exactly on the residual (in place; with K over one k-block the partial sums
// must not pass through it) or overlapping it partly (by a few channels / rows): the result is
// that of a run without overlap.
TEST(LinearGateResidualFusion, output_overlapping_residual) {
    for (int nt : {1, 2}) {
        backend_holder bh(nt);
        for (path p : test_paths()) {
            path_scope ps(p);
            for (const chain_case & c : {chain_case{64, 67, 7, 16, K_F32, true, true}, chain_case{9001, 37, 5, 1, K_I8, true, true},
                                         chain_case{52, 33, 13, 4, K_PACKED, false, true}}) {
                bool                     fused = false;
                const std::vector<float> want  = run_chain(c, shape::gate_3d, bh.b, false, &fused);
                for (int64_t shift : {(int64_t) 0, (int64_t) 3, -(int64_t) 5, c.N + 1, -c.N}) {
                    SCOPED_TRACE(std::string(sd_int8::path_name(p)) + " threads=" + std::to_string(nt) + " " + case_name(c) +
                                 " output at residual + " + std::to_string(shift) + " floats");
                    chain_graph cg(c, shape::gate_3d);
                    cg.g.build({cg.out});
                    const size_t          bytes = ggml_nbytes(cg.res);
                    const size_t          pad   = 4096 + 4 * (size_t) (c.N + 8);
                    ggml_backend_buffer_t buf   = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), bytes + 2 * pad);
                    char *                base  = (char *) ggml_backend_buffer_get_base(buf);
                    ASSERT_EQ(ggml_backend_tensor_alloc(buf, cg.res, base + pad), GGML_STATUS_SUCCESS);
                    ASSERT_EQ(ggml_backend_tensor_alloc(buf, cg.out, base + pad + 4 * shift), GGML_STATUS_SUCCESS);
                    {
                        sched_run r(bh.b);
                        r.compute(cg.g);
                        EXPECT_TRUE(r.fused_step());
                        expect_bitwise_equal(get_f32(cg.out), want, "overlapping fused vs unfused");
                    }
                    ggml_backend_buffer_free(buf);
                    if (::testing::Test::HasFatalFailure()) return;
                }
            }
        }
    }
}

// The graph allocator itself places the ADD in place over a residual computed in the graph
// (as in the Krea2 block's second half).
TEST(LinearGateResidualFusion, allocator_in_place_residual) {
    backend_holder bh(2);
    for (path p : test_paths()) {
        path_scope ps(p);
        for (const chain_case & c : {chain_case{64, 67, 7, 16, K_F32, true, true}, chain_case{9001, 37, 5, 1, K_I8, true, true}}) {
            SCOPED_TRACE(std::string(sd_int8::path_name(p)) + " " + case_name(c));
            std::vector<float> want;
            for (bool fusion : {false, true}) {
                fusion_scope fs(fusion);
                chain_graph  cg(c, shape::gate_3d);
                // res2 = res * 2 is consumed only by the ADD: the ADD may take over its memory
                ggml_tensor * res2 = ggml_scale(cg.g.ctx, cg.res, 2.0f);
                ggml_tensor * out  = ggml_add(cg.g.ctx, res2, cg.mul);
                cg.g.build({out});
                sched_run r(bh.b);
                r.compute(cg.g);
                if (!fusion) {
                    want = get_f32(out);
                    continue;
                }
                EXPECT_TRUE(r.fused_step());
                EXPECT_EQ(out->data, res2->data) << "the allocator did not place the output in place";
                expect_bitwise_equal(get_f32(out), want, "in-place fused vs unfused");
            }
        }
    }
}

} // namespace
