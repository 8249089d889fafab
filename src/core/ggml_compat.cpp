// ggml_compat.cpp — the model-facing part of ggml_extensions.h for an upstream ggml, which has no
// ggml-ext.h (SD_USE_UPSTREAM_GGML; CMake compiles this file instead of ggml_extensions.cpp and
// src/core/cpu/). There is no extension interface to register with, so:
//  * sd_ggml_register_extensions() registers nothing; it only checks that this program and the
//    ggml library agree on the size of ggml_tensor (GGML_MAX_NAME, which upstream does not record);
//  * the sd operator constructors (RoPE apply, INT8 ConvRot, Sage/Sol attention) return NULL with
//    a message naming this build: models use the plain op chains instead (sd_ggml_have_extensions()
//    is false), and an INT8 model is refused when its graph is built;
//  * the node and plan queries see only plain ggml ops and no extension steps (the fusion switch,
//    fusion_switch.cpp, is shared by both builds; here no rule exists to obey it).

#include "ggml_extensions.h"

#include <string>

namespace {

thread_local std::string g_last_error;

// "<op>: <what> needs the ggml extension interface (ggml-ext.h), which ... lacks; <instead>"
struct ggml_tensor * unavailable(const char * op, const char * what, const char * instead) {
    g_last_error = std::string(op) + ": " + what +
                   " needs the ggml extension interface (ggml-ext.h), which the upstream ggml of this build "
                   "(SD_USE_UPSTREAM_GGML) lacks; " + instead;
    return nullptr;
}

const char * const INT8      = "INT8 ConvRot";
const char * const INT8_HINT = "use --dtype f32 or bf16";

// Upstream's ggml_tensor_overhead() is sizeof(ggml_object) + sizeof(ggml_tensor) as the library
// was compiled; its ggml_object is 32 bytes on 64-bit targets (offs, size, next, type + padding).
// GGML_MAX_NAME is the one compile-time setting that changes sizeof(ggml_tensor).
constexpr size_t UPSTREAM_OBJECT_SIZE = 32;

} // namespace

extern "C" {

bool sd_ggml_register_extensions(void) {
    const size_t lib = ggml_tensor_overhead() - UPSTREAM_OBJECT_SIZE;
    if (lib != sizeof(struct ggml_tensor)) {
        g_last_error = "the ggml library's tensors are " + std::to_string(lib) + " bytes but this program was compiled for " +
                       std::to_string(sizeof(struct ggml_tensor)) + " (GGML_MAX_NAME " + std::to_string(GGML_MAX_NAME) +
                       "): configure with the GGML_MAX_NAME the library was built with";
        return false;
    }
    return true;
}

bool sd_ggml_have_extensions(void) { return false; }

const char * sd_ggml_last_error(void) { return g_last_error.c_str(); }

const char * sd_node_op_name(const struct ggml_tensor * node) { return ggml_op_desc(node); }
bool         sd_node_is_extension(const struct ggml_tensor *) { return false; }
bool         sd_node_is_rope_apply(const struct ggml_tensor *) { return false; }
bool         sd_node_is_quantize_i8_convrot(const struct ggml_tensor *) { return false; }

int  sd_sched_n_steps(ggml_backend_sched_t) { return 0; }
bool sd_sched_get_step(ggml_backend_sched_t, int, struct sd_sched_step *) { return false; }

int sd_cpu_backend_n_threads(ggml_backend_t) { return GGML_DEFAULT_N_THREADS; }
const char * sd_cpu_model_name(void) { return "unknown (upstream ggml build)"; }
const char * sd_cpu_kernel_table_row(void) { return "none (upstream ggml build)"; }
const char * sd_cpu_isa(void) { return "upstream"; }
const char * sd_cpu_isa_detected(void) { return "upstream"; }
const char * sd_cpu_get_kernel(const char *) { return "upstream"; }
const char * sd_cpu_node_kernel(ggml_backend_t, const struct ggml_tensor *) { return "upstream"; }
const char * sd_cpu_int8_path(void) { return "none"; }

struct ggml_tensor * sd_rope_apply(struct ggml_context *, struct ggml_tensor *, struct ggml_tensor *, int) {
    return unavailable(SD_OP_ROPE_APPLY, "the RoPE operator", "build RoPE as the plain op chain");
}

struct ggml_tensor * ggml_quantize_i8_convrot(struct ggml_context *, struct ggml_tensor *, int) {
    return unavailable(SD_OP_QUANTIZE_I8_CONVROT, INT8, INT8_HINT);
}

struct ggml_tensor * ggml_mul_mat_i8_tensorwise(struct ggml_context *, struct ggml_tensor *, struct ggml_tensor *,
                                                struct ggml_tensor *, struct ggml_tensor *, int) {
    return unavailable(SD_OP_LINEAR_I8, INT8, INT8_HINT);
}

struct ggml_tensor * sd_mul_mat_i8_tensorwise_scaled(struct ggml_context *, struct ggml_tensor *, struct ggml_tensor *,
                                                     struct ggml_tensor *, struct ggml_tensor *, int,
                                                     struct ggml_tensor *) {
    return unavailable(SD_OP_LINEAR_I8, INT8, INT8_HINT);
}

struct ggml_tensor * ggml_ext_linear_i8_tensorwise(struct ggml_context *, struct ggml_tensor *, struct ggml_tensor *,
                                                   struct ggml_tensor *, struct ggml_tensor *, int, float) {
    return unavailable(SD_OP_LINEAR_I8, INT8, INT8_HINT);
}

struct ggml_tensor * ggml_sage_attn(struct ggml_context *, struct ggml_tensor *, struct ggml_tensor *,
                                    struct ggml_tensor *, float, int) {
    return unavailable(SD_OP_SAGE_ATTN, "SageAttention", "use flash attention");
}

struct ggml_tensor * ggml_sol_attn(struct ggml_context *, struct ggml_tensor *, struct ggml_tensor *,
                                   struct ggml_tensor *, float, float) {
    return unavailable(SD_OP_SOL_ATTN, "Sol attention", "use flash attention");
}

} // extern "C"
