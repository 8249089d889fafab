#pragma once

// kernel_desc.h — what every sd kernel file's registration shares (CPU and Vulkan): building the
// two kinds of ggml_ext_kernel_desc they register (a single-node kernel of a custom operator, a
// fusion-only rule), registering a set of them with one stderr line per failure, and keeping the
// first attempt's result per device. Each kernel file's registration then reads as its names and
// callbacks only. Header-only: these run once per device at registration.

#include "ggml_extensions.h"

#include <cstdio>
#include <initializer_list>
#include <map>
#include <mutex>

namespace sd_kernels {

using supports_fn = decltype(ggml_ext_kernel_desc::supports);
using match_fn    = decltype(ggml_ext_kernel_desc::match);
using optimize_fn = decltype(ggml_ext_kernel_desc::optimize);
using prepare_fn  = decltype(ggml_ext_kernel_desc::prepare);
using execute_fn  = decltype(ggml_ext_kernel_desc::execute);
using destroy_fn  = decltype(ggml_ext_kernel_desc::destroy);

// A single-node kernel of the custom operator op.
inline ggml_ext_kernel_desc op_kernel(const char * name, ggml_ext_op_t op, supports_fn supports, prepare_fn prepare,
                                      execute_fn execute, destroy_fn destroy = nullptr, void * user_data = nullptr) {
    ggml_ext_kernel_desc d{};
    d.name      = name;
    d.op        = GGML_OP_CUSTOM;
    d.custom_op = op;
    d.supports  = supports;
    d.prepare   = prepare;
    d.execute   = execute;
    d.destroy   = destroy;
    d.user_data = user_data;
    return d;
}

// A fusion-only rule (GGML_OP_NONE: it claims no single-node support); optimize may be NULL.
inline ggml_ext_kernel_desc fusion_rule(const char * name, match_fn match, optimize_fn optimize, prepare_fn prepare,
                                        execute_fn execute, destroy_fn destroy = nullptr, void * user_data = nullptr) {
    ggml_ext_kernel_desc d{};
    d.name      = name;
    d.op        = GGML_OP_NONE;
    d.match     = match;
    d.optimize  = optimize;
    d.prepare   = prepare;
    d.execute   = execute;
    d.destroy   = destroy;
    d.user_data = user_data;
    return d;
}

// Registers every desc on dev (each is tried, so one failure does not hide another); false when
// any failed, each failure reported as "<who>: kernel registration failed: <reason>" (the
// reason names the kernel).
inline bool register_all(ggml_backend_dev_t dev, std::initializer_list<ggml_ext_kernel_desc> descs, const char * who) {
    bool ok = true;
    for (const ggml_ext_kernel_desc & d : descs) {
        if (!ggml_ext_register_kernel(dev, &d)) {
            fprintf(stderr, "%s: kernel registration failed: %s\n", who, ggml_ext_last_error());
            ok = false;
        }
    }
    return ok;
}

// The result of a registration function's first call per device, for every later call: a retry
// after a partial failure would only fail again on the kernels that did register (duplicate
// names), and must not turn into a silent success. One instance per kernel file (a static).
class once_per_device {
  public:
    template <class F> bool operator()(ggml_backend_dev_t dev, F && register_fn) {
        std::lock_guard<std::mutex> lock(mu_);
        const auto                  known = result_.find(dev);
        if (known != result_.end()) return known->second;
        return result_[dev] = register_fn();
    }

  private:
    std::mutex                         mu_;
    std::map<ggml_backend_dev_t, bool> result_;
};

} // namespace sd_kernels
