// The CPU backend's row kernels (ggml-cpu/ops-fast.h: maps, GLU, binary, F16/BF16 conversions,
// rms_norm, norm, soft_max, rope) at every instruction-set level this CPU can run
// (tests/support/isa_levels.h): portable, avx2, and avx512 where the CPU has it; on AArch64
// portable, neon, dotprod, i8mm (the last two run the NEON row kernels). Each level has its own
// kernels, so each is checked on its own, at the lengths where 4-, 8- and 16-lane code goes wrong
// (1, 7, 15, 17, 33: tails only, one vector plus a tail, ...) and at the row widths of the Krea2
// blocks (3072, 6144, 16384, 16384 + 256, and 16384 + 19 for the tails), packed and with padded
// rows / broadcast operands.
//
//   RowKernels.MatchesReference: each case against the double-precision reference of
//     test-backend-ops (same harness, same error bounds), once per level.
//   RowKernelBits.*: what is promised bit for bit: the conversions equal the scalar ggml ones at
//     every level; rms_norm rounds like the AVX-512 kernel at every fast level (the sd fusions in
//     src/core/cpu/rms-norm-cpu.h reproduce exactly that), like the portable kernel at portable; the
//     transcendental maps and rope give the same bits at every fast level (checked where a CPU has
//     two: avx2 and avx512) and on every architecture (digests recorded from the x86 kernels,
//     checked at every fast level, so neon is held to the x86 bits under qemu).
//
// test-backend-ops itself runs every case at the CPU's own level and on the portable path
// (use_ref); this file adds the levels in between for the row ops, without multiplying the whole
// suite by the number of levels.

#include "backend-ops-harness.h"
#include "support/isa_levels.h"

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using bops::builder;
using bops::dense;
using bops::fill;
using bops::layout;
using bops::ne4;
using bops::op_case;
using bops::tolerance;

// The widths: odd ones around the 4/8/16-lane boundaries, the DiT's real rows, and a long odd row
// (16384 + 19: every unrolled loop of every level runs, then a tail of each vector width).
const int64_t k_lengths[] = {1, 7, 15, 17, 33, 3072, 6144, 16384, 16384 + 19, 16384 + 256};

// Two rows for the wide cases (so both threads get one), three for the narrow ones.
int64_t rows_for(int64_t n) { return n >= 1024 ? 2 : 3; }

tolerance tol_rel(double rel, double abs = 0.0) {
    tolerance t;
    t.rel = rel;
    t.abs = abs;
    return t;
}

std::string len_name(int64_t n) { return std::to_string(n); }

// ---------------------------------------------------------------------------------------------
// the cases (bounds as in test-backend-ops: backend-ops-cases-elementwise.cpp)

struct unary_case {
    ggml_unary_op op;
    ref::unop     r;
    bool          exact;
    double        lo, hi;
};

// the ops with a fast-path map (ggml_fast_map), over ranges that reach their tails
const unary_case k_unary[] = {
    {GGML_UNARY_OP_SILU, ref::unop::silu, false, -20, 20},       {GGML_UNARY_OP_GELU, ref::unop::gelu, false, -8, 8},
    {GGML_UNARY_OP_GELU_ERF, ref::unop::gelu_erf, false, -6, 6}, {GGML_UNARY_OP_GELU_QUICK, ref::unop::gelu_quick, false, -6, 6},
    {GGML_UNARY_OP_SIGMOID, ref::unop::sigmoid, false, -16, 16}, {GGML_UNARY_OP_TANH, ref::unop::tanh, false, -6, 6},
    {GGML_UNARY_OP_EXP, ref::unop::exp, false, -80, 80},         {GGML_UNARY_OP_RELU, ref::unop::relu, true, -3, 3},
    {GGML_UNARY_OP_NEG, ref::unop::neg, true, -3, 3},            {GGML_UNARY_OP_ABS, ref::unop::abs, true, -3, 3},
};

struct glu_case {
    ggml_glu_op op;
    ref::gluop  r;
    const char * name;
};
const glu_case k_glu[] = {
    {GGML_GLU_OP_REGLU, ref::gluop::reglu, "reglu"},          {GGML_GLU_OP_GEGLU, ref::gluop::geglu, "geglu"},
    {GGML_GLU_OP_SWIGLU, ref::gluop::swiglu, "swiglu"},       {GGML_GLU_OP_GEGLU_ERF, ref::gluop::geglu_erf, "geglu_erf"},
    {GGML_GLU_OP_GEGLU_QUICK, ref::gluop::geglu_quick, "geglu_quick"},
};

ggml_tensor * make_binary(ggml_context * ctx, ref::binop op, ggml_tensor * a, ggml_tensor * b) {
    switch (op) {
        case ref::binop::add: return ggml_add(ctx, a, b);
        case ref::binop::sub: return ggml_sub(ctx, a, b);
        case ref::binop::mul: return ggml_mul(ctx, a, b);
        case ref::binop::div: return ggml_div(ctx, a, b);
    }
    return nullptr;
}
const char * binop_name(ref::binop op) {
    switch (op) {
        case ref::binop::add: return "add";
        case ref::binop::sub: return "sub";
        case ref::binop::mul: return "mul";
        case ref::binop::div: return "div";
    }
    return "?";
}

fill nonzero() {
    return fill::with([](std::mt19937 & r, const int64_t *) {
        std::uniform_real_distribution<double> u(0.5, 1.5);
        return (r() & 1) ? u(r) : -u(r);
    });
}

std::vector<op_case> make_cases() {
    std::vector<op_case> cs;
    auto add = [&](const std::string & desc, std::function<void(builder &)> build, bops::refs_fn r, tolerance tol) {
        op_case c;
        c.desc  = desc;
        c.name  = bops::sanitize_name(desc);
        c.build = std::move(build);
        c.ref   = std::move(r);
        c.tol   = tol;
        cs.push_back(std::move(c));
    };
    const ggml_type F32 = GGML_TYPE_F32;

    for (int64_t n : k_lengths) {
        const ne4 s = {n, rows_for(n), 1, 1};
        for (const unary_case & u : k_unary) {
            add(std::string("unary ") + ggml_unary_op_name(u.op) + " " + len_name(n),
                [=](builder & b) { b.out = ggml_unary(b.ctx, b.src(F32, s, layout::cont, fill::range(u.lo, u.hi)), u.op); },
                [=](const std::vector<dense> & x, dense *) { return ref::unary(u.r, x[0]); },
                u.exact ? tolerance{} : tol_rel(1e-5, 1e-6));
        }
        add("sqr " + len_name(n), [=](builder & b) { b.out = ggml_sqr(b.ctx, b.src(F32, s)); },
            [](const std::vector<dense> & x, dense *) { return ref::sqr(x[0]); }, tol_rel(1e-6));
        add("sqrt " + len_name(n), [=](builder & b) { b.out = ggml_sqrt(b.ctx, b.src(F32, s, layout::cont, fill::range(0, 4))); },
            [](const std::vector<dense> & x, dense *) { return ref::sqrt(x[0]); }, tol_rel(1e-6));
        add("scale_bias " + len_name(n), [=](builder & b) { b.out = ggml_scale_bias(b.ctx, b.src(F32, s), 0.7f, -0.3f); },
            [](const std::vector<dense> & x, dense *) { return ref::scale(x[0], 0.7f, -0.3f); }, tol_rel(1e-6, 1e-7));
        for (const glu_case & g : k_glu) {
            add(std::string("glu ") + g.name + " " + len_name(n),
                [=](builder & b) {
                    ggml_tensor * a = b.src(F32, s, layout::cont, fill::range(-6, 6));
                    ggml_tensor * y = b.src(F32, s);
                    b.out           = ggml_glu_split(b.ctx, a, y, g.op);
                },
                [=](const std::vector<dense> & x, dense *) { return ref::glu(g.r, x[0], &x[1], false); }, tol_rel(1e-5, 1e-6));
        }
        for (ref::binop op : {ref::binop::add, ref::binop::sub, ref::binop::mul, ref::binop::div}) {
            const fill fb = op == ref::binop::div ? nonzero() : fill{};
            // same shape, a row broadcast over rows, one scalar
            for (int bk = 0; bk < 3; ++bk) {
                const ne4         sb   = bk == 0 ? s : bk == 1 ? ne4{n, 1, 1, 1} : ne4{1, 1, 1, 1};
                const char *      what = bk == 0 ? "" : bk == 1 ? " row-broadcast" : " scalar";
                add(std::string(binop_name(op)) + what + " " + len_name(n),
                    [=](builder & b) {
                        ggml_tensor * x = b.src(F32, s); // operands recorded in order (a, b)
                        b.out           = make_binary(b.ctx, op, x, b.src(F32, sb, layout::cont, fb));
                    },
                    [=](const std::vector<dense> & x, dense *) { return ref::binary(op, x[0], x[1]); }, tol_rel(1e-6));
            }
            // padded rows of a (row stride past the row, element offset)
            add(std::string(binop_name(op)) + " a-pad " + len_name(n),
                [=](builder & b) {
                    ggml_tensor * x = b.src(F32, s, layout::pad);
                    b.out           = make_binary(b.ctx, op, x, b.src(F32, s, layout::cont, fb));
                },
                [=](const std::vector<dense> & x, dense *) { return ref::binary(op, x[0], x[1]); }, tol_rel(1e-6));
        }
        // conversions (bounds: the destination type's rounding; bit-exactness is RowKernelBits')
        const std::pair<ggml_type, ggml_type> cvt[] = {
            {F32, GGML_TYPE_F16}, {GGML_TYPE_F16, F32}, {F32, GGML_TYPE_BF16}, {GGML_TYPE_BF16, F32}};
        for (auto p : cvt) {
            const ggml_type td = p.second;
            add(std::string("cpy ") + ggml_type_name(p.first) + " -> " + ggml_type_name(td) + " " + len_name(n),
                [=](builder & b) { b.out = ggml_cpy(b.ctx, b.src(p.first, s, layout::cont, fill::range(-60000, 60000)), b.in(td, s)); },
                [=](const std::vector<dense> & x, dense *) {
                    dense o = x[0];
                    for (double & v : o.v) v = td == GGML_TYPE_F16 ? ref::round_f16(v) : td == GGML_TYPE_BF16 ? ref::round_bf16(v) : v;
                    return o;
                },
                tolerance{});
        }
        for (int rms = 0; rms < 2; ++rms) {
            for (layout l : {layout::cont, layout::pad}) {
                const float eps = rms ? 1e-6f : 1e-5f;
                add(std::string(rms ? "rms_norm " : "norm ") + layout_name(l) + " " + len_name(n),
                    [=](builder & b) {
                        // an offset keeps norm's mean subtraction honest
                        ggml_tensor * x = b.src(F32, s, l, rms ? fill::range(-2, 2) : fill::range(3, 5));
                        b.out           = rms ? ggml_rms_norm(b.ctx, x, eps) : ggml_norm(b.ctx, x, eps);
                    },
                    [=](const std::vector<dense> & x, dense *) { return rms ? ref::rms_norm(x[0], eps) : ref::norm(x[0], eps); },
                    tol_rel(1e-5, 1e-5));
            }
        }
        // soft_max: plain, and with an F32 / F16 mask (-inf entries, element 0 kept finite), scale
        const fill mask_fill = fill::with([](std::mt19937 & r, const int64_t * i) {
            std::uniform_real_distribution<double> u(-1, 1);
            if (i[0] > 0 && r() % 8 == 0) return -std::numeric_limits<double>::infinity();
            return u(r);
        });
        add("soft_max " + len_name(n), [=](builder & b) { b.out = ggml_soft_max(b.ctx, b.src(F32, s, layout::cont, fill::range(-6, 6))); },
            [](const std::vector<dense> & x, dense *) { return ref::soft_max(x[0], nullptr, 1.0, 0.0); }, tol_rel(1e-5, 1e-7));
        for (ggml_type mt : {F32, GGML_TYPE_F16}) {
            add(std::string("soft_max_ext mask ") + ggml_type_name(mt) + " " + len_name(n),
                [=](builder & b) {
                    ggml_tensor * x = b.src(F32, s, layout::cont, fill::range(-8, 8));
                    ggml_tensor * m = b.src(mt, {n, s[1], 1, 1}, layout::cont, mask_fill);
                    b.out           = ggml_soft_max_ext(b.ctx, x, m, 0.125f, 0.0f);
                },
                [=](const std::vector<dense> & x, dense *) { return ref::soft_max(x[0], &x[1], 0.125f, 0.0); }, tol_rel(1e-5, 1e-7));
        }
    }

    // rope: head widths whose halves are 1, 7, 15, 17, 33 and the DiT's 128 (3072 = 24 heads), a
    // partial rotation (n_dims < head width), both layouts, positions up to a few thousand
    struct rope_shape {
        int64_t hd, heads, toks;
        int     n_dims;
    };
    const rope_shape rs[] = {{2, 3, 5, 2}, {14, 3, 5, 14}, {34, 3, 5, 30}, {34, 2, 4, 34}, {66, 2, 4, 66}, {128, 24, 4, 128}};
    for (const rope_shape & r : rs) {
        for (int mode : {0, GGML_ROPE_TYPE_NEOX}) {
            const ne4 na = {r.hd, r.heads, r.toks, 1};
            add("rope " + bops::sanitize_name(std::to_string(r.hd) + "x" + std::to_string(r.heads)) + " n_dims " +
                    std::to_string(r.n_dims) + (mode ? " neox" : " normal"),
                [=](builder & b) {
                    ggml_tensor * a   = b.src(F32, na);
                    ggml_tensor * pos = b.src(GGML_TYPE_I32, {r.toks, 1, 1, 1}, layout::cont, fill::ints(0, 4096));
                    b.out = ggml_rope_ext(b.ctx, a, pos, nullptr, r.n_dims, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
                },
                [=](const std::vector<dense> & x, dense *) {
                    std::vector<int32_t> pos;
                    for (double p : x[1].v) pos.push_back((int32_t) p);
                    return ref::rope(x[0], pos, nullptr, r.n_dims, mode, 0, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0);
                },
                tol_rel(0.0, 1e-4));
        }
    }
    return cs;
}

const std::vector<op_case> & cases() {
    static const std::vector<op_case> c = make_cases();
    return c;
}

struct param {
    size_t      idx;
    std::string level;
    std::string name;
};
void PrintTo(const param & p, std::ostream * os) { *os << p.name; }

std::vector<param> make_params() {
    std::vector<param> ps;
    for (const std::string & lv : test_isa::runnable_levels()) {
        for (size_t i = 0; i < cases().size(); ++i) ps.push_back({i, lv, lv + "_" + cases()[i].name});
    }
    return ps;
}

class RowKernels : public ::testing::TestWithParam<param> {};

TEST_P(RowKernels, MatchesReference) {
    const param &        p = GetParam();
    test_isa::scoped_cap cap(p.level.c_str());
    ASSERT_EQ(std::string(ggml_cpu_get_isa()), p.level);
    ggml_backend_t be = ggml_backend_cpu_init();
    ASSERT_NE(be, nullptr);
    const bops::result r = bops::run_case(cases()[p.idx], be, 2);
    ggml_backend_free(be);
    EXPECT_EQ(r.status, bops::result::pass) << r.message;
}

INSTANTIATE_TEST_SUITE_P(Levels, RowKernels, ::testing::ValuesIn(make_params()),
                         [](const ::testing::TestParamInfo<param> & info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------
// bit-level promises, on raw graphs

// One op on the CPU (2 threads) at the active level; returns the output's bytes.
struct one_op {
    ggml_context * ctx = nullptr;
    explicit one_op(size_t mb = 256) {
        ggml_init_params ip = {mb << 20, nullptr, false};
        ctx                 = ggml_init(ip);
    }
    ~one_op() { ggml_free(ctx); }
    std::vector<uint8_t> run(ggml_tensor * out) {
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
        EXPECT_EQ(ggml_graph_compute_with_ctx(ctx, gf, 2), GGML_STATUS_SUCCESS);
        const uint8_t * d = (const uint8_t *) out->data;
        return std::vector<uint8_t>(d, d + ggml_nbytes(out));
    }
};

std::vector<std::string> fast_levels() {
    std::vector<std::string> f;
    for (const std::string & lv : test_isa::runnable_levels()) {
        if (lv != "portable") f.push_back(lv);
    }
    return f;
}

uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

// F32 inputs that reach every rounding case: a stride through all bit patterns (both signs, NaN
// payloads, subnormals, infinities) plus the F16/BF16 boundary values.
std::vector<float> conversion_inputs() {
    std::vector<float> v;
    for (uint64_t b = 0; b < (1ull << 32); b += 65521) {
        const uint32_t u = (uint32_t) b;
        float          f;
        memcpy(&f, &u, 4);
        v.push_back(f);
    }
    const uint32_t special[] = {0x477FE000u, 0x477FEFFFu, 0x477FF000u, 0x33000000u, 0x33000001u, 0x38800000u, 0x387FFFFFu,
                                0x7F800001u, 0xFF800001u, 0x7FC00000u, 0x7F7FFFFFu, 0x00000001u, 0x3F808000u, 0x3F818000u};
    for (uint32_t u : special) {
        for (uint32_t sgn : {0u, 0x80000000u}) {
            float f;
            const uint32_t w = u | sgn;
            memcpy(&f, &w, 4);
            v.push_back(f);
        }
    }
    while (v.size() % 64 != 17) v.push_back(1.0f / 3.0f); // a tail for every vector width
    return v;
}

TEST(RowKernelBits, conversions_equal_the_scalar_ones_at_every_level) {
    const std::vector<float> xs = conversion_inputs();
    const int64_t            n  = (int64_t) xs.size();
    for (const std::string & lv : test_isa::runnable_levels()) {
        test_isa::scoped_cap cap(lv.c_str());
        SCOPED_TRACE("isa " + lv);
        for (ggml_type t : {GGML_TYPE_F16, GGML_TYPE_BF16}) {
            SCOPED_TRACE(ggml_type_name(t));
            one_op        g;
            ggml_tensor * x = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, n);
            memcpy(x->data, xs.data(), (size_t) n * 4);
            const std::vector<uint8_t> narrow = g.run(ggml_cpy(g.ctx, x, ggml_new_tensor_1d(g.ctx, t, n)));
            int                        bad    = 0;
            for (int64_t i = 0; i < n && bad < 5; ++i) {
                uint16_t want;
                if (t == GGML_TYPE_F16) want = ggml_fp32_to_fp16(xs[i]);
                else                    want = ggml_fp32_to_bf16(xs[i]).bits;
                uint16_t got;
                memcpy(&got, narrow.data() + 2 * i, 2);
                if (got != want) {
                    ++bad;
                    ADD_FAILURE() << "narrow 0x" << std::hex << bits_of(xs[i]) << ": got 0x" << got << ", want 0x" << want;
                }
            }
            // every 16-bit pattern back to F32, a length with a tail
            const int64_t m = 65536 + 7;
            ggml_tensor * h = ggml_new_tensor_1d(g.ctx, t, m);
            for (int64_t i = 0; i < m; ++i) ((uint16_t *) h->data)[i] = (uint16_t) (i & 0xFFFF);
            const std::vector<uint8_t> wide = g.run(ggml_cpy(g.ctx, h, ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, m)));
            for (int64_t i = 0; i < m && bad < 10; ++i) {
                const uint16_t hb = (uint16_t) (i & 0xFFFF);
                float          wf;
                if (t == GGML_TYPE_F16) wf = ggml_fp16_to_fp32(hb);
                else {
                    ggml_bf16_t b;
                    b.bits = hb;
                    wf     = ggml_bf16_to_fp32(b);
                }
                uint32_t got;
                memcpy(&got, wide.data() + 4 * i, 4);
                if (got != bits_of(wf)) {
                    ++bad;
                    ADD_FAILURE() << "widen 0x" << std::hex << hb << ": got 0x" << got << ", want 0x" << bits_of(wf);
                }
            }
        }
    }
}

// rms_norm's two roundings, written out in scalar code:
//  fast levels: sum of squares in double over 16 lanes (element i in lane i % 16), lanes k and
//    k + 8 added, then 4 + 4, 2 + 2, 1 + 1; scale = float(1/sqrt(ss/n + eps)); y = x * scale in float.
//  portable: sequential double sum, scale in double, y = float(double(x) * scale).
std::vector<float> rms_norm_scalar(const float * x, int64_t n, float eps, bool fast) {
    std::vector<float> y((size_t) n);
    if (fast) {
        double lane[16] = {0};
        for (int64_t i = 0; i < n; ++i) lane[i % 16] += (double) x[i] * (double) x[i];
        double c[8], q[4];
        for (int k = 0; k < 8; ++k) c[k] = lane[k] + lane[k + 8];
        for (int k = 0; k < 4; ++k) q[k] = c[k + 4] + c[k];
        const double ss = (q[2] + q[0]) + (q[3] + q[1]);
        const float  sc = (float) (1.0 / std::sqrt(ss / (double) n + (double) eps));
        for (int64_t i = 0; i < n; ++i) y[(size_t) i] = x[i] * sc;
    } else {
        double ss = 0.0;
        for (int64_t i = 0; i < n; ++i) ss += (double) x[i] * (double) x[i];
        const double sc = 1.0 / std::sqrt(ss / (double) n + (double) eps);
        for (int64_t i = 0; i < n; ++i) y[(size_t) i] = (float) ((double) x[i] * sc);
    }
    return y;
}

TEST(RowKernelBits, rms_norm_rounds_like_the_avx512_kernel_at_every_fast_level) {
    std::mt19937                          rng(7);
    std::uniform_real_distribution<float> u(-3.0f, 3.0f);
    for (const std::string & lv : test_isa::runnable_levels()) {
        test_isa::scoped_cap cap(lv.c_str());
        SCOPED_TRACE("isa " + lv);
        const bool fast = lv != "portable";
        for (int64_t n : k_lengths) {
            SCOPED_TRACE("n " + std::to_string(n));
            const int64_t rows = 3;
            one_op        g(64);
            ggml_tensor * x  = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, n, rows);
            float *       xd = (float *) x->data;
            for (int64_t i = 0; i < n * rows; ++i) xd[i] = u(rng) * (i % 5 == 0 ? 1000.0f : 1.0f); // wide magnitudes
            const std::vector<uint8_t> got = g.run(ggml_rms_norm(g.ctx, x, 1e-6f));
            for (int64_t r = 0; r < rows; ++r) {
                const std::vector<float> want = rms_norm_scalar(xd + r * n, n, 1e-6f, fast);
                ASSERT_EQ(memcmp(got.data() + r * n * 4, want.data(), (size_t) n * 4), 0) << "row " << r;
            }
        }
    }
}

// The outputs whose bits every fast level promises (vec-avx2.h / vec-avx512.h / vec-neon-rows.h:
// same algorithms, coefficients and operation order): each fast-path unary map over a sweep of
// [-120, 120] plus the special values, and rope (cache and rotation) in both modes.
std::vector<std::vector<uint8_t>> promised_bit_outputs(const std::string & lv) {
    std::vector<float> xs;
    for (int i = 0; i < 40000 + 17; ++i) xs.push_back(-120.0f + 240.0f * (float) i / 40000.0f);
    for (float s : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f, -1e-40f, 88.7f, 89.5f, -104.5f, -110.0f}) xs.push_back(s);
    const int64_t                     n = (int64_t) xs.size();
    test_isa::scoped_cap              cap(lv.c_str());
    std::vector<std::vector<uint8_t>> outs;
    for (const unary_case & u : k_unary) {
        one_op        g(16);
        ggml_tensor * x = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, n);
        memcpy(x->data, xs.data(), (size_t) n * 4);
        outs.push_back(g.run(ggml_unary(g.ctx, x, u.op)));
    }
    for (int mode : {0, GGML_ROPE_TYPE_NEOX}) {
        one_op        g(16);
        ggml_tensor * a   = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, 130, 3, 7);
        ggml_tensor * pos = ggml_new_tensor_1d(g.ctx, GGML_TYPE_I32, 7);
        for (int64_t i = 0; i < ggml_nelements(a); ++i) ((float *) a->data)[i] = xs[(size_t) (i * 37) % 40000] / 100.0f;
        for (int i = 0; i < 7; ++i) ((int32_t *) pos->data)[i] = i * 1237;
        outs.push_back(g.run(ggml_rope_ext(g.ctx, a, pos, nullptr, 126, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f)));
    }
    return outs;
}

// FNV-1a over F32 outputs, every NaN counted as one value (NaN sign and payload are not promised:
// x86 and AArch64 make different default NaNs)
uint64_t digest(const std::vector<uint8_t> & bytes) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
        uint32_t u;
        memcpy(&u, bytes.data() + i, 4);
        if ((u & 0x7FFFFFFFu) > 0x7F800000u) u = 0x7FC00000u;
        for (int k = 0; k < 4; ++k) {
            h ^= (u >> (8 * k)) & 0xFFu;
            h *= 1099511628211ull;
        }
    }
    return h;
}

// Needs two fast levels.
TEST(RowKernelBits, fast_levels_agree_bit_for_bit) {
    const std::vector<std::string> fl = fast_levels();
    if (fl.size() < 2) GTEST_SKIP() << "one fast level on this CPU: nothing to compare";
    const auto base = promised_bit_outputs(fl[0]);
    for (size_t k = 1; k < fl.size(); ++k) {
        const auto other = promised_bit_outputs(fl[k]);
        ASSERT_EQ(other.size(), base.size());
        for (size_t j = 0; j < base.size(); ++j) {
            EXPECT_TRUE(other[j] == base[j]) << fl[k] << " vs " << fl[0] << ": output " << j << " differs";
        }
    }
}

// Across architectures: the digests of those outputs as the x86 kernels (avx2 and avx512, which
// agree above) produce them, so an AArch64 run (neon) proves the same bits without an x86 machine
// at hand, and an x86 run guards the recorded values. Output order: the k_unary maps, rope normal,
// rope neox.
TEST(RowKernelBits, fast_levels_match_the_recorded_x86_bits) {
    const std::vector<std::string> fl = fast_levels();
    if (fl.empty()) GTEST_SKIP() << "no fast level on this CPU";
    const uint64_t want[] = {
        0x140ce8dba23951bcull, 0xe3a0fa474688e988ull, 0x011b2eca67c95717ull,
        0x7a97a6efc7bf5507ull, 0xed5f3a008e8de3a7ull, 0x867100bb0dc5e1b2ull,
        0x4c73606b670c10a5ull, 0x2b20a56985679b5full, 0x7d9ff3ed245bfa93ull,
        0x5eba58fc76287a93ull, 0xad69f2bbcdfce26eull, 0x8b38ec1558dfc868ull,
    };
    for (const std::string & lv : fl) {
        const auto outs = promised_bit_outputs(lv);
        ASSERT_EQ(outs.size(), sizeof(want) / sizeof(want[0]));
        for (size_t j = 0; j < outs.size(); ++j) {
            const uint64_t got = digest(outs[j]);
            EXPECT_EQ(got, want[j]) << "isa " << lv << ", output " << j << " (" << std::hex << "0x" << got << ")";
        }
    }
}

} // namespace
