#pragma once

// krea2-ref.h — the Krea2 block stack (dit-workloads.md §2.2, §2.3, §4) as plain loops in double
// on the synthetic weights of src/model: what the model's graph is checked against, in either
// build (test-model with this repository's ggml, tests/upstream with an upstream ggml).

#include "model/krea2.h"

#include <cstdint>
#include <string>
#include <vector>

namespace krea2_ref {

// The output [hidden, tokens] of c.blocks blocks on synthetic_input / synthetic_tvec /
// synthetic_source of `seed`. K and V are rounded to F16 like the graph's casts before
// attention (the only intended precision loss of the F32 graph). false with err if the
// synthetic source fails.
bool forward(const krea2::config & c, uint64_t seed, std::vector<float> & out, std::string & err);

} // namespace krea2_ref
