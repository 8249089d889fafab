#pragma once

// ops-mul-mat-avx2.h — the AVX2 level (AVX2 + FMA + F16C, cpu-isa.h) of the x86 MUL_MAT fast path
// (internal). ops-mul-mat-x86.cpp owns the public entry points and calls these only when the
// active level is avx2 or avx_vnni (below avx512); nothing here checks the CPU.

#include "cpu-ops.h"

// What the AVX2 GEMM would run for this node, from shapes and types alone (no CPU or cap check):
// nullptr when it cannot take the node, else the kernel's name ("avx2 f32fma", "avx2 small-M dot
// (f32)").
const char * ggml_cpu_mul_mat_avx2_kernel(const struct ggml_tensor * dst);

// Work buffer bytes for n_threads threads (0 when it needs none or cannot take the node).
size_t ggml_cpu_mul_mat_avx2_work_size(const struct ggml_tensor * dst, int n_threads);

// Whether its packed GEMM dequantizes weights of block-quantized type t while packing.
bool ggml_cpu_mul_mat_avx2_dequantizes(enum ggml_type t);

// Runs this thread's share; only valid when ggml_cpu_mul_mat_avx2_kernel(dst) != nullptr and the
// CPU has AVX2, FMA and F16C.
void ggml_cpu_mul_mat_avx2(const struct ggml_compute_params * params, struct ggml_tensor * dst);
