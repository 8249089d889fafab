#pragma once

// common.cuh — what every file of the CUDA backend shares: error checks, the per-op execution
// context (device, stream, cuBLAS handle, memory pool) and the op-kernel entry points the
// backend's dispatcher calls. Private to ggml/src/ggml-cuda.

#include "ggml.h"
#include "ggml-impl.h"

#include <cstddef>
#include <cstdint>

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// A CUDA error in the backend is a bug or a lost device: report where and abort, as upstream.
[[noreturn]] void ggml_cuda_error(const char * stmt, const char * func, const char * file, int line, const char * msg);

#define CUDA_CHECK(err)                                                                                  \
    do {                                                                                                 \
        const cudaError_t err_ = (err);                                                                  \
        if (err_ != cudaSuccess) ggml_cuda_error(#err, __func__, __FILE__, __LINE__, cudaGetErrorString(err_)); \
    } while (0)

#define CUBLAS_CHECK(err)                                                                                \
    do {                                                                                                 \
        const cublasStatus_t err_ = (err);                                                               \
        if (err_ != CUBLAS_STATUS_SUCCESS)                                                               \
            ggml_cuda_error(#err, __func__, __FILE__, __LINE__, cublasGetStatusString(err_));            \
    } while (0)

// Temporary device memory for one op (dequantized weights, converted operands). Allocations are
// stream-ordered: memory freed after an op is reused by later ops on the same stream.
struct ggml_cuda_pool {
    virtual ~ggml_cuda_pool() = default;
    virtual void * alloc(size_t size, size_t * actual_size) = 0;
    virtual void   free(void * ptr, size_t size)            = 0;
};

// RAII holder of a pool allocation
template <typename T> struct ggml_cuda_pool_alloc {
    ggml_cuda_pool * pool  = nullptr;
    T *              ptr   = nullptr;
    size_t           bytes = 0;
    explicit ggml_cuda_pool_alloc(ggml_cuda_pool & p) : pool(&p) {}
    ggml_cuda_pool_alloc(ggml_cuda_pool & p, size_t n) : pool(&p) { alloc(n); }
    ~ggml_cuda_pool_alloc() { if (ptr) pool->free(ptr, bytes); }
    T * alloc(size_t n) {
        GGML_ASSERT(ptr == nullptr);
        ptr = (T *) pool->alloc(n * sizeof(T), &bytes);
        return ptr;
    }
    T * get() { return ptr; }
    ggml_cuda_pool_alloc(const ggml_cuda_pool_alloc &)             = delete;
    ggml_cuda_pool_alloc & operator=(const ggml_cuda_pool_alloc &) = delete;
};

// What an op kernel gets: everything is owned by the backend.
struct ggml_cuda_op_ctx {
    int              device;   // physical ordinal, current on the calling thread
    int              cc;       // compute capability, major * 10 + minor
    cudaStream_t     stream;
    cublasHandle_t   cublas;   // bound to stream, host pointer mode
    ggml_cuda_pool * pool;
};

// ---------------------------------------------------------------------------------------------
// Op kernels (ops-*.cu): every op other than MUL_MAT. The backend's supports_op asks
// ggml_cuda_ops_supports for those; graph_compute calls ggml_cuda_ops_compute, which returns
// false only for a node it does not support (a bug: supports_op said yes).
bool ggml_cuda_ops_supports(const struct ggml_tensor * op, int cc);
bool ggml_cuda_ops_compute(ggml_cuda_op_ctx & ctx, struct ggml_tensor * node);

// MUL_MAT (mul-mat.cu): cuBLAS for F32/F16/BF16, dequantize-then-cuBLAS for block types.
bool ggml_cuda_mul_mat_supports(const struct ggml_tensor * op, int cc);
void ggml_cuda_mul_mat(ggml_cuda_op_ctx & ctx, struct ggml_tensor * dst);

// Device-side conversions shared by ops (convert.cu): block-quantized / F16 / BF16 rows to F16
// or F32, n elements of contiguous data, on ctx.stream.
bool ggml_cuda_can_convert(enum ggml_type type);
void ggml_cuda_convert_to_f16(const void * src, enum ggml_type type, __half * dst, int64_t n, cudaStream_t stream);
void ggml_cuda_convert_to_f32(const void * src, enum ggml_type type, float * dst, int64_t n, cudaStream_t stream);
