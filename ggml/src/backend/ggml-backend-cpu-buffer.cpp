// ggml-backend-cpu-buffer.cpp — the host-memory buffer type ("CPU") and buffers wrapping caller
// memory ("CPU_Mapped"). Every other backend's host staging and every CPU tensor lives here.

#include "backend/ggml-backend-impl.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace {

// Matches upstream's TENSOR_ALIGNMENT: SIMD kernels and gguf data offsets rely on it.
constexpr size_t CPU_BUFFER_ALIGNMENT = 32;

// --- buffer callbacks (shared by owned and mapped buffers) -----------------------------------

void cpu_buffer_free(ggml_backend_buffer_t buffer) {
    free(buffer->context);
}

void * cpu_buffer_get_base(ggml_backend_buffer_t buffer) {
    return buffer->context;
}

void cpu_buffer_memset_tensor(ggml_backend_buffer_t, struct ggml_tensor * tensor, uint8_t value, size_t offset,
                              size_t size) {
    memset((char *) tensor->data + offset, value, size);
}

void cpu_buffer_set_tensor(ggml_backend_buffer_t, struct ggml_tensor * tensor, const void * data, size_t offset,
                           size_t size) {
    memcpy((char *) tensor->data + offset, data, size);
}

void cpu_buffer_get_tensor(ggml_backend_buffer_t, const struct ggml_tensor * tensor, void * data, size_t offset,
                           size_t size) {
    memcpy(data, (const char *) tensor->data + offset, size);
}

bool cpu_buffer_cpy_tensor(ggml_backend_buffer_t, const struct ggml_tensor * src, struct ggml_tensor * dst) {
    ggml_backend_buffer_t src_buf = src->view_src ? src->view_src->buffer : src->buffer;
    // a device-resident source cannot be read with memcpy; the caller then stages through the host
    if (src_buf == nullptr || !ggml_backend_buffer_is_host(src_buf)) {
        return false;
    }
    memcpy(dst->data, src->data, ggml_nbytes(src));
    return true;
}

void cpu_buffer_clear(ggml_backend_buffer_t buffer, uint8_t value) {
    memset(buffer->context, value, buffer->size);
}

const ggml_backend_buffer_i cpu_buffer_iface = {
    /* .free_buffer   = */ cpu_buffer_free,
    /* .get_base      = */ cpu_buffer_get_base,
    /* .init_tensor   = */ nullptr,
    /* .memset_tensor = */ cpu_buffer_memset_tensor,
    /* .set_tensor    = */ cpu_buffer_set_tensor,
    /* .get_tensor    = */ cpu_buffer_get_tensor,
    /* .cpy_tensor    = */ cpu_buffer_cpy_tensor,
    /* .clear         = */ cpu_buffer_clear,
    /* .reset         = */ nullptr,
};

// Caller-owned memory: identical except that freeing the buffer must not free the memory.
const ggml_backend_buffer_i cpu_mapped_buffer_iface = {
    /* .free_buffer   = */ nullptr,
    /* .get_base      = */ cpu_buffer_get_base,
    /* .init_tensor   = */ nullptr,
    /* .memset_tensor = */ cpu_buffer_memset_tensor,
    /* .set_tensor    = */ cpu_buffer_set_tensor,
    /* .get_tensor    = */ cpu_buffer_get_tensor,
    /* .cpy_tensor    = */ cpu_buffer_cpy_tensor,
    /* .clear         = */ cpu_buffer_clear,
    /* .reset         = */ nullptr,
};

// --- buffer type callbacks ----------------------------------------------------------------------

const char * cpu_buft_get_name(ggml_backend_buffer_type_t) {
    return "CPU";
}

const char * cpu_mapped_buft_get_name(ggml_backend_buffer_type_t) {
    return "CPU_Mapped";
}

ggml_backend_buffer_t cpu_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    // aligned_alloc requires the size to be a multiple of the alignment
    const size_t padded = GGML_PAD(size, CPU_BUFFER_ALIGNMENT);
    if (padded < size) {
        GGML_LOG_ERROR("%s: buffer size %zu overflows\n", __func__, size);
        return nullptr;
    }
    void * data = aligned_alloc(CPU_BUFFER_ALIGNMENT, padded);
    if (data == nullptr) {
        GGML_LOG_ERROR("%s: failed to allocate CPU buffer of size %zu\n", __func__, size);
        return nullptr;
    }
    return ggml_backend_buffer_init(buft, cpu_buffer_iface, data, size);
}

size_t cpu_buft_get_alignment(ggml_backend_buffer_type_t) {
    return CPU_BUFFER_ALIGNMENT;
}

bool cpu_buft_is_host(ggml_backend_buffer_type_t) {
    return true;
}

// The device link is resolved lazily because the CPU registry may itself ask for this buffer type
// while it is being built. The thread-local flag breaks that recursion on the resolving thread.
thread_local bool g_resolving_cpu_device = false;

void resolve_cpu_device(ggml_backend_buffer_type & buft, std::atomic<bool> & resolved) {
    static std::mutex mtx;
    if (resolved.load(std::memory_order_acquire) || g_resolving_cpu_device) {
        return;
    }
    std::lock_guard<std::mutex> lock(mtx);
    if (resolved.load(std::memory_order_relaxed)) {
        return;
    }
    g_resolving_cpu_device = true;
    ggml_backend_reg_t reg = ggml_backend_cpu_reg();
    ggml_backend_dev_t dev = nullptr;
    if (reg != nullptr && ggml_backend_reg_dev_count(reg) > 0) {
        dev = ggml_backend_reg_dev_get(reg, 0);
    }
    buft.device = dev;
    g_resolving_cpu_device = false;
    if (dev != nullptr) {
        resolved.store(true, std::memory_order_release);
    }
}

std::atomic<bool> g_cpu_buft_resolved{false};
std::atomic<bool> g_cpu_mapped_buft_resolved{false};

ggml_backend_buffer_type g_cpu_buft = {
    /* .iface = */ {
        /* .get_name       = */ cpu_buft_get_name,
        /* .alloc_buffer   = */ cpu_buft_alloc_buffer,
        /* .get_alignment  = */ cpu_buft_get_alignment,
        /* .get_max_size   = */ nullptr,
        /* .get_alloc_size = */ nullptr,
        /* .is_host        = */ cpu_buft_is_host,
    },
    /* .device  = */ nullptr,
    /* .context = */ nullptr,
};

// Mapped buffers are never allocated through their type; the type exists for naming and queries.
ggml_backend_buffer_type g_cpu_mapped_buft = {
    /* .iface = */ {
        /* .get_name       = */ cpu_mapped_buft_get_name,
        /* .alloc_buffer   = */ cpu_buft_alloc_buffer,
        /* .get_alignment  = */ cpu_buft_get_alignment,
        /* .get_max_size   = */ nullptr,
        /* .get_alloc_size = */ nullptr,
        /* .is_host        = */ cpu_buft_is_host,
    },
    /* .device  = */ nullptr,
    /* .context = */ nullptr,
};

} // namespace

ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type(void) {
    resolve_cpu_device(g_cpu_buft, g_cpu_buft_resolved);
    return &g_cpu_buft;
}

ggml_backend_buffer_t ggml_backend_cpu_buffer_from_ptr(void * ptr, size_t size) {
    GGML_ASSERT((uintptr_t) ptr % CPU_BUFFER_ALIGNMENT == 0 && "buffer pointer must be aligned");
    resolve_cpu_device(g_cpu_mapped_buft, g_cpu_mapped_buft_resolved);
    return ggml_backend_buffer_init(&g_cpu_mapped_buft, cpu_mapped_buffer_iface, ptr, size);
}
