// ggml-ops-conv.cpp — constructors of the image ops diffusion clients use: im2col, the
// convolutions (upstream's im2col + mul_mat compositions and the primitive CONV_* ops), pooling,
// resizing (UPSCALE), group_norm / l2_norm and circular padding. Shapes, argument order and
// op_params layouts follow upstream ggml (see ggml.h); kernels are in ggml-cpu/ops-conv.cpp and
// ggml-cpu/ops-pool-upscale.cpp.

#include "ggml-impl.h"

namespace {

// output extent of a convolution along one dim
int64_t conv_out_size(int64_t ins, int64_t ks, int s, int p, int d) {
    return (ins + 2 * p - d * (ks - 1) - 1) / s + 1;
}

int64_t conv_transpose_out_size(int64_t ins, int64_t ks, int s, int p, int d) {
    return (ins - 1) * s - 2 * p + d * (ks - 1) + 1;
}

int64_t pool_out_size(int64_t ins, int ks, int s, float p) {
    return (int64_t) ((float) (ins + 2 * p - ks) / s + 1);
}

void check_conv_params(const char * op, int s0, int s1, int d0, int d1) {
    if (s0 <= 0 || s1 <= 0 || d0 <= 0 || d1 <= 0) {
        GGML_ABORT("%s: strides and dilations must be positive (s0=%d s1=%d d0=%d d1=%d)", op, s0, s1, d0, d1);
    }
}

struct ggml_tensor * group_norm_impl(struct ggml_context * ctx, struct ggml_tensor * a, int n_groups, float eps,
                                     bool inplace) {
    GGML_ASSERT(n_groups > 0 && "group_norm: n_groups must be positive");
    struct ggml_tensor * result = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    ggml_set_op_params_i32(result, 0, n_groups);
    ggml_set_op_params_f32(result, 1, eps);
    result->op     = GGML_OP_GROUP_NORM;
    result->src[0] = a;
    return result;
}

struct ggml_tensor * l2_norm_impl(struct ggml_context * ctx, struct ggml_tensor * a, float eps, bool inplace) {
    struct ggml_tensor * result = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    ggml_set_op_params_f32(result, 0, eps);
    result->op     = GGML_OP_L2_NORM;
    result->src[0] = a;
    return result;
}

} // namespace

extern "C" {

struct ggml_tensor * ggml_im2col(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int s0,
                                 int s1, int p0, int p1, int d0, int d1, bool is_2D, enum ggml_type dst_type) {
    check_conv_params("im2col", s0, is_2D ? s1 : 1, d0, is_2D ? d1 : 1);
    if (is_2D) {
        GGML_ASSERT(a->ne[2] == b->ne[2] && "im2col: kernel and data must have the same channel count (dim 2)");
    } else {
        GGML_ASSERT(a->ne[1] == b->ne[1] && "im2col: kernel and data must have the same channel count (dim 1)");
        GGML_ASSERT(b->ne[3] == 1 && "im2col: 1D data must be 3-D");
    }
    const int64_t OH = is_2D ? conv_out_size(b->ne[1], a->ne[1], s1, p1, d1) : 0;
    const int64_t OW = conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
    GGML_ASSERT((!is_2D || OH > 0) && "im2col: kernel taller than the padded input");
    GGML_ASSERT(OW > 0 && "im2col: kernel wider than the padded input");

    const int64_t ne[4] = {
        is_2D ? a->ne[2] * a->ne[1] * a->ne[0] : a->ne[1] * a->ne[0],
        OW,
        is_2D ? OH : b->ne[2],
        is_2D ? b->ne[3] : 1,
    };
    struct ggml_tensor * result = ggml_new_tensor(ctx, dst_type, 4, ne);
    const int32_t        params[] = {s0, s1, p0, p1, d0, d1, is_2D ? 1 : 0};
    ggml_set_op_params(result, params, sizeof(params));
    result->op     = GGML_OP_IM2COL;
    result->src[0] = a;
    result->src[1] = b;
    return result;
}

struct ggml_tensor * ggml_conv_1d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int s0,
                                  int p0, int d0) {
    struct ggml_tensor * im2col = ggml_im2col(ctx, a, b, s0, 0, p0, 0, d0, 0, false, GGML_TYPE_F16); // [N, OL, IC*K]
    struct ggml_tensor * result =
        ggml_mul_mat(ctx, ggml_reshape_2d(ctx, im2col, im2col->ne[0], im2col->ne[2] * im2col->ne[1]),
                     ggml_reshape_2d(ctx, a, a->ne[0] * a->ne[1], a->ne[2])); // [OC, N*OL]
    if (im2col->ne[2] == 1) {
        return ggml_reshape_3d(ctx, result, im2col->ne[1], a->ne[2], 1); // [1, OC, OL], as upstream
    }
    // DELIBERATE DIFFERENCE: upstream reshapes [OC, N*OL] straight to [N, OC, OL], which mixes
    // batches when N > 1; the batch is moved outwards instead.
    result = ggml_reshape_3d(ctx, result, im2col->ne[1], im2col->ne[2], a->ne[2]); // [OC, N, OL]
    return ggml_cont(ctx, ggml_permute(ctx, result, 0, 2, 1, 3));                   // [N, OC, OL]
}

struct ggml_tensor * ggml_conv_1d_ph(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int s,
                                     int d) {
    return ggml_conv_1d(ctx, a, b, s, (int) (a->ne[0] / 2), d);
}

struct ggml_tensor * ggml_conv_2d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int s0,
                                  int s1, int p0, int p1, int d0, int d1) {
    struct ggml_tensor * im2col = ggml_im2col(ctx, a, b, s0, s1, p0, p1, d0, d1, true, a->type); // [N, OH, OW, IC*KH*KW]
    struct ggml_tensor * result =
        ggml_mul_mat(ctx, ggml_reshape_2d(ctx, im2col, im2col->ne[0], im2col->ne[3] * im2col->ne[2] * im2col->ne[1]),
                     ggml_reshape_2d(ctx, a, a->ne[0] * a->ne[1] * a->ne[2], a->ne[3])); // [OC, N*OH*OW]
    result = ggml_reshape_4d(ctx, result, im2col->ne[1], im2col->ne[2], im2col->ne[3], a->ne[3]); // [OC, N, OH, OW]
    return ggml_cont(ctx, ggml_permute(ctx, result, 0, 1, 3, 2));                                 // [N, OC, OH, OW]
}

struct ggml_tensor * ggml_conv_2d_sk_p0(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    return ggml_conv_2d(ctx, a, b, (int) a->ne[0], (int) a->ne[1], 0, 0, 1, 1);
}

struct ggml_tensor * ggml_conv_2d_s1_ph(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b) {
    return ggml_conv_2d(ctx, a, b, 1, 1, (int) (a->ne[0] / 2), (int) (a->ne[1] / 2), 1, 1);
}

struct ggml_tensor * ggml_conv_2d_direct(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                         int s0, int s1, int p0, int p1, int d0, int d1) {
    check_conv_params("conv_2d_direct", s0, s1, d0, d1);
    GGML_ASSERT(a->ne[2] == b->ne[2] && "conv_2d_direct: kernel [KW, KH, IC, OC] and data [W, H, IC, N] disagree on IC");
    const int64_t OW = conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
    const int64_t OH = conv_out_size(b->ne[1], a->ne[1], s1, p1, d1);
    GGML_ASSERT(OW > 0 && OH > 0 && "conv_2d_direct: kernel larger than the padded input");
    const int64_t        ne[4]    = {OW, OH, a->ne[3], b->ne[3]};
    struct ggml_tensor * result   = ggml_new_tensor(ctx, b->type, 4, ne);
    const int32_t        params[] = {s0, s1, p0, p1, d0, d1};
    ggml_set_op_params(result, params, sizeof(params));
    result->op     = GGML_OP_CONV_2D;
    result->src[0] = a;
    result->src[1] = b;
    return result;
}

struct ggml_tensor * ggml_conv_2d_dw(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int s0,
                                     int s1, int p0, int p1, int d0, int d1) {
    struct ggml_tensor * new_a  = ggml_reshape_4d(ctx, a, a->ne[0], a->ne[1], 1, a->ne[2] * a->ne[3]);
    struct ggml_tensor * im2col = ggml_im2col(ctx, new_a, ggml_reshape_4d(ctx, b, b->ne[0], b->ne[1], 1, b->ne[2] * b->ne[3]),
                                              s0, s1, p0, p1, d0, d1, true, GGML_TYPE_F16); // [N*C, OH, OW, KH*KW]
    struct ggml_tensor * new_b  = ggml_reshape_4d(ctx, im2col, im2col->ne[0], im2col->ne[2] * im2col->ne[1], b->ne[2],
                                                  b->ne[3]); // [N, C, OH*OW, KH*KW]
    new_a = ggml_reshape_4d(ctx, new_a, new_a->ne[0] * new_a->ne[1], new_a->ne[2], new_a->ne[3], 1); // [1, C, 1, KH*KW]
    struct ggml_tensor * result = ggml_mul_mat(ctx, new_a, new_b);
    return ggml_reshape_4d(ctx, result, im2col->ne[1], im2col->ne[2], b->ne[2], b->ne[3]); // [N, C, OH, OW]
}

struct ggml_tensor * ggml_conv_2d_dw_direct(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                            int stride0, int stride1, int pad0, int pad1, int dilation0,
                                            int dilation1) {
    check_conv_params("conv_2d_dw_direct", stride0, stride1, dilation0, dilation1);
    GGML_ASSERT(a->ne[2] == 1 && "conv_2d_dw_direct: kernel must be [KW, KH, 1, C]");
    GGML_ASSERT(a->ne[3] == b->ne[2] && "conv_2d_dw_direct: kernel channels (dim 3) must equal data channels (dim 2)");
    const int64_t OW = conv_out_size(b->ne[0], a->ne[0], stride0, pad0, dilation0);
    const int64_t OH = conv_out_size(b->ne[1], a->ne[1], stride1, pad1, dilation1);
    GGML_ASSERT(OW > 0 && OH > 0 && "conv_2d_dw_direct: kernel larger than the padded input");
    const int64_t        ne[4]    = {OW, OH, b->ne[2], b->ne[3]};
    struct ggml_tensor * result   = ggml_new_tensor(ctx, b->type, 4, ne);
    const int32_t        params[] = {stride0, stride1, pad0, pad1, dilation0, dilation1};
    ggml_set_op_params(result, params, sizeof(params));
    result->op     = GGML_OP_CONV_2D_DW;
    result->src[0] = a;
    result->src[1] = b;
    return result;
}

struct ggml_tensor * ggml_conv_1d_dw(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int s0,
                                     int p0, int d0) {
    struct ggml_tensor * new_a  = ggml_reshape_4d(ctx, a, a->ne[0], 1, a->ne[1], a->ne[2]);
    struct ggml_tensor * new_b  = ggml_reshape_4d(ctx, b, b->ne[0], 1, b->ne[1], b->ne[2]);
    struct ggml_tensor * im2col = ggml_im2col(ctx, new_a, new_b, s0, 0, p0, 0, d0, 0, false, GGML_TYPE_F16);
    struct ggml_tensor * result = ggml_mul_mat(ctx, im2col, a);
    // upstream reshapes to b's length; taking the im2col width is the same whenever that is valid
    return ggml_reshape_3d(ctx, result, im2col->ne[1], b->ne[1], b->ne[2]);
}

struct ggml_tensor * ggml_conv_1d_dw_ph(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                        int s0, int d0) {
    return ggml_conv_1d_dw(ctx, a, b, s0, (int) (a->ne[0] / 2), d0);
}

struct ggml_tensor * ggml_conv_transpose_1d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                            int s0, int p0, int d0) {
    GGML_ASSERT(ggml_is_matrix(b) && "conv_transpose_1d: data must be [L, IC]");
    GGML_ASSERT(a->ne[2] == b->ne[1] && "conv_transpose_1d: kernel [K, OC, IC] and data [L, IC] disagree on IC");
    GGML_ASSERT(a->ne[3] == 1);
    GGML_ASSERT(p0 == 0 && "conv_transpose_1d: padding is not supported (as upstream)");
    GGML_ASSERT(d0 == 1 && "conv_transpose_1d: dilation is not supported (as upstream)");
    GGML_ASSERT(s0 > 0);
    const int64_t        ne[4]    = {conv_transpose_out_size(b->ne[0], a->ne[0], s0, 0, 1), a->ne[1], b->ne[2], 1};
    struct ggml_tensor * result   = ggml_new_tensor(ctx, GGML_TYPE_F32, 4, ne);
    const int32_t        params[] = {s0, p0, d0};
    ggml_set_op_params(result, params, sizeof(params));
    result->op     = GGML_OP_CONV_TRANSPOSE_1D;
    result->src[0] = a;
    result->src[1] = b;
    return result;
}

struct ggml_tensor * ggml_conv_transpose_2d_p0(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b, int stride) {
    GGML_ASSERT(a->ne[3] == b->ne[2] && "conv_transpose_2d_p0: kernel [KW, KH, OC, IC] and data [W, H, IC, N] disagree on IC");
    GGML_ASSERT(stride > 0);
    const int64_t ne[4] = {
        conv_transpose_out_size(b->ne[0], a->ne[0], stride, 0, 1),
        conv_transpose_out_size(b->ne[1], a->ne[1], stride, 0, 1),
        a->ne[2],
        b->ne[3],
    };
    struct ggml_tensor * result = ggml_new_tensor(ctx, GGML_TYPE_F32, 4, ne);
    ggml_set_op_params_i32(result, 0, stride);
    result->op     = GGML_OP_CONV_TRANSPOSE_2D;
    result->src[0] = a;
    result->src[1] = b;
    return result;
}

struct ggml_tensor * ggml_im2col_3d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int64_t IC,
                                    int s0, int s1, int s2, int p0, int p1, int p2, int d0, int d1, int d2,
                                    enum ggml_type dst_type) {
    check_conv_params("im2col_3d", s0, s1, d0, d1);
    GGML_ASSERT(s2 > 0 && d2 > 0 && "im2col_3d: strides and dilations must be positive");
    GGML_ASSERT(IC > 0 && b->ne[3] % IC == 0 && "im2col_3d: data dim 3 must be IC*N");
    const int64_t N  = b->ne[3] / IC;
    const int64_t OW = conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
    const int64_t OH = conv_out_size(b->ne[1], a->ne[1], s1, p1, d1);
    const int64_t OD = conv_out_size(b->ne[2], a->ne[2], s2, p2, d2);
    GGML_ASSERT(OW > 0 && OH > 0 && OD > 0 && "im2col_3d: kernel larger than the padded input");
    const int64_t        ne[4]    = {a->ne[0] * a->ne[1] * a->ne[2] * IC, OW, OH, OD * N};
    struct ggml_tensor * result   = ggml_new_tensor(ctx, dst_type, 4, ne);
    const int32_t        params[] = {s0, s1, s2, p0, p1, p2, d0, d1, d2, (int32_t) IC};
    ggml_set_op_params(result, params, sizeof(params));
    result->op     = GGML_OP_IM2COL_3D;
    result->src[0] = a;
    result->src[1] = b;
    return result;
}

struct ggml_tensor * ggml_conv_3d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, int64_t IC,
                                  int s0, int s1, int s2, int p0, int p1, int p2, int d0, int d1, int d2) {
    GGML_ASSERT(a->ne[3] % IC == 0 && "conv_3d: kernel dim 3 must be IC*OC");
    struct ggml_tensor * im2col = ggml_im2col_3d(ctx, a, b, IC, s0, s1, s2, p0, p1, p2, d0, d1, d2, a->type); // [N*OD, OH, OW, IC*KD*KH*KW]
    const int64_t        OC     = a->ne[3] / IC;
    const int64_t        N      = b->ne[3] / IC;
    struct ggml_tensor * result =
        ggml_mul_mat(ctx, ggml_reshape_2d(ctx, im2col, im2col->ne[0], im2col->ne[3] * im2col->ne[2] * im2col->ne[1]),
                     ggml_reshape_2d(ctx, a, a->ne[0] * a->ne[1] * a->ne[2] * IC, OC)); // [OC, N*OD*OH*OW]
    const int64_t OD = im2col->ne[3] / N;
    result = ggml_reshape_4d(ctx, result, im2col->ne[1] * im2col->ne[2], OD, N, OC); // [OC, N, OD, OH*OW]
    result = ggml_cont(ctx, ggml_permute(ctx, result, 0, 1, 3, 2));                  // [N, OC, OD, OH*OW]
    return ggml_reshape_4d(ctx, result, im2col->ne[1], im2col->ne[2], OD, OC * N);    // [N*OC, OD, OH, OW]
}

struct ggml_tensor * ggml_conv_3d_direct(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                         int s0, int s1, int s2, int p0, int p1, int p2, int d0, int d1, int d2,
                                         int n_channels, int n_batch, int n_channels_out) {
    check_conv_params("conv_3d_direct", s0, s1, d0, d1);
    GGML_ASSERT(s2 > 0 && d2 > 0);
    GGML_ASSERT(a->ne[3] == (int64_t) n_channels * n_channels_out && "conv_3d_direct: kernel dim 3 must be IC*OC");
    GGML_ASSERT(b->ne[3] == (int64_t) n_channels * n_batch && "conv_3d_direct: data dim 3 must be IC*N");
    const int64_t OW = conv_out_size(b->ne[0], a->ne[0], s0, p0, d0);
    const int64_t OH = conv_out_size(b->ne[1], a->ne[1], s1, p1, d1);
    const int64_t OD = conv_out_size(b->ne[2], a->ne[2], s2, p2, d2);
    GGML_ASSERT(OW > 0 && OH > 0 && OD > 0 && "conv_3d_direct: kernel larger than the padded input");
    struct ggml_tensor * result = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, OW, OH, OD, (int64_t) n_channels_out * n_batch);
    const int32_t params[] = {s0, s1, s2, p0, p1, p2, d0, d1, d2, n_channels, n_batch, n_channels_out};
    ggml_set_op_params(result, params, sizeof(params));
    result->op     = GGML_OP_CONV_3D;
    result->src[0] = a;
    result->src[1] = b;
    return result;
}

struct ggml_tensor * ggml_pool_1d(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_op_pool op, int k0,
                                  int s0, int p0) {
    GGML_ASSERT(op == GGML_OP_POOL_MAX || op == GGML_OP_POOL_AVG);
    GGML_ASSERT(k0 > 0 && s0 > 0 && p0 >= 0 && "pool_1d: kernel and stride must be positive");
    const int64_t ow = pool_out_size(a->ne[0], k0, s0, (float) p0);
    GGML_ASSERT(ow > 0 && "pool_1d: kernel larger than the padded input");
    const int64_t        ne[4]    = {ow, a->ne[1], a->ne[2], a->ne[3]};
    struct ggml_tensor * result   = ggml_new_tensor(ctx, GGML_TYPE_F32, 4, ne);
    const int32_t        params[] = {op, k0, s0, p0};
    ggml_set_op_params(result, params, sizeof(params));
    result->op     = GGML_OP_POOL_1D;
    result->src[0] = a;
    return result;
}

struct ggml_tensor * ggml_pool_2d(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_op_pool op, int k0,
                                  int k1, int s0, int s1, float p0, float p1) {
    GGML_ASSERT(op == GGML_OP_POOL_MAX || op == GGML_OP_POOL_AVG);
    GGML_ASSERT(k0 > 0 && k1 > 0 && s0 > 0 && s1 > 0 && p0 >= 0 && p1 >= 0 && "pool_2d: bad kernel/stride/padding");
    const int64_t ow = pool_out_size(a->ne[0], k0, s0, p0);
    const int64_t oh = pool_out_size(a->ne[1], k1, s1, p1);
    GGML_ASSERT(ow > 0 && oh > 0 && "pool_2d: kernel larger than the padded input");
    const int64_t        ne[4]    = {ow, oh, a->ne[2], a->ne[3]};
    struct ggml_tensor * result   = ggml_new_tensor(ctx, GGML_TYPE_F32, 4, ne);
    const int32_t        params[] = {op, k0, k1, s0, s1, (int32_t) p0, (int32_t) p1};
    ggml_set_op_params(result, params, sizeof(params));
    result->op     = GGML_OP_POOL_2D;
    result->src[0] = a;
    return result;
}

struct ggml_tensor * ggml_interpolate(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0, int64_t ne1,
                                      int64_t ne2, int64_t ne3, uint32_t mode) {
    const uint32_t base = mode & 0xFF;
    if (base >= GGML_SCALE_MODE_COUNT) GGML_ABORT("interpolate: unknown scale mode %u", base);
    if ((mode & ~0xFFu) & ~(uint32_t) GGML_SCALE_FLAG_ALIGN_CORNERS) GGML_ABORT("interpolate: unknown flags 0x%x", mode);
    GGML_ASSERT(ne0 > 0 && ne1 > 0 && ne2 > 0 && ne3 > 0 && "interpolate: target extents must be positive");
    struct ggml_tensor * result = ggml_new_tensor_4d(ctx, a->type, ne0, ne1, ne2, ne3);
    ggml_set_op_params_i32(result, 0, (int32_t) mode);
    result->op     = GGML_OP_UPSCALE;
    result->src[0] = a;
    return result;
}

struct ggml_tensor * ggml_upscale(struct ggml_context * ctx, struct ggml_tensor * a, int scale_factor,
                                  enum ggml_scale_mode mode) {
    GGML_ASSERT(scale_factor > 1 && "upscale: scale factor must be > 1");
    return ggml_interpolate(ctx, a, a->ne[0] * scale_factor, a->ne[1] * scale_factor, a->ne[2], a->ne[3], mode);
}

struct ggml_tensor * ggml_upscale_ext(struct ggml_context * ctx, struct ggml_tensor * a, int ne0, int ne1, int ne2,
                                      int ne3, enum ggml_scale_mode mode) {
    return ggml_interpolate(ctx, a, ne0, ne1, ne2, ne3, mode);
}

struct ggml_tensor * ggml_group_norm(struct ggml_context * ctx, struct ggml_tensor * a, int n_groups, float eps) {
    return group_norm_impl(ctx, a, n_groups, eps, false);
}
struct ggml_tensor * ggml_group_norm_inplace(struct ggml_context * ctx, struct ggml_tensor * a, int n_groups,
                                             float eps) {
    return group_norm_impl(ctx, a, n_groups, eps, true);
}
struct ggml_tensor * ggml_l2_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps) {
    return l2_norm_impl(ctx, a, eps, false);
}
struct ggml_tensor * ggml_l2_norm_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float eps) {
    return l2_norm_impl(ctx, a, eps, true);
}

struct ggml_tensor * ggml_pad_ext_circular(struct ggml_context * ctx, struct ggml_tensor * a, int lp0, int rp0,
                                           int lp1, int rp1, int lp2, int rp2, int lp3, int rp3) {
    struct ggml_tensor * result = ggml_pad_ext(ctx, a, lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3);
    GGML_ASSERT(!ggml_is_empty(a) && "pad_ext_circular: cannot wrap an empty tensor");
    ggml_set_op_params_i32(result, 8, 1);
    return result;
}

struct ggml_tensor * ggml_pad_circular(struct ggml_context * ctx, struct ggml_tensor * a, int p0, int p1, int p2,
                                       int p3) {
    return ggml_pad_ext_circular(ctx, a, 0, p0, 0, p1, 0, p2, 0, p3);
}

} // extern "C"
