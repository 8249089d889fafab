// ggml-sched.cpp — ggml_backend_sched: allocation of split graphs, extension plans and their
// workspaces, execution with input copies and pipeline copies, and the public API.
// (Assignment and splitting live in ggml-sched-assign.cpp.)
//
// Extensions: after the graph is split, every split gets a plan (ggml_ext_plan_new over the
// split's node range, so a fused range never crosses a split). Fusion is allowed only with one
// pipeline copy and no evaluation callback. The external inputs of each fused range are kept
// alive through its final node by extra allocator uses. Plans are prepared (possibly before any
// address exists), each backend gets one workspace buffer sized by the maximum of its plans'
// requests (grows only, reported by get_buffer_size), and plans are reused by every compute
// until the scheduler is reset or allocates again.
//
// Plan hooks: without an evaluation callback and with one pipeline copy, a backend's optional
// plan_begin / plan_end (ggml-backend-impl.h) bracket each of its splits. plan_begin is told the
// split's steps (kernel, registration flags, workspace request), the workspace buffer and an
// identity that changes whenever the plan is rebuilt or prepared again; it may answer that it
// replayed the plan's work itself, and the range is then not executed.

#include "alloc/ggml-alloc-impl.h"
#include "backend/ggml-sched-impl.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <unordered_set>
#include <utility>

namespace {

// ---------------------------------------------------------------------------------------------
// Plans and workspaces

void free_plans(ggml_backend_sched * sched) {
    for (ggml_sched_split & split : sched->splits) {
        if (split.plan != nullptr) {
            ggml_ext_plan_free(split.plan);
            split.plan = nullptr;
        }
        split.hook_steps.clear();
        split.hook_n_ext_steps = 0;
        split.plan_identity    = nullptr;
    }
    sched->plans_fused = false;
}

// Plan identities are opaque tokens from one process-wide counter, so a rebuilt plan never
// repeats an identity, even when its memory reuses an old plan's address or another scheduler
// shares the backend.
const void * new_plan_identity() {
    static std::atomic<uintptr_t> next{ 1 };
    return reinterpret_cast<const void *>(next.fetch_add(1, std::memory_order_relaxed));
}

// Fills what the plan hooks are told about a split's (prepared) plan and gives it a new identity.
void describe_plan(ggml_sched_split & split) {
    split.hook_steps.clear();
    split.hook_n_ext_steps     = 0;
    split.hook_capture_safe    = true;
    split.hook_replay_reusable = true;
    const int n_steps = split.plan ? ggml_ext_plan_n_steps(split.plan) : 0;
    if (split.plan == nullptr && split.i_end > split.i_start) {
        split.hook_steps.push_back({ split.i_start, split.i_end - split.i_start, nullptr, 0, 0 });
    }
    for (int s = 0; s < n_steps; s++) {
        const ggml_ext_plan_step * step = ggml_ext_plan_get_step(split.plan, s);
        ggml_backend_plan_step     out  = { step->first, step->n_nodes, nullptr, 0, step->workspace };
        if (step->kernel != nullptr) {
            out.kernel = ggml_ext_kernel_get_desc(step->kernel);
            out.flags  = ggml_ext_kernel_get_flags(step->kernel);
            split.hook_n_ext_steps++;
            split.hook_capture_safe    = split.hook_capture_safe && (out.flags & GGML_EXT_KERNEL_CAPTURE_SAFE);
            split.hook_replay_reusable = split.hook_replay_reusable && (out.flags & GGML_EXT_KERNEL_REPLAY_REUSABLE);
        }
        split.hook_steps.push_back(out);
    }
    split.plan_identity = new_plan_identity();
}

// External inputs of each fused step (sources of its nodes and their view bases that are not
// produced inside the step) must not be reused before the step's final node: the fused kernel
// reads them while it writes that node. Inputs the final node reads directly already live
// that long, and an extra use would wrongly forbid the allocator's in-place reuse there.
void collect_fused_inputs(ggml_backend_sched * sched, std::vector<ggml_tensor *> & consumers,
                          std::vector<ggml_tensor *> & tensors) {
    ggml_cgraph * graph = sched->user_graph;
    for (const ggml_sched_split & split : sched->splits) {
        if (split.plan == nullptr) {
            continue;
        }
        const int n_steps = ggml_ext_plan_n_steps(split.plan);
        for (int s = 0; s < n_steps; s++) {
            const ggml_ext_plan_step * step = ggml_ext_plan_get_step(split.plan, s);
            if (step->kernel == nullptr || step->n_nodes < 2) {
                continue;
            }
            ggml_tensor * const * nodes = graph->nodes + step->first;
            ggml_tensor *         last  = nodes[step->n_nodes - 1];
            auto inside = [&](const ggml_tensor * t) {
                return std::find(nodes, nodes + step->n_nodes, t) != nodes + step->n_nodes;
            };
            auto read_by_last = [&](const ggml_tensor * t) {
                for (int j = 0; j < GGML_MAX_SRC; j++) {
                    if (last->src[j] == t) {
                        return true;
                    }
                }
                return false;
            };
            const size_t first_pair = tensors.size();
            auto add = [&](ggml_tensor * t) {
                if (t == nullptr || inside(t) || read_by_last(t)) {
                    return;
                }
                if (std::find(tensors.begin() + first_pair, tensors.end(), t) != tensors.end()) {
                    return;
                }
                consumers.push_back(last);
                tensors.push_back(t);
            };
            for (int k = 0; k < step->n_nodes; k++) {
                for (int j = 0; j < GGML_MAX_SRC; j++) {
                    ggml_tensor * src = nodes[k]->src[j];
                    if (src == nullptr) {
                        continue;
                    }
                    add(src);
                    add(src->view_src);
                }
            }
        }
    }
}

// Builds a plan per split and installs the fused inputs' extra uses in the allocator.
void build_plans(ggml_backend_sched * sched, bool allow_fusion) {
    free_plans(sched);
    for (ggml_sched_split & split : sched->splits) {
        ggml_backend_dev_t dev = ggml_backend_get_device(sched->backends[split.backend_id]);
        split.plan             = ggml_ext_plan_new(dev, sched->user_graph, split.i_start, split.i_end, allow_fusion);
    }
    sched->plans_fused = allow_fusion;

    std::vector<ggml_tensor *> consumers, tensors;
    if (allow_fusion) {
        collect_fused_inputs(sched, consumers, tensors);
    }
    ggml_gallocr_set_extra_uses(sched->galloc, consumers.data(), tensors.data(), (int) consumers.size());
}

// Prepares every plan; workspace_needed[b] = max over backend b's plans.
enum ggml_status prepare_plans(ggml_backend_sched * sched) {
    std::fill(sched->workspace_needed, sched->workspace_needed + GGML_SCHED_MAX_BACKENDS, 0);
    for (ggml_sched_split & split : sched->splits) {
        if (split.plan == nullptr || !ggml_ext_plan_has_extensions(split.plan)) {
            continue;
        }
        size_t                 bytes  = 0;
        const enum ggml_status status = ggml_ext_plan_prepare(split.plan, &bytes);
        if (status != GGML_STATUS_SUCCESS) {
            GGML_LOG_ERROR("%s: preparing the extension steps of split %d (%s) failed (status %d)\n", __func__,
                           (int) (&split - sched->splits.data()), ggml_backend_name(sched->backends[split.backend_id]),
                           (int) status);
            return status;
        }
        size_t & need = sched->workspace_needed[split.backend_id];
        need          = std::max(need, bytes);
    }
    for (ggml_sched_split & split : sched->splits) {
        describe_plan(split);
    }
    return GGML_STATUS_SUCCESS;
}

// One workspace buffer per backend from its buffer type; grows only, so a reservation for a
// worst-case graph keeps serving smaller ones.
bool ensure_workspaces(ggml_backend_sched * sched) {
    for (int b = 0; b < sched->n_backends; b++) {
        const size_t need = sched->workspace_needed[b];
        if (need == 0) {
            continue;
        }
        ggml_backend_buffer_t & ws = sched->workspace[b];
        if (ws != nullptr && ggml_backend_buffer_get_size(ws) >= need) {
            continue;
        }
        ggml_backend_buffer_free(ws);
        ws = ggml_backend_buft_alloc_buffer(sched->bufts[b], need);
        if (ws == nullptr) {
            GGML_LOG_ERROR("%s: failed to allocate a %zu-byte extension workspace on %s\n", __func__, need,
                           ggml_backend_name(sched->backends[b]));
            return false;
        }
        ggml_backend_buffer_set_usage(ws, GGML_BACKEND_BUFFER_USAGE_COMPUTE);
    }
    return true;
}

void workspace_of(ggml_backend_sched * sched, int b, void ** base, size_t * size) {
    ggml_backend_buffer_t ws = sched->workspace[b];
    if (sched->workspace_needed[b] == 0 || ws == nullptr) {
        *base = nullptr;
        *size = 0;
        return;
    }
    *base = ggml_backend_buffer_get_base(ws);
    *size = ggml_backend_buffer_get_size(ws);
}

// ---------------------------------------------------------------------------------------------
// Allocation

bool alloc_splits(ggml_backend_sched * sched) {
    bool ids_changed = sched->node_backend_ids.size() != sched->prev_node_backend_ids.size() ||
                       sched->leaf_backend_ids.size() != sched->prev_leaf_backend_ids.size();
    for (size_t i = 0; !ids_changed && i < sched->node_backend_ids.size(); i++) {
        const int a = sched->node_backend_ids[i], b = sched->prev_node_backend_ids[i];
        ids_changed = a != b && sched->bufts[a] != sched->bufts[b];
    }
    for (size_t i = 0; !ids_changed && i < sched->leaf_backend_ids.size(); i++) {
        const int a = sched->leaf_backend_ids[i], b = sched->prev_leaf_backend_ids[i];
        ids_changed = a != b && sched->bufts[a] != sched->bufts[b];
    }

    if (ids_changed || !ggml_gallocr_alloc_graph(sched->galloc, &sched->graph)) {
        // inputs may move: wait without touching the copy index
        for (int b = 0; b < sched->n_backends; b++) {
            ggml_backend_synchronize(sched->backends[b]);
        }
        if (!ggml_gallocr_reserve_n(sched->galloc, &sched->graph, sched->node_backend_ids.data(),
                                    sched->leaf_backend_ids.data()) ||
            !ggml_gallocr_alloc_graph(sched->galloc, &sched->graph)) {
            GGML_LOG_ERROR("%s: failed to allocate graph\n", __func__);
            return false;
        }
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// Execution

// Nodes [j0, j1) of a split, whole extension steps only (callers cut at node boundaries only
// when the plan has no fused steps, so any boundary is a step boundary): native parts go
// straight to the backend, extension steps through the plan.
enum ggml_status compute_range(ggml_backend_sched * sched, const ggml_sched_split & split, int j0, int j1) {
    ggml_backend_t backend = sched->backends[split.backend_id];
    void *         ws      = nullptr;
    size_t         ws_size = 0;
    workspace_of(sched, split.backend_id, &ws, &ws_size);

    if (split.plan == nullptr || !ggml_ext_plan_has_extensions(split.plan)) {
        ggml_cgraph view = ggml_graph_view(sched->user_graph, j0, j1);
        return backend->iface.graph_compute(backend, &view);
    }
    if (j0 == split.i_start && j1 == split.i_end) {
        return ggml_ext_plan_compute(split.plan, backend, ws, ws_size, -1, -1);
    }
    const int n_steps = ggml_ext_plan_n_steps(split.plan);
    for (int s = 0; s < n_steps; s++) {
        const ggml_ext_plan_step * step = ggml_ext_plan_get_step(split.plan, s);
        const int                  s0   = step->first;
        const int                  s1   = step->first + step->n_nodes;
        if (s1 <= j0 || s0 >= j1) {
            continue;
        }
        enum ggml_status status;
        if (step->kernel == nullptr) {
            ggml_cgraph view = ggml_graph_view(sched->user_graph, std::max(s0, j0), std::min(s1, j1));
            status           = backend->iface.graph_compute(backend, &view);
        } else {
            GGML_ASSERT(s0 >= j0 && s1 <= j1 && "evaluation chunk cuts through a fused extension step");
            status = ggml_ext_plan_compute(split.plan, backend, ws, ws_size, s0, s1);
        }
        if (status != GGML_STATUS_SUCCESS) {
            return status;
        }
    }
    return GGML_STATUS_SUCCESS;
}

// With an evaluation callback: chunks that end at each node the callback wants to observe.
enum ggml_status compute_split_observed(ggml_backend_sched * sched, const ggml_sched_split & split) {
    ggml_backend_t backend = sched->backends[split.backend_id];
    ggml_cgraph *  graph   = sched->user_graph;
    for (int j0 = split.i_start; j0 < split.i_end; j0++) {
        ggml_tensor * t    = graph->nodes[j0];
        bool          need = sched->callback_eval(t, true, sched->callback_eval_user_data);
        int           j1   = j0;
        while (!need && j1 < split.i_end - 1) {
            t    = graph->nodes[++j1];
            need = sched->callback_eval(t, true, sched->callback_eval_user_data);
        }
        const enum ggml_status status = compute_range(sched, split, j0, j1 + 1);
        if (status != GGML_STATUS_SUCCESS) {
            return status;
        }
        ggml_backend_synchronize(backend);
        // upstream behaviour: false stops the rest of this split only
        if (need && !sched->callback_eval(t, false, sched->callback_eval_user_data)) {
            break;
        }
        j0 = j1;
    }
    return GGML_STATUS_SUCCESS;
}

// Without an evaluation callback and with one pipeline copy, the backend's plan hooks bracket
// the split: between plan_begin and plan_end it may keep the plan's native fragments and
// extension work pending in one stream (Vulkan batching) or capture them (CUDA Graph), and it
// may answer that it already replayed the plan's work, so the range is not executed again.
// plan_end is called whatever happened in between, so the backend never stays mid-plan.
enum ggml_status compute_split_with_hooks(ggml_backend_sched * sched, const ggml_sched_split & split) {
    ggml_backend_t backend = sched->backends[split.backend_id];

    ggml_backend_plan_info info = {};
    info.graph                  = sched->user_graph;
    info.i_start                = split.i_start;
    info.i_end                  = split.i_end;
    info.steps                  = split.hook_steps.data();
    info.n_steps                = (int) split.hook_steps.size();
    info.n_ext_steps            = split.hook_n_ext_steps;
    info.plan_identity          = split.plan_identity;
    info.all_ext_capture_safe   = split.hook_capture_safe;
    info.all_ext_replay_reusable = split.hook_replay_reusable;
    void * ws_base = nullptr;
    workspace_of(sched, split.backend_id, &ws_base, &info.workspace_bytes);
    info.workspace = ws_base != nullptr ? sched->workspace[split.backend_id] : nullptr;

    const enum ggml_backend_plan_action action = backend->iface.plan_begin(backend, &info);
    enum ggml_status status = GGML_STATUS_SUCCESS;
    if (action != GGML_BACKEND_PLAN_REPLAYED) {
        status = compute_range(sched, split, split.i_start, split.i_end);
    }
    if (backend->iface.plan_end != nullptr) {
        const enum ggml_status end_status = backend->iface.plan_end(backend);
        if (status == GGML_STATUS_SUCCESS) {
            status = end_status;
        }
    }
    return status;
}

void copy_inputs(ggml_backend_sched * sched, const ggml_sched_split & split) {
    const int      b             = split.backend_id;
    ggml_backend_t split_backend = sched->backends[b];
    ggml_backend_event_t event   = sched->events[b][sched->cur_copy];
    for (ggml_tensor * input : split.inputs) {
        const int      in_b          = ggml_sched_tensor_backend_id(sched, input);
        ggml_backend_t input_backend = sched->backends[in_b];
        ggml_tensor *  input_cpy     = nullptr;
        {
            // the copy for the current pipeline copy (recorded by the splitter)
            const size_t  slot = ggml_hash_find(&sched->hash_set, input);
            const int32_t rec  = sched->hv_copy_record[slot];
            input_cpy = sched->copies[(size_t) rec * sched->n_backends * sched->n_copies + (size_t) b * sched->n_copies +
                                      sched->cur_copy];
        }
        if (input->flags & GGML_TENSOR_FLAG_INPUT) {
            // user inputs are copied at once, so the user may overwrite them after compute returns
            if (event) {
                ggml_backend_event_synchronize(event);
            } else {
                ggml_backend_synchronize(split_backend);
            }
            ggml_backend_tensor_copy(input, input_cpy);
            continue;
        }
        // the split backend may still be reading the previous contents of this copy
        if (event) {
            ggml_backend_event_wait(split_backend, event);
        } else {
            ggml_backend_synchronize(split_backend);
        }
        const bool async = split_backend->iface.cpy_tensor_async != nullptr &&
                           split_backend->iface.cpy_tensor_async(input_backend, split_backend, input, input_cpy);
        if (!async) {
            ggml_backend_synchronize(input_backend);
            if (event) {
                ggml_backend_event_synchronize(event);
            } else {
                ggml_backend_synchronize(split_backend);
            }
            ggml_backend_tensor_copy(input, input_cpy);
        }
    }
}

enum ggml_status compute_splits(ggml_backend_sched * sched) {
    // an evaluation callback needs node-granular steps: drop fusion for as long as it is set
    // (fewer allocation constraints, so the current allocation stays valid)
    if (sched->callback_eval != nullptr && sched->plans_fused) {
        build_plans(sched, false);
        const enum ggml_status status = prepare_plans(sched);
        if (status != GGML_STATUS_SUCCESS) {
            return status;
        }
        if (!ensure_workspaces(sched)) {
            return GGML_STATUS_ALLOC_FAILED;
        }
    }

    for (size_t i = 0; i < sched->splits.size(); i++) {
        const ggml_sched_split & split         = sched->splits[i];
        ggml_backend_t           split_backend = sched->backends[split.backend_id];

        // no copy orders this split after a previous one on another backend: wait for it
        if (split.inputs.empty() && i > 0 && sched->splits[i - 1].backend_id != split.backend_id) {
            const int            prev_b = sched->splits[i - 1].backend_id;
            ggml_backend_event_t ev     = sched->events[prev_b][sched->cur_copy];
            if (ev) {
                ggml_backend_event_wait(split_backend, ev);
            } else {
                ggml_backend_synchronize(sched->backends[prev_b]);
            }
        }

        copy_inputs(sched, split);

        enum ggml_status status;
        if (sched->callback_eval != nullptr) {
            status = compute_split_observed(sched, split);
        } else if (sched->n_copies == 1 && split_backend->iface.plan_begin != nullptr) {
            status = compute_split_with_hooks(sched, split);
        } else {
            status = compute_range(sched, split, split.i_start, split.i_end);
        }
        if (status != GGML_STATUS_SUCCESS) {
            return status;
        }

        ggml_backend_event_t ev = sched->events[split.backend_id][sched->cur_copy];
        if (ev) {
            ggml_backend_event_record(ev, split_backend);
        }
    }
    return GGML_STATUS_SUCCESS;
}

} // namespace

// =============================================================================================
// Public API

ggml_backend_sched_t ggml_backend_sched_new(ggml_backend_t * backends, ggml_backend_buffer_type_t * bufts,
                                            int n_backends, size_t graph_size, bool parallel, bool op_offload) {
    GGML_ASSERT(backends != nullptr && n_backends > 0 && n_backends <= GGML_SCHED_MAX_BACKENDS &&
                "ggml_backend_sched_new: 1 to 16 backends");
    GGML_ASSERT(graph_size > 0 && "ggml_backend_sched_new: graph_size must be positive");
    ggml_backend_dev_t last_dev = ggml_backend_get_device(backends[n_backends - 1]);
    GGML_ASSERT(last_dev != nullptr && ggml_backend_dev_type(last_dev) == GGML_BACKEND_DEVICE_TYPE_CPU &&
                "ggml_backend_sched_new: the last backend must be a CPU backend");

    auto * sched       = new ggml_backend_sched();
    sched->n_backends  = n_backends;
    sched->n_copies    = parallel ? GGML_SCHED_MAX_COPIES : 1;
    sched->graph_size  = graph_size;
    sched->op_offload  = op_offload;
    memset(sched->events, 0, sizeof(sched->events));
    memset(sched->workspace, 0, sizeof(sched->workspace));
    memset(sched->workspace_needed, 0, sizeof(sched->workspace_needed));

    for (int b = 0; b < n_backends; b++) {
        GGML_ASSERT(backends[b] != nullptr);
        sched->backends[b] = backends[b];
        sched->bufts[b]    = bufts && bufts[b] ? bufts[b] : ggml_backend_get_default_buffer_type(backends[b]);
        GGML_ASSERT(ggml_backend_supports_buft(backends[b], sched->bufts[b]) &&
                    "ggml_backend_sched_new: a backend does not support its buffer type");
        if (sched->n_copies > 1) {
            // backends without events synchronize instead
            for (int c = 0; c < sched->n_copies; c++) {
                sched->events[b][c] = ggml_backend_event_new(ggml_backend_get_device(backends[b]));
            }
        }
    }

    // room for every tensor a graph of graph_size can reference (nodes, leafs, view bases)
    sched->hash_set = ggml_hash_set_new(2 * graph_size + 16);
    sched->hv_backend_ids.assign(sched->hash_set.size, -1);
    sched->hv_pinned.assign(sched->hash_set.size, 0);
    sched->hv_copy_record.assign(sched->hash_set.size, -1);

    sched->galloc = ggml_gallocr_new_n(sched->bufts, n_backends);
    memset(&sched->graph, 0, sizeof(sched->graph));

    ggml_backend_sched_reset(sched);
    return sched;
}

void ggml_backend_sched_free(ggml_backend_sched_t sched) {
    if (sched == nullptr) {
        return;
    }
    for (int b = 0; b < sched->n_backends; b++) {
        ggml_backend_synchronize(sched->backends[b]);
    }
    free_plans(sched);
    for (int b = 0; b < sched->n_backends; b++) {
        for (int c = 0; c < sched->n_copies; c++) {
            ggml_backend_event_free(sched->events[b][c]);
        }
        ggml_backend_buffer_free(sched->workspace[b]);
    }
    ggml_gallocr_free(sched->galloc);
    for (ggml_context * ctx : sched->ctxs) {
        ggml_free(ctx);
    }
    ggml_hash_set_free(&sched->hash_set);
    delete sched;
}

void ggml_backend_sched_reset(ggml_backend_sched_t sched) {
    GGML_ASSERT(sched != nullptr);
    free_plans(sched);
    if (!sched->is_reset) {
        ggml_sched_clear_tensor_state(sched);
        sched->is_reset = true;
    }
    sched->is_alloc = false;
}

bool ggml_backend_sched_reserve(ggml_backend_sched_t sched, struct ggml_cgraph * measure_graph) {
    GGML_ASSERT(sched != nullptr && measure_graph != nullptr);
    ggml_backend_sched_synchronize(sched);

    const bool fusion = ggml_sched_fusion_enabled(sched);
    free_plans(sched); // splitting forgets the splits the plans belong to
    ggml_sched_split_graph_impl(sched, measure_graph, fusion);
    build_plans(sched, fusion);
    bool ok = ggml_gallocr_reserve_n(sched->galloc, &sched->graph, sched->node_backend_ids.data(),
                                     sched->leaf_backend_ids.data());
    if (ok) {
        sched->prepare_status = prepare_plans(sched);
        ok                    = sched->prepare_status == GGML_STATUS_SUCCESS && ensure_workspaces(sched);
    }
    ggml_backend_sched_reset(sched);
    return ok;
}

void ggml_backend_sched_reserve_size(ggml_backend_sched_t sched, struct ggml_cgraph * measure_graph, size_t * sizes) {
    GGML_ASSERT(sched != nullptr && measure_graph != nullptr && sizes != nullptr);
    ggml_backend_sched_reset(sched);
    ggml_backend_sched_synchronize(sched);

    const bool fusion = ggml_sched_fusion_enabled(sched);
    free_plans(sched); // splitting forgets the splits the plans belong to
    ggml_sched_split_graph_impl(sched, measure_graph, fusion);
    build_plans(sched, fusion);
    ggml_gallocr_reserve_n_size(sched->galloc, &sched->graph, sched->node_backend_ids.data(),
                                sched->leaf_backend_ids.data(), sizes);
    // workspace counts even though nothing is allocated here; the current buffers stay as they are
    size_t saved[GGML_SCHED_MAX_BACKENDS];
    memcpy(saved, sched->workspace_needed, sizeof(saved));
    if (prepare_plans(sched) == GGML_STATUS_SUCCESS) {
        for (int b = 0; b < sched->n_backends; b++) {
            sizes[b] += sched->workspace_needed[b];
        }
    }
    memcpy(sched->workspace_needed, saved, sizeof(saved));
    ggml_backend_sched_reset(sched);
}

int ggml_backend_sched_get_n_backends(ggml_backend_sched_t sched) {
    return sched->n_backends;
}

ggml_backend_t ggml_backend_sched_get_backend(ggml_backend_sched_t sched, int i) {
    GGML_ASSERT(i >= 0 && i < sched->n_backends);
    return sched->backends[i];
}

int ggml_backend_sched_get_n_splits(ggml_backend_sched_t sched) {
    return (int) sched->splits.size();
}

int ggml_backend_sched_get_n_copies(ggml_backend_sched_t sched) {
    return sched->n_copies;
}

ggml_backend_buffer_type_t ggml_backend_sched_get_buffer_type(ggml_backend_sched_t sched, ggml_backend_t backend) {
    const int b = ggml_sched_backend_index(sched, backend);
    GGML_ASSERT(b >= 0 && "backend not in scheduler");
    return sched->bufts[b];
}

size_t ggml_backend_sched_get_buffer_size(ggml_backend_sched_t sched, ggml_backend_t backend) {
    const int b = ggml_sched_backend_index(sched, backend);
    GGML_ASSERT(b >= 0 && "backend not in scheduler");
    size_t size = ggml_gallocr_get_buffer_size(sched->galloc, b);
    if (sched->workspace[b] != nullptr) {
        size += ggml_backend_buffer_get_size(sched->workspace[b]);
    }
    return size;
}

void ggml_backend_sched_set_tensor_backend(ggml_backend_sched_t sched, struct ggml_tensor * node,
                                           ggml_backend_t backend) {
    const int b = ggml_sched_backend_index(sched, backend);
    GGML_ASSERT(b >= 0 && "backend not in scheduler");
    ggml_sched_set_tensor_backend_id(sched, node, b, true);
    sched->is_reset = false;
}

ggml_backend_t ggml_backend_sched_get_tensor_backend(ggml_backend_sched_t sched, struct ggml_tensor * node) {
    const size_t slot = ggml_hash_find(&sched->hash_set, node);
    if (slot == GGML_HASHSET_FULL || !ggml_bitset_get(sched->hash_set.used, slot)) {
        return nullptr;
    }
    const int b = sched->hv_backend_ids[slot];
    return b == -1 ? nullptr : sched->backends[b];
}

void ggml_backend_sched_split_graph(ggml_backend_sched_t sched, struct ggml_cgraph * graph) {
    GGML_ASSERT(sched != nullptr && graph != nullptr);
    free_plans(sched);
    ggml_sched_split_graph_impl(sched, graph, ggml_sched_fusion_enabled(sched));
}

bool ggml_backend_sched_alloc_graph(ggml_backend_sched_t sched, struct ggml_cgraph * graph) {
    GGML_ASSERT(sched != nullptr && graph != nullptr);
    GGML_ASSERT(!sched->is_alloc && "ggml_backend_sched_alloc_graph: a graph is already allocated (reset first)");

    sched->cur_copy  = sched->next_copy;
    sched->next_copy = (sched->next_copy + 1) % sched->n_copies;

    const bool fusion = ggml_sched_fusion_enabled(sched);
    free_plans(sched);
    ggml_sched_split_graph_impl(sched, graph, fusion);
    build_plans(sched, fusion);
    if (!alloc_splits(sched)) {
        return false;
    }
    sched->prepare_status = prepare_plans(sched);
    if (sched->prepare_status != GGML_STATUS_SUCCESS || !ensure_workspaces(sched)) {
        free_plans(sched);
        return false;
    }
    sched->is_alloc = true;
    return true;
}

enum ggml_status ggml_backend_sched_graph_compute(ggml_backend_sched_t sched, struct ggml_cgraph * graph) {
    const enum ggml_status status = ggml_backend_sched_graph_compute_async(sched, graph);
    ggml_backend_sched_synchronize(sched);
    return status;
}

enum ggml_status ggml_backend_sched_graph_compute_async(ggml_backend_sched_t sched, struct ggml_cgraph * graph) {
    GGML_ASSERT(sched != nullptr && graph != nullptr);
    if (sched->is_alloc && sched->user_graph != graph) {
        // a different graph than the allocated one: computing the old splits would be wrong
        ggml_backend_sched_reset(sched);
    }
    if (!sched->is_reset && !sched->is_alloc) {
        ggml_backend_sched_reset(sched);
    }
    if (!sched->is_alloc) {
        sched->prepare_status = GGML_STATUS_SUCCESS;
        if (!ggml_backend_sched_alloc_graph(sched, graph)) {
            return sched->prepare_status != GGML_STATUS_SUCCESS ? sched->prepare_status : GGML_STATUS_ALLOC_FAILED;
        }
    }
    return compute_splits(sched);
}

void ggml_backend_sched_synchronize(ggml_backend_sched_t sched) {
    for (int b = 0; b < sched->n_backends; b++) {
        ggml_backend_synchronize(sched->backends[b]);
    }
    if (!sched->is_alloc) {
        // always start from copy 0 after a synchronization without an allocated graph, so that
        // repeated evaluations keep using the same copy
        sched->next_copy = 0;
    }
}

void ggml_backend_sched_set_eval_callback(ggml_backend_sched_t sched, ggml_backend_sched_eval_callback callback,
                                          void * user_data) {
    sched->callback_eval           = callback;
    sched->callback_eval_user_data = user_data;
}

// =============================================================================================
// Plan introspection

int ggml_ext_sched_n_steps(struct ggml_backend_sched * sched) {
    if (sched == nullptr) {
        return 0;
    }
    int n = 0;
    for (const ggml_sched_split & split : sched->splits) {
        if (split.plan != nullptr) {
            n += ggml_ext_plan_n_steps(split.plan);
        }
    }
    return n;
}

bool ggml_ext_sched_get_step(struct ggml_backend_sched * sched, int i, struct ggml_ext_step_info * info) {
    if (sched == nullptr || info == nullptr || i < 0) {
        return false;
    }
    for (size_t s = 0; s < sched->splits.size(); s++) {
        const ggml_sched_split & split = sched->splits[s];
        if (split.plan == nullptr) {
            continue;
        }
        const int n = ggml_ext_plan_n_steps(split.plan);
        if (i >= n) {
            i -= n;
            continue;
        }
        const ggml_ext_plan_step * step = ggml_ext_plan_get_step(split.plan, i);
        info->split                     = (int) s;
        info->backend                   = sched->backends[split.backend_id];
        info->first_node                = step->first;
        info->n_nodes                   = step->n_nodes;
        info->kernel                    = step->kernel ? ggml_ext_kernel_get_desc(step->kernel)->name : nullptr;
        info->fused                     = step->fused;
        info->workspace_bytes           = step->workspace;
        return true;
    }
    return false;
}
