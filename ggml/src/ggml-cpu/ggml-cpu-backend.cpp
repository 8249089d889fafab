// ggml-cpu-backend.cpp — the CPU backend object (graph executor), its device and registry entry,
// plus the small host-tensor helpers declared in ggml-cpu.h.
//
// Threads: each backend owns a persistent pool (created on first compute, re-created only when
// the thread count changes) unless the application supplies one with
// ggml_backend_cpu_set_threadpool. Upstream creates a disposable pool per compute when none is
// set; keeping ours alive avoids thread start-up on every graph.
//
// Default thread count: the number of CPUs this process may run on (its affinity mask, i.e. what
// a container or taskset grants), capped at GGML_MAX_N_THREADS; GGML_DEFAULT_N_THREADS only when
// that cannot be determined. Upstream defaults to a fixed 4, which under-uses large machines and
// oversubscribes small ones.

#include "backend/ggml-backend-impl.h"
#include "cpu-features.h"
#include "ggml-ext.h"
#include "cpu-ops.h"
#include "ggml-cpu.h"
#include "threadpool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif
#include <unistd.h>

namespace {

constexpr size_t WORK_ALIGNMENT = 64; // cache line: kernels give each thread its own slice

int default_n_threads() {
    int n = 0;
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) n = CPU_COUNT(&set);
#endif
    if (n <= 0) {
        const long online = sysconf(_SC_NPROCESSORS_ONLN);
        if (online > 0) n = (int) std::min<long>(online, GGML_MAX_N_THREADS);
    }
    if (n <= 0) n = GGML_DEFAULT_N_THREADS;
    return std::min(n, GGML_MAX_N_THREADS);
}

struct cpu_backend_context {
    int n_threads = 1;

    ggml_threadpool * external_pool = nullptr; // owned by the application
    ggml_threadpool * own_pool      = nullptr; // created lazily with n_threads

    void * work_data = nullptr; // WORK_ALIGNMENT-aligned, grows only
    size_t work_size = 0;

    ggml_abort_callback abort_callback      = nullptr;
    void *              abort_callback_data = nullptr;
    bool                use_ref             = false;

    ggml_cpu_compute_state state;

    std::vector<ggml_tensor *> compute_nodes; // reused between computes

    // ggml_ext_cpu_parallel_v1 abort state, separate from the graph executor's: an extension
    // step runs between native ranges, never during one, but its flag must not leak into them
    std::atomic<bool>    svc_aborted{false};
    std::atomic<bool>    svc_poll_lock{false}; // the winner calls the user callback, never two at once
    std::atomic<int64_t> svc_last_poll_ns{0};
};

// Set while this thread executes a task on some CPU pool (graph or service run). A pool run
// cannot start another run on a pool from inside its task without risking a deadlock on the
// run lock, so a nested parallel_for runs inline instead.
thread_local bool tl_in_pool_task = false;

struct pool_task_scope {
    bool saved;
    pool_task_scope() : saved(tl_in_pool_task) { tl_in_pool_task = true; }
    ~pool_task_scope() { tl_in_pool_task = saved; }
};

// One graph run as seen by every worker thread.
struct graph_run {
    const std::vector<ggml_tensor *> * nodes;
    ggml_compute_params                base; // ith/nth filled per thread
};

bool node_is_computed(const ggml_tensor * node) {
    if (ggml_op_is_empty(node->op)) return false;
    if (!(node->flags & GGML_TENSOR_FLAG_COMPUTE)) return false;
    if (ggml_nelements(node) == 0) return false;
    return true;
}

void graph_task(int ith, int nth, void * data) {
    const graph_run * run = static_cast<const graph_run *>(data);
    pool_task_scope   scope; // a CUSTOM callback may call the parallel service

    ggml_compute_params params = run->base;
    params.ith                 = ith;
    params.nth                 = nth;

    ggml_cpu_compute_state * state = params.state;
    const int                n     = (int) run->nodes->size();
    for (int i = 0; i < n; ++i) {
        ggml_cpu_compute_forward(&params, (*run->nodes)[i]);

        // Thread 0 decides before the barrier and records the node index, so every thread
        // leaves after the same node even if a kernel of the next node sets `aborted` early.
        if (ith == 0) {
            if (!state->aborted.load(std::memory_order_relaxed) && state->abort_callback &&
                state->abort_callback(state->abort_callback_data)) {
                state->aborted.store(true, std::memory_order_relaxed);
            }
            if (state->aborted.load(std::memory_order_relaxed)) {
                state->stop_at_node.store(i, std::memory_order_relaxed);
            }
        }
        ggml_threadpool_barrier(params.threadpool);
        if (i >= state->stop_at_node.load(std::memory_order_relaxed)) break;
    }
}

// Upstream honours a custom op's n_tasks only when the whole graph consists of such nodes
// (the graph-wide thread count is the max of the nodes' wishes); keep that behaviour.
int graph_thread_count(const std::vector<ggml_tensor *> & nodes, int n_threads) {
    int wanted = 0;
    for (const ggml_tensor * node : nodes) {
        if (node->op != GGML_OP_CUSTOM && !ggml_op_is_map_custom(node->op)) return n_threads;
        ggml_custom_op_params p;
        memcpy(&p, node->op_params, sizeof(p));
        if (p.n_tasks <= 0) return n_threads; // GGML_N_TASKS_MAX: all threads
        wanted = std::max(wanted, p.n_tasks);
    }
    return wanted > 0 ? std::min(wanted, n_threads) : n_threads;
}

ggml_threadpool * context_pool(cpu_backend_context * ctx) {
    if (ctx->external_pool) return ctx->external_pool;
    if (ctx->own_pool && ggml_threadpool_get_n_threads(ctx->own_pool) != ctx->n_threads) {
        ggml_threadpool_free(ctx->own_pool);
        ctx->own_pool = nullptr;
    }
    if (!ctx->own_pool) {
        ggml_threadpool_params params = ggml_threadpool_params_default(ctx->n_threads);
        ctx->own_pool                 = ggml_threadpool_new(&params);
    }
    return ctx->own_pool;
}

bool ensure_work_buffer(cpu_backend_context * ctx, size_t size) {
    if (size <= ctx->work_size) return true;
    void * p = nullptr;
    const size_t alloc = GGML_PAD(size, WORK_ALIGNMENT);
    if (posix_memalign(&p, WORK_ALIGNMENT, alloc) != 0 || p == nullptr) return false;
    free(ctx->work_data);
    ctx->work_data = p;
    ctx->work_size = alloc;
    return true;
}

// ---------------------------------------------------------------------------------------------
// Backend interface

const char * cpu_backend_get_name(ggml_backend_t backend) {
    (void) backend;
    return "CPU";
}

void cpu_backend_free(ggml_backend_t backend) {
    cpu_backend_context * ctx = static_cast<cpu_backend_context *>(backend->context);
    ggml_threadpool_free(ctx->own_pool);
    free(ctx->work_data);
    delete ctx;
    delete backend;
}

ggml_status cpu_backend_graph_compute(ggml_backend_t backend, ggml_cgraph * cgraph) {
    cpu_backend_context * ctx = static_cast<cpu_backend_context *>(backend->context);

    ggml_threadpool * pool      = nullptr;
    int               n_threads = 1;
    try {
        ctx->compute_nodes.clear();
        for (int i = 0; i < cgraph->n_nodes; ++i) {
            ggml_tensor * node = cgraph->nodes[i];
            if (node_is_computed(node)) ctx->compute_nodes.push_back(node);
        }
        if (ctx->compute_nodes.empty()) return GGML_STATUS_SUCCESS;

        pool = context_pool(ctx);
        if (!pool) return GGML_STATUS_ALLOC_FAILED;
        n_threads = std::min(ctx->n_threads, ggml_threadpool_get_n_threads(pool));
        n_threads = graph_thread_count(ctx->compute_nodes, n_threads);
    } catch (const std::bad_alloc &) {
        return GGML_STATUS_ALLOC_FAILED;
    } catch (...) {
        return GGML_STATUS_FAILED;
    }

    size_t work_size = 0;
    for (const ggml_tensor * node : ctx->compute_nodes) {
        work_size = std::max(work_size, ggml_cpu_op_work_size(node, n_threads));
    }
    if (!ensure_work_buffer(ctx, work_size)) {
        GGML_LOG_ERROR("%s: failed to allocate a %zu-byte work buffer\n", __func__, work_size);
        return GGML_STATUS_ALLOC_FAILED;
    }

    ctx->state.abort_callback      = ctx->abort_callback;
    ctx->state.abort_callback_data = ctx->abort_callback_data;
    ctx->state.aborted.store(false, std::memory_order_relaxed);
    ctx->state.stop_at_node.store(INT32_MAX, std::memory_order_relaxed);

    graph_run run;
    run.nodes            = &ctx->compute_nodes;
    run.base.ith         = 0;
    run.base.nth         = n_threads;
    run.base.wsize       = ctx->work_size;
    run.base.wdata       = ctx->work_data;
    run.base.threadpool  = pool;
    run.base.state       = &ctx->state;
    run.base.use_ref     = ctx->use_ref;

    ggml_threadpool_run(pool, n_threads, graph_task, &run);

    const bool aborted = ctx->state.aborted.load(std::memory_order_relaxed);
    ctx->state.aborted.store(false, std::memory_order_relaxed); // the backend stays usable
    return aborted ? GGML_STATUS_ABORTED : GGML_STATUS_SUCCESS;
}

const ggml_backend_i cpu_backend_iface = {
    .get_name         = cpu_backend_get_name,
    .free             = cpu_backend_free,
    .set_tensor_async = nullptr,
    .get_tensor_async = nullptr,
    .cpy_tensor_async = nullptr,
    .synchronize      = nullptr,
    .graph_compute    = cpu_backend_graph_compute,
    .event_record     = nullptr,
    .event_wait       = nullptr,
    .plan_begin       = nullptr, // computes synchronously: nothing to batch or capture
    .plan_end         = nullptr,
    .ext_step_end     = nullptr,
};

ggml_guid cpu_backend_guid = {0x5c, 0x2e, 0x8a, 0x41, 0x93, 0x07, 0x4f, 0xd6,
                               0xb1, 0x6a, 0x0e, 0x27, 0xc4, 0x58, 0x9d, 0x13};

cpu_backend_context * cpu_ctx(ggml_backend_t backend) {
    GGML_ASSERT(ggml_backend_is_cpu(backend) && "not a CPU backend");
    return static_cast<cpu_backend_context *>(backend->context);
}

// ---------------------------------------------------------------------------------------------
// Device

const char * cpu_dev_get_name(ggml_backend_dev_t dev) {
    (void) dev;
    return "CPU";
}

const char * cpu_dev_get_description(ggml_backend_dev_t dev) {
    (void) dev;
    return ggml_cpu_brand_string();
}

void cpu_dev_get_memory(ggml_backend_dev_t dev, size_t * free_mem, size_t * total_mem) {
    (void) dev;
    size_t total      = 0;
    const long pages  = sysconf(_SC_PHYS_PAGES);
    const long pagesz = sysconf(_SC_PAGE_SIZE);
    if (pages > 0 && pagesz > 0) total = (size_t) pages * (size_t) pagesz;
    // upstream reports total RAM as "free" too: the OS pages memory on demand
    if (free_mem) *free_mem = total;
    if (total_mem) *total_mem = total;
}

enum ggml_backend_dev_type cpu_dev_get_type(ggml_backend_dev_t dev) {
    (void) dev;
    return GGML_BACKEND_DEVICE_TYPE_CPU;
}

void cpu_dev_get_props(ggml_backend_dev_t dev, ggml_backend_dev_props * props) {
    memset(props, 0, sizeof(*props));
    props->name        = cpu_dev_get_name(dev);
    props->description = cpu_dev_get_description(dev);
    props->type        = cpu_dev_get_type(dev);
    props->device_id   = nullptr;
    cpu_dev_get_memory(dev, &props->memory_free, &props->memory_total);
    props->caps.async                = false;
    props->caps.host_buffer          = false;
    props->caps.buffer_from_host_ptr = true;
    props->caps.events               = false;
    props->caps.mmap_support         = true;
}

ggml_backend_t cpu_dev_init_backend(ggml_backend_dev_t dev, const char * params) {
    (void) dev;
    (void) params;
    return ggml_backend_cpu_init();
}

ggml_backend_buffer_type_t cpu_dev_get_buffer_type(ggml_backend_dev_t dev) {
    (void) dev;
    return ggml_backend_cpu_buffer_type();
}

ggml_backend_buffer_t cpu_dev_buffer_from_host_ptr(ggml_backend_dev_t dev, void * ptr, size_t size,
                                                   size_t max_tensor_size) {
    (void) dev;
    (void) max_tensor_size;
    return ggml_backend_cpu_buffer_from_ptr(ptr, size);
}

bool cpu_dev_supports_op(ggml_backend_dev_t dev, const ggml_tensor * op) {
    (void) dev;
    return ggml_cpu_op_supported(op);
}

bool cpu_dev_supports_buft(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft) {
    (void) dev;
    return ggml_backend_buft_is_host(buft);
}

const ggml_backend_device_i cpu_device_iface = {
    /* .get_name             = */ cpu_dev_get_name,
    /* .get_description      = */ cpu_dev_get_description,
    /* .get_memory           = */ cpu_dev_get_memory,
    /* .get_type             = */ cpu_dev_get_type,
    /* .get_props            = */ cpu_dev_get_props,
    /* .init_backend         = */ cpu_dev_init_backend,
    /* .get_buffer_type      = */ cpu_dev_get_buffer_type,
    /* .get_host_buffer_type = */ nullptr,
    /* .buffer_from_host_ptr = */ cpu_dev_buffer_from_host_ptr,
    /* .supports_op          = */ cpu_dev_supports_op,
    /* .supports_buft        = */ cpu_dev_supports_buft,
    /* .offload_op           = */ nullptr,
    /* .event_new            = */ nullptr,
    /* .event_free           = */ nullptr,
    /* .event_synchronize    = */ nullptr,
};

// ---------------------------------------------------------------------------------------------
// Registry entry

const char * cpu_reg_get_name(ggml_backend_reg_t reg) {
    (void) reg;
    return "CPU";
}

size_t cpu_reg_get_device_count(ggml_backend_reg_t reg) {
    (void) reg;
    return 1;
}

ggml_backend_dev_t cpu_reg_get_device(ggml_backend_reg_t reg, size_t index);

ggml_backend_feature * cpu_get_features(ggml_backend_reg_t reg) {
    (void) reg;
    static std::vector<ggml_backend_feature> features = [] {
        std::vector<ggml_backend_feature> f;
        const ggml_cpu_features & cf = ggml_cpu_get_features();
        // upstream's names and order, so a client's system-info line reads the same
        if (cf.sse3) f.push_back({"SSE3", "1"});
        if (cf.ssse3) f.push_back({"SSSE3", "1"});
        if (cf.avx) f.push_back({"AVX", "1"});
        if (cf.avx_vnni) f.push_back({"AVX_VNNI", "1"});
        if (ggml_cpu_has_avx2()) f.push_back({"AVX2", "1"});
        if (cf.f16c) f.push_back({"F16C", "1"});
        if (cf.fma) f.push_back({"FMA", "1"});
        if (cf.bmi2) f.push_back({"BMI2", "1"});
        if (ggml_cpu_has_avx512()) f.push_back({"AVX512", "1"});
        if (cf.avx512_vbmi) f.push_back({"AVX512_VBMI", "1"});
        if (ggml_cpu_has_avx512_vnni()) f.push_back({"AVX512_VNNI", "1"});
        if (ggml_cpu_has_avx512_bf16()) f.push_back({"AVX512_BF16", "1"});
        if (ggml_cpu_has_amx_int8()) f.push_back({"AMX_INT8", "1"});
        if (ggml_cpu_has_amx_bf16()) f.push_back({"AMX_BF16", "1"});
        if (cf.neon) f.push_back({"NEON", "1"});
        if (cf.neon) f.push_back({"ARM_FMA", "1"});
        if (cf.fp16_va) f.push_back({"FP16_VA", "1"});
        if (cf.dotprod) f.push_back({"DOTPROD", "1"});
        if (cf.i8mm) f.push_back({"MATMUL_INT8", "1"});
        if (cf.sve) f.push_back({"SVE", "1"});
        if (cf.sve) {
            static const std::string sve_cnt = std::to_string(cf.sve_bytes);
            f.push_back({"SVE_CNT", sve_cnt.c_str()});
        }
        if (cf.sme) f.push_back({"SME", "1"});
        f.push_back({nullptr, nullptr});
        return f;
    }();
    return features.data();
}

// ---------------------------------------------------------------------------------------------
// Service ggml_ext_cpu_parallel_v1: extension kernels run their work on the backend's pool

// A user abort callback may be expensive (it often takes a lock or reads a clock); tasks may
// ask per small chunk from every thread, so the callback runs at most about once per interval.
constexpr int64_t SVC_POLL_INTERVAL_NS = 1000 * 1000;

int64_t steady_now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Polls the callback now (serialized); true if it asked to stop.
bool svc_poll_now(cpu_backend_context * ctx) {
    if (!ctx->abort_callback) return false;
    if (ctx->svc_poll_lock.exchange(true, std::memory_order_acquire)) return false; // someone else polls
    const bool stop = ctx->abort_callback(ctx->abort_callback_data);
    ctx->svc_last_poll_ns.store(steady_now_ns(), std::memory_order_relaxed);
    if (stop) ctx->svc_aborted.store(true, std::memory_order_release);
    ctx->svc_poll_lock.store(false, std::memory_order_release);
    return stop;
}

bool svc_should_abort(ggml_backend_t backend) {
    if (!ggml_backend_is_cpu(backend)) return false;
    cpu_backend_context * ctx = static_cast<cpu_backend_context *>(backend->context);
    if (ctx->svc_aborted.load(std::memory_order_acquire)) return true;
    if (!ctx->abort_callback) return false;
    const int64_t now = steady_now_ns();
    if (now - ctx->svc_last_poll_ns.load(std::memory_order_relaxed) < SVC_POLL_INTERVAL_NS) return false;
    svc_poll_now(ctx);
    return ctx->svc_aborted.load(std::memory_order_acquire);
}

int svc_n_threads(ggml_backend_t backend) {
    if (!ggml_backend_is_cpu(backend)) return 0;
    cpu_backend_context * ctx = static_cast<cpu_backend_context *>(backend->context);
    // what a run gets (the executor's rule), without creating the lazy own pool
    if (ctx->external_pool) return std::max(1, std::min(ctx->n_threads, ggml_threadpool_get_n_threads(ctx->external_pool)));
    return ctx->n_threads;
}

struct svc_run {
    ggml_ext_cpu_task_t task;
    void *              data;
};

void svc_task(int ith, int nth, void * data) {
    const svc_run * run = static_cast<const svc_run *>(data);
    pool_task_scope scope;
    run->task(ith, nth, run->data);
}

ggml_status svc_parallel_for(ggml_backend_t backend, ggml_ext_cpu_task_t task, void * data) {
    if (!ggml_backend_is_cpu(backend) || !task) {
        GGML_LOG_ERROR("%s: needs a CPU backend and a task\n", __func__);
        return GGML_STATUS_FAILED;
    }
    cpu_backend_context * ctx = static_cast<cpu_backend_context *>(backend->context);

    if (tl_in_pool_task) {
        // nested inside a run: the outer run owns the abort flag and the pool; stay on this thread
        if (svc_should_abort(backend)) return GGML_STATUS_ABORTED;
        task(0, 1, data);
        return svc_should_abort(backend) ? GGML_STATUS_ABORTED : GGML_STATUS_SUCCESS;
    }

    ctx->svc_aborted.store(false, std::memory_order_relaxed);
    if (svc_poll_now(ctx)) {
        ctx->svc_aborted.store(false, std::memory_order_relaxed); // the backend stays usable
        return GGML_STATUS_ABORTED;
    }

    ggml_threadpool * pool = nullptr;
    try {
        pool = context_pool(ctx);
    } catch (...) {
        pool = nullptr;
    }
    if (!pool) return GGML_STATUS_ALLOC_FAILED;
    const int n_threads = std::max(1, std::min(ctx->n_threads, ggml_threadpool_get_n_threads(pool)));

    svc_run run{task, data};
    ggml_threadpool_run(pool, n_threads, svc_task, &run);

    const bool aborted = ctx->svc_aborted.load(std::memory_order_acquire);
    ctx->svc_aborted.store(false, std::memory_order_relaxed);
    return aborted ? GGML_STATUS_ABORTED : GGML_STATUS_SUCCESS;
}

const ggml_ext_cpu_parallel_v1 cpu_parallel_service = {
    /* .version      = */ 1,
    /* .parallel_for = */ svc_parallel_for,
    /* .should_abort = */ svc_should_abort,
    /* .n_threads    = */ svc_n_threads,
};

// Service ggml_ext_cpu_unary_v1: a fused extension kernel that applies an activation itself
// must produce the bits of the UNARY node it replaces, fast path or portable (use_ref). It runs
// the node's own kernel on a one-row tensor pair describing x and y, on the calling thread
// (nth 1, no compute state: nothing to poll, no barrier), so there is no second copy of the
// vector math to drift from the graph's.
bool svc_unary_offered(ggml_unary_op op) {
    switch (op) {
        case GGML_UNARY_OP_ABS:
        case GGML_UNARY_OP_SGN:
        case GGML_UNARY_OP_NEG:
        case GGML_UNARY_OP_STEP:
        case GGML_UNARY_OP_TANH:
        case GGML_UNARY_OP_ELU:
        case GGML_UNARY_OP_RELU:
        case GGML_UNARY_OP_SIGMOID:
        case GGML_UNARY_OP_GELU:
        case GGML_UNARY_OP_GELU_QUICK:
        case GGML_UNARY_OP_SILU:
        case GGML_UNARY_OP_HARDSWISH:
        case GGML_UNARY_OP_HARDSIGMOID:
        case GGML_UNARY_OP_EXP:
        case GGML_UNARY_OP_EXPM1:
        case GGML_UNARY_OP_SOFTPLUS:
        case GGML_UNARY_OP_GELU_ERF:
        case GGML_UNARY_OP_FLOOR:
        case GGML_UNARY_OP_CEIL:
        case GGML_UNARY_OP_ROUND:
        case GGML_UNARY_OP_TRUNC: return true;
        default: return false; // XIELU has parameters of its own
    }
}

bool svc_unary_apply_f32(ggml_backend_t backend, ggml_unary_op op, int64_t n, const float * x, float * y) {
    if (!ggml_backend_is_cpu(backend) || !svc_unary_offered(op) || n < 0 || (n > 0 && (!x || !y))) return false;
    if (n == 0) return true;
    const cpu_backend_context * ctx = static_cast<const cpu_backend_context *>(backend->context);

    ggml_tensor src{};
    src.type  = GGML_TYPE_F32;
    src.op    = GGML_OP_NONE;
    src.ne[0] = n;
    src.ne[1] = src.ne[2] = src.ne[3] = 1;
    src.nb[0] = sizeof(float);
    src.nb[1] = src.nb[2] = src.nb[3] = (size_t) n * sizeof(float);
    src.data  = const_cast<float *>(x); // read only
    ggml_tensor dst = src;
    dst.op          = GGML_OP_UNARY;
    dst.op_params[0] = (int32_t) op;
    dst.src[0]      = &src;
    dst.data        = y;

    ggml_compute_params params{};
    params.ith     = 0;
    params.nth     = 1;
    params.use_ref = ctx->use_ref;
    ggml_cpu_op_unary(&params, &dst);
    return true;
}

const ggml_ext_cpu_unary_v1 cpu_unary_service = {
    /* .version   = */ 1,
    /* .apply_f32 = */ svc_unary_apply_f32,
};

const ggml_ext_cpu_isa_v1 cpu_isa_service = {
    /* .version      = */ 1,
    /* .active_level = */ ggml_cpu_get_isa,
    /* .can_use      = */ ggml_cpu_isa_can_use,
};

void * cpu_reg_get_proc_address(ggml_backend_reg_t reg, const char * name) {
    (void) reg;
    if (!name) return nullptr;
    struct entry {
        const char * name;
        void *       fn;
    };
    static const entry table[] = {
        {"ggml_backend_set_n_threads", (void *) ggml_backend_cpu_set_n_threads},
        {"ggml_backend_set_abort_callback", (void *) ggml_backend_cpu_set_abort_callback},
        {"ggml_backend_cpu_set_use_ref", (void *) ggml_backend_cpu_set_use_ref},
        {"ggml_threadpool_new", (void *) ggml_threadpool_new},
        {"ggml_threadpool_free", (void *) ggml_threadpool_free},
        {"ggml_backend_cpu_set_threadpool", (void *) ggml_backend_cpu_set_threadpool},
        {"ggml_backend_get_features", (void *) cpu_get_features},
        {GGML_EXT_CPU_PARALLEL_V1, (void *) &cpu_parallel_service},
        {GGML_EXT_CPU_UNARY_V1, (void *) &cpu_unary_service},
        {GGML_EXT_CPU_ISA_V1, (void *) &cpu_isa_service},
    };
    for (const entry & e : table) {
        if (strcmp(e.name, name) == 0) return e.fn;
    }
    return nullptr;
}

const ggml_backend_reg_i cpu_reg_iface = {
    /* .get_name         = */ cpu_reg_get_name,
    /* .get_device_count = */ cpu_reg_get_device_count,
    /* .get_device       = */ cpu_reg_get_device,
    /* .get_proc_address = */ cpu_reg_get_proc_address,
};

ggml_backend_reg cpu_reg = {
    /* .api_version = */ GGML_BACKEND_API_VERSION,
    /* .iface       = */ cpu_reg_iface,
    /* .context     = */ nullptr,
};

ggml_backend_device cpu_device = {
    /* .iface   = */ cpu_device_iface,
    /* .reg     = */ &cpu_reg,
    /* .context = */ nullptr,
};

ggml_backend_dev_t cpu_reg_get_device(ggml_backend_reg_t reg, size_t index) {
    (void) reg;
    GGML_ASSERT(index == 0 && "the CPU registry has one device");
    return &cpu_device;
}

// ---------------------------------------------------------------------------------------------
// Host tensor element access

void * element_ptr(const ggml_tensor * t, int i) {
    GGML_ASSERT(t != nullptr);
    GGML_ASSERT(t->data != nullptr && "tensor has no data");
    const ggml_backend_buffer * buf = t->buffer ? t->buffer : (t->view_src ? t->view_src->buffer : nullptr);
    GGML_ASSERT((buf == nullptr || ggml_backend_buffer_is_host(const_cast<ggml_backend_buffer *>(buf))) &&
                "tensor is not in host memory");
    GGML_ASSERT(i >= 0 && i < ggml_nelements(t) && "element index out of range");
    int64_t i0, i1, i2, i3;
    ggml_unravel_index(t, i, &i0, &i1, &i2, &i3);
    return (char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

} // namespace

extern "C" {

// ---------------------------------------------------------------------------------------------
// Backend API

ggml_backend_t ggml_backend_cpu_init(void) {
    cpu_backend_context * ctx = new (std::nothrow) cpu_backend_context();
    if (!ctx) return nullptr;
    ctx->n_threads = default_n_threads();

    ggml_backend * backend = new (std::nothrow) ggml_backend();
    if (!backend) {
        delete ctx;
        return nullptr;
    }
    backend->guid    = &cpu_backend_guid;
    backend->iface   = cpu_backend_iface;
    backend->device  = &cpu_device;
    backend->context = ctx;
    return backend;
}

bool ggml_backend_is_cpu(ggml_backend_t backend) {
    return backend != nullptr && backend->guid != nullptr &&
           ggml_guid_matches(backend->guid, &cpu_backend_guid);
}

void ggml_backend_cpu_set_n_threads(ggml_backend_t backend_cpu, int n_threads) {
    cpu_backend_context * ctx = cpu_ctx(backend_cpu);
    GGML_ASSERT(n_threads >= 1 && n_threads <= GGML_MAX_N_THREADS && "n_threads out of range");
    if (ctx->n_threads == n_threads) return;
    ctx->n_threads = n_threads;
    // drop the old pool now so its idle threads go away; the next compute makes a new one
    ggml_threadpool_free(ctx->own_pool);
    ctx->own_pool = nullptr;
}

int ggml_backend_cpu_get_n_threads(ggml_backend_t backend_cpu) { return cpu_ctx(backend_cpu)->n_threads; }

void ggml_backend_cpu_set_threadpool(ggml_backend_t backend_cpu, ggml_threadpool_t threadpool) {
    cpu_backend_context * ctx = cpu_ctx(backend_cpu);
    if (ctx->external_pool && ctx->external_pool != threadpool) {
        // as upstream: the replaced pool stops polling so it does not compete for CPUs
        ggml_threadpool_pause(ctx->external_pool);
    }
    ctx->external_pool = threadpool;
    if (threadpool) {
        ggml_threadpool_free(ctx->own_pool);
        ctx->own_pool = nullptr;
    }
}

void ggml_backend_cpu_set_abort_callback(ggml_backend_t backend_cpu, ggml_abort_callback abort_callback,
                                         void * abort_callback_data) {
    cpu_backend_context * ctx = cpu_ctx(backend_cpu);
    ctx->abort_callback       = abort_callback;
    ctx->abort_callback_data  = abort_callback_data;
}

void ggml_backend_cpu_set_use_ref(ggml_backend_t backend_cpu, bool use_ref) { cpu_ctx(backend_cpu)->use_ref = use_ref; }

bool ggml_backend_cpu_get_use_ref(ggml_backend_t backend_cpu) { return cpu_ctx(backend_cpu)->use_ref; }

ggml_backend_reg_t ggml_backend_cpu_reg(void) { return &cpu_reg; }

// ---------------------------------------------------------------------------------------------
// Scalar helpers

struct ggml_tensor * ggml_new_i32(struct ggml_context * ctx, int32_t value) {
    // the value is written right away, so the tensor needs memory even in a no_alloc context
    const bool no_alloc = ggml_get_no_alloc(ctx);
    ggml_set_no_alloc(ctx, false);
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1);
    ggml_set_no_alloc(ctx, no_alloc);
    ggml_set_i32_1d(t, 0, value);
    return t;
}

struct ggml_tensor * ggml_new_f32(struct ggml_context * ctx, float value) {
    const bool no_alloc = ggml_get_no_alloc(ctx);
    ggml_set_no_alloc(ctx, false);
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1);
    ggml_set_no_alloc(ctx, no_alloc);
    ggml_set_f32_1d(t, 0, value);
    return t;
}

float ggml_get_f32_1d(const struct ggml_tensor * tensor, int i) {
    return ggml_load_f32(tensor->type, element_ptr(tensor, i));
}

void ggml_set_f32_1d(const struct ggml_tensor * tensor, int i, float value) {
    ggml_store_f32(tensor->type, element_ptr(tensor, i), value);
}

int32_t ggml_get_i32_1d(const struct ggml_tensor * tensor, int i) {
    const void * p = element_ptr(tensor, i);
    switch (tensor->type) {
        case GGML_TYPE_I8: return *(const int8_t *) p;
        case GGML_TYPE_I16: return *(const int16_t *) p;
        case GGML_TYPE_I32: return *(const int32_t *) p;
        default: return (int32_t) ggml_load_f32(tensor->type, p);
    }
}

void ggml_set_i32_1d(const struct ggml_tensor * tensor, int i, int32_t value) {
    void * p = element_ptr(tensor, i);
    switch (tensor->type) {
        case GGML_TYPE_I8: *(int8_t *) p = (int8_t) value; break;
        case GGML_TYPE_I16: *(int16_t *) p = (int16_t) value; break;
        case GGML_TYPE_I32: *(int32_t *) p = value; break;
        default: ggml_store_f32(tensor->type, p, (float) value); break;
    }
}

// ---------------------------------------------------------------------------------------------
// Row converters (portable for now; the fast-kernel work may route these to SIMD)

void ggml_cpu_fp32_to_fp16(const float * x, ggml_fp16_t * y, int64_t n) { ggml_fp32_to_fp16_row(x, y, n); }
void ggml_cpu_fp16_to_fp32(const ggml_fp16_t * x, float * y, int64_t n) { ggml_fp16_to_fp32_row(x, y, n); }
void ggml_cpu_fp32_to_bf16(const float * x, ggml_bf16_t * y, int64_t n) { ggml_fp32_to_bf16_row(x, y, n); }
void ggml_cpu_bf16_to_fp32(const ggml_bf16_t * x, float * y, int64_t n) { ggml_bf16_to_fp32_row(x, y, n); }

} // extern "C"

// ---------------------------------------------------------------------------------------------
// Kernel-side hooks (cpu-ops.h)

void ggml_cpu_barrier(const struct ggml_compute_params * params) { ggml_threadpool_barrier(params->threadpool); }

bool ggml_cpu_should_abort(const struct ggml_compute_params * params) {
    ggml_cpu_compute_state * state = params->state;
    if (!state) return false;
    if (params->ith == 0 && state->abort_callback && !state->aborted.load(std::memory_order_relaxed)) {
        // kernels call this per chunk, which can be far more often than a user callback expects;
        // polling about once a millisecond keeps the abort latency low at negligible cost
        using clock = std::chrono::steady_clock;
        thread_local clock::time_point last_poll;
        const clock::time_point now = clock::now();
        if (now - last_poll >= std::chrono::milliseconds(1)) {
            last_poll = now;
            if (state->abort_callback(state->abort_callback_data)) {
                state->aborted.store(true, std::memory_order_relaxed);
            }
        }
    }
    return state->aborted.load(std::memory_order_relaxed);
}
