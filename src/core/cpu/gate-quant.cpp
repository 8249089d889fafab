// gate-quant.cpp — CPU fusion rules that feed sd.quantize_i8_convrot.v1 from a gated product:
//   SIGMOID(g) -> MUL(a, ·) -> quantize   ("sd.cpu.sigmoid_mul_quantize", Krea2's attn_gated -> wo)
//   SILU(g)    -> MUL(·, up) -> quantize  ("sd.cpu.swiglu_quantize", Krea2's swiglu -> mlp_down)
// One pass per row: activation of the g row, the product, rotation + quantization, without
// writing the two F32 intermediates.
//
// Bit-exactness with the unfused chain: the activation comes from the CPU backend's
// ggml_ext_cpu_unary_v1 service, which runs the UNARY node's own kernel (AVX-512 or portable
// under use_ref) on one row — the same call with the same row length the node's kernel makes —
// so no second copy of the vector math lives here. The product is one IEEE multiply per
// element in the MUL node's operand order (this file is compiled with -ffp-contract=off), and
// the row quantizer is the ConvRot kernel's own (int8-impl.h).
//
// SwiGLU: the model builds SILU(gate) before the up linear, so the SILU is not next to its MUL.
// The optimize callback moves it to just before the MUL with ggml_ext_graph_delay (which
// refuses the move unless it is provably safe); the match then sees three consecutive nodes.

#include "cpu_kernels.h"
#include "storage-overlap.h"
#include "int8-impl.h"

#include "../ggml_extensions.h"
#include "../kernel_desc.h"
#include "ggml-cpu.h"
#include "ggml-graph.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <vector>

namespace {

using namespace sd_int8;

// What one registration needs at execution: the activation and the two backend services.
struct rule_ctx {
    ggml_unary_op                    op;
    const ggml_ext_cpu_parallel_v1 * par;   // NULL: single-threaded
    const ggml_ext_cpu_unary_v1 *    unary; // required
};

using sd_cpu::output_may_overlap;
using sd_cpu::overlaps;
using sd_int8::packed_ne1;
using sd_int8::rows_of;

bool f32_rows(const ggml_tensor * t) { return t != nullptr && t->type == GGML_TYPE_F32 && t->nb[0] == sizeof(float); }

// ---------------------------------------------------------------------------------------------
// Matching: UNARY(op)(x) -> MUL(u, other) in either order -> sd.quantize_i8_convrot(mul)

struct chain {
    const ggml_tensor * x     = nullptr; // the activation's input
    const ggml_tensor * other = nullptr; // the MUL's other operand
    bool                u_first = false; // MUL(u, other): the product is u * other
    int                 group   = 1;
};

bool is_quantize_of(const ggml_tensor * q, const ggml_tensor * x, int * group) {
    if (q->src[0] != x || !quantize_node_supported(q)) return false;
    *group = sd_int8_schema::quantize_group(q);
    return true;
}

bool match_chain(ggml_unary_op op, const ggml_tensor * u, const ggml_tensor * mul, const ggml_tensor * q, chain * c) {
    if (u->op != GGML_OP_UNARY || ggml_get_unary_op(u) != op) return false;
    if (mul->op != GGML_OP_MUL) return false;
    const bool first = mul->src[0] == u, second = mul->src[1] == u;
    if (first == second) return false; // not an operand, or u * u (not this rule)
    const ggml_tensor * x     = u->src[0];
    const ggml_tensor * other = first ? mul->src[1] : mul->src[0];
    // one row of every tensor per quantized row: same shapes, no broadcast, unit-stride rows
    if (!f32_rows(x) || !f32_rows(other) || u->type != GGML_TYPE_F32 || mul->type != GGML_TYPE_F32) return false;
    if (!ggml_are_same_shape(x, u) || !ggml_are_same_shape(u, mul) || !ggml_are_same_shape(other, mul)) return false;
    int group = 1;
    if (!is_quantize_of(q, mul, &group)) return false;
    c->x       = x;
    c->other   = other;
    c->u_first = first;
    c->group   = group;
    return true;
}

const rule_ctx & ctx_of(void * user_data) { return *static_cast<const rule_ctx *>(user_data); }

int gate_match(ggml_backend_dev_t, const ggml_cgraph * graph, int first, void * user_data) {
    if (!sd_ggml_fusion_enabled()) return 0;
    ggml_cgraph * g = const_cast<ggml_cgraph *>(graph); // the accessors are not const; read only
    if (first + 2 >= ggml_graph_n_nodes(g)) return 0;
    chain c;
    return match_chain(ctx_of(user_data).op, ggml_graph_node(g, first), ggml_graph_node(g, first + 1),
                       ggml_graph_node(g, first + 2), &c)
               ? 3
               : 0;
}

// Brings an activation whose only consumer is a matching MUL -> quantize next to that MUL
// (SwiGLU: the up linear sits between them). Nothing moves unless the whole chain matches.
void gate_optimize(ggml_backend_dev_t, ggml_cgraph * graph, void * user_data) {
    if (!sd_ggml_fusion_enabled()) return;
    const ggml_unary_op op = ctx_of(user_data).op;
    const int           n  = ggml_graph_n_nodes(graph);
    for (int i = 0; i + 2 < n;) {
        ggml_tensor * u = ggml_graph_node(graph, i);
        if (u->op != GGML_OP_UNARY || ggml_get_unary_op(u) != op || ggml_graph_get_use_count(graph, u) != 1) {
            ++i;
            continue;
        }
        int j = i + 1; // the consumer
        for (; j < n; ++j) {
            const ggml_tensor * t    = ggml_graph_node(graph, j);
            bool                uses = false;
            for (int s = 0; s < GGML_MAX_SRC; ++s) uses = uses || t->src[s] == u;
            if (uses) break;
        }
        chain c;
        const bool move = j > i + 1 && j + 1 < n &&
                          match_chain(op, u, ggml_graph_node(graph, j), ggml_graph_node(graph, j + 1), &c) &&
                          ggml_ext_graph_delay(graph, i, 1, j - 1);
        // after a move, index i holds the next unvisited node; u now sits at j - 1, next to its
        // MUL, and is never moved again
        if (!move) ++i;
    }
}

// ---------------------------------------------------------------------------------------------
// Execution

struct gate_job {
    const rule_ctx * rc;
    ggml_backend_t   backend;
    const char *     x;
    const char *     o;
    size_t           xnb[4], onb[4];
    int64_t          K, ne1, ne2, rows;
    int              group;
    bool             u_first;
    path             p; // the row quantizer's path
    int8_t *         out;     // packed destination (output or staging)
    float *          scratch; // K floats per thread slot
    int64_t          scratch_stride;
    int              max_threads;
    std::atomic<bool> aborted{false};
    std::atomic<bool> no_memory{false}; // a thread could not reserve its row scratch
};

void gate_task(int ith, int nth, void * data) {
    gate_job & j = *static_cast<gate_job *>(data);
    if (ith >= j.max_threads) return; // more threads than scratch slots: the others cover the work
    nth = std::min(nth, j.max_threads);

    const int64_t K = j.K, prows = pad_up(j.rows, 4);
    float *       scales = (float *) (j.out + K * prows);
    float *       t      = j.scratch + (int64_t) ith * j.scratch_stride;
    const int64_t r0 = j.rows * ith / nth, r1 = j.rows * (ith + 1) / nth;
    const ggml_ext_cpu_parallel_v1 * par = j.rc->par;
    if (r1 > r0 && !reserve_quantize_scratch(K, j.group)) {
        j.no_memory = true;
        return;
    }

    for (int64_t r = r0; r < r1; ++r) {
        if (((r - r0) & 7) == 0 &&
            (j.aborted.load(std::memory_order_relaxed) || (par && par->should_abort(j.backend)))) {
            j.aborted = true;
            return;
        }
        const int64_t i1 = r % j.ne1, i2 = (r / j.ne1) % j.ne2, i3 = r / (j.ne1 * j.ne2);
        const float * xr = (const float *) (j.x + i1 * j.xnb[1] + i2 * j.xnb[2] + i3 * j.xnb[3]);
        const float * orow = (const float *) (j.o + i1 * j.onb[1] + i2 * j.onb[2] + i3 * j.onb[3]);
        if (!j.rc->unary->apply_f32(j.backend, j.rc->op, K, xr, t)) { // checked at execute; cannot fail here
            j.aborted = true;
            return;
        }
        // the MUL node's operand order (NaN payloads follow the first operand)
        if (j.u_first) {
            for (int64_t k = 0; k < K; ++k) t[k] = t[k] * orow[k];
        } else {
            for (int64_t k = 0; k < K; ++k) t[k] = orow[k] * t[k];
        }
        int32_t     rs;
        const float s = quantize_row(j.p, t, K, j.group, j.out + r * K, &rs);
        memcpy(scales + r, &s, sizeof(float));
    }
    if (ith == 0) memset(j.out + j.rows * K, 0, (size_t) ((prows - j.rows) * K));
}

ggml_status gate_prepare(ggml_backend_dev_t, const ggml_ext_nodes * nodes, void ** state, size_t * workspace_bytes,
                         void *) {
    const ggml_tensor * u         = nodes->nodes[0];
    const ggml_tensor * mul       = nodes->nodes[1];
    const ggml_tensor * out       = nodes->nodes[nodes->n_nodes - 1];
    const ggml_tensor * inputs[2] = {u->src[0], mul->src[0] == u ? mul->src[1] : mul->src[0]};
    *state                        = nullptr;
    *workspace_bytes              = output_may_overlap(out, inputs, 2) ? ggml_nbytes(out) : 0;
    return GGML_STATUS_SUCCESS;
}

ggml_status gate_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void *, void * workspace,
                         size_t workspace_bytes, void * user_data) {
    const rule_ctx & rc = ctx_of(user_data);
    if (!ggml_backend_is_cpu(backend) || rc.unary == nullptr) return GGML_STATUS_FAILED;
    const ggml_tensor * u   = nodes->nodes[0];
    const ggml_tensor * mul = nodes->nodes[1];
    ggml_tensor *       out = nodes->nodes[2];
    chain               c;
    if (nodes->n_nodes != 3 || !match_chain(rc.op, u, mul, out, &c)) return GGML_STATUS_FAILED;
    // an op the service does not offer (cannot happen for the registered ops) fails up front
    if (!rc.unary->apply_f32(backend, rc.op, 0, nullptr, nullptr)) return GGML_STATUS_FAILED;

    const ggml_ext_cpu_parallel_v1 * par = rc.par;
    gate_job                         j;
    j.rc       = &rc;
    j.backend  = backend;
    j.x        = (const char *) c.x->data;
    j.o        = (const char *) c.other->data;
    memcpy(j.xnb, c.x->nb, sizeof(j.xnb));
    memcpy(j.onb, c.other->nb, sizeof(j.onb));
    j.K        = mul->ne[0];
    j.ne1      = mul->ne[1];
    j.ne2      = mul->ne[2];
    j.rows     = rows_of(mul);
    j.group    = c.group;
    j.u_first  = c.u_first;
    // the quantizer's paths are bit-identical; under use_ref the portable one is the
    // backend-independent choice
    j.p        = ggml_backend_cpu_get_use_ref(backend) ? path::portable : resolve_path();
    j.max_threads    = par ? std::max(1, par->n_threads(backend)) : 1;
    j.scratch_stride = pad_up(j.K, 16) + 16; // keeps thread slots on separate cache lines

    const bool overlap = overlaps(out, c.x) || overlaps(out, c.other);
    std::vector<float>  scratch;
    std::vector<int8_t> staging;
    try {
        scratch.resize((size_t) (j.scratch_stride * j.max_threads));
        // overlapping output: quantize into scratch, then copy; the workspace prepared for this
        // case when large enough, else host memory (a CPU-only kernel)
        if (overlap && (workspace == nullptr || workspace_bytes < ggml_nbytes(out))) staging.resize(ggml_nbytes(out));
    } catch (const std::bad_alloc &) {
        return GGML_STATUS_ALLOC_FAILED;
    }
    j.scratch = scratch.data();
    j.out     = overlap ? (staging.empty() ? (int8_t *) workspace : staging.data()) : (int8_t *) out->data;

    ggml_status st = GGML_STATUS_SUCCESS;
    if (par) st = par->parallel_for(backend, gate_task, &j);
    else     gate_task(0, 1, &j);
    if (st != GGML_STATUS_SUCCESS) return st;
    if (j.no_memory) return GGML_STATUS_ALLOC_FAILED;
    if (j.aborted) return GGML_STATUS_ABORTED;
    if (overlap) memcpy(out->data, j.out, ggml_nbytes(out));
    return GGML_STATUS_SUCCESS;
}

bool register_rule(ggml_backend_dev_t dev, const char * name, rule_ctx * ctx) {
    return sd_kernels::register_all(
        dev, {sd_kernels::fusion_rule(name, gate_match, gate_optimize, gate_prepare, gate_execute, nullptr, ctx)},
        "sd gate-quant");
}

} // namespace

bool sd_cpu_register_gate_quant(ggml_backend_dev_t dev, const struct ggml_ext_cpu_parallel_v1 * svc) {
    if (sd_op_quantize_i8_convrot() == 0) return false;
    ggml_backend_reg_t            reg   = ggml_backend_dev_backend_reg(dev);
    const ggml_ext_cpu_unary_v1 * unary = reg ? (const ggml_ext_cpu_unary_v1 *) ggml_backend_reg_get_proc_address(
                                                    reg, GGML_EXT_CPU_UNARY_V1)
                                              : nullptr;
    // without the backend's own activation kernels the fused result could not match the
    // unfused chain bit for bit: no rules then (the chain runs unfused)
    if (unary == nullptr || unary->version < 1) return true;

    // the service tables are static in the CPU backend; these contexts live as long
    static rule_ctx sigmoid_ctx, silu_ctx;
    sigmoid_ctx = {GGML_UNARY_OP_SIGMOID, svc, unary};
    silu_ctx    = {GGML_UNARY_OP_SILU, svc, unary};

    const bool ok = register_rule(dev, SD_CPU_KERNEL_SIGMOID_MUL_QUANTIZE, &sigmoid_ctx);
    return register_rule(dev, SD_CPU_KERNEL_SWIGLU_QUANTIZE, &silu_ctx) && ok;
}
