#pragma once

// sd-fusion-test.h — helpers shared by the sd CPU kernel and fusion tests (test-sd-ops,
// test-fusion-*, test-int8). Header-only: every test is its own executable and uses a subset.
//
// What lives here is what those tests did identically: a CPU backend with the sd extensions, the
// switches tests flip for a reference run (fusion on/off, INT8 path), name-seeded input values, a
// graph context, a scheduler that finds a rule's fused step, and bitwise comparison. What a test
// checks stays in the test file.

#include "cpu/int8-impl.h"
#include "ggml_extensions.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace sd_fusion_test {

// ---------------------------------------------------------------------------------------------
// Backend and switches

// A CPU backend with the sd extensions registered first (so a test that runs alone still finds
// the kernels and rules). Odd thread counts give odd partitions; use_ref selects the portable
// kernels, which a fused kernel must match as well as the fast ones.
struct cpu_backend {
    ggml_backend_t b = nullptr;
    explicit cpu_backend(int n_threads, bool use_ref = false) {
        EXPECT_TRUE(sd_ggml_register_extensions());
        b = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(b, n_threads);
        if (use_ref) ggml_backend_cpu_set_use_ref(b, true);
    }
    ~cpu_backend() { ggml_backend_free(b); }
    operator ggml_backend_t() const { return b; } // NOLINT: passed where the API takes a backend
    cpu_backend(const cpu_backend &)             = delete;
    cpu_backend & operator=(const cpu_backend &) = delete;
};

// Fusion switched for a reference run; back on at scope exit even when an assertion returns
// early, so one test's reference run cannot leave fusion off for the next test.
struct fusion_scope {
    explicit fusion_scope(bool on) { sd_ggml_set_fusion_enabled(on); }
    ~fusion_scope() { sd_ggml_set_fusion_enabled(true); }
    fusion_scope(const fusion_scope &)             = delete;
    fusion_scope & operator=(const fusion_scope &) = delete;
};

// A forced INT8 path, back to automatic at scope exit (same reason as fusion_scope).
struct path_scope {
    explicit path_scope(sd_int8::path p) { sd_int8::set_path_override(p); }
    ~path_scope() { sd_int8::set_path_override(sd_int8::path::automatic); }
    path_scope(const path_scope &)             = delete;
    path_scope & operator=(const path_scope &) = delete;
};

// The paths of `wanted` this CPU can run (tests name the paths they cover). A path the CPU lacks
// cannot be tested here; that is said once per path on stdout, never passed over silently.
inline std::vector<sd_int8::path> available_paths(std::initializer_list<sd_int8::path> wanted) {
    static std::set<sd_int8::path> reported;
    std::vector<sd_int8::path>     v;
    for (sd_int8::path p : wanted) {
        if (sd_int8::path_available(p)) {
            v.push_back(p);
        } else if (reported.insert(p).second) {
            std::printf("[   NOTE   ] INT8 path '%s' is not available on this CPU (or above the GGML_CPU_ISA cap): "
                        "not tested in this run\n",
                        sd_int8::path_name(p));
        }
    }
    return v;
}

// ---------------------------------------------------------------------------------------------
// Values

// Uniform values seeded by a name: two graphs built alike get the same data, and a reference can
// regenerate an input instead of reading it back (the allocator may reuse consumed inputs).
inline std::vector<float> random_values(const std::string & name, int64_t n, float lo = -2.0f, float hi = 2.0f) {
    std::mt19937                          rng((uint32_t) std::hash<std::string>()(name));
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float>                    v((size_t) n);
    for (float & x : v) x = dist(rng);
    return v;
}

// The values f32_graph::fill gives an input (before any tweak), for the references.
inline std::vector<float> input_values(const ggml_tensor * t) {
    return random_values(t->name, ggml_nelements(t));
}

inline std::vector<float> get_f32(const ggml_tensor * t) {
    std::vector<float> v((size_t) ggml_nelements(t));
    ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
    return v;
}

// Fused kernels promise the unfused chain's bits: compare the representations, so -0 vs +0 and
// differing NaNs count as differences (float == would hide both).
inline void expect_bitwise_equal(const std::vector<float> & a, const std::vector<float> & b, const std::string & what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t i = 0; i < a.size(); ++i) {
        uint32_t ua, ub;
        memcpy(&ua, &a[i], 4);
        memcpy(&ub, &b[i], 4);
        ASSERT_EQ(ua, ub) << what << ": element " << i << ": " << a[i] << " vs " << b[i];
    }
}

// ---------------------------------------------------------------------------------------------
// Graphs

// A no_alloc context holding one graph; tensors are allocated later by a scheduler or a graph
// allocator. The graph exists from the start so a test can expand nodes in a chosen order
// (e.g. an activation before its sibling branch) before build() adds the outputs.
struct graph_base {
    static constexpr size_t k_graph_nodes = 2048;

    ggml_context * ctx = nullptr;
    ggml_cgraph *  gf  = nullptr;

    explicit graph_base(size_t n_tensors = 512) {
        const size_t     bytes = ggml_tensor_overhead() * n_tensors + ggml_graph_overhead_custom(k_graph_nodes, false);
        ggml_init_params p{bytes, nullptr, true};
        ctx = ggml_init(p);
        gf  = ggml_new_graph_custom(ctx, k_graph_nodes, false);
    }
    ~graph_base() { ggml_free(ctx); }
    graph_base(const graph_base &)             = delete;
    graph_base & operator=(const graph_base &) = delete;

    // marks `outs` as outputs (so no fusion may swallow them) and adds them in this order
    void build(const std::vector<ggml_tensor *> & outs) {
        for (ggml_tensor * o : outs) {
            ggml_set_output(o);
            ggml_build_forward_expand(gf, o);
        }
    }
};

// Named F32 inputs filled with input_values() after allocation; `tweak` may change an input's
// values first (non-finite injection). compute_direct runs the graph without a scheduler, i.e.
// never fused.
struct f32_graph : graph_base {
    using tweak_fn = std::function<void(const ggml_tensor *, std::vector<float> &)>;

    std::vector<ggml_tensor *> inputs;
    tweak_fn                   tweak;
    ggml_gallocr_t             ga = nullptr;

    ~f32_graph() {
        if (ga) ggml_gallocr_free(ga);
    }
    ggml_tensor * input(const char * name, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1) {
        ggml_tensor * t = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, ne0, ne1, ne2, ne3);
        ggml_set_name(t, name);
        ggml_set_input(t);
        inputs.push_back(t);
        return t;
    }
    void fill() {
        for (ggml_tensor * t : inputs) {
            std::vector<float> v = input_values(t);
            if (tweak) tweak(t, v);
            ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
        }
    }
    void compute_direct(ggml_backend_t backend) {
        ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
        ASSERT_TRUE(ggml_gallocr_alloc_graph(ga, gf));
        fill();
        ASSERT_EQ(ggml_backend_graph_compute(backend, gf), GGML_STATUS_SUCCESS);
    }
};

// ---------------------------------------------------------------------------------------------
// Scheduler

// A scheduler over one CPU backend (fusion is a scheduler decision: direct compute never fuses)
// that knows the kernels of the rule under test, so a test can ask whether the plan fused.
struct sched_run {
    ggml_backend_sched_t      sched = nullptr;
    std::vector<const char *> rule_kernels; // a step running one of these is the rule's fused step
    int                       n_nodes;      // how many nodes that step must cover (0: not checked)

    sched_run(ggml_backend_t b, std::vector<const char *> kernels, int nodes = 0) :
        rule_kernels(std::move(kernels)),
        n_nodes(nodes) {
        ggml_backend_t             backends[1] = {b};
        ggml_backend_buffer_type_t bufts[1]    = {ggml_backend_cpu_buffer_type()};
        sched = ggml_backend_sched_new(backends, bufts, 1, graph_base::k_graph_nodes, false, false);
    }
    ~sched_run() { ggml_backend_sched_free(sched); }
    sched_run(const sched_run &)             = delete;
    sched_run & operator=(const sched_run &) = delete;

    // Allocates g.gf, fills the inputs (they have memory only now), computes. G has gf and fill().
    template <class G> ggml_status run(G & g) {
        if (!ggml_backend_sched_alloc_graph(sched, g.gf)) {
            ADD_FAILURE() << "the scheduler could not allocate the graph";
            return GGML_STATUS_ALLOC_FAILED;
        }
        g.fill();
        return ggml_backend_sched_graph_compute(sched, g.gf);
    }
    template <class G> void compute(G & g) { ASSERT_EQ(run(g), GGML_STATUS_SUCCESS); }

    // The rule's step, if the plan has one (copied to *info); `expect_kernel` (if set) is the
    // one of rule_kernels it must run.
    bool fused_step(const char * expect_kernel, ggml_ext_step_info * info = nullptr) {
        for (int i = 0; i < ggml_ext_sched_n_steps(sched); ++i) {
            ggml_ext_step_info s;
            if (!ggml_ext_sched_get_step(sched, i, &s) || !s.kernel) continue;
            bool ours = false;
            for (const char * k : rule_kernels) ours = ours || strcmp(s.kernel, k) == 0;
            if (!ours) continue;
            if (expect_kernel) {
                EXPECT_STREQ(s.kernel, expect_kernel);
            }
            EXPECT_TRUE(s.fused);
            if (n_nodes > 0) {
                EXPECT_EQ(s.n_nodes, n_nodes);
            }
            if (info) *info = s;
            return true;
        }
        return false;
    }
    bool fused_step(ggml_ext_step_info * info = nullptr) { return fused_step(nullptr, info); }
};

} // namespace sd_fusion_test
