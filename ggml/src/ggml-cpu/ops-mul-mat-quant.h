#pragma once

// ops-mul-mat-quant.h — MUL_MAT with block-quantized weights (Q4_0 ... Q6_K) on the CPU
// (ops-mul-mat-quant.cpp). ops-mul-mat.cpp hands such nodes over; dispatch and kernel-choice ask
// these for support, work size and the kernel name.

#include "cpu-ops.h"

// Whether dst is a MUL_MAT whose weights (src0) are block-quantized (this file's nodes).
bool ggml_cpu_mul_mat_quant_applies(const struct ggml_tensor * dst);

// Whether the kernels implement it: a weight type with dot traits (ggml-quants.h), K a multiple of
// its block size, packed weight rows, F32 activations with any strides, F32 output.
bool ggml_cpu_mul_mat_quant_supported(const struct ggml_tensor * dst);

size_t ggml_cpu_mul_mat_quant_work_size(const struct ggml_tensor * dst, int n_threads);

// "avx512 vnni q4_K", ... or "portable vec_dot_ref" (use_ref forces the latter)
const char * ggml_cpu_mul_mat_quant_kernel(const struct ggml_tensor * dst, bool use_ref);

void ggml_cpu_mul_mat_quant(const struct ggml_compute_params * params, struct ggml_tensor * dst);
