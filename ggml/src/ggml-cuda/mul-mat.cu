// mul-mat.cu — GGML_OP_MUL_MAT on cuBLAS (declared in common.cuh).
//
// dst[i, j] = sum_k src0[k, i] * src1[k, j] per matrix, with src0's dims 2/3 broadcast over
// src1's (ggml's rule: src1 batch i12 uses src0 batch i12 / (ne12 / ne02), likewise dim 3).
// cuBLAS is column-major: src0's rows are the columns of a K x M matrix used transposed, src1 is
// K x N, dst M x N; row strides become leading dimensions, batch strides cuBLAS strides, so
// strided operands with packed rows are used in place.
//
// Precision (the backend-ops tolerances): F32 accumulation always (CUBLAS_COMPUTE_32F, never
// TF32). Both operands must share one GEMM type, chosen so that no operand loses precision it
// is expected to keep:
//   F32 weights, or F16 weights with non-F16 activations -> F32 GEMM (weights widened: exact)
//   F16 weights with F16 activations                        -> F16 GEMM
//   BF16 weights                                            -> BF16 GEMM (activations rounded to
//                                                              BF16, as upstream's CPU backend does)
//   block-quantized weights -> dequantized (convert.cu; permuted weights too, rows stay whole
//                              blocks) to F16 when the activations are F16, to F32
//                              otherwise (the reference's values exactly), then as above.

#include "common.cuh"
#include "convert.cuh"
#include "mul-mat-plan.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <climits>

namespace {

constexpr int k_block_threads = 256;

bool is_block_quantized(ggml_type t) { return t != GGML_TYPE_F32 && t != GGML_TYPE_F16 && t != GGML_TYPE_BF16; }

size_t gemm_type_size(ggml_type t) { return t == GGML_TYPE_F32 ? 4 : 2; }

cudaDataType_t cuda_type(ggml_type t) {
    switch (t) {
        case GGML_TYPE_F16:  return CUDA_R_16F;
        case GGML_TYPE_BF16: return CUDA_R_16BF;
        default:             return CUDA_R_32F;
    }
}

ggml_type gemm_type_for(const ggml_tensor * src0, const ggml_tensor * src1) {
    if (src0->type == GGML_TYPE_BF16) return GGML_TYPE_BF16;
    if (src1->type == GGML_TYPE_F16 && (src0->type == GGML_TYPE_F16 || is_block_quantized(src0->type))) {
        return GGML_TYPE_F16;
    }
    return GGML_TYPE_F32;
}

// A 4-D strided F32 / F16 / BF16 tensor into a packed one of another of those types.
__global__ void pack_kernel(const char * __restrict__ src, ggml_type st, int64_t ne0, int64_t ne1, int64_t ne2,
                            size_t nb0, size_t nb1, size_t nb2, size_t nb3, void * __restrict__ dst, ggml_type dt,
                            int64_t n) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int64_t i0 = i % ne0, i1 = (i / ne0) % ne1, i2 = (i / (ne0 * ne1)) % ne2, i3 = i / (ne0 * ne1 * ne2);
    const char *  p  = src + i0 * nb0 + i1 * nb1 + i2 * nb2 + i3 * nb3;
    float         x;
    switch (st) {
        case GGML_TYPE_F16:  x = __half2float(*(const __half *) p); break;
        case GGML_TYPE_BF16: x = __bfloat162float(*(const __nv_bfloat16 *) p); break;
        default:             x = *(const float *) p; break;
    }
    switch (dt) {
        case GGML_TYPE_F16:  ((__half *) dst)[i] = __float2half_rn(x); break;
        case GGML_TYPE_BF16: ((__nv_bfloat16 *) dst)[i] = __float2bfloat16_rn(x); break;
        default:             ((float *) dst)[i] = x; break;
    }
}

// One GEMM operand: its data and its layout for cuBLAS (mul-mat-plan.h).
struct operand {
    const void *           data = nullptr;
    ggml_cuda_gemm_operand layout;
};

// Use t in place when it already has the GEMM type and packed rows; otherwise pack (and
// convert / dequantize) it into pool memory held by `tmp`.
operand prepare(ggml_cuda_op_ctx & ctx, const ggml_tensor * t, ggml_type gt, ggml_cuda_pool_alloc<char> & tmp) {
    const size_t es = gemm_type_size(gt);
    operand      o;
    if (t->type == gt && t->nb[0] == es && t->nb[1] % es == 0 && t->nb[2] % es == 0 && t->nb[3] % es == 0 &&
        (int64_t) (t->nb[1] / es) >= t->ne[0]) {
        o.data      = t->data;
        o.layout.ld = (int64_t) (t->nb[1] / es);
        o.layout.s2 = (int64_t) (t->nb[2] / es);
        o.layout.s3 = (int64_t) (t->nb[3] / es);
        return o;
    }
    const int64_t n = ggml_nelements(t);
    void *        p = tmp.alloc((size_t) n * es);
    if (is_block_quantized(t->type)) {
        // rows of whole blocks (ggml_cuda_mul_mat_supports); contiguous in one run
        const bool packed = ggml_is_contiguous(t);
        if (gt == GGML_TYPE_F16) {
            if (packed) ggml_cuda_convert_to_f16(t->data, t->type, (__half *) p, n, ctx.stream);
            else        ggml_cuda_dequantize_rows_to_f16(t, (__half *) p, ctx.stream);
        } else {
            if (packed) ggml_cuda_convert_to_f32(t->data, t->type, (float *) p, n, ctx.stream);
            else        ggml_cuda_dequantize_rows_to_f32(t, (float *) p, ctx.stream);
        }
    } else {
        const int64_t grid = (n + k_block_threads - 1) / k_block_threads;
        pack_kernel<<<(unsigned) grid, k_block_threads, 0, ctx.stream>>>((const char *) t->data, t->type, t->ne[0],
                                                                         t->ne[1], t->ne[2], t->nb[0], t->nb[1],
                                                                         t->nb[2], t->nb[3], p, gt, n);
    }
    o.data      = p;
    o.layout.ld = t->ne[0];
    o.layout.s2 = t->ne[0] * t->ne[1];
    o.layout.s3 = t->ne[0] * t->ne[1] * t->ne[2];
    return o;
}

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

} // namespace

bool ggml_cuda_mul_mat_supports(const ggml_tensor * op, int cc) {
    const ggml_tensor * src0 = op->src[0];
    const ggml_tensor * src1 = op->src[1];
    if (!src0 || !src1 || op->type != GGML_TYPE_F32) return false;
    if (!ggml_cuda_can_convert(src0->type)) return false;
    if (src1->type != GGML_TYPE_F32 && src1->type != GGML_TYPE_F16 && src1->type != GGML_TYPE_BF16) return false;
    if (src0->type == GGML_TYPE_BF16 && cc < 80) return false; // BF16 GEMM: Ampere and later
    // block-quantized weights are dequantized row by row: each row a run of whole blocks
    if (is_block_quantized(src0->type) && src0->nb[0] != ggml_type_size(src0->type)) return false;
    if (op->nb[0] != sizeof(float) || op->nb[1] != (size_t) op->ne[0] * sizeof(float)) return false;
    if (src0->ne[2] == 0 || src0->ne[3] == 0 || src1->ne[2] % src0->ne[2] != 0 || src1->ne[3] % src0->ne[3] != 0) {
        return false;
    }
    // cuBLAS takes int sizes and leading dimensions
    const int64_t ld_max = std::max<int64_t>(src0->nb[1], src1->nb[1]) / 2;
    return fits_int(op->ne[0]) && fits_int(op->ne[1]) && fits_int(src0->ne[0]) && fits_int(ld_max) &&
           fits_int(src1->ne[2]);
}

void ggml_cuda_mul_mat(ggml_cuda_op_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * src1 = dst->src[1];
    const ggml_type     gt   = gemm_type_for(src0, src1);

    ggml_cuda_pool_alloc<char> tmp0(*ctx.pool), tmp1(*ctx.pool);
    const operand a = prepare(ctx, src0, gt, tmp0);
    const operand b = prepare(ctx, src1, gt, tmp1);

    ggml_cuda_gemm_operand c;
    c.ld = dst->ne[0];
    c.s2 = (int64_t) (dst->nb[2] / sizeof(float));
    c.s3 = (int64_t) (dst->nb[3] / sizeof(float));
    const ggml_cuda_gemm_plan plan = ggml_cuda_plan_mul_mat(src0->ne, src1->ne, a.layout, b.layout, c);

    const size_t         es    = gemm_type_size(gt);
    const float          alpha = 1.0f, beta = 0.0f;
    const cudaDataType_t t     = cuda_type(gt);
    for (const ggml_cuda_gemm_call & g : plan.calls) {
        const char * pa = (const char *) a.data + (size_t) g.a_offset * es;
        const char * pb = (const char *) b.data + (size_t) g.b_offset * es;
        float *      pc = (float *) dst->data + g.c_offset;
        CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, plan.m, plan.n, plan.k, &alpha,
                                                pa, t, (int) a.layout.ld, g.stride_a, pb, t, (int) b.layout.ld,
                                                g.stride_b, &beta, pc, CUDA_R_32F, (int) c.ld, g.stride_c, g.count,
                                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
}
