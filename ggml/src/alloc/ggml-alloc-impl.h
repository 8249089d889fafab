#pragma once

// ggml-alloc-impl.h — allocator hooks used by the scheduler (private to ggml/src).

#include "ggml-alloc.h"

// Extra consumers for lifetime planning: for each pair k, consumers[k] is treated as also
// reading tensors[k], so tensors[k] stays allocated until consumers[k] has been allocated.
// The scheduler uses this to keep the external inputs of a fused range alive through its final
// node (the fused kernel reads them while writing the output). Replaces the previous set;
// n_pairs == 0 clears it. Applies to subsequent reserve/alloc calls.
void ggml_gallocr_set_extra_uses(ggml_gallocr_t galloc, struct ggml_tensor * const * consumers,
                                 struct ggml_tensor * const * tensors, int n_pairs);
