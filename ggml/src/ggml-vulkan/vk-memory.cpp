// vk-memory.cpp — device memory: block sub-allocation, the device and pinned-host buffer types,
// and host <-> device transfers (direct through the mapping where the memory is host-visible,
// through a staging buffer and copy commands where it is not).

#include "vk-internal.h"

#include <algorithm>
#include <cstring>

namespace {

constexpr size_t ALLOC_GRANULE = 256; // every sub-allocation starts and ends on this boundary

size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

void destroy_block(vk_device * dev, vk_block * b) {
    if (b->mapped) vkUnmapMemory(dev->device, b->memory);
    if (b->buffer) vkDestroyBuffer(dev->device, b->buffer, nullptr);
    if (b->memory) vkFreeMemory(dev->device, b->memory, nullptr);
}

std::unique_ptr<vk_block> new_block(vk_pool & pool, size_t size) {
    vk_device * dev = pool.dev;
    auto        b   = std::make_unique<vk_block>();

    VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size  = size;
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
    bci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    VkResult r      = vkCreateBuffer(dev->device, &bci, nullptr, &b->buffer);
    if (r != VK_SUCCESS) {
        vk_check_failed(r, "vkCreateBuffer");
        return nullptr;
    }
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(dev->device, b->buffer, &req);
    if (!(req.memoryTypeBits & (1u << pool.mem_type))) {
        GGML_LOG_ERROR("ggml-vulkan: memory type %u cannot back a storage buffer\n", pool.mem_type);
        destroy_block(dev, b.get());
        return nullptr;
    }
    VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
    flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.pNext           = &flags;
    ai.allocationSize  = req.size;
    ai.memoryTypeIndex = pool.mem_type;
    if ((r = vkAllocateMemory(dev->device, &ai, nullptr, &b->memory)) != VK_SUCCESS) {
        // out of device memory is an ordinary failure: the caller returns NULL
        GGML_LOG_ERROR("ggml-vulkan: vkAllocateMemory(%zu bytes) failed: VkResult %d\n", (size_t) req.size, (int) r);
        b->memory = VK_NULL_HANDLE;
        destroy_block(dev, b.get());
        return nullptr;
    }
    if ((r = vkBindBufferMemory(dev->device, b->buffer, b->memory, 0)) != VK_SUCCESS) {
        vk_check_failed(r, "vkBindBufferMemory");
        destroy_block(dev, b.get());
        return nullptr;
    }
    if (pool.map) {
        void * p = nullptr;
        if ((r = vkMapMemory(dev->device, b->memory, 0, VK_WHOLE_SIZE, 0, &p)) != VK_SUCCESS) {
            vk_check_failed(r, "vkMapMemory");
            destroy_block(dev, b.get());
            return nullptr;
        }
        b->mapped = static_cast<uint8_t *>(p);
    }
    VkBufferDeviceAddressInfo dai{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    dai.buffer  = b->buffer;
    b->address  = vkGetBufferDeviceAddress(dev->device, &dai);
    b->size     = size;
    b->free_ranges[0] = size;
    return b;
}

} // namespace

bool vk_pool_alloc(vk_pool & pool, size_t size, vk_allocation & out) {
    size = round_up(std::max<size_t>(size, 1), ALLOC_GRANULE);
    for (int pass = 0; pass < 2; pass++) {
        for (auto & bp : pool.blocks) {
            vk_block * b = bp.get();
            for (auto it = b->free_ranges.begin(); it != b->free_ranges.end(); ++it) {
                if (it->second < size) continue;
                const size_t off  = it->first;
                const size_t rest = it->second - size;
                b->free_ranges.erase(it);
                if (rest) b->free_ranges[off + size] = rest;
                out.block   = b;
                out.offset  = off;
                out.size    = size;
                out.address = b->address + off;
                out.mapped  = b->mapped ? b->mapped + off : nullptr;
                return true;
            }
        }
        if (pass == 1) break;
        // a dedicated block for requests larger than the block size
        const size_t bsize = std::max(pool.block_size, size);
        if (bsize > pool.dev->max_alloc) {
            GGML_LOG_ERROR("ggml-vulkan: %zu bytes exceed the device's maxMemoryAllocationSize (%zu)\n", size,
                           pool.dev->max_alloc);
            return false;
        }
        std::unique_ptr<vk_block> b = new_block(pool, bsize);
        if (!b) return false;
        pool.blocks.push_back(std::move(b));
    }
    return false;
}

void vk_pool_free(vk_pool & pool, const vk_allocation & a) {
    if (!a.block) return;
    vk_block * b   = a.block;
    size_t     off = a.offset, size = a.size;
    auto       next = b->free_ranges.lower_bound(off);
    if (next != b->free_ranges.end() && next->first == off + size) { // merge with the following range
        size += next->second;
        next = b->free_ranges.erase(next);
    }
    if (next != b->free_ranges.begin()) { // merge with the preceding range
        auto prev = std::prev(next);
        if (prev->first + prev->second == off) {
            off = prev->first;
            size += prev->second;
            b->free_ranges.erase(prev);
        }
    }
    b->free_ranges[off] = size;
    if (off == 0 && size == b->size) { // an empty block goes back to the driver
        for (auto it = pool.blocks.begin(); it != pool.blocks.end(); ++it) {
            if (it->get() == b) {
                destroy_block(pool.dev, b);
                pool.blocks.erase(it);
                break;
            }
        }
    }
}

void vk_pool_destroy(vk_pool & pool) {
    for (auto & b : pool.blocks) destroy_block(pool.dev, b.get());
    pool.blocks.clear();
}

namespace {

// ---------------------------------------------------------------------------------------------
// Staged transfers (memory without a host mapping)

constexpr size_t STAGING_SIZE = (size_t) 16 << 20;

enum class xfer_dir { to_device, to_host };

bool ensure_staging(vk_device * dev) {
    if (dev->staging.block) return true;
    std::lock_guard<std::mutex> lock(dev->mem_mtx);
    return vk_pool_alloc(dev->host_pool, STAGING_SIZE, dev->staging);
}

bool record_and_wait(vk_device * dev, VkBuffer src, size_t src_off, VkBuffer dst, size_t dst_off, size_t size) {
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vkResetCommandBuffer(dev->xfer_cmd, 0);
    vkBeginCommandBuffer(dev->xfer_cmd, &bi);
    VkBufferCopy c{src_off, dst_off, size};
    vkCmdCopyBuffer(dev->xfer_cmd, src, dst, 1, &c);
    vkEndCommandBuffer(dev->xfer_cmd);
    const VkResult r = vk_submit_wait(dev, dev->xfer_cmd, dev->xfer_fence);
    if (r != VK_SUCCESS) {
        vk_check_failed(r, "transfer submit");
        return false;
    }
    return true;
}

// fills a 4-byte-aligned range with a byte value on the device (no host copy of the range)
bool fill_on_device(vk_device * dev, const vk_allocation & a, size_t off, size_t size, uint8_t value) {
    std::lock_guard<std::mutex> lock(dev->xfer_mtx);
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vkResetCommandBuffer(dev->xfer_cmd, 0);
    vkBeginCommandBuffer(dev->xfer_cmd, &bi);
    const uint32_t word = 0x01010101u * value;
    vkCmdFillBuffer(dev->xfer_cmd, a.block->buffer, a.offset + off, size, word);
    vkEndCommandBuffer(dev->xfer_cmd);
    const VkResult r = vk_submit_wait(dev, dev->xfer_cmd, dev->xfer_fence);
    if (r != VK_SUCCESS) vk_check_failed(r, "fill submit");
    return r == VK_SUCCESS;
}

// host <-> a range of an allocation, through the staging buffer in STAGING_SIZE pieces
void staged_transfer(vk_device * dev, const vk_allocation & a, size_t off, void * host, size_t size, xfer_dir dir) {
    std::lock_guard<std::mutex> lock(dev->xfer_mtx);
    GGML_ASSERT(ensure_staging(dev) && "ggml-vulkan: cannot allocate the staging buffer");
    for (size_t done = 0; done < size;) {
        const size_t n = std::min(STAGING_SIZE, size - done);
        if (dir == xfer_dir::to_device) {
            memcpy(dev->staging.mapped, (const uint8_t *) host + done, n);
            GGML_ASSERT(record_and_wait(dev, dev->staging.block->buffer, dev->staging.offset, a.block->buffer,
                                        a.offset + off + done, n));
        } else {
            GGML_ASSERT(record_and_wait(dev, a.block->buffer, a.offset + off + done, dev->staging.block->buffer,
                                        dev->staging.offset, n));
            memcpy((uint8_t *) host + done, dev->staging.mapped, n);
        }
        done += n;
    }
}

// ---------------------------------------------------------------------------------------------
// Buffers

struct vk_buffer_ctx {
    vk_device *   dev  = nullptr;
    vk_allocation a;
    bool          host = false; // pinned host buffer: base is the mapped pointer
};

vk_buffer_ctx * bctx(ggml_backend_buffer_t b) { return static_cast<vk_buffer_ctx *>(b->context); }

// byte offset of tensor data inside the buffer's allocation
size_t tensor_offset(ggml_backend_buffer_t buffer, const ggml_tensor * t) {
    const uint8_t * base = (const uint8_t *) buffer->iface.get_base(buffer);
    return (size_t) ((const uint8_t *) t->data - base);
}

void * buf_get_base(ggml_backend_buffer_t buffer) {
    vk_buffer_ctx * ctx = bctx(buffer);
    // device buffers: the device address (unique per device, only ever used by shaders)
    return ctx->host ? (void *) ctx->a.mapped : (void *) (uintptr_t) ctx->a.address;
}

std::map<uintptr_t, ggml_backend_buffer_t> & live_buffers(vk_buffer_ctx * ctx) {
    return ctx->host ? ctx->dev->live_host_buffers : ctx->dev->live_device_buffers;
}

void buf_free(ggml_backend_buffer_t buffer) {
    vk_buffer_ctx * ctx = bctx(buffer);
    {
        std::lock_guard<std::mutex> lock(ctx->dev->mem_mtx);
        live_buffers(ctx).erase((uintptr_t) buf_get_base(buffer));
        if (!vk_shut_down()) vk_pool_free(ctx->host ? ctx->dev->host_pool : ctx->dev->device_pool, ctx->a);
    }
    delete ctx;
}

void buf_memset_tensor(ggml_backend_buffer_t buffer, ggml_tensor * tensor, uint8_t value, size_t offset, size_t size) {
    vk_buffer_ctx * ctx = bctx(buffer);
    if (size == 0) return;
    const size_t    off = tensor_offset(buffer, tensor) + offset;
    if (ctx->a.mapped) {
        memset(ctx->a.mapped + off, value, size);
        return;
    }
    if (off % 4 == 0 && size % 4 == 0) {
        GGML_ASSERT(fill_on_device(ctx->dev, ctx->a, off, size, value));
        return;
    }
    std::vector<uint8_t> tmp(size, value);
    staged_transfer(ctx->dev, ctx->a, off, tmp.data(), size, xfer_dir::to_device);
}

void buf_set_tensor(ggml_backend_buffer_t buffer, ggml_tensor * tensor, const void * data, size_t offset, size_t size) {
    vk_buffer_ctx * ctx = bctx(buffer);
    const size_t    off = tensor_offset(buffer, tensor) + offset;
    if (ctx->a.mapped) {
        memcpy(ctx->a.mapped + off, data, size);
        return;
    }
    staged_transfer(ctx->dev, ctx->a, off, const_cast<void *>(data), size, xfer_dir::to_device);
}

void buf_get_tensor(ggml_backend_buffer_t buffer, const ggml_tensor * tensor, void * data, size_t offset, size_t size) {
    vk_buffer_ctx * ctx = bctx(buffer);
    const size_t    off = tensor_offset(buffer, tensor) + offset;
    if (ctx->a.mapped) {
        memcpy(data, ctx->a.mapped + off, size);
        return;
    }
    staged_transfer(ctx->dev, ctx->a, off, data, size, xfer_dir::to_host);
}

bool buf_cpy_tensor(ggml_backend_buffer_t buffer, const ggml_tensor * src, ggml_tensor * dst) {
    ggml_backend_buffer_t sbuf = src->view_src ? src->view_src->buffer : src->buffer;
    vk_buffer_ctx *       dctx = bctx(buffer);
    if (!sbuf || vk_buffer_device(sbuf) != dctx->dev) return false;
    vk_buffer_ctx * sctx = bctx(sbuf);
    const size_t    soff = tensor_offset(sbuf, src), doff = tensor_offset(buffer, dst);
    const size_t    n    = ggml_nbytes(src);
    if (sctx->a.mapped && dctx->a.mapped) {
        memmove(dctx->a.mapped + doff, sctx->a.mapped + soff, n);
        return true;
    }
    std::lock_guard<std::mutex> lock(dctx->dev->xfer_mtx);
    return record_and_wait(dctx->dev, sctx->a.block->buffer, sctx->a.offset + soff, dctx->a.block->buffer,
                           dctx->a.offset + doff, n);
}

void buf_clear(ggml_backend_buffer_t buffer, uint8_t value) {
    vk_buffer_ctx * ctx = bctx(buffer);
    if (ctx->a.mapped) {
        memset(ctx->a.mapped, value, ctx->a.size);
        return;
    }
    GGML_ASSERT(fill_on_device(ctx->dev, ctx->a, 0, ctx->a.size, value)); // sizes are 256-byte granules
}

const ggml_backend_buffer_i buffer_iface = {
    /* .free_buffer   = */ buf_free,
    /* .get_base      = */ buf_get_base,
    /* .init_tensor   = */ nullptr,
    /* .memset_tensor = */ buf_memset_tensor,
    /* .set_tensor    = */ buf_set_tensor,
    /* .get_tensor    = */ buf_get_tensor,
    /* .cpy_tensor    = */ buf_cpy_tensor,
    /* .clear         = */ buf_clear,
    /* .reset         = */ nullptr,
};

// ---------------------------------------------------------------------------------------------
// Buffer types

vk_device * buft_dev(ggml_backend_buffer_type_t buft) { return static_cast<vk_device *>(buft->context); }

const char * buft_get_name(ggml_backend_buffer_type_t buft) { return buft_dev(buft)->name.c_str(); }
const char * host_buft_get_name(ggml_backend_buffer_type_t) { return "Vulkan_Host"; }

ggml_backend_buffer_t alloc(ggml_backend_buffer_type_t buft, size_t size, bool host) {
    vk_device * dev = buft_dev(buft);
    if (!vk_device_ready(dev)) return nullptr;
    auto * ctx = new vk_buffer_ctx();
    ctx->dev   = dev;
    ctx->host  = host;
    {
        std::lock_guard<std::mutex> lock(dev->mem_mtx);
        if (!vk_pool_alloc(host ? dev->host_pool : dev->device_pool, size, ctx->a)) {
            delete ctx;
            return nullptr;
        }
    }
    ggml_backend_buffer_t buffer = ggml_backend_buffer_init(buft, buffer_iface, ctx, size);
    if (buffer) {
        std::lock_guard<std::mutex> lock(dev->mem_mtx);
        live_buffers(ctx)[(uintptr_t) buf_get_base(buffer)] = buffer;
    }
    return buffer;
}

ggml_backend_buffer_t buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) { return alloc(buft, size, false); }
ggml_backend_buffer_t host_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) { return alloc(buft, size, true); }

size_t buft_get_alignment(ggml_backend_buffer_type_t buft) {
    return std::max<size_t>(64, (size_t) buft_dev(buft)->props.limits.minStorageBufferOffsetAlignment);
}

size_t buft_get_max_size(ggml_backend_buffer_type_t buft) { return buft_dev(buft)->max_alloc; }

bool buft_is_host(ggml_backend_buffer_type_t) { return false; }
bool host_buft_is_host(ggml_backend_buffer_type_t) { return true; }

const ggml_backend_buffer_type_i buft_iface = {
    /* .get_name       = */ buft_get_name,
    /* .alloc_buffer   = */ buft_alloc_buffer,
    /* .get_alignment  = */ buft_get_alignment,
    /* .get_max_size   = */ buft_get_max_size,
    /* .get_alloc_size = */ nullptr,
    /* .is_host        = */ buft_is_host,
};

const ggml_backend_buffer_type_i host_buft_iface = {
    /* .get_name       = */ host_buft_get_name,
    /* .alloc_buffer   = */ host_buft_alloc_buffer,
    /* .get_alignment  = */ buft_get_alignment,
    /* .get_max_size   = */ buft_get_max_size,
    /* .get_alloc_size = */ nullptr,
    /* .is_host        = */ host_buft_is_host,
};

} // namespace

void vk_init_buffer_types(vk_device * dev) {
    dev->buft.iface        = buft_iface;
    dev->buft.device       = &dev->gdev;
    dev->buft.context      = dev;
    dev->host_buft.iface   = host_buft_iface;
    dev->host_buft.device  = &dev->gdev;
    dev->host_buft.context = dev;
}

bool vk_buft_is_device(ggml_backend_buffer_type_t buft, vk_device * dev) { return buft == &dev->buft; }

vk_device * vk_buffer_device(ggml_backend_buffer_t buffer) {
    if (!buffer || buffer->iface.get_base != buf_get_base) return nullptr;
    return bctx(buffer)->dev;
}

uint64_t vk_tensor_address(const ggml_tensor * t) {
    ggml_backend_buffer_t buffer = t->view_src ? t->view_src->buffer : t->buffer;
    if (!buffer) buffer = t->buffer;
    GGML_ASSERT(buffer && vk_buffer_device(buffer) && "tensor is not in a Vulkan buffer");
    const vk_buffer_ctx * ctx = bctx(buffer);
    if (ctx->host) return ctx->a.address + (uint64_t) ((const uint8_t *) t->data - ctx->a.mapped);
    return (uint64_t) (uintptr_t) t->data;
}

bool vk_buffer_get_span(ggml_backend_buffer_t buffer, vk_buffer_span * out) {
    if (!vk_buffer_device(buffer)) return false;
    const vk_buffer_ctx * ctx = bctx(buffer);
    out->dev          = ctx->dev;
    out->block        = ctx->a.block;
    out->block_offset = ctx->a.offset;
    out->size         = ggml_backend_buffer_get_size(buffer);
    out->address      = ctx->a.address;
    out->host         = ctx->host;
    return true;
}

ggml_backend_buffer_t vk_find_buffer(vk_device * dev, const void * ptr) {
    std::lock_guard<std::mutex> lock(dev->mem_mtx);
    const uintptr_t p = (uintptr_t) ptr;
    for (auto * m : {&dev->live_device_buffers, &dev->live_host_buffers}) {
        auto it = m->upper_bound(p);
        if (it == m->begin()) continue;
        --it;
        if (p - it->first < ggml_backend_buffer_get_size(it->second)) return it->second;
    }
    return nullptr;
}
