// ggml-ext-kernels.cpp — the per-device kernel registry: validation of registrations, the
// priority-ordered snapshots plan building reads, single-node selection, the extension half of
// the capability query, and optimize callbacks.

#include "backend/ggml-backend-impl.h"
#include "ext/ggml-ext-internal.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace {

struct dev_state {
    std::vector<std::unique_ptr<ggml_ext_kernel>> owned; // registration order; never removed
    std::shared_ptr<const ggml_ext_dev_kernels>   snapshot;
};

struct kernel_registry {
    std::mutex                                         mutex;
    std::unordered_map<ggml_backend_dev_t, dev_state>  devs;
    uint64_t                                           next_seq = 0;
    // Lets the overwhelmingly common case (nothing registered anywhere) skip the lock entirely.
    std::atomic<bool> any{false};
};

kernel_registry & registry() {
    static kernel_registry r;
    return r;
}

bool higher_first(const ggml_ext_kernel * a, const ggml_ext_kernel * b) {
    if (a->desc.priority != b->desc.priority) return a->desc.priority > b->desc.priority;
    return a->seq < b->seq;
}

std::shared_ptr<const ggml_ext_dev_kernels> build_snapshot(const dev_state & st) {
    std::vector<const ggml_ext_kernel *> all;
    all.reserve(st.owned.size());
    for (const auto & k : st.owned) all.push_back(k.get());
    std::stable_sort(all.begin(), all.end(), higher_first);

    auto s = std::make_shared<ggml_ext_dev_kernels>();
    for (const ggml_ext_kernel * k : all) {
        const ggml_ext_kernel_desc & d = k->desc;
        if (d.op == GGML_OP_CUSTOM) {
            s->by_custom[d.custom_op].push_back(k);
        } else if (d.op != GGML_OP_NONE) {
            s->by_op[d.op].push_back(k);
        }
        if (d.match) s->rules.push_back(k);
        if (d.optimize) s->optimizers.push_back(k);
    }
    return s;
}

// Ops whose nodes are pure metadata: the first interface does not intercept them.
bool is_view_op(enum ggml_op op) {
    return op != GGML_OP_NONE && ggml_op_is_empty(op);
}

// Candidates for one node: views and explicit in-place nodes (view_src set) are never
// intercepted, and user CUSTOM callbacks have no registered operator to match.
const std::vector<const ggml_ext_kernel *> * candidates(const ggml_ext_dev_kernels & ks,
                                                        const struct ggml_tensor * node) {
    if (node == nullptr || ggml_op_is_empty(node->op) || node->view_src != nullptr) return nullptr;
    if (node->op == GGML_OP_CUSTOM) {
        const ggml_ext_op_t op = ggml_ext_get_op(node);
        if (op == 0) return nullptr;
        auto it = ks.by_custom.find(op);
        return it == ks.by_custom.end() ? nullptr : &it->second;
    }
    if ((int) node->op < 0 || node->op >= GGML_OP_COUNT) return nullptr;
    const auto & v = ks.by_op[node->op];
    return v.empty() ? nullptr : &v;
}

bool validate(const ggml_ext_kernel_desc * desc, uint32_t flags) {
    if (desc == nullptr || desc->name == nullptr || desc->name[0] == '\0') {
        ggml_ext_set_error("ggml_ext_register_kernel: a name is required");
        return false;
    }
    const char * name = desc->name;
    const uint32_t known = GGML_EXT_KERNEL_CAPTURE_SAFE | GGML_EXT_KERNEL_REPLAY_REUSABLE;
    if (flags & ~known) {
        ggml_ext_set_error("ggml_ext_register_kernel: %s: unknown flag bits 0x%x", name, flags & ~known);
        return false;
    }
    if ((flags & GGML_EXT_KERNEL_REPLAY_REUSABLE) && !(flags & GGML_EXT_KERNEL_CAPTURE_SAFE)) {
        ggml_ext_set_error("ggml_ext_register_kernel: %s: REPLAY_REUSABLE requires CAPTURE_SAFE", name);
        return false;
    }
    if (desc->execute == nullptr) {
        ggml_ext_set_error("ggml_ext_register_kernel: %s: execute is required", name);
        return false;
    }
    if ((int) desc->op < 0 || desc->op >= GGML_OP_COUNT) {
        ggml_ext_set_error("ggml_ext_register_kernel: %s: invalid op %d", name, (int) desc->op);
        return false;
    }
    if (desc->op == GGML_OP_NONE) {
        if (desc->match == nullptr) {
            ggml_ext_set_error("ggml_ext_register_kernel: %s: a fusion-only registration (op NONE) needs match", name);
            return false;
        }
        return true;
    }
    if (is_view_op(desc->op)) {
        ggml_ext_set_error("ggml_ext_register_kernel: %s: view op %s cannot be overridden", name,
                           ggml_op_name(desc->op));
        return false;
    }
    if (desc->supports == nullptr) {
        ggml_ext_set_error("ggml_ext_register_kernel: %s: supports is required for a single-node kernel", name);
        return false;
    }
    if (desc->op == GGML_OP_CUSTOM) {
        if (ggml_ext_op_name(desc->custom_op) == nullptr) {
            ggml_ext_set_error("ggml_ext_register_kernel: %s: custom_op %d is not a registered operator", name,
                               (int) desc->custom_op);
            return false;
        }
    } else if (desc->custom_op != 0) {
        ggml_ext_set_error("ggml_ext_register_kernel: %s: custom_op is only meaningful with GGML_OP_CUSTOM", name);
        return false;
    }
    return true;
}

} // namespace

std::shared_ptr<const ggml_ext_dev_kernels> ggml_ext_dev_snapshot(ggml_backend_dev_t dev) {
    kernel_registry & r = registry();
    if (dev == nullptr || !r.any.load(std::memory_order_acquire)) return nullptr;
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.devs.find(dev);
    return it == r.devs.end() ? nullptr : it->second.snapshot;
}

const ggml_ext_kernel * ggml_ext_select_kernel_in(const ggml_ext_dev_kernels & ks, ggml_backend_dev_t dev,
                                                  const struct ggml_tensor * node) {
    const auto * list = candidates(ks, node);
    if (list == nullptr) return nullptr;
    // asked only once some kernel supports the node; no device implements an application's
    // operator natively, whatever a permissive supports_op may claim for GGML_OP_CUSTOM
    int native = ggml_ext_is_ext_node(node) ? 0 : -1;
    for (const ggml_ext_kernel * k : *list) {
        const ggml_ext_kernel_desc & d = k->desc;
        if (!d.supports(dev, node, d.user_data)) continue;
        if (d.preferred == nullptr) return k;
        if (native < 0) native = ggml_ext_dev_supports_native_op(dev, node) ? 1 : 0;
        if (!native) return k; // the only way to run it here: preference does not matter
        if (d.preferred(dev, node, d.user_data)) return k;
    }
    return nullptr;
}

const struct ggml_ext_kernel_desc * ggml_ext_kernel_get_desc(const struct ggml_ext_kernel * k) {
    return k ? &k->desc : nullptr;
}

uint32_t ggml_ext_kernel_get_flags(const struct ggml_ext_kernel * k) {
    return k ? k->flags : 0;
}

bool ggml_ext_dev_has_kernels(ggml_backend_dev_t dev) {
    return ggml_ext_dev_snapshot(dev) != nullptr;
}

const struct ggml_ext_kernel * ggml_ext_select_kernel(ggml_backend_dev_t dev, const struct ggml_tensor * node) {
    auto ks = ggml_ext_dev_snapshot(dev);
    return ks ? ggml_ext_select_kernel_in(*ks, dev, node) : nullptr;
}

bool ggml_ext_dev_supports_op(ggml_backend_dev_t dev, const struct ggml_tensor * node) {
    auto ks = ggml_ext_dev_snapshot(dev);
    if (!ks) return false;
    const auto * list = candidates(*ks, node);
    if (list == nullptr) return false;
    for (const ggml_ext_kernel * k : *list) {
        if (k->desc.supports(dev, node, k->desc.user_data)) return true;
    }
    return false;
}

void ggml_ext_run_optimizers(ggml_backend_dev_t dev, struct ggml_cgraph * graph) {
    auto ks = ggml_ext_dev_snapshot(dev);
    if (!ks) return;
    for (const ggml_ext_kernel * k : ks->optimizers) {
        k->desc.optimize(dev, graph, k->desc.user_data);
    }
}

extern "C" {

bool ggml_ext_register_kernel(ggml_backend_dev_t dev, const struct ggml_ext_kernel_desc * desc) {
    return ggml_ext_register_kernel_ex(dev, desc, 0);
}

bool ggml_ext_register_kernel_ex(ggml_backend_dev_t dev, const struct ggml_ext_kernel_desc * desc, uint32_t flags) {
    if (dev == nullptr) {
        ggml_ext_set_error("ggml_ext_register_kernel: device is NULL");
        return false;
    }
    if (!validate(desc, flags)) return false;

    kernel_registry &           r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    dev_state &                 st = r.devs[dev];
    for (const auto & k : st.owned) {
        if (k->name == desc->name) {
            ggml_ext_set_error("ggml_ext_register_kernel: %s is already registered on this device", desc->name);
            return false;
        }
    }
    auto k       = std::make_unique<ggml_ext_kernel>();
    k->name      = desc->name;
    k->desc      = *desc;
    k->desc.name = k->name.c_str();
    if (k->desc.op != GGML_OP_CUSTOM) k->desc.custom_op = 0;
    k->flags = flags;
    k->dev   = dev;
    k->seq   = r.next_seq++;
    st.owned.push_back(std::move(k));
    st.snapshot = build_snapshot(st);
    r.any.store(true, std::memory_order_release);
    return true;
}

bool ggml_ext_dev_supports_native_op(ggml_backend_dev_t dev, const struct ggml_tensor * op) {
    GGML_ASSERT(dev != nullptr && op != nullptr);
    return dev->iface.supports_op(dev, op);
}

} // extern "C"
