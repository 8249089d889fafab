#pragma once

// cpu_kernels.h — registrars of the sd CPU kernels and fusion rules (src/core/cpu/). Each takes
// the CPU device to register on; registration.cpp collects them behind
// sd_register_cpu_extensions, the CPU entry of SD_BACKEND_EXTENSIONS.

#include "ggml-backend.h"
#include "ggml-ext.h"

#ifdef __cplusplus
extern "C" {
#endif

// The CPU entry of SD_BACKEND_EXTENSIONS: registers every sd CPU kernel and fusion rule on dev
// when dev is a CPU device (true without registering anything for other device kinds). Call
// once per device (a second call fails on the duplicate kernel names); the schemas must be
// registered (sd_op_* or sd_ggml_register_extensions).
bool sd_register_cpu_extensions(ggml_backend_dev_t dev);

#ifdef __cplusplus
}
#endif

// sd.rope_apply.v1 kernel and the RMSNorm -> Mul(weight) -> RoPE fusion (rope.cpp). svc is the
// CPU backend's parallel service (NULL: single-threaded).
bool sd_cpu_register_rope(ggml_backend_dev_t dev, const struct ggml_ext_cpu_parallel_v1 * svc);

// RMSNorm -> Mul(weight) -> Mul(mod) -> Add -> Add(shift) -> sd.quantize_i8_convrot (norm-quant.cpp).
bool sd_cpu_register_norm_quant(ggml_backend_dev_t dev, const struct ggml_ext_cpu_parallel_v1 * svc);
// SILU -> Mul -> sd.quantize_i8_convrot (SwiGLU) and SIGMOID -> Mul -> quantize (gate-quant.cpp).
bool sd_cpu_register_gate_quant(ggml_backend_dev_t dev, const struct ggml_ext_cpu_parallel_v1 * svc);

// The kernel names, for tests and plan introspection (ggml_ext_sched_get_step).
#define SD_CPU_KERNEL_ROPE_APPLY       "sd.cpu.rope_apply"
#define SD_CPU_KERNEL_RMS_NORM_MUL_ROPE "sd.cpu.rms_norm_mul_rope"
// sd.linear_i8.v1 -> MUL(gate[N]) -> ADD(residual), and sd.linear_i8.v1 -> ADD(residual) (int8.cpp)
#define SD_CPU_KERNEL_LINEAR_I8_GATE_RESIDUAL "sd.cpu.linear_i8_gate_residual"
#define SD_CPU_KERNEL_RMS_NORM_MOD_QUANTIZE "sd.cpu.rms_norm_mod_quantize"
#define SD_CPU_KERNEL_SIGMOID_MUL_QUANTIZE "sd.cpu.sigmoid_mul_quantize"
#define SD_CPU_KERNEL_SWIGLU_QUANTIZE      "sd.cpu.swiglu_quantize"
