#pragma once

// test-ext-common.h — fixtures for the extension-interface tests: fresh fake devices that wrap
// the CPU device (so registrations never leak between tests and native support can be switched
// off per op), a fake backend on such a device that runs the CPU backend and logs calls, and
// CPU-computed toy kernels (ADD override, custom op test.axpb.v1, MUL->ADD fusion rule).

#include "ggml-alloc.h"
#include "backend/ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ext/ggml-ext-impl.h"
#include "ggml-ext.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace ext_test {

// ---------------------------------------------------------------------------------------------
// Fake devices and backends

struct fake_dev_info {
    ggml_backend_dev_t real;
    std::set<int>      native_off; // ops this device reports as natively unsupported
};

inline std::map<const void *, fake_dev_info> & fake_devs() {
    static std::map<const void *, fake_dev_info> m;
    return m;
}

inline bool fake_supports_op(ggml_backend_dev_t dev, const struct ggml_tensor * op) {
    const fake_dev_info & f = fake_devs().at(dev);
    if (f.native_off.count((int) op->op)) return false;
    return f.real->iface.supports_op(f.real, op);
}

// A new device object each call: registrations are keyed by device, so every test starts clean.
// Kept alive until exit (the registry keeps the pointer as a key for the life of the process).
inline ggml_backend_dev_t new_fake_dev(std::set<int> native_off = {}) {
    ggml_backend_dev_t real = ggml_backend_reg_dev_get(ggml_backend_cpu_reg(), 0);
    // owned by a static pool: freed only at exit, after every registry lookup is over
    static std::vector<std::unique_ptr<ggml_backend_device>> pool;
    pool.push_back(std::make_unique<ggml_backend_device>(*real));
    ggml_backend_device * d = pool.back().get();
    d->iface.supports_op    = fake_supports_op;
    fake_devs()[d]          = {real, std::move(native_off)};
    return d;
}

struct call_log {
    std::vector<std::string>   events;
    int                        graph_computes = 0;
    const struct ggml_cgraph * last_graph     = nullptr;
    int                        last_n_nodes   = 0;

    int index_of(const std::string & e, int from = 0) const {
        for (size_t i = (size_t) from; i < events.size(); ++i) {
            if (events[i] == e) return (int) i;
        }
        return -1;
    }
    int count(const std::string & e) const {
        int n = 0;
        for (const auto & x : events) n += x == e;
        return n;
    }
};

inline call_log & g_log() {
    static call_log l;
    return l;
}

inline std::map<const void *, ggml_backend_t> & fake_backends() {
    static std::map<const void *, ggml_backend_t> m;
    return m;
}

inline enum ggml_status fake_graph_compute(ggml_backend_t b, struct ggml_cgraph * g) {
    ggml_backend_t real = fake_backends().at(b);
    g_log().graph_computes++;
    g_log().last_graph   = g;
    g_log().last_n_nodes = g->n_nodes;
    g_log().events.push_back("native");
    return real->iface.graph_compute(real, g);
}

inline void fake_synchronize(ggml_backend_t b) {
    ggml_backend_t real = fake_backends().at(b);
    g_log().events.push_back("sync");
    if (real->iface.synchronize) real->iface.synchronize(real);
}

// The CPU backend seen through a fake device (shares the CPU backend's context).
inline ggml_backend_t new_fake_backend(ggml_backend_t cpu, ggml_backend_dev_t dev) {
    auto * b                = new ggml_backend(*cpu);
    b->device               = dev;
    b->iface.graph_compute  = fake_graph_compute;
    b->iface.synchronize    = fake_synchronize;
    b->iface.free           = nullptr;
    fake_backends()[b]      = cpu;
    return b;
}

inline void free_fake_backend(ggml_backend_t b) {
    fake_backends().erase(b);
    delete b;
}

// ---------------------------------------------------------------------------------------------
// Toy kernels (CPU memory, F32, contiguous)

struct kernel_counters {
    int    supports  = 0;
    int    preferred = 0;
    int    match     = 0;
    int    prepare   = 0;
    int    execute   = 0;
    int    destroy   = 0;
    int    optimize  = 0;
    bool   prefer    = true;                  // answer of preferred()
    size_t workspace = 0;                     // reported by prepare
    enum ggml_status prepare_status = GGML_STATUS_SUCCESS;
    enum ggml_status execute_status = GGML_STATUS_SUCCESS;
    std::vector<size_t> seen_workspace_bytes; // per execute
    std::vector<bool>   seen_workspace_ptr;   // per execute: non-NULL
    std::string         tag;                  // logged as "<tag>:prepare" etc. when set
};

inline bool f32_contig(const struct ggml_tensor * t) {
    return t && t->type == GGML_TYPE_F32 && ggml_is_contiguous(t);
}

inline void log_event(kernel_counters * c, const char * what) {
    if (!c->tag.empty()) g_log().events.push_back(c->tag + ":" + what);
}

inline bool k_supports_binary(ggml_backend_dev_t, const struct ggml_tensor * n, void * ud) {
    static_cast<kernel_counters *>(ud)->supports++;
    return f32_contig(n) && f32_contig(n->src[0]) && f32_contig(n->src[1]) && ggml_are_same_shape(n, n->src[0]) &&
           ggml_are_same_shape(n, n->src[1]);
}

inline bool k_supports_any(ggml_backend_dev_t, const struct ggml_tensor *, void * ud) {
    static_cast<kernel_counters *>(ud)->supports++;
    return true;
}

inline bool k_supports_none(ggml_backend_dev_t, const struct ggml_tensor *, void * ud) {
    static_cast<kernel_counters *>(ud)->supports++;
    return false;
}

inline bool k_preferred(ggml_backend_dev_t, const struct ggml_tensor *, void * ud) {
    auto * c = static_cast<kernel_counters *>(ud);
    c->preferred++;
    return c->prefer;
}

inline enum ggml_status k_prepare(ggml_backend_dev_t, const struct ggml_ext_nodes *, void ** state,
                                  size_t * workspace_bytes, void * ud) {
    auto * c = static_cast<kernel_counters *>(ud);
    c->prepare++;
    log_event(c, "prepare");
    *state           = new int(42);
    *workspace_bytes = c->workspace;
    return c->prepare_status;
}

inline void k_destroy(void * state, void * ud) {
    auto * c = static_cast<kernel_counters *>(ud);
    c->destroy++;
    log_event(c, "destroy");
    delete static_cast<int *>(state);
}

inline void note_execute(kernel_counters * c, void * workspace, size_t workspace_bytes) {
    c->execute++;
    log_event(c, "execute");
    c->seen_workspace_bytes.push_back(workspace_bytes);
    c->seen_workspace_ptr.push_back(workspace != nullptr);
    if (workspace != nullptr && workspace_bytes > 0) memset(workspace, 0x5a, workspace_bytes); // scratch is ours
}

// ADD override: out = a + b, computed here.
inline enum ggml_status k_execute_add(ggml_backend_t, const struct ggml_ext_nodes * nodes, void *, void * workspace,
                                      size_t workspace_bytes, void * ud) {
    auto * c = static_cast<kernel_counters *>(ud);
    note_execute(c, workspace, workspace_bytes);
    if (c->execute_status != GGML_STATUS_SUCCESS) return c->execute_status;
    struct ggml_tensor * out = nodes->nodes[nodes->n_nodes - 1];
    const float *        a   = (const float *) out->src[0]->data;
    const float *        b   = (const float *) out->src[1]->data;
    float *              y   = (float *) out->data;
    for (int64_t i = 0; i < ggml_nelements(out); ++i) y[i] = a[i] + b[i];
    return GGML_STATUS_SUCCESS;
}

// ---- custom op test.axpb.v1: y = a*x + b (attrs {a, b}), one F32 input

struct axpb_attrs {
    float a;
    float b;
};

inline bool axpb_infer(const struct ggml_tensor * const * src, int n_src, const void * attrs, enum ggml_type * type,
                       int64_t ne[GGML_MAX_DIMS], char * err, size_t err_size, void *) {
    if (n_src != 1 || src[0]->type != GGML_TYPE_F32) {
        snprintf(err, err_size, "expects one F32 input");
        return false;
    }
    (void) attrs;
    *type = GGML_TYPE_F32;
    for (int d = 0; d < GGML_MAX_DIMS; ++d) ne[d] = src[0]->ne[d];
    return true;
}

inline ggml_ext_op_t axpb_op() {
    static ggml_ext_op_t id = [] {
        ggml_ext_op_desc d{};
        d.name      = "test.axpb.v1";
        d.attr_size = sizeof(axpb_attrs);
        d.infer     = axpb_infer;
        return ggml_ext_register_op(&d);
    }();
    return id;
}

inline struct ggml_tensor * axpb(struct ggml_context * ctx, struct ggml_tensor * x, float a, float b) {
    axpb_attrs at{a, b};
    return ggml_ext_op_create(ctx, axpb_op(), &x, 1, &at);
}

inline enum ggml_status k_execute_axpb(ggml_backend_t, const struct ggml_ext_nodes * nodes, void *, void * workspace,
                                       size_t workspace_bytes, void * ud) {
    auto * c = static_cast<kernel_counters *>(ud);
    note_execute(c, workspace, workspace_bytes);
    if (c->execute_status != GGML_STATUS_SUCCESS) return c->execute_status;
    struct ggml_tensor * out = nodes->nodes[nodes->n_nodes - 1];
    axpb_attrs           at;
    ggml_ext_get_attrs(out, &at, sizeof(at));
    const float * x = (const float *) out->src[0]->data;
    float *       y = (float *) out->data;
    for (int64_t i = 0; i < ggml_nelements(out); ++i) y[i] = at.a * x[i] + at.b;
    return GGML_STATUS_SUCCESS;
}

inline bool k_supports_axpb(ggml_backend_dev_t, const struct ggml_tensor * n, void * ud) {
    static_cast<kernel_counters *>(ud)->supports++;
    return f32_contig(n) && f32_contig(n->src[0]);
}

// ---- fusion rule MUL -> ADD: out = a*b + c

inline int k_match_mul_add(ggml_backend_dev_t, const struct ggml_cgraph * g, int first, void * ud) {
    static_cast<kernel_counters *>(ud)->match++;
    if (first + 1 >= g->n_nodes) return 0;
    const struct ggml_tensor * m = g->nodes[first];
    const struct ggml_tensor * a = g->nodes[first + 1];
    if (m->op != GGML_OP_MUL || a->op != GGML_OP_ADD) return 0;
    if (a->src[0] != m && a->src[1] != m) return 0;
    if (!f32_contig(m) || !f32_contig(a) || !f32_contig(m->src[0]) || !f32_contig(m->src[1])) return 0;
    const struct ggml_tensor * c = a->src[0] == m ? a->src[1] : a->src[0];
    if (!f32_contig(c) || !ggml_are_same_shape(m, m->src[0]) || !ggml_are_same_shape(m, m->src[1]) ||
        !ggml_are_same_shape(m, c) || !ggml_are_same_shape(m, a)) {
        return 0;
    }
    return 2;
}

inline enum ggml_status k_execute_mul_add(ggml_backend_t, const struct ggml_ext_nodes * nodes, void *,
                                          void * workspace, size_t workspace_bytes, void * ud) {
    auto * c = static_cast<kernel_counters *>(ud);
    note_execute(c, workspace, workspace_bytes);
    if (c->execute_status != GGML_STATUS_SUCCESS) return c->execute_status;
    const struct ggml_tensor * m   = nodes->nodes[0];
    struct ggml_tensor *       out = nodes->nodes[nodes->n_nodes - 1];
    const struct ggml_tensor * cc  = out->src[0] == m ? out->src[1] : out->src[0];
    const float *              a   = (const float *) m->src[0]->data;
    const float *              b   = (const float *) m->src[1]->data;
    const float *              z   = (const float *) cc->data;
    float *                    y   = (float *) out->data;
    // same rounding order as native MUL then ADD (no FMA contraction: separate statements)
    for (int64_t i = 0; i < ggml_nelements(out); ++i) {
        volatile float p = a[i] * b[i];
        y[i]             = p + z[i];
    }
    return GGML_STATUS_SUCCESS;
}

// Descriptor builders

inline ggml_ext_kernel_desc add_kernel(const char * name, kernel_counters * c, int priority = 0) {
    ggml_ext_kernel_desc d{};
    d.name      = name;
    d.op        = GGML_OP_ADD;
    d.priority  = priority;
    d.supports  = k_supports_binary;
    d.execute   = k_execute_add;
    d.user_data = c;
    return d;
}

inline ggml_ext_kernel_desc axpb_kernel(const char * name, kernel_counters * c, int priority = 0) {
    ggml_ext_kernel_desc d{};
    d.name      = name;
    d.op        = GGML_OP_CUSTOM;
    d.custom_op = axpb_op();
    d.priority  = priority;
    d.supports  = k_supports_axpb;
    d.execute   = k_execute_axpb;
    d.user_data = c;
    return d;
}

inline ggml_ext_kernel_desc mul_add_rule(const char * name, kernel_counters * c, int priority = 0) {
    ggml_ext_kernel_desc d{};
    d.name      = name;
    d.op        = GGML_OP_NONE;
    d.priority  = priority;
    d.match     = k_match_mul_add;
    d.execute   = k_execute_mul_add;
    d.user_data = c;
    return d;
}

// ---------------------------------------------------------------------------------------------
// Graph helpers

inline int node_index(const struct ggml_cgraph * g, const struct ggml_tensor * t) {
    for (int i = 0; i < g->n_nodes; ++i) {
        if (g->nodes[i] == t) return i;
    }
    return -1;
}

struct graph_ctx {
    struct ggml_context * ctx = nullptr;

    explicit graph_ctx(size_t mem = 16u << 20) {
        ggml_init_params p{mem, nullptr, true};
        ctx = ggml_init(p);
    }
    ~graph_ctx() { ggml_free(ctx); }

    struct ggml_tensor * f32(int64_t ne0, int64_t ne1 = 1) {
        struct ggml_tensor * t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne0, ne1);
        ggml_set_input(t);
        return t;
    }
    struct ggml_cgraph * graph() { return ggml_new_graph(ctx); }
};

// Fills every F32 input-flagged leaf with a deterministic pattern.
inline void fill_inputs(struct ggml_context * ctx) {
    int k = 0;
    for (struct ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (!(t->flags & GGML_TENSOR_FLAG_INPUT) || t->type != GGML_TYPE_F32 || t->view_src) continue;
        std::vector<float> v((size_t) ggml_nelements(t));
        for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25f * (float) ((int) ((i * 7 + (size_t) k * 13) % 17) - 8);
        ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
        ++k;
    }
}

inline std::vector<float> read_f32(const struct ggml_tensor * t) {
    std::vector<float> v((size_t) ggml_nelements(t));
    ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
    return v;
}

inline void fill_value(struct ggml_tensor * t, float x) {
    std::vector<float> v((size_t) ggml_nelements(t), x);
    ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
}

} // namespace ext_test
