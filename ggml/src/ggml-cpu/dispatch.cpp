// dispatch.cpp — maps graph nodes to CPU kernels: execution (compute_forward), scratch sizing
// (op_work_size) and the capability table behind the device's supports_op.
//
// The capability table must stay in step with what the kernels in ops-*.cpp accept: the
// scheduler trusts supports_op, and a node it places here with an unsupported type combination
// would abort inside a kernel instead of being rejected up front.

#include "cpu-ops.h"
#include "ext/ggml-ext-impl.h"
#include "ops-row.h" // GGML_CPU_CHUNK: the copy kernels convert one block at a time through it

namespace {

inline bool is_float_type(ggml_type t) {
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16;
}

// types the copy kernel converts through float
inline bool is_convertible_type(ggml_type t) {
    return is_float_type(t) || t == GGML_TYPE_I8 || t == GGML_TYPE_I16 || t == GGML_TYPE_I32 ||
           t == GGML_TYPE_F8_E4M3 || t == GGML_TYPE_F8_E5M2;
}

// an implemented block-quantized type (Q8_0, Q4_K, ...; declared-only types have no name)
inline bool is_block_type(ggml_type t) {
    const ggml_type_traits * tr = ggml_get_type_traits(t);
    return tr->type_name != nullptr && tr->blck_size > 1 && tr->blck_size <= GGML_CPU_CHUNK;
}

// rows of one element have no meaningful stride
inline bool rows_packed(const ggml_tensor * t) {
    return t->ne[0] <= 1 || t->nb[0] == ggml_type_size(t->type);
}

bool dup_supported(const ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    if (!src) return false;
    const ggml_type ts = src->type;
    const ggml_type td = dst->type;
    if (ts == td) return ggml_get_type_traits(ts)->type_name != nullptr; // raw byte copy
    if (is_convertible_type(ts) && is_convertible_type(td)) return true;
    // block-quantized <-> F32/F16/BF16 through the type's reference quantizer / dequantizer
    if (is_block_type(td) && is_float_type(ts)) return ggml_get_type_traits(td)->from_float_ref != nullptr;
    if (is_block_type(ts) && is_float_type(td)) return ggml_get_type_traits(ts)->to_float != nullptr;
    return false;
}

bool binary_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    if (!a || !b) return false;
    const ggml_type t0 = a->type, t1 = b->type, td = dst->type;
    if (t0 == t1 && t1 == td && is_float_type(t0)) return true; // all F32 / all F16 / all BF16
    if ((t0 == GGML_TYPE_F16 || t0 == GGML_TYPE_BF16) && t1 == GGML_TYPE_F32) {
        return td == t0 || td == GGML_TYPE_F32;
    }
    return false;
}

// one float input, output of the same type (unary, norm, rms_norm, sqr, sqrt)
bool same_float_type(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    return a && is_float_type(a->type) && dst->type == a->type;
}

bool glu_supported(const ggml_tensor * dst) {
    if (!same_float_type(dst)) return false;
    const ggml_tensor * b = dst->src[1];
    return b == nullptr || b->type == dst->src[0]->type;
}

bool unary_supported(const ggml_tensor * dst) {
    const ggml_unary_op uop = ggml_get_unary_op(dst);
    if (uop == GGML_UNARY_OP_XIELU || uop < 0 || uop >= GGML_UNARY_OP_COUNT) return false;
    return same_float_type(dst);
}

bool get_rows_supported(const ggml_tensor * dst) {
    const ggml_tensor * a   = dst->src[0];
    const ggml_tensor * idx = dst->src[1];
    if (!a || !idx || (idx->type != GGML_TYPE_I32 && idx->type != GGML_TYPE_I64)) return false;
    switch (a->type) {
        case GGML_TYPE_F32:
        case GGML_TYPE_F16:
        case GGML_TYPE_BF16:
        case GGML_TYPE_I32: return dst->type == GGML_TYPE_I32 || dst->type == GGML_TYPE_F32;
        case GGML_TYPE_F8_E4M3:
        case GGML_TYPE_F8_E5M2: return dst->type == GGML_TYPE_F32; // widened exactly
        default:
            // block-quantized rows, dequantized to F32 (as upstream)
            return is_block_type(a->type) && ggml_get_type_traits(a->type)->to_float && dst->type == GGML_TYPE_F32;
    }
}

bool soft_max_supported(const ggml_tensor * dst) {
    const ggml_tensor * a     = dst->src[0];
    const ggml_tensor * mask  = dst->src[1];
    const ggml_tensor * sinks = dst->src[2];
    if (!a || a->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32) return false;
    if (!rows_packed(a) || !rows_packed(dst)) return false;
    if (mask && mask->type != GGML_TYPE_F32 && mask->type != GGML_TYPE_F16) return false;
    if (sinks && sinks->type != GGML_TYPE_F32) return false;
    return true;
}

bool rope_supported(const ggml_tensor * dst) {
    const ggml_tensor * a    = dst->src[0];
    const ggml_tensor * pos  = dst->src[1];
    const ggml_tensor * freq = dst->src[2];
    if (!a || !pos) return false;
    if (a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_F16) return false;
    if (dst->type != a->type || pos->type != GGML_TYPE_I32) return false;
    if (!rows_packed(a) || !rows_packed(dst)) return false;
    if (freq && freq->type != GGML_TYPE_F32) return false;
    const int mode = ggml_get_op_params_i32(dst, 2);
    return mode == GGML_ROPE_TYPE_NORMAL || mode == GGML_ROPE_TYPE_NEOX || mode == GGML_ROPE_TYPE_MROPE ||
           mode == GGML_ROPE_TYPE_IMROPE || mode == GGML_ROPE_TYPE_VISION;
}

// element moves without arithmetic: same non-block type in and out
bool all_srcs_same_type(const ggml_tensor * dst, int n_src) {
    if (ggml_blck_size(dst->type) != 1) return false;
    for (int i = 0; i < n_src; ++i) {
        if (!dst->src[i] || dst->src[i]->type != dst->type) return false;
    }
    return true;
}

} // namespace

void ggml_cpu_compute_forward(const struct ggml_compute_params * params, struct ggml_tensor * node) {
    switch (node->op) {
        case GGML_OP_NONE:
        case GGML_OP_RESHAPE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE: break;

        case GGML_OP_DUP:
        case GGML_OP_CONT:
        case GGML_OP_CPY: ggml_cpu_op_dup(params, node); break;

        case GGML_OP_ADD:
        case GGML_OP_SUB:
        case GGML_OP_MUL:
        case GGML_OP_DIV: ggml_cpu_op_binary(params, node); break;

        case GGML_OP_SQR: ggml_cpu_op_sqr(params, node); break;
        case GGML_OP_SQRT: ggml_cpu_op_sqrt(params, node); break;
        case GGML_OP_SCALE: ggml_cpu_op_scale(params, node); break;
        case GGML_OP_UNARY: ggml_cpu_op_unary(params, node); break;
        case GGML_OP_GLU: ggml_cpu_op_glu(params, node); break;
        case GGML_OP_NORM: ggml_cpu_op_norm(params, node); break;
        case GGML_OP_RMS_NORM: ggml_cpu_op_rms_norm(params, node); break;
        case GGML_OP_MUL_MAT: ggml_cpu_op_mul_mat(params, node); break;
        case GGML_OP_GET_ROWS: ggml_cpu_op_get_rows(params, node); break;
        case GGML_OP_SOFT_MAX: ggml_cpu_op_soft_max(params, node); break;
        case GGML_OP_ROPE: ggml_cpu_op_rope(params, node); break;
        case GGML_OP_CONCAT: ggml_cpu_op_concat(params, node); break;
        case GGML_OP_PAD: ggml_cpu_op_pad(params, node); break;
        case GGML_OP_REPEAT: ggml_cpu_op_repeat(params, node); break;
        case GGML_OP_ARANGE: ggml_cpu_op_arange(params, node); break;
        case GGML_OP_TIMESTEP_EMBEDDING: ggml_cpu_op_timestep_embedding(params, node); break;
        case GGML_OP_FLASH_ATTN_EXT: ggml_cpu_op_flash_attn_ext(params, node); break;
        case GGML_OP_IM2COL: ggml_cpu_op_im2col(params, node); break;
        case GGML_OP_CONV_2D: ggml_cpu_op_conv_2d(params, node); break;
        case GGML_OP_CONV_2D_DW: ggml_cpu_op_conv_2d_dw(params, node); break;
        case GGML_OP_IM2COL_3D: ggml_cpu_op_im2col_3d(params, node); break;
        case GGML_OP_CONV_3D: ggml_cpu_op_conv_3d(params, node); break;
        case GGML_OP_CONV_TRANSPOSE_1D: ggml_cpu_op_conv_transpose_1d(params, node); break;
        case GGML_OP_CONV_TRANSPOSE_2D: ggml_cpu_op_conv_transpose_2d(params, node); break;
        case GGML_OP_POOL_1D: ggml_cpu_op_pool_1d(params, node); break;
        case GGML_OP_POOL_2D: ggml_cpu_op_pool_2d(params, node); break;
        case GGML_OP_UPSCALE: ggml_cpu_op_upscale(params, node); break;
        case GGML_OP_GROUP_NORM: ggml_cpu_op_group_norm(params, node); break;
        case GGML_OP_L2_NORM: ggml_cpu_op_l2_norm(params, node); break;
        case GGML_OP_CLAMP:
        case GGML_OP_LEAKY_RELU:
        case GGML_OP_LOG:
        case GGML_OP_SIN:
        case GGML_OP_COS:
        case GGML_OP_DIAG_MASK_INF: ggml_cpu_op_elementwise_client(params, node); break;
        case GGML_OP_SUM: ggml_cpu_op_sum(params, node); break;
        case GGML_OP_SUM_ROWS:
        case GGML_OP_MEAN: ggml_cpu_op_sum_rows(params, node); break;
        case GGML_OP_ARGMAX: ggml_cpu_op_argmax(params, node); break;
        case GGML_OP_ARGSORT:
        case GGML_OP_TOP_K: ggml_cpu_op_argsort(params, node); break;
        case GGML_OP_ACC:
        case GGML_OP_SET: ggml_cpu_op_acc_set(params, node); break;
        case GGML_OP_ROLL: ggml_cpu_op_roll(params, node); break;
        case GGML_OP_ADD_ID: ggml_cpu_op_add_id(params, node); break;
        case GGML_OP_MUL_MAT_ID: ggml_cpu_op_mul_mat_id(params, node); break;
        case GGML_OP_SET_ROWS: ggml_cpu_op_set_rows(params, node); break;
        case GGML_OP_MAP_CUSTOM1:
        case GGML_OP_MAP_CUSTOM2:
        case GGML_OP_MAP_CUSTOM3: ggml_cpu_op_map_custom(params, node); break;
        case GGML_OP_WIN_PART:
        case GGML_OP_WIN_UNPART: ggml_cpu_op_win(params, node); break;
        case GGML_OP_GET_REL_POS: ggml_cpu_op_get_rel_pos(params, node); break;
        case GGML_OP_ADD_REL_POS: ggml_cpu_op_add_rel_pos(params, node); break;
        case GGML_OP_CUSTOM:
            if (ggml_ext_is_ext_node(node)) {
                // only a registered kernel can run these; the capability query said no
                const char * name = ggml_ext_op_name(ggml_ext_get_op(node));
                GGML_ABORT("extension node %s (%s) reached the CPU backend, which has no native implementation; "
                           "register a kernel for it or let the scheduler place it",
                           name ? name : "<unknown op>", node->name);
            }
            ggml_cpu_op_custom(params, node);
            break;

        case GGML_OP_COUNT:
        default: GGML_ABORT("ggml_cpu_compute_forward: op %s (%d) has no CPU kernel", ggml_op_name(node->op), (int) node->op);
    }
}

size_t ggml_cpu_op_work_size(const struct ggml_tensor * node, int n_threads) {
    switch (node->op) {
        case GGML_OP_MUL_MAT: return ggml_cpu_mul_mat_work_size(node, n_threads);
        case GGML_OP_SOFT_MAX: return ggml_cpu_soft_max_work_size(node, n_threads);
        case GGML_OP_FLASH_ATTN_EXT: return ggml_cpu_flash_attn_ext_work_size(node, n_threads);
        case GGML_OP_CONV_2D: return ggml_cpu_conv_2d_work_size(node, n_threads);
        default: return 0;
    }
}

bool ggml_cpu_op_supported(const struct ggml_tensor * node) {
    switch (node->op) {
        case GGML_OP_NONE:
        case GGML_OP_RESHAPE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE: return true;

        case GGML_OP_DUP:
        case GGML_OP_CONT:
        case GGML_OP_CPY: return dup_supported(node);

        case GGML_OP_ADD:
        case GGML_OP_SUB:
        case GGML_OP_MUL:
        case GGML_OP_DIV: return binary_supported(node);

        case GGML_OP_SQR:
        case GGML_OP_SQRT:
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM: return same_float_type(node);

        case GGML_OP_SCALE: return same_float_type(node); // computed in F32, rounded to the output type

        case GGML_OP_UNARY: return unary_supported(node);
        case GGML_OP_GLU: return glu_supported(node);

        case GGML_OP_MUL_MAT: return ggml_cpu_mul_mat_supported(node);
        case GGML_OP_FLASH_ATTN_EXT: return ggml_cpu_flash_attn_ext_supported(node);

        case GGML_OP_GET_ROWS: return get_rows_supported(node);
        case GGML_OP_SOFT_MAX: return soft_max_supported(node);
        case GGML_OP_ROPE: return rope_supported(node);

        case GGML_OP_CONCAT: return all_srcs_same_type(node, 2);
        case GGML_OP_PAD:
        case GGML_OP_REPEAT: return all_srcs_same_type(node, 1);

        case GGML_OP_ARANGE: return node->type == GGML_TYPE_F32;
        case GGML_OP_TIMESTEP_EMBEDDING:
            return node->type == GGML_TYPE_F32 && node->src[0] && node->src[0]->type == GGML_TYPE_F32;

        case GGML_OP_CUSTOM: return !ggml_ext_is_ext_node(node); // extension nodes are not CPU callbacks

        // issue 13 ops: float operands of any strides
        case GGML_OP_IM2COL:
        case GGML_OP_IM2COL_3D: return node->src[1] && is_float_type(node->src[1]->type) && is_float_type(node->type);
        case GGML_OP_CONV_3D:
        case GGML_OP_CONV_2D:
        case GGML_OP_CONV_2D_DW:
        case GGML_OP_CONV_TRANSPOSE_1D:
        case GGML_OP_CONV_TRANSPOSE_2D:
            return node->src[0] && node->src[1] && is_float_type(node->src[0]->type) &&
                   is_float_type(node->src[1]->type) && is_float_type(node->type);
        case GGML_OP_POOL_1D:
        case GGML_OP_POOL_2D: return node->src[0] && is_float_type(node->src[0]->type) && node->type == GGML_TYPE_F32;
        case GGML_OP_UPSCALE:
        case GGML_OP_GROUP_NORM:
        case GGML_OP_L2_NORM:
        case GGML_OP_CLAMP:
        case GGML_OP_LEAKY_RELU:
        case GGML_OP_LOG:
        case GGML_OP_SIN:
        case GGML_OP_COS:
        case GGML_OP_DIAG_MASK_INF:
        case GGML_OP_SUM:
        case GGML_OP_SUM_ROWS: return same_float_type(node);
        case GGML_OP_MEAN: return node->src[0] && is_float_type(node->src[0]->type) && node->type == GGML_TYPE_F32;
        case GGML_OP_ARGMAX:
        case GGML_OP_ARGSORT:
        case GGML_OP_TOP_K: return node->src[0] && is_float_type(node->src[0]->type) && node->type == GGML_TYPE_I32;
        case GGML_OP_ACC: return same_float_type(node) && node->src[1] && node->src[1]->type == node->type;
        case GGML_OP_SET: return all_srcs_same_type(node, 2);
        case GGML_OP_ROLL: return all_srcs_same_type(node, 1);
        case GGML_OP_ADD_ID:
            return node->type == GGML_TYPE_F32 && node->src[0]->type == GGML_TYPE_F32 &&
                   node->src[1]->type == GGML_TYPE_F32 && node->src[2]->type == GGML_TYPE_I32;
        case GGML_OP_MUL_MAT_ID:
            return node->type == GGML_TYPE_F32 && is_float_type(node->src[0]->type) &&
                   is_float_type(node->src[1]->type) && node->src[2]->type == GGML_TYPE_I32;
        case GGML_OP_SET_ROWS:
            return is_float_type(node->type) && node->src[0] && is_float_type(node->src[0]->type) && node->src[1] &&
                   (node->src[1]->type == GGML_TYPE_I32 || node->src[1]->type == GGML_TYPE_I64);
        case GGML_OP_MAP_CUSTOM1:
        case GGML_OP_MAP_CUSTOM2:
        case GGML_OP_MAP_CUSTOM3: return true;
        case GGML_OP_WIN_PART:
        case GGML_OP_WIN_UNPART: return node->type == GGML_TYPE_F32 && node->src[0]->type == GGML_TYPE_F32;
        case GGML_OP_GET_REL_POS: return is_float_type(node->src[0]->type) && node->type == GGML_TYPE_F16;
        case GGML_OP_ADD_REL_POS:
            return node->type == GGML_TYPE_F32 && ggml_is_contiguous(node->src[0]) && ggml_is_contiguous(node);

        case GGML_OP_COUNT:
        default: return false;
    }
}
