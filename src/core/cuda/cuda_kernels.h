#pragma once

// cuda_kernels.h — the sd CUDA kernels' registrars, kernel names and the few launchers one
// kernel file lends another (the ConvRot quantizer used by the F32-input linear, the INT8 linear
// used by its gate/residual fusion). registration.cu calls every registrar behind
// sd_register_cuda_extensions, the CUDA entry of SD_BACKEND_EXTENSIONS.

#include "runtime.h"

extern "C" {
// The CUDA entry of SD_BACKEND_EXTENSIONS: registers every sd CUDA kernel and fusion rule on dev
// when dev is a CUDA device (true without registering anything for other device kinds).
bool sd_register_cuda_extensions(ggml_backend_dev_t dev);
// What the CUDA registration found in this process (for logs and tests): "not run", "no CUDA
// backend", "no CUDA device", "registered on N device(s)", or the reason it failed.
const char * sd_cuda_extensions_status(void);
}

// The kernel names, for tests and plan introspection (ggml_ext_sched_get_step).
#define SD_CUDA_KERNEL_ROPE_APPLY            "sd.cuda.rope_apply"
#define SD_CUDA_KERNEL_RMS_NORM_MUL_ROPE     "sd.cuda.rms_norm_mul_rope"
#define SD_CUDA_KERNEL_QUANTIZE_I8           "sd.cuda.quantize_i8_convrot"
#define SD_CUDA_KERNEL_LINEAR_I8             "sd.cuda.linear_i8"
#define SD_CUDA_KERNEL_LINEAR_I8_GATE_RES    "sd.cuda.linear_i8_gate_residual"
#define SD_CUDA_KERNEL_MUL_ADD               "sd.cuda.mul_gate_add_residual"
#define SD_CUDA_KERNEL_SCALE_QUANTIZE        "sd.cuda.scale_quantize"
#define SD_CUDA_KERNEL_NORM_QUANTIZE         "sd.cuda.norm_quantize"
#define SD_CUDA_KERNEL_SWIGLU_QUANTIZE       "sd.cuda.swiglu_quantize"
#define SD_CUDA_KERNEL_GATE_MUL_QUANTIZE     "sd.cuda.gate_mul_quantize"

namespace SD_CUDA_NAMESPACE {

bool register_rope(ggml_backend_dev_t dev);             // rope.cu
bool register_convrot(ggml_backend_dev_t dev);          // convrot.cu
bool register_int8(ggml_backend_dev_t dev);             // int8.cu
bool register_gated_residual(ggml_backend_dev_t dev);   // i8_gated_residual.cu
bool register_affine(ggml_backend_dev_t dev);           // affine.cu
bool register_convrot_fusion(ggml_backend_dev_t dev);   // convrot_fusion.cu

// --- convrot.cu ---------------------------------------------------------------------------------
// The groups the CUDA quantizer rotates: powers of 4 up to 16384 (a block rotates one chunk of
// max(1024, group) floats in shared memory; group 16384 needs 64 KiB of opt-in shared memory).
bool quantizer_group_supported(ggml_backend_dev_t dev, int group);
// Whether the CUDA quantizer runs this sd.quantize_i8_convrot.v1 node.
bool quantize_node_supported(ggml_backend_dev_t dev, const ggml_tensor * node);
// Quantizes rows x K floats (x, contiguous) into the packed layout at dst: rows quantized rows of
// K bytes, zero rows to pad4(rows), then rows F32 scales at byte K * pad4(rows).
bool launch_quantize(const float * x, void * dst, int64_t K, int64_t rows, int group, cudaStream_t stream);

// --- convrot_fusion.cu ----------------------------------------------------------------------------
// Host-side views of the Scale / Norm / modulation / SwiGLU / SiLU|Sigmoid -> ConvRot rules, for
// tests without a device: the number of nodes a rule fuses at graph node `first` (0: none; the
// device limits are not checked), and the rules' graph-delay passes (modulation gathering,
// activation delay) applied to graph.
int  convrot_fusion_chain_length(const ggml_cgraph * graph, int first);
void convrot_fusion_optimize(ggml_cgraph * graph);

// --- int8.cu ------------------------------------------------------------------------------------
// Whether the CUDA linear runs this sd.linear_i8.v1 node (cuBLAS INT8: Turing+, K and N multiples
// of 4, contiguous 16-byte aligned operands, rows fit a padded int32 dimension).
bool linear_node_supported(ggml_backend_dev_t dev, const ggml_tensor * node);
// Workspace bytes of a linear step (quantized activations, the int32 accumulator) of node.
size_t linear_workspace_bytes(const ggml_tensor * node);
// Runs lin, writing to out (lin itself, or a fused chain's last node of lin's shape) with the
// optional epilogue extension y = y * gate[o] then y = residual[r, o] + y (each rounded alone).
ggml_status linear_run(ggml_backend_t backend, const ggml_tensor * lin, ggml_tensor * out, const ggml_tensor * gate,
                       const ggml_tensor * residual, void * ws, size_t ws_bytes);

} // namespace SD_CUDA_NAMESPACE
