// ops.cu — the dispatcher of the CUDA op kernels other than MUL_MAT: which nodes they run
// (ggml_cuda_ops_supports, the table the backend's supports_op trusts) and the per-node call
// (ggml_cuda_ops_compute). Whatever is declined here runs on another backend (the CPU), so the
// table says yes only to what the kernels compute exactly as the CPU backend does.

#include "ops-common.cuh"

namespace {

enum class ops_file { none, view, elementwise, rows, layout, image, flash_attn };

// which kernel file owns an op (view: no work)
ops_file owner_of(ggml_op op) {
    switch (op) {
        case GGML_OP_NONE:
        case GGML_OP_RESHAPE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE: return ops_file::view;

        case GGML_OP_DUP:
        case GGML_OP_CONT:
        case GGML_OP_CPY:
        case GGML_OP_ADD:
        case GGML_OP_SUB:
        case GGML_OP_MUL:
        case GGML_OP_DIV:
        case GGML_OP_SQR:
        case GGML_OP_SQRT:
        case GGML_OP_SCALE:
        case GGML_OP_UNARY:
        case GGML_OP_GLU:
        case GGML_OP_CLAMP:
        case GGML_OP_LEAKY_RELU:
        case GGML_OP_LOG:
        case GGML_OP_SIN:
        case GGML_OP_COS:
        case GGML_OP_DIAG_MASK_INF: return ops_file::elementwise;

        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM:
        case GGML_OP_L2_NORM:
        case GGML_OP_GROUP_NORM:
        case GGML_OP_SOFT_MAX:
        case GGML_OP_ROPE:
        case GGML_OP_SUM:
        case GGML_OP_SUM_ROWS:
        case GGML_OP_MEAN:
        case GGML_OP_ARGMAX:
        case GGML_OP_ARGSORT:
        case GGML_OP_TOP_K: return ops_file::rows;

        case GGML_OP_GET_ROWS:
        case GGML_OP_SET_ROWS:
        case GGML_OP_CONCAT:
        case GGML_OP_PAD:
        case GGML_OP_REPEAT:
        case GGML_OP_ROLL:
        case GGML_OP_ACC:
        case GGML_OP_SET:
        case GGML_OP_ARANGE:
        case GGML_OP_TIMESTEP_EMBEDDING: return ops_file::layout;

        case GGML_OP_UPSCALE:
        case GGML_OP_IM2COL:
        case GGML_OP_IM2COL_3D:
        case GGML_OP_CONV_2D:
        case GGML_OP_CONV_3D:
        case GGML_OP_CONV_2D_DW:
        case GGML_OP_CONV_TRANSPOSE_1D:
        case GGML_OP_CONV_TRANSPOSE_2D:
        case GGML_OP_POOL_1D:
        case GGML_OP_POOL_2D: return ops_file::image;

        case GGML_OP_FLASH_ATTN_EXT: return ops_file::flash_attn;

        default: return ops_file::none; // MUL_MAT (mul-mat.cu), CUSTOM/extension nodes, the rest
    }
}

} // namespace

bool ggml_cuda_ops_supports(const struct ggml_tensor * op, int cc) {
    (void) cc; // every kernel here runs on any architecture the backend is built for (sm_80+)
    if (!op) return false;
    switch (owner_of(op->op)) {
        case ops_file::view: return true;
        case ops_file::elementwise: return ggml_cuda_elementwise_supports(op);
        case ops_file::rows: return ggml_cuda_rows_supports(op);
        case ops_file::layout: return ggml_cuda_layout_supports(op);
        case ops_file::image: return ggml_cuda_image_supports(op);
        case ops_file::flash_attn: return ggml_cuda_flash_attn_supports(op);
        case ops_file::none: return false;
    }
    return false;
}

bool ggml_cuda_ops_compute(ggml_cuda_op_ctx & ctx, struct ggml_tensor * node) {
    if (!ggml_cuda_ops_supports(node, ctx.cc)) return false;
    const ops_file f = owner_of(node->op);
    if (f == ops_file::view || ggml_is_empty(node)) return true; // nothing to compute
    switch (f) {
        case ops_file::elementwise: ggml_cuda_elementwise_compute(ctx, node); break;
        case ops_file::rows: ggml_cuda_rows_compute(ctx, node); break;
        case ops_file::layout: ggml_cuda_layout_compute(ctx, node); break;
        case ops_file::image: ggml_cuda_image_compute(ctx, node); break;
        case ops_file::flash_attn: ggml_cuda_flash_attn_compute(ctx, node); break;
        default: return false;
    }
    // launch errors are left to the backend's check after the graph (a failed status, no abort)
    return true;
}
