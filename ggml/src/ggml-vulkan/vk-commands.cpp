// vk-commands.cpp — a backend's command stream: one command buffer per graph, dispatches
// recorded in node order, a memory barrier only where a dispatch touches memory an earlier,
// not yet barriered dispatch wrote (or writes memory one read), one submission per graph.
//
// Parameter blocks live in a host-visible arena (VK_PARAM_SLOT bytes per dispatch) written while
// recording; the arena grows between graphs, never while a submission may still read it.

#include "vk-internal.h"

#include <cstring>

namespace {

bool overlaps(const std::vector<vk_stream::range> & v, const vk_stream::range & r) {
    for (const auto & x : v) {
        if (x.lo < r.hi && r.lo < x.hi) return true;
    }
    return false;
}

// bytes a tensor (any view, any strides) can touch, from its first element
vk_stream::range tensor_range(const ggml_tensor * t) {
    const uint64_t a = vk_tensor_address(t);
    size_t         n = ggml_type_size(t->type);
    for (int d = 0; d < GGML_MAX_DIMS; d++) {
        if (t->ne[d] > 1) n += (size_t) (t->ne[d] - 1) * t->nb[d];
    }
    return {a, a + n};
}

} // namespace

bool vk_stream_init(vk_stream & s, vk_device * dev) {
    s.dev = dev;
    VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.flags            = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = dev->queue_family;
    VkResult r           = vkCreateCommandPool(dev->device, &pci, nullptr, &s.pool);
    if (r != VK_SUCCESS) {
        vk_check_failed(r, "vkCreateCommandPool");
        return false;
    }
    VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool        = s.pool;
    cai.level              = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    if ((r = vkAllocateCommandBuffers(dev->device, &cai, &s.cmd)) != VK_SUCCESS) {
        vk_check_failed(r, "vkAllocateCommandBuffers");
        return false;
    }
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((r = vkCreateFence(dev->device, &fci, nullptr, &s.fence)) != VK_SUCCESS) {
        vk_check_failed(r, "vkCreateFence");
        return false;
    }
    return true;
}

void vk_stream_destroy(vk_stream & s) {
    if (!s.dev || vk_shut_down()) return;
    VkDevice d = s.dev->device;
    if (s.fence) vkDestroyFence(d, s.fence, nullptr);
    if (s.pool) vkDestroyCommandPool(d, s.pool, nullptr); // frees s.cmd
    if (s.arena.block) {
        std::lock_guard<std::mutex> lock(s.dev->mem_mtx);
        vk_pool_free(s.dev->host_pool, s.arena);
    }
    s = vk_stream{};
}

bool vk_stream_begin(vk_stream & s, size_t max_dispatches) {
    const size_t need = std::max<size_t>(max_dispatches, 1) * VK_PARAM_SLOT;
    if (s.arena.size < need) {
        std::lock_guard<std::mutex> lock(s.dev->mem_mtx);
        if (s.arena.block) vk_pool_free(s.dev->host_pool, s.arena);
        s.arena = vk_allocation{};
        if (!vk_pool_alloc(s.dev->host_pool, std::max(need, (size_t) 64 << 10), s.arena)) return false;
    }
    s.arena_used   = 0;
    s.n_dispatches = 0;
    s.n_barriers   = 0;
    s.pending_reads.clear();
    s.pending_writes.clear();
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vkResetCommandBuffer(s.cmd, 0);
    const VkResult r = vkBeginCommandBuffer(s.cmd, &bi);
    if (r != VK_SUCCESS) {
        vk_check_failed(r, "vkBeginCommandBuffer");
        return false;
    }
    s.recording = true;
    return true;
}

void vk_stream_access(vk_stream & s, const std::vector<const ggml_tensor *> & reads, const ggml_tensor * write) {
    std::vector<vk_stream::range> rr;
    rr.reserve(reads.size());
    bool conflict = false;
    for (const ggml_tensor * t : reads) {
        if (!t) continue;
        rr.push_back(tensor_range(t));
        conflict = conflict || overlaps(s.pending_writes, rr.back()); // read after write
    }
    const vk_stream::range w = tensor_range(write);
    // write after write, write after read (in-place reuse of a buffer a pending dispatch reads)
    conflict = conflict || overlaps(s.pending_writes, w) || overlaps(s.pending_reads, w);
    if (conflict) {
        VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT;
        mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
        vkCmdPipelineBarrier(s.cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1,
                             &mb, 0, nullptr, 0, nullptr);
        s.pending_reads.clear();
        s.pending_writes.clear();
        s.n_barriers++;
    }
    s.pending_reads.insert(s.pending_reads.end(), rr.begin(), rr.end());
    s.pending_writes.push_back(w);
}

bool vk_stream_dispatch(vk_stream & s, VkPipeline pipe, const vk_params & p, uint32_t gx, uint32_t gy, uint32_t gz) {
    if (!pipe) return false;
    if (s.arena_used + VK_PARAM_SLOT > s.arena.size) {
        GGML_LOG_ERROR("ggml-vulkan: parameter arena exhausted (%zu dispatches)\n", s.n_dispatches);
        return false;
    }
    memcpy(s.arena.mapped + s.arena_used, &p, sizeof(p));
    const uint64_t addr = s.arena.address + s.arena_used;
    s.arena_used += VK_PARAM_SLOT;
    if (gx == 0 || gy == 0 || gz == 0) return true; // nothing to run
    const uint32_t lim[3] = {s.dev->props.limits.maxComputeWorkGroupCount[0],
                             s.dev->props.limits.maxComputeWorkGroupCount[1],
                             s.dev->props.limits.maxComputeWorkGroupCount[2]};
    if (gx > lim[0] || gy > lim[1] || gz > lim[2]) {
        GGML_LOG_ERROR("ggml-vulkan: dispatch %u x %u x %u exceeds the device limits\n", gx, gy, gz);
        return false;
    }
    vkCmdBindPipeline(s.cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    vkCmdPushConstants(s.cmd, s.dev->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(addr), &addr);
    vkCmdDispatch(s.cmd, gx, gy, gz);
    s.n_dispatches++;
    return true;
}

VkResult vk_stream_submit_wait(vk_stream & s) {
    if (!s.recording) return VK_SUCCESS;
    s.recording = false;
    VkResult r  = vkEndCommandBuffer(s.cmd);
    if (r != VK_SUCCESS) return r;
    if (s.n_dispatches == 0) return VK_SUCCESS;
    return vk_submit_wait(s.dev, s.cmd, s.fence);
}
