#pragma once

// test-backend.h — a second device for scheduler and extension tests (test-only, never shipped).
//
// Family "TEST", device type GPU (so the scheduler prefers it), with a configurable subset of
// natively supported ops. Its buffer type "TEST" is not host memory as far as ggml can tell
// (is_host false, alignment 64) and the device supports only that buffer type, so the scheduler
// must copy tensors between it and the CPU. The memory is ordinary host memory though, so its
// graphs really run: through an internal CPU backend. Calls and computed nodes are counted.
//
// Every new_device() returns a fresh device object: extension registrations are keyed by device,
// so kernels registered in one test never leak into another. Devices live until process exit.

#include "ggml-backend.h"
#include "ggml.h"

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace test_backend {

// Native support predicate for ops other than NONE and the view ops (always supported).
using native_fn = std::function<bool(const struct ggml_tensor * op)>;

ggml_backend_dev_t new_device(native_fn native, const char * name = "TEST");
ggml_backend_dev_t new_device(std::set<enum ggml_op> ops, const char * name = "TEST");

// A backend on a TEST device (free with ggml_backend_free).
ggml_backend_t init(ggml_backend_dev_t dev);

// What a plan_begin was told (copied: the scheduler's info lives only during the call).
struct plan_step_record {
    int         first     = 0;
    int         n_nodes   = 0;
    std::string kernel;        // "" for a native step
    uint32_t    flags     = 0; // GGML_EXT_KERNEL_* registration flags
    size_t      workspace = 0;
};
struct plan_record {
    const void *                  identity = nullptr;
    int                           i_start = 0, i_end = 0;
    std::vector<plan_step_record> steps;
    int                           n_ext_steps         = 0;
    bool                          all_capture_safe    = false;
    bool                          all_replay_reusable = false;
    bool                          has_workspace       = false;
    size_t                        workspace_bytes     = 0;
};

struct stats {
    int                      graph_computes = 0; // graph_compute calls
    int64_t                  nodes_computed = 0; // non-empty nodes flagged for compute
    std::vector<std::string> node_names;         // of those nodes, in order
    int                      synchronizes   = 0;
    // with enable_plan_hooks: every plan_begin's info, and the order of the backend calls
    // ("begin", "graph", "ext_step_end", "end")
    std::vector<plan_record> plans;
    std::vector<std::string> calls;
};
stats & get_stats(ggml_backend_t backend); // of a TEST backend
void    reset_stats(ggml_backend_t backend);

// Gives a TEST backend recording plan hooks (plan_begin / plan_end / ext_step_end). With
// replay, plan_begin answers that it already launched the plan's work (REPLAYED), as a backend
// replaying a captured graph would; otherwise it answers EXECUTE.
void enable_plan_hooks(ggml_backend_t backend, bool replay = false);

// Whether a buffer type belongs to the TEST family.
bool is_test_buft(ggml_backend_buffer_type_t buft);

// A CPU-type device that behaves exactly like the CPU device (same buffer type, same native
// support), and a CPU backend bound to it: for tests that register extension kernels "on the
// CPU" without leaking them into other tests of the same process.
ggml_backend_dev_t new_cpu_device();
ggml_backend_t     init_cpu(ggml_backend_dev_t cpu_clone); // free with ggml_backend_free

} // namespace test_backend
