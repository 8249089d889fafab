#pragma once

// runner.h — runs a krea2::model block by block through ggml_backend_sched on the CPU backend,
// or on a GPU device with the CPU as fallback (one graph per block; the residual stream goes
// block to block through host memory), and describes the scheduled plan of a block graph.

#include "krea2.h"

#include "ggml-backend.h"

#include <string>
#include <vector>

namespace krea2 {

class runner {
  public:
    // Registers the sd extensions (kernels and fusion rules), then the backends and the
    // scheduler. threads <= 0: the CPU backend default. device: "cpu", a registry family with
    // an optional index ("vulkan", "cuda:1", any case) or an exact device name ("Vulkan0";
    // device_spec.h): that device first, the CPU for what it declines, e.g. the INT8 custom
    // nodes (the weights are in host memory unless model::move_to placed them on the device; ops
    // reading host weights are offloaded with copies).
    // forward() and plan() check every node against the CPU backend (the fallback) first:
    // without a kernel for sd_rope_apply the native RoPE chain is used; any other node without a
    // kernel (INT8 operators when the sd CPU kernels are not built) fails with an error naming
    // it, never reaching the scheduler's abort.
    runner() = default;
    ~runner();
    runner(const runner &)             = delete;
    runner & operator=(const runner &) = delete;

    bool init(int threads, std::string & err, const std::string & device = "cpu");

    struct result {
        std::vector<float>  out;          // [hidden, L]
        std::vector<double> block_s;      // compute seconds of each block graph
        double              total_s = 0;  // sum of block_s
        double              cpu_s   = 0;  // process CPU seconds (all threads) of the same computes
        bool                aborted = false; // forward stopped because the abort callback asked
    };
    using block_cb = std::function<void(int done, int total)>;

    // x: [hidden, L]; tvec: [6*hidden]. Plan/alloc time is excluded from block_s. When the abort
    // callback asks to stop, returns false with r.aborted set (r.out is then meaningless); the
    // runner stays usable and a later forward computes the same result as an uninterrupted one.
    bool forward(const model & m, const build_options & o, const std::vector<float> & x, const std::vector<float> & tvec,
                 result & r, std::string & err, const block_cb & cb = nullptr);

    // One plan row per graph node of block `blk`'s graph, as the scheduler allocated it.
    struct node_row {
        int         index;
        std::string op, name, device, mode, kernel; // mode: native | extension | fused
        int         step;                          // plan step covering it (-1: none)
    };
    struct plan_info {
        std::vector<node_row> nodes;
        size_t                workspace_bytes = 0; // sum of the steps' prepared workspace requests
        size_t                workspace_max   = 0; // the largest single request
        size_t                buffer_bytes    = 0; // ggml_backend_sched_get_buffer_size (incl. workspace)
        int                   n_steps = 0, n_fused = 0, n_ext = 0, n_quantize = 0;
        bool                  rope_ext = false;    // RoPE ran as sd_rope_apply (false: the native op chain)
        std::vector<std::string> fused_rules;      // rule name of each fused step
    };
    bool plan(const model & m, const build_options & o, int blk, plan_info & p, std::string & err);

    ggml_backend_t backend() const { return backend_; } // the CPU backend
    // The --device backend, NULL when the CPU runs everything.
    ggml_backend_t device_backend() const { return gpu_; }
    // Where the model's weights belong: the --device GPU's buffer type, NULL for the CPU.
    ggml_backend_buffer_type_t weight_buffer_type() const {
        return gpu_ ? ggml_backend_get_default_buffer_type(gpu_) : nullptr;
    }

    // The CPU backend's abort callback (polled between nodes and inside long kernels, extension
    // kernels included). Must be async-signal-safe to read when driven by a signal handler's flag.
    void set_abort_callback(ggml_abort_callback cb, void * data);

    // Memory a block graph of m needs besides the weights, measured without allocating:
    // the scheduler's compute buffer incl. extension workspaces (ggml_backend_sched_reserve_size)
    // and a bound on the CPU executor's work buffer (it converts or packs a mul_mat's
    // activations: at most their F32 size, plus per-thread panels).
    struct memory_use {
        size_t compute_bytes  = 0;
        size_t cpu_work_bytes = 0;
    };
    bool measure(const model & m, const build_options & o, memory_use & u, std::string & err);

    // Per-op time profile: while enabled, forward() evaluates the graph node by node through the
    // scheduler's evaluation callback (so fusion is off for those runs) and adds each node's
    // compute time to its op's row. Rows are keyed by the op name (extension ops by theirs).
    struct profile_row {
        std::string op;
        int         count   = 0;
        double      seconds = 0;
    };
    void                            set_profile(bool on);
    const std::vector<profile_row> & profile() const { return profile_; }

    // Resident memory of the process right after init() (code, libraries, the backends and the
    // GPU driver they loaded): the base of every memory estimate, measured once so estimates of
    // one process do not drift with what it allocates later.
    size_t resident_at_init() const { return resident_at_init_; }

  private:
    ggml_backend_sched_t new_scheduler() const; // over backend_ (and gpu_ first when set)
    static bool eval_cb(ggml_tensor * t, bool ask, void * user);
    size_t                   resident_at_init_ = 0;
    std::vector<profile_row> profile_;
    double                   node_t0_ = 0;

    ggml_backend_t       backend_ = nullptr; // CPU
    ggml_backend_t       gpu_     = nullptr; // the --device backend, if not the CPU
    ggml_backend_sched_t sched_   = nullptr;
};

// Relative RMS deviation ||a - b|| / ||b|| (b the reference).
double rel_rms(const std::vector<float> & a, const std::vector<float> & b);
// The same for what the stack added to its input x: ||a - b|| / ||b - x|| (the residual stream
// carries x through unchanged, which would otherwise dilute the deviation).
double rel_rms_update(const std::vector<float> & a, const std::vector<float> & b, const std::vector<float> & x);

} // namespace krea2
