#pragma once

// ggml-cuda.h — the CUDA backend (built with -DGGML_CUDA=ON; needs the CUDA toolkit). Names follow
// upstream ggml. The registry family is "CUDA", its devices "CUDA0", "CUDA1", ... in CUDA runtime
// order (CUDA_VISIBLE_DEVICES applies). Without a driver or a device the family exists with zero
// devices: every query below then answers "nothing" (NULL, 0, an empty string), never aborts.

#include "ggml.h"
#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GGML_CUDA_NAME        "CUDA"
#define GGML_CUBLAS_NAME      "cuBLAS"
#define GGML_CUDA_MAX_DEVICES 16

// a backend (one stream, one cuBLAS handle, one memory pool) on device `device`; NULL if out of range
GGML_API ggml_backend_t ggml_backend_cuda_init(int device);
GGML_API bool           ggml_backend_is_cuda(ggml_backend_t backend);

// device memory of `device` (not host-accessible); NULL if out of range
GGML_API ggml_backend_buffer_type_t ggml_backend_cuda_buffer_type(int device);
// pinned (page-locked) host memory: the CPU uses it directly and copies to and from every CUDA
// device run at full bus speed; NULL when there is no CUDA device
GGML_API ggml_backend_buffer_type_t ggml_backend_cuda_host_buffer_type(void);

GGML_API int  ggml_backend_cuda_get_device_count(void);
GGML_API void ggml_backend_cuda_get_device_description(int device, char * description, size_t description_size);
GGML_API void ggml_backend_cuda_get_device_memory(int device, size_t * free, size_t * total);

// page-lock existing host memory (e.g. a mapped model file) for fast transfers; false on failure
// (no device, already registered, the driver refused) — the memory stays usable, just pageable
GGML_API bool ggml_backend_cuda_register_host_buffer(void * buffer, size_t size);
GGML_API void ggml_backend_cuda_unregister_host_buffer(void * buffer);

GGML_API ggml_backend_reg_t ggml_backend_cuda_reg(void);

#ifdef __cplusplus
}
#endif
