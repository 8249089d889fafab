#pragma once

// ggml-ext.h — application-owned operators, kernel overrides, fusion rules, safe graph
// reordering and backend services (../shared/spec/ggml_extensions.md).
//
// Registrations are in-process and scoped to a backend device. Register before capability
// queries or graph allocation; callbacks and user data must outlive every graph, scheduler and
// backend that may use them. Names are unique: a duplicate registration fails and leaves the
// live one in place. Rebuild scheduler allocations after changing registrations.

#include "ggml-backend.h"
#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------------------------------------
// Operator definitions

// Registered operator id; 0 is invalid.
typedef int32_t ggml_ext_op_t;

// An extension node is an ordinary tensor with op GGML_OP_CUSTOM. Its op_params start with a
// marker (a callback pointer that is not a CPU callback, plus the operator id); attributes are
// copied after it, at byte GGML_EXT_ATTR_OFFSET.
#define GGML_EXT_ATTR_OFFSET   24
#define GGML_EXT_MAX_ATTR_SIZE (GGML_MAX_OP_PARAMS - GGML_EXT_ATTR_OFFSET)
#define GGML_EXT_MAX_ERROR     256

struct ggml_ext_op_desc {
    const char * name;      // versioned and unique, e.g. "sd.rope_apply.v1"
    size_t       attr_size; // plain bytes, at most GGML_EXT_MAX_ATTR_SIZE
    // Output metadata inference and validation: on success set *type and ne (one contiguous
    // out-of-place output) and return true; on rejection write a message into err and return
    // false. Reads metadata only.
    bool (*infer)(const struct ggml_tensor * const * src, int n_src, const void * attrs, enum ggml_type * type,
                  int64_t ne[GGML_MAX_DIMS], char * err, size_t err_size, void * user_data);
    void * user_data;
};

// Returns the new id, or 0 (with ggml_ext_last_error) for a duplicate name or invalid desc.
GGML_API ggml_ext_op_t ggml_ext_register_op(const struct ggml_ext_op_desc * desc);
GGML_API ggml_ext_op_t ggml_ext_find_op(const char * name); // 0 if unknown
GGML_API const char *  ggml_ext_op_name(ggml_ext_op_t op);  // NULL if unknown

// Creates the node (src are explicit graph dependencies; attrs is attr_size bytes or NULL when
// attr_size is 0). Returns NULL when infer rejects the inputs; the reason is in
// ggml_ext_last_error() (the message names the operator).
GGML_API struct ggml_tensor * ggml_ext_op_create(struct ggml_context * ctx, ggml_ext_op_t op, struct ggml_tensor ** src,
                                                 int n_src, const void * attrs);

// The operator of an extension node, 0 for any other tensor (including user CUSTOM callbacks).
GGML_API ggml_ext_op_t ggml_ext_get_op(const struct ggml_tensor * node);
// Copies the node's attributes (size bytes, at most the registered attr_size) into attrs.
GGML_API void          ggml_ext_get_attrs(const struct ggml_tensor * node, void * attrs, size_t size);

// Message of the last failed registration/creation on this thread ("" if none).
GGML_API const char * ggml_ext_last_error(void);

// ---------------------------------------------------------------------------------------------
// Kernels and fusion rules

// The nodes one extension step covers, in graph order: one node for a single-node kernel, the
// matched consecutive nodes for a fusion rule (the last one is the fused output).
struct ggml_ext_nodes {
    struct ggml_tensor * const * nodes;
    int                          n_nodes;
};

enum ggml_ext_kernel_flags {
    // Execution enqueues replayable device work only (no per-execution host decisions).
    GGML_EXT_KERNEL_CAPTURE_SAFE    = 1u << 0,
    // Recorded work may be reused across plan rebuilds; requires CAPTURE_SAFE.
    GGML_EXT_KERNEL_REPLAY_REUSABLE = 1u << 1,
};

struct ggml_ext_kernel_desc {
    const char * name; // unique per device

    // What a single-node kernel implements: a built-in op to override, or GGML_OP_CUSTOM with
    // custom_op. GGML_OP_NONE for a fusion-only rule (claims no single-node support).
    enum ggml_op  op;
    ggml_ext_op_t custom_op;

    int priority; // higher is considered first

    // Correctness constraints for one node (metadata only; never call the public capability
    // query for the same device and op from here). Required unless fusion-only.
    bool (*supports)(ggml_backend_dev_t dev, const struct ggml_tensor * node, void * user_data);
    // Optional: whether to override an available native implementation (absent: override).
    // Ignored when native execution is unsupported.
    bool (*preferred)(ggml_backend_dev_t dev, const struct ggml_tensor * node, void * user_data);

    // Optional fusion rule: the number (>= 2) of consecutive nodes starting at `first` this
    // kernel replaces, or 0. The graph's own legality checks run afterwards.
    int (*match)(ggml_backend_dev_t dev, const struct ggml_cgraph * graph, int first, void * user_data);

    // Optional: runs before fusion matching and allocation; may reorder with ggml_ext_graph_delay.
    void (*optimize)(ggml_backend_dev_t dev, struct ggml_cgraph * graph, void * user_data);

    // Optional: host-side plan state and workspace bytes. May run before tensor addresses exist;
    // must not launch work or allocate device buffers.
    enum ggml_status (*prepare)(ggml_backend_dev_t dev, const struct ggml_ext_nodes * nodes, void ** state,
                                size_t * workspace_bytes, void * user_data);
    // Runs the step on the backend's queue with the current tensor addresses. workspace is the
    // base of a backend buffer of at least the prepared size (NULL when 0); its contents are not
    // preserved between calls.
    enum ggml_status (*execute)(ggml_backend_t backend, const struct ggml_ext_nodes * nodes, void * state,
                                void * workspace, size_t workspace_bytes, void * user_data);
    // Optional: releases prepared state.
    void (*destroy)(void * state, void * user_data);

    void * user_data;
};

// false (with ggml_ext_last_error) on duplicate name on the device or invalid desc/flags.
GGML_API bool ggml_ext_register_kernel(ggml_backend_dev_t dev, const struct ggml_ext_kernel_desc * desc);
GGML_API bool ggml_ext_register_kernel_ex(ggml_backend_dev_t dev, const struct ggml_ext_kernel_desc * desc,
                                          uint32_t flags);

// The device's own implementation, without extension dispatch.
GGML_API bool ggml_ext_dev_supports_native_op(ggml_backend_dev_t dev, const struct ggml_tensor * op);

// Moves the producer range nodes[first, first + count) to just after nodes[after]
// (after >= first + count), shifting the crossed nodes (first + count .. after] forward.
// Rejected (graph unchanged, false + ggml_ext_last_error) if a crossed node uses a moved node,
// has unknown side effects, or writes storage that aliases the moved nodes' inputs or outputs.
GGML_API bool ggml_ext_graph_delay(struct ggml_cgraph * graph, int first, int count, int after);

// ---------------------------------------------------------------------------------------------
// Plan introspection (what the scheduler decided for the graph it allocated last)

struct ggml_backend_sched;

struct ggml_ext_step_info {
    int            split;           // split index
    ggml_backend_t backend;         // where the step runs
    int            first_node;      // index into the scheduled graph (after optimize reordering)
    int            n_nodes;         // nodes covered
    const char *   kernel;          // extension kernel name; NULL for a native range
    bool           fused;           // a fusion rule replaced n_nodes >= 2 nodes
    size_t         workspace_bytes; // prepared workspace request of this step
};

GGML_API int  ggml_ext_sched_n_steps(struct ggml_backend_sched * sched);
GGML_API bool ggml_ext_sched_get_step(struct ggml_backend_sched * sched, int i, struct ggml_ext_step_info * info);

// ---------------------------------------------------------------------------------------------
// Backend services (found with ggml_backend_reg_get_proc_address(reg, "<name>"), which
// returns a pointer to the versioned table, or NULL where the backend lacks the service)

#define GGML_EXT_CPU_PARALLEL_V1 "ggml_ext_cpu_parallel_v1"

typedef void (*ggml_ext_cpu_task_t)(int ith, int nth, void * data);

struct ggml_ext_cpu_parallel_v1 {
    uint32_t version; // 1
    // Runs task(ith, nth, data) on every thread of the backend's configured pool and returns
    // when all are done. GGML_STATUS_ABORTED if the backend's abort callback fired (it is
    // polled before the run and through should_abort); the task should stop early then.
    enum ggml_status (*parallel_for)(ggml_backend_t backend, ggml_ext_cpu_task_t task, void * data);
    // For long tasks: true once the backend's abort callback asked to stop (any thread).
    bool (*should_abort)(ggml_backend_t backend);
    int (*n_threads)(ggml_backend_t backend);
};

#define GGML_EXT_CPU_ISA_V1 "ggml_ext_cpu_isa_v1"

// The CPU backend's instruction-set chooser (ggml-cpu.h, "Instruction-set level"), for
// application kernels that carry their own SIMD paths: they pick by it, so GGML_CPU_ISA caps them
// too and the reported level is the one that runs.
struct ggml_ext_cpu_isa_v1 {
    uint32_t version; // 1
    const char * (*active_level)(void);          // "portable", "avx2", "avx_vnni", "avx512", "amx"
    bool (*can_use)(const char * feature_or_level); // as ggml_cpu_isa_can_use
};

#define GGML_EXT_CPU_UNARY_V1 "ggml_ext_cpu_unary_v1"

struct ggml_ext_cpu_unary_v1 {
    uint32_t version; // 1
    // y[0..n) = op(x[0..n)) with exactly the kernel a GGML_OP_UNARY node of this op runs on this
    // backend (the same bits, honoring ggml_backend_cpu_set_use_ref); false when the op is not
    // offered or backend is not a CPU backend. x and y may be the same array. Runs on the
    // calling thread (no pool, no abort polling), so it may be called from a parallel_for task.
    // Each element depends only on its own input, never on n or its position.
    bool (*apply_f32)(ggml_backend_t backend, enum ggml_unary_op op, int64_t n, const float * x, float * y);
};

#ifdef __cplusplus
}
#endif
