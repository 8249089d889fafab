#pragma once

// plan-replay-cache.h — the host side of whole-plan device replay (spec, "sd.cpp integration":
// CAPTURE_SAFE, whole-plan CUDA Graph capture, REPLAY_REUSABLE). Pure C++, no device runtime:
// it decides, per execution of a scheduled plan, whether the backend dispatches ordinarily,
// warms up, captures, replays or records into an enclosing capture, and it keeps the executors
// of retired reusable plans for the next equivalent plan. The CUDA backend drives it through
// plan-replay-hooks.h; the tests drive it with fake executors.
//
// Executors are opaque handles with a release callback (a cudaGraphExec_t on CUDA), so nothing
// here knows what a captured graph is.

#include "backend/ggml-backend-impl.h"

#include <cstddef>
#include <cstdint>
#include <list>
#include <vector>

// ---------------------------------------------------------------------------------------------
// Plan key: everything recorded device work may depend on, copied by value out of the graph
// range (node ops, types, shapes, strides, op params, flags, data addresses of nodes and
// sources, the range's internal structure, selected kernels with their flags and workspace
// requests, the workspace address and size, the execution stream). Two plans with equal keys
// record the same device work; comparing keys never touches a graph, so a key outlives the graph
// and metadata arena it was built from.
struct ggml_plan_key {
    std::vector<uint64_t> words;
    uint64_t              hash = 0;

    bool operator==(const ggml_plan_key & other) const { return hash == other.hash && words == other.words; }
    bool operator!=(const ggml_plan_key & other) const { return !(*this == other); }
};

// false (and *out untouched) for a malformed plan: no graph, a range outside the graph, steps
// that leave the range or a step list missing while steps are announced.
bool ggml_plan_key_build(const ggml_backend_plan_info & info, const void * stream, ggml_plan_key * out);

// ---------------------------------------------------------------------------------------------
// A captured plan's executor: an opaque handle released exactly once, by its owner.
class ggml_plan_executor {
  public:
    using release_fn = void (*)(void * handle);

    ggml_plan_executor() = default;
    ggml_plan_executor(void * handle, release_fn release) : handle_(handle), release_(release) {}
    ~ggml_plan_executor() { reset(); }

    ggml_plan_executor(ggml_plan_executor && other) noexcept;
    ggml_plan_executor & operator=(ggml_plan_executor && other) noexcept;
    ggml_plan_executor(const ggml_plan_executor &)             = delete;
    ggml_plan_executor & operator=(const ggml_plan_executor &) = delete;

    void * handle() const { return handle_; }
    explicit operator bool() const { return handle_ != nullptr; }
    void reset();

  private:
    void *     handle_  = nullptr;
    release_fn release_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// The executors of retired REPLAY_REUSABLE plans, oldest first. Bounded by an entry count and
// by the sum of the plans' workspace requirements; a plan whose workspace alone exceeds the byte
// bound is not kept (it had plan-local capture only).
class ggml_plan_replay_cache {
  public:
    static constexpr size_t default_max_entries         = 16;
    static constexpr size_t default_max_workspace_bytes = 256u * 1024u * 1024u;

    explicit ggml_plan_replay_cache(size_t max_entries         = default_max_entries,
                                    size_t max_workspace_bytes = default_max_workspace_bytes)
        : max_entries_(max_entries), max_workspace_bytes_(max_workspace_bytes) {}

    // Keeps exec under key as the newest entry and evicts the oldest ones beyond the bounds.
    // false: not kept (workspace alone over the bound, or an empty executor); exec is released.
    bool retire(ggml_plan_key key, size_t workspace_bytes, ggml_plan_executor exec);
    // Removes and returns the executor kept under key; empty when there is none.
    ggml_plan_executor take(const ggml_plan_key & key);

    size_t size() const { return entries_.size(); }
    size_t workspace_bytes() const { return workspace_bytes_; }
    size_t max_entries() const { return max_entries_; }
    size_t max_workspace_bytes() const { return max_workspace_bytes_; }
    void   clear();

  private:
    struct entry {
        ggml_plan_key      key;
        size_t             workspace_bytes;
        ggml_plan_executor exec;
    };
    std::list<entry> entries_; // oldest first
    size_t           workspace_bytes_ = 0;
    size_t           max_entries_;
    size_t           max_workspace_bytes_;
};

// ---------------------------------------------------------------------------------------------
// The decision for one execution of a plan.
enum class ggml_plan_replay_action {
    ORDINARY,        // dispatch as before (fragments); no capture now or later for this state
    WARM_UP,         // execute ordinarily: first execution of this plan (or after invalidation)
    CAPTURE,         // capture the execution, then instantiate and launch it
    REPLAY,          // launch the executor (replay_handle()); the range is not executed
    RECORD_DIRECTLY, // an enclosing capture is recording the stream: execute into it, no nesting
};

const char * ggml_plan_replay_action_name(ggml_plan_replay_action action);

// What the backend knows about this execution besides the plan.
struct ggml_plan_replay_env {
    bool graphs_disabled   = false; // GGML_CUDA_DISABLE_GRAPHS
    bool enclosing_capture = false; // the stream is being captured by someone else
    bool stable_scratch    = true;  // native scratch addresses stay valid for the backend lifetime (VMM)
};

// GGML_CUDA_DISABLE_GRAPHS as upstream reads it: set to anything disables graphs.
bool ggml_plan_replay_env_disables_graphs(const char * value);

// Per backend: the live plans (captured or warming up) and the cache of retired reusable ones.
// A plan is identified by the scheduler's plan_identity and its node range; a different identity
// over an overlapping range replaces (retires) the live plan there, because the scheduler rebuilt
// its plan.
class ggml_plan_replay_state {
  public:
    static constexpr size_t default_max_live = 16;

    explicit ggml_plan_replay_state(size_t max_cached          = ggml_plan_replay_cache::default_max_entries,
                                    size_t max_cached_workspace = ggml_plan_replay_cache::default_max_workspace_bytes,
                                    size_t max_live             = default_max_live)
        : cache_(max_cached, max_cached_workspace), max_live_(max_live) {}

    ggml_plan_replay_action begin(const ggml_backend_plan_info & info, const void * stream,
                                  const ggml_plan_replay_env & env);

    // After REPLAY: the executor to launch.
    void * replay_handle() const;
    // After CAPTURE: the capture produced exec; later executions of the same key replay it.
    void capture_succeeded(ggml_plan_executor exec);
    // After CAPTURE: the capture failed; this plan dispatches ordinarily from now on (a capture
    // is never retried, so work that failed once is not re-run behind the caller's back).
    void capture_failed();
    // After REPLAY (or the launch following a capture): launching failed; the executor is dropped
    // and the plan warms up again at its next execution.
    void replay_failed();

    const ggml_plan_replay_cache & cache() const { return cache_; }
    size_t                         n_live() const { return live_.size(); }
    // Releases every executor (backend destruction, after synchronizing).
    void clear();

  private:
    enum class phase { cold, warmed, capturing, captured, failed };
    struct live_plan {
        const void *       identity;
        int                i_start, i_end;
        ggml_plan_key      key;
        bool               reusable;
        size_t             workspace_bytes;
        phase              ph;
        ggml_plan_executor exec;
    };
    using live_iter = std::list<live_plan>::iterator;

    void retire(live_iter it);
    void adopt_cached(live_plan & plan);

    std::list<live_plan>   live_; // most recently used first
    live_plan *            current_ = nullptr;
    ggml_plan_replay_cache cache_;
    size_t                 max_live_;
};
