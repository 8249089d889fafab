#pragma once

// ggml_extensions.h — the sd operator library on top of ggml-ext.h: the shared operator schemas
// (attributes, validation), the graph constructors model code calls, and the one registration
// entry point. Only public ggml headers are used.
//
// Every constructor validates its inputs while the graph is built: on malformed input it returns
// NULL, logs the reason and leaves it in ggml_ext_last_error(). Nothing is rejected at execution.
// Constructors register the schemas on first use; kernels need sd_ggml_register_extensions().
//
// This header is the one seam between the two builds of src/ (spec, "sd.cpp integration"):
//  * with this repository's ggml: ggml_extensions.cpp implements everything below through
//    ggml-ext.h (schemas, kernels and fusion rules of every enabled backend);
//  * SD_USE_UPSTREAM_GGML (an upstream ggml, which has no ggml-ext.h): ggml_compat.cpp
//    implements the same model-facing functions without extensions: registration registers
//    nothing, the sd operator constructors fail with a message naming this build, and the node
//    and plan queries see plain ggml ops only. Model code uses only the functions declared
//    outside the #if below, so it compiles unchanged in both builds and picks the plain op
//    chains (RoPE, attention) when sd_ggml_have_extensions() is false.

#include "ggml-backend.h"
#ifndef SD_USE_UPSTREAM_GGML
#include "ggml-ext.h"
#endif
#include "ggml.h"

#include <stdint.h>

#ifndef SD_API
#define SD_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------------------------------------
// Schemas (versioned names; attributes are packed plain structs, at most 40 bytes)

#define SD_OP_ROPE_APPLY         "sd.rope_apply.v1"
#define SD_OP_QUANTIZE_I8_CONVROT "sd.quantize_i8_convrot.v1"
#define SD_OP_LINEAR_I8          "sd.linear_i8.v1"
#define SD_OP_SAGE_ATTN          "sd.sage_attn.v1"
#define SD_OP_SOL_ATTN           "sd.sol_attn.v1"

// sd.rope_apply.v1: src x F32 [d, H, L, N] (nb0 = 4, other strides free), pe F32 [2, 2, n_freq, L]
// contiguous, 2*n_freq <= d; pe(i0, i1, j, p) = R[i1][i0] of [[cos, -sin], [sin, cos]].
// Output F32 [d, L, H*N] contiguous (ne2 = h + H*n). Dims 2*n_freq..d-1 are copied unchanged.
enum sd_rope_mode {
    SD_ROPE_INTERLEAVED = 0, // pairs (2j, 2j+1)
    SD_ROPE_SPLIT_HALF  = 1, // pairs (j, j + n_freq)
};
struct sd_rope_apply_attrs {
    int32_t mode;
};

// sd.quantize_i8_convrot.v1: src x F32 [K, rows...] contiguous. Output I8
// [K, pad4(rows) + ceil(rows*4/K)]: quantized rows, zero rows to pad4(rows), then rows F32 scales
// at byte offset K*pad4(rows) (int8-convrot-facts.md).
struct sd_quantize_i8_attrs {
    int32_t group; // a power of 4 (1, 4, 16, 64, 256, 1024, 4096, 16384, ...; 1 = no rotation) dividing K
};

// sd.linear_i8.v1: src weight I8 [K, N] contiguous, input, then the present optional sources in
// this order: weight_scale F32 (N values: [N], [1, N] or [N, 1]), bias F32 [N], input_scale F32
// (one per row). Output F32 [N, out_ne[0], out_ne[1], out_ne[2]].
// y = ((float(acc) * s_x[r]) * s_w[o]) + b[o], steps skipped when absent.
// K is at most SD_LINEAR_I8_MAX_K: acc is an exact 32-bit integer sum of K products, each as large
// as (-128) * (-128) = 16384 (plain I8 activations and weights may hold -128), so
// K * 16384 <= 2^31 - 1. A larger K is rejected when the node is built.
#define SD_LINEAR_I8_MAX_K 131071
enum sd_linear_i8_input_kind {
    SD_LINEAR_I8_INPUT_F32    = 0, // F32 [K, rows...] contiguous, quantized (rotated when group > 1)
    SD_LINEAR_I8_INPUT_PACKED = 1, // an sd.quantize_i8_convrot.v1 node (its own row scales)
    SD_LINEAR_I8_INPUT_I8     = 2, // plain I8 [K, rows...] contiguous + input_scale
};
enum sd_linear_i8_flags {
    SD_LINEAR_I8_HAS_WEIGHT_SCALE = 1 << 0,
    SD_LINEAR_I8_HAS_BIAS         = 1 << 1,
    SD_LINEAR_I8_HAS_INPUT_SCALE  = 1 << 2,
};
struct sd_linear_i8_attrs {
    int32_t input_kind; // enum sd_linear_i8_input_kind
    int32_t group;      // kind 0: ConvRot group, 0 or a power of 4 dividing K (0 or 1 = none);
                        // kind 1: group of the packed input
    int32_t flags;      // enum sd_linear_i8_flags
    int32_t pad_;
    int64_t out_ne[3];  // output ne1, ne2, ne3 (the activation's row shape)
};

// sd.sage_attn.v1: src q [D, Lq, H, N], k and v [D, Lk, Hkv, N] (F32/F16/BF16, H % Hkv == 0), the
// layout of ggml_flash_attn_ext. Output F32 [D, H, Lq, N]. Semantics: softmax(scale*q.k^T) v,
// computed by a kernel with quantized Q/K (mode picks the kernel's quantization variant).
struct sd_sage_attn_attrs {
    float   scale; // positive, finite
    int32_t mode;  // >= 0, interpreted by the kernel
};

// sd.sol_attn.v1: src q, k, v contiguous F32 [128, tokens, heads, batch] (k and v may have a
// different token count than q). Output F32 [128, heads, tokens, batch]. Semantics: dense
// softmax(scale*q.k^T) v; tau is the block-sparsity threshold under which a sparse kernel may
// skip key blocks whose summarized contribution is negligible (it never changes the dense
// definition).
struct sd_sol_attn_attrs {
    float scale; // positive, finite
    float tau;   // finite
};

#ifndef SD_USE_UPSTREAM_GGML
// Operator ids (registering the schemas on first use; never 0 afterwards). Only with ggml-ext.h.
SD_API ggml_ext_op_t sd_op_rope_apply(void);
SD_API ggml_ext_op_t sd_op_quantize_i8_convrot(void);
SD_API ggml_ext_op_t sd_op_linear_i8(void);
SD_API ggml_ext_op_t sd_op_sage_attn(void);
SD_API ggml_ext_op_t sd_op_sol_attn(void);
#endif

// Registers the schemas once, then the kernels and fusion rules of every enabled backend
// (SD_BACKEND_EXTENSIONS) on every matching device currently in the ggml registry; devices
// already handled are skipped. Idempotent and thread-safe. false if a registration failed
// (the reason is logged).
SD_API bool sd_ggml_register_extensions(void);

// The sd fusion rules' switch (all backends): while off, every sd fusion rule declines to match,
// so graphs scheduled afterwards run each node by itself (single-node extension kernels stay
// on). Initially on, unless the environment sets SD_DISABLE_FUSION=1. Takes effect at the next
// ggml_backend_sched_alloc_graph / reserve (matching happens there).
SD_API void sd_ggml_set_fusion_enabled(bool on);
SD_API bool sd_ggml_fusion_enabled(void);

// ---------------------------------------------------------------------------------------------
// Model-facing queries (both builds)

// false when this build uses an upstream ggml (SD_USE_UPSTREAM_GGML): no sd operator node can be
// built, so models use the plain op chains.
SD_API bool sd_ggml_have_extensions(void);
// Why the last sd constructor or registration failed (this thread; "" if none).
SD_API const char * sd_ggml_last_error(void);
// The node's op name: an sd operator's schema name (e.g. "sd.rope_apply.v1"), else ggml_op_desc.
SD_API const char * sd_node_op_name(const struct ggml_tensor * node);
SD_API bool         sd_node_is_extension(const struct ggml_tensor * node);
SD_API bool         sd_node_is_rope_apply(const struct ggml_tensor * node);
SD_API bool         sd_node_is_quantize_i8_convrot(const struct ggml_tensor * node);

// The execution steps the scheduler planned for the graph it allocated last (ggml-ext.h's
// ggml_ext_sched_get_step). An upstream ggml plans none: 0 steps.
struct sd_sched_step {
    ggml_backend_t backend;         // where the step runs
    int            first_node;      // index into the scheduled graph
    int            n_nodes;         // nodes covered
    const char *   kernel;          // extension kernel name; NULL for a native range
    bool           fused;           // a fusion rule replaced n_nodes >= 2 nodes
    size_t         workspace_bytes; // prepared workspace request of this step
};
SD_API int  sd_sched_n_steps(ggml_backend_sched_t sched);
SD_API bool sd_sched_get_step(ggml_backend_sched_t sched, int i, struct sd_sched_step * step);

// Threads of a CPU backend (ggml_backend_cpu_get_n_threads; upstream ggml has no getter, so
// there it is GGML_DEFAULT_N_THREADS, the count a new upstream CPU backend starts with).
SD_API int sd_cpu_backend_n_threads(ggml_backend_t cpu);
// What produced a CPU timing (ggml-cpu.h's kernel choice): the CPU model, the kernel table's row for
// it, the kernel chosen for a family ("mul_mat_bf16", "flash_attn") and for a planned node (NULL
// when the node has no interchangeable kernels). An upstream ggml has no such choice: "upstream".
SD_API const char * sd_cpu_model_name(void);
SD_API const char * sd_cpu_kernel_table_row(void);
// The CPU backend's active instruction-set level ("avx2", "avx512", ...; ggml_cpu_get_isa) and the
// CPU's own, uncapped; "upstream" in an upstream ggml build.
SD_API const char * sd_cpu_isa(void);
SD_API const char * sd_cpu_isa_detected(void);
SD_API const char * sd_cpu_get_kernel(const char * family);
SD_API const char * sd_cpu_node_kernel(ggml_backend_t cpu, const struct ggml_tensor * node);
// The path the sd INT8 ConvRot CPU kernels (quantizer, GEMM, fusions) take now: "vnni", "avx2",
// "i8mm", "dotprod", "neon", "portable" (the GGML_CPU_ISA cap and SD_INT8_PATH apply); "none" in a
// build without the sd CPU kernels.
SD_API const char * sd_cpu_int8_path(void);

// ---------------------------------------------------------------------------------------------
// Constructors (model-facing names; with SD_USE_UPSTREAM_GGML each returns NULL and
// sd_ggml_last_error() says the operator needs ggml-ext.h)

SD_API struct ggml_tensor * sd_rope_apply(struct ggml_context * ctx, struct ggml_tensor * x, struct ggml_tensor * pe,
                                            int mode);

// ggml_quantize_i8_convrot, ggml_mul_mat_i8_tensorwise and ggml_sage_attn are declared by ggml.h
// (stable-diffusion.cpp's pinned ggml has them there; ours implements them here and builds this
// file into libggml, CMake target sd-ops). An upstream ggml lacks them: declared here for that
// build, where ggml_compat.cpp defines them to fail.
#ifdef SD_USE_UPSTREAM_GGML
SD_API struct ggml_tensor * ggml_quantize_i8_convrot(struct ggml_context * ctx, struct ggml_tensor * x, int group);
SD_API struct ggml_tensor * ggml_mul_mat_i8_tensorwise(struct ggml_context * ctx, struct ggml_tensor * weight,
                                                         struct ggml_tensor * input, struct ggml_tensor * weight_scale,
                                                         struct ggml_tensor * bias, int convrot_group_size);
SD_API struct ggml_tensor * ggml_sage_attn(struct ggml_context * ctx, struct ggml_tensor * q, struct ggml_tensor * k,
                                             struct ggml_tensor * v, float scale, int mode);
#endif

// ggml_mul_mat_i8_tensorwise with the spec's third input kind: input F32 (kind 0), the output of
// ggml_quantize_i8_convrot (kind 1) or other I8 (kind 2, with input_scale: one F32 per row).
// weight_scale, bias and input_scale may be NULL. (C++ also reaches it as the 7-argument
// overload of ggml_mul_mat_i8_tensorwise below.)
SD_API struct ggml_tensor * sd_mul_mat_i8_tensorwise_scaled(struct ggml_context * ctx, struct ggml_tensor * weight,
                                                              struct ggml_tensor * input,
                                                              struct ggml_tensor * weight_scale,
                                                              struct ggml_tensor * bias, int convrot_group_size,
                                                              struct ggml_tensor * input_scale);

// sd.cpp's Linear entry point: x F32 (or the packed ConvRot tensor when scale == 1). scale != 1
// pre-scales x and divides the output by scale before adding the bias. Activations with
// ne2*ne3 > 1024 are reshaped to 2-D around the GEMM (sd.cpp's batching workaround).
SD_API struct ggml_tensor * ggml_ext_linear_i8_tensorwise(struct ggml_context * ctx, struct ggml_tensor * x,
                                                            struct ggml_tensor * w, struct ggml_tensor * weight_scale,
                                                            struct ggml_tensor * b, int convrot_group_size,
                                                            float scale);

SD_API struct ggml_tensor * ggml_sol_attn(struct ggml_context * ctx, struct ggml_tensor * q, struct ggml_tensor * k,
                                            struct ggml_tensor * v, float scale, float tau);

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
// The 7-argument form model code and tests use (a C++ overload beside ggml.h's C function).
inline struct ggml_tensor * ggml_mul_mat_i8_tensorwise(struct ggml_context * ctx, struct ggml_tensor * weight,
                                                       struct ggml_tensor * input, struct ggml_tensor * weight_scale,
                                                       struct ggml_tensor * bias, int convrot_group_size,
                                                       struct ggml_tensor * input_scale) {
    return sd_mul_mat_i8_tensorwise_scaled(ctx, weight, input, weight_scale, bias, convrot_group_size, input_scale);
}
#endif
