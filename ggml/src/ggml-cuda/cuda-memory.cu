// cuda-memory.cu — the CUDA buffer types: device memory (one cudaMalloc per ggml buffer) and
// pinned host memory (cudaHostAlloc, portable to every device).
//
// Tensor transfers through the buffer interface are synchronous, as ggml requires: they run on
// the calling thread's per-thread stream and wait for it. Transfers ordered with a backend's
// work go through the backend's async functions instead (cuda-backend.cu).

#include "cuda-internal.h"

#include <cstring>
#include <new>

namespace {

// 128 bytes: aligned for every vector load the kernels do, and cuBLAS's preferred alignment
constexpr size_t k_alignment = 128;

struct device_buffer_ctx {
    int    ordinal = -1;
    void * ptr     = nullptr;
};

device_buffer_ctx * buf_ctx(ggml_backend_buffer_t b) { return static_cast<device_buffer_ctx *>(b->context); }

// A buffer freed by a static destructor after the CUDA runtime has shut down: the memory went
// with the process's context already, nothing to report.
void check_free(cudaError_t err, const char * what) {
    if (err == cudaErrorCudartUnloading) {
        (void) cudaGetLastError();
        return;
    }
    if (err != cudaSuccess) ggml_cuda_error(what, __func__, __FILE__, __LINE__, cudaGetErrorString(err));
}

void buffer_free(ggml_backend_buffer_t b) {
    device_buffer_ctx * ctx = buf_ctx(b);
    check_free(cudaSetDevice(ctx->ordinal), "cudaSetDevice");
    check_free(cudaFree(ctx->ptr), "cudaFree");
    delete ctx;
}

void * buffer_get_base(ggml_backend_buffer_t b) { return buf_ctx(b)->ptr; }

void buffer_memset_tensor(ggml_backend_buffer_t b, ggml_tensor * t, uint8_t value, size_t offset, size_t size) {
    CUDA_CHECK(cudaSetDevice(buf_ctx(b)->ordinal));
    CUDA_CHECK(cudaMemsetAsync((char *) t->data + offset, value, size, cudaStreamPerThread));
    CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
}

void buffer_set_tensor(ggml_backend_buffer_t b, ggml_tensor * t, const void * data, size_t offset, size_t size) {
    CUDA_CHECK(cudaSetDevice(buf_ctx(b)->ordinal));
    CUDA_CHECK(cudaMemcpyAsync((char *) t->data + offset, data, size, cudaMemcpyHostToDevice, cudaStreamPerThread));
    CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
}

void buffer_get_tensor(ggml_backend_buffer_t b, const ggml_tensor * t, void * data, size_t offset, size_t size) {
    CUDA_CHECK(cudaSetDevice(buf_ctx(b)->ordinal));
    CUDA_CHECK(cudaMemcpyAsync(data, (const char *) t->data + offset, size, cudaMemcpyDeviceToHost, cudaStreamPerThread));
    CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
}

// Device to device, on one device or across two (peer copy); other sources: false, and ggml
// stages the copy through host memory.
bool buffer_cpy_tensor(ggml_backend_buffer_t b, const ggml_tensor * src, ggml_tensor * dst) {
    if (!src->buffer || !ggml_cuda_buft_is_device(src->buffer->buft)) return false;
    const int src_dev = ggml_cuda_buft_device(src->buffer->buft);
    const int dst_dev = buf_ctx(b)->ordinal;
    const size_t n    = ggml_nbytes(src);
    if (src_dev == dst_dev) {
        CUDA_CHECK(cudaSetDevice(dst_dev));
        CUDA_CHECK(cudaMemcpyAsync(dst->data, src->data, n, cudaMemcpyDeviceToDevice, cudaStreamPerThread));
    } else {
        CUDA_CHECK(cudaSetDevice(src_dev));
        CUDA_CHECK(cudaMemcpyPeerAsync(dst->data, dst_dev, src->data, src_dev, n, cudaStreamPerThread));
    }
    CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
    return true;
}

void buffer_clear(ggml_backend_buffer_t b, uint8_t value) {
    device_buffer_ctx * ctx = buf_ctx(b);
    CUDA_CHECK(cudaSetDevice(ctx->ordinal));
    CUDA_CHECK(cudaMemsetAsync(ctx->ptr, value, b->size, cudaStreamPerThread));
    CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
}

const ggml_backend_buffer_i device_buffer_iface = {
    /* .free_buffer   = */ buffer_free,
    /* .get_base      = */ buffer_get_base,
    /* .init_tensor   = */ nullptr,
    /* .memset_tensor = */ buffer_memset_tensor,
    /* .set_tensor    = */ buffer_set_tensor,
    /* .get_tensor    = */ buffer_get_tensor,
    /* .cpy_tensor    = */ buffer_cpy_tensor,
    /* .clear         = */ buffer_clear,
    /* .reset         = */ nullptr,
};

ggml_cuda_device * buft_dev(ggml_backend_buffer_type_t buft) { return static_cast<ggml_cuda_device *>(buft->context); }

const char * buft_get_name(ggml_backend_buffer_type_t buft) { return buft_dev(buft)->name.c_str(); }

ggml_backend_buffer_t buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    ggml_cuda_device * dev = buft_dev(buft);
    size = size == 0 ? 1 : size; // a zero-size ggml buffer still needs a distinct base
    if (cudaSetDevice(dev->ordinal) != cudaSuccess) {
        (void) cudaGetLastError();
        return nullptr;
    }
    void *      ptr = nullptr;
    cudaError_t err = cudaMalloc(&ptr, size);
    if (err == cudaErrorMemoryAllocation && dev->mem_pools) {
        // the backends' op temporaries stay reserved in the device's memory pool (its release
        // threshold is unlimited): hand what is free there back and try once more
        (void) cudaGetLastError();
        cudaMemPool_t pool = nullptr;
        if (cudaDeviceSynchronize() == cudaSuccess && cudaDeviceGetDefaultMemPool(&pool, dev->ordinal) == cudaSuccess &&
            cudaMemPoolTrimTo(pool, 0) == cudaSuccess) {
            err = cudaMalloc(&ptr, size);
        }
    }
    if (err != cudaSuccess) {
        (void) cudaGetLastError(); // out of memory is reported to the caller, not fatal
        GGML_LOG_ERROR("ggml-cuda: %s: cannot allocate %.2f MiB of device memory: %s\n", dev->name.c_str(),
                       (double) size / (1024.0 * 1024.0), cudaGetErrorString(err));
        return nullptr;
    }
    auto * ctx = new (std::nothrow) device_buffer_ctx{dev->ordinal, ptr};
    if (!ctx) {
        CUDA_CHECK(cudaFree(ptr));
        return nullptr;
    }
    return ggml_backend_buffer_init(buft, device_buffer_iface, ctx, size);
}

size_t buft_get_alignment(ggml_backend_buffer_type_t) { return k_alignment; }

size_t buft_get_max_size(ggml_backend_buffer_type_t buft) { return buft_dev(buft)->props.totalGlobalMem; }

const ggml_backend_buffer_type_i device_buft_iface = {
    /* .get_name       = */ buft_get_name,
    /* .alloc_buffer   = */ buft_alloc_buffer,
    /* .get_alignment  = */ buft_get_alignment,
    /* .get_max_size   = */ buft_get_max_size,
    /* .get_alloc_size = */ nullptr,
    /* .is_host        = */ nullptr,
};

// ---------------------------------------------------------------------------------------------
// Pinned host memory: plain host memory to ggml (the CPU backend computes in it directly)

void host_buffer_free(ggml_backend_buffer_t b) { check_free(cudaFreeHost(b->context), "cudaFreeHost"); }

void * host_buffer_get_base(ggml_backend_buffer_t b) { return b->context; }

void host_buffer_memset_tensor(ggml_backend_buffer_t, ggml_tensor * t, uint8_t value, size_t offset, size_t size) {
    memset((char *) t->data + offset, value, size);
}

void host_buffer_set_tensor(ggml_backend_buffer_t, ggml_tensor * t, const void * data, size_t offset, size_t size) {
    memcpy((char *) t->data + offset, data, size);
}

void host_buffer_get_tensor(ggml_backend_buffer_t, const ggml_tensor * t, void * data, size_t offset, size_t size) {
    memcpy(data, (const char *) t->data + offset, size);
}

bool host_buffer_cpy_tensor(ggml_backend_buffer_t, const ggml_tensor * src, ggml_tensor * dst) {
    if (!src->buffer || !ggml_backend_buffer_is_host(src->buffer)) return false;
    memcpy(dst->data, src->data, ggml_nbytes(src));
    return true;
}

void host_buffer_clear(ggml_backend_buffer_t b, uint8_t value) { memset(b->context, value, b->size); }

const ggml_backend_buffer_i host_buffer_iface = {
    /* .free_buffer   = */ host_buffer_free,
    /* .get_base      = */ host_buffer_get_base,
    /* .init_tensor   = */ nullptr,
    /* .memset_tensor = */ host_buffer_memset_tensor,
    /* .set_tensor    = */ host_buffer_set_tensor,
    /* .get_tensor    = */ host_buffer_get_tensor,
    /* .cpy_tensor    = */ host_buffer_cpy_tensor,
    /* .clear         = */ host_buffer_clear,
    /* .reset         = */ nullptr,
};

const char * host_buft_get_name(ggml_backend_buffer_type_t) { return GGML_CUDA_NAME "_Host"; }

ggml_backend_buffer_t host_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    size = size == 0 ? 1 : size;
    void *            ptr = nullptr;
    const cudaError_t err = cudaHostAlloc(&ptr, size, cudaHostAllocPortable);
    if (err != cudaSuccess) {
        (void) cudaGetLastError();
        GGML_LOG_ERROR("ggml-cuda: cannot allocate %.2f MiB of pinned host memory: %s\n",
                       (double) size / (1024.0 * 1024.0), cudaGetErrorString(err));
        return nullptr;
    }
    return ggml_backend_buffer_init(buft, host_buffer_iface, ptr, size);
}

size_t host_buft_get_alignment(ggml_backend_buffer_type_t) { return k_alignment; }
bool   host_buft_is_host(ggml_backend_buffer_type_t) { return true; }

const ggml_backend_buffer_type_i host_buft_iface = {
    /* .get_name       = */ host_buft_get_name,
    /* .alloc_buffer   = */ host_buft_alloc_buffer,
    /* .get_alignment  = */ host_buft_get_alignment,
    /* .get_max_size   = */ nullptr,
    /* .get_alloc_size = */ nullptr,
    /* .is_host        = */ host_buft_is_host,
};

} // namespace

void ggml_cuda_init_buffer_type(ggml_cuda_device * dev) {
    dev->buft.iface   = device_buft_iface;
    dev->buft.device  = &dev->gdev;
    dev->buft.context = dev;
}

bool ggml_cuda_buft_is_device(ggml_backend_buffer_type_t buft) {
    return buft && buft->iface.alloc_buffer == buft_alloc_buffer;
}

int ggml_cuda_buft_device(ggml_backend_buffer_type_t buft) {
    return ggml_cuda_buft_is_device(buft) ? buft_dev(buft)->ordinal : -1;
}

ggml_backend_buffer_type_t ggml_cuda_host_buft() {
    // the host memory belongs to the first device as far as ggml's device bookkeeping goes;
    // it is portable, so every device reads it at full speed
    static ggml_backend_buffer_type host_buft = [] {
        ggml_backend_buffer_type b{};
        b.iface   = host_buft_iface;
        ggml_cuda_device * dev0 = ggml_cuda_get_device(0);
        b.device  = dev0 ? &dev0->gdev : nullptr;
        b.context = nullptr;
        return b;
    }();
    return host_buft.device ? &host_buft : nullptr;
}
