#pragma once

// ggml-ext-vulkan.h — Vulkan execution services for extension kernels (spec: "Vulkan execution
// services"). An application ships its own SPIR-V and runs it on the Vulkan backend's command
// stream, ordered with native work, without including private ggml headers or owning command
// buffers, descriptors or queues.
//
// Discovery, like the CPU services of ggml-ext.h:
//
//     const struct ggml_ext_vulkan_v1 * vk = (const struct ggml_ext_vulkan_v1 *)
//         ggml_backend_reg_get_proc_address(ggml_backend_vk_reg(), GGML_EXT_VULKAN_V1);
//     if (vk && vk->version >= 1 && vk->size >= sizeof(*vk)) { ... }
//
// The table is versioned: `version` grows when entries are added at the end; `size` is the
// table's byte size in the library, so a client built against a newer header can tell which
// entries exist. Structures the client fills for queries start with a `size` field the client
// sets to sizeof(struct): the library writes only the fields that fit.
//
// Shader contract (what `dispatch` binds):
//   * entry point "main", one compute stage;
//   * storage buffers at set 0, bindings 0 .. n_bindings-1 (one descriptor each), in the order
//     of the dispatch's bindings array; no other descriptors;
//   * 32-bit specialization constants with constant_id 0 .. n_spec_constants-1;
//   * an optional push-constant block of push_constants_size bytes at offset 0.
// Descriptor offsets must be multiples of min_storage_buffer_offset_alignment, so the backend
// binds each range from its offset rounded down to that alignment and returns (in `resolve`)
// and applies the difference `shader_offset`: a shader must add shader_offset bytes to every
// index into that binding (pass it in a push constant). A binding's window (shader_offset +
// size) must not exceed max_storage_buffer_range (128 MiB on lavapipe): larger tensors are
// processed in several dispatches over sub-ranges. (The native kernels address memory through
// buffer device addresses and have no such limit; application shaders use descriptors.)
//
// Ordering and synchronisation: dispatch and copy record into the backend's own command stream
// at the point of the call, with the memory barriers the declared reads and writes need against
// earlier native and extension work. Nothing waits on the host per call; the work is complete
// when the backend's normal synchronisation says so (end of graph compute / plan, or
// ggml_backend_synchronize). Inside a kernel's execute callback that is automatic; code that
// calls dispatch or copy outside a graph must call ggml_backend_synchronize(backend) before the
// host reads the results (ggml_backend_tensor_get does not wait for pending extension work). Kernel bounds (a shader must stay inside the size it was given) and
// shader capability requirements (e.g. subgroup ops, 8-bit storage) are the extension's
// responsibility: check device_info first.
//
// Validation: every range and dispatch limit is checked before anything is recorded; an invalid,
// out-of-range or foreign-device request returns GGML_STATUS_FAILED with a message in
// last_error() and records nothing (no abort). Pipelines are created on the first dispatch that
// needs them (never in a kernel's prepare callback, which may run before any device work is
// allowed) and cached per device for the complete configuration (SPIR-V contents, binding count,
// specialization values, push-constant size); they are released with the device. The backend
// keeps no application state: push constants and specialization values are copied at the call.

#include "ggml-backend.h"
#include "ggml.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GGML_EXT_VULKAN_V1 "ggml_ext_vulkan_v1"

#define GGML_EXT_VULKAN_MAX_BINDINGS       16 // storage buffers per dispatch
#define GGML_EXT_VULKAN_MAX_SPEC_CONSTANTS 64 // 32-bit specialization constants per dispatch
#define GGML_EXT_VULKAN_MAX_COOPMAT        32 // cooperative-matrix configurations reported

// --- Device capabilities -----------------------------------------------------------------------

// One cooperative-matrix configuration (VkCooperativeMatrixPropertiesKHR/NV). Component types
// use VkComponentTypeKHR's values (0 = FLOAT16, 1 = FLOAT32, 3 = SINT8, 5 = SINT32, 7 = UINT8,
// 9 = UINT32, ...); scope uses VkScopeKHR's (3 = subgroup).
struct ggml_ext_vulkan_coopmat {
    uint32_t m, n, k;
    uint32_t a_type, b_type, c_type, result_type;
    bool     saturating_accumulation;
    uint32_t scope;
};

struct ggml_ext_vulkan_device_info {
    uint32_t size; // set by the caller: sizeof(struct ggml_ext_vulkan_device_info)

    char     name[256];   // the driver's device name
    uint32_t vendor_id;   // VkPhysicalDeviceProperties::vendorID
    uint32_t device_id;
    uint32_t api_version; // VK_MAKE_API_VERSION encoding
    bool     is_cpu;      // a CPU implementation (lavapipe, SwiftShader)

    // limits
    uint32_t max_compute_shared_memory_size;     // bytes
    uint32_t max_workgroup_invocations;
    uint32_t max_workgroup_size[3];
    uint32_t max_workgroup_count[3];              // dispatch rejects larger counts
    uint64_t max_storage_buffer_range;            // bytes one binding's window may span
    uint64_t min_storage_buffer_offset_alignment; // descriptor offsets are rounded down to this
    uint32_t max_push_constants_size;             // bytes (dispatch rejects more)
    uint32_t max_bindings;                        // storage buffers per dispatch (<= GGML_EXT_VULKAN_MAX_BINDINGS)

    // subgroups (in compute shaders)
    uint32_t subgroup_size;                        // the default size
    uint32_t subgroup_min_size, subgroup_max_size; // with VK_EXT_subgroup_size_control, else = subgroup_size
    bool     subgroup_basic;
    bool     subgroup_vote;
    bool     subgroup_arithmetic;
    bool     subgroup_ballot;
    bool     subgroup_shuffle;
    bool     subgroup_shuffle_relative;
    bool     subgroup_clustered;

    // features enabled on the logical device (a shader may use them)
    bool storage_buffer_8bit;  // storageBuffer8BitAccess
    bool storage_buffer_16bit; // storageBuffer16BitAccess
    bool shader_int8;
    bool shader_int16;
    bool shader_float16;
    bool shader_int64;

    // VK_KHR_shader_integer_dot_product (core 1.3): the feature is enabled on the device, and
    // whether the 4x8-bit packed forms are hardware-accelerated
    bool integer_dot_product;
    bool integer_dot_product_4x8_packed_signed_accelerated;
    bool integer_dot_product_4x8_packed_unsigned_accelerated;
    bool integer_dot_product_4x8_packed_mixed_accelerated;

    // cooperative matrices usable on the device (VK_NV_cooperative_matrix, enabled when offered):
    // 0 when it has none (lavapipe)
    uint32_t                       n_coopmat;
    struct ggml_ext_vulkan_coopmat coopmat[GGML_EXT_VULKAN_MAX_COOPMAT];
};

// --- Storage and bindings ----------------------------------------------------------------------

// Opaque identity of device storage plus a byte range inside it. Two ranges can alias only when
// their storage ids are equal and [offset, offset + size) overlap. Ids are stable for the
// lifetime of the storage and unique per device (never compare ids of different devices).
struct ggml_ext_vulkan_storage {
    uint64_t storage_id;
    uint64_t offset; // bytes from the storage's start
    uint64_t size;   // bytes
};

// Whether two ranges (of the same device) can alias: same storage and overlapping bytes.
static inline bool ggml_ext_vulkan_storage_overlaps(const struct ggml_ext_vulkan_storage * a,
                                                    const struct ggml_ext_vulkan_storage * b) {
    return a->storage_id == b->storage_id && a->offset < b->offset + b->size && b->offset < a->offset + a->size;
}

enum ggml_ext_vulkan_access {
    GGML_EXT_VULKAN_READ       = 1u << 0,
    GGML_EXT_VULKAN_WRITE      = 1u << 1,
    GGML_EXT_VULKAN_READ_WRITE = GGML_EXT_VULKAN_READ | GGML_EXT_VULKAN_WRITE,
};

// A byte range to bind or copy. Exactly one of tensor, buffer, base is set:
//   tensor: a tensor allocated in a Vulkan buffer of the backend's device; the range starts
//           `offset` bytes after the tensor's first byte and must stay within ggml_nbytes(tensor);
//   buffer: a Vulkan backend buffer of that device; the range must stay within the buffer;
//   base:   a pointer this device's buffers handed out (the `workspace` argument of an extension
//           kernel's execute callback, or a tensor's data); the range must stay within the buffer
//           that pointer belongs to.
// size 0 means "to the end" (of the tensor, or of the buffer).
struct ggml_ext_vulkan_binding {
    const struct ggml_tensor * tensor;
    ggml_backend_buffer_t      buffer;
    const void *               base;
    uint64_t                   offset;
    uint64_t                   size;
    uint32_t                   access; // dispatch only: enum ggml_ext_vulkan_access (0 = READ_WRITE)
};

// What resolve reports for a binding.
struct ggml_ext_vulkan_resolved {
    struct ggml_ext_vulkan_storage storage; // the exact range (for alias checks)
    uint64_t descriptor_offset; // storage.offset rounded down to min_storage_buffer_offset_alignment
    uint64_t descriptor_range;  // bytes the descriptor spans: shader_offset + storage.size
    uint64_t shader_offset;     // storage.offset - descriptor_offset: add it in the shader
};

// --- Dispatch ------------------------------------------------------------------------------------

struct ggml_ext_vulkan_dispatch {
    const char *     name;        // optional, for messages
    const uint32_t * spirv;       // SPIR-V words (only read during the call)
    size_t           spirv_size;  // bytes, a non-zero multiple of 4

    const struct ggml_ext_vulkan_binding * bindings; // binding i of set 0 is bindings[i]
    uint32_t                               n_bindings;

    const uint32_t * spec_constants; // constant_id i = spec_constants[i]
    uint32_t         n_spec_constants;

    const void * push_constants;      // copied at the call
    uint32_t     push_constants_size; // bytes, a multiple of 4, <= max_push_constants_size

    uint32_t workgroups[3]; // actual workgroup counts (not invocations); 0 in any = nothing to run
};

// Counters of one backend (test and diagnostics hooks).
struct ggml_ext_vulkan_stats {
    uint32_t size;             // set by the caller: sizeof(struct ggml_ext_vulkan_stats)
    uint64_t submissions;      // queue submissions by this backend since it was created
    uint64_t dispatches;       // dispatches recorded (native and extension)
    uint64_t ext_dispatches;   // of which extension dispatches
    uint64_t ext_copies;       // extension copies recorded
    uint64_t barriers;         // memory barriers recorded
    uint64_t pipelines_created; // extension pipelines created on this backend's device (ever)
    uint64_t pipeline_hits;     // extension dispatches that found their pipeline cached (device)
};

// --- The service table ---------------------------------------------------------------------------

struct ggml_ext_vulkan_v1 {
    uint32_t size;    // sizeof(struct ggml_ext_vulkan_v1) in the library
    uint32_t version; // 1

    // Capabilities of a Vulkan device (creates its logical device if needed). false if dev is
    // not a Vulkan device or info is NULL / too small.
    bool (*device_info)(ggml_backend_dev_t dev, struct ggml_ext_vulkan_device_info * info);

    // Storage identity and byte range of a Vulkan buffer. false if it is not a Vulkan buffer.
    bool (*buffer_info)(ggml_backend_buffer_t buffer, struct ggml_ext_vulkan_storage * info);

    // Resolves a binding against backend's device (checks it as dispatch and copy do).
    enum ggml_status (*resolve)(ggml_backend_t backend, const struct ggml_ext_vulkan_binding * binding,
                                struct ggml_ext_vulkan_resolved * out);

    // Records application SPIR-V into the backend's command stream (see the contract above).
    enum ggml_status (*dispatch)(ggml_backend_t backend, const struct ggml_ext_vulkan_dispatch * dispatch);

    // Records a device copy of src to dst: equal sizes, both offsets and the size multiples of 4
    // bytes, and the two ranges must not overlap.
    enum ggml_status (*copy)(ggml_backend_t backend, const struct ggml_ext_vulkan_binding * dst,
                             const struct ggml_ext_vulkan_binding * src);

    // Why the last call on this thread failed ("" if none failed).
    const char * (*last_error)(void);

    // Counters of a Vulkan backend; false if it is not one.
    bool (*get_stats)(ggml_backend_t backend, struct ggml_ext_vulkan_stats * stats);
};

#ifdef __cplusplus
}
#endif
