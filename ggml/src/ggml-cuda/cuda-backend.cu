// cuda-backend.cu — the CUDA backend object: one stream, one cuBLAS handle bound to it, a
// stream-ordered memory pool for op temporaries, events, async transfers, and graph_compute,
// which enqueues every computed node on the stream and returns without waiting (ggml's
// graph_compute synchronizes afterwards; the scheduler synchronizes where it needs results).
//
// Everything graph_compute enqueues is legal inside a CUDA stream capture (cudaMallocAsync /
// cudaFreeAsync temporaries, cuBLAS with a fixed workspace, no synchronization), so the capture
// code (graph-capture.cu) can record a whole plan into a CUDA Graph.

#include "cuda-internal.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace {

// cuBLAS gets a fixed workspace: with one it never allocates while a stream is being captured
// (32 MiB: NVIDIA's recommendation for Hopper, enough for every earlier architecture)
constexpr size_t k_cublas_workspace = (size_t) 32 << 20;

// Temporaries allocated and freed in stream order from the device's memory pool: a later op on
// the same stream reuses freed memory without any synchronization; legal during stream capture
// (the graph gets allocation nodes).
struct stream_ordered_pool : ggml_cuda_pool {
    cudaStream_t stream;
    explicit stream_ordered_pool(cudaStream_t s) : stream(s) {}
    void * alloc(size_t size, size_t * actual_size) override {
        void * ptr = nullptr;
        CUDA_CHECK(cudaMallocAsync(&ptr, size, stream));
        *actual_size = size;
        return ptr;
    }
    void free(void * ptr, size_t) override { CUDA_CHECK(cudaFreeAsync(ptr, stream)); }
};

// Devices without memory-pool support (some virtualized GPUs): cudaMalloc'd blocks reused in
// stream order. One stream uses them, so a block freed after an op is safe for the next op.
struct caching_pool : ggml_cuda_pool {
    std::vector<std::pair<void *, size_t>> free_blocks;
    ~caching_pool() override {
        for (auto & b : free_blocks) (void) cudaFree(b.first);
    }
    void * alloc(size_t size, size_t * actual_size) override {
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < free_blocks.size(); i++) {
            if (free_blocks[i].second >= size && (best == SIZE_MAX || free_blocks[i].second < free_blocks[best].second)) {
                best = i;
            }
        }
        if (best != SIZE_MAX) {
            auto b = free_blocks[best];
            free_blocks.erase(free_blocks.begin() + (std::ptrdiff_t) best);
            *actual_size = b.second;
            return b.first;
        }
        void * ptr = nullptr;
        CUDA_CHECK(cudaMalloc(&ptr, size));
        *actual_size = size;
        return ptr;
    }
    void free(void * ptr, size_t size) override { free_blocks.emplace_back(ptr, size); }
};

struct cuda_backend_ctx {
    ggml_cuda_device *              dev = nullptr;
    cudaStream_t                    stream    = nullptr;
    cublasHandle_t                  cublas    = nullptr;
    void *                          cublas_ws = nullptr;
    cudaEvent_t                     copy_done = nullptr; // orders cross-backend copies
    std::unique_ptr<ggml_cuda_pool> pool;
    void *                          capture_state = nullptr;
};

ggml_guid cuda_guid = {0x2c, 0x7d, 0x4e, 0x91, 0xb3, 0x05, 0x4a, 0x6f, 0x8e, 0x21, 0xd9, 0x5c, 0x13, 0xa7, 0x60, 0xf4};

cuda_backend_ctx * ctx_of(ggml_backend_t b) { return static_cast<cuda_backend_ctx *>(b->context); }

void destroy_ctx(cuda_backend_ctx * ctx) {
    if (!ctx) return;
    (void) cudaSetDevice(ctx->dev->ordinal);
    if (ctx->stream) (void) cudaStreamSynchronize(ctx->stream);
    ctx->pool.reset();
    if (ctx->cublas) (void) cublasDestroy(ctx->cublas);
    if (ctx->cublas_ws) (void) cudaFree(ctx->cublas_ws);
    if (ctx->copy_done) (void) cudaEventDestroy(ctx->copy_done);
    if (ctx->stream) (void) cudaStreamDestroy(ctx->stream);
    delete ctx;
}

const char * backend_get_name(ggml_backend_t b) { return ctx_of(b)->dev->name.c_str(); }

void backend_free(ggml_backend_t b) {
    cuda_backend_ctx * ctx = ctx_of(b);
    // after the runtime shut down (a backend freed by a static destructor) there is nothing to wait for
    const cudaError_t err = cudaSetDevice(ctx->dev->ordinal);
    if (err != cudaErrorCudartUnloading) {
        CUDA_CHECK(err);
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    }
    if (ctx->capture_state) ggml_cuda_capture_state_free(ctx->capture_state);
    ctx->capture_state = nullptr;
    destroy_ctx(ctx);
    delete b;
}

ggml_backend_buffer_t storage_of(const ggml_tensor * t) { return t->view_src ? t->view_src->buffer : t->buffer; }

// Async transfers need the tensor in this backend's device memory (ggml's contract for them).
void check_on_device(cuda_backend_ctx * ctx, const ggml_tensor * t) {
    ggml_backend_buffer_t buf = storage_of(t);
    GGML_ASSERT(buf && ggml_cuda_buft_device(buf->buft) == ctx->dev->ordinal &&
                "async transfer of a tensor that is not in this CUDA device's memory");
}

void backend_set_tensor_async(ggml_backend_t b, ggml_tensor * t, const void * data, size_t offset, size_t size) {
    cuda_backend_ctx * ctx = ctx_of(b);
    check_on_device(ctx, t);
    CUDA_CHECK(cudaSetDevice(ctx->dev->ordinal));
    CUDA_CHECK(cudaMemcpyAsync((char *) t->data + offset, data, size, cudaMemcpyHostToDevice, ctx->stream));
}

void backend_get_tensor_async(ggml_backend_t b, const ggml_tensor * t, void * data, size_t offset, size_t size) {
    cuda_backend_ctx * ctx = ctx_of(b);
    check_on_device(ctx, t);
    CUDA_CHECK(cudaSetDevice(ctx->dev->ordinal));
    CUDA_CHECK(cudaMemcpyAsync(data, (const char *) t->data + offset, size, cudaMemcpyDeviceToHost, ctx->stream));
}

// Device to device between two CUDA backends: the copy runs on the source stream after the
// source's pending work; the destination stream waits for it. Anything else: false (ggml stages).
bool backend_cpy_tensor_async(ggml_backend_t b_src, ggml_backend_t b_dst, const ggml_tensor * src, ggml_tensor * dst) {
    if (!ggml_backend_is_cuda(b_src) || !ggml_backend_is_cuda(b_dst)) return false;
    ggml_backend_buffer_t sbuf = storage_of(src), dbuf = storage_of(dst);
    if (!sbuf || !dbuf || !ggml_cuda_buft_is_device(sbuf->buft) || !ggml_cuda_buft_is_device(dbuf->buft)) return false;
    cuda_backend_ctx * cs = ctx_of(b_src);
    cuda_backend_ctx * cd = ctx_of(b_dst);
    if (ggml_cuda_buft_device(sbuf->buft) != cs->dev->ordinal || ggml_cuda_buft_device(dbuf->buft) != cd->dev->ordinal) {
        return false;
    }
    CUDA_CHECK(cudaSetDevice(cs->dev->ordinal));
    if (cs->dev == cd->dev) {
        CUDA_CHECK(cudaMemcpyAsync(dst->data, src->data, ggml_nbytes(dst), cudaMemcpyDeviceToDevice, cs->stream));
    } else {
        CUDA_CHECK(cudaMemcpyPeerAsync(dst->data, cd->dev->ordinal, src->data, cs->dev->ordinal, ggml_nbytes(dst),
                                       cs->stream));
    }
    if (b_src != b_dst) {
        CUDA_CHECK(cudaEventRecord(cs->copy_done, cs->stream));
        CUDA_CHECK(cudaSetDevice(cd->dev->ordinal));
        CUDA_CHECK(cudaStreamWaitEvent(cd->stream, cs->copy_done, 0));
    }
    return true;
}

void backend_synchronize(ggml_backend_t b) {
    cuda_backend_ctx * ctx = ctx_of(b);
    CUDA_CHECK(cudaSetDevice(ctx->dev->ordinal));
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
}

bool node_is_computed(const ggml_tensor * node) {
    if (ggml_op_is_empty(node->op)) return false;
    if (!(node->flags & GGML_TENSOR_FLAG_COMPUTE)) return false;
    return ggml_nelements(node) > 0;
}

ggml_status backend_graph_compute(ggml_backend_t b, ggml_cgraph * g) {
    cuda_backend_ctx * ctx = ctx_of(b);
    CUDA_CHECK(cudaSetDevice(ctx->dev->ordinal));
    ggml_cuda_op_ctx op{ctx->dev->ordinal, ctx->dev->cc, ctx->stream, ctx->cublas, ctx->pool.get()};
    for (int i = 0; i < g->n_nodes; i++) {
        ggml_tensor * node = g->nodes[i];
        if (!node_is_computed(node)) continue;
        bool done = false;
        if (node->op == GGML_OP_MUL_MAT) {
            done = ggml_cuda_mul_mat_supports(node, ctx->dev->cc);
            if (done) ggml_cuda_mul_mat(op, node);
        } else {
            done = ggml_cuda_ops_compute(op, node);
        }
        if (!done) {
            GGML_LOG_ERROR("ggml-cuda: node %s (%s) is not supported on %s\n", node->name, ggml_op_desc(node),
                           ctx->dev->name.c_str());
            return GGML_STATUS_FAILED;
        }
    }
    // launch errors (bad configuration, lost device) surface here; execution errors at the next sync
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        GGML_LOG_ERROR("ggml-cuda: %s: graph launch failed: %s\n", ctx->dev->name.c_str(), cudaGetErrorString(err));
        return GGML_STATUS_FAILED;
    }
    return GGML_STATUS_SUCCESS;
}

cudaEvent_t event_of(ggml_backend_event_t e) { return static_cast<cudaEvent_t>(e->context); }

void backend_event_record(ggml_backend_t b, ggml_backend_event_t e) {
    cuda_backend_ctx * ctx = ctx_of(b);
    CUDA_CHECK(cudaSetDevice(ctx->dev->ordinal));
    CUDA_CHECK(cudaEventRecord(event_of(e), ctx->stream));
}

void backend_event_wait(ggml_backend_t b, ggml_backend_event_t e) {
    cuda_backend_ctx * ctx = ctx_of(b);
    CUDA_CHECK(cudaSetDevice(ctx->dev->ordinal));
    CUDA_CHECK(cudaStreamWaitEvent(ctx->stream, event_of(e), 0));
}

// Members assigned by name on a zeroed table: optional members not set here stay null.
ggml_backend_i make_backend_iface() {
    ggml_backend_i i{};
    i.get_name         = backend_get_name;
    i.free             = backend_free;
    i.set_tensor_async = backend_set_tensor_async;
    i.get_tensor_async = backend_get_tensor_async;
    i.cpy_tensor_async = backend_cpy_tensor_async;
    i.synchronize      = backend_synchronize;
    i.graph_compute    = backend_graph_compute;
    i.event_record     = backend_event_record;
    i.event_wait       = backend_event_wait;
    // whole-plan CUDA Graph capture and replay (graph-capture.cu)
    i.plan_begin   = ggml_cuda_plan_begin;
    i.plan_end     = ggml_cuda_plan_end;
    i.ext_step_end = ggml_cuda_ext_step_end;
    return i;
}

const ggml_backend_i backend_iface = make_backend_iface();

// Freed pool memory stays with the pool across synchronizations (the default threshold of 0
// would hand it back to the driver at every sync and make each step allocate again).
void keep_pool_memory(int ordinal) {
    static std::once_flag once[GGML_CUDA_MAX_DEVICES];
    std::call_once(once[ordinal], [ordinal] {
        cudaMemPool_t pool = nullptr;
        CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, ordinal));
        uint64_t threshold = UINT64_MAX;
        CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    });
}

} // namespace

ggml_backend_t ggml_cuda_backend_new(ggml_cuda_device * dev) {
    if (!dev) return nullptr;
    if (cudaSetDevice(dev->ordinal) != cudaSuccess) {
        (void) cudaGetLastError();
        GGML_LOG_ERROR("ggml-cuda: cannot select %s\n", dev->name.c_str());
        return nullptr;
    }
    auto * ctx = new (std::nothrow) cuda_backend_ctx();
    if (!ctx) return nullptr;
    ctx->dev = dev;
    bool ok  = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking) == cudaSuccess &&
              cudaEventCreateWithFlags(&ctx->copy_done, cudaEventDisableTiming) == cudaSuccess &&
              cudaMalloc(&ctx->cublas_ws, k_cublas_workspace) == cudaSuccess;
    ok = ok && cublasCreate(&ctx->cublas) == CUBLAS_STATUS_SUCCESS &&
         cublasSetStream(ctx->cublas, ctx->stream) == CUBLAS_STATUS_SUCCESS &&
         cublasSetPointerMode(ctx->cublas, CUBLAS_POINTER_MODE_HOST) == CUBLAS_STATUS_SUCCESS &&
         cublasSetWorkspace(ctx->cublas, ctx->cublas_ws, k_cublas_workspace) == CUBLAS_STATUS_SUCCESS;
    if (!ok) {
        (void) cudaGetLastError();
        GGML_LOG_ERROR("ggml-cuda: cannot create the stream / cuBLAS handle of %s\n", dev->name.c_str());
        destroy_ctx(ctx);
        return nullptr;
    }
    if (dev->mem_pools) {
        keep_pool_memory(dev->ordinal);
        ctx->pool = std::make_unique<stream_ordered_pool>(ctx->stream);
    } else {
        ctx->pool = std::make_unique<caching_pool>();
    }
    auto * b = new (std::nothrow) ggml_backend();
    if (!b) {
        destroy_ctx(ctx);
        return nullptr;
    }
    b->guid    = &cuda_guid;
    b->iface   = backend_iface;
    b->device  = &dev->gdev;
    b->context = ctx;
    return b;
}

bool ggml_cuda_node_supported(const ggml_cuda_device * dev, const ggml_tensor * op) {
    if (ggml_op_is_empty(op->op)) return true;
    if (op->op == GGML_OP_MUL_MAT) return ggml_cuda_mul_mat_supports(op, dev->cc);
    return ggml_cuda_ops_supports(op, dev->cc);
}

ggml_backend_event_t ggml_cuda_event_new(ggml_backend_dev_t dev) {
    const int ordinal = ggml_cuda_dev_physical_ordinal(dev);
    if (ordinal < 0 || cudaSetDevice(ordinal) != cudaSuccess) return nullptr;
    cudaEvent_t ev = nullptr;
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
        (void) cudaGetLastError();
        return nullptr;
    }
    auto * e = new (std::nothrow) ggml_backend_event{dev, ev};
    if (!e) (void) cudaEventDestroy(ev);
    return e;
}

void ggml_cuda_event_free(ggml_backend_dev_t, ggml_backend_event_t event) {
    if (!event) return;
    (void) cudaEventDestroy(event_of(event));
    delete event;
}

void ggml_cuda_event_synchronize(ggml_backend_dev_t, ggml_backend_event_t event) {
    CUDA_CHECK(cudaEventSynchronize(event_of(event)));
}

bool ggml_cuda_backend_view_of(ggml_backend_t backend, ggml_cuda_backend_view * out) {
    if (!ggml_backend_is_cuda(backend) || !out) return false;
    cuda_backend_ctx * ctx = ctx_of(backend);
    out->device        = ctx->dev->ordinal;
    out->cc            = ctx->dev->cc;
    out->stream        = ctx->stream;
    out->cublas        = ctx->cublas;
    out->pool          = ctx->pool.get();
    out->capture_state = &ctx->capture_state;
    return true;
}

extern "C" {

ggml_backend_t ggml_backend_cuda_init(int device) { return ggml_cuda_backend_new(ggml_cuda_get_device(device)); }

bool ggml_backend_is_cuda(ggml_backend_t backend) {
    return backend && backend->guid && ggml_guid_matches(backend->guid, &cuda_guid);
}

} // extern "C"
