#pragma once

// isa_levels.h — runs a check once per CPU instruction-set level (ggml-cpu.h: ggml_cpu_isa_level,
// ggml_cpu_set_isa), so every level's kernels are checked on every machine that can run them and
// no level the CPU lacks ever runs (it is reported as skipped, with the reason).
//
//   for (const std::string & lv : test_isa::runnable_levels()) {
//       test_isa::scoped_cap cap(lv.c_str());
//       SCOPED_TRACE("isa " + lv);
//       ... build and compute the graph, compare with the reference ...
//   }
//   test_isa::note_skipped_levels(); // prints the levels this CPU cannot run

#include "ggml-cpu.h"

#include <cstdio>
#include <string>
#include <vector>

namespace test_isa {

// The levels this CPU can run, lowest first ("portable" first). A process started with
// GGML_CPU_ISA=L only yields the levels up to L (the cap is the ceiling of the whole run).
inline std::vector<std::string> runnable_levels() {
    std::vector<std::string> out;
    const std::string        env_cap = ggml_cpu_get_isa(); // the active level before any scoped cap
    for (int i = 0; i < ggml_cpu_isa_count(); ++i) {
        out.push_back(ggml_cpu_isa_level(i));
        if (out.back() == env_cap) break;
    }
    return out;
}

// The levels of this build's architecture family the suite knows, lowest first, whether or not
// this CPU has them.
inline std::vector<std::string> all_levels() {
#if defined(__aarch64__)
    return {"portable", "neon", "dotprod", "i8mm"};
#else
    return {"portable", "avx2", "avx_vnni", "avx512", "amx"};
#endif
}

// The other family's levels: never runnable here, refused by ggml_cpu_set_isa.
inline std::vector<std::string> foreign_levels() {
#if defined(__aarch64__)
    return {"avx2", "avx_vnni", "avx512", "amx"};
#else
    return {"neon", "dotprod", "i8mm"};
#endif
}

// Prints each known level this run skips ("not on this CPU" / "above the GGML_CPU_ISA cap").
inline void note_skipped_levels() {
    const std::vector<std::string> run = runnable_levels();
    for (const std::string & l : all_levels()) {
        bool found = false;
        for (const std::string & r : run) found = found || r == l;
        if (!found) printf("[ isa      ] level %s skipped: not on this CPU or above the cap\n", l.c_str());
    }
}

// Caps the level for one scope, then restores the process default.
struct scoped_cap {
    explicit scoped_cap(const char * level) { ggml_cpu_set_isa(level); }
    ~scoped_cap() { ggml_cpu_set_isa(nullptr); }
    scoped_cap(const scoped_cap &)             = delete;
    scoped_cap & operator=(const scoped_cap &) = delete;
};

} // namespace test_isa
