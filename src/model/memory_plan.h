#pragma once

// memory_plan.h — the peak memory of running a Krea2 stack, measured before anything large is
// allocated (weights from the tensor layout, the compute buffer and extension workspaces from the
// scheduler's reserve-size pass over a block graph whose weights occupy no memory), the memory
// this process may still use (MemAvailable and the cgroup limit), and what would fit instead.

#include "krea2.h"
#include "runner.h"

#include <cstddef>
#include <string>
#include <vector>

namespace krea2 {

// One phase of a run: one model loaded in `type` and run through the runner. Phases run in
// order on one runner; each keeps its output on the host for the phases after it (the F32
// check compares against it). The scheduler's compute buffer and the CPU work buffer only grow
// across phases, so a later phase pays for the largest of them so far.
struct phase_spec {
    wtype         type;
    build_options bo;
    int           held_outputs = 0; // [hidden, L] F32 outputs of earlier phases still held
};

struct memory_estimate {
    size_t weights  = 0; // weight buffer of the phase at the peak
    size_t compute  = 0; // scheduler compute buffer incl. extension workspaces (largest so far)
    size_t cpu_work = 0; // bound on the CPU executor's work buffer (largest so far)
    size_t host     = 0; // host copies at the peak: one block's weights while loading, x, pe, outputs
    size_t process  = 0; // resident before the run: code, libraries, loaded GPU drivers (lavapipe's LLVM)
    size_t total    = 0; // the peak: the largest phase's sum, plus process and a fixed runtime overhead
    int    peak_phase = 0;
    bool   peak_while_loading = false;
};

// Fixed allowance for everything not modelled: thread stacks, graph metadata, the allocator.
constexpr size_t RUNTIME_OVERHEAD_BYTES = (size_t) 64 << 20;

// Measures phases for cfg. Allocates nothing large: weights are laid out in reserved address
// space. false with err when a graph cannot be built for cfg.
bool estimate_memory(runner & r, const config & cfg, const std::vector<phase_spec> & phases, memory_estimate & e,
                     std::string & err);

struct available_memory {
    size_t      bytes = SIZE_MAX; // SIZE_MAX: unknown
    std::string source;           // "MemAvailable", "cgroup memory.max", ...
};
// min(MemAvailable, every enclosing cgroup's limit minus its usage (reclaimable file pages
// counted as free)).
available_memory query_available_memory();
// The same from other files (tests): /proc/meminfo, /proc/self/cgroup, the cgroup mount root.
available_memory query_available_memory_from(const std::string & meminfo, const std::string & self_cgroup,
                                             const std::string & cgroup_root);

// Room a suggestion leaves below `avail`: the estimate includes the process's resident size at
// init, which differs by a few MiB from one process to the next (driver threads, page faults), so
// a suggestion that fitted exactly in this process could be refused in the run it proposes.
size_t suggest_headroom(size_t avail);

// What fits in `avail` bytes instead of cfg, with suggest_headroom(avail) to spare: a phrase like
// "try --tokens 4096, --blocks 7 or --no-check" ("" when nothing smaller fits either). check_phase: index of the phase that
// --no-check removes (-1: none). text_tokens_fixed: keep cfg.text_tokens when changing the
// tokens (else the sdx default min(32, L/2)).
std::string suggest_fit(runner & r, const config & cfg, const std::vector<phase_spec> & phases, size_t avail,
                        int check_phase, bool text_tokens_fixed);

} // namespace krea2
