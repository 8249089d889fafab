#pragma once

// vk_service.h — the sd Vulkan kernels' access to ggml_ext_vulkan_v1 (ggml-ext-vulkan.h): the
// service table and device capabilities of a device, tensor / workspace bindings with their
// resolved ranges, alias checks, and one-call dispatch of an embedded shader. Only public ggml
// headers are used.

#include "ggml-backend.h"
#include "ggml-ext-vulkan.h"
#include "ggml.h"

#include <cstdint>

namespace sd_vk {

// The service of dev's registry (NULL when dev is not a Vulkan device or the library lacks it).
const ggml_ext_vulkan_v1 * service(ggml_backend_dev_t dev);
// Capabilities of dev, queried once per device (NULL when unavailable).
const ggml_ext_vulkan_device_info * device_info(ggml_backend_dev_t dev);

// The most bytes one binding may cover on dev: the device's storage-buffer range less the
// descriptor's alignment slack (0 when unknown). The environment's SD_VK_MAX_BINDING_BYTES lowers
// it (read at every call: the tests force many row windows at small sizes with it).
uint64_t max_binding_bytes(ggml_backend_dev_t dev);

// Whether a binding of `bytes` fits (max_binding_bytes). Tensors that are not row-wise (weights,
// per-channel vectors, tables) must; row-wise ones are bound in windows of rows (window_rows).
bool fits_binding(ggml_backend_dev_t dev, uint64_t bytes);

// The most rows of `row_bytes` each that one binding window holds on dev, rounded down to a
// multiple of `multiple` (0: not even `multiple` rows fit). Kernels over row-wise tensors larger
// than a window dispatch once per window of rows.
int64_t window_rows(ggml_backend_dev_t dev, uint64_t row_bytes, int64_t multiple);

// A resolved binding: what dispatch takes, and where the shader finds its first byte.
struct bound {
    ggml_ext_vulkan_binding  b{};
    ggml_ext_vulkan_resolved r{};
    uint32_t words() const { return (uint32_t) (r.shader_offset / 4); } // shader offset in 32-bit words
};

// Resolves bytes [offset, offset + size) of tensor t (size 0: to its end) / of the workspace
// (base = the execute callback's workspace pointer). Fails (message on stderr) when the service
// rejects the range or its shader offset is not a multiple of 4 bytes.
ggml_status bind_tensor(ggml_backend_t backend, const ggml_tensor * t, uint64_t offset, uint64_t size, uint32_t access,
                        bound & out);
ggml_status bind_base(ggml_backend_t backend, const void * base, uint64_t offset, uint64_t size, uint32_t access,
                      bound & out);

// A place in device memory that a kernel binds windows of: a tensor's bytes from `offset`, or
// the workspace's (base = the execute callback's workspace pointer).
struct region {
    const ggml_tensor * tensor = nullptr;
    const void *        base   = nullptr;
    uint64_t            offset = 0;
};
inline region region_of(const ggml_tensor * t) { return region{t, nullptr, 0}; }
inline region region_at(const void * base, uint64_t offset) { return region{nullptr, base, offset}; }
// Binds bytes [offset, offset + size) of region `at` (size > 0).
ggml_status bind_region(ggml_backend_t backend, const region & at, uint64_t offset, uint64_t size, uint32_t access,
                        bound & out);

bool overlap(const bound & a, const bound & b);
bool same_range(const bound & a, const bound & b);

// Dispatches the embedded shader `shader` (shaders/<name>.comp) with the given bindings,
// specialization constants and push constants over groups[0..2] workgroups.
ggml_status dispatch(ggml_backend_t backend, const char * shader, const bound * const * bindings, uint32_t n_bindings,
                     const uint32_t * spec, uint32_t n_spec, const void * push, uint32_t push_size,
                     const uint32_t groups[3]);

// Device copy dst <- src (equal sizes, multiples of 4 bytes, no overlap).
ggml_status copy(ggml_backend_t backend, const bound & dst, const bound & src);

// Whether the sd Vulkan fusion rules may match: sd_ggml_fusion_enabled() and the environment
// does not set GGML_VK_DISABLE_FUSION (to anything but "0" or ""); read at every match.
bool fusion_enabled();

// Splits n workgroups into an (x, y) grid within the device's per-dimension limit.
void grid_1d(ggml_backend_t backend, uint64_t n, uint32_t groups[3]);

// Loop budget. lavapipe (Mesa's gallivm) ends every loop of a shader invocation, silently, once
// the invocation's loops have run 65,535 iterations in total (one loop limiter per invocation,
// shared by all its loops: the remaining work is skipped and its outputs are never written).
// Kernels whose per-invocation loop count grows with the shape estimate it from the shape,
// rounding up, and decline work above this budget, half the cap (the estimates do not count
// every loop a compiler may add). Declined nodes run on another backend (the CPU).
constexpr uint64_t kLoopBudget = 32768;

// The fewest lanes a subgroup of dev may have in a compute shader (subgroup_min_size with
// VK_EXT_subgroup_size_control, else the subgroup size; 1 when unknown). Per-lane loop counts of
// row-per-subgroup kernels are estimated with it.
uint32_t min_subgroup_size(ggml_backend_dev_t dev);

// Geometry for one subgroup per item (row-per-subgroup kernels with a grid-stride loop over
// items): a workgroup of a few subgroups and enough workgroups for at least one subgroup per item
// whatever subgroup size the driver picks (so no subgroup takes more than one item).
void subgroup_grid(ggml_backend_t backend, uint64_t items, uint32_t & wg, uint32_t groups[3]);

} // namespace sd_vk
