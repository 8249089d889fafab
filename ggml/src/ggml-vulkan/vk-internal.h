#pragma once

// vk-internal.h — state shared by the Vulkan backend's files (private to ggml/src/ggml-vulkan).
//
// Design (docs/architecture.md, "The Vulkan backend"):
// * Shaders address tensors through buffer device addresses (GL_EXT_buffer_reference). Every
//   dispatch gets a parameter block (tensor addresses, types, shapes, strides, scalars) in a
//   host-visible arena; its address is the only push constant. No descriptor sets, so no binding
//   can exceed maxStorageBufferRange: tensors are limited only by the allocation size.
// * Device memory is sub-allocated from large VkDeviceMemory blocks, each with one VkBuffer.
// * A ggml buffer's base "pointer" is its device address, so tensor->data is the address the
//   shaders use (unique per device, never dereferenced on the host).

#include "ggml-vulkan.h"
#include "backend/ggml-backend-impl.h"
#include "../ggml-impl.h"

#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct vk_device;

// ---------------------------------------------------------------------------------------------
// Memory (vk-memory.cpp)

struct vk_block {
    VkDeviceMemory           memory  = VK_NULL_HANDLE;
    VkBuffer                 buffer  = VK_NULL_HANDLE;
    VkDeviceAddress          address = 0;
    size_t                   size    = 0;
    uint8_t *                mapped  = nullptr; // non-null when the host writes it directly
    std::map<size_t, size_t> free_ranges;       // offset -> size, coalesced
};

struct vk_allocation {
    vk_block *      block   = nullptr;
    size_t          offset  = 0;
    size_t          size    = 0;
    VkDeviceAddress address = 0;
    uint8_t *       mapped  = nullptr; // block->mapped + offset, or null
};

// A sub-allocator over blocks of one memory type.
struct vk_pool {
    vk_device *                            dev        = nullptr;
    uint32_t                               mem_type   = UINT32_MAX;
    bool                                   map        = false; // map blocks for host access
    size_t                                 block_size = 0;
    std::vector<std::unique_ptr<vk_block>> blocks;
};

bool vk_pool_alloc(vk_pool & pool, size_t size, vk_allocation & out); // caller holds dev->mem_mtx
void vk_pool_free(vk_pool & pool, const vk_allocation & a);           // caller holds dev->mem_mtx
void vk_pool_destroy(vk_pool & pool);

// ---------------------------------------------------------------------------------------------
// Device (vk-device.cpp)

struct vk_device {
    int         index = 0;
    std::string name;        // "Vulkan0"
    std::string description; // driver's device name
    VkPhysicalDevice                 phys = VK_NULL_HANDLE;
    VkPhysicalDeviceProperties       props{};
    VkPhysicalDeviceMemoryProperties mem_props{};
    uint32_t                         subgroup_size = 0;
    size_t                           max_alloc     = 0; // maxMemoryAllocationSize
    // mul_mat reads operands straight from memory instead of staging tiles in shared memory:
    // on CPU drivers (shared memory is ordinary memory there); GGML_VK_GEMM=shared|direct overrides
    bool                             gemm_direct   = false;
    // mul_mat_sg.comp (8-lane subgroups, wide loads, subgroupBroadcast, no shared memory): CPU
    // drivers with subgroup size 8 and ballot operations (lavapipe); GGML_VK_GEMM=direct|shared turn it off
    bool                             gemm_sg       = false;
    enum ggml_backend_dev_type       type          = GGML_BACKEND_DEVICE_TYPE_GPU;

    // created on first use (init_logical)
    std::once_flag init_once;
    bool           init_ok = false;
    VkDevice       device  = VK_NULL_HANDLE;
    VkQueue        queue   = VK_NULL_HANDLE;
    uint32_t       queue_family = 0;
    std::mutex     queue_mtx; // vkQueueSubmit needs external synchronisation

    std::mutex mem_mtx;
    vk_pool    device_pool; // device-local (direct mapped when host-visible and not forced to stage)
    vk_pool    host_pool;   // host-visible, host-coherent: pinned host buffers, staging, params
    bool       device_mapped = false;

    std::mutex                        pipe_mtx;
    VkPipelineLayout                  layout = VK_NULL_HANDLE;
    VkPipelineCache                   pipeline_cache = VK_NULL_HANDLE;
    std::map<std::string, VkShaderModule> modules;
    std::map<std::string, VkPipeline>     pipelines;

    // application (extension) pipelines, vk-ext-pipelines.cpp; guarded by pipe_mtx
    std::map<uint32_t, VkDescriptorSetLayout>     ext_set_layouts;  // by binding count
    std::map<uint64_t, VkPipelineLayout>          ext_layouts;      // by (binding count, push bytes)
    std::map<std::string, VkShaderModule>         ext_modules;      // by the SPIR-V bytes
    std::map<std::string, VkPipeline>             ext_pipelines;    // by SPIR-V + configuration
    uint64_t                                      ext_pipelines_created = 0;
    uint64_t                                      ext_pipeline_hits     = 0;

    // optional features enabled on the logical device (reported by ggml_ext_vulkan_v1)
    bool feat_storage8 = false, feat_int8 = false, feat_int16 = false, feat_float16 = false;
    bool feat_int_dot  = false; // VK_KHR_shader_integer_dot_product enabled
    bool feat_subgroup_size_control = false;
    // VK_NV_cooperative_matrix enabled: its configurations (VkCooperativeMatrixPropertiesNV)
    std::vector<VkCooperativeMatrixPropertiesNV> coopmat_nv;

    // live buffers by base pointer (ggml_backend_buffer_get_base), for bindings by pointer
    std::map<uintptr_t, ggml_backend_buffer_t> live_device_buffers; // guarded by mem_mtx
    std::map<uintptr_t, ggml_backend_buffer_t> live_host_buffers;   // guarded by mem_mtx

    // synchronous transfers for buffers without a host mapping (vk-memory.cpp)
    std::mutex      xfer_mtx;
    VkCommandPool   xfer_pool  = VK_NULL_HANDLE;
    VkCommandBuffer xfer_cmd   = VK_NULL_HANDLE;
    VkFence         xfer_fence = VK_NULL_HANDLE;
    vk_allocation   staging;

    ggml_backend_device        gdev{};
    ggml_backend_buffer_type   buft{};
    ggml_backend_buffer_type   host_buft{};
};

vk_device * vk_get_device(size_t index);         // nullptr if out of range
// true once the process-exit teardown destroyed every device: Vulkan objects that outlive it
// (backends or buffers the application never freed) are then only forgotten
bool        vk_shut_down();
size_t      vk_device_count();
bool        vk_device_ready(vk_device * dev);     // creates the logical device once
VkResult    vk_submit_wait(vk_device * dev, VkCommandBuffer cmd, VkFence fence);
VkResult    vk_submit(vk_device * dev, VkCommandBuffer cmd, VkFence fence); // no wait
void        vk_check_failed(VkResult r, const char * what); // logs

// ---------------------------------------------------------------------------------------------
// Buffers (vk-memory.cpp)

void                       vk_init_buffer_types(vk_device * dev);
bool                       vk_buft_is_device(ggml_backend_buffer_type_t buft, vk_device * dev);
vk_device *                vk_buffer_device(ggml_backend_buffer_t buffer); // nullptr if not a Vulkan buffer
// device address of a tensor's first byte (tensor in a Vulkan device or host buffer)
uint64_t vk_tensor_address(const ggml_tensor * t);

// Where a Vulkan buffer lives: its block, the allocation's offset in the block, the ggml buffer
// size and the device address of its first byte.
struct vk_buffer_span {
    vk_device * dev          = nullptr;
    vk_block *  block        = nullptr;
    size_t      block_offset = 0;
    size_t      size         = 0;
    uint64_t    address      = 0;
    bool        host         = false; // pinned host buffer
};
bool                  vk_buffer_get_span(ggml_backend_buffer_t buffer, vk_buffer_span * out); // false: not Vulkan
// the live buffer of dev whose [base, base + size) holds ptr (device buffers first); nullptr if none
ggml_backend_buffer_t vk_find_buffer(vk_device * dev, const void * ptr);

// ---------------------------------------------------------------------------------------------
// Pipelines (vk-pipelines.cpp)

// Pipeline of shader `name` with specialization constants spec[0..n) (constant_id = index);
// created on first use and cached per device. VK_NULL_HANDLE on failure (logged).
VkPipeline vk_get_pipeline(vk_device * dev, const char * name, const std::vector<int32_t> & spec);
bool       vk_init_pipeline_layout(vk_device * dev);
void       vk_destroy_pipelines(vk_device * dev); // native and extension pipelines

// Extension pipelines (vk-ext-pipelines.cpp): the pipeline of application SPIR-V with n_bindings
// storage buffers (set 0), the specialization constants and a push block of push_bytes; created
// on first use, cached per device. On failure returns false with a message in err.
struct vk_ext_pipeline {
    VkPipeline            pipeline   = VK_NULL_HANDLE;
    VkPipelineLayout      layout     = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
};
bool vk_ext_get_pipeline(vk_device * dev, const uint32_t * spirv, size_t spirv_bytes, uint32_t n_bindings,
                         const uint32_t * spec, uint32_t n_spec, uint32_t push_bytes, vk_ext_pipeline * out,
                         std::string & err);
void vk_ext_destroy_pipelines(vk_device * dev); // caller holds pipe_mtx

// ---------------------------------------------------------------------------------------------
// Shader parameter block (layout mirrors shaders/common.glsl)

struct vk_tensor_desc {
    uint64_t addr;
    uint32_t type;
    uint32_t pad;
    uint32_t ne[4];
    uint32_t nb[4]; // in elements
};
static_assert(sizeof(vk_tensor_desc) == 48, "mirrors the GLSL std430 struct");
// d = the address, type, sizes and element strides of t (all zero for t == nullptr); false (logged)
// when t is not aligned to its element size (vk-ops.cpp)
bool vk_describe_tensor(const ggml_tensor * t, vk_tensor_desc & d);

constexpr int VK_MAX_PARAM_TENSORS = 6;
struct vk_params {
    vk_tensor_desc t[VK_MAX_PARAM_TENSORS]; // t[0] destination, t[1..] sources
    int32_t        ip[16];
    float          fp[16];
};
constexpr size_t VK_PARAM_SLOT = 512;
static_assert(sizeof(vk_params) <= VK_PARAM_SLOT, "parameter slot too small");

// ---------------------------------------------------------------------------------------------
// Command stream of one backend (vk-commands.cpp)

struct vk_stream {
    vk_device *     dev   = nullptr;
    VkCommandPool   pool  = VK_NULL_HANDLE;
    VkCommandBuffer cmd   = VK_NULL_HANDLE;
    VkFence         fence = VK_NULL_HANDLE;
    vk_allocation   arena; // parameter blocks, VK_PARAM_SLOT each
    size_t          arena_used = 0;
    bool            recording  = false;
    size_t          n_dispatches = 0; // of the last graph_compute (ggml_backend_vk_get_graph_stats)
    size_t          n_barriers   = 0;
    bool            plain_mul_mat = false; // benchmark baseline (ggml_backend_vk_set_plain_mul_mat)
    int             mm_kernel     = 0;     // ggml_backend_vk_set_mul_mat_kernel (0: the device's choice)

    // Batching (vk-commands.cpp): the open recording may hold several fragments (native graph
    // ranges, extension dispatches and copies) of one scheduled plan; it is submitted when the
    // plan returns, on synchronize, when the arena or descriptor pool is full, or when
    // submit_threshold commands were recorded since the last submission (0: no threshold).
    bool     batching         = false;
    size_t   submit_threshold = 0;
    uint64_t flop_threshold   = 0; // also submit once the recorded work reaches this many FLOPs (0: none)
    size_t   n_recorded       = 0; // dispatches + copies in the open recording
    uint64_t n_flops          = 0; // FLOPs of the native nodes in the open recording (mul_mat, flash attention)
    VkDescriptorPool desc_pool = VK_NULL_HANDLE; // extension descriptor sets, reset per submission

    // A threshold submits without waiting: recording continues in the spare command buffer (with
    // its own fence, arena and descriptor pool), swapped in; it is waited for only when it is
    // needed again, or when the plan returns / the backend synchronizes.
    VkCommandBuffer  spare_cmd       = VK_NULL_HANDLE;
    VkFence          spare_fence     = VK_NULL_HANDLE;
    vk_allocation    spare_arena;
    VkDescriptorPool spare_desc_pool = VK_NULL_HANDLE;
    bool             spare_in_flight = false;

    // lifetime counters (ggml_ext_vulkan_v1.get_stats)
    uint64_t total_submits = 0, total_dispatches = 0, total_barriers = 0;
    uint64_t total_ext_dispatches = 0, total_ext_copies = 0;

    struct range { uint64_t lo, hi; };
    std::vector<range> pending_writes; // written since the last barrier
    std::vector<range> pending_reads;  // read since the last barrier
};

bool     vk_stream_init(vk_stream & s, vk_device * dev);
void     vk_stream_destroy(vk_stream & s);
// Makes sure a recording is open with room for n_slots more parameter blocks: opens one (the
// arena grows only while nothing is pending), or submits the open one first when it is full.
bool     vk_stream_open(vk_stream & s, size_t n_slots);
// barrier if the dispatch reads or writes what an earlier, unbarriered dispatch wrote, or writes
// what one read
void     vk_stream_access(vk_stream & s, const std::vector<const ggml_tensor *> & reads, const ggml_tensor * write);
// the same for device address ranges [lo, hi) (extension dispatches and copies)
void     vk_stream_access_ranges(vk_stream & s, const std::vector<vk_stream::range> & reads,
                                 const std::vector<vk_stream::range> & writes);
bool     vk_stream_dispatch(vk_stream & s, VkPipeline pipe, const vk_params & p, uint32_t gx, uint32_t gy, uint32_t gz);
// one more command recorded (dispatch or copy): counts it; in a batch, submits at a threshold
// (commands or FLOPs since the last submission)
bool     vk_stream_count_command(vk_stream & s);
// Ends and submits the open recording (if it holds any command) and waits for it.
VkResult vk_stream_submit_wait(vk_stream & s);
// A descriptor set of layout for an extension dispatch in the open recording (submits and
// reopens when the pool is full); VK_NULL_HANDLE on failure.
VkDescriptorSet vk_stream_descriptor_set(vk_stream & s, VkDescriptorSetLayout layout);

// ---------------------------------------------------------------------------------------------
// Ops (vk-ops.cpp)

bool vk_op_supported(vk_device * dev, const ggml_tensor * node);
// records node's dispatches; false if it cannot (logged)
bool vk_op_record(vk_stream & s, ggml_tensor * node);
// dispatches a node needs at most (for arena sizing)
size_t vk_op_max_dispatches(const ggml_tensor * node);

// nodes with a block-quantized operand (vk-ops-quant.cpp: mul_mat, get_rows, cpy to F32/F16);
// vk_op_supported / vk_op_record hand such nodes to these
bool vk_quant_node(const ggml_tensor * node);
bool vk_quant_op_supported(vk_device * dev, const ggml_tensor * node);
bool vk_quant_op_record(vk_stream & s, ggml_tensor * node);

// backend (vk-backend.cpp)
ggml_backend_t vk_backend_new(vk_device * dev);
vk_stream *    vk_backend_stream(ggml_backend_t backend); // nullptr if not a Vulkan backend
vk_device *    vk_backend_device(ggml_backend_t backend); // nullptr if not a Vulkan backend

// the ggml_ext_vulkan_v1 table (vk-ext.cpp), for get_proc_address
const void * vk_ext_service_table();
