#pragma once

// ggml-ext-impl.h — the contract between the extension registries / plans (ggml-ext*.cpp), the
// scheduler (ggml-sched*.cpp), direct backend compute (ggml-backend.cpp) and the CPU backend.
// Private to ggml/src.

#include "ggml-ext.h"
#include "ggml-impl.h"

#include <cstddef>
#include <cstdint>

// ---------------------------------------------------------------------------------------------
// Nodes

// true for nodes made by ggml_ext_op_create (GGML_OP_CUSTOM with the extension marker). The CPU
// backend's native support check answers false for these: only a registered kernel runs them.
bool ggml_ext_is_ext_node(const struct ggml_tensor * node);

// ---------------------------------------------------------------------------------------------
// Kernel registry

struct ggml_ext_kernel; // one registration (desc copy, flags, device)

const struct ggml_ext_kernel_desc * ggml_ext_kernel_get_desc(const struct ggml_ext_kernel * k);
uint32_t                            ggml_ext_kernel_get_flags(const struct ggml_ext_kernel * k);

// Whether any kernel or rule is registered on dev (fast path: none -> plain native execution).
bool ggml_ext_dev_has_kernels(ggml_backend_dev_t dev);

// Single-node selection, frozen by plans: highest priority first among kernels for node's op
// (or custom op) whose supports() accepts it; when native supports the node too, a kernel is
// chosen only if its preferred() is absent or true. NULL: run natively.
const struct ggml_ext_kernel * ggml_ext_select_kernel(ggml_backend_dev_t dev, const struct ggml_tensor * node);

// Capability query part: some registered single-node kernel (not fusion-only) supports node.
bool ggml_ext_dev_supports_op(ggml_backend_dev_t dev, const struct ggml_tensor * node);

// Runs the optimize callbacks registered on dev (priority order) on graph.
void ggml_ext_run_optimizers(ggml_backend_dev_t dev, struct ggml_cgraph * graph);

// ---------------------------------------------------------------------------------------------
// Fusion legality (central; rules only say how many nodes they would replace)

// Checks nodes [first, first + n) of graph as one fused step with the last node as the output:
// compute flags, external uses (by recorded use counts, incl. consumers outside a graph view),
// output flags on intermediates, views (internal views must view storage owned inside the
// match), in-place intermediates (owner must be an earlier node of the match), and the final
// output (owns its storage, or is a terminal CPY, or writes back to an earlier owner of the
// match over its exact full shape/type/strides/offset without external consumers). On
// rejection returns false and writes the reason into why (may be NULL).
bool ggml_ext_fusion_is_legal(const struct ggml_cgraph * graph, int first, int n, char * why, size_t why_size);

// ---------------------------------------------------------------------------------------------
// Plans: the frozen list of steps for nodes [i0, i1) of a graph on one device

struct ggml_ext_plan;

struct ggml_ext_plan_step {
    int                            first;     // node index in the graph
    int                            n_nodes;
    const struct ggml_ext_kernel * kernel;    // NULL: native range
    bool                           fused;
    void *                         state;     // from prepare
    size_t                         workspace; // from prepare
};

// Selects kernels (and, when allow_fusion, matches fusion rules at each node in priority order
// and keeps the first legal match). No callbacks other than supports/preferred/match run here.
struct ggml_ext_plan * ggml_ext_plan_new(ggml_backend_dev_t dev, struct ggml_cgraph * graph, int i0, int i1,
                                         bool allow_fusion);
void                   ggml_ext_plan_free(struct ggml_ext_plan * plan); // destroys prepared states

int                               ggml_ext_plan_n_steps(const struct ggml_ext_plan * plan);
const struct ggml_ext_plan_step * ggml_ext_plan_get_step(const struct ggml_ext_plan * plan, int i);
bool                              ggml_ext_plan_has_extensions(const struct ggml_ext_plan * plan);

// Calls prepare for every extension step (again after a previous prepare: states are destroyed
// and rebuilt). *workspace_bytes = the maximum request (steps run sequentially and share it).
enum ggml_status ggml_ext_plan_prepare(struct ggml_ext_plan * plan, size_t * workspace_bytes);

// Runs the steps whose nodes lie in [j0, j1) (whole steps only; j0/j1 must be step boundaries,
// -1/-1 for all): native ranges through backend->iface.graph_compute on a graph view, extension
// steps through execute. Stops at the first error and returns it (never retries natively).
enum ggml_status ggml_ext_plan_compute(struct ggml_ext_plan * plan, ggml_backend_t backend, void * workspace,
                                       size_t workspace_bytes, int j0, int j1);

// Direct (non-scheduler) execution of graph nodes [i0, i1) on backend with a temporary plan:
// single-node extensions only, never fusion; allocates a temporary workspace buffer of the
// backend's default type, synchronizes before releasing it. Used by ggml_backend_graph_compute
// and ggml_backend_graph_compute_range.
enum ggml_status ggml_ext_compute_direct(ggml_backend_t backend, struct ggml_cgraph * graph, int i0, int i1);
