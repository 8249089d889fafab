#pragma once

// Vulkan kernels for sd.rope_apply.v1 and the RMSNorm -> Mul(weight) -> RoPE fusion, on the
// public Vulkan execution services.

#include "ggml-backend.h"

// Registers them on `dev` (a Vulkan device with ggml_ext_vulkan_v1; any other device: nothing
// to do, true). false if a registration failed (the reason is printed); repeated calls for the
// same device return the first call's result.
bool sd_vulkan_register_rope(ggml_backend_dev_t dev);

#define SD_VK_KERNEL_ROPE_APPLY       "sd.vulkan.rope_apply"
#define SD_VK_KERNEL_RMS_NORM_MUL_ROPE "sd.vulkan.rms_norm_mul_rope"
