// vk-commands.cpp — a backend's command stream: one command buffer, dispatches and copies
// recorded in order, a memory barrier only where a command touches memory an earlier, not yet
// barriered command wrote (or writes memory one read). Outside a batch each graph_compute (and
// each extension step) is one submission; in a scheduled plan's batch the native fragments and
// extension work share one recording, submitted when the plan returns (vk-backend.cpp), or
// earlier when the arena / descriptor pool is full or the submission threshold is reached.
//
// Parameter blocks live in a host-visible arena (VK_PARAM_SLOT bytes per dispatch) written while
// recording; the arena grows only while no recording is pending. Extension descriptor sets come
// from a per-stream pool that is reset after each submission completed.

#include "vk-internal.h"

#include "ggml-ext-vulkan.h"

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
    vk_stream_submit_wait(s); // nothing pending or running may outlive the stream
    if (s.desc_pool) vkDestroyDescriptorPool(d, s.desc_pool, nullptr);
    if (s.spare_desc_pool) vkDestroyDescriptorPool(d, s.spare_desc_pool, nullptr);
    if (s.fence) vkDestroyFence(d, s.fence, nullptr);
    if (s.spare_fence) vkDestroyFence(d, s.spare_fence, nullptr);
    if (s.pool) vkDestroyCommandPool(d, s.pool, nullptr); // frees s.cmd and s.spare_cmd
    std::lock_guard<std::mutex> lock(s.dev->mem_mtx);
    if (s.arena.block) vk_pool_free(s.dev->host_pool, s.arena);
    if (s.spare_arena.block) vk_pool_free(s.dev->host_pool, s.spare_arena);
    s = vk_stream{};
}

namespace {

bool begin_recording(vk_stream & s) {
    s.arena_used = 0;
    s.n_recorded = 0;
    s.n_flops    = 0;
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

} // namespace

bool vk_stream_open(vk_stream & s, size_t n_slots) {
    const size_t need = n_slots * VK_PARAM_SLOT;
    if (s.recording && s.arena_used + need <= s.arena.size) return true;
    if (s.recording && vk_stream_submit_wait(s) != VK_SUCCESS) return false; // full: submit what is pending
    if (s.arena.size < need) {
        std::lock_guard<std::mutex> lock(s.dev->mem_mtx);
        if (s.arena.block) vk_pool_free(s.dev->host_pool, s.arena);
        s.arena = vk_allocation{};
        if (!vk_pool_alloc(s.dev->host_pool, std::max(need, (size_t) 64 << 10), s.arena)) return false;
    }
    return begin_recording(s);
}

void vk_stream_access_ranges(vk_stream & s, const std::vector<vk_stream::range> & reads,
                             const std::vector<vk_stream::range> & writes) {
    bool conflict = false;
    for (const auto & r : reads) conflict = conflict || overlaps(s.pending_writes, r); // read after write
    // write after write, write after read (in-place reuse of a buffer a pending dispatch reads)
    for (const auto & w : writes) conflict = conflict || overlaps(s.pending_writes, w) || overlaps(s.pending_reads, w);
    if (conflict) {
        // compute and transfer on both sides: extension copies are transfers, everything else compute
        const VkPipelineStageFlags stages = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
        VkMemoryBarrier            mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
        mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                           VK_ACCESS_TRANSFER_READ_BIT;
        mb.dstAccessMask = mb.srcAccessMask;
        vkCmdPipelineBarrier(s.cmd, stages, stages, 0, 1, &mb, 0, nullptr, 0, nullptr);
        s.pending_reads.clear();
        s.pending_writes.clear();
        s.n_barriers++;
        s.total_barriers++;
    }
    s.pending_reads.insert(s.pending_reads.end(), reads.begin(), reads.end());
    s.pending_writes.insert(s.pending_writes.end(), writes.begin(), writes.end());
}

void vk_stream_access(vk_stream & s, const std::vector<const ggml_tensor *> & reads, const ggml_tensor * write) {
    std::vector<vk_stream::range> rr;
    rr.reserve(reads.size());
    for (const ggml_tensor * t : reads) {
        if (t) rr.push_back(tensor_range(t));
    }
    vk_stream_access_ranges(s, rr, {tensor_range(write)});
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
    s.total_dispatches++;
    return vk_stream_count_command(s);
}

namespace {

VkResult wait_spare(vk_stream & s) {
    if (!s.spare_in_flight) return VK_SUCCESS;
    s.spare_in_flight = false;
    VkResult r = vkWaitForFences(s.dev->device, 1, &s.spare_fence, VK_TRUE, UINT64_MAX);
    if (r == VK_SUCCESS) r = vkResetFences(s.dev->device, 1, &s.spare_fence);
    return r;
}

// Submits the open recording without waiting and continues in the spare command buffer (after
// the spare's own previous submission, if any, completed). Barrier tracking carries over: a
// barrier's first scope includes earlier submissions on the queue.
bool submit_and_continue(vk_stream & s) {
    VkDevice d = s.dev->device;
    if (!s.spare_cmd) { // first use: the spare's command buffer and fence
        VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
        cai.commandPool        = s.pool;
        cai.level              = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
        cai.commandBufferCount = 1;
        VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        if (vkAllocateCommandBuffers(d, &cai, &s.spare_cmd) != VK_SUCCESS) {
            s.spare_cmd = VK_NULL_HANDLE;
            return vk_stream_submit_wait(s) == VK_SUCCESS && begin_recording(s); // fall back to waiting
        }
        if (vkCreateFence(d, &fci, nullptr, &s.spare_fence) != VK_SUCCESS) {
            s.spare_fence = VK_NULL_HANDLE;
            return vk_stream_submit_wait(s) == VK_SUCCESS && begin_recording(s);
        }
    }
    // the spare becomes current: its previous submission must be done before it is reused
    if (wait_spare(s) != VK_SUCCESS) return false;
    if (s.spare_arena.size < s.arena.size) {
        std::lock_guard<std::mutex> lock(s.dev->mem_mtx);
        if (s.spare_arena.block) vk_pool_free(s.dev->host_pool, s.spare_arena);
        s.spare_arena = vk_allocation{};
        if (!vk_pool_alloc(s.dev->host_pool, s.arena.size, s.spare_arena)) return false;
    }
    VkResult r = vkEndCommandBuffer(s.cmd);
    if (r == VK_SUCCESS) r = vk_submit(s.dev, s.cmd, s.fence);
    if (r != VK_SUCCESS) {
        vk_check_failed(r, "threshold submit");
        s.recording = false;
        return false;
    }
    s.total_submits++;
    std::swap(s.cmd, s.spare_cmd);
    std::swap(s.fence, s.spare_fence);
    std::swap(s.arena, s.spare_arena);
    std::swap(s.desc_pool, s.spare_desc_pool);
    s.spare_in_flight = true;
    if (s.desc_pool) vkResetDescriptorPool(d, s.desc_pool, 0); // its sets' submission completed
    // begin_recording forgets the hazards; keep them (earlier submissions may still run)
    std::vector<vk_stream::range> reads = std::move(s.pending_reads), writes = std::move(s.pending_writes);
    if (!begin_recording(s)) return false;
    s.pending_reads  = std::move(reads);
    s.pending_writes = std::move(writes);
    return true;
}

} // namespace

bool vk_stream_count_command(vk_stream & s) {
    s.n_recorded++;
    const bool by_count = s.submit_threshold > 0 && s.n_recorded >= s.submit_threshold;
    const bool by_flops = s.flop_threshold > 0 && s.n_flops >= s.flop_threshold;
    if (s.batching && (by_count || by_flops)) {
        // the spare arena is as large as this one, which was sized for the whole fragment
        return submit_and_continue(s);
    }
    return true;
}

VkResult vk_stream_submit_wait(vk_stream & s) {
    const VkResult rs = wait_spare(s); // an earlier threshold submission
    if (!s.recording) return rs;
    s.recording = false;
    s.pending_reads.clear();
    s.pending_writes.clear();
    VkResult r  = vkEndCommandBuffer(s.cmd);
    if (r == VK_SUCCESS && s.n_recorded > 0) {
        r = vk_submit_wait(s.dev, s.cmd, s.fence);
        s.total_submits++;
    }
    s.n_recorded = 0;
    s.n_flops    = 0;
    s.arena_used = 0;
    // the submission is complete (or failed): its descriptor sets are free again
    if (s.desc_pool) vkResetDescriptorPool(s.dev->device, s.desc_pool, 0);
    return r != VK_SUCCESS ? r : rs;
}

VkDescriptorSet vk_stream_descriptor_set(vk_stream & s, VkDescriptorSetLayout layout) {
    constexpr uint32_t MAX_SETS = 256;
    if (!s.desc_pool) {
        VkDescriptorPoolSize       ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, MAX_SETS * GGML_EXT_VULKAN_MAX_BINDINGS};
        VkDescriptorPoolCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
        ci.maxSets       = MAX_SETS;
        ci.poolSizeCount = 1;
        ci.pPoolSizes    = &ps;
        const VkResult r = vkCreateDescriptorPool(s.dev->device, &ci, nullptr, &s.desc_pool);
        if (r != VK_SUCCESS) {
            vk_check_failed(r, "vkCreateDescriptorPool");
            s.desc_pool = VK_NULL_HANDLE;
            return VK_NULL_HANDLE;
        }
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
        ai.descriptorPool     = s.desc_pool;
        ai.descriptorSetCount = 1;
        ai.pSetLayouts        = &layout;
        VkDescriptorSet set   = VK_NULL_HANDLE;
        const VkResult  r     = vkAllocateDescriptorSets(s.dev->device, &ai, &set);
        if (r == VK_SUCCESS) return set;
        if (attempt == 0 && (r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL)) {
            // the pool is full of sets pending work uses: submit it (resets the pool), reopen
            if (vk_stream_submit_wait(s) != VK_SUCCESS || !vk_stream_open(s, 0)) return VK_NULL_HANDLE;
            continue;
        }
        vk_check_failed(r, "vkAllocateDescriptorSets");
        return VK_NULL_HANDLE;
    }
    return VK_NULL_HANDLE;
}
