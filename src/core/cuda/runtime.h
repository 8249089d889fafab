#pragma once

// runtime.h — what every sd CUDA kernel file (src/core/cuda) shares: the runtime headers, the
// namespace the kernels live in, error checks that turn a failed runtime call into a failed step
// (never an abort: the scheduler reports the status), warp reductions, the borrowed-stream /
// cuBLAS-handle access and the host-side helpers of the supports() callbacks.
//
// Only public ggml headers are used (ggml.h, ggml-backend.h, ggml-ext.h, ggml-ext-cuda.h); the
// backend's stream, cuBLAS handle and device facts come through the ggml_ext_cuda_* /
// ggml_ext_gpu_* services of the CUDA registry (scripts/check-public-includes.sh checks it).
// No CUTLASS, CuTe, SageAttention or Sol kernels are part of this directory: every kernel here is
// plain CUDA C++ and the INT8 GEMM is cuBLAS.
//
// HIP / MUSA notes (the spec compiles these files once per runtime; only CUDA is built here):
//  * SD_CUDA_NAMESPACE would expand to sd_hip / sd_musa so the three builds can coexist;
//  * hipify maps cuda* / cublas* one to one; cublasGemmEx's INT8 path is hipblasGemmEx with
//    HIPBLAS_R_8I and the architecture eligibility of the HIP backend (MUSA: no INT8 BLAS, the
//    supports() callbacks decline and the scheduler falls back);
//  * warp_sum_* use logical 32-lane shuffles (__shfl_xor_sync with width 32): on a 64-wide AMD
//    wavefront HIP's __shfl_xor with width 32 keeps the halves independent, so the reductions and
//    their order are the same on every runtime.

#include "ggml-backend.h"
#include "ggml-ext-cuda.h"
#include "ggml-ext.h"
#include "ggml.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#ifndef SD_CUDA_NAMESPACE
#define SD_CUDA_NAMESPACE sd_cuda
#endif

namespace SD_CUDA_NAMESPACE {

// A failed runtime call fails the step with a message (the device may be lost; the scheduler
// reports GGML_STATUS_FAILED to the caller instead of aborting the process).
inline bool cuda_ok(cudaError_t e, const char * what) {
    if (e == cudaSuccess) return true;
    fprintf(stderr, "sd cuda: %s failed: %s\n", what, cudaGetErrorString(e));
    return false;
}
inline bool cublas_ok(cublasStatus_t e, const char * what) {
    if (e == CUBLAS_STATUS_SUCCESS) return true;
    fprintf(stderr, "sd cuda: %s failed: cuBLAS status %d\n", what, (int) e);
    return false;
}
// After a launch: the launch error, if any (does not synchronize, so capture-safe).
inline bool launched(const char * kernel) { return cuda_ok(cudaGetLastError(), kernel); }

#ifdef __CUDACC__
constexpr int kWarp = 32;

// Logical 32-lane butterfly maxima / ors: lanes xor 16, 8, 4, 2, 1 (every lane ends with the
// same value, in the same order on every run).
__device__ inline float warp_max_f32(float v) {
    for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o, kWarp));
    return v;
}
__device__ inline int warp_or(int v) {
    for (int o = kWarp / 2; o > 0; o >>= 1) v |= __shfl_xor_sync(0xffffffffu, v, o, kWarp);
    return v;
}

// F32 -> F16 with round to nearest even (the native CPY's conversion: __float2half_rn handles
// NaN, overflow to Inf and subnormals the same way as ggml's CPU conversion).
__device__ inline __half to_f16(float v) { return __float2half_rn(v); }
#endif

// ---------------------------------------------------------------------------------------------
// Host side: services of the CUDA registry (registration.cu)

// The borrowed execution context of a CUDA backend during execute(): the device is current.
struct exec_ctx {
    int          device = -1;
    cudaStream_t stream = nullptr;
};
bool get_exec(ggml_backend_t backend, exec_ctx & ctx);
// The backend's cuBLAS handle (host pointer mode, bound to its stream); nullptr if unavailable.
// Borrowed: never destroyed, never re-bound, its modes never changed.
cublasHandle_t get_blas(ggml_backend_t backend);
// The device facts of a CUDA ggml device (cached per device); false for any other device.
bool device_info(ggml_backend_dev_t dev, ggml_ext_gpu_device_info & info);
// The sd fusion switch and GGML_CUDA_DISABLE_FUSION (read once).
bool fusion_enabled();

// Byte ranges of two tensors intersect (both must have data).
inline bool overlaps(const ggml_tensor * a, const ggml_tensor * b) {
    if (!a || !b || !a->data || !b->data) return false;
    const char *a0 = (const char *) a->data, *b0 = (const char *) b->data;
    return a0 < b0 + ggml_nbytes(b) && b0 < a0 + ggml_nbytes(a);
}
inline bool same_bytes(const ggml_tensor * a, const ggml_tensor * b) {
    return a->data == b->data && ggml_nbytes(a) == ggml_nbytes(b);
}
// Offset of a view within its source (0 for a tensor that owns its data): device buffers are
// 256-byte aligned, so a view offset's alignment is the tensor's alignment.
inline size_t view_offset(const ggml_tensor * t) { return t->view_src ? t->view_offs : 0; }
inline bool   aligned_to(const ggml_tensor * t, size_t a) { return view_offset(t) % a == 0; }

inline int64_t pad_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
inline int64_t rows_of(const ggml_tensor * t) { return t->ne[1] * t->ne[2] * t->ne[3]; }
inline int64_t packed_ne1(int64_t K, int64_t rows) { return pad_up(rows, 4) + (rows * 4 + K - 1) / K; }

// Every registration of this directory: capture-safe, replay-reusable (no per-execution host
// decisions on tensor contents; host decisions depend only on addresses and metadata).
constexpr uint32_t kKernelFlags = GGML_EXT_KERNEL_CAPTURE_SAFE | GGML_EXT_KERNEL_REPLAY_REUSABLE;
// Registers each desc with kKernelFlags; one stderr line per failure (like kernel_desc.h's
// register_all, which registers without flags).
bool register_all(ggml_backend_dev_t dev, const ggml_ext_kernel_desc * descs, int n, const char * who);

} // namespace SD_CUDA_NAMESPACE
