#pragma once

// ggml-ext-internal.h — what the extension files (ggml-ext-*.cpp) share among themselves beyond
// the cross-module contract in ggml-ext-impl.h: the thread-local error, the kernel record and
// the per-device snapshot that plan building reads without holding the registry lock.

#include "ext/ggml-ext-impl.h"

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

// Formats the thread's ggml_ext_last_error() message (truncated to GGML_EXT_MAX_ERROR - 1).
void ggml_ext_set_error(const char * fmt, ...) __attribute__((format(printf, 1, 2)));

struct ggml_ext_kernel {
    ggml_ext_kernel_desc desc;  // desc.name points into `name`
    std::string          name;
    uint32_t             flags;
    ggml_backend_dev_t   dev;
    uint64_t             seq;   // registration order (ties in priority keep it)
};

// Immutable view of one device's registrations, rebuilt on every registration. Readers hold a
// shared_ptr so a concurrent registration never invalidates a list being walked.
struct ggml_ext_dev_kernels {
    std::vector<const ggml_ext_kernel *> by_op[GGML_OP_COUNT]; // single-node kernels of built-in ops
    std::unordered_map<ggml_ext_op_t, std::vector<const ggml_ext_kernel *>> by_custom; // custom ops
    std::vector<const ggml_ext_kernel *> rules;      // kernels with match()
    std::vector<const ggml_ext_kernel *> optimizers; // kernels with optimize()
    // every list above is in priority order (higher first, then registration order)
};

// NULL when nothing is registered on dev.
std::shared_ptr<const ggml_ext_dev_kernels> ggml_ext_dev_snapshot(ggml_backend_dev_t dev);

// ggml_ext_select_kernel on an already taken snapshot (plan building takes one per plan).
const ggml_ext_kernel * ggml_ext_select_kernel_in(const ggml_ext_dev_kernels & ks, ggml_backend_dev_t dev,
                                                  const struct ggml_tensor * node);
