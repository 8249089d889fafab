#pragma once

// CPU kernels for the sd INT8 operators (sd.quantize_i8_convrot.v1, sd.linear_i8.v1).

#include "ggml-backend.h"

// Registers the INT8 kernels (quantizer, linear, linear -> gate -> residual fusion) on `dev` (a
// CPU device). The operators must already be registered (sd_ggml_register_extensions). Returns
// false if any kernel could not be registered (the reason is printed); repeated calls for the
// same device return the first call's result.
bool sd_cpu_register_int8(ggml_backend_dev_t dev);
