#pragma once

// ggml-vulkan.h — the Vulkan backend (built with -DGGML_VULKAN=ON; the registry lists every
// usable Vulkan device before the CPU). Names follow upstream ggml.
//
// Usable device: Vulkan 1.2+, a compute queue, bufferDeviceAddress, 16-bit storage, shaderInt64
// and subgroup arithmetic in compute shaders (every desktop GPU driver and Mesa lavapipe).

#include "ggml.h"
#include "ggml-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GGML_VK_NAME        "Vulkan"
#define GGML_VK_MAX_DEVICES 16

// a backend on Vulkan device dev_num (index among the usable Vulkan devices); NULL if none
GGML_API ggml_backend_t ggml_backend_vk_init(size_t dev_num);
GGML_API bool           ggml_backend_is_vk(ggml_backend_t backend);
GGML_API int            ggml_backend_vk_get_device_count(void);
GGML_API void ggml_backend_vk_get_device_description(int device, char * description, size_t description_size);
GGML_API void ggml_backend_vk_get_device_memory(int device, size_t * free, size_t * total);

// device memory of device dev_num (not host-accessible as far as ggml is concerned)
GGML_API ggml_backend_buffer_type_t ggml_backend_vk_buffer_type(size_t dev_num);
// pinned host memory the first Vulkan device can read (is_host: the CPU uses it directly)
GGML_API ggml_backend_buffer_type_t ggml_backend_vk_host_buffer_type(void);

GGML_API ggml_backend_reg_t ggml_backend_vk_reg(void);

// --- sdx additions (not upstream) ---------------------------------------------------------------
// Validation: with GGML_VK_VALIDATE=1 in the environment before the first registry use, the
// Khronos validation layer is enabled with a debug messenger; every message it reports is logged
// and counted here. Tests fail on a non-zero count.
GGML_API bool   ggml_backend_vk_validation_enabled(void);
// Benchmark baseline: mul_mat with the plain-loop shader (one invocation per output, no tiling)
// instead of the tiled one on this backend.
GGML_API void   ggml_backend_vk_set_plain_mul_mat(ggml_backend_t backend, bool plain);
// Benchmark comparison: force one of the F32/F16/BF16 mul_mat kernels on this backend (AUTO: the
// device's choice). A kernel whose preconditions a node does not meet falls back as under AUTO.
enum ggml_vk_mul_mat_kernel {
    GGML_VK_MUL_MAT_AUTO     = 0,
    GGML_VK_MUL_MAT_SHARED   = 1, // shared-memory tiles, 8x8 outputs per thread (GPUs)
    GGML_VK_MUL_MAT_DIRECT   = 2, // 8x8 outputs per thread, no shared memory (the previous CPU-driver kernel)
    GGML_VK_MUL_MAT_SUBGROUP = 3, // mul_mat_sg: 8-lane subgroup broadcast (lavapipe)
};
GGML_API void   ggml_backend_vk_set_mul_mat_kernel(ggml_backend_t backend, enum ggml_vk_mul_mat_kernel k);
// Dispatches and memory barriers recorded by the backend's last graph_compute (one submission).
GGML_API void   ggml_backend_vk_get_graph_stats(ggml_backend_t backend, size_t * dispatches, size_t * barriers);
GGML_API size_t ggml_backend_vk_validation_message_count(void);
// Inside a scheduled plan (native fragments and extension work recorded together), submit after
// every n_commands dispatches/copies (0, the default: once, when the plan returns). Extension
// work counts toward it; the count carries across fragments.
GGML_API void   ggml_backend_vk_set_submit_threshold(ggml_backend_t backend, size_t n_commands);
// The same by work: submit once the recorded mul_mat / flash-attention nodes reach `flops`
// (2 FLOPs per multiply-add) since the last submission (0, the default: no FLOP threshold).
// Extension dispatches count as commands only (their work is not known to the backend).
GGML_API void   ggml_backend_vk_set_submit_flops(ggml_backend_t backend, uint64_t flops);

#ifdef __cplusplus
}
#endif
