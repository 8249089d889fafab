// ggml-ext-plan.cpp — plans: the frozen split of a node range into native ranges and extension
// steps, their prepared state and shared workspace, their execution, and the temporary plans of
// direct (non-scheduler) backend compute.

#include "backend/ggml-backend-impl.h"
#include "ext/ggml-ext-internal.h"

#include <algorithm>
#include <vector>

struct ggml_ext_plan {
    ggml_backend_dev_t                   dev;
    struct ggml_cgraph *                 graph;
    int                                  i0;
    int                                  i1;
    std::vector<ggml_ext_plan_step>      steps;
    std::vector<bool>                    idle;     // native step with nothing to compute
    bool                                 has_ext  = false;
    bool                                 prepared = false;
    size_t                               workspace = 0; // max prepared request
};

namespace {

// Nodes a backend does no work for: they join native ranges and never start a match.
bool is_skippable(const struct ggml_tensor * t) {
    return ggml_op_is_empty(t->op) || !(t->flags & GGML_TENSOR_FLAG_COMPUTE);
}

void push_native(ggml_ext_plan & p, int i, bool skippable) {
    if (!p.steps.empty() && p.steps.back().kernel == nullptr && p.steps.back().first + p.steps.back().n_nodes == i) {
        p.steps.back().n_nodes++;
        if (!skippable) p.idle.back() = false;
        return;
    }
    p.steps.push_back({i, 1, nullptr, false, nullptr, 0});
    p.idle.push_back(skippable);
}

void push_ext(ggml_ext_plan & p, int i, int n, const ggml_ext_kernel * k) {
    p.steps.push_back({i, n, k, n > 1, nullptr, 0});
    p.idle.push_back(false);
    p.has_ext = true;
}

void destroy_states(ggml_ext_plan & p) {
    for (auto & s : p.steps) {
        if (s.kernel != nullptr && s.state != nullptr && s.kernel->desc.destroy != nullptr) {
            s.kernel->desc.destroy(s.state, s.kernel->desc.user_data);
        }
        s.state     = nullptr;
        s.workspace = 0;
    }
    p.prepared  = false;
    p.workspace = 0;
}

enum ggml_status run_native(ggml_backend_t backend, struct ggml_cgraph * graph, int i0, int i1) {
    if (i0 == 0 && i1 == graph->n_nodes) return backend->iface.graph_compute(backend, graph);
    struct ggml_cgraph view = ggml_graph_view(graph, i0, i1);
    return backend->iface.graph_compute(backend, &view);
}

} // namespace

struct ggml_ext_plan * ggml_ext_plan_new(ggml_backend_dev_t dev, struct ggml_cgraph * graph, int i0, int i1,
                                         bool allow_fusion) {
    GGML_ASSERT(graph != nullptr);
    GGML_ASSERT(0 <= i0 && i0 <= i1 && i1 <= graph->n_nodes && "ggml_ext_plan_new: range out of bounds");
    auto * p  = new ggml_ext_plan();
    p->dev    = dev;
    p->graph  = graph;
    p->i0     = i0;
    p->i1     = i1;

    auto ks = ggml_ext_dev_snapshot(dev);
    if (!ks) {
        if (i1 > i0) {
            p->steps.push_back({i0, i1 - i0, nullptr, false, nullptr, 0});
            p->idle.push_back(false);
        }
        return p;
    }

    const bool try_fusion = allow_fusion && !ks->rules.empty();
    for (int i = i0; i < i1;) {
        struct ggml_tensor * node = graph->nodes[i];
        if (is_skippable(node)) {
            push_native(*p, i, true);
            ++i;
            continue;
        }
        if (try_fusion) {
            int n_fused = 0;
            for (const ggml_ext_kernel * k : ks->rules) {
                const int n = k->desc.match(dev, graph, i, k->desc.user_data);
                if (n >= 2 && n <= i1 - i && ggml_ext_fusion_is_legal(graph, i, n, nullptr, 0)) {
                    push_ext(*p, i, n, k);
                    n_fused = n;
                    break;
                }
            }
            if (n_fused > 0) {
                i += n_fused;
                continue;
            }
        }
        const ggml_ext_kernel * k = ggml_ext_select_kernel_in(*ks, dev, node);
        if (k != nullptr) {
            push_ext(*p, i, 1, k);
        } else {
            push_native(*p, i, false);
        }
        ++i;
    }
    return p;
}

void ggml_ext_plan_free(struct ggml_ext_plan * plan) {
    if (plan == nullptr) return;
    destroy_states(*plan);
    delete plan;
}

int ggml_ext_plan_n_steps(const struct ggml_ext_plan * plan) {
    return plan ? (int) plan->steps.size() : 0;
}

const struct ggml_ext_plan_step * ggml_ext_plan_get_step(const struct ggml_ext_plan * plan, int i) {
    if (plan == nullptr || i < 0 || i >= (int) plan->steps.size()) return nullptr;
    return &plan->steps[(size_t) i];
}

bool ggml_ext_plan_has_extensions(const struct ggml_ext_plan * plan) {
    return plan != nullptr && plan->has_ext;
}

enum ggml_status ggml_ext_plan_prepare(struct ggml_ext_plan * plan, size_t * workspace_bytes) {
    GGML_ASSERT(plan != nullptr);
    destroy_states(*plan);
    size_t ws = 0;
    for (auto & s : plan->steps) {
        if (s.kernel == nullptr || s.kernel->desc.prepare == nullptr) continue;
        const ggml_ext_kernel_desc & d     = s.kernel->desc;
        const ggml_ext_nodes         nodes = {plan->graph->nodes + s.first, s.n_nodes};
        void *                       state = nullptr;
        size_t                       bytes = 0;
        const enum ggml_status       st    = d.prepare(plan->dev, &nodes, &state, &bytes, d.user_data);
        s.state     = state; // kept even on failure so destroy still sees it
        s.workspace = bytes;
        if (st != GGML_STATUS_SUCCESS) {
            GGML_LOG_ERROR("%s: prepare of kernel %s failed (status %d)\n", __func__, d.name, (int) st);
            if (workspace_bytes) *workspace_bytes = 0;
            return st;
        }
        // steps run one after another, so one buffer of the largest request serves them all
        ws = std::max(ws, bytes);
    }
    plan->prepared  = true;
    plan->workspace = ws;
    if (workspace_bytes) *workspace_bytes = ws;
    return GGML_STATUS_SUCCESS;
}

enum ggml_status ggml_ext_plan_compute(struct ggml_ext_plan * plan, ggml_backend_t backend, void * workspace,
                                       size_t workspace_bytes, int j0, int j1) {
    GGML_ASSERT(plan != nullptr && backend != nullptr);
    if (j0 < 0 && j1 < 0) {
        j0 = plan->i0;
        j1 = plan->i1;
    }
    if (plan->has_ext && !plan->prepared) {
        size_t                 need = 0;
        const enum ggml_status st   = ggml_ext_plan_prepare(plan, &need);
        if (st != GGML_STATUS_SUCCESS) return st;
    }
    if (plan->workspace > 0 && (workspace == nullptr || workspace_bytes < plan->workspace)) {
        GGML_LOG_ERROR("%s: the plan needs %zu workspace bytes, got %zu\n", __func__, plan->workspace,
                       workspace ? workspace_bytes : (size_t) 0);
        return GGML_STATUS_FAILED;
    }
    for (size_t i = 0; i < plan->steps.size(); ++i) {
        const ggml_ext_plan_step & s = plan->steps[i];
        if (s.first < j0 || s.first + s.n_nodes > j1) continue;
        enum ggml_status st = GGML_STATUS_SUCCESS;
        if (s.kernel == nullptr) {
            if (plan->idle[i]) continue;
            st = run_native(backend, plan->graph, s.first, s.first + s.n_nodes);
        } else {
            const ggml_ext_kernel_desc & d     = s.kernel->desc;
            const ggml_ext_nodes         nodes = {plan->graph->nodes + s.first, s.n_nodes};
            const bool                   ws    = s.workspace > 0;
            st = d.execute(backend, &nodes, s.state, ws ? workspace : nullptr, ws ? workspace_bytes : 0, d.user_data);
            // a backend that records extension work into its stream completes the step here
            // unless a scheduled plan batches it (the ext_step_end member of ggml_backend_i)
            if (backend->iface.ext_step_end != nullptr) {
                const enum ggml_status end_status = backend->iface.ext_step_end(backend);
                if (st == GGML_STATUS_SUCCESS) st = end_status;
            }
            if (st != GGML_STATUS_SUCCESS && st != GGML_STATUS_ABORTED) { // an abort was asked for, not a failure
                GGML_LOG_ERROR("%s: kernel %s failed on %s (status %d)\n", __func__, d.name,
                               nodes.nodes[nodes.n_nodes - 1]->name, (int) st);
            }
        }
        // an extension that fails has already been launched: report, never fall back to native
        if (st != GGML_STATUS_SUCCESS) return st;
    }
    return GGML_STATUS_SUCCESS;
}

enum ggml_status ggml_ext_compute_direct(ggml_backend_t backend, struct ggml_cgraph * graph, int i0, int i1) {
    GGML_ASSERT(backend != nullptr && graph != nullptr);
    GGML_ASSERT(0 <= i0 && i0 <= i1 && i1 <= graph->n_nodes && "ggml_ext_compute_direct: range out of bounds");
    ggml_backend_dev_t dev = backend->device;
    if (dev == nullptr || !ggml_ext_dev_has_kernels(dev)) return run_native(backend, graph, i0, i1);

    struct ggml_ext_plan * plan = ggml_ext_plan_new(dev, graph, i0, i1, /*allow_fusion=*/false);
    if (!plan->has_ext) {
        ggml_ext_plan_free(plan);
        return run_native(backend, graph, i0, i1);
    }

    size_t           ws = 0;
    enum ggml_status st = ggml_ext_plan_prepare(plan, &ws);
    ggml_backend_buffer_t buf = nullptr;
    if (st == GGML_STATUS_SUCCESS && ws > 0) {
        buf = ggml_backend_buft_alloc_buffer(ggml_backend_get_default_buffer_type(backend), ws);
        if (buf == nullptr) {
            GGML_LOG_ERROR("%s: failed to allocate %zu workspace bytes\n", __func__, ws);
            st = GGML_STATUS_ALLOC_FAILED;
        }
    }
    if (st == GGML_STATUS_SUCCESS) {
        st = ggml_ext_plan_compute(plan, backend, buf ? ggml_backend_buffer_get_base(buf) : nullptr,
                                   buf ? ggml_backend_buffer_get_size(buf) : 0, i0, i1);
    }
    // queued work may still read the workspace and the prepared state
    ggml_backend_synchronize(backend);
    if (buf != nullptr) ggml_backend_buffer_free(buf);
    ggml_ext_plan_free(plan);
    return st;
}
