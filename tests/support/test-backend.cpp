// test-backend.cpp — the "TEST" device family (see test-backend.h).

#include "test-backend.h"

#include "backend/ggml-backend-impl.h"
#include "ggml-cpu.h"
#include "ggml-ext.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

namespace test_backend {
namespace {

constexpr size_t ALIGNMENT = 64;

struct device_ctx {
    std::string                      name;
    native_fn                        native;
    ggml_backend_buffer_type         buft;
};

struct backend_ctx {
    ggml_backend_t cpu    = nullptr;
    stats          st;
    bool           replay = false; // plan_begin answers REPLAYED
};

// ---------------------------------------------------------------------------------------------
// Buffers: separate host allocations that ggml treats as device memory

struct buffer_ctx {
    void * data = nullptr;
};

void buf_free(ggml_backend_buffer_t buffer) {
    auto * ctx = static_cast<buffer_ctx *>(buffer->context);
    free(ctx->data);
    delete ctx;
}

void * buf_get_base(ggml_backend_buffer_t buffer) {
    return static_cast<buffer_ctx *>(buffer->context)->data;
}

void buf_memset_tensor(ggml_backend_buffer_t, struct ggml_tensor * tensor, uint8_t value, size_t offset,
                       size_t size) {
    memset((char *) tensor->data + offset, value, size);
}

void buf_set_tensor(ggml_backend_buffer_t, struct ggml_tensor * tensor, const void * data, size_t offset,
                    size_t size) {
    memcpy((char *) tensor->data + offset, data, size);
}

void buf_get_tensor(ggml_backend_buffer_t, const struct ggml_tensor * tensor, void * data, size_t offset,
                    size_t size) {
    memcpy(data, (const char *) tensor->data + offset, size);
}

void buf_clear(ggml_backend_buffer_t buffer, uint8_t value) {
    auto * ctx = static_cast<buffer_ctx *>(buffer->context);
    if (ctx->data) memset(ctx->data, value, buffer->size);
}

const ggml_backend_buffer_i buffer_iface = {
    /* .free_buffer   = */ buf_free,
    /* .get_base      = */ buf_get_base,
    /* .init_tensor   = */ nullptr,
    /* .memset_tensor = */ buf_memset_tensor,
    /* .set_tensor    = */ buf_set_tensor,
    /* .get_tensor    = */ buf_get_tensor,
    /* .cpy_tensor    = */ nullptr, // copies go through the generic staging path
    /* .clear         = */ buf_clear,
    /* .reset         = */ nullptr,
};

const char * buft_get_name(ggml_backend_buffer_type_t) {
    return "TEST";
}

ggml_backend_buffer_t buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    auto * ctx = new buffer_ctx();
    if (size > 0) {
        ctx->data = aligned_alloc(ALIGNMENT, (size + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT);
        if (ctx->data == nullptr) {
            delete ctx;
            return nullptr;
        }
    }
    return ggml_backend_buffer_init(buft, buffer_iface, ctx, size);
}

size_t buft_get_alignment(ggml_backend_buffer_type_t) {
    return ALIGNMENT;
}

bool buft_is_host(ggml_backend_buffer_type_t) {
    return false; // ggml must not read it directly: the scheduler has to copy
}

const ggml_backend_buffer_type_i buft_iface = {
    /* .get_name       = */ buft_get_name,
    /* .alloc_buffer   = */ buft_alloc_buffer,
    /* .get_alignment  = */ buft_get_alignment,
    /* .get_max_size   = */ nullptr,
    /* .get_alloc_size = */ nullptr,
    /* .is_host        = */ buft_is_host,
};

// ---------------------------------------------------------------------------------------------
// Backend

backend_ctx * bctx(ggml_backend_t backend) {
    return static_cast<backend_ctx *>(backend->context);
}

const char * backend_get_name(ggml_backend_t backend) {
    return static_cast<device_ctx *>(backend->device->context)->name.c_str();
}

void backend_free(ggml_backend_t backend) {
    ggml_backend_free(bctx(backend)->cpu);
    delete bctx(backend);
    delete backend;
}

void backend_synchronize(ggml_backend_t backend) {
    bctx(backend)->st.synchronizes++;
}

enum ggml_status backend_graph_compute(ggml_backend_t backend, struct ggml_cgraph * cgraph) {
    backend_ctx * ctx = bctx(backend);
    ctx->st.graph_computes++;
    ctx->st.calls.push_back("graph");
    for (int i = 0; i < ggml_graph_n_nodes(cgraph); i++) {
        struct ggml_tensor * node = ggml_graph_node(cgraph, i);
        const bool empty = node->op == GGML_OP_NONE || node->op == GGML_OP_VIEW || node->op == GGML_OP_RESHAPE ||
                           node->op == GGML_OP_PERMUTE || node->op == GGML_OP_TRANSPOSE;
        if (!empty && (node->flags & GGML_TENSOR_FLAG_COMPUTE)) {
            ctx->st.nodes_computed++;
            ctx->st.node_names.push_back(node->name);
        }
    }
    // the data pointers are host memory: the CPU kernels compute real results
    return ctx->cpu->iface.graph_compute(ctx->cpu, cgraph);
}

// Recording plan hooks (enable_plan_hooks)
ggml_backend_plan_action backend_plan_begin(ggml_backend_t backend, const ggml_backend_plan_info * info) {
    backend_ctx * ctx = bctx(backend);
    plan_record   rec;
    rec.identity            = info->plan_identity;
    rec.i_start             = info->i_start;
    rec.i_end               = info->i_end;
    rec.n_ext_steps         = info->n_ext_steps;
    rec.all_capture_safe    = info->all_ext_capture_safe;
    rec.all_replay_reusable = info->all_ext_replay_reusable;
    rec.has_workspace       = info->workspace != nullptr;
    rec.workspace_bytes     = info->workspace_bytes;
    for (int i = 0; i < info->n_steps; i++) {
        const ggml_backend_plan_step & s = info->steps[i];
        rec.steps.push_back({ s.first, s.n_nodes, s.kernel ? s.kernel->name : "", s.flags, s.workspace });
    }
    ctx->st.plans.push_back(std::move(rec));
    ctx->st.calls.push_back("begin");
    return ctx->replay ? GGML_BACKEND_PLAN_REPLAYED : GGML_BACKEND_PLAN_EXECUTE;
}

ggml_status backend_plan_end(ggml_backend_t backend) {
    bctx(backend)->st.calls.push_back("end");
    return GGML_STATUS_SUCCESS;
}

ggml_status backend_ext_step_end(ggml_backend_t backend) {
    bctx(backend)->st.calls.push_back("ext_step_end");
    return GGML_STATUS_SUCCESS;
}

const ggml_backend_i backend_iface = {
    .get_name         = backend_get_name,
    .free             = backend_free,
    .set_tensor_async = nullptr,
    .get_tensor_async = nullptr,
    .cpy_tensor_async = nullptr,
    .synchronize      = backend_synchronize,
    .graph_compute    = backend_graph_compute,
    .event_record     = nullptr,
    .event_wait       = nullptr,
    .plan_begin       = nullptr, // tests install recording hooks (enable_plan_hooks)
    .plan_end         = nullptr,
    .ext_step_end     = nullptr,
};

ggml_guid backend_guid = { 0x7e, 0x57, 0xba, 0xc4, 0x3e, 0x11, 0x4a, 0x2b, 0x9c, 0x0d, 0x55, 0x6f, 0x21, 0x8e,
                           0x43, 0x90 };

// ---------------------------------------------------------------------------------------------
// Device and family

device_ctx * dctx(ggml_backend_dev_t dev) {
    return static_cast<device_ctx *>(dev->context);
}

const char * dev_get_name(ggml_backend_dev_t dev) {
    return dctx(dev)->name.c_str();
}

const char * dev_get_description(ggml_backend_dev_t) {
    return "test device (host memory behind a device buffer type)";
}

void dev_get_memory(ggml_backend_dev_t, size_t * free_mem, size_t * total_mem) {
    if (free_mem) *free_mem = (size_t) 1 << 30;
    if (total_mem) *total_mem = (size_t) 1 << 30;
}

enum ggml_backend_dev_type dev_get_type(ggml_backend_dev_t) {
    return GGML_BACKEND_DEVICE_TYPE_GPU;
}

void dev_get_props(ggml_backend_dev_t dev, struct ggml_backend_dev_props * props) {
    memset(props, 0, sizeof(*props));
    props->name        = dev_get_name(dev);
    props->description = dev_get_description(dev);
    props->type        = GGML_BACKEND_DEVICE_TYPE_GPU;
    dev_get_memory(dev, &props->memory_free, &props->memory_total);
}

ggml_backend_t dev_init_backend(ggml_backend_dev_t dev, const char *) {
    return init(dev);
}

ggml_backend_buffer_type_t dev_get_buffer_type(ggml_backend_dev_t dev) {
    return &dctx(dev)->buft;
}

bool is_view_or_none(enum ggml_op op) {
    return op == GGML_OP_NONE || op == GGML_OP_VIEW || op == GGML_OP_RESHAPE || op == GGML_OP_PERMUTE ||
           op == GGML_OP_TRANSPOSE;
}

bool dev_supports_op(ggml_backend_dev_t dev, const struct ggml_tensor * op) {
    if (is_view_or_none(op->op)) return true;
    // it runs ops through the CPU kernels, so it can never claim more than the CPU natively can
    ggml_backend_dev_t cpu = ggml_backend_reg_dev_get(ggml_backend_cpu_reg(), 0);
    return dctx(dev)->native(op) && cpu->iface.supports_op(cpu, op);
}

bool dev_supports_buft(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft) {
    return buft == &dctx(dev)->buft;
}

const ggml_backend_device_i device_iface = {
    /* .get_name             = */ dev_get_name,
    /* .get_description      = */ dev_get_description,
    /* .get_memory           = */ dev_get_memory,
    /* .get_type             = */ dev_get_type,
    /* .get_props            = */ dev_get_props,
    /* .init_backend         = */ dev_init_backend,
    /* .get_buffer_type      = */ dev_get_buffer_type,
    /* .get_host_buffer_type = */ nullptr,
    /* .buffer_from_host_ptr = */ nullptr,
    /* .supports_op          = */ dev_supports_op,
    /* .supports_buft        = */ dev_supports_buft,
    /* .offload_op           = */ nullptr,
    /* .event_new            = */ nullptr,
    /* .event_free           = */ nullptr,
    /* .event_synchronize    = */ nullptr,
};

// The family lists every device made so far.
std::mutex                      g_mutex;
std::vector<ggml_backend_dev_t> g_devices; // kept alive until exit (registry keys)
std::vector<std::unique_ptr<ggml_backend_device>> g_device_objs;
std::vector<std::unique_ptr<device_ctx>>          g_device_ctxs;

const char * reg_get_name(ggml_backend_reg_t) {
    return "TEST";
}

size_t reg_get_device_count(ggml_backend_reg_t) {
    std::lock_guard<std::mutex> lock(g_mutex);
    return g_devices.size();
}

ggml_backend_dev_t reg_get_device(ggml_backend_reg_t, size_t index) {
    std::lock_guard<std::mutex> lock(g_mutex);
    return index < g_devices.size() ? g_devices[index] : nullptr;
}

const ggml_backend_reg_i reg_iface = {
    /* .get_name         = */ reg_get_name,
    /* .get_device_count = */ reg_get_device_count,
    /* .get_device       = */ reg_get_device,
    /* .get_proc_address = */ nullptr,
};

ggml_backend_reg test_reg = { GGML_BACKEND_API_VERSION, reg_iface, nullptr };

// CPU clones
std::vector<std::unique_ptr<ggml_backend_device>> g_cpu_clones;

} // namespace

ggml_backend_dev_t new_device(native_fn native, const char * name) {
    auto * ctx   = new device_ctx();
    ctx->name    = name;
    ctx->native  = std::move(native);
    auto * dev   = new ggml_backend_device{ device_iface, &test_reg, ctx };
    ctx->buft    = ggml_backend_buffer_type{ buft_iface, dev, nullptr };
    std::lock_guard<std::mutex> lock(g_mutex);
    g_devices.push_back(dev);
    g_device_objs.emplace_back(dev);
    g_device_ctxs.emplace_back(ctx);
    return dev;
}

ggml_backend_dev_t new_device(std::set<enum ggml_op> ops, const char * name) {
    return new_device([ops](const struct ggml_tensor * op) { return ops.count(op->op) != 0; }, name);
}

ggml_backend_t init(ggml_backend_dev_t dev) {
    auto * ctx = new backend_ctx();
    ctx->cpu   = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(ctx->cpu, 1);
    return new ggml_backend{ &backend_guid, backend_iface, dev, ctx };
}

stats & get_stats(ggml_backend_t backend) {
    return bctx(backend)->st;
}

void reset_stats(ggml_backend_t backend) {
    bctx(backend)->st = stats();
}

void enable_plan_hooks(ggml_backend_t backend, bool replay) {
    bctx(backend)->replay       = replay;
    backend->iface.plan_begin   = backend_plan_begin;
    backend->iface.plan_end     = backend_plan_end;
    backend->iface.ext_step_end = backend_ext_step_end;
}

bool is_test_buft(ggml_backend_buffer_type_t buft) {
    return buft != nullptr && buft->iface.get_name == buft_get_name;
}

ggml_backend_dev_t new_cpu_device() {
    ggml_backend_dev_t real = ggml_backend_reg_dev_get(ggml_backend_cpu_reg(), 0);
    std::lock_guard<std::mutex> lock(g_mutex);
    g_cpu_clones.push_back(std::make_unique<ggml_backend_device>(*real));
    return g_cpu_clones.back().get();
}

ggml_backend_t init_cpu(ggml_backend_dev_t cpu_clone) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    cpu->device        = cpu_clone;
    return cpu;
}

} // namespace test_backend
