// vk_service.cpp — see vk_service.h.

#include "vk_service.h"

#include "shaders.h"
#include "vulkan_kernels.h"

#include "../ggml_extensions.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

namespace sd_vk {

const ggml_ext_vulkan_v1 * service(ggml_backend_dev_t dev) { return sd_vulkan_services(dev); }

const ggml_ext_vulkan_device_info * device_info(ggml_backend_dev_t dev) {
    static std::mutex mu;
    // one entry per device for the process (NULL: no capabilities); freed at exit
    static std::map<ggml_backend_dev_t, std::unique_ptr<ggml_ext_vulkan_device_info>> cache;
    std::lock_guard<std::mutex> lock(mu);
    auto                        it = cache.find(dev);
    if (it != cache.end()) return it->second.get();
    const ggml_ext_vulkan_v1 *                   vk = service(dev);
    std::unique_ptr<ggml_ext_vulkan_device_info> info;
    if (vk) {
        info.reset(new ggml_ext_vulkan_device_info{});
        info->size = sizeof(*info);
        if (!vk->device_info(dev, info.get())) info.reset();
    }
    return (cache[dev] = std::move(info)).get();
}

uint64_t max_binding_bytes(ggml_backend_dev_t dev) {
    const ggml_ext_vulkan_device_info * info = device_info(dev);
    // a window starts up to alignment - 1 bytes before its first byte (the shader offset)
    uint64_t max = info && info->max_storage_buffer_range > info->min_storage_buffer_offset_alignment
                       ? info->max_storage_buffer_range - info->min_storage_buffer_offset_alignment
                       : 0;
    const char * env = getenv("SD_VK_MAX_BINDING_BYTES");
    if (env && env[0]) {
        const uint64_t v = strtoull(env, nullptr, 10);
        if (v > 0 && v < max) max = v;
    }
    return max;
}

bool fits_binding(ggml_backend_dev_t dev, uint64_t bytes) { return bytes <= max_binding_bytes(dev); }

int64_t window_rows(ggml_backend_dev_t dev, uint64_t row_bytes, int64_t multiple) {
    if (row_bytes == 0 || multiple <= 0) return 0;
    const uint64_t rows = max_binding_bytes(dev) / row_bytes;
    const uint64_t m    = (uint64_t) multiple;
    const uint64_t cap  = (uint64_t) INT64_MAX / 2;
    return (int64_t) ((rows < cap ? rows : cap) / m * m);
}

namespace {

const ggml_ext_vulkan_v1 * service_of(ggml_backend_t backend) { return service(ggml_backend_get_device(backend)); }

ggml_status finish_bind(ggml_backend_t backend, bound & out, const char * what) {
    const ggml_ext_vulkan_v1 * vk = service_of(backend);
    if (!vk) return GGML_STATUS_FAILED;
    if (vk->resolve(backend, &out.b, &out.r) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "sd vulkan: cannot bind %s: %s\n", what, vk->last_error());
        return GGML_STATUS_FAILED;
    }
    if (out.r.shader_offset % 4 != 0) {
        fprintf(stderr, "sd vulkan: %s is not 4-byte aligned (shader offset %llu)\n", what,
                (unsigned long long) out.r.shader_offset);
        return GGML_STATUS_FAILED;
    }
    return GGML_STATUS_SUCCESS;
}

} // namespace

ggml_status bind_tensor(ggml_backend_t backend, const ggml_tensor * t, uint64_t offset, uint64_t size, uint32_t access,
                        bound & out) {
    out          = bound{};
    out.b.tensor = t;
    out.b.offset = offset;
    out.b.size   = size;
    out.b.access = access;
    return finish_bind(backend, out, t->name[0] ? t->name : "a tensor");
}

ggml_status bind_base(ggml_backend_t backend, const void * base, uint64_t offset, uint64_t size, uint32_t access,
                      bound & out) {
    out          = bound{};
    out.b.base   = base;
    out.b.offset = offset;
    out.b.size   = size;
    out.b.access = access;
    return finish_bind(backend, out, "the workspace");
}

ggml_status bind_region(ggml_backend_t backend, const region & at, uint64_t offset, uint64_t size, uint32_t access,
                        bound & out) {
    if (size == 0) return GGML_STATUS_FAILED;
    if (at.tensor) return bind_tensor(backend, at.tensor, at.offset + offset, size, access, out);
    return bind_base(backend, at.base, at.offset + offset, size, access, out);
}

bool overlap(const bound & a, const bound & b) {
    const ggml_ext_vulkan_storage &x = a.r.storage, &y = b.r.storage;
    return x.storage_id == y.storage_id && x.offset < y.offset + y.size && y.offset < x.offset + x.size;
}

bool same_range(const bound & a, const bound & b) {
    const ggml_ext_vulkan_storage &x = a.r.storage, &y = b.r.storage;
    return x.storage_id == y.storage_id && x.offset == y.offset && x.size == y.size;
}

ggml_status dispatch(ggml_backend_t backend, const char * shader, const bound * const * bindings, uint32_t n_bindings,
                     const uint32_t * spec, uint32_t n_spec, const void * push, uint32_t push_size,
                     const uint32_t groups[3]) {
    const ggml_ext_vulkan_v1 * vk   = service_of(backend);
    const sd_vk_shader *       spv  = sd_vk_find_shader(shader);
    if (!vk || !spv || n_bindings > GGML_EXT_VULKAN_MAX_BINDINGS) return GGML_STATUS_FAILED;
    ggml_ext_vulkan_binding b[GGML_EXT_VULKAN_MAX_BINDINGS];
    for (uint32_t i = 0; i < n_bindings; ++i) b[i] = bindings[i]->b;
    ggml_ext_vulkan_dispatch d{};
    d.name                = shader;
    d.spirv               = spv->words;
    d.spirv_size          = spv->size;
    d.bindings            = b;
    d.n_bindings          = n_bindings;
    d.spec_constants      = spec;
    d.n_spec_constants    = n_spec;
    d.push_constants      = push;
    d.push_constants_size = push_size;
    d.workgroups[0]       = groups[0];
    d.workgroups[1]       = groups[1];
    d.workgroups[2]       = groups[2];
    const ggml_status s   = vk->dispatch(backend, &d);
    if (s != GGML_STATUS_SUCCESS) fprintf(stderr, "sd vulkan: dispatch of %s failed: %s\n", shader, vk->last_error());
    return s;
}

ggml_status copy(ggml_backend_t backend, const bound & dst, const bound & src) {
    const ggml_ext_vulkan_v1 * vk = service_of(backend);
    if (!vk) return GGML_STATUS_FAILED;
    const ggml_status s = vk->copy(backend, &dst.b, &src.b);
    if (s != GGML_STATUS_SUCCESS) fprintf(stderr, "sd vulkan: copy failed: %s\n", vk->last_error());
    return s;
}

bool fusion_enabled() {
    if (!sd_ggml_fusion_enabled()) return false;
    const char * e = getenv("GGML_VK_DISABLE_FUSION");
    return e == nullptr || e[0] == '\0' || strcmp(e, "0") == 0;
}

void grid_1d(ggml_backend_t backend, uint64_t n, uint32_t groups[3]) {
    const ggml_ext_vulkan_device_info * info = device_info(ggml_backend_get_device(backend));
    const uint64_t maxx = info && info->max_workgroup_count[0] ? info->max_workgroup_count[0] : 65535;
    groups[0]           = (uint32_t) (n < maxx ? n : maxx);
    groups[1]           = groups[0] ? (uint32_t) ((n + groups[0] - 1) / groups[0]) : 0;
    groups[2]           = 1;
}

uint32_t min_subgroup_size(ggml_backend_dev_t dev) {
    const ggml_ext_vulkan_device_info * info = device_info(dev);
    if (!info) return 1;
    const uint32_t s = info->subgroup_min_size ? info->subgroup_min_size : info->subgroup_size;
    return s ? s : 1;
}

void subgroup_grid(ggml_backend_t backend, uint64_t items, uint32_t & wg, uint32_t groups[3]) {
    const ggml_ext_vulkan_device_info * info = device_info(ggml_backend_get_device(backend));
    uint32_t sg_max = info ? (info->subgroup_max_size ? info->subgroup_max_size : info->subgroup_size) : 1;
    if (sg_max == 0) sg_max = 1;
    const uint32_t max_inv = info && info->max_workgroup_invocations ? info->max_workgroup_invocations : 128;
    // four subgroups of the largest size (powers of two: also a whole number of any smaller one)
    wg = 4 * sg_max <= max_inv ? 4 * sg_max : sg_max;
    const uint64_t per_wg = wg / sg_max; // subgroups per workgroup at the largest size: the fewest
    grid_1d(backend, (items + per_wg - 1) / per_wg, groups);
}

} // namespace sd_vk
