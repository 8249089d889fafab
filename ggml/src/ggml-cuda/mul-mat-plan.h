#pragma once

// mul-mat-plan.h — how one GGML_OP_MUL_MAT maps onto cuBLAS strided-batched GEMM calls: sizes,
// leading dimensions, and per call the operand offsets, batch strides and batch count, for
// ggml's broadcast of src0's dims 2/3 over src1's. Plain C++ (no CUDA): mul-mat.cu launches the
// calls, test-cuda executes the same plan on the host against the CPU backend.
//
// cuBLAS is column-major: src0's rows are the columns of a K x M matrix A used transposed, src1
// is K x N (B), dst M x N (C): C = A^T B per matrix.

#include <cstdint>
#include <vector>

// A GEMM operand as cuBLAS reads it, in elements: leading dimension (row stride) and the batch
// strides of dims 2 and 3.
struct ggml_cuda_gemm_operand {
    int64_t ld = 0, s2 = 0, s3 = 0;
};

struct ggml_cuda_gemm_call {
    int64_t a_offset = 0, b_offset = 0, c_offset = 0; // elements from each operand's base
    int64_t stride_a = 0, stride_b = 0, stride_c = 0; // between the call's batch entries
    int     count    = 0;                             // batch entries
};

struct ggml_cuda_gemm_plan {
    int                              m = 0, n = 0, k = 0; // dst ne0, dst ne1, src0 ne0
    std::vector<ggml_cuda_gemm_call> calls;
};

// ne0 / ne1: src0's and src1's extents; a, b, c: the operands (c: dst, packed rows).
inline ggml_cuda_gemm_plan ggml_cuda_plan_mul_mat(const int64_t ne0[4], const int64_t ne1[4],
                                                  const ggml_cuda_gemm_operand & a, const ggml_cuda_gemm_operand & b,
                                                  const ggml_cuda_gemm_operand & c) {
    ggml_cuda_gemm_plan p;
    p.m = (int) ne0[1];
    p.n = (int) ne1[1];
    p.k = (int) ne0[0];
    const int64_t r2 = ne1[2] / ne0[2], r3 = ne1[3] / ne0[3];
    for (int64_t i13 = 0; i13 < ne1[3]; i13++) {
        const int64_t i03 = i13 / r3;
        if (r2 == 1) {
            // every src1 batch with its own src0 batch: one call over dim 2
            ggml_cuda_gemm_call g;
            g.a_offset = i03 * a.s3;
            g.b_offset = i13 * b.s3;
            g.c_offset = i13 * c.s3;
            g.stride_a = a.s2, g.stride_b = b.s2, g.stride_c = c.s2;
            g.count    = (int) ne1[2];
            p.calls.push_back(g);
        } else {
            // r2 consecutive src1 batches share src0 batch i02: stride 0 over A
            for (int64_t i02 = 0; i02 < ne0[2]; i02++) {
                ggml_cuda_gemm_call g;
                g.a_offset = i02 * a.s2 + i03 * a.s3;
                g.b_offset = i02 * r2 * b.s2 + i13 * b.s3;
                g.c_offset = i02 * r2 * c.s2 + i13 * c.s3;
                g.stride_a = 0, g.stride_b = b.s2, g.stride_c = c.s2;
                g.count    = (int) r2;
                p.calls.push_back(g);
            }
        }
    }
    return p;
}
