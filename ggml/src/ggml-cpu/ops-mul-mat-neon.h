#pragma once

// ops-mul-mat-neon.h — the AArch64 MUL_MAT fast path (ops-mul-mat-neon.cpp): a packed,
// register-tiled F32 FMA GEMM and a small-M dot-product path on plain ARMv8-A Advanced SIMD (the
// neon level of cpu-isa.h, so it also runs at dotprod and i8mm). Same interface and semantics as
// the x86 path (ops-mul-mat-x86.h): F32, F16 or BF16 weights (F16/BF16 widened exactly to F32),
// F32, F16 or BF16 activations with any strides (widened exactly), F32 products and sums.
// ops-mul-mat.cpp calls these when ggml_cpu_mul_mat_neon_usable() says so and the portable path is
// not forced (params->use_ref). On non-AArch64 builds they are stubs that decline.

#include "cpu-ops.h"

// Whether the NEON path handles this node now (types, strides, and the neon level allowed).
bool ggml_cpu_mul_mat_neon_usable(const struct ggml_tensor * dst);

// Whether the NEON path could handle this node (types and strides only, whatever the cap): for
// sizing work buffers, which must not depend on the level active at planning.
bool ggml_cpu_mul_mat_neon_shape_ok(const struct ggml_tensor * dst);

// Work buffer bytes the NEON path needs with n_threads threads; 0 if it does not take the node
// (or needs none).
size_t ggml_cpu_mul_mat_neon_work_size(const struct ggml_tensor * dst, int n_threads);

// Name of the kernel the NEON path runs for this node now ("neon f32fma", "neon f32fma (f16
// weights widened)", "neon small-M dot (f32)", ...), nullptr when it is not usable.
const char * ggml_cpu_mul_mat_neon_kernel(const struct ggml_tensor * dst);

// Whether the packed GEMM takes weights of block-quantized type t (dequantized exactly while
// packing, F32 activations): ops-mul-mat-quant.cpp's dequantizing route only (as the x86 one,
// ops-mul-mat-x86.h), for types without an integer tile.
bool ggml_cpu_mul_mat_neon_dequantizes(enum ggml_type t);

// Name of that route's kernel ("neon f32fma, weights and activations dequantized"), nullptr below
// the neon level.
const char * ggml_cpu_mul_mat_neon_dequant_kernel(const struct ggml_tensor * dst);

// Runs this thread's share; only valid when usable() returned true.
void ggml_cpu_mul_mat_neon(const struct ggml_compute_params * params, struct ggml_tensor * dst);
