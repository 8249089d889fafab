#pragma once

// convert.cuh — conversions of convert.cu beyond common.cuh's contiguous ones (private to the
// backend's files).

#include "common.cuh"

// A block-quantized tensor whose rows are runs of whole blocks (nb[0] = block size; rows, and
// dims 2 / 3, at any byte strides: e.g. permuted weights) into packed F16 / F32, on `stream`.
void ggml_cuda_dequantize_rows_to_f16(const struct ggml_tensor * t, __half * dst, cudaStream_t stream);
void ggml_cuda_dequantize_rows_to_f32(const struct ggml_tensor * t, float * dst, cudaStream_t stream);
