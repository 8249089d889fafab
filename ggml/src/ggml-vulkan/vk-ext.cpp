// vk-ext.cpp — ggml_ext_vulkan_v1 (ggml-ext-vulkan.h): device capabilities, storage identity,
// binding resolution, and application dispatches and copies recorded into the backend's own
// command stream (vk-commands.cpp).
//
// Every request is validated completely (backend, device, ranges, alignment, limits) and its
// pipeline obtained before anything is recorded, so a rejected call leaves the stream exactly as
// it was. Storage identity is the vk_block (one VkBuffer over one VkDeviceMemory); ranges are
// byte offsets inside it, which is also what a descriptor binds.

#include "vk-internal.h"

#include "ggml-ext-vulkan.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace {

thread_local char g_last_error[512] = "";

enum ggml_status fail(const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_last_error, sizeof(g_last_error), fmt, ap);
    va_end(ap);
    return GGML_STATUS_FAILED;
}

const char * last_error() { return g_last_error; }

// --- capabilities --------------------------------------------------------------------------------

bool device_info(ggml_backend_dev_t gdev, ggml_ext_vulkan_device_info * info) {
    if (!gdev || !info || info->size < sizeof(uint32_t)) return false;
    if (gdev->reg != ggml_backend_vk_reg()) return false;
    vk_device * dev = static_cast<vk_device *>(gdev->context);
    if (!vk_device_ready(dev)) return false;

    ggml_ext_vulkan_device_info r;
    memset(&r, 0, sizeof(r));
    r.size = info->size;
    const VkPhysicalDeviceLimits & L = dev->props.limits;
    snprintf(r.name, sizeof(r.name), "%s", dev->props.deviceName);
    r.vendor_id   = dev->props.vendorID;
    r.device_id   = dev->props.deviceID;
    r.api_version = dev->props.apiVersion;
    r.is_cpu      = dev->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    r.max_compute_shared_memory_size = L.maxComputeSharedMemorySize;
    r.max_workgroup_invocations      = L.maxComputeWorkGroupInvocations;
    for (int i = 0; i < 3; i++) {
        r.max_workgroup_size[i]  = L.maxComputeWorkGroupSize[i];
        r.max_workgroup_count[i] = L.maxComputeWorkGroupCount[i];
    }
    r.max_storage_buffer_range            = L.maxStorageBufferRange;
    r.min_storage_buffer_offset_alignment = L.minStorageBufferOffsetAlignment;
    r.max_push_constants_size             = L.maxPushConstantsSize;
    r.max_bindings = std::min<uint32_t>(GGML_EXT_VULKAN_MAX_BINDINGS, L.maxPerStageDescriptorStorageBuffers);

    VkPhysicalDeviceSubgroupProperties            sg{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceSubgroupSizeControlPropertiesEXT sc{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT};
    VkPhysicalDeviceShaderIntegerDotProductPropertiesKHR dp{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_PROPERTIES_KHR};
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext        = &sg;
    void ** tail    = &sg.pNext;
    if (dev->feat_subgroup_size_control) {
        *tail = &sc;
        tail  = &sc.pNext;
    }
    if (dev->feat_int_dot) *tail = &dp;
    vkGetPhysicalDeviceProperties2(dev->phys, &p2);
    const bool compute = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
    const auto op      = [&](VkSubgroupFeatureFlagBits b) { return compute && (sg.supportedOperations & b) != 0; };
    r.subgroup_size             = sg.subgroupSize;
    r.subgroup_min_size         = dev->feat_subgroup_size_control ? sc.minSubgroupSize : sg.subgroupSize;
    r.subgroup_max_size         = dev->feat_subgroup_size_control ? sc.maxSubgroupSize : sg.subgroupSize;
    r.subgroup_basic            = op(VK_SUBGROUP_FEATURE_BASIC_BIT);
    r.subgroup_vote             = op(VK_SUBGROUP_FEATURE_VOTE_BIT);
    r.subgroup_arithmetic       = op(VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    r.subgroup_ballot           = op(VK_SUBGROUP_FEATURE_BALLOT_BIT);
    r.subgroup_shuffle          = op(VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
    r.subgroup_shuffle_relative = op(VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT);
    r.subgroup_clustered        = op(VK_SUBGROUP_FEATURE_CLUSTERED_BIT);

    r.storage_buffer_8bit  = dev->feat_storage8;
    r.storage_buffer_16bit = true; // required by the backend (ggml-vulkan.h)
    r.shader_int8          = dev->feat_int8;
    r.shader_int16         = dev->feat_int16;
    r.shader_float16       = dev->feat_float16;
    r.shader_int64         = true; // required by the backend

    r.integer_dot_product = dev->feat_int_dot;
    if (dev->feat_int_dot) {
        r.integer_dot_product_4x8_packed_signed_accelerated   = dp.integerDotProduct4x8BitPackedSignedAccelerated;
        r.integer_dot_product_4x8_packed_unsigned_accelerated = dp.integerDotProduct4x8BitPackedUnsignedAccelerated;
        r.integer_dot_product_4x8_packed_mixed_accelerated    = dp.integerDotProduct4x8BitPackedMixedSignednessAccelerated;
    }
    // Cooperative matrices: those of VK_NV_cooperative_matrix when the device offers it (enabled
    // then); VK_KHR_cooperative_matrix is newer than Debian 12's Vulkan headers and not used.
    // NV's component-type and scope values equal the KHR ones the header documents.
    r.n_coopmat = (uint32_t) std::min<size_t>(dev->coopmat_nv.size(), GGML_EXT_VULKAN_MAX_COOPMAT);
    for (uint32_t i = 0; i < r.n_coopmat; i++) {
        const VkCooperativeMatrixPropertiesNV & c = dev->coopmat_nv[i];
        r.coopmat[i] = {c.MSize, c.NSize, c.KSize, (uint32_t) c.AType, (uint32_t) c.BType, (uint32_t) c.CType,
                        (uint32_t) c.DType, false, (uint32_t) c.scope};
    }

    memcpy(info, &r, std::min<size_t>(info->size, sizeof(r)));
    return true;
}

bool buffer_info(ggml_backend_buffer_t buffer, ggml_ext_vulkan_storage * info) {
    vk_buffer_span span;
    if (!info || !buffer || !vk_buffer_get_span(buffer, &span)) return false;
    info->storage_id = (uint64_t) (uintptr_t) span.block;
    info->offset     = span.block_offset;
    info->size       = span.size;
    return true;
}

// --- bindings ------------------------------------------------------------------------------------

struct resolved_range {
    vk_block * block   = nullptr;
    uint64_t   offset  = 0; // in the block
    uint64_t   size    = 0;
    uint64_t   address = 0; // device address of the first byte (for barrier tracking)
};

enum ggml_status resolve_range(vk_device * dev, const ggml_ext_vulkan_binding * b, const char * what,
                               resolved_range * out) {
    if (!b) return fail("%s: NULL binding", what);
    const int n_set = (b->tensor != nullptr) + (b->buffer != nullptr) + (b->base != nullptr);
    if (n_set != 1) return fail("%s: exactly one of tensor, buffer, base must be set (%d are)", what, n_set);

    ggml_backend_buffer_t buffer = nullptr;
    uint64_t              start  = 0; // of the addressable span, from the buffer's first byte
    uint64_t              limit  = 0; // bytes of the addressable span
    if (b->tensor) {
        const ggml_tensor * t = b->tensor;
        buffer                = t->view_src ? t->view_src->buffer : t->buffer;
        if (!buffer || !t->data) return fail("%s: tensor '%s' is not allocated", what, t->name);
        if (!vk_buffer_device(buffer)) return fail("%s: tensor '%s' is not in a Vulkan buffer", what, t->name);
        start = (uint64_t) ((const uint8_t *) t->data - (const uint8_t *) ggml_backend_buffer_get_base(buffer));
        limit = ggml_nbytes(t);
    } else if (b->buffer) {
        buffer = b->buffer;
        if (!vk_buffer_device(buffer)) return fail("%s: the buffer is not a Vulkan buffer", what);
        limit = ggml_backend_buffer_get_size(buffer);
    } else {
        buffer = vk_find_buffer(dev, b->base);
        if (!buffer) return fail("%s: base %p is in no live buffer of %s", what, b->base, dev->name.c_str());
        start = (uint64_t) ((const uint8_t *) b->base - (const uint8_t *) ggml_backend_buffer_get_base(buffer));
        limit = ggml_backend_buffer_get_size(buffer) - start;
    }
    vk_buffer_span span;
    if (!vk_buffer_get_span(buffer, &span)) return fail("%s: not a Vulkan buffer", what);
    if (span.dev != dev) {
        return fail("%s: the range is on %s, the backend on %s (foreign device)", what, span.dev->name.c_str(),
                    dev->name.c_str());
    }
    if (start > span.size || limit > span.size - start) return fail("%s: the tensor lies outside its buffer", what);
    if (b->offset > limit) {
        return fail("%s: offset %llu is past the end (%llu bytes)", what, (unsigned long long) b->offset,
                    (unsigned long long) limit);
    }
    const uint64_t size = b->size ? b->size : limit - b->offset;
    if (size == 0) return fail("%s: empty range", what);
    if (size > limit - b->offset) {
        return fail("%s: range [%llu, +%llu) exceeds the %llu bytes available", what, (unsigned long long) b->offset,
                    (unsigned long long) size, (unsigned long long) limit);
    }
    out->block   = span.block;
    out->offset  = span.block_offset + start + b->offset;
    out->size    = size;
    out->address = span.address + start + b->offset;
    return GGML_STATUS_SUCCESS;
}

void describe(vk_device * dev, const resolved_range & r, ggml_ext_vulkan_resolved * out) {
    const uint64_t align        = std::max<uint64_t>(1, dev->props.limits.minStorageBufferOffsetAlignment);
    out->storage.storage_id     = (uint64_t) (uintptr_t) r.block;
    out->storage.offset         = r.offset;
    out->storage.size           = r.size;
    out->descriptor_offset      = r.offset / align * align;
    out->shader_offset          = r.offset - out->descriptor_offset;
    out->descriptor_range       = out->shader_offset + r.size;
}

vk_device * backend_device(ggml_backend_t backend) { return backend ? vk_backend_device(backend) : nullptr; }

enum ggml_status resolve(ggml_backend_t backend, const ggml_ext_vulkan_binding * binding, ggml_ext_vulkan_resolved * out) {
    vk_device * dev = backend_device(backend);
    if (!dev) return fail("resolve: not a Vulkan backend");
    if (!out) return fail("resolve: NULL output");
    resolved_range r;
    const enum ggml_status st = resolve_range(dev, binding, "resolve", &r);
    if (st != GGML_STATUS_SUCCESS) return st;
    describe(dev, r, out);
    return GGML_STATUS_SUCCESS;
}

// --- dispatch ------------------------------------------------------------------------------------

enum ggml_status dispatch(ggml_backend_t backend, const ggml_ext_vulkan_dispatch * d) {
    vk_device * dev = backend_device(backend);
    vk_stream * s   = backend ? vk_backend_stream(backend) : nullptr;
    if (!dev || !s) return fail("dispatch: not a Vulkan backend");
    if (!d) return fail("dispatch: NULL description");
    const char *                   nm = d->name ? d->name : "(unnamed)";
    const VkPhysicalDeviceLimits & L  = dev->props.limits;

    if (!d->spirv || d->spirv_size == 0 || d->spirv_size % 4 != 0) {
        return fail("dispatch %s: SPIR-V must be a non-empty multiple of 4 bytes (%zu)", nm, d->spirv_size);
    }
    if (d->spirv[0] != 0x07230203u) return fail("dispatch %s: not SPIR-V (magic 0x%08x)", nm, d->spirv[0]);
    const uint32_t max_bindings = std::min<uint32_t>(GGML_EXT_VULKAN_MAX_BINDINGS, L.maxPerStageDescriptorStorageBuffers);
    if (d->n_bindings > max_bindings) return fail("dispatch %s: %u bindings, at most %u", nm, d->n_bindings, max_bindings);
    if (d->n_bindings > 0 && !d->bindings) return fail("dispatch %s: NULL bindings", nm);
    if (d->n_spec_constants > GGML_EXT_VULKAN_MAX_SPEC_CONSTANTS) {
        return fail("dispatch %s: %u specialization constants, at most %d", nm, d->n_spec_constants,
                    GGML_EXT_VULKAN_MAX_SPEC_CONSTANTS);
    }
    if (d->n_spec_constants > 0 && !d->spec_constants) return fail("dispatch %s: NULL specialization constants", nm);
    if (d->push_constants_size % 4 != 0 || d->push_constants_size > L.maxPushConstantsSize) {
        return fail("dispatch %s: %u push-constant bytes (a multiple of 4, at most %u)", nm, d->push_constants_size,
                    L.maxPushConstantsSize);
    }
    if (d->push_constants_size > 0 && !d->push_constants) return fail("dispatch %s: NULL push constants", nm);
    for (int i = 0; i < 3; i++) {
        if (d->workgroups[i] > L.maxComputeWorkGroupCount[i]) {
            return fail("dispatch %s: %u workgroups in dimension %d, the device allows %u", nm, d->workgroups[i], i,
                        L.maxComputeWorkGroupCount[i]);
        }
    }

    std::vector<resolved_range>       ranges(d->n_bindings);
    std::vector<VkDescriptorBufferInfo> infos(d->n_bindings);
    std::vector<vk_stream::range>     reads, writes;
    for (uint32_t i = 0; i < d->n_bindings; i++) {
        char what[96];
        snprintf(what, sizeof(what), "dispatch %s binding %u", nm, i);
        const enum ggml_status st = resolve_range(dev, &d->bindings[i], what, &ranges[i]);
        if (st != GGML_STATUS_SUCCESS) return st;
        ggml_ext_vulkan_resolved res;
        describe(dev, ranges[i], &res);
        if (res.descriptor_range > L.maxStorageBufferRange) {
            return fail("%s: a %llu-byte window exceeds maxStorageBufferRange (%u): split the dispatch", what,
                        (unsigned long long) res.descriptor_range, L.maxStorageBufferRange);
        }
        const uint32_t access = d->bindings[i].access ? d->bindings[i].access : (uint32_t) GGML_EXT_VULKAN_READ_WRITE;
        if (access & ~(uint32_t) GGML_EXT_VULKAN_READ_WRITE) return fail("%s: unknown access bits 0x%x", what, access);
        infos[i].buffer = ranges[i].block->buffer;
        infos[i].offset = res.descriptor_offset;
        infos[i].range  = res.descriptor_range;
        const vk_stream::range rr = {ranges[i].address, ranges[i].address + ranges[i].size};
        if (access & GGML_EXT_VULKAN_READ) reads.push_back(rr);
        if (access & GGML_EXT_VULKAN_WRITE) writes.push_back(rr);
    }
    if (d->workgroups[0] == 0 || d->workgroups[1] == 0 || d->workgroups[2] == 0) return GGML_STATUS_SUCCESS;

    // pipeline first (created on this first execution, never in prepare): a failure records nothing
    vk_ext_pipeline p;
    std::string     err;
    if (!vk_ext_get_pipeline(dev, d->spirv, d->spirv_size, d->n_bindings, d->spec_constants, d->n_spec_constants,
                             d->push_constants_size, &p, err)) {
        return fail("dispatch %s: %s", nm, err.c_str());
    }
    if (!vk_stream_open(*s, 0)) return fail("dispatch %s: cannot open the command stream", nm);
    const VkDescriptorSet set = vk_stream_descriptor_set(*s, p.set_layout);
    if (!set) return fail("dispatch %s: cannot allocate a descriptor set", nm);
    std::vector<VkWriteDescriptorSet> w(d->n_bindings);
    for (uint32_t i = 0; i < d->n_bindings; i++) {
        w[i]                 = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        w[i].dstSet          = set;
        w[i].dstBinding      = i;
        w[i].descriptorCount = 1;
        w[i].descriptorType  = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        w[i].pBufferInfo     = &infos[i];
    }
    if (!w.empty()) vkUpdateDescriptorSets(dev->device, (uint32_t) w.size(), w.data(), 0, nullptr);

    vk_stream_access_ranges(*s, reads, writes);
    vkCmdBindPipeline(s->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    vkCmdBindDescriptorSets(s->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0, nullptr);
    if (d->push_constants_size > 0) {
        vkCmdPushConstants(s->cmd, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, d->push_constants_size, d->push_constants);
    }
    vkCmdDispatch(s->cmd, d->workgroups[0], d->workgroups[1], d->workgroups[2]);
    s->n_dispatches++;
    s->total_dispatches++;
    s->total_ext_dispatches++;
    if (!vk_stream_count_command(*s)) return fail("dispatch %s: submission failed", nm);
    return GGML_STATUS_SUCCESS;
}

// --- copy ----------------------------------------------------------------------------------------

enum ggml_status copy(ggml_backend_t backend, const ggml_ext_vulkan_binding * dst, const ggml_ext_vulkan_binding * src) {
    vk_device * dev = backend_device(backend);
    vk_stream * s   = backend ? vk_backend_stream(backend) : nullptr;
    if (!dev || !s) return fail("copy: not a Vulkan backend");
    resolved_range d, r;
    enum ggml_status st = resolve_range(dev, dst, "copy dst", &d);
    if (st != GGML_STATUS_SUCCESS) return st;
    if ((st = resolve_range(dev, src, "copy src", &r)) != GGML_STATUS_SUCCESS) return st;
    if (d.size != r.size) {
        return fail("copy: sizes differ (dst %llu, src %llu bytes)", (unsigned long long) d.size,
                    (unsigned long long) r.size);
    }
    if (d.offset % 4 || r.offset % 4 || d.size % 4) {
        return fail("copy: offsets and size must be multiples of 4 bytes (dst offset %llu, src offset %llu, size %llu)",
                    (unsigned long long) d.offset, (unsigned long long) r.offset, (unsigned long long) d.size);
    }
    if (d.block == r.block && d.offset < r.offset + r.size && r.offset < d.offset + d.size) {
        return fail("copy: the ranges overlap");
    }
    if (!vk_stream_open(*s, 0)) return fail("copy: cannot open the command stream");
    vk_stream_access_ranges(*s, {{r.address, r.address + r.size}}, {{d.address, d.address + d.size}});
    VkBufferCopy region{};
    region.srcOffset = r.offset;
    region.dstOffset = d.offset;
    region.size      = d.size;
    vkCmdCopyBuffer(s->cmd, r.block->buffer, d.block->buffer, 1, &region);
    s->total_ext_copies++;
    if (!vk_stream_count_command(*s)) return fail("copy: submission failed");
    return GGML_STATUS_SUCCESS;
}

bool get_stats(ggml_backend_t backend, ggml_ext_vulkan_stats * stats) {
    vk_device * dev = backend_device(backend);
    vk_stream * s   = backend ? vk_backend_stream(backend) : nullptr;
    if (!dev || !s || !stats || stats->size < sizeof(uint32_t)) return false;
    ggml_ext_vulkan_stats r;
    memset(&r, 0, sizeof(r));
    r.size           = stats->size;
    r.submissions    = s->total_submits;
    r.dispatches     = s->total_dispatches;
    r.ext_dispatches = s->total_ext_dispatches;
    r.ext_copies     = s->total_ext_copies;
    r.barriers       = s->total_barriers;
    {
        std::lock_guard<std::mutex> lock(dev->pipe_mtx);
        r.pipelines_created = dev->ext_pipelines_created;
        r.pipeline_hits     = dev->ext_pipeline_hits;
    }
    memcpy(stats, &r, std::min<size_t>(stats->size, sizeof(r)));
    return true;
}

const ggml_ext_vulkan_v1 g_table = {
    /* .size        = */ sizeof(ggml_ext_vulkan_v1),
    /* .version     = */ 1,
    /* .device_info = */ device_info,
    /* .buffer_info = */ buffer_info,
    /* .resolve     = */ resolve,
    /* .dispatch    = */ dispatch,
    /* .copy        = */ copy,
    /* .last_error  = */ last_error,
    /* .get_stats   = */ get_stats,
};

} // namespace

const void * vk_ext_service_table() { return &g_table; }
