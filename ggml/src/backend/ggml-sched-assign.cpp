// ggml-sched-assign.cpp — how the scheduler decides where each node runs and cuts the graph into
// per-backend splits (upstream semantics, ../shared/reference/ggml-api-facts.md 7.2):
//
//   1  from current location: pre-allocated tensors pin their backend, INPUT tensors go to the
//      last (CPU) backend, ops with weights follow the weights (optionally offloaded)
//   2  expansion: four sweeps grow assigned regions over unassigned neighbours
//   3  upgrade / fill: unassigned nodes go where most of their inputs already are; assigned ones
//      move to a higher-priority backend sharing their buffer type
//   3b in-place writers move to the backend of the memory they write, when it supports them
//   4  sources follow their consumers, views the tensor they view (else their base); leftovers
//      take the first backend that supports them
//   (extension optimizers may reorder the graph here, when fusion is enabled)
//   5  splitting: consecutive nodes on one backend form a split; sources the split's backend
//      cannot read are copied into it ("<backend>#<src>#<copy>") and the consumer's src is
//      rewritten to the copy
//
// Supports queries go through ggml_backend_supports_op, which includes extension kernels, so a
// device whose native implementation rejects an op still receives it when a kernel covers it.

#include "backend/ggml-sched-impl.h"

#include <algorithm>
#include <cstring>

// ---------------------------------------------------------------------------------------------
// Per-tensor state

int ggml_sched_backend_index(const ggml_backend_sched * sched, ggml_backend_t backend) {
    if (backend == nullptr) {
        return -1;
    }
    for (int i = 0; i < sched->n_backends; i++) {
        if (sched->backends[i] == backend) {
            return i;
        }
    }
    return -1;
}

static size_t tensor_slot(ggml_backend_sched * sched, ggml_tensor * t) {
    return ggml_hash_find_or_insert(&sched->hash_set, t);
}

int ggml_sched_tensor_backend_id(ggml_backend_sched * sched, ggml_tensor * t) {
    return sched->hv_backend_ids[tensor_slot(sched, t)];
}

void ggml_sched_set_tensor_backend_id(ggml_backend_sched * sched, ggml_tensor * t, int backend_id, bool pinned) {
    const size_t slot           = tensor_slot(sched, t);
    sched->hv_backend_ids[slot] = backend_id;
    if (pinned) {
        sched->hv_pinned[slot] = 1;
    }
}

void ggml_sched_clear_tensor_state(ggml_backend_sched * sched) {
    ggml_hash_set_reset(&sched->hash_set);
    std::fill(sched->hv_backend_ids.begin(), sched->hv_backend_ids.end(), -1);
    std::fill(sched->hv_pinned.begin(), sched->hv_pinned.end(), 0);
    for (size_t slot : sched->copy_slots) {
        sched->hv_copy_record[slot] = -1;
    }
    sched->copy_slots.clear();
    sched->copies.clear();
}

namespace {

// Copy c of t on backend b, or NULL.
ggml_tensor * tensor_copy(ggml_backend_sched * sched, ggml_tensor * t, int b, int c) {
    const int32_t rec = sched->hv_copy_record[tensor_slot(sched, t)];
    if (rec < 0) {
        return nullptr;
    }
    return sched->copies[(size_t) rec * sched->n_backends * sched->n_copies + (size_t) b * sched->n_copies + c];
}

void set_tensor_copy(ggml_backend_sched * sched, ggml_tensor * t, int b, int c, ggml_tensor * copy) {
    const size_t slot = tensor_slot(sched, t);
    int32_t &    rec  = sched->hv_copy_record[slot];
    if (rec < 0) {
        rec = (int32_t) (sched->copies.size() / ((size_t) sched->n_backends * sched->n_copies));
        sched->copies.resize(sched->copies.size() + (size_t) sched->n_backends * sched->n_copies, nullptr);
        sched->copy_slots.push_back(slot);
    }
    sched->copies[(size_t) rec * sched->n_backends * sched->n_copies + (size_t) b * sched->n_copies + c] = copy;
}

// A context with room for one more tensor object (the pool grows in fixed-size chunks, so
// splitting never needs to know the number of copies in advance).
ggml_context * pool_ctx(ggml_backend_sched * sched) {
    constexpr size_t TENSORS_PER_CTX = 256;
    const size_t     need            = ggml_tensor_overhead();
    while (sched->ctx_cur < sched->ctxs.size()) {
        ggml_context * ctx = sched->ctxs[sched->ctx_cur];
        if (ggml_used_mem(ctx) + need <= ggml_get_mem_size(ctx)) {
            return ctx;
        }
        sched->ctx_cur++;
    }
    ggml_init_params params = { TENSORS_PER_CTX * need, nullptr, true };
    ggml_context *   ctx    = ggml_init(params);
    GGML_ASSERT(ctx != nullptr && "ggml_backend_sched: cannot create a context for tensor copies");
    sched->ctxs.push_back(ctx);
    sched->ctx_cur = sched->ctxs.size() - 1;
    return ctx;
}

void pool_reset(ggml_backend_sched * sched) {
    for (ggml_context * ctx : sched->ctxs) {
        ggml_reset(ctx);
    }
    sched->ctx_cur = 0;
}

// A tensor with src's type, shape and strides (a copy must have the identical layout for
// ggml_backend_tensor_copy, including a view's strides).
ggml_tensor * dup_tensor_layout(ggml_backend_sched * sched, const ggml_tensor * src) {
    ggml_tensor * t = ggml_dup_tensor(pool_ctx(sched), src);
    for (int i = 0; i < GGML_MAX_DIMS; i++) {
        t->nb[i] = src->nb[i];
    }
    return t;
}

bool is_view_op(enum ggml_op op) {
    return op == GGML_OP_VIEW || op == GGML_OP_RESHAPE || op == GGML_OP_PERMUTE || op == GGML_OP_TRANSPOSE;
}

bool supports_op(const ggml_backend_sched * sched, int b, const ggml_tensor * op) {
    return ggml_backend_supports_op(sched->backends[b], op);
}

ggml_backend_buffer_t storage_buffer(const ggml_tensor * t) {
    return t->view_src ? t->view_src->buffer : t->buffer;
}

// Whether backend b can read t where it lives (or where it will be allocated).
bool buffer_supported(ggml_backend_sched * sched, ggml_tensor * t, int b) {
    ggml_backend_buffer_t      buf  = storage_buffer(t);
    ggml_backend_buffer_type_t buft = nullptr;
    if (buf != nullptr) {
        buft = buf->buft;
    } else {
        int id = ggml_sched_tensor_backend_id(sched, t);
        if (id == -1 && t->view_src != nullptr) {
            id = ggml_sched_tensor_backend_id(sched, t->view_src);
        }
        if (id != -1) {
            buft = sched->bufts[id];
        }
    }
    return buft != nullptr && ggml_backend_supports_buft(sched->backends[b], buft);
}

// Highest-priority backend that can use the buffer `tensor` lives in and run `op`.
int backend_from_buffer(const ggml_backend_sched * sched, const ggml_tensor * tensor, const ggml_tensor * op) {
    ggml_backend_buffer_t buffer = storage_buffer(tensor);
    if (buffer == nullptr) {
        return -1;
    }
    for (int b = 0; b < sched->n_backends; b++) {
        if (ggml_backend_supports_buft(sched->backends[b], buffer->buft) && supports_op(sched, b, op)) {
            return b;
        }
    }
    return -1;
}

// Pass 1 for one tensor.
int backend_from_cur(const ggml_backend_sched * sched, ggml_tensor * tensor) {
    int b = backend_from_buffer(sched, tensor, tensor);
    if (b != -1) {
        return b;
    }
    if (tensor->view_src != nullptr) {
        b = backend_from_buffer(sched, tensor->view_src, tensor);
        if (b != -1) {
            return b;
        }
    }
    if (storage_buffer(tensor) != nullptr) {
        // its memory cannot move, and nothing that can read it runs the op
        GGML_ABORT("pre-allocated tensor (%s) in a buffer (%s) that cannot run the operation (%s)", tensor->name,
                   ggml_backend_buffer_name(storage_buffer(tensor)), ggml_op_desc(tensor));
    }
    if (tensor->flags & GGML_TENSOR_FLAG_INPUT) {
        return sched->n_backends - 1;
    }
    // the small side tensors of these ops say nothing about where the op belongs
    if (tensor->op == GGML_OP_ROPE || tensor->op == GGML_OP_FLASH_ATTN_EXT) {
        return -1;
    }
    for (int j = 0; j < GGML_MAX_SRC; j++) {
        const ggml_tensor * src = tensor->src[j];
        if (src == nullptr || src->buffer == nullptr ||
            ggml_backend_buffer_get_usage(src->buffer) != GGML_BACKEND_BUFFER_USAGE_WEIGHTS) {
            continue;
        }
        const int src_b = backend_from_buffer(sched, src, tensor);
        if (sched->op_offload && src_b == sched->n_backends - 1 && ggml_backend_buffer_is_host(src->buffer)) {
            for (int hb = 0; hb < src_b; hb++) {
                if (supports_op(sched, hb, tensor) && ggml_backend_offload_op(sched->backends[hb], tensor)) {
                    return hb;
                }
            }
        }
        return src_b;
    }
    return -1;
}

void assign_from_cur(ggml_backend_sched * sched, ggml_tensor * t) {
    if (ggml_sched_tensor_backend_id(sched, t) == -1) {
        ggml_sched_set_tensor_backend_id(sched, t, backend_from_cur(sched, t), false);
    }
}

void set_if_supported(ggml_backend_sched * sched, ggml_tensor * node, int b) {
    if (supports_op(sched, b, node)) {
        ggml_sched_set_tensor_backend_id(sched, node, b, false);
    }
}

// Pass 2: one sweep; `gpu_only` carries only non-CPU assignments (a CPU node breaks the carry).
void expand(ggml_backend_sched * sched, ggml_cgraph * graph, bool downward, bool gpu_only) {
    int       cur = -1;
    const int n   = graph->n_nodes;
    for (int k = 0; k < n; k++) {
        ggml_tensor * node = graph->nodes[downward ? k : n - 1 - k];
        if (is_view_op(node->op)) {
            continue;
        }
        const int id = ggml_sched_tensor_backend_id(sched, node);
        if (id != -1) {
            cur = (gpu_only && id == sched->n_backends - 1) ? -1 : id;
        } else if (cur != -1) {
            set_if_supported(sched, node, cur);
        }
    }
}

bool is_pinned(ggml_backend_sched * sched, ggml_tensor * t) {
    return sched->hv_pinned[tensor_slot(sched, t)] != 0;
}

// Pass 3 for one non-view node.
void upgrade_or_fill(ggml_backend_sched * sched, ggml_tensor * node) {
    const int id = ggml_sched_tensor_backend_id(sched, node);
    if (id == -1) {
        // where most of its inputs already are (first best by priority)
        int best_b = -1, best_n = -1;
        for (int b = 0; b < sched->n_backends; b++) {
            if (!supports_op(sched, b, node)) {
                continue;
            }
            int n = 0;
            for (int j = 0; j < GGML_MAX_SRC; j++) {
                ggml_tensor * src = node->src[j];
                if (src == nullptr) {
                    continue;
                }
                const bool assigned = ggml_sched_tensor_backend_id(sched, src) != -1 ||
                                      (src->view_src && ggml_sched_tensor_backend_id(sched, src->view_src) != -1);
                if (assigned && buffer_supported(sched, src, b)) {
                    n++;
                }
            }
            if (n > best_n) {
                best_n = n;
                best_b = b;
            }
        }
        if (best_b != -1) {
            ggml_sched_set_tensor_backend_id(sched, node, best_b, false);
        }
        return;
    }
    if (is_pinned(sched, node)) {
        return; // user assignments are never overwritten
    }
    // same buffer type on a higher-priority backend: nothing has to move, so prefer it
    for (int b = 0; b < id; b++) {
        if (sched->bufts[b] != sched->bufts[id] || !supports_op(sched, b, node)) {
            continue;
        }
        bool ok = true;
        for (int j = 0; j < GGML_MAX_SRC && ok; j++) {
            ok = node->src[j] == nullptr || buffer_supported(sched, node->src[j], b);
        }
        if (ok) {
            ggml_sched_set_tensor_backend_id(sched, node, b, false);
            return;
        }
    }
}

// In-place writers (a view_src but a computing op) run where the memory they write lives when
// that backend can run them: elsewhere, the write would land behind the back of the copies the
// scheduler makes of that memory. (Upstream leaves them wherever expansion put them.)
// When that backend cannot run the writer, another one that can address the memory's buffer
// type may; failing that, the memory (a node the scheduler placed, not yet allocated) moves with
// the writer to a backend that runs both. A writer left on a backend that cannot address its
// memory crashes a real device (Vulkan: "tensor is not in a Vulkan buffer"). Returns whether it
// changed anything.
bool keep_inplace_with_memory(ggml_backend_sched * sched, ggml_tensor * node) {
    if (node->view_src == nullptr || is_view_op(node->op) || is_pinned(sched, node)) {
        return false;
    }
    ggml_tensor * base   = node->view_src;
    const int     base_b = ggml_sched_tensor_backend_id(sched, base);
    const int     cur_b  = ggml_sched_tensor_backend_id(sched, node);
    if (base_b == -1 || base_b == cur_b) {
        return false;
    }
    if (supports_op(sched, base_b, node)) {
        ggml_sched_set_tensor_backend_id(sched, node, base_b, false);
        return true;
    }
    if (cur_b != -1 && buffer_supported(sched, base, cur_b)) {
        return false; // already runs where it can address the memory
    }
    for (int b = 0; b < sched->n_backends; b++) {
        if (supports_op(sched, b, node) && buffer_supported(sched, base, b)) {
            ggml_sched_set_tensor_backend_id(sched, node, b, false);
            return true;
        }
    }
    if (storage_buffer(base) != nullptr || is_pinned(sched, base)) {
        return false;
    }
    // both to one backend that runs both: the writer's own first, then by priority
    for (int k = -1; k < sched->n_backends; k++) {
        const int b = k == -1 ? cur_b : k;
        if (b == -1 || !supports_op(sched, b, node) || !supports_op(sched, b, base)) {
            continue;
        }
        ggml_sched_set_tensor_backend_id(sched, base, b, false);
        ggml_sched_set_tensor_backend_id(sched, node, b, false);
        return true;
    }
    return false;
}

// Pass 4 for one node.
void assign_sources(ggml_backend_sched * sched, ggml_tensor * node) {
    int id = ggml_sched_tensor_backend_id(sched, node);
    if (node->view_src != nullptr && id == -1) {
        // a view lives with the tensor it views (whose producer may be an in-place writer that
        // had to run away from the base's backend), else with its base
        if (is_view_op(node->op) && node->src[0] != nullptr) {
            id = ggml_sched_tensor_backend_id(sched, node->src[0]);
        }
        if (id == -1) {
            id = ggml_sched_tensor_backend_id(sched, node->view_src);
        }
        ggml_sched_set_tensor_backend_id(sched, node, id, false);
    }
    for (int j = 0; j < GGML_MAX_SRC; j++) {
        ggml_tensor * src = node->src[j];
        if (src == nullptr || ggml_sched_tensor_backend_id(sched, src) != -1) {
            continue;
        }
        // views live with their base
        const int src_id = src->view_src ? ggml_sched_tensor_backend_id(sched, src->view_src) : id;
        ggml_sched_set_tensor_backend_id(sched, src, src_id, false);
    }
    for (int b = 0; b < sched->n_backends && ggml_sched_tensor_backend_id(sched, node) == -1; b++) {
        set_if_supported(sched, node, b);
    }
    if (ggml_sched_tensor_backend_id(sched, node) == -1) {
        GGML_ABORT("ggml_backend_sched: no backend supports node %s (%s)", node->name, ggml_op_desc(node));
    }
}

// Pass 5: splits and input copies; rewrites the srcs of nodes that read a copy.
void split_nodes(ggml_backend_sched * sched, ggml_cgraph * graph) {
    sched->splits.clear();
    sched->graph_inputs.clear();
    if (graph->n_nodes == 0) {
        return;
    }

    // the first split's backend is that of its first non-view node
    int i = 0;
    int first_backend = -1;
    for (; i < graph->n_nodes; i++) {
        if (!is_view_op(graph->nodes[i]->op)) {
            first_backend = ggml_sched_tensor_backend_id(sched, graph->nodes[i]);
            break;
        }
    }
    if (first_backend == -1) {
        first_backend = ggml_sched_tensor_backend_id(sched, graph->nodes[0]);
    }
    if (first_backend == -1) {
        first_backend = sched->n_backends - 1;
    }
    sched->splits.emplace_back();
    sched->splits.back().backend_id = first_backend;
    sched->splits.back().i_start    = 0;
    int cur = first_backend;

    for (; i < graph->n_nodes; i++) {
        ggml_tensor * node = graph->nodes[i];
        if (is_view_op(node->op)) {
            continue;
        }
        const int node_b = ggml_sched_tensor_backend_id(sched, node);
        GGML_ASSERT(node_b != -1);

        // a weight that must be copied again starts a new split, so that the memory of the
        // weights copied for the previous one can be reused
        bool need_new_split = false;
        if (node_b == cur && !sched->splits.back().inputs.empty()) {
            for (int j = 0; j < GGML_MAX_SRC && !need_new_split; j++) {
                ggml_tensor * src = node->src[j];
                if (src == nullptr || src->buffer == nullptr ||
                    ggml_backend_buffer_get_usage(src->buffer) != GGML_BACKEND_BUFFER_USAGE_WEIGHTS) {
                    continue;
                }
                const int src_b = ggml_sched_tensor_backend_id(sched, src);
                need_new_split  = src_b != cur && !buffer_supported(sched, src, cur) &&
                                  tensor_copy(sched, src, cur, 0) == nullptr;
            }
        }
        if (node_b != cur || need_new_split) {
            sched->splits.back().i_end = i;
            sched->splits.emplace_back();
            sched->splits.back().backend_id = node_b;
            sched->splits.back().i_start    = i;
            cur                             = node_b;
        }
        ggml_sched_split & split = sched->splits.back();

        for (int j = 0; j < GGML_MAX_SRC; j++) {
            ggml_tensor * src = node->src[j];
            if (src == nullptr) {
                continue;
            }
            const int src_b = ggml_sched_tensor_backend_id(sched, src);
            GGML_ASSERT(src_b != -1);

            // pipeline copies: every copy index keeps its own graph input, so that the user can
            // set the next evaluation's inputs while the previous one still runs
            if ((src->flags & GGML_TENSOR_FLAG_INPUT) && sched->n_copies > 1 &&
                tensor_copy(sched, src, src_b, 0) == nullptr) {
                ggml_backend_t backend = sched->backends[src_b];
                for (int c = 0; c < sched->n_copies; c++) {
                    ggml_tensor * copy = src;
                    if (c != sched->cur_copy) {
                        copy = dup_tensor_layout(sched, src);
                        ggml_format_name(copy, "%s#%s#%d", ggml_backend_name(backend), src->name, c);
                    }
                    ggml_set_input(copy);
                    ggml_set_output(copy); // the allocator must not reuse it
                    set_tensor_copy(sched, src, src_b, c, copy);
                }
                sched->graph_inputs.push_back(src);
            }

            if (src_b != cur && !buffer_supported(sched, src, cur)) {
                if (tensor_copy(sched, src, cur, 0) == nullptr) {
                    ggml_backend_t backend = sched->backends[cur];
                    for (int c = 0; c < sched->n_copies; c++) {
                        ggml_tensor * copy = dup_tensor_layout(sched, src);
                        ggml_format_name(copy, "%s#%s#%d", ggml_backend_name(backend), src->name, c);
                        if (sched->n_copies > 1) {
                            ggml_set_input(copy);
                            ggml_set_output(copy);
                        }
                        set_tensor_copy(sched, src, cur, c, copy);
                    }
                    split.inputs.push_back(src);
                }
                node->src[j] = tensor_copy(sched, src, cur, sched->cur_copy);
            }
        }
    }
    sched->splits.back().i_end = graph->n_nodes;
}

// The graph the allocator sees: per split, for each input a dependency on the original (so it
// stays alive until copied) and the copy (allocated at the start of the split), then the
// split's nodes. Leafs: all pipeline copies (n_copies > 1), then the original leafs.
void build_alloc_graph(ggml_backend_sched * sched, ggml_cgraph * graph) {
    std::swap(sched->node_backend_ids, sched->prev_node_backend_ids);
    std::swap(sched->leaf_backend_ids, sched->prev_leaf_backend_ids);
    sched->graph_nodes.clear();
    sched->graph_leafs.clear();
    sched->node_backend_ids.clear();
    sched->leaf_backend_ids.clear();

    for (const ggml_sched_split & split : sched->splits) {
        for (ggml_tensor * input : split.inputs) {
            ggml_tensor * input_cpy = tensor_copy(sched, input, split.backend_id, sched->cur_copy);
            ggml_tensor * input_dep = ggml_view_tensor(pool_ctx(sched), input);
            input_dep->src[0]       = input;
            sched->graph_nodes.push_back(input_dep);
            sched->node_backend_ids.push_back(ggml_sched_tensor_backend_id(sched, input));
            sched->graph_nodes.push_back(input_cpy);
            sched->node_backend_ids.push_back(split.backend_id);
        }
        for (int j = split.i_start; j < split.i_end; j++) {
            sched->graph_nodes.push_back(graph->nodes[j]);
            sched->node_backend_ids.push_back(ggml_sched_tensor_backend_id(sched, graph->nodes[j]));
        }
    }

    if (sched->n_copies > 1) {
        for (ggml_tensor * input : sched->graph_inputs) {
            const int b = ggml_sched_tensor_backend_id(sched, input);
            for (int c = 0; c < sched->n_copies; c++) {
                sched->graph_leafs.push_back(tensor_copy(sched, input, b, c));
                sched->leaf_backend_ids.push_back(b);
            }
        }
        for (const ggml_sched_split & split : sched->splits) {
            for (ggml_tensor * input : split.inputs) {
                for (int c = 0; c < sched->n_copies; c++) {
                    sched->graph_leafs.push_back(tensor_copy(sched, input, split.backend_id, c));
                    sched->leaf_backend_ids.push_back(split.backend_id);
                }
            }
        }
    }
    for (int i = 0; i < graph->n_leafs; i++) {
        ggml_tensor * leaf = graph->leafs[i];
        int           b    = ggml_sched_tensor_backend_id(sched, leaf);
        if (b == -1) {
            // a leaf no node reads: keep it on the CPU fallback
            b = sched->n_backends - 1;
            ggml_sched_set_tensor_backend_id(sched, leaf, b, false);
        }
        sched->graph_leafs.push_back(leaf);
        sched->leaf_backend_ids.push_back(b);
    }

    ggml_cgraph & g = sched->graph;
    memset(&g, 0, sizeof(g));
    g.size    = (int) std::max(sched->graph_nodes.size(), sched->graph_leafs.size());
    g.n_nodes = (int) sched->graph_nodes.size();
    g.n_leafs = (int) sched->graph_leafs.size();
    g.nodes   = sched->graph_nodes.data();
    g.leafs   = sched->graph_leafs.data();
    g.order   = GGML_CGRAPH_EVAL_ORDER_LEFT_TO_RIGHT;
}

} // namespace

void ggml_sched_split_graph_impl(ggml_backend_sched * sched, ggml_cgraph * graph, bool run_optimizers) {
    GGML_ASSERT((size_t) graph->n_nodes + (size_t) graph->n_leafs <= sched->graph_size &&
                "ggml_backend_sched: graph larger than the scheduler's graph_size");

    // copies and dependency views of a previous split are forgotten (their graph is single-use)
    pool_reset(sched);
    for (size_t slot : sched->copy_slots) {
        sched->hv_copy_record[slot] = -1;
    }
    sched->copy_slots.clear();
    sched->copies.clear();
    sched->is_reset   = false;
    sched->user_graph = graph;

    // pass 1: from current location (leafs, then nodes and their srcs)
    for (int i = 0; i < graph->n_leafs; i++) {
        assign_from_cur(sched, graph->leafs[i]);
    }
    for (int i = 0; i < graph->n_nodes; i++) {
        ggml_tensor * node = graph->nodes[i];
        assign_from_cur(sched, node);
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            if (node->src[j] != nullptr) {
                assign_from_cur(sched, node->src[j]);
            }
        }
    }

    // pass 2: expansion
    expand(sched, graph, /*downward=*/true, /*gpu_only=*/true);
    expand(sched, graph, /*downward=*/false, /*gpu_only=*/true);
    expand(sched, graph, /*downward=*/true, /*gpu_only=*/false);
    expand(sched, graph, /*downward=*/false, /*gpu_only=*/false);

    // pass 3: upgrade / fill
    for (int i = 0; i < graph->n_nodes; i++) {
        if (!is_view_op(graph->nodes[i]->op)) {
            upgrade_or_fill(sched, graph->nodes[i]);
        }
    }

    // in-place writers stay with their memory; a base that moved may strand writers placed
    // earlier next to it, so repeat until stable (at most n_nodes + 1 rounds; conflicting
    // writers that no single backend runs would otherwise move the base back and forth)
    for (int round = 0; round <= graph->n_nodes; round++) {
        bool changed = false;
        for (int i = 0; i < graph->n_nodes; i++) {
            changed = keep_inplace_with_memory(sched, graph->nodes[i]) || changed;
        }
        if (!changed) {
            break;
        }
    }

    // pass 4: sources and views
    for (int i = 0; i < graph->n_nodes; i++) {
        assign_sources(sched, graph->nodes[i]);
    }

    // extension optimizers may reorder nodes; assignments are per tensor, so they stay valid
    if (run_optimizers) {
        ggml_backend_dev_t seen[GGML_SCHED_MAX_BACKENDS];
        int                n_seen = 0;
        for (int b = 0; b < sched->n_backends; b++) {
            ggml_backend_dev_t dev = ggml_backend_get_device(sched->backends[b]);
            if (dev == nullptr || std::find(seen, seen + n_seen, dev) != seen + n_seen) {
                continue;
            }
            seen[n_seen++] = dev;
            ggml_ext_run_optimizers(dev, graph);
        }
    }

    // pass 5: splits and copies, then the allocation graph
    split_nodes(sched, graph);
    build_alloc_graph(sched, graph);
}
