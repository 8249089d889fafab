#pragma once

// kernel-choice.h — which of the CPU backend's interchangeable kernels runs an op family on this
// CPU (internal). Some families have two kernels with the same semantics whose speed depends on the
// CPU far more than their instruction sets suggest: vdpbf16ps has twice the FMA rate on AMD Zen 4
// and less than the FMA rate on Intel Xeons without AMX (issue 16). The choice comes from a small
// table keyed by CPU vendor, family and features whose rows were filled from measurements
// (`bench-ops --calibrate` prints the row for the CPU it runs on), never from timing at run time,
// so a process computes the same bits whatever the machine load. GGML_CPU_KERNEL (read once) or
// ggml_cpu_set_kernel_override() replaces the table's choice, for tests and benchmarks.

#include <cstddef>

enum class ggml_cpu_kernel_family : int {
    mul_mat_bf16 = 0, // MUL_MAT with BF16 weights (packed GEMM; M above the small-M threshold)
    flash_attn   = 1, // FLASH_ATTN_EXT with F16/BF16 K and V under GGML_PREC_DEFAULT
    mul_mat_quant = 2, // MUL_MAT with block-quantized weights (ops-mul-mat-quant.cpp)
    count
};

enum class ggml_cpu_kernel : int {
    f32fma  = 0, // operands widened exactly to F32, AVX-512 FMA (exact products, F32 sums)
    bf16dot = 1, // operands rounded to BF16, vdpbf16ps (exact products of the rounded values, F32 sums)
    // mul_mat_quant only: the same integer block sums either way, F32 scaling order differs
    vnni    = 2, // "tiles" (GGML_CPU_KERNEL also takes "vnni"): the active level's integer tiles,
                 // quant-dot-fast-avx512.cpp (vpdpbusd) or quant-dot-fast-avx2.cpp (vpmaddubsw)
    vecdot  = 3, // the portable reference dot product per output (ggml-quants.h vec_dot_ref)
    portable = 4, // mul_mat_bf16 / flash_attn when the active level (cpu-isa.h) is below avx2
};

// The kernel the family uses now (override, else table), restricted to what this CPU can run
// (bf16dot needs AVX512_BF16). Cheap: an atomic load.
ggml_cpu_kernel ggml_cpu_kernel_for(ggml_cpu_kernel_family family);

// Whether this CPU can run `kernel` at all (the harness forces every kernel that passes this).
bool ggml_cpu_kernel_runnable(ggml_cpu_kernel kernel);

// Whether `kernel` is one of `family`'s kernels (f32fma/bf16dot: mul_mat_bf16 and flash_attn;
// tiles/vecdot: mul_mat_quant).
bool ggml_cpu_kernel_in_family(ggml_cpu_kernel kernel, ggml_cpu_kernel_family family);

const char * ggml_cpu_kernel_name(ggml_cpu_kernel kernel);         // "f32fma", "bf16dot", "tiles", "vecdot"
const char * ggml_cpu_kernel_family_name(ggml_cpu_kernel_family f); // "mul_mat_bf16", "flash_attn", "mul_mat_quant"

// Public queries and the override: ggml_cpu_set_kernel_override, ggml_cpu_get_kernel,
// ggml_cpu_kernel_table_row, ggml_backend_cpu_node_kernel (ggml-cpu.h).
