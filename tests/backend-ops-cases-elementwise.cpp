// Cases: binary ops, sqr/sqrt, scale/scale_bias, unary ops, GLU, norms and softmax.
//
// Error bounds (per element, |got-ref| <= abs + rel*|ref|):
//   F32 arithmetic (add/sub/mul/div/sqr/sqrt/scale): rel 1e-6 (one rounding is 6e-8).
//   F32 transcendental unary/glu: abs 1e-6, rel 1e-5 (vectorised exp/tanh/erf allow a few ulp).
//   exact unary (abs, neg, relu, floor, ...): exact.
//   F16 / BF16 outputs add the storage rounding: rel 1e-3 / 8e-3.
//   norm/rms_norm: abs 1e-5 + rel 1e-5; softmax: abs 1e-7 + rel 1e-5.

#include "backend-ops-cases.h"

#include <cmath>
#include <limits>

namespace bops {

// The whole table, in this order (declared in backend-ops-harness.h); shared by test-backend-ops
// and test-vulkan, which both link every backend-ops-cases-*.cpp.
const std::vector<op_case> & all_cases() {
    static const std::vector<op_case> cases = [] {
        case_list cl;
        add_elementwise_cases(cl);
        add_norm_cases(cl);
        add_matmul_cases(cl);
        add_copy_cases(cl);
        add_quant_cases(cl);
        add_rope_cases(cl);
        add_attention_cases(cl);
        add_layout_cases(cl);
        add_conv_cases(cl);
        add_client_cases(cl);
        return std::move(cl.v);
    }();
    return cases;
}

void case_list::add(const std::string & desc, std::function<void(builder &)> build, refs_fn ref, tolerance tol) {
    op_case c;
    c.desc = desc;
    c.name = sanitize_name(desc);
    for (int k = 2; names.count(c.name); k++) c.name = sanitize_name(desc) + "_" + std::to_string(k);
    names.insert(c.name);
    c.build    = std::move(build);
    c.ref      = std::move(ref);
    c.tol      = tol;
    v.push_back(std::move(c));
}

std::string sh(ne4 ne) {
    return std::to_string(ne[0]) + "x" + std::to_string(ne[1]) + "x" + std::to_string(ne[2]) + "x" +
           std::to_string(ne[3]);
}

const char * tn(ggml_type t) { return ggml_type_name(t); }

tolerance for_type(ggml_type out, tolerance base) {
    if (out == GGML_TYPE_F16) {
        base.rel = std::max(base.rel, 1e-3);
        base.abs = std::max(base.abs, 1e-7); // half subnormal spacing is 6e-8
    } else if (out == GGML_TYPE_BF16) {
        base.rel = std::max(base.rel, 8e-3);
        base.abs = std::max(base.abs, 1e-30);
    }
    return base;
}

static tolerance tol_rel(double rel, double abs = 0) {
    tolerance t;
    t.rel = rel;
    t.abs = abs;
    return t;
}

// ---------------------------------------------------------------------------------------------
// binary

static const char * binop_name(ref::binop op) {
    switch (op) {
        case ref::binop::add: return "add";
        case ref::binop::sub: return "sub";
        case ref::binop::mul: return "mul";
        case ref::binop::div: return "div";
    }
    return "?";
}

static ggml_tensor * make_binary(ggml_context * ctx, ref::binop op, bool inplace, ggml_tensor * a, ggml_tensor * b) {
    switch (op) {
        case ref::binop::add: return inplace ? ggml_add_inplace(ctx, a, b) : ggml_add(ctx, a, b);
        case ref::binop::sub: return inplace ? ggml_sub_inplace(ctx, a, b) : ggml_sub(ctx, a, b);
        case ref::binop::mul: return inplace ? ggml_mul_inplace(ctx, a, b) : ggml_mul(ctx, a, b);
        case ref::binop::div: return inplace ? ggml_div_inplace(ctx, a, b) : ggml_div(ctx, a, b);
    }
    return nullptr;
}

// values of magnitude in [0.5, 1.5] with random sign: a safe divisor
static fill nonzero() {
    return fill::with([](std::mt19937 & r, const int64_t *) {
        std::uniform_real_distribution<double> u(0.5, 1.5);
        return (r() & 1) ? u(r) : -u(r);
    });
}

static void add_binary(case_list & cl, ref::binop op, ggml_type ta, ggml_type tb, ne4 na, ne4 nb, layout la,
                       layout lb, bool inplace) {
    const std::string desc = std::string(binop_name(op)) + (inplace ? "_inplace" : "") + " a " + tn(ta) + " " +
                             sh(na) + " " + layout_name(la) + " b " + tn(tb) + " " + sh(nb) + " " + layout_name(lb);
    cl.add(
        desc,
        [=](builder & b) {
            ggml_tensor * x = b.src(ta, na, la);
            ggml_tensor * y = b.src(tb, nb, lb, op == ref::binop::div ? nonzero() : fill{});
            b.out           = make_binary(b.ctx, op, inplace, x, y);
        },
        [=](const std::vector<dense> & s, dense *) { return ref::binary(op, s[0], s[1]); },
        for_type(ta, tol_rel(1e-6)));
}

static void binary_cases(case_list & cl) {
    const ref::binop ops[] = {ref::binop::add, ref::binop::sub, ref::binop::mul, ref::binop::div};
    const std::pair<ggml_type, ggml_type> types[] = {
        {GGML_TYPE_F32, GGML_TYPE_F32},   {GGML_TYPE_F16, GGML_TYPE_F16}, {GGML_TYPE_BF16, GGML_TYPE_BF16},
        {GGML_TYPE_F16, GGML_TYPE_F32},   {GGML_TYPE_BF16, GGML_TYPE_F32},
    };
    const std::pair<ne4, ne4> shapes[] = {
        {{1, 1, 1, 1}, {1, 1, 1, 1}},     {{7, 3, 1, 1}, {7, 3, 1, 1}},   {{33, 5, 3, 2}, {33, 5, 3, 2}},
        {{33, 5, 3, 2}, {33, 1, 1, 1}},   {{33, 5, 3, 2}, {1, 5, 3, 2}},  {{16, 4, 6, 2}, {16, 4, 3, 1}},
        {{65, 3, 2, 2}, {1, 1, 1, 1}},    {{127, 2, 1, 1}, {127, 2, 1, 1}},
    };
    for (auto op : ops) {
        for (auto tp : types)
            for (auto s : shapes) add_binary(cl, op, tp.first, tp.second, s.first, s.second, layout::cont, layout::cont, false);
        const ggml_type f = GGML_TYPE_F32;
        add_binary(cl, op, f, f, {33, 5, 3, 2}, {33, 5, 3, 2}, layout::pad, layout::cont, false);
        add_binary(cl, op, f, f, {33, 5, 3, 2}, {33, 5, 1, 2}, layout::perm12, layout::cont, false);
        add_binary(cl, op, f, f, {7, 9, 2, 1}, {7, 9, 2, 1}, layout::trans, layout::trans, false);
        add_binary(cl, op, f, f, {7, 9, 2, 3}, {7, 1, 2, 3}, layout::perm, layout::perm12, false);
        add_binary(cl, op, f, f, {33, 5, 3, 2}, {33, 5, 3, 2}, layout::cont, layout::trans, false);
        add_binary(cl, op, f, f, {4096, 16, 1, 1}, {4096, 1, 1, 1}, layout::cont, layout::cont, false);
        add_binary(cl, op, f, f, {33, 5, 3, 2}, {33, 1, 3, 1}, layout::cont, layout::cont, true);
        add_binary(cl, op, f, f, {33, 5, 3, 2}, {33, 5, 3, 2}, layout::pad, layout::cont, true);
        add_binary(cl, op, GGML_TYPE_F16, f, {65, 3, 2, 1}, {65, 3, 1, 1}, layout::cont, layout::cont, true);
        add_binary(cl, op, GGML_TYPE_F16, GGML_TYPE_F16, {33, 5, 3, 2}, {33, 5, 3, 2}, layout::perm12, layout::cont, false);
    }
}

// ---------------------------------------------------------------------------------------------
// sqr / sqrt / scale

static void sqr_sqrt_scale_cases(case_list & cl) {
    const ggml_type types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};
    const ne4       shapes[] = {{1, 1, 1, 1}, {7, 3, 1, 1}, {33, 5, 3, 2}, {4096, 3, 1, 1}};
    for (int which = 0; which < 2; which++) {
        const char * nm = which ? "sqrt" : "sqr";
        for (ggml_type t : types)
        for (auto s : shapes)
        for (int ip = 0; ip < 2; ip++)
        for (layout l : {layout::cont, layout::pad, layout::perm12}) {
            if (l != layout::cont && (s[0] == 1 || ip)) continue;
            const std::string desc = std::string(nm) + (ip ? "_inplace " : " ") + tn(t) + " " + sh(s) + " " + layout_name(l);
            cl.add(
                desc,
                [=](builder & b) {
                    ggml_tensor * x = b.src(t, s, l, which ? fill::range(0.0, 4.0) : fill::range(-2, 2));
                    if (which) b.out = ip ? ggml_sqrt_inplace(b.ctx, x) : ggml_sqrt(b.ctx, x);
                    else       b.out = ip ? ggml_sqr_inplace(b.ctx, x) : ggml_sqr(b.ctx, x);
                },
                [=](const std::vector<dense> & s_, dense *) { return which ? ref::sqrt(s_[0]) : ref::sqr(s_[0]); },
                for_type(t, tol_rel(1e-6)));
        }
    }
    // scale asserts rows packed and dims 2/3 packed: contiguous and padded-row views only
    for (auto s : shapes)
    for (int bias = 0; bias < 2; bias++)
    for (int ip = 0; ip < 2; ip++)
    for (layout l : {layout::cont, layout::pad}) {
        const float sc = -1.75f, bi = bias ? 0.375f : 0.0f;
        const std::string desc = std::string(bias ? "scale_bias" : "scale") + (ip ? "_inplace " : " ") + "f32 " +
                                 sh(s) + " " + layout_name(l);
        cl.add(
            desc,
            [=](builder & b) {
                ggml_tensor * x = b.src(GGML_TYPE_F32, s, l);
                if (bias) b.out = ip ? ggml_scale_bias_inplace(b.ctx, x, sc, bi) : ggml_scale_bias(b.ctx, x, sc, bi);
                else      b.out = ip ? ggml_scale_inplace(b.ctx, x, sc) : ggml_scale(b.ctx, x, sc);
            },
            [=](const std::vector<dense> & s_, dense * mag) {
                // x*s + b rounds the product first unless the compiler fuses it into an FMA (it
                // may with -march=native, not without): with cancellation that rounding of |x*s|,
                // not the small result, bounds the error
                *mag = ref::scale(s_[0], sc, 0.0);
                for (double & v : mag->v) v = std::fabs(v);
                return ref::scale(s_[0], sc, bi);
            },
            tolerance{0.0, 1e-6, 0x1p-24, -1.0});
    }
    for (ggml_type t : {GGML_TYPE_F16, GGML_TYPE_BF16}) {
        cl.add(std::string("scale_bias ") + tn(t) + " 33x5x3x2",
               [=](builder & b) { b.out = ggml_scale_bias(b.ctx, b.src(t, {33, 5, 3, 2}), 0.5f, -0.25f); },
               [=](const std::vector<dense> & s_, dense *) { return ref::scale(s_[0], 0.5, -0.25); },
               for_type(t, tol_rel(1e-6)));
    }
}

// ---------------------------------------------------------------------------------------------
// unary

struct unary_info {
    ggml_unary_op id;
    ref::unop     r;
    bool          exact;
    double        lo, hi;
    bool          has_inplace;
};

static const unary_info k_unary[] = {
    {GGML_UNARY_OP_ABS, ref::unop::abs, true, -3, 3, true},
    {GGML_UNARY_OP_SGN, ref::unop::sgn, true, -3, 3, false},
    {GGML_UNARY_OP_NEG, ref::unop::neg, true, -3, 3, true},
    {GGML_UNARY_OP_STEP, ref::unop::step, true, -3, 3, false},
    {GGML_UNARY_OP_TANH, ref::unop::tanh, false, -4, 4, true},
    {GGML_UNARY_OP_ELU, ref::unop::elu, false, -4, 4, false},
    {GGML_UNARY_OP_RELU, ref::unop::relu, true, -3, 3, true},
    {GGML_UNARY_OP_SIGMOID, ref::unop::sigmoid, false, -8, 8, true},
    {GGML_UNARY_OP_GELU, ref::unop::gelu, false, -6, 6, true},
    {GGML_UNARY_OP_GELU_QUICK, ref::unop::gelu_quick, false, -6, 6, true},
    {GGML_UNARY_OP_SILU, ref::unop::silu, false, -8, 8, true},
    {GGML_UNARY_OP_HARDSWISH, ref::unop::hardswish, false, -5, 5, false},
    {GGML_UNARY_OP_HARDSIGMOID, ref::unop::hardsigmoid, false, -5, 5, false},
    {GGML_UNARY_OP_EXP, ref::unop::exp, false, -5, 5, true},
    {GGML_UNARY_OP_EXPM1, ref::unop::expm1, false, -3, 3, false},
    {GGML_UNARY_OP_SOFTPLUS, ref::unop::softplus, false, -25, 25, false},
    {GGML_UNARY_OP_GELU_ERF, ref::unop::gelu_erf, false, -6, 6, true},
    {GGML_UNARY_OP_FLOOR, ref::unop::floor, true, -5, 5, false},
    {GGML_UNARY_OP_CEIL, ref::unop::ceil, true, -5, 5, false},
    {GGML_UNARY_OP_ROUND, ref::unop::round, true, -5, 5, false},
    {GGML_UNARY_OP_TRUNC, ref::unop::trunc, true, -5, 5, false},
};

// the named wrappers must build the same op as ggml_unary
static ggml_tensor * unary_wrapper(ggml_context * ctx, ggml_unary_op op, ggml_tensor * a, bool inplace) {
    switch (op) {
        case GGML_UNARY_OP_ABS:         return inplace ? ggml_abs_inplace(ctx, a) : ggml_abs(ctx, a);
        case GGML_UNARY_OP_SGN:         return ggml_sgn(ctx, a);
        case GGML_UNARY_OP_NEG:         return inplace ? ggml_neg_inplace(ctx, a) : ggml_neg(ctx, a);
        case GGML_UNARY_OP_STEP:        return ggml_step(ctx, a);
        case GGML_UNARY_OP_TANH:        return inplace ? ggml_tanh_inplace(ctx, a) : ggml_tanh(ctx, a);
        case GGML_UNARY_OP_ELU:         return ggml_elu(ctx, a);
        case GGML_UNARY_OP_RELU:        return inplace ? ggml_relu_inplace(ctx, a) : ggml_relu(ctx, a);
        case GGML_UNARY_OP_SIGMOID:     return inplace ? ggml_sigmoid_inplace(ctx, a) : ggml_sigmoid(ctx, a);
        case GGML_UNARY_OP_GELU:        return inplace ? ggml_gelu_inplace(ctx, a) : ggml_gelu(ctx, a);
        case GGML_UNARY_OP_GELU_QUICK:  return inplace ? ggml_gelu_quick_inplace(ctx, a) : ggml_gelu_quick(ctx, a);
        case GGML_UNARY_OP_SILU:        return inplace ? ggml_silu_inplace(ctx, a) : ggml_silu(ctx, a);
        case GGML_UNARY_OP_HARDSWISH:   return ggml_hardswish(ctx, a);
        case GGML_UNARY_OP_HARDSIGMOID: return ggml_hardsigmoid(ctx, a);
        case GGML_UNARY_OP_EXP:         return inplace ? ggml_exp_inplace(ctx, a) : ggml_exp(ctx, a);
        case GGML_UNARY_OP_EXPM1:       return ggml_expm1(ctx, a);
        case GGML_UNARY_OP_SOFTPLUS:    return ggml_softplus(ctx, a);
        case GGML_UNARY_OP_GELU_ERF:    return inplace ? ggml_gelu_erf_inplace(ctx, a) : ggml_gelu_erf(ctx, a);
        case GGML_UNARY_OP_FLOOR:       return ggml_floor(ctx, a);
        case GGML_UNARY_OP_CEIL:        return ggml_ceil(ctx, a);
        case GGML_UNARY_OP_ROUND:       return ggml_round(ctx, a);
        case GGML_UNARY_OP_TRUNC:       return ggml_trunc(ctx, a);
        default: break;
    }
    return nullptr;
}

static void unary_cases(case_list & cl) {
    for (const unary_info & u : k_unary) {
        const tolerance base = u.exact ? tolerance{} : tol_rel(1e-5, 1e-6);
        const ne4       shapes[] = {{1, 1, 1, 1}, {7, 3, 1, 1}, {65, 3, 2, 2}, {1027, 5, 1, 1}};
        for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16})
        for (auto s : shapes) {
            if (t != GGML_TYPE_F32 && s[0] == 1027) continue;
            const std::string desc = std::string("unary ") + ggml_unary_op_name(u.id) + " " + tn(t) + " " + sh(s);
            cl.add(
                desc,
                [=](builder & b) { b.out = ggml_unary(b.ctx, b.src(t, s, layout::cont, fill::range(u.lo, u.hi)), u.id); },
                [=](const std::vector<dense> & s_, dense *) { return ref::unary(u.r, s_[0]); }, for_type(t, base));
        }
        // rows packed but padded / permuted dims; named wrapper; in-place through both entry points
        for (layout l : {layout::pad, layout::perm12}) {
            cl.add(std::string("unary ") + ggml_unary_op_name(u.id) + " f32 33x5x3x2 " + layout_name(l),
                   [=](builder & b) {
                       b.out = unary_wrapper(b.ctx, u.id, b.src(GGML_TYPE_F32, {33, 5, 3, 2}, l, fill::range(u.lo, u.hi)), false);
                   },
                   [=](const std::vector<dense> & s_, dense *) { return ref::unary(u.r, s_[0]); }, base);
        }
        cl.add(std::string("unary_inplace ") + ggml_unary_op_name(u.id) + " f32 33x5x3x2",
               [=](builder & b) {
                   b.out = ggml_unary_inplace(b.ctx, b.src(GGML_TYPE_F32, {33, 5, 3, 2}, layout::cont, fill::range(u.lo, u.hi)), u.id);
               },
               [=](const std::vector<dense> & s_, dense *) { return ref::unary(u.r, s_[0]); }, base);
        if (u.has_inplace) {
            cl.add(std::string("unary_wrapper_inplace ") + ggml_unary_op_name(u.id) + " f32 17x4x1x1 pad",
                   [=](builder & b) {
                       b.out = unary_wrapper(b.ctx, u.id, b.src(GGML_TYPE_F32, {17, 4, 1, 1}, layout::pad, fill::range(u.lo, u.hi)), true);
                   },
                   [=](const std::vector<dense> & s_, dense *) { return ref::unary(u.r, s_[0]); }, base);
        }
    }
    // rounding at exact .5 ties: half away from zero like roundf
    cl.add("unary round f32 ties",
           [](builder & b) {
               b.out = ggml_round(b.ctx, b.src(GGML_TYPE_F32, {16, 1, 1, 1}, layout::cont, fill::with([](std::mt19937 &, const int64_t * i) {
                   return (double) i[0] - 7.5;
               })));
           },
           [](const std::vector<dense> & s_, dense *) { return ref::unary(ref::unop::round, s_[0]); }, tolerance{});
}

// ---------------------------------------------------------------------------------------------
// glu

struct glu_info {
    ggml_glu_op id;
    ref::gluop  r;
};

static const glu_info k_glu[] = {
    {GGML_GLU_OP_REGLU, ref::gluop::reglu},         {GGML_GLU_OP_GEGLU, ref::gluop::geglu},
    {GGML_GLU_OP_SWIGLU, ref::gluop::swiglu},       {GGML_GLU_OP_GEGLU_ERF, ref::gluop::geglu_erf},
    {GGML_GLU_OP_GEGLU_QUICK, ref::gluop::geglu_quick},
};

static ggml_tensor * glu_wrapper(ggml_context * ctx, ggml_glu_op op, ggml_tensor * a, ggml_tensor * b, bool swapped) {
    switch (op) {
        case GGML_GLU_OP_REGLU:
            return b ? ggml_reglu_split(ctx, a, b) : swapped ? ggml_reglu_swapped(ctx, a) : ggml_reglu(ctx, a);
        case GGML_GLU_OP_GEGLU:
            return b ? ggml_geglu_split(ctx, a, b) : swapped ? ggml_geglu_swapped(ctx, a) : ggml_geglu(ctx, a);
        case GGML_GLU_OP_SWIGLU:
            return b ? ggml_swiglu_split(ctx, a, b) : swapped ? ggml_swiglu_swapped(ctx, a) : ggml_swiglu(ctx, a);
        case GGML_GLU_OP_GEGLU_ERF:
            return b ? ggml_geglu_erf_split(ctx, a, b) : swapped ? ggml_geglu_erf_swapped(ctx, a) : ggml_geglu_erf(ctx, a);
        case GGML_GLU_OP_GEGLU_QUICK:
            return b ? ggml_geglu_quick_split(ctx, a, b)
                     : swapped ? ggml_geglu_quick_swapped(ctx, a) : ggml_geglu_quick(ctx, a);
        default: break;
    }
    return nullptr;
}

static void glu_cases(case_list & cl) {
    const tolerance base = tol_rel(1e-5, 1e-6);
    for (const glu_info & g : k_glu)
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (int form = 0; form < 3; form++) // 0 packed, 1 packed swapped, 2 split
    for (ne4 s : {ne4{7, 3, 1, 1}, ne4{33, 4, 2, 3}, ne4{1, 1, 1, 1}}) {
        const bool split = form == 2, swapped = form == 1;
        const ne4  na    = split ? s : ne4{2 * s[0], s[1], s[2], s[3]};
        const std::string desc = std::string("glu ") + ggml_glu_op_name(g.id) + (split ? " split " : swapped ? " swapped " : " ") +
                                 tn(t) + " " + sh(na);
        cl.add(
            desc,
            [=](builder & b) {
                ggml_tensor * a = b.src(t, na, layout::cont, fill::range(-4, 4));
                ggml_tensor * y = split ? b.src(t, na, layout::cont, fill::range(-2, 2)) : nullptr;
                // alternate between the generic constructor and the named wrappers
                if (s[1] == 4) b.out = glu_wrapper(b.ctx, g.id, a, y, swapped);
                else           b.out = split ? ggml_glu_split(b.ctx, a, y, g.id) : ggml_glu(b.ctx, a, g.id, swapped);
            },
            [=](const std::vector<dense> & s_, dense *) {
                return ref::glu(g.r, s_[0], split ? &s_[1] : nullptr, swapped);
            },
            for_type(t, base));
    }
    // padded rows (contiguous_1 holds)
    for (const glu_info & g : k_glu) {
        cl.add(std::string("glu ") + ggml_glu_op_name(g.id) + " f32 66x5x2x1 pad",
               [=](builder & b) { b.out = ggml_glu(b.ctx, b.src(GGML_TYPE_F32, {66, 5, 2, 1}, layout::pad, fill::range(-4, 4)), g.id, false); },
               [=](const std::vector<dense> & s_, dense *) { return ref::glu(g.r, s_[0], nullptr, false); }, base);
    }
    for (ne4 s : {ne4{7, 3, 1, 1}, ne4{64, 5, 2, 1}}) {
        for (float limit : {7.0f, 0.75f}) {
            const float alpha = 1.702f;
            cl.add(std::string("swiglu_oai f32 ") + sh(s) + " limit " + std::to_string(limit),
                   [=](builder & b) {
                       ggml_tensor * a = b.src(GGML_TYPE_F32, s, layout::cont, fill::range(-4, 4));
                       ggml_tensor * y = b.src(GGML_TYPE_F32, s, layout::cont, fill::range(-4, 4));
                       b.out           = ggml_swiglu_oai(b.ctx, a, y, alpha, limit);
                   },
                   [=](const std::vector<dense> & s_, dense *) {
                       return ref::glu(ref::gluop::swiglu_oai, s_[0], &s_[1], false, (double) alpha, (double) limit);
                   },
                   base);
        }
    }
}

void add_elementwise_cases(case_list & cl) {
    binary_cases(cl);
    sqr_sqrt_scale_cases(cl);
    unary_cases(cl);
    glu_cases(cl);
}

// ---------------------------------------------------------------------------------------------
// norm / rms_norm / soft_max

void add_norm_cases(case_list & cl) {
    const tolerance tn_ = tol_rel(1e-5, 1e-5);
    for (int rms = 0; rms < 2; rms++)
    for (ne4 s : {ne4{1, 1, 1, 1}, ne4{7, 3, 1, 1}, ne4{33, 5, 3, 2}, ne4{4096, 2, 1, 1}, ne4{127, 3, 1, 2}})
    for (layout l : {layout::cont, layout::pad, layout::perm12})
    for (int ip = 0; ip < 2; ip++) {
        if ((l != layout::cont && (s[0] == 1 || s[0] == 4096)) || (ip && l == layout::perm12)) continue;
        const float eps = rms ? 1e-6f : 1e-5f;
        // an offset keeps norm's mean subtraction honest
        const fill  f   = rms ? fill::range(-2, 2) : fill::range(3, 5);
        const std::string desc = std::string(rms ? "rms_norm" : "norm") + (ip ? "_inplace" : "") + " f32 " + sh(s) + " " + layout_name(l);
        cl.add(
            desc,
            [=](builder & b) {
                ggml_tensor * x = b.src(GGML_TYPE_F32, s, l, f);
                if (rms) b.out = ip ? ggml_rms_norm_inplace(b.ctx, x, eps) : ggml_rms_norm(b.ctx, x, eps);
                else     b.out = ip ? ggml_norm_inplace(b.ctx, x, eps) : ggml_norm(b.ctx, x, eps);
            },
            [=](const std::vector<dense> & s_, dense *) { return rms ? ref::rms_norm(s_[0], eps) : ref::norm(s_[0], eps); },
            tn_);
    }
    // constant rows: variance 0, result 0 (norm) — eps keeps it finite
    cl.add("norm f32 constant rows 16x3",
           [](builder & b) { b.out = ggml_norm(b.ctx, b.src(GGML_TYPE_F32, {16, 3, 1, 1}, layout::cont, fill::with([](std::mt19937 &, const int64_t * i) { return (double) i[1] + 0.5; })), 1e-5f); },
           [](const std::vector<dense> & s_, dense *) { return ref::norm(s_[0], 1e-5f); }, tn_);

    // soft_max
    const tolerance tsm = tol_rel(1e-5, 1e-7);
    for (ne4 s : {ne4{1, 1, 1, 1}, ne4{7, 3, 1, 1}, ne4{33, 5, 3, 2}, ne4{4096, 2, 1, 1}, ne4{129, 7, 4, 1}})
    for (int ip = 0; ip < 2; ip++) {
        cl.add(std::string(ip ? "soft_max_inplace" : "soft_max") + " f32 " + sh(s),
               [=](builder & b) {
                   ggml_tensor * x = b.src(GGML_TYPE_F32, s, layout::cont, fill::range(-6, 6));
                   b.out           = ip ? ggml_soft_max_inplace(b.ctx, x) : ggml_soft_max(b.ctx, x);
               },
               [=](const std::vector<dense> & s_, dense *) { return ref::soft_max(s_[0], nullptr, 1.0, 0.0); }, tsm);
    }
    // masks: element 0 of every row stays finite so no row is fully masked (CPU does not special-case those)
    const fill mask_fill = fill::with([](std::mt19937 & r, const int64_t * i) {
        std::uniform_real_distribution<double> u(-1, 1);
        if (i[0] > 0 && r() % 8 == 0) return -std::numeric_limits<double>::infinity();
        return u(r);
    });
    struct sm_cfg { ne4 a; ne4 m; float scale, max_bias; };
    const sm_cfg cfgs[] = {
        {{7, 3, 1, 1}, {7, 3, 1, 1}, 1.0f, 0.0f},     {{33, 5, 3, 2}, {33, 5, 1, 1}, 0.125f, 0.0f},
        {{33, 5, 4, 2}, {33, 8, 2, 1}, 0.5f, 0.0f},   {{33, 5, 4, 2}, {33, 5, 4, 2}, 0.5f, 0.0f},
        {{64, 4, 8, 1}, {64, 4, 1, 1}, 0.25f, 8.0f},  {{17, 3, 6, 2}, {17, 3, 1, 2}, 1.0f, 4.0f},
        {{1000, 2, 2, 1}, {1000, 2, 1, 1}, 0.1f, 0.0f},
    };
    for (const sm_cfg & c : cfgs)
    for (ggml_type mt : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (int ip = 0; ip < 2; ip++) {
        if (ip && mt == GGML_TYPE_F16) continue;
        const std::string desc = std::string(ip ? "soft_max_ext_inplace" : "soft_max_ext") + " a " + sh(c.a) + " mask " +
                                 tn(mt) + " " + sh(c.m) + " scale " + std::to_string(c.scale) + " max_bias " +
                                 std::to_string(c.max_bias);
        cl.add(
            desc,
            [=](builder & b) {
                ggml_tensor * x = b.src(GGML_TYPE_F32, c.a, layout::cont, fill::range(-4, 4));
                ggml_tensor * m = b.src(mt, c.m, layout::cont, mask_fill);
                b.out = ip ? ggml_soft_max_ext_inplace(b.ctx, x, m, c.scale, c.max_bias)
                           : ggml_soft_max_ext(b.ctx, x, m, c.scale, c.max_bias);
            },
            [=](const std::vector<dense> & s_, dense *) { return ref::soft_max(s_[0], &s_[1], c.scale, c.max_bias); },
            tsm);
    }
    cl.add("soft_max_ext no mask scale 0.3 f32 65x4x2x1",
           [](builder & b) { b.out = ggml_soft_max_ext(b.ctx, b.src(GGML_TYPE_F32, {65, 4, 2, 1}, layout::cont, fill::range(-9, 9)), nullptr, 0.3f, 0.0f); },
           [](const std::vector<dense> & s_, dense *) { return ref::soft_max(s_[0], nullptr, 0.3f, 0.0); }, tsm);
}

} // namespace bops
