#pragma once

// Vulkan kernels for the sd INT8 operators (sd.quantize_i8_convrot.v1, sd.linear_i8.v1) and the
// fusions Linear -> Mul(gate) -> Add(residual) and GEMM -> SwiGLU [-> ConvRot], on the public
// Vulkan execution services.

#include "ggml-backend.h"

// Registers them on `dev` (a Vulkan device with the ggml_ext_vulkan_v1 service; any other
// device: nothing to do, true). The operators must already be registered
// (sd_ggml_register_extensions). false if a registration failed (the reason is printed);
// repeated calls for the same device return the first call's result.
bool sd_vulkan_register_int8(ggml_backend_dev_t dev);

// Whether the Vulkan quantizer runs this sd.quantize_i8_convrot.v1 node: every node
// sd_int8_schema::decode_quantize accepts (contiguous F32 input, a power-of-4 group dividing K,
// the packed output shape) within the device's limits (K % 4 == 0, 32-bit row numbers, the lane
// loop budget, four rows within one binding window: larger tensors go in windows of rows).
// Fusion rules that end in a quantize node accept exactly these.
bool sd_vulkan_quantize_supported(ggml_backend_dev_t dev, const ggml_tensor * node);

// Estimated loop iterations of one invocation (lane) of the row-per-subgroup ConvRot quantizer
// (quantize_i8_convrot.comp; with_norm: modulation_quantize.comp's RMS-norm reduction too) for
// rows of K values and ConvRot group `group` on dev, rounded up. Kernels decline rows above
// sd_vk::kLoopBudget (vk_service.h: lavapipe silently stops loops past 65,535 iterations).
uint64_t sd_vulkan_quant_lane_iterations(ggml_backend_dev_t dev, int64_t K, int group, bool with_norm);

// ConvRot groups above 256 rotate through F32 scratch rows in the workspace: one dispatch takes
// sd_vulkan_convrot_chunk_rows(dev, K, rows) of the pad4(rows) rows (a scratch window of at
// most 64 MiB, or the environment's SD_VK_CONVROT_SCRATCH_BYTES when smaller), and needs
// sd_vulkan_convrot_scratch_bytes (0 for groups up to 256).
int64_t  sd_vulkan_convrot_chunk_rows(ggml_backend_dev_t dev, int64_t K, int64_t rows);
uint64_t sd_vulkan_convrot_scratch_bytes(ggml_backend_dev_t dev, int64_t K, int64_t rows, int group);

// Rows of K values per quantizer dispatch (a multiple of 4): each dispatch binds only its rows of
// the F32 input, the packed rows and the scales, so that no binding exceeds
// sd_vk::max_binding_bytes (the device's storage-buffer range, or SD_VK_MAX_BINDING_BYTES). 0:
// not even 4 rows fit one window (the node is declined).
int64_t sd_vulkan_quant_window_rows(ggml_backend_dev_t dev, int64_t K);

// Kernel names (plan introspection, tests)
#define SD_VK_KERNEL_QUANTIZE_I8         "sd.vulkan.quantize_i8_convrot"
#define SD_VK_KERNEL_LINEAR_I8           "sd.vulkan.linear_i8"
#define SD_VK_KERNEL_LINEAR_I8_GATE_RES  "sd.vulkan.linear_i8_gate_residual"
#define SD_VK_KERNEL_LINEAR_I8_SWIGLU    "sd.vulkan.linear_i8_swiglu"
