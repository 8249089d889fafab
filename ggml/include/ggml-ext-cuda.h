#pragma once

// ggml-ext-cuda.h — the CUDA / GPU execution services of the extension interface (spec,
// "Backend services"). Found through the CUDA backend's registry:
//
//     auto * svc = (const struct ggml_ext_cuda_context_v1 *)
//         ggml_backend_reg_get_proc_address(ggml_backend_cuda_reg(), GGML_EXT_CUDA_CONTEXT_V1);
//
// The header needs no CUDA headers: runtime handles are passed as void * and the caller casts
// them to its runtime's types (cudaStream_t, cublasHandle_t; hipStream_t, hipblasHandle_t;
// musaStream_t, mublasHandle_t). Everything borrowed stays owned by the backend: an extension
// must not retain or destroy it, and must not change a BLAS handle's stream, pointer mode,
// math mode or workspace. These services execute nothing on the application's behalf.

#include "ggml-backend.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Runtime kinds a GPU backend can report.
enum ggml_ext_gpu_runtime {
    GGML_EXT_GPU_RUNTIME_NONE = 0,
    GGML_EXT_GPU_RUNTIME_CUDA = 1,
    GGML_EXT_GPU_RUNTIME_HIP  = 2,
    GGML_EXT_GPU_RUNTIME_MUSA = 3,
};

// ---------------------------------------------------------------------------------------------
// CUDA-specific services (kept for existing callers; the runtime-aware ggml_ext_gpu_* below
// carry the same ownership rules for CUDA, HIP and MUSA).

#define GGML_EXT_CUDA_CONTEXT_V1 "ggml_ext_cuda_context_v1"

// Borrow the backend's current device and stream during execution (from an extension kernel's
// execute callback). Work queued on the stream is ordered with the backend's native work.
struct ggml_ext_cuda_context_v1 {
    uint32_t version; // 1
    // false if backend is not a CUDA backend; on success *device is the physical CUDA ordinal
    // (already current on the calling thread) and *stream the backend's execution stream
    bool (*get)(ggml_backend_t backend, int * device, void ** stream);
};

#define GGML_EXT_CUDA_DEVICE_V1 "ggml_ext_cuda_device_v1"

// The physical CUDA ordinal of a ggml device, for capability checks before a backend exists
// (ggml devices may be virtual: several ggml devices can map to one physical ordinal).
struct ggml_ext_cuda_device_v1 {
    uint32_t version; // 1
    // -1 when dev is not a CUDA device
    int (*physical_ordinal)(ggml_backend_dev_t dev);
};

#define GGML_EXT_CUDA_BLAS_V1 "ggml_ext_cuda_blas_v1"

// Borrow the cuBLAS handle bound to the backend's current stream during execution. Its pointer
// mode is host: alpha/beta are host scalar pointers.
struct ggml_ext_cuda_blas_v1 {
    uint32_t version; // 1
    // false if backend is not a CUDA backend or cuBLAS could not be initialised
    bool (*get)(ggml_backend_t backend, void ** cublas_handle);
};

// ---------------------------------------------------------------------------------------------
// Runtime-aware services (CUDA, HIP, MUSA).

#define GGML_EXT_GPU_DEVICE_V1 "ggml_ext_gpu_device_v1"

struct ggml_ext_gpu_device_info {
    enum ggml_ext_gpu_runtime runtime;
    int      physical_ordinal;
    int      compute_capability; // major * 10 + minor (CUDA); the gfx / MUSA arch number elsewhere
    size_t   shared_mem_per_block;       // bytes, the default limit
    size_t   shared_mem_per_block_optin; // bytes, with the opt-in attribute
    int      warp_size;
    int      multiprocessor_count;
    bool     int8_blas;                  // I8 x I8 -> I32 GEMM through the runtime's BLAS (Turing+)
};

struct ggml_ext_gpu_device_v1 {
    uint32_t version; // 1
    // false when dev is not a device of this runtime
    bool (*get_info)(ggml_backend_dev_t dev, struct ggml_ext_gpu_device_info * info);
};

#define GGML_EXT_GPU_CONTEXT_V1 "ggml_ext_gpu_context_v1"

struct ggml_ext_gpu_context_v1 {
    uint32_t version; // 1
    bool (*get)(ggml_backend_t backend, enum ggml_ext_gpu_runtime * runtime, int * device, void ** stream);
};

#define GGML_EXT_GPU_BLAS_V1 "ggml_ext_gpu_blas_v1"

struct ggml_ext_gpu_blas_v1 {
    uint32_t version; // 1
    bool (*get)(ggml_backend_t backend, enum ggml_ext_gpu_runtime * runtime, void ** blas_handle);
};

// ---------------------------------------------------------------------------------------------
// Workspace on CUDA: ggml_ext_kernel execute receives a backend buffer whose base
// (ggml_backend_buffer_get_base) is a CUDA device pointer.

#ifdef __cplusplus
}
#endif
