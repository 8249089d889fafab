#pragma once

// ggml-backend-impl.h — the vtables a backend implements. Private to ggml/src.

#include "ggml-backend.h"

struct ggml_ext_kernel_desc; // ggml-ext.h
struct ggml_backend_plan_info; // below

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------------------------------------
// Buffer type

struct ggml_backend_buffer_type_i {
    const char * (*get_name)(ggml_backend_buffer_type_t buft);
    ggml_backend_buffer_t (*alloc_buffer)(ggml_backend_buffer_type_t buft, size_t size); // NULL on failure
    size_t (*get_alignment)(ggml_backend_buffer_type_t buft);
    size_t (*get_max_size)(ggml_backend_buffer_type_t buft);                               // optional: SIZE_MAX
    size_t (*get_alloc_size)(ggml_backend_buffer_type_t buft, const struct ggml_tensor * tensor); // optional: nbytes
    bool (*is_host)(ggml_backend_buffer_type_t buft);                                      // optional: false
};

struct ggml_backend_buffer_type {
    struct ggml_backend_buffer_type_i iface;
    ggml_backend_dev_t                device;
    void *                            context;
};

// ---------------------------------------------------------------------------------------------
// Buffer

struct ggml_backend_buffer_i {
    void (*free_buffer)(ggml_backend_buffer_t buffer);                               // optional
    void * (*get_base)(ggml_backend_buffer_t buffer);
    enum ggml_status (*init_tensor)(ggml_backend_buffer_t buffer, struct ggml_tensor * tensor); // optional
    void (*memset_tensor)(ggml_backend_buffer_t buffer, struct ggml_tensor * tensor, uint8_t value, size_t offset,
                          size_t size);
    void (*set_tensor)(ggml_backend_buffer_t buffer, struct ggml_tensor * tensor, const void * data, size_t offset,
                       size_t size);
    void (*get_tensor)(ggml_backend_buffer_t buffer, const struct ggml_tensor * tensor, void * data, size_t offset,
                       size_t size);
    // optional: copy src (any buffer) into dst (this buffer); false if not possible directly
    bool (*cpy_tensor)(ggml_backend_buffer_t buffer, const struct ggml_tensor * src, struct ggml_tensor * dst);
    void (*clear)(ggml_backend_buffer_t buffer, uint8_t value);
    void (*reset)(ggml_backend_buffer_t buffer); // optional
};

struct ggml_backend_buffer {
    struct ggml_backend_buffer_i   iface;
    ggml_backend_buffer_type_t     buft;
    void *                         context;
    size_t                         size;
    enum ggml_backend_buffer_usage usage;
};

GGML_API ggml_backend_buffer_t ggml_backend_buffer_init(ggml_backend_buffer_type_t buft,
                                                        struct ggml_backend_buffer_i iface, void * context,
                                                        size_t size);

// ---------------------------------------------------------------------------------------------
// Backend (stream)

// What plan_begin answers (see "Plan hooks" below).
enum ggml_backend_plan_action {
    GGML_BACKEND_PLAN_EXECUTE  = 0, // the scheduler executes the range (the backend may record it)
    GGML_BACKEND_PLAN_REPLAYED = 1, // the backend already launched the range's work
};

struct ggml_backend_i {
    const char * (*get_name)(ggml_backend_t backend);
    void (*free)(ggml_backend_t backend);

    // optional asynchronous transfers
    void (*set_tensor_async)(ggml_backend_t backend, struct ggml_tensor * tensor, const void * data, size_t offset,
                             size_t size);
    void (*get_tensor_async)(ggml_backend_t backend, const struct ggml_tensor * tensor, void * data, size_t offset,
                             size_t size);
    bool (*cpy_tensor_async)(ggml_backend_t backend_src, ggml_backend_t backend_dst, const struct ggml_tensor * src,
                             struct ggml_tensor * dst);

    void (*synchronize)(ggml_backend_t backend); // optional

    // compute the graph's nodes in order (nodes without GGML_TENSOR_FLAG_COMPUTE are skipped)
    enum ggml_status (*graph_compute)(ggml_backend_t backend, struct ggml_cgraph * cgraph);

    void (*event_record)(ggml_backend_t backend, ggml_backend_event_t event); // optional
    void (*event_wait)(ggml_backend_t backend, ggml_backend_event_t event);   // optional

    // optional plan hooks (see "Plan hooks" below; NULL: the backend computes fragment by fragment)
    enum ggml_backend_plan_action (*plan_begin)(ggml_backend_t backend, const struct ggml_backend_plan_info * info);
    enum ggml_status (*plan_end)(ggml_backend_t backend);
    enum ggml_status (*ext_step_end)(ggml_backend_t backend);
};

struct ggml_backend {
    ggml_guid_t           guid;
    struct ggml_backend_i iface;
    ggml_backend_dev_t    device;
    void *                context;
};

struct ggml_backend_event {
    struct ggml_backend_device * device;
    void *                       context;
};

// ---------------------------------------------------------------------------------------------
// Device

struct ggml_backend_device_i {
    const char * (*get_name)(ggml_backend_dev_t dev);
    const char * (*get_description)(ggml_backend_dev_t dev);
    void (*get_memory)(ggml_backend_dev_t dev, size_t * free, size_t * total);
    enum ggml_backend_dev_type (*get_type)(ggml_backend_dev_t dev);
    void (*get_props)(ggml_backend_dev_t dev, struct ggml_backend_dev_props * props);
    ggml_backend_t (*init_backend)(ggml_backend_dev_t dev, const char * params);
    ggml_backend_buffer_type_t (*get_buffer_type)(ggml_backend_dev_t dev);
    ggml_backend_buffer_type_t (*get_host_buffer_type)(ggml_backend_dev_t dev); // optional
    ggml_backend_buffer_t (*buffer_from_host_ptr)(ggml_backend_dev_t dev, void * ptr, size_t size,
                                                  size_t max_tensor_size); // optional
    bool (*supports_op)(ggml_backend_dev_t dev, const struct ggml_tensor * op);
    bool (*supports_buft)(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft);
    bool (*offload_op)(ggml_backend_dev_t dev, const struct ggml_tensor * op); // optional
    ggml_backend_event_t (*event_new)(ggml_backend_dev_t dev);                  // optional
    void (*event_free)(ggml_backend_dev_t dev, ggml_backend_event_t event);     // optional
    void (*event_synchronize)(ggml_backend_dev_t dev, ggml_backend_event_t event); // optional
};

struct ggml_backend_device {
    struct ggml_backend_device_i iface;
    ggml_backend_reg_t           reg;
    void *                       context;
};

// ---------------------------------------------------------------------------------------------
// Registry entry (backend family)

struct ggml_backend_reg_i {
    const char * (*get_name)(ggml_backend_reg_t reg);
    size_t (*get_device_count)(ggml_backend_reg_t reg);
    ggml_backend_dev_t (*get_device)(ggml_backend_reg_t reg, size_t index);
    void * (*get_proc_address)(ggml_backend_reg_t reg, const char * name); // optional
};

#define GGML_BACKEND_API_VERSION 1

struct ggml_backend_reg {
    int                       api_version;
    struct ggml_backend_reg_i iface;
    void *                    context;
};

// ---------------------------------------------------------------------------------------------
// Plan hooks (optional members of ggml_backend_i: plan_begin / plan_end / ext_step_end).
//
// The scheduler calls plan_begin before a split's plan and plan_end after it (without an
// evaluation callback, one pipeline copy). In between, graph_compute calls and extension work
// may stay pending in one stream; plan_end submits what is pending (Vulkan batching) or ends a
// stream capture and launches the captured graph (CUDA Graph whole-plan capture). plan_begin may
// answer GGML_BACKEND_PLAN_REPLAYED: the backend launched a previously captured graph of an
// identical plan and the scheduler skips executing the range (plan_end is still called). The
// extension plan calls ext_step_end after every extension step: outside a batch the backend
// completes the step there (fragment execution, like graph_compute).

// One step of the plan: a native range (kernel == NULL) or one extension kernel over n_nodes.
// Native steps may cover only nodes without work (views, no compute flag): they are skipped.
struct ggml_backend_plan_step {
    int                                 first;     // node index in the graph
    int                                 n_nodes;
    const struct ggml_ext_kernel_desc * kernel;    // NULL: native nodes
    uint32_t                            flags;     // the kernel's GGML_EXT_KERNEL_* registration flags (0 native)
    size_t                              workspace; // bytes this step asked for (prepare)
};

struct ggml_backend_plan_info {
    struct ggml_cgraph *                  graph;
    int                                   i_start, i_end; // the split's node range
    const struct ggml_backend_plan_step * steps;          // in execution order, covering the range
    int                                   n_steps;
    int                                   n_ext_steps;    // steps with a kernel
    ggml_backend_buffer_t                 workspace;      // NULL when no step asked for one
    size_t                                workspace_bytes; // what extension steps receive (the buffer's size)
    // Opaque token, never dereferenced: unique for every plan the scheduler builds or prepares
    // (a reset, a new allocation or a re-prepare gives a new one); equal between two computes
    // of the same plan.
    const void * plan_identity;
    bool         all_ext_capture_safe;    // every extension step has CAPTURE_SAFE (true with none)
    bool         all_ext_replay_reusable; // every extension step has REPLAY_REUSABLE (true with none)
};

#ifdef __cplusplus
}
#endif
