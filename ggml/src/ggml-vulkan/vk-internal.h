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
#include "../ggml-backend-impl.h"
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
void        vk_check_failed(VkResult r, const char * what); // logs

// ---------------------------------------------------------------------------------------------
// Buffers (vk-memory.cpp)

void                       vk_init_buffer_types(vk_device * dev);
bool                       vk_buft_is_device(ggml_backend_buffer_type_t buft, vk_device * dev);
vk_device *                vk_buffer_device(ggml_backend_buffer_t buffer); // nullptr if not a Vulkan buffer
// device address of a tensor's first byte (tensor in a Vulkan device or host buffer)
uint64_t vk_tensor_address(const ggml_tensor * t);

// ---------------------------------------------------------------------------------------------
// Pipelines (vk-pipelines.cpp)

// Pipeline of shader `name` with specialization constants spec[0..n) (constant_id = index);
// created on first use and cached per device. VK_NULL_HANDLE on failure (logged).
VkPipeline vk_get_pipeline(vk_device * dev, const char * name, const std::vector<int32_t> & spec);
bool       vk_init_pipeline_layout(vk_device * dev);
void       vk_destroy_pipelines(vk_device * dev);

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
    size_t          n_dispatches = 0;
    size_t          n_barriers   = 0;
    bool            plain_mul_mat = false; // benchmark baseline (ggml_backend_vk_set_plain_mul_mat)

    struct range { uint64_t lo, hi; };
    std::vector<range> pending_writes; // written since the last barrier
    std::vector<range> pending_reads;  // read since the last barrier
};

bool     vk_stream_init(vk_stream & s, vk_device * dev);
void     vk_stream_destroy(vk_stream & s);
bool     vk_stream_begin(vk_stream & s, size_t max_dispatches); // arena sized for max_dispatches
// barrier if the dispatch reads or writes what an earlier, unbarriered dispatch wrote, or writes
// what one read
void     vk_stream_access(vk_stream & s, const std::vector<const ggml_tensor *> & reads, const ggml_tensor * write);
bool     vk_stream_dispatch(vk_stream & s, VkPipeline pipe, const vk_params & p, uint32_t gx, uint32_t gy, uint32_t gz);
VkResult vk_stream_submit_wait(vk_stream & s);

// ---------------------------------------------------------------------------------------------
// Ops (vk-ops.cpp)

bool vk_op_supported(vk_device * dev, const ggml_tensor * node);
// records node's dispatches; false if it cannot (logged)
bool vk_op_record(vk_stream & s, ggml_tensor * node);
// dispatches a node needs at most (for arena sizing)
size_t vk_op_max_dispatches(const ggml_tensor * node);

// backend (vk-backend.cpp)
ggml_backend_t vk_backend_new(vk_device * dev);
