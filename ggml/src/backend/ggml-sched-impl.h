#pragma once

// ggml-sched-impl.h — the scheduler's state, shared by its two translation units:
// ggml-sched-assign.cpp (backend assignment passes, splitting with input copies, the internal
// allocation graph) and ggml-sched.cpp (allocation, extension plans and workspaces, execution,
// public API). Private to ggml/src.

#include "ggml-alloc.h"
#include "backend/ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ext/ggml-ext-impl.h"
#include "ggml-impl.h"

#include <cstdint>
#include <vector>

#define GGML_SCHED_MAX_BACKENDS 16
#define GGML_SCHED_MAX_COPIES   4

struct ggml_sched_split {
    int                        backend_id = -1;
    int                        i_start    = 0; // node range of the user graph
    int                        i_end      = 0;
    std::vector<ggml_tensor *> inputs;         // originals; their copies live on backend_id
    ggml_ext_plan *            plan = nullptr; // built by alloc/reserve, kept until reset

    // What the backend's plan hooks see of the plan (filled when the plan is prepared, cleared
    // with it): the steps with their kernels and registration flags, and the plan's identity.
    std::vector<ggml_backend_plan_step> hook_steps;
    int                                 hook_n_ext_steps    = 0;
    bool                                hook_capture_safe   = true;
    bool                                hook_replay_reusable = true;
    const void *                        plan_identity       = nullptr;
};

struct ggml_backend_sched {
    bool is_reset = false; // assignments cleared since the last split
    bool is_alloc = false; // a split graph is allocated and may be computed

    int                        n_backends = 0;
    ggml_backend_t             backends[GGML_SCHED_MAX_BACKENDS];
    ggml_backend_buffer_type_t bufts[GGML_SCHED_MAX_BACKENDS];
    ggml_gallocr_t             galloc = nullptr;

    size_t graph_size = 0;
    bool   op_offload = false;

    // per-tensor state, indexed by hash slot
    ggml_hash_set        hash_set = { 0, nullptr, nullptr };
    std::vector<int32_t> hv_backend_ids; // -1: unassigned
    std::vector<uint8_t> hv_pinned;      // set by ggml_backend_sched_set_tensor_backend
    std::vector<int32_t> hv_copy_record; // -1, or index of the tensor's record in `copies`
    // copy records: n_backends * n_copies tensors each (copy of a tensor on backend b, copy c)
    std::vector<ggml_tensor *> copies;
    std::vector<size_t>        copy_slots; // hash slots that own a record (to clear them quickly)

    // the split graph
    ggml_cgraph *                 user_graph = nullptr;
    std::vector<ggml_sched_split> splits;
    std::vector<ggml_tensor *>    graph_inputs; // INPUT tensors duplicated per copy (n_copies > 1)

    // internal allocation graph: per split its input dependencies and copies, then its nodes
    ggml_cgraph                graph;
    std::vector<ggml_tensor *> graph_nodes;
    std::vector<ggml_tensor *> graph_leafs;
    std::vector<int>           node_backend_ids;
    std::vector<int>           leaf_backend_ids;
    std::vector<int>           prev_node_backend_ids;
    std::vector<int>           prev_leaf_backend_ids;

    // pool of no_alloc contexts for copies and dependency views (reset with each split)
    std::vector<ggml_context *> ctxs;
    size_t                      ctx_cur = 0;

    int                  n_copies  = 1;
    int                  cur_copy  = 0;
    int                  next_copy = 0;
    ggml_backend_event_t events[GGML_SCHED_MAX_BACKENDS][GGML_SCHED_MAX_COPIES];

    ggml_backend_sched_eval_callback callback_eval           = nullptr;
    void *                           callback_eval_user_data = nullptr;

    // extensions
    bool                  plans_fused = false; // plans were built with fusion allowed
    enum ggml_status      prepare_status = GGML_STATUS_SUCCESS;
    ggml_backend_buffer_t workspace[GGML_SCHED_MAX_BACKENDS];        // grows only
    size_t                workspace_needed[GGML_SCHED_MAX_BACKENDS]; // of the current plans
};

// ---------------------------------------------------------------------------------------------
// Per-tensor state (ggml-sched-assign.cpp)

int  ggml_sched_backend_index(const ggml_backend_sched * sched, ggml_backend_t backend); // -1 if not ours
int  ggml_sched_tensor_backend_id(ggml_backend_sched * sched, ggml_tensor * t);           // -1: unassigned
void ggml_sched_set_tensor_backend_id(ggml_backend_sched * sched, ggml_tensor * t, int backend_id, bool pinned);
// clears assignments, pins and copies (hash set and per-slot arrays)
void ggml_sched_clear_tensor_state(ggml_backend_sched * sched);

// Assignment (passes 1-4), optional extension optimizers, splitting with input copies (pass 5)
// and the internal allocation graph.
void ggml_sched_split_graph_impl(ggml_backend_sched * sched, ggml_cgraph * graph, bool run_optimizers);

// Fusion is only allowed with one pipeline copy and no evaluation callback.
static inline bool ggml_sched_fusion_enabled(const ggml_backend_sched * sched) {
    return sched->n_copies == 1 && sched->callback_eval == nullptr;
}
