// test-ext-differential.cpp — differential testing of the extension path: random graphs run
// through the scheduler with toy extension kernels, fusion rules and a reordering optimizer
// ("on") must produce what the same graph produces natively ("off").
//
// "off" runs on the real CPU device, which has no registrations, with a plain graph allocator
// and direct backend compute: an execution path independent of the scheduler. "on" runs through
// a scheduler over a clone of the CPU device (kernels registered there) and, for half of the
// graphs, a TEST device (separate memory, random native op subset, random pinned nodes) that has
// the same kernels. Toy kernels round after every operation exactly like the native ops
// (-ffp-contract=off), so results are compared bit for bit, except where the SILU kernels ran:
// the native SILU uses a vectorised approximation, those graphs compare within a tolerance.
//
// Graphs: random chains over small F32 tensors (add, mul, scale, silu, rms_norm, mul_mat, cont,
// permute/transpose, view, reshape, in-place variants), values with several consumers, and
// intermediate outputs flagged at random. DIFF_GRAPHS / DIFF_SEED override count and seed. To
// narrow down a failing seed: DIFF_NO_OPT, DIFF_NO_FUSION, DIFF_NO_SINGLE, DIFF_NO_TEST switch
// parts off; DIFF_VERBOSE prints the assignment, DIFF_TRACE every node's first values.
//
// DIFF_VULKAN (the test-ext-differential-vulkan build): the "on" scheduler also holds the real
// Vulkan device, first in priority, with the sd Vulkan registrations (sd_register_vulkan_extensions),
// and pins a random part of the nodes it supports to it. The toy kernels stay CPU/TEST only (they
// read host memory). Vulkan's native ops do not round like the CPU's (mul_mat, rms_norm sum in
// another order, silu), so every graph compares within the tolerance. The Khronos validation
// layer is on (main sets GGML_VK_VALIDATE=1); any message fails the test. No device: a failure.

#include "support/test-backend.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext.h"
#include "ggml-graph.h"
#include "ggml.h"

#include <gtest/gtest.h>

#ifdef DIFF_VULKAN
#include "ggml-vulkan.h"
#include <dlfcn.h>
extern "C" bool sd_register_vulkan_extensions(ggml_backend_dev_t dev); // src/core/vulkan/registration.cpp
#endif

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

// ---------------------------------------------------------------------------------------------
// Per-graph knobs read by the toy kernels (kernels are registered once per device)

struct knobs {
    bool add_on       = true;
    bool silu_on      = true;
    bool silu_prefer  = true;
    bool mul_add_on   = true;
    bool scale_silu_on = true;
    bool optimize_on  = true;
    uint32_t opt_seed = 0;
};
knobs g_knobs;

struct tallies {
    int64_t exact_steps   = 0; // executions of bit-exact kernels
    int64_t inexact_steps = 0; // executions of SILU kernels
    int64_t fused_steps   = 0;
    int64_t delays_ok     = 0;
    int64_t vk_pinned     = 0; // nodes pinned to the Vulkan device (DIFF_VULKAN)
    int64_t vk_nodes      = 0; // graph nodes the scheduler assigned to the Vulkan device
    int64_t vk_graphs     = 0; // graphs whose scheduler held the Vulkan device
};
tallies g_tally;

std::set<enum ggml_op> g_test_native; // native op subset of the TEST device for this graph

bool f32c(const ggml_tensor * t) {
    return t != nullptr && t->type == GGML_TYPE_F32 && ggml_is_contiguous(t);
}

bool same_shape_f32c(const ggml_tensor * a, const ggml_tensor * b) {
    return f32c(a) && f32c(b) && ggml_are_same_shape(a, b);
}

// --- ADD override (no broadcasting) ------------------------------------------------------------

bool add_supports(ggml_backend_dev_t, const ggml_tensor * n, void *) {
    return g_knobs.add_on && same_shape_f32c(n, n->src[0]) && same_shape_f32c(n, n->src[1]);
}

ggml_status add_execute(ggml_backend_t, const ggml_ext_nodes * nodes, void *, void *, size_t, void *) {
    g_tally.exact_steps++;
    const ggml_tensor * n = nodes->nodes[0];
    const float *       a = (const float *) n->src[0]->data;
    const float *       b = (const float *) n->src[1]->data;
    float *             y = (float *) n->data;
    for (int64_t i = 0; i < ggml_nelements(n); i++) y[i] = a[i] + b[i];
    return GGML_STATUS_SUCCESS;
}

// --- SILU override with a random preference -----------------------------------------------------

float silu_ref(float x) {
    return x / (1.0f + std::exp(-x));
}

bool silu_supports(ggml_backend_dev_t, const ggml_tensor * n, void *) {
    return g_knobs.silu_on && ggml_get_unary_op(n) == GGML_UNARY_OP_SILU && same_shape_f32c(n, n->src[0]);
}

bool silu_preferred(ggml_backend_dev_t, const ggml_tensor *, void *) {
    return g_knobs.silu_prefer;
}

ggml_status silu_execute(ggml_backend_t, const ggml_ext_nodes * nodes, void *, void *, size_t, void *) {
    g_tally.inexact_steps++;
    const ggml_tensor * n = nodes->nodes[0];
    const float *       x = (const float *) n->src[0]->data;
    float *             y = (float *) n->data;
    for (int64_t i = 0; i < ggml_nelements(n); i++) y[i] = silu_ref(x[i]);
    return GGML_STATUS_SUCCESS;
}

// --- custom op diff.sqr_scale.v1: y = (x * x) * s ----------------------------------------------

ggml_ext_op_t g_sqr_scale = 0;

bool sqr_scale_infer(const ggml_tensor * const * src, int n_src, const void *, enum ggml_type * type,
                     int64_t ne[GGML_MAX_DIMS], char * err, size_t err_size, void *) {
    if (n_src != 1 || src[0]->type != GGML_TYPE_F32) {
        snprintf(err, err_size, "one F32 input expected");
        return false;
    }
    *type = GGML_TYPE_F32;
    for (int d = 0; d < GGML_MAX_DIMS; d++) ne[d] = src[0]->ne[d];
    return true;
}

bool sqr_scale_supports(ggml_backend_dev_t, const ggml_tensor * n, void *) {
    return f32c(n->src[0]); // the only implementation: never switched off
}

ggml_status sqr_scale_execute(ggml_backend_t, const ggml_ext_nodes * nodes, void *, void *, size_t, void *) {
    g_tally.exact_steps++;
    const ggml_tensor * n = nodes->nodes[0];
    float               s;
    ggml_ext_get_attrs(n, &s, sizeof(s));
    const float * x = (const float *) n->src[0]->data;
    float *       y = (float *) n->data;
    for (int64_t i = 0; i < ggml_nelements(n); i++) {
        const float q = x[i] * x[i];
        y[i]          = q * s;
    }
    return GGML_STATUS_SUCCESS;
}

// --- fusion MUL -> ADD: y = a * b + c -----------------------------------------------------------

int mul_add_match(ggml_backend_dev_t, const ggml_cgraph * cg, int first, void *) {
    if (!g_knobs.mul_add_on) return 0;
    ggml_cgraph * g = const_cast<ggml_cgraph *>(cg);
    if (first + 1 >= ggml_graph_n_nodes(g)) return 0;
    ggml_tensor * m = ggml_graph_node(g, first);
    ggml_tensor * a = ggml_graph_node(g, first + 1);
    if (m->op != GGML_OP_MUL || a->op != GGML_OP_ADD || a->src[0] != m || a->src[1] == m) return 0;
    if (!same_shape_f32c(m, m->src[0]) || !same_shape_f32c(m, m->src[1]) || !same_shape_f32c(a, m) ||
        !same_shape_f32c(a, a->src[1])) {
        return 0;
    }
    return 2;
}

ggml_status mul_add_execute(ggml_backend_t, const ggml_ext_nodes * nodes, void *, void * ws, size_t ws_size, void *) {
    g_tally.exact_steps++;
    g_tally.fused_steps++;
    const ggml_tensor * m   = nodes->nodes[0];
    const ggml_tensor * out = nodes->nodes[1];
    const float *       a   = (const float *) m->src[0]->data;
    const float *       b   = (const float *) m->src[1]->data;
    const float *       c   = (const float *) out->src[1]->data;
    float *             y   = (float *) out->data;
    const int64_t       n   = ggml_nelements(out);
    // the output may share memory with an input (allocator reuse): stage through the workspace
    if (ws == nullptr || ws_size < sizeof(float) * (size_t) n) return GGML_STATUS_FAILED;
    float * tmp = (float *) ws;
    for (int64_t i = 0; i < n; i++) {
        const float p = a[i] * b[i];
        tmp[i]        = p + c[i];
    }
    memcpy(y, tmp, sizeof(float) * (size_t) n);
    return GGML_STATUS_SUCCESS;
}

ggml_status mul_add_prepare(ggml_backend_dev_t, const ggml_ext_nodes * nodes, void ** state, size_t * ws, void *) {
    *state = nullptr;
    *ws    = sizeof(float) * (size_t) ggml_nelements(nodes->nodes[nodes->n_nodes - 1]);
    return GGML_STATUS_SUCCESS;
}

// Optimizer: tries to delay a few random single nodes past their successor; ggml_ext_graph_delay
// must refuse every move that would change results.
void delay_optimize(ggml_backend_dev_t, ggml_cgraph * g, void *) {
    if (!g_knobs.optimize_on) return;
    std::mt19937 rng(g_knobs.opt_seed);
    const int    n = ggml_graph_n_nodes(g);
    for (int k = 0; k < 4 && n >= 2; k++) {
        const int first = (int) (rng() % (uint32_t) (n - 1));
        const int count = 1 + (int) (rng() % 2u);
        const int after = first + count + (int) (rng() % 3u) - 1;
        if (first + count > n || after < first + count - 1 || after >= n) continue;
        if (after < first + count) continue;
        if (ggml_ext_graph_delay(g, first, count, after)) g_tally.delays_ok++;
    }
}

// --- fusion SCALE -> SILU: y = silu(x * s) ------------------------------------------------------

int scale_silu_match(ggml_backend_dev_t, const ggml_cgraph * cg, int first, void *) {
    if (!g_knobs.scale_silu_on) return 0;
    ggml_cgraph * g = const_cast<ggml_cgraph *>(cg);
    if (first + 1 >= ggml_graph_n_nodes(g)) return 0;
    ggml_tensor * s = ggml_graph_node(g, first);
    ggml_tensor * u = ggml_graph_node(g, first + 1);
    if (s->op != GGML_OP_SCALE || u->op != GGML_OP_UNARY || ggml_get_unary_op(u) != GGML_UNARY_OP_SILU ||
        u->src[0] != s) {
        return 0;
    }
    float bias;
    memcpy(&bias, (const char *) s->op_params + sizeof(float), sizeof(float));
    if (bias != 0.0f || !same_shape_f32c(s, s->src[0]) || !same_shape_f32c(u, s)) return 0;
    return 2;
}

ggml_status scale_silu_execute(ggml_backend_t, const ggml_ext_nodes * nodes, void *, void *, size_t, void *) {
    g_tally.inexact_steps++;
    g_tally.fused_steps++;
    const ggml_tensor * s   = nodes->nodes[0];
    const ggml_tensor * out = nodes->nodes[1];
    float               f;
    memcpy(&f, s->op_params, sizeof(float));
    const float * x = (const float *) s->src[0]->data;
    float *       y = (float *) out->data;
    for (int64_t i = 0; i < ggml_nelements(out); i++) y[i] = silu_ref(f * x[i]); // elementwise: overlap is safe
    return GGML_STATUS_SUCCESS;
}

void register_toys(ggml_backend_dev_t dev) {
    auto reg = [&](ggml_ext_kernel_desc d) { ASSERT_TRUE(ggml_ext_register_kernel(dev, &d)) << ggml_ext_last_error(); };
    ggml_ext_kernel_desc d;

    d          = {};
    d.name     = "diff.add";
    d.op       = GGML_OP_ADD;
    d.supports = add_supports;
    d.execute  = add_execute;
    reg(d);

    d           = {};
    d.name      = "diff.silu";
    d.op        = GGML_OP_UNARY;
    d.supports  = silu_supports;
    d.preferred = silu_preferred;
    d.execute   = silu_execute;
    reg(d);

    d           = {};
    d.name      = "diff.sqr_scale";
    d.op        = GGML_OP_CUSTOM;
    d.custom_op = g_sqr_scale;
    d.supports  = sqr_scale_supports;
    d.execute   = sqr_scale_execute;
    reg(d);

    d          = {};
    d.name     = "diff.mul_add";
    d.op       = GGML_OP_NONE;
    d.priority = 1;
    d.match    = mul_add_match;
    d.optimize = delay_optimize;
    d.prepare  = mul_add_prepare;
    d.execute  = mul_add_execute;
    reg(d);

    d         = {};
    d.name    = "diff.scale_silu";
    d.op      = GGML_OP_NONE;
    d.match   = scale_silu_match;
    d.execute = scale_silu_execute;
    reg(d);
}

// ---------------------------------------------------------------------------------------------
// Random graphs

struct graph_builder {
    std::mt19937               rng;
    ggml_context *             ctx;
    bool                       ext; // build extension nodes (on) or their native equivalents (off)
    std::vector<ggml_tensor *> pool;
    std::vector<ggml_tensor *> inputs;
    std::vector<ggml_tensor *> outputs;
    std::vector<int>           uses; // per pool entry

    graph_builder(uint32_t seed, ggml_context * c, bool e) : rng(seed), ctx(c), ext(e) {}

    int   pick(int n) { return (int) (rng() % (uint32_t) n); }
    bool  coin(int percent) { return pick(100) < percent; }
    float uniform(float lo, float hi) { return lo + (hi - lo) * (float) (rng() % 10000u) / 10000.0f; }

    ggml_tensor * new_input(int64_t ne0, int64_t ne1, int64_t ne2) {
        ggml_tensor * t = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, ne0, ne1, ne2);
        ggml_format_name(t, "in%d", (int) inputs.size());
        ggml_set_input(t);
        inputs.push_back(t);
        return t;
    }

    void add_value(ggml_tensor * t) {
        pool.push_back(t);
        uses.push_back(0);
    }

    int pick_value() {
        const int i = pick((int) pool.size());
        uses[i]++;
        return i;
    }

    // strictly packed strides (ggml_is_contiguous tolerates odd strides on size-1 dims, which
    // some native ops reject)
    static bool packed(const ggml_tensor * t) {
        size_t nb = ggml_type_size(t->type);
        for (int d = 0; d < GGML_MAX_DIMS; d++) {
            if ((size_t) t->nb[d] != nb) return false;
            nb *= (size_t) t->ne[d];
        }
        return true;
    }
    ggml_tensor * contiguous(ggml_tensor * t) { return packed(t) ? t : ggml_cont(ctx, t); }

    // an operand with t's shape: an existing value (maybe t itself) or a new input
    ggml_tensor * same_shape_operand(ggml_tensor * t) {
        std::vector<int> cand;
        for (int i = 0; i < (int) pool.size(); i++) {
            if (ggml_are_same_shape(pool[i], t)) cand.push_back(i);
        }
        if (!cand.empty() && coin(70)) {
            const int i = cand[pick((int) cand.size())];
            uses[i]++;
            return pool[i];
        }
        if (coin(20)) return new_input(t->ne[0], 1, 1); // broadcast row
        return new_input(t->ne[0], t->ne[1], t->ne[2]);
    }

    void step() {
        const int     ia = pick_value();
        ggml_tensor * a  = pool[ia];
        ggml_tensor * r  = nullptr;
        // in-place only on a value nothing else reads: otherwise the result depends on the node
        // order (and a copy the scheduler made for another backend would keep the old contents)
        bool inplace_ok = packed(a) && a->view_src == nullptr && !(a->flags & GGML_TENSOR_FLAG_INPUT) && uses[ia] == 1 &&
                          coin(25);
        // compute ops get contiguous operands (several native ops require packed rows)
        ggml_tensor * ac = packed(a) ? a : nullptr;
        auto          op_in = [&]() { return ac ? ac : (ac = ggml_cont(ctx, a)); };
        switch (pick(11)) {
            case 0: {
                ggml_tensor * b = same_shape_operand(a);
                r = inplace_ok ? ggml_add_inplace(ctx, a, b) : ggml_add(ctx, op_in(), b);
                break;
            }
            case 1: {
                ggml_tensor * b = same_shape_operand(a);
                r = inplace_ok ? ggml_mul_inplace(ctx, a, b) : ggml_mul(ctx, op_in(), b);
                break;
            }
            case 2: {
                const float s = uniform(-2.0f, 2.0f);
                r = inplace_ok ? ggml_scale_inplace(ctx, a, s) : ggml_scale(ctx, op_in(), s);
                break;
            }
            // row-wise ops need rows of adjacent elements
            case 3: r = inplace_ok ? ggml_silu_inplace(ctx, a) : ggml_silu(ctx, op_in()); break;
            case 4:
                r = inplace_ok ? ggml_rms_norm_inplace(ctx, a, 1e-5f) : ggml_rms_norm(ctx, op_in(), 1e-5f);
                break;
            case 5: {
                // [K, N] x [K, M] -> [N, M]; operands made contiguous, 2-D
                ggml_tensor * x = contiguous(a);
                x               = ggml_reshape_2d(ctx, x, x->ne[0], x->ne[1] * x->ne[2]);
                ggml_tensor * w = nullptr;
                for (int i = 0; i < (int) pool.size() && !w; i++) {
                    if (pool[i] != a && pool[i]->ne[0] == x->ne[0] && coin(40)) {
                        uses[i]++;
                        w = contiguous(pool[i]);
                        w = ggml_reshape_2d(ctx, w, w->ne[0], w->ne[1] * w->ne[2]);
                    }
                }
                if (!w) w = new_input(x->ne[0], 4 + 4 * pick(2), 1);
                r = ggml_mul_mat(ctx, w, x);
                break;
            }
            case 6: {
                ggml_tensor * p = a->ne[2] > 1 && coin(50) ? ggml_permute(ctx, a, 0, 2, 1, 3) : ggml_transpose(ctx, a);
                r               = coin(60) ? ggml_cont(ctx, p) : p;
                break;
            }
            case 7: {
                if (a->ne[1] < 2) {
                    r = ggml_scale(ctx, op_in(), 0.5f);
                    break;
                }
                // first half of the rows, or a strided column slice
                if (a->ne[0] < 2 || coin(50)) {
                    r = ggml_view_3d(ctx, a, a->ne[0], a->ne[1] / 2, a->ne[2], a->nb[1], a->nb[2], 0);
                } else {
                    r = ggml_view_3d(ctx, a, a->ne[0] / 2, a->ne[1], a->ne[2], a->nb[1], a->nb[2], a->nb[0]);
                }
                break;
            }
            case 8: {
                ggml_tensor * c = contiguous(a);
                r = coin(50) ? ggml_reshape_3d(ctx, c, c->ne[0] * c->ne[1], c->ne[2], 1)
                             : ggml_reshape_3d(ctx, c, c->ne[0], c->ne[1] * c->ne[2], 1);
                break;
            }
            case 9: {
                // custom op: one extension node "on", its native equivalent "off"
                ggml_tensor * x = contiguous(a);
                const float   s = uniform(-1.5f, 1.5f);
                if (ext) {
                    ggml_tensor * src[1] = { x };
                    r                    = ggml_ext_op_create(ctx, g_sqr_scale, src, 1, &s);
                    GGML_ASSERT(r != nullptr);
                } else {
                    r = ggml_scale(ctx, ggml_sqr(ctx, x), s);
                }
                break;
            }
            default: {
                // MUL -> ADD and SCALE -> SILU shapes, so the fusion rules get candidates
                ggml_tensor * x = contiguous(a);
                if (coin(50)) {
                    ggml_tensor * b = same_shape_operand(x);
                    ggml_tensor * c = same_shape_operand(x);
                    r = ggml_add(ctx, ggml_mul(ctx, x, b), c);
                } else {
                    r = ggml_silu(ctx, ggml_scale(ctx, x, uniform(-2.0f, 2.0f)));
                }
                break;
            }
        }
        if (r->view_src != nullptr && r->op != GGML_OP_VIEW && r->op != GGML_OP_RESHAPE &&
            r->op != GGML_OP_PERMUTE && r->op != GGML_OP_TRANSPOSE) {
            // an in-place op replaced a: later ops read the result, not the overwritten value
            pool.erase(pool.begin() + ia);
            uses.erase(uses.begin() + ia);
        }
        add_value(r);
        if (r->view_src == nullptr && coin(20)) {
            ggml_set_output(r);
            outputs.push_back(r);
        }
    }

    ggml_cgraph * build(int n_steps) {
        const int64_t ne0 = 4 << pick(3);
        add_value(new_input(ne0, 1 + pick(4), 1 + pick(2)));
        if (coin(50)) add_value(new_input(ne0, pool[0]->ne[1], pool[0]->ne[2]));
        for (int s = 0; s < n_steps; s++) step();
        // sinks are outputs; pure views get a copy so there is owned memory to compare
        for (size_t i = 0; i < pool.size(); i++) {
            if (uses[i] != 0) continue;
            ggml_tensor * t = pool[i];
            if (ggml_is_view(t) || !packed(t)) t = ggml_cont(ctx, t);
            ggml_set_output(t);
            outputs.push_back(t);
        }
        ggml_cgraph * g = ggml_new_graph_custom(ctx, 512, false);
        for (ggml_tensor * t : outputs) ggml_build_forward_expand(g, t);
        return g;
    }
};

void fill_inputs(const std::vector<ggml_tensor *> & inputs, uint32_t seed) {
    for (size_t i = 0; i < inputs.size(); i++) {
        std::mt19937                          rng(seed * 131u + (uint32_t) i);
        std::uniform_real_distribution<float> dist(-1.5f, 1.5f);
        std::vector<float>                    v((size_t) ggml_nelements(inputs[i]));
        for (float & x : v) x = dist(rng);
        ggml_backend_tensor_set(inputs[i], v.data(), 0, ggml_nbytes(inputs[i]));
    }
}

std::vector<std::vector<float>> read_outputs(const std::vector<ggml_tensor *> & outputs) {
    std::vector<std::vector<float>> r;
    for (ggml_tensor * t : outputs) {
        std::vector<float> v((size_t) ggml_nelements(t));
        ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
        r.push_back(std::move(v));
    }
    return r;
}

struct env {
    ggml_backend_dev_t cpu_dev, test_dev;
    ggml_backend_t     cpu_on, test_on, cpu_off;
    ggml_backend_t     vk = nullptr; // DIFF_VULKAN only
};

env & the_env() {
    static env e = [] {
        env x;
        ggml_ext_op_desc od = {};
        od.name             = "diff.sqr_scale.v1";
        od.attr_size        = sizeof(float);
        od.infer            = sqr_scale_infer;
        g_sqr_scale         = ggml_ext_register_op(&od);
        GGML_ASSERT(g_sqr_scale != 0);
        x.cpu_dev  = test_backend::new_cpu_device();
        x.test_dev = test_backend::new_device(
            [](const ggml_tensor * op) { return g_test_native.count(op->op) != 0; }, "TEST");
        register_toys(x.cpu_dev);
        register_toys(x.test_dev);
        x.cpu_on  = test_backend::init_cpu(x.cpu_dev);
        x.test_on = test_backend::init(x.test_dev);
        x.cpu_off = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(x.cpu_on, 1);
        ggml_backend_cpu_set_n_threads(x.cpu_off, 1);
#ifdef DIFF_VULKAN
        if (ggml_backend_vk_get_device_count() > 0) {
            x.vk = ggml_backend_vk_init(0);
            if (x.vk && !sd_register_vulkan_extensions(ggml_backend_get_device(x.vk))) {
                ADD_FAILURE() << "sd_register_vulkan_extensions: " << ggml_ext_last_error();
            }
        }
#endif
        return x;
    }();
    return e;
}

int env_int(const char * name, int def) {
    const char * v = getenv(name);
    return v && *v ? atoi(v) : def;
}

void print_assignment(ggml_backend_sched_t sched, ggml_cgraph * g) {
    for (int j = 0; j < ggml_graph_n_nodes(g); j++) {
        ggml_tensor *  nd = ggml_graph_node(g, j);
        ggml_backend_t be = ggml_backend_sched_get_tensor_backend(sched, nd);
        printf("%3d %-10s %-24s %-8s view_src=%s srcs:", j, ggml_op_desc(nd), nd->name, be ? ggml_backend_name(be) : "-",
               nd->view_src ? nd->view_src->name : "-");
        for (int q = 0; q < GGML_MAX_SRC; q++) {
            if (nd->src[q]) printf(" [%s]", nd->src[q]->name);
        }
        printf("\n");
    }
    fflush(stdout);
}

// One graph; returns false (with a message) on a mismatch.
::testing::AssertionResult run_one(uint32_t seed) {
    env &        e = the_env();
    std::mt19937 rng(seed ^ 0x9e3779b9u);
    auto         coin = [&](int p) { return (int) (rng() % 100u) < p; };

    g_knobs.add_on        = coin(70);
    g_knobs.silu_on       = coin(50);
    g_knobs.silu_prefer   = coin(50);
    g_knobs.mul_add_on    = coin(80);
    g_knobs.scale_silu_on = coin(50);
    g_knobs.optimize_on   = coin(50);
    g_knobs.opt_seed      = rng();
    bool use_test         = coin(50);
    // debugging aids: switch parts off to find the one that breaks a seed
    if (env_int("DIFF_NO_OPT", 0)) g_knobs.optimize_on = false;
    if (env_int("DIFF_NO_FUSION", 0)) g_knobs.mul_add_on = g_knobs.scale_silu_on = false;
    if (env_int("DIFF_NO_SINGLE", 0)) g_knobs.add_on = g_knobs.silu_on = false;
    if (env_int("DIFF_NO_TEST", 0)) use_test = false;
    g_test_native.clear();
    for (enum ggml_op op : { GGML_OP_ADD, GGML_OP_MUL, GGML_OP_SCALE, GGML_OP_UNARY, GGML_OP_RMS_NORM,
                             GGML_OP_MUL_MAT, GGML_OP_CONT, GGML_OP_SQR, GGML_OP_CPY }) {
        if (coin(60)) g_test_native.insert(op);
    }
    const int      n_steps = 3 + (int) (rng() % 12u);
    const uint32_t gseed   = rng();
    // Vulkan in half of the graphs: it takes most nodes when present, the others keep the toy
    // kernels and fusions busy (and compare bit for bit)
    ggml_backend_t vk = e.vk && coin(50) ? e.vk : nullptr;

    const size_t mem = ggml_tensor_overhead() * 512 + ggml_graph_overhead_custom(512, false);

    // off: native on the real CPU device
    ggml_context *  ctx_off = ggml_init({ mem, nullptr, true });
    graph_builder   off(gseed, ctx_off, false);
    ggml_cgraph *   g_off = off.build(n_steps);
    ggml_gallocr_t  ga    = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    if (!ggml_gallocr_alloc_graph(ga, g_off)) return ::testing::AssertionFailure() << "off: alloc failed";
    fill_inputs(off.inputs, gseed);
    if (env_int("DIFF_TRACE", 0)) {
        for (int j = 0; j < ggml_graph_n_nodes(g_off); j++) {
            ggml_backend_graph_compute_range(e.cpu_off, g_off, j, j + 1);
            ggml_tensor * t = ggml_graph_node(g_off, j);
            float v[2] = { 0, 0 };
            ggml_backend_tensor_get(t, v, 0, sizeof(float) * (ggml_nelements(t) > 1 ? 2 : 1));
            printf("  off   %-24s %-10s data=%p %g %g\n", t->name, ggml_op_desc(t), t->data, v[0], v[1]);
        }
        fill_inputs(off.inputs, gseed);
    }
    if (ggml_backend_graph_compute(e.cpu_off, g_off) != GGML_STATUS_SUCCESS) {
        return ::testing::AssertionFailure() << "off: compute failed";
    }
    const auto ref = read_outputs(off.outputs);
    ggml_gallocr_free(ga);
    ggml_free(ctx_off);

    // on: scheduler with the toy kernels, fusion and the optimizer
    ggml_context *       ctx_on = ggml_init({ mem, nullptr, true });
    graph_builder        on(gseed, ctx_on, true);
    ggml_cgraph *        g_on = on.build(n_steps);
    // priority order: [Vulkan,] [TEST,] CPU clone
    std::vector<ggml_backend_t> backends;
    if (vk) backends.push_back(vk);
    if (use_test) backends.push_back(e.test_on);
    backends.push_back(e.cpu_on);
    ggml_backend_sched_t sched =
        ggml_backend_sched_new(backends.data(), nullptr, (int) backends.size(), 1024, false, false);
    // A node is pinned only to a backend that can also run the in-place writers of its memory:
    // they must run where that memory lives (elsewhere they would write into a buffer their
    // backend cannot address; the TEST device's host memory hid that, Vulkan's does not).
    auto can_pin = [&](ggml_backend_t be, ggml_tensor * n) {
        if (!ggml_backend_supports_op(be, n)) return false;
        for (int j = 0; j < ggml_graph_n_nodes(g_on); j++) {
            ggml_tensor * w = ggml_graph_node(g_on, j);
            const bool view_op = w->op == GGML_OP_VIEW || w->op == GGML_OP_RESHAPE || w->op == GGML_OP_PERMUTE ||
                                 w->op == GGML_OP_TRANSPOSE;
            if (w->view_src == n && !view_op && !ggml_backend_supports_op(be, w)) return false;
        }
        return true;
    };
    int pinned_vk = 0;
    if (use_test || vk) {
        for (int i = 0; i < ggml_graph_n_nodes(g_on); i++) {
            ggml_tensor * n = ggml_graph_node(g_on, i);
            // in-place nodes stay with the memory they write
            if (n->view_src != nullptr) continue;
            if (use_test && coin(30) && can_pin(e.test_on, n)) {
                ggml_backend_sched_set_tensor_backend(sched, n, e.test_on);
            } else if (vk && coin(30) && can_pin(vk, n)) {
                ggml_backend_sched_set_tensor_backend(sched, n, vk);
                pinned_vk++;
            }
        }
    }
    g_tally.vk_pinned += pinned_vk;
    if (vk) g_tally.vk_graphs++;
    if (env_int("DIFF_TRACE", 0)) {
        ggml_backend_sched_set_eval_callback(
            sched,
            [](ggml_tensor * t, bool ask, void *) {
                if (ask) return true;
                float v[2] = { 0, 0 };
                ggml_backend_tensor_get(t, v, 0, sizeof(float) * (ggml_nelements(t) > 1 ? 2 : 1));
                printf("  trace %-24s %-10s data=%p %g %g\n", t->name, ggml_op_desc(t), t->data, v[0], v[1]);
                return true;
            },
            nullptr);
    }
    const int64_t inexact_before = g_tally.inexact_steps;
    ::testing::AssertionResult result = ::testing::AssertionSuccess();
    if (!ggml_backend_sched_alloc_graph(sched, g_on)) {
        result = ::testing::AssertionFailure() << "on: alloc failed";
    } else {
        fill_inputs(on.inputs, gseed);
        if (env_int("DIFF_VERBOSE", 0) > 1) print_assignment(sched, g_on); // before a crash
        if (ggml_backend_sched_graph_compute(sched, g_on) != GGML_STATUS_SUCCESS) {
            result = ::testing::AssertionFailure() << "on: compute failed";
        }
    }
    if (result && vk) {
        for (int j = 0; j < ggml_graph_n_nodes(g_on); j++) {
            if (ggml_backend_sched_get_tensor_backend(sched, ggml_graph_node(g_on, j)) == vk) g_tally.vk_nodes++;
        }
    }
    if (result) {
        const auto out   = read_outputs(on.outputs);
        const bool exact = g_tally.inexact_steps == inexact_before && vk == nullptr;
        if (out.size() != ref.size()) {
            result = ::testing::AssertionFailure() << "output count differs";
        }
        for (size_t k = 0; result && k < out.size(); k++) {
            if (out[k].size() != ref[k].size()) {
                result = ::testing::AssertionFailure() << "output " << k << " size differs";
                break;
            }
            for (size_t i = 0; i < out[k].size(); i++) {
                const float a = out[k][i], b = ref[k][i];
                const bool  same = exact ? memcmp(&a, &b, sizeof(float)) == 0 || (std::isnan(a) && std::isnan(b))
                                         : std::fabs(a - b) <= 1e-4f * (1.0f + std::fabs(b)) ||
                                              (std::isnan(a) && std::isnan(b));
                if (!same) {
                    if (env_int("DIFF_VERBOSE", 0)) print_assignment(sched, g_on);
                    result = ::testing::AssertionFailure()
                             << "seed " << seed << ": output " << k << " (" << on.outputs[k]->name << ") element "
                             << i << ": on " << a << " off " << b << (exact ? " (bit-exact expected)" : "")
                             << ", splits " << ggml_backend_sched_get_n_splits(sched);
                    break;
                }
            }
        }
    }
    ggml_backend_sched_free(sched);
    ggml_free(ctx_on);
    return result;
}

TEST(Differential, extensions_on_equal_extensions_off) {
#ifdef DIFF_VULKAN
    ASSERT_NE(the_env().vk, nullptr) << "no Vulkan device";
    ASSERT_TRUE(ggml_backend_vk_validation_enabled()) << "the Khronos validation layer is not active";
    const size_t msgs_before = ggml_backend_vk_validation_message_count();
#endif
    const int      n    = env_int("DIFF_GRAPHS", 1000);
    const uint32_t seed = (uint32_t) env_int("DIFF_SEED", 20261130);
    g_tally             = tallies();
    int failures        = 0;
    for (int i = 0; i < n && failures < 5; i++) {
        ::testing::AssertionResult r = run_one(seed + (uint32_t) i);
        if (!r) failures++;
        EXPECT_TRUE(r) << "graph " << i;
    }
    printf("differential: %d graphs, %lld exact extension steps, %lld tolerance-checked steps, %lld fused steps, "
           "%lld accepted delays\n",
           n, (long long) g_tally.exact_steps, (long long) g_tally.inexact_steps, (long long) g_tally.fused_steps,
           (long long) g_tally.delays_ok);
    // the comparison must really have exercised the extension path
    if (n >= 100) {
        EXPECT_GT(g_tally.exact_steps, n / 2);
        EXPECT_GT(g_tally.fused_steps, n / 10);
    }
#ifdef DIFF_VULKAN
    printf("differential (Vulkan): %lld graphs with the Vulkan device, %lld nodes pinned to it, %lld nodes assigned "
           "to it\n",
           (long long) g_tally.vk_graphs, (long long) g_tally.vk_pinned, (long long) g_tally.vk_nodes);
    EXPECT_GT(g_tally.vk_graphs, n / 4);
    EXPECT_GT(g_tally.vk_nodes, n) << "the Vulkan device must really have computed nodes";
    EXPECT_EQ(ggml_backend_vk_validation_message_count(), msgs_before) << "Vulkan validation reported messages";
#endif
}

} // namespace

#ifdef DIFF_VULKAN
namespace {
class VulkanFreer : public ::testing::Environment {
  public:
    void TearDown() override {
        if (the_env().vk) ggml_backend_free(the_env().vk);
        the_env().vk = nullptr;
    }
};
} // namespace

// Leak checking (the sanitizer pass): keep the driver and layer libraries mapped so LeakSanitizer
// can name leaks inside them, and suppress those (not ours), as test-vulkan does.
extern "C" const char * __lsan_default_suppressions() {
    return "leak:libvulkan_lvp.so\nleak:libVkLayer_khronos_validation.so\nleak:libVkLayer_MESA_device_select.so\n"
           "leak:libvulkan.so\nleak:libLLVM\n";
}

int main(int argc, char ** argv) {
    for (const char * lib : { "libvulkan_lvp.so", "libVkLayer_khronos_validation.so", "libVkLayer_MESA_device_select.so" }) {
        dlopen(lib, RTLD_NOW | RTLD_NODELETE | RTLD_LOCAL);
    }
    setenv("GGML_VK_VALIDATE", "1", 0); // before the first registry use
    ::testing::InitGoogleTest(&argc, argv);
    ::testing::AddGlobalTestEnvironment(new VulkanFreer);
    return RUN_ALL_TESTS();
}
#endif
