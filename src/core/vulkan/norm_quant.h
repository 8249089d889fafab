#pragma once

// The Vulkan fusion RMS_NORM -> MUL(w1) -> MUL(mod_scale) -> ADD -> ADD(shift) ->
// sd.quantize_i8_convrot.v1 (Krea2's modulated norm feeding the INT8 linears).

#include "ggml-backend.h"

// Registers it on `dev` (a Vulkan device; any other device: true, nothing registered). Repeated
// calls for the same device return the first call's result.
bool sd_vulkan_register_norm_quant(ggml_backend_dev_t dev);

#define SD_VK_KERNEL_MODULATION_QUANTIZE "sd.vulkan.modulation_quantize"
