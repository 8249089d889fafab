#pragma once

// storage-overlap.h — when a CPU extension kernel must stage its output: the storage tests
// shared by the sd CPU kernels and fusion rules.

#include "ggml.h"

namespace sd_cpu {

// Whether the bytes of a and b intersect (false while either has no address yet).
inline bool overlaps(const ggml_tensor * a, const ggml_tensor * b) {
    if (a == nullptr || b == nullptr || a->data == nullptr || b->data == nullptr) return false;
    const char * pa = (const char *) a->data;
    const char * pb = (const char *) b->data;
    return pa < pb + ggml_nbytes(b) && pb < pa + ggml_nbytes(a);
}

// Whether a step's output may land on one of its inputs, decided at prepare time, possibly before
// addresses exist. A fresh output allocation (no address yet, not a view) never does: the
// allocator does not place a GGML_OP_CUSTOM node or a fused step's output over its inputs, and
// the scheduler keeps a fused step's external inputs alive through its last node. A
// pre-allocated or view output might, unless the addresses are known not to overlap. NULL
// entries of inputs are skipped.
inline bool output_may_overlap(const ggml_tensor * out, const ggml_tensor * const * inputs, int n) {
    if (out->data == nullptr) return out->view_src != nullptr;
    for (int i = 0; i < n; ++i) {
        if (inputs[i] != nullptr && (inputs[i]->data == nullptr || overlaps(out, inputs[i]))) return true;
    }
    return false;
}

} // namespace sd_cpu
