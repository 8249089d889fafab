// vk-backend.cpp — the Vulkan backend object: graph_compute records every computed node of the
// graph into the backend's command stream (vk-commands.cpp) and, outside a plan batch, submits
// it once and waits (compute is synchronous, as are tensor transfers). Inside a scheduled plan
// (the plan hooks below) native fragments and extension work share the recording, which is
// submitted when the plan returns.

#include "vk-internal.h"

#include <cstring>
#include <new>

namespace {

struct vk_backend_ctx {
    vk_device * dev = nullptr;
    vk_stream   stream;
    std::string name;
};

ggml_guid vk_guid = {0x3a, 0x91, 0x0c, 0x7e, 0x54, 0x2d, 0x4b, 0x88, 0x9f, 0x13, 0x6a, 0xe2, 0x07, 0xc5, 0xb4, 0x21};

vk_backend_ctx * ctx_of(ggml_backend_t b) { return static_cast<vk_backend_ctx *>(b->context); }

const char * backend_get_name(ggml_backend_t b) { return ctx_of(b)->name.c_str(); }

void backend_free(ggml_backend_t b) {
    vk_backend_ctx * ctx = ctx_of(b);
    vk_stream_destroy(ctx->stream);
    delete ctx;
    delete b;
}

// FLOPs of the nodes that dominate device time (for the batch's FLOP threshold); 0 for the rest.
uint64_t node_flops(const ggml_tensor * node) {
    switch (node->op) {
        case GGML_OP_MUL_MAT: // 2 * M * N * K over the batch
            return 2ull * (uint64_t) ggml_nelements(node) * (uint64_t) node->src[0]->ne[0];
        case GGML_OP_FLASH_ATTN_EXT: { // QK^T and PV: 2 * (D + Dv) * n_q * n_kv * heads
            const ggml_tensor * q = node->src[0], *k = node->src[1], *v = node->src[2];
            return 2ull * (uint64_t) (q->ne[0] + v->ne[0]) * (uint64_t) q->ne[1] * (uint64_t) k->ne[1] *
                   (uint64_t) q->ne[2] * (uint64_t) q->ne[3];
        }
        default: return 0;
    }
}

bool node_is_computed(const ggml_tensor * node) {
    if (ggml_op_is_empty(node->op)) return false;
    if (!(node->flags & GGML_TENSOR_FLAG_COMPUTE)) return false;
    return ggml_nelements(node) > 0;
}

ggml_status backend_graph_compute(ggml_backend_t b, ggml_cgraph * g) {
    vk_backend_ctx * ctx = ctx_of(b);
    size_t           max_dispatches = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ggml_tensor * node = g->nodes[i];
        if (!node_is_computed(node)) continue;
        if (!vk_op_supported(ctx->dev, node)) {
            GGML_LOG_ERROR("ggml-vulkan: node %s (%s) is not supported on %s\n", node->name, ggml_op_desc(node),
                           ctx->dev->name.c_str());
            return GGML_STATUS_FAILED;
        }
        max_dispatches += vk_op_max_dispatches(node);
    }
    ctx->stream.n_dispatches = 0;
    ctx->stream.n_barriers   = 0;
    if (max_dispatches == 0) return GGML_STATUS_SUCCESS;
    if (!vk_stream_open(ctx->stream, max_dispatches)) return GGML_STATUS_ALLOC_FAILED;
    for (int i = 0; i < g->n_nodes; i++) {
        ggml_tensor * node = g->nodes[i];
        if (!node_is_computed(node)) continue;
        ctx->stream.n_flops += node_flops(node);
        if (!vk_op_record(ctx->stream, node)) {
            vk_stream_submit_wait(ctx->stream); // ends the command buffer; earlier nodes still run
            return GGML_STATUS_FAILED;
        }
    }
    if (ctx->stream.batching) return GGML_STATUS_SUCCESS; // submitted when the plan returns
    const VkResult r = vk_stream_submit_wait(ctx->stream);
    if (r != VK_SUCCESS) {
        vk_check_failed(r, "graph submit");
        return GGML_STATUS_FAILED;
    }
    return GGML_STATUS_SUCCESS;
}

// Completes pending work (a plan's batch keeps recording afterwards into a fresh command buffer).
void backend_synchronize(ggml_backend_t b) {
    const VkResult r = vk_stream_submit_wait(ctx_of(b)->stream);
    if (r != VK_SUCCESS) vk_check_failed(r, "synchronize");
}

// Plan hooks (ggml_backend_i plan_begin / plan_end / ext_step_end, ggml-backend-impl.h): a
// scheduled plan batches its fragments into one stream; nothing is captured, so every plan
// executes (never REPLAYED).
ggml_backend_plan_action plan_begin(ggml_backend_t b, const ggml_backend_plan_info *) {
    ctx_of(b)->stream.batching = true;
    return GGML_BACKEND_PLAN_EXECUTE;
}

ggml_status plan_end(ggml_backend_t b) {
    vk_stream & s = ctx_of(b)->stream;
    s.batching    = false;
    const VkResult r = vk_stream_submit_wait(s);
    if (r != VK_SUCCESS) {
        vk_check_failed(r, "plan submit");
        return GGML_STATUS_FAILED;
    }
    return GGML_STATUS_SUCCESS;
}

// Outside a batch an extension step is its own fragment: submit it and wait, as graph_compute does.
ggml_status ext_step_end(ggml_backend_t b) {
    vk_stream & s = ctx_of(b)->stream;
    if (s.batching) return GGML_STATUS_SUCCESS;
    const VkResult r = vk_stream_submit_wait(s);
    if (r != VK_SUCCESS) {
        vk_check_failed(r, "extension step submit");
        return GGML_STATUS_FAILED;
    }
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
    .plan_begin       = plan_begin,
    .plan_end         = plan_end,
    .ext_step_end     = ext_step_end,
};

} // namespace

ggml_backend_t vk_backend_new(vk_device * dev) {
    if (!dev || !vk_device_ready(dev)) return nullptr;
    auto * ctx = new (std::nothrow) vk_backend_ctx();
    if (!ctx) return nullptr;
    ctx->dev  = dev;
    ctx->name = dev->name;
    if (!vk_stream_init(ctx->stream, dev)) {
        vk_stream_destroy(ctx->stream);
        delete ctx;
        return nullptr;
    }
    auto * b = new (std::nothrow) ggml_backend();
    if (!b) {
        vk_stream_destroy(ctx->stream);
        delete ctx;
        return nullptr;
    }
    b->guid    = &vk_guid;
    b->iface   = backend_iface;
    b->device  = &dev->gdev;
    b->context = ctx;
    return b;
}

vk_stream * vk_backend_stream(ggml_backend_t backend) {
    return ggml_backend_is_vk(backend) ? &ctx_of(backend)->stream : nullptr;
}

vk_device * vk_backend_device(ggml_backend_t backend) {
    return ggml_backend_is_vk(backend) ? ctx_of(backend)->dev : nullptr;
}

extern "C" {

void ggml_backend_vk_set_submit_threshold(ggml_backend_t backend, size_t n_commands) {
    GGML_ASSERT(ggml_backend_is_vk(backend) && "not a Vulkan backend");
    ctx_of(backend)->stream.submit_threshold = n_commands;
}

void ggml_backend_vk_set_submit_flops(ggml_backend_t backend, uint64_t flops) {
    GGML_ASSERT(ggml_backend_is_vk(backend) && "not a Vulkan backend");
    ctx_of(backend)->stream.flop_threshold = flops;
}

ggml_backend_t ggml_backend_vk_init(size_t dev_num) { return vk_backend_new(vk_get_device(dev_num)); }

bool ggml_backend_is_vk(ggml_backend_t backend) {
    return backend && backend->guid && ggml_guid_matches(backend->guid, &vk_guid);
}

void ggml_backend_vk_get_graph_stats(ggml_backend_t backend, size_t * dispatches, size_t * barriers) {
    GGML_ASSERT(ggml_backend_is_vk(backend) && "not a Vulkan backend");
    const vk_stream & s = ctx_of(backend)->stream;
    if (dispatches) *dispatches = s.n_dispatches;
    if (barriers) *barriers = s.n_barriers;
}

void ggml_backend_vk_set_plain_mul_mat(ggml_backend_t backend, bool plain) {
    GGML_ASSERT(ggml_backend_is_vk(backend) && "not a Vulkan backend");
    ctx_of(backend)->stream.plain_mul_mat = plain;
}

void ggml_backend_vk_set_mul_mat_kernel(ggml_backend_t backend, enum ggml_vk_mul_mat_kernel k) {
    GGML_ASSERT(ggml_backend_is_vk(backend) && "not a Vulkan backend");
    ctx_of(backend)->stream.mm_kernel = (int) k;
}

} // extern "C"
