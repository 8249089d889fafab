#pragma once

// memory_check.h — refuses a run whose peak memory (measured before anything large is
// allocated: krea2::estimate_memory) exceeds what this process may still use, with the sizes
// and what would fit instead, exit 1.

#include "model/memory_plan.h"

#include <string>
#include <vector>

namespace sdx {

struct model_opts;

struct run_phase {
    krea2::phase_spec spec;
    std::string       label; // "the INT8 stack", "the F32 check", ...
};

// Returns the estimate when it fits; else fails. check_phase: the phase --no-check removes (-1:
// none). Test hook: SDX_TEST_MEM_AVAILABLE=BYTES replaces the measured available memory, so the
// outcome does not depend on the machine.
krea2::memory_estimate check_memory(krea2::runner & r, const model_opts & o, const std::vector<run_phase> & phases,
                                    int check_phase, krea2::available_memory & avail);

} // namespace sdx
