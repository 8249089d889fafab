#pragma once

// CPU kernels for the sd INT8 operators (sd.quantize_i8_convrot.v1, sd.linear_i8.v1).

#include "ggml-backend.h"

// Registers both kernels on `dev` (a CPU device). The operators must already be registered
// (sd_ggml_register_extensions); repeated calls for the same device do nothing.
void sd_cpu_register_int8(ggml_backend_dev_t dev);
