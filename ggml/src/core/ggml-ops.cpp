// ggml-ops.cpp — op constructors. They only record metadata (result shape/type, op, sources,
// op_params); kernels run later when a graph is computed.
//
// Conventions: results are fresh contiguous tensors unless stated; `_inplace` variants return a
// view of their first operand with the same op, so the kernel writes into that memory.

#include "ggml-impl.h"

#include <cmath>

namespace {

struct ggml_tensor * dup_or_view(struct ggml_context * ctx, struct ggml_tensor * a, bool inplace) {
    return inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
}

// ---------------------------------------------------------------------------------------------
// Elementwise

struct ggml_tensor * dup_impl(struct ggml_context * ctx, struct ggml_tensor * a, bool inplace) {
    struct ggml_tensor * result = dup_or_view(ctx, a, inplace);
    result->op                  = GGML_OP_DUP;
    result->src[0]              = a;
    return result;
}

struct ggml_tensor * binary_impl(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                 enum ggml_op op, bool inplace) {
    if (!ggml_can_repeat(b, a)) {
        GGML_ABORT("%s: b [%lld, %lld, %lld, %lld] cannot be broadcast to a [%lld, %lld, %lld, %lld]",
                   ggml_op_name(op), (long long) b->ne[0], (long long) b->ne[1], (long long) b->ne[2],
                   (long long) b->ne[3], (long long) a->ne[0], (long long) a->ne[1], (long long) a->ne[2],
                   (long long) a->ne[3]);
    }
    struct ggml_tensor * result = dup_or_view(ctx, a, inplace);
    result->op                  = op;
    result->src[0]              = a;
    result->src[1]              = b;
    return result;
}

struct ggml_tensor * simple_unary_impl(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_op op,
                                       bool inplace) {
    struct ggml_tensor * result = dup_or_view(ctx, a, inplace);
    result->op                  = op;
    result->src[0]              = a;
    return result;
}

struct ggml_tensor * scale_impl(struct ggml_context * ctx, struct ggml_tensor * a, float s, float b,
                                bool inplace) {
    GGML_ASSERT(ggml_is_padded_1d(a) && "scale: rows must be packed and dims 2/3 packed");
    struct ggml_tensor * result = dup_or_view(ctx, a, inplace);
    const float          params[2] = {s, b};
    ggml_set_op_params(result, params, sizeof(params));
    result->op     = GGML_OP_SCALE;
    result->src[0] = a;
    return result;
}

struct ggml_tensor * unary_impl(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_unary_op op,
                                bool inplace) {
    GGML_ASSERT(ggml_is_contiguous_rows(a) && "unary ops need elements inside a row to be adjacent");
    GGML_ASSERT((int) op >= 0 && op < GGML_UNARY_OP_COUNT);
    struct ggml_tensor * result = dup_or_view(ctx, a, inplace);
    ggml_set_op_params_i32(result, 0, (int32_t) op);
    result->op     = GGML_OP_UNARY;
    result->src[0] = a;
    return result;
}

struct ggml_tensor * glu_impl(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                              enum ggml_glu_op op, bool swapped) {
    GGML_ASSERT(ggml_is_contiguous_1(a) && "glu: a must have packed rows");
    GGML_ASSERT((int) op >= 0 && op < GGML_GLU_OP_COUNT);
    if (b != nullptr) {
        GGML_ASSERT(ggml_is_contiguous_1(b) && "glu: b must have packed rows");
        GGML_ASSERT(ggml_are_same_shape(a, b) && "glu: a and b must have the same shape");
        GGML_ASSERT(a->type == b->type && "glu: a and b must have the same type");
    }

    int64_t ne[GGML_MAX_DIMS];
    for (int i = 0; i < GGML_MAX_DIMS; i++) ne[i] = a->ne[i];
    if (b == nullptr) ne[0] = a->ne[0] / 2; // packed form: the two halves of each row

    struct ggml_tensor * result = ggml_new_tensor(ctx, a->type, GGML_MAX_DIMS, ne);
    ggml_set_op_params_i32(result, 0, (int32_t) op);
    ggml_set_op_params_i32(result, 1, swapped ? 1 : 0);
    result->op     = GGML_OP_GLU;
    result->src[0] = a;
    result->src[1] = b;
    return result;
}

struct ggml_tensor * norm_impl(struct ggml_context * ctx, struct ggml_tensor * a, float eps, enum ggml_op op,
                               bool inplace) {
    struct ggml_tensor * result = dup_or_view(ctx, a, inplace);
    ggml_set_op_params_f32(result, 0, eps);
    result->op     = op;
    result->src[0] = a;
    return result;
}

} // namespace

extern "C" {

struct ggml_tensor * ggml_dup(struct ggml_context * ctx, struct ggml_tensor * a) {
    return dup_impl(ctx, a, false);
}
struct ggml_tensor * ggml_dup_inplace(struct ggml_context * ctx, struct ggml_tensor * a) {
    return dup_impl(ctx, a, true);
}

struct ggml_tensor * ggml_add(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    return binary_impl(ctx, a, b, GGML_OP_ADD, false);
}
struct ggml_tensor * ggml_add_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    return binary_impl(ctx, a, b, GGML_OP_ADD, true);
}
struct ggml_tensor * ggml_sub(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    return binary_impl(ctx, a, b, GGML_OP_SUB, false);
}
struct ggml_tensor * ggml_sub_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    return binary_impl(ctx, a, b, GGML_OP_SUB, true);
}
struct ggml_tensor * ggml_mul(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    return binary_impl(ctx, a, b, GGML_OP_MUL, false);
}
struct ggml_tensor * ggml_mul_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    return binary_impl(ctx, a, b, GGML_OP_MUL, true);
}
struct ggml_tensor * ggml_div(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    return binary_impl(ctx, a, b, GGML_OP_DIV, false);
}
struct ggml_tensor * ggml_div_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    return binary_impl(ctx, a, b, GGML_OP_DIV, true);
}

struct ggml_tensor * ggml_sqr(struct ggml_context * ctx, struct ggml_tensor * a) {
    return simple_unary_impl(ctx, a, GGML_OP_SQR, false);
}
struct ggml_tensor * ggml_sqr_inplace(struct ggml_context * ctx, struct ggml_tensor * a) {
    return simple_unary_impl(ctx, a, GGML_OP_SQR, true);
}
struct ggml_tensor * ggml_sqrt(struct ggml_context * ctx, struct ggml_tensor * a) {
    return simple_unary_impl(ctx, a, GGML_OP_SQRT, false);
}
struct ggml_tensor * ggml_sqrt_inplace(struct ggml_context * ctx, struct ggml_tensor * a) {
    return simple_unary_impl(ctx, a, GGML_OP_SQRT, true);
}

struct ggml_tensor * ggml_scale(struct ggml_context * ctx, struct ggml_tensor * a, float s) {
    return scale_impl(ctx, a, s, 0.0f, false);
}
struct ggml_tensor * ggml_scale_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float s) {
    return scale_impl(ctx, a, s, 0.0f, true);
}
struct ggml_tensor * ggml_scale_bias(struct ggml_context * ctx, struct ggml_tensor * a, float s, float b) {
    return scale_impl(ctx, a, s, b, false);
}
struct ggml_tensor * ggml_scale_bias_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float s, float b) {
    return scale_impl(ctx, a, s, b, true);
}

// ---------------------------------------------------------------------------------------------
// Unary

struct ggml_tensor * ggml_unary(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_unary_op op) {
    return unary_impl(ctx, a, op, false);
}
struct ggml_tensor * ggml_unary_inplace(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_unary_op op) {
    return unary_impl(ctx, a, op, true);
}

#define SDX_UNARY(name, OP)                                                                                       \
    struct ggml_tensor * ggml_##name(struct ggml_context * ctx, struct ggml_tensor * a) {                         \
        return unary_impl(ctx, a, GGML_UNARY_OP_##OP, false);                                                     \
    }
#define SDX_UNARY_INPLACE(name, OP)                                                                               \
    SDX_UNARY(name, OP)                                                                                           \
    struct ggml_tensor * ggml_##name##_inplace(struct ggml_context * ctx, struct ggml_tensor * a) {               \
        return unary_impl(ctx, a, GGML_UNARY_OP_##OP, true);                                                      \
    }

SDX_UNARY_INPLACE(abs, ABS)
SDX_UNARY(sgn, SGN)
SDX_UNARY_INPLACE(neg, NEG)
SDX_UNARY(step, STEP)
SDX_UNARY_INPLACE(tanh, TANH)
SDX_UNARY(elu, ELU)
SDX_UNARY_INPLACE(relu, RELU)
SDX_UNARY_INPLACE(sigmoid, SIGMOID)
SDX_UNARY_INPLACE(gelu, GELU)
SDX_UNARY_INPLACE(gelu_erf, GELU_ERF)
SDX_UNARY_INPLACE(gelu_quick, GELU_QUICK)
SDX_UNARY_INPLACE(silu, SILU)
SDX_UNARY(hardswish, HARDSWISH)
SDX_UNARY(hardsigmoid, HARDSIGMOID)
SDX_UNARY_INPLACE(exp, EXP)
SDX_UNARY(expm1, EXPM1)
SDX_UNARY(softplus, SOFTPLUS)
SDX_UNARY(floor, FLOOR)
SDX_UNARY(ceil, CEIL)
SDX_UNARY(round, ROUND)
SDX_UNARY(trunc, TRUNC)

#undef SDX_UNARY_INPLACE
#undef SDX_UNARY

// ---------------------------------------------------------------------------------------------
// GLU

struct ggml_tensor * ggml_glu(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_glu_op op, bool swapped) {
    return glu_impl(ctx, a, nullptr, op, swapped);
}
struct ggml_tensor * ggml_glu_split(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                    enum ggml_glu_op op) {
    return glu_impl(ctx, a, b, op, false);
}

#define SDX_GLU(name, OP)                                                                                         \
    struct ggml_tensor * ggml_##name(struct ggml_context * ctx, struct ggml_tensor * a) {                         \
        return glu_impl(ctx, a, nullptr, GGML_GLU_OP_##OP, false);                                                \
    }                                                                                                             \
    struct ggml_tensor * ggml_##name##_swapped(struct ggml_context * ctx, struct ggml_tensor * a) {               \
        return glu_impl(ctx, a, nullptr, GGML_GLU_OP_##OP, true);                                                 \
    }                                                                                                             \
    struct ggml_tensor * ggml_##name##_split(struct ggml_context * ctx, struct ggml_tensor * a,                    \
                                             struct ggml_tensor * b) {                                            \
        return glu_impl(ctx, a, b, GGML_GLU_OP_##OP, false);                                                      \
    }

SDX_GLU(reglu, REGLU)
SDX_GLU(geglu, GEGLU)
SDX_GLU(swiglu, SWIGLU)
SDX_GLU(geglu_erf, GEGLU_ERF)
SDX_GLU(geglu_quick, GEGLU_QUICK)

#undef SDX_GLU

struct ggml_tensor * ggml_swiglu_oai(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                     float alpha, float limit) {
    struct ggml_tensor * result = glu_impl(ctx, a, b, GGML_GLU_OP_SWIGLU_OAI, false);
    ggml_set_op_params_f32(result, 2, alpha);
    ggml_set_op_params_f32(result, 3, limit);
    return result;
}

// ---------------------------------------------------------------------------------------------
// Normalisation

struct ggml_tensor * ggml_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps) {
    return norm_impl(ctx, a, eps, GGML_OP_NORM, false);
}
struct ggml_tensor * ggml_norm_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float eps) {
    return norm_impl(ctx, a, eps, GGML_OP_NORM, true);
}
struct ggml_tensor * ggml_rms_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps) {
    return norm_impl(ctx, a, eps, GGML_OP_RMS_NORM, false);
}
struct ggml_tensor * ggml_rms_norm_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float eps) {
    return norm_impl(ctx, a, eps, GGML_OP_RMS_NORM, true);
}

// ---------------------------------------------------------------------------------------------
// mul_mat

struct ggml_tensor * ggml_mul_mat(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    GGML_ASSERT(!ggml_is_transposed(a) && "mul_mat: a must not be transposed");
    if (a->ne[0] != b->ne[0] || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) {
        GGML_ABORT("mul_mat: incompatible shapes a [%lld, %lld, %lld, %lld], b [%lld, %lld, %lld, %lld] "
                   "(need a.ne0 == b.ne0 and b.ne2, b.ne3 multiples of a.ne2, a.ne3)",
                   (long long) a->ne[0], (long long) a->ne[1], (long long) a->ne[2], (long long) a->ne[3],
                   (long long) b->ne[0], (long long) b->ne[1], (long long) b->ne[2], (long long) b->ne[3]);
    }
    const int64_t        ne[4]  = {a->ne[1], b->ne[1], b->ne[2], b->ne[3]};
    struct ggml_tensor * result = ggml_new_tensor(ctx, GGML_TYPE_F32, 4, ne);
    result->op                  = GGML_OP_MUL_MAT;
    result->src[0]              = a;
    result->src[1]              = b;
    return result;
}

void ggml_mul_mat_set_prec(struct ggml_tensor * a, enum ggml_prec prec) {
    GGML_ASSERT(a->op == GGML_OP_MUL_MAT);
    ggml_set_op_params_i32(a, 0, (int32_t) prec);
}

// ---------------------------------------------------------------------------------------------
// Copies

struct ggml_tensor * ggml_cpy(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    GGML_ASSERT(ggml_nelements(a) == ggml_nelements(b) && "cpy: element counts differ");

    // the result aliases b so the graph records that b's memory is written
    struct ggml_tensor * result = ggml_view_tensor(ctx, b);
    if (b->name[0] != '\0') {
        ggml_format_name(result, "%s (copy of %s)", b->name, a->name);
    } else {
        ggml_format_name(result, "%s (copy)", a->name);
    }
    result->op     = GGML_OP_CPY;
    result->src[0] = a;
    result->src[1] = b;
    return result;
}

struct ggml_tensor * ggml_cast(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_type type) {
    struct ggml_tensor * result = ggml_new_tensor(ctx, type, GGML_MAX_DIMS, a->ne);
    ggml_format_name(result, "%s (copy)", a->name);
    result->op     = GGML_OP_CPY;
    result->src[0] = a;
    result->src[1] = result; // CPY kernels read the destination from src[1]
    return result;
}

struct ggml_tensor * ggml_cont_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1,
                                  int64_t ne2, int64_t ne3) {
    GGML_ASSERT(ggml_nelements(a) == ne0 * ne1 * ne2 * ne3 && "cont: element counts differ");
    struct ggml_tensor * result = ggml_new_tensor_4d(ctx, a->type, ne0, ne1, ne2, ne3);
    ggml_format_name(result, "%s (cont)", a->name);
    result->op     = GGML_OP_CONT;
    result->src[0] = a;
    return result;
}

struct ggml_tensor * ggml_cont(struct ggml_context * ctx, struct ggml_tensor * a) {
    return ggml_cont_4d(ctx, a, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
}
struct ggml_tensor * ggml_cont_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0) {
    return ggml_cont_4d(ctx, a, ne0, 1, 1, 1);
}
struct ggml_tensor * ggml_cont_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1) {
    return ggml_cont_4d(ctx, a, ne0, ne1, 1, 1);
}
struct ggml_tensor * ggml_cont_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1,
                                  int64_t ne2) {
    return ggml_cont_4d(ctx, a, ne0, ne1, ne2, 1);
}

} // extern "C"

// ---------------------------------------------------------------------------------------------
// Reshapes and views

namespace {

struct ggml_tensor * reshape_impl(struct ggml_context * ctx, struct ggml_tensor * a, int n_dims,
                                  const int64_t * ne) {
    GGML_ASSERT(ggml_is_contiguous(a) && "reshape: a must be contiguous (use ggml_cont first)");
    int64_t n = 1;
    for (int i = 0; i < n_dims; i++) n *= ne[i];
    GGML_ASSERT(ggml_nelements(a) == n && "reshape: element counts differ");

    struct ggml_tensor * result = ggml_new_tensor_impl(ctx, a->type, n_dims, ne, a, 0);
    ggml_format_name(result, "%s (reshaped)", a->name);
    result->op     = GGML_OP_RESHAPE;
    result->src[0] = a;
    return result;
}

// Strides other than nb[0] are set by the callers after creation.
struct ggml_tensor * view_impl(struct ggml_context * ctx, struct ggml_tensor * a, int n_dims, const int64_t * ne,
                               size_t offset) {
    struct ggml_tensor * result = ggml_new_tensor_impl(ctx, a->type, n_dims, ne, a, offset);
    ggml_format_name(result, "%s (view)", a->name);
    ggml_set_op_params(result, &offset, sizeof(offset));
    result->op     = GGML_OP_VIEW;
    result->src[0] = a;
    return result;
}

// With the final strides known, the whole strided span must lie inside the base.
void check_view_bounds(const struct ggml_tensor * v) {
    if (ggml_is_empty(v)) return;
    const size_t base = ggml_nbytes(v->view_src);
    if (v->view_offs + ggml_nbytes(v) > base) {
        GGML_ABORT("view of '%s' out of bounds: offset %zu + %zu bytes > %zu bytes", v->view_src->name,
                   v->view_offs, ggml_nbytes(v), base);
    }
}

} // namespace

extern "C" {

struct ggml_tensor * ggml_reshape(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    return reshape_impl(ctx, a, GGML_MAX_DIMS, b->ne);
}
struct ggml_tensor * ggml_reshape_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0) {
    return reshape_impl(ctx, a, 1, &ne0);
}
struct ggml_tensor * ggml_reshape_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return reshape_impl(ctx, a, 2, ne);
}
struct ggml_tensor * ggml_reshape_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1,
                                     int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return reshape_impl(ctx, a, 3, ne);
}
struct ggml_tensor * ggml_reshape_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1,
                                     int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return reshape_impl(ctx, a, 4, ne);
}

struct ggml_tensor * ggml_view_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, size_t offset) {
    struct ggml_tensor * result = view_impl(ctx, a, 1, &ne0, offset);
    check_view_bounds(result);
    return result;
}

struct ggml_tensor * ggml_view_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1,
                                  size_t nb1, size_t offset) {
    const int64_t        ne[2]  = {ne0, ne1};
    struct ggml_tensor * result = view_impl(ctx, a, 2, ne, offset);
    result->nb[1]               = nb1;
    result->nb[2]               = nb1 * (size_t) ne1;
    result->nb[3]               = result->nb[2];
    check_view_bounds(result);
    return result;
}

struct ggml_tensor * ggml_view_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1,
                                  int64_t ne2, size_t nb1, size_t nb2, size_t offset) {
    const int64_t        ne[3]  = {ne0, ne1, ne2};
    struct ggml_tensor * result = view_impl(ctx, a, 3, ne, offset);
    result->nb[1]               = nb1;
    result->nb[2]               = nb2;
    result->nb[3]               = nb2 * (size_t) ne2;
    check_view_bounds(result);
    return result;
}

struct ggml_tensor * ggml_view_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1,
                                  int64_t ne2, int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    const int64_t        ne[4]  = {ne0, ne1, ne2, ne3};
    struct ggml_tensor * result = view_impl(ctx, a, 4, ne, offset);
    result->nb[1]               = nb1;
    result->nb[2]               = nb2;
    result->nb[3]               = nb3;
    check_view_bounds(result);
    return result;
}

struct ggml_tensor * ggml_permute(struct ggml_context * ctx, struct ggml_tensor * a, int axis0, int axis1, int axis2,
                                  int axis3) {
    const int axes[4] = {axis0, axis1, axis2, axis3};
    for (int k = 0; k < 4; k++) {
        GGML_ASSERT(axes[k] >= 0 && axes[k] < GGML_MAX_DIMS && "permute: axis out of range");
        for (int j = 0; j < k; j++) {
            GGML_ASSERT(axes[j] != axes[k] && "permute: axes must be a permutation of 0..3");
        }
    }

    struct ggml_tensor * result = ggml_view_tensor(ctx, a);
    ggml_format_name(result, "%s (permuted)", a->name);

    // axisK names the destination of source dim K (the inverse of PyTorch's convention)
    for (int k = 0; k < 4; k++) {
        result->ne[axes[k]] = a->ne[k];
        result->nb[axes[k]] = a->nb[k];
    }
    result->op     = GGML_OP_PERMUTE;
    result->src[0] = a;
    for (int k = 0; k < 4; k++) ggml_set_op_params_i32(result, k, axes[k]);
    return result;
}

struct ggml_tensor * ggml_transpose(struct ggml_context * ctx, struct ggml_tensor * a) {
    struct ggml_tensor * result = ggml_view_tensor(ctx, a);
    ggml_format_name(result, "%s (transposed)", a->name);
    result->ne[0]  = a->ne[1];
    result->ne[1]  = a->ne[0];
    result->nb[0]  = a->nb[1];
    result->nb[1]  = a->nb[0];
    result->op     = GGML_OP_TRANSPOSE;
    result->src[0] = a;
    return result;
}

// ---------------------------------------------------------------------------------------------
// get_rows

struct ggml_tensor * ggml_get_rows(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    GGML_ASSERT(b->type == GGML_TYPE_I32 && "get_rows: indices must be I32");
    GGML_ASSERT(a->ne[2] == b->ne[1] && "get_rows: b.ne1 must equal a.ne2");
    GGML_ASSERT(a->ne[3] == b->ne[2] && "get_rows: b.ne2 must equal a.ne3");
    GGML_ASSERT(b->ne[3] == 1 && "get_rows: b.ne3 must be 1");

    // rows are dequantised/converted, except integer tables which are copied as they are
    const enum ggml_type type   = a->type == GGML_TYPE_I32 ? GGML_TYPE_I32 : GGML_TYPE_F32;
    struct ggml_tensor * result = ggml_new_tensor_4d(ctx, type, a->ne[0], b->ne[0], b->ne[1], b->ne[2]);
    result->op                  = GGML_OP_GET_ROWS;
    result->src[0]              = a;
    result->src[1]              = b;
    return result;
}

} // extern "C"

// ---------------------------------------------------------------------------------------------
// soft_max, rope

namespace {

struct ggml_tensor * soft_max_impl(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * mask,
                                   float scale, float max_bias, bool inplace) {
    GGML_ASSERT(ggml_is_contiguous(a) && "soft_max: a must be contiguous");
    if (mask != nullptr) {
        GGML_ASSERT((mask->type == GGML_TYPE_F16 || mask->type == GGML_TYPE_F32) && "soft_max: mask must be F16/F32");
        GGML_ASSERT(ggml_is_contiguous(mask) && "soft_max: mask must be contiguous");
        GGML_ASSERT(mask->ne[0] == a->ne[0] && "soft_max: mask.ne0 must equal a.ne0");
        GGML_ASSERT(mask->ne[1] >= a->ne[1] && "soft_max: mask needs at least a.ne1 rows");
        GGML_ASSERT(a->ne[2] % mask->ne[2] == 0 && "soft_max: mask.ne2 must divide a.ne2");
        GGML_ASSERT(a->ne[3] % mask->ne[3] == 0 && "soft_max: mask.ne3 must divide a.ne3");
    }
    if (max_bias > 0.0f) {
        GGML_ASSERT(mask != nullptr && "soft_max: ALiBi (max_bias > 0) requires a mask");
    }

    struct ggml_tensor * result    = dup_or_view(ctx, a, inplace);
    const float          params[2] = {scale, max_bias};
    ggml_set_op_params(result, params, sizeof(params));
    result->op     = GGML_OP_SOFT_MAX;
    result->src[0] = a;
    result->src[1] = mask;
    return result;
}

struct ggml_tensor * rope_impl(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                               struct ggml_tensor * c, int n_dims, int mode, int n_ctx_orig, float freq_base,
                               float freq_scale, float ext_factor, float attn_factor, float beta_fast,
                               float beta_slow, bool inplace) {
    GGML_ASSERT((mode & 1) == 0 && "rope: mode & 1 is no longer supported");
    GGML_ASSERT(ggml_is_vector(b) && b->type == GGML_TYPE_I32 && "rope: positions must be an I32 vector");
    GGML_ASSERT(a->ne[2] == b->ne[0] && "rope: need one position per index of a's dim 2");
    if (c != nullptr) {
        GGML_ASSERT(c->type == GGML_TYPE_F32 && "rope: frequency factors must be F32");
        GGML_ASSERT(c->ne[0] >= n_dims / 2 && "rope: need one frequency factor per rotated pair");
    }

    struct ggml_tensor * result = dup_or_view(ctx, a, inplace);

    int32_t params[16] = {0, n_dims, mode, 0, n_ctx_orig};
    memcpy(params + 5, &freq_base, sizeof(float));
    memcpy(params + 6, &freq_scale, sizeof(float));
    memcpy(params + 7, &ext_factor, sizeof(float));
    memcpy(params + 8, &attn_factor, sizeof(float));
    memcpy(params + 9, &beta_fast, sizeof(float));
    memcpy(params + 10, &beta_slow, sizeof(float));
    // slots 11..14 (m-rope sections) and 15 (rotation offset) stay 0
    ggml_set_op_params(result, params, sizeof(params));

    result->op     = GGML_OP_ROPE;
    result->src[0] = a;
    result->src[1] = b;
    result->src[2] = c;
    return result;
}

} // namespace

extern "C" {

struct ggml_tensor * ggml_soft_max(struct ggml_context * ctx, struct ggml_tensor * a) {
    return soft_max_impl(ctx, a, nullptr, 1.0f, 0.0f, false);
}
struct ggml_tensor * ggml_soft_max_inplace(struct ggml_context * ctx, struct ggml_tensor * a) {
    return soft_max_impl(ctx, a, nullptr, 1.0f, 0.0f, true);
}
struct ggml_tensor * ggml_soft_max_ext(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * mask,
                                       float scale, float max_bias) {
    return soft_max_impl(ctx, a, mask, scale, max_bias, false);
}
struct ggml_tensor * ggml_soft_max_ext_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * mask, float scale, float max_bias) {
    return soft_max_impl(ctx, a, mask, scale, max_bias, true);
}

struct ggml_tensor * ggml_rope(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int n_dims,
                               int mode) {
    // upstream records beta_fast = beta_slow = 0 here; they only matter when ext_factor != 0
    return rope_impl(ctx, a, b, nullptr, n_dims, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, false);
}

struct ggml_tensor * ggml_rope_ext(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                   struct ggml_tensor * c, int n_dims, int mode, int n_ctx_orig, float freq_base,
                                   float freq_scale, float ext_factor, float attn_factor, float beta_fast,
                                   float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                     beta_fast, beta_slow, false);
}

struct ggml_tensor * ggml_rope_ext_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                           struct ggml_tensor * c, int n_dims, int mode, int n_ctx_orig,
                                           float freq_base, float freq_scale, float ext_factor, float attn_factor,
                                           float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                     beta_fast, beta_slow, true);
}

void ggml_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                              float dims[2]) {
    // dimension index whose wavelength spans n_rot rotations over the original context
    auto corr_dim = [&](float n_rot) {
        return n_dims * logf(n_ctx_orig / (n_rot * 2.0f * 3.14159265358979323846f)) / (2.0f * logf(freq_base));
    };
    const float start = floorf(corr_dim(beta_fast));
    const float end   = ceilf(corr_dim(beta_slow));
    dims[0]           = fmaxf(0.0f, start);
    dims[1]           = fminf((float) (n_dims - 1), end);
}

// ---------------------------------------------------------------------------------------------
// flash_attn_ext

struct ggml_tensor * ggml_flash_attn_ext(struct ggml_context * ctx, struct ggml_tensor * q, struct ggml_tensor * k,
                                         struct ggml_tensor * v, struct ggml_tensor * mask, float scale,
                                         float max_bias, float logit_softcap) {
    GGML_ASSERT(k->ne[0] == q->ne[0] && "flash_attn_ext: k and q head sizes differ");
    GGML_ASSERT(q->ne[2] % k->ne[2] == 0 && "flash_attn_ext: n_head must be a multiple of n_head_kv");
    GGML_ASSERT(q->ne[3] == k->ne[3] && q->ne[3] == v->ne[3] && "flash_attn_ext: q, k, v must agree in dim 3");
    if (mask != nullptr) {
        GGML_ASSERT(mask->type == GGML_TYPE_F16 && "flash_attn_ext: mask must be F16");
        GGML_ASSERT(ggml_is_contiguous(mask) && "flash_attn_ext: mask must be contiguous");
        GGML_ASSERT(mask->ne[1] >= q->ne[1] && "flash_attn_ext: mask needs at least n_q rows");
        GGML_ASSERT(q->ne[2] % mask->ne[2] == 0 && "flash_attn_ext: mask.ne2 must divide n_head");
        GGML_ASSERT(q->ne[3] % mask->ne[3] == 0 && "flash_attn_ext: mask.ne3 must divide q.ne3");
    }
    if (max_bias > 0.0f) {
        GGML_ASSERT(mask != nullptr && "flash_attn_ext: ALiBi (max_bias > 0) requires a mask");
    }

    // heads in dim 1 and queries in dim 2, so a reshape gives concatenated heads per token
    const int64_t        ne[4]  = {v->ne[0], q->ne[2], q->ne[1], q->ne[3]};
    struct ggml_tensor * result = ggml_new_tensor(ctx, GGML_TYPE_F32, 4, ne);

    ggml_set_op_params_f32(result, 0, scale);
    ggml_set_op_params_f32(result, 1, max_bias);
    ggml_set_op_params_f32(result, 2, logit_softcap);
    ggml_set_op_params_i32(result, 3, GGML_PREC_DEFAULT);

    result->op     = GGML_OP_FLASH_ATTN_EXT;
    result->src[0] = q;
    result->src[1] = k;
    result->src[2] = v;
    result->src[3] = mask;
    return result;
}

void ggml_flash_attn_ext_set_prec(struct ggml_tensor * a, enum ggml_prec prec) {
    GGML_ASSERT(a->op == GGML_OP_FLASH_ATTN_EXT);
    ggml_set_op_params_i32(a, 3, (int32_t) prec);
}

enum ggml_prec ggml_flash_attn_ext_get_prec(const struct ggml_tensor * a) {
    GGML_ASSERT(a->op == GGML_OP_FLASH_ATTN_EXT);
    return (enum ggml_prec) ggml_get_op_params_i32(a, 3);
}

// ---------------------------------------------------------------------------------------------
// Layout ops

struct ggml_tensor * ggml_concat(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                 int dim) {
    GGML_ASSERT(dim >= 0 && dim < GGML_MAX_DIMS && "concat: dim out of range");
    GGML_ASSERT(a->type == b->type && "concat: a and b must have the same type");

    int64_t ne[GGML_MAX_DIMS];
    for (int d = 0; d < GGML_MAX_DIMS; d++) {
        if (d == dim) {
            ne[d] = a->ne[d] + b->ne[d];
            continue;
        }
        GGML_ASSERT(a->ne[d] == b->ne[d] && "concat: extents other than dim must be equal");
        ne[d] = a->ne[d];
    }

    struct ggml_tensor * result = ggml_new_tensor(ctx, a->type, GGML_MAX_DIMS, ne);
    ggml_set_op_params_i32(result, 0, dim);
    result->op     = GGML_OP_CONCAT;
    result->src[0] = a;
    result->src[1] = b;
    return result;
}

struct ggml_tensor * ggml_pad_ext(struct ggml_context * ctx, struct ggml_tensor * a, int lp0, int rp0, int lp1,
                                  int rp1, int lp2, int rp2, int lp3, int rp3) {
    const int32_t pads[8] = {lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3};
    for (int i = 0; i < 8; i++) GGML_ASSERT(pads[i] >= 0 && "pad: padding must be non-negative");

    struct ggml_tensor * result = ggml_new_tensor_4d(ctx, a->type, a->ne[0] + lp0 + rp0, a->ne[1] + lp1 + rp1,
                                                     a->ne[2] + lp2 + rp2, a->ne[3] + lp3 + rp3);
    for (int i = 0; i < 8; i++) ggml_set_op_params_i32(result, i, pads[i]);
    ggml_set_op_params_i32(result, 8, 0); // circular padding is not supported: zeros only
    result->op     = GGML_OP_PAD;
    result->src[0] = a;
    return result;
}

struct ggml_tensor * ggml_pad(struct ggml_context * ctx, struct ggml_tensor * a, int p0, int p1, int p2, int p3) {
    return ggml_pad_ext(ctx, a, 0, p0, 0, p1, 0, p2, 0, p3);
}

struct ggml_tensor * ggml_repeat_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1,
                                    int64_t ne2, int64_t ne3) {
    const int64_t ne[4]    = {ne0, ne1, ne2, ne3};
    const bool    a_empty  = ggml_is_empty(a);
    const bool    to_empty = ne0 == 0 || ne1 == 0 || ne2 == 0 || ne3 == 0;
    bool          ok       = a_empty ? to_empty : true;
    for (int i = 0; i < 4 && !a_empty; i++) ok = ok && ne[i] % a->ne[i] == 0;
    GGML_ASSERT(ok && "repeat: every target extent must be a multiple of a's");

    struct ggml_tensor * result = ggml_new_tensor(ctx, a->type, 4, ne);
    result->op                  = GGML_OP_REPEAT;
    result->src[0]              = a;
    return result;
}

struct ggml_tensor * ggml_repeat(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    GGML_ASSERT(ggml_can_repeat(a, b) && "repeat: b's extents must be multiples of a's");
    return ggml_repeat_4d(ctx, a, b->ne[0], b->ne[1], b->ne[2], b->ne[3]);
}

struct ggml_tensor * ggml_arange(struct ggml_context * ctx, float start, float stop, float step) {
    GGML_ASSERT(stop > start && "arange: stop must be greater than start");
    GGML_ASSERT(step > 0.0f && "arange: step must be positive");
    const int64_t steps = (int64_t) ceilf((stop - start) / step);

    struct ggml_tensor * result = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, steps);
    ggml_set_op_params_f32(result, 0, start);
    ggml_set_op_params_f32(result, 1, stop);
    ggml_set_op_params_f32(result, 2, step);
    result->op = GGML_OP_ARANGE;
    return result;
}

struct ggml_tensor * ggml_timestep_embedding(struct ggml_context * ctx, struct ggml_tensor * timesteps, int dim,
                                             int max_period) {
    struct ggml_tensor * result = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, dim, timesteps->ne[0]);
    ggml_set_op_params_i32(result, 0, dim);
    ggml_set_op_params_i32(result, 1, max_period);
    result->op     = GGML_OP_TIMESTEP_EMBEDDING;
    result->src[0] = timesteps;
    return result;
}

// ---------------------------------------------------------------------------------------------
// Custom

} // extern "C"

namespace {

void set_custom_params(struct ggml_tensor * t, ggml_custom_op_t fun, int n_tasks, void * userdata) {
    struct ggml_custom_op_params params;
    memset(&params, 0, sizeof(params)); // deterministic padding bytes in op_params
    params.fun      = fun;
    params.n_tasks  = n_tasks;
    params.userdata = userdata;
    ggml_set_op_params(t, &params, sizeof(params));
}

} // namespace

extern "C" {

struct ggml_tensor * ggml_custom_4d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0, int64_t ne1,
                                    int64_t ne2, int64_t ne3, struct ggml_tensor ** args, int n_args,
                                    ggml_custom_op_t fun, int n_tasks, void * userdata) {
    GGML_ASSERT(n_args >= 0 && n_args < GGML_MAX_SRC && "custom: too many arguments");
    GGML_ASSERT((n_tasks == GGML_N_TASKS_MAX || n_tasks > 0) && "custom: n_tasks must be positive or -1");

    struct ggml_tensor *         result = ggml_new_tensor_4d(ctx, type, ne0, ne1, ne2, ne3);
    set_custom_params(result, fun, n_tasks, userdata);
    result->op = GGML_OP_CUSTOM;
    for (int i = 0; i < n_args; i++) result->src[i] = args[i];
    return result;
}

struct ggml_tensor * ggml_custom_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor ** args,
                                         int n_args, ggml_custom_op_t fun, int n_tasks, void * userdata) {
    GGML_ASSERT(n_args >= 0 && n_args < GGML_MAX_SRC - 1 && "custom: too many arguments");
    GGML_ASSERT((n_tasks == GGML_N_TASKS_MAX || n_tasks > 0) && "custom: n_tasks must be positive or -1");

    struct ggml_tensor *         result = ggml_view_tensor(ctx, a);
    set_custom_params(result, fun, n_tasks, userdata);
    result->op     = GGML_OP_CUSTOM;
    result->src[0] = a;
    for (int i = 0; i < n_args; i++) result->src[i + 1] = args[i];
    return result;
}

} // extern "C"
