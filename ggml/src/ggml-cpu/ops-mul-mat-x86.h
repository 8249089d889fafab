#pragma once

// ops-mul-mat-x86.h — fast x86 MUL_MAT paths, one set per instruction-set level (cpu-isa.h): at
// avx512 and above the AVX-512 F32 GEMM, AVX512_BF16 and AMX-BF16 GEMMs and small-M GEMV
// (ops-mul-mat-x86.cpp); at avx2 / avx_vnni the AVX2 F32 GEMM and small-M GEMV
// (ops-mul-mat-avx2.cpp). ops-mul-mat.cpp calls these when ggml_cpu_mul_mat_x86_usable() says so
// and the portable path is not forced (params->use_ref). On non-x86 builds they are stubs that
// decline.

#include "cpu-ops.h"

// Whether the fast path handles this node on this CPU now (types, strides, the active level).
bool ggml_cpu_mul_mat_x86_usable(const struct ggml_tensor * dst);

// Whether some level's fast path could handle this node (types and strides only, whatever the CPU
// and the cap): for sizing work buffers, which must not depend on the level active at planning.
bool ggml_cpu_mul_mat_x86_shape_ok(const struct ggml_tensor * dst);

// Whether the packed F32 GEMM takes weights of block-quantized type t (dequantized exactly while
// packing, F32 activations). Only ops-mul-mat-quant.cpp routes such nodes here, with activations
// already quantized and dequantized the way the type's dot product defines them.
bool ggml_cpu_mul_mat_x86_dequantizes(enum ggml_type t);

// Work buffer bytes the fast path needs with n_threads threads: the most any level's path needs
// (the cap may change between planning and computing); 0 if no path takes the node.
size_t ggml_cpu_mul_mat_x86_work_size(const struct ggml_tensor * dst, int n_threads);

// Name of the kernel the fast path runs for this node now ("avx512 f32fma", "avx512 bf16dot",
// "avx2 f32fma", "avx2 small-M dot (f32)", ...), nullptr when it is not usable.
const char * ggml_cpu_mul_mat_x86_kernel(const struct ggml_tensor * dst);

// Name of the dequantizing route's kernel at the active level ("avx2 f32fma, weights and
// activations dequantized", ...; ops-mul-mat-quant.cpp), nullptr below avx2.
const char * ggml_cpu_mul_mat_x86_dequant_kernel(const struct ggml_tensor * dst);

// Runs the fast path on this thread's share; only valid when usable() returned true.
void ggml_cpu_mul_mat_x86(const struct ggml_compute_params * params, struct ggml_tensor * dst);
