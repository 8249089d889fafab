// Kernel registrations for sd.quantize_i8_convrot.v1 and sd.linear_i8.v1 on the CPU device:
// strict supports() checks, prepare (path choice, workspace layout) and execute (phases on the
// backend's pool through ggml_ext_cpu_parallel_v1, cancellation between and inside phases).
//
// Weight repacking (VNNI layout) happens per execution into the workspace, so a weight that
// changed between executions is never used stale; it costs one pass over N*K bytes.
// Outputs overlapping an input: every input read by the GEMM phase is first quantized or copied
// into the workspace when its bytes overlap the output, so the output may alias anything.
//
// Fusion sd.cpu.linear_i8_gate_residual: sd.linear_i8.v1 -> MUL(., gate[N]) -> ADD(residual, .)
// (the Krea2 block's wo and mlp_down epilogues; also without the MUL) runs as the linear with
// its epilogue extended, so the linear's output and the product are never written. An output
// that is exactly the residual's storage is updated in place (each element is read by the
// thread that writes it, in the last k-block's epilogue); any other overlap copies the residual.

#include "int8.h"

#include "../chain_match.h"
#include "../ggml_extensions.h"
#include "../kernel_desc.h"
#include "cpu-isa-service.h"
#include "cpu_kernels.h"
#include "ggml-cpu.h"
#include "int8-impl.h"
#include "storage-overlap.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace sd_int8 {

// ---------------------------------------------------------------------------------------------
// Path selection

namespace {
std::atomic<int> g_override{(int) path::automatic};
}

void set_path_override(path p) { g_override.store((int) p); }

bool path_available(path p) {
    switch (p) {
        case path::automatic:
        case path::portable: return true;
#if defined(__x86_64__) || defined(_M_X64)
        // the "avx2" level is AVX2 + FMA + F16C (the quantizer's target attribute)
        case path::avx2: return sd_cpu::isa_can_use("avx2");
        case path::vnni: return sd_cpu::isa_can_use("avx512") && sd_cpu::isa_can_use("avx512_vnni");
#else
        case path::avx2:
        case path::vnni: return false;
#endif
#if defined(__aarch64__)
        // each level implies the ones below it (the service's levels are ordered)
        case path::neon: return sd_cpu::isa_can_use("neon");
        case path::dotprod: return sd_cpu::isa_can_use("dotprod");
        case path::i8mm: return sd_cpu::isa_can_use("i8mm");
#else
        case path::neon:
        case path::dotprod:
        case path::i8mm: return false;
#endif
        case path::amx: return false; // no AMX implementation yet (see report): never selected
    }
    return false;
}

const char * path_name(path p) {
    switch (p) {
        case path::automatic: return "auto";
        case path::portable: return "portable";
        case path::avx2: return "avx2";
        case path::vnni: return "vnni";
        case path::amx: return "amx";
        case path::neon: return "neon";
        case path::dotprod: return "dotprod";
        case path::i8mm: return "i8mm";
    }
    return "?";
}

path resolve_path() {
    path want = (path) g_override.load();
    if (want == path::automatic) {
        const char * env = getenv("SD_INT8_PATH");
        if (env && *env) {
            if (!strcmp(env, "portable")) want = path::portable;
            else if (!strcmp(env, "avx2")) want = path::avx2;
            else if (!strcmp(env, "vnni")) want = path::vnni;
            else if (!strcmp(env, "amx")) want = path::amx;
            else if (!strcmp(env, "neon")) want = path::neon;
            else if (!strcmp(env, "dotprod")) want = path::dotprod;
            else if (!strcmp(env, "i8mm")) want = path::i8mm;
        }
    }
    if (want != path::automatic && path_available(want)) return want;
    if (want != path::automatic) {
        static std::once_flag warned;
        std::call_once(warned, [&] {
            fprintf(stderr, "sd int8: path '%s' is not available %s; using the best available\n", path_name(want),
                    want == path::amx ? "(no AMX kernel is implemented)" : "on this CPU or under the GGML_CPU_ISA cap");
        });
    }
    if (path_available(path::amx)) return path::amx;
    if (path_available(path::vnni)) return path::vnni;
    if (path_available(path::avx2)) return path::avx2;
    if (path_available(path::i8mm)) return path::i8mm;
    if (path_available(path::dotprod)) return path::dotprod;
    if (path_available(path::neon)) return path::neon;
    return path::portable;
}

bool quantize_node_supported(const ggml_tensor * node) {
    sd_int8_schema::quantize_node q;
    return sd_int8_schema::decode_quantize(node, q);
}

} // namespace sd_int8

// ggml_extensions.cpp's sd_cpu_int8_path (what sdx bench reports with an INT8 timing)
extern "C" const char * sd_int8_cpu_path_name(void) { return sd_int8::path_name(sd_int8::resolve_path()); }

namespace {

using namespace sd_int8;

const ggml_ext_cpu_parallel_v1 * cpu_service() {
    static const ggml_ext_cpu_parallel_v1 * svc = static_cast<const ggml_ext_cpu_parallel_v1 *>(
        ggml_backend_reg_get_proc_address(ggml_backend_cpu_reg(), GGML_EXT_CPU_PARALLEL_V1));
    return svc;
}

using sd_cpu::output_may_overlap;
using sd_cpu::overlaps;
using sd_int8_schema::linear_node;

// ---------------------------------------------------------------------------------------------
// sd.quantize_i8_convrot.v1

struct quant_state {
    path    p;
    int     group;
    int64_t K, rows;
};

bool quant_supports(ggml_backend_dev_t, const ggml_tensor * node, void *) { return quantize_node_supported(node); }

ggml_status quant_prepare(ggml_backend_dev_t, const ggml_ext_nodes * nodes, void ** state, size_t * ws, void *) {
    const ggml_tensor * node = nodes->nodes[nodes->n_nodes - 1];
    sd_int8_schema::quantize_node q;
    if (!sd_int8_schema::decode_quantize(node, q)) return GGML_STATUS_FAILED;
    quant_state * st = new (std::nothrow) quant_state{resolve_path(), q.group, q.K, q.rows};
    if (!st) return GGML_STATUS_ALLOC_FAILED;
    *state = st;
    *ws    = ggml_nbytes(node); // staging when the output overlaps the input
    return GGML_STATUS_SUCCESS;
}

struct quant_task {
    const quant_state * st;
    const float *       x;
    int8_t *            out;
    abort_poll          stop;
    std::atomic<bool>   aborted{false};
    std::atomic<bool>   no_memory{false}; // a thread could not reserve its row scratch
};

void quant_run(int ith, int nth, void * data) {
    quant_task *        t  = static_cast<quant_task *>(data);
    const quant_state & st = *t->st;
    const int64_t       K = st.K, rows = st.rows, prows = pad_up(rows, 4);
    float *             scales = (float *) (t->out + K * prows);
    const int64_t       r0 = rows * ith / nth, r1 = rows * (ith + 1) / nth;
    if (r1 > r0 && !reserve_quantize_scratch(K, st.group)) {
        t->no_memory = true;
        return;
    }
    for (int64_t r = r0; r < r1; ++r) {
        if (((r - r0) & 7) == 0 && (t->aborted.load(std::memory_order_relaxed) || t->stop())) {
            t->aborted = true;
            return;
        }
        int32_t     rs;
        const float s = quantize_row(st.p, t->x + r * K, K, st.group, t->out + r * K, &rs);
        memcpy(scales + r, &s, sizeof(float));
    }
    if (ith == 0) memset(t->out + rows * K, 0, (size_t) ((prows - rows) * K));
}

ggml_status quant_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void * state, void * ws, size_t ws_bytes,
                          void *) {
    const ggml_ext_cpu_parallel_v1 * svc = cpu_service();
    if (!svc || !ggml_backend_is_cpu(backend)) return GGML_STATUS_FAILED;
    ggml_tensor * node    = nodes->nodes[nodes->n_nodes - 1];
    const bool    staging = overlaps(node, node->src[0]);
    if (staging && (!ws || ws_bytes < ggml_nbytes(node))) return GGML_STATUS_FAILED;
    quant_task t;
    t.st   = static_cast<quant_state *>(state);
    t.x    = (const float *) node->src[0]->data;
    t.out  = staging ? (int8_t *) ws : (int8_t *) node->data;
    t.stop = {svc, backend};
    const ggml_status s = svc->parallel_for(backend, quant_run, &t);
    if (s != GGML_STATUS_SUCCESS) return s;
    if (t.no_memory) return GGML_STATUS_ALLOC_FAILED;
    if (t.aborted) return GGML_STATUS_ABORTED;
    if (staging) memcpy(node->data, ws, ggml_nbytes(node));
    return GGML_STATUS_SUCCESS;
}

void destroy_quant(void * state, void *) { delete static_cast<quant_state *>(state); }

// ---------------------------------------------------------------------------------------------
// sd.linear_i8.v1

struct linear_state {
    path    p;
    int     kind, group;
    int64_t K, N, rows, K4;
    bool    fused; // the gate / residual epilogue
    // optional workspace parts, reserved only where prepare could not rule the need out: the
    // weight's copy (output overlapping it), the gate's copy, the residual's copy (output partly
    // overlapping it) or the int32 partial sums (output exactly the residual and K split in blocks)
    bool    wcopy, gate_copy, res_space;
    // workspace layout: the schema's activation rows (K4 bytes each), scales and row sums
    // (sd_int8_schema::plan_linear_workspace), then byte offsets of the CPU's own parts; off_res
    // holds either the residual's copy (output partly overlapping it) or the int32 partial sums
    // (output exactly the residual)
    sd_int8_schema::linear_workspace act;
    size_t off_wcopy, off_wscale, off_bias, off_gate, off_res, total;
};

// Every node the schema decoder accepts: the CPU has no device limit of its own.
bool linear_supports(ggml_backend_dev_t, const ggml_tensor * node, void *) {
    linear_node l;
    return sd_int8_schema::decode_linear(node, l);
}

// Whether the step's output may need the residual space (see linear_state::res_space). A fresh
// output (no address yet, not a view) is never placed over the weight or the gate, but as an ADD
// it may be placed exactly over the residual (the allocator's in-place reuse).
bool residual_space_needed(const ggml_tensor * out, const ggml_tensor * residual, int64_t K, path p) {
    if (!residual) return false;
    const bool splits = gemm_splits_k(p, K);
    if (out->data == nullptr) return out->view_src != nullptr || splits;
    if (out->data == residual->data && ggml_nbytes(out) == ggml_nbytes(residual)) return splits;
    return overlaps(out, residual);
}

// node: the linear; out: the step's output (node, or the fused chain's last node); gate /
// residual: the fused epilogue's operands (NULL for the plain linear).
ggml_status linear_prepare_node(const ggml_tensor * node, const ggml_tensor * out, const ggml_tensor * gate,
                                const ggml_tensor * residual, bool fused, void ** state, size_t * ws) {
    linear_node l;
    if (!sd_int8_schema::linear_operands(node, l)) return GGML_STATUS_FAILED;
    linear_state * st = new (std::nothrow) linear_state{};
    if (!st) return GGML_STATUS_ALLOC_FAILED;
    st->p     = resolve_path();
    st->kind  = l.kind;
    st->group = l.group;
    st->K     = l.K;
    st->N     = l.N;
    st->rows  = l.M;
    // activation rows padded to 4 bytes (the VNNI GEMM reads whole groups), scales and row sums,
    // each part on a 64-byte boundary (cache lines; the base is aligned at execution)
    sd_int8_schema::linear_workspace_spec spec;
    spec.alignment  = 64;
    spec.layout     = sd_int8_schema::activation_layout::padded_rows;
    spec.k_multiple = 4;
    spec.row_sums   = true;
    st->act         = sd_int8_schema::plan_linear_workspace(l, spec);
    st->K4          = (int64_t) st->act.act_stride;
    const ggml_tensor * weight = l.weight;
    st->wcopy      = output_may_overlap(out, &weight, 1);
    st->gate_copy  = gate && output_may_overlap(out, &gate, 1);
    st->res_space  = residual_space_needed(out, residual, st->K, st->p);
    st->fused      = fused;
    sd_int8_schema::workspace_layout & parts = st->act.parts;
    const size_t N = (size_t) st->N;
    st->off_wcopy  = parts.add(st->wcopy ? N * (size_t) st->K : 0);
    st->off_wscale = parts.add(sizeof(float) * N);
    st->off_bias   = parts.add(sizeof(float) * N);
    st->off_gate   = parts.add(st->gate_copy ? sizeof(float) * N : 0);
    st->off_res    = parts.add(st->res_space ? sizeof(float) * (size_t) (st->rows * st->N) : 0);
    st->total      = parts.total(true); // room to align the base
    *state = st;
    *ws    = st->total;
    return GGML_STATUS_SUCCESS;
}

ggml_status linear_prepare(ggml_backend_dev_t, const ggml_ext_nodes * nodes, void ** state, size_t * ws, void *) {
    const ggml_tensor * node = nodes->nodes[nodes->n_nodes - 1];
    return linear_prepare_node(node, node, nullptr, nullptr, false, state, ws);
}

struct linear_task {
    const linear_state * st;
    linear_node          s;
    bool                 act_to_ws;  // quantize / copy the activation into the workspace
    bool                 w_to_ws;    // copy the weight: the output overlaps it
    bool                 params_to_ws;
    bool                 gate_to_ws; // the output overlaps the gate
    bool                 res_to_ws;  // the output overlaps the residual other than exactly
    const float *        gate_src = nullptr;
    const float *        res_src  = nullptr;
    uint8_t *            ws;
    gemm_problem         g;
    abort_poll           stop;
    std::atomic<bool>    aborted{false};
    std::atomic<bool>    no_memory{false}; // a thread could not reserve its row scratch
    std::atomic<int64_t> next_unit{0}; // phase 2 work counter (VNNI)
};

// Phase 1: activation rows (quantize or copy, row sums), weight pack/copy, parameter copies.
void linear_phase1(int ith, int nth, void * data) {
    linear_task *        t  = static_cast<linear_task *>(data);
    const linear_state & st = *t->st;
    const int64_t        K = st.K, K4 = st.K4, rows = st.rows;
    const int64_t        r0 = rows * ith / nth, r1 = rows * (ith + 1) / nth;
    int8_t *             act    = (int8_t *) (t->ws + st.act.act_off);
    float *              scale  = (float *) (t->ws + st.act.scale_off);
    int32_t *            rowsum = (int32_t *) (t->ws + st.act.rowsum_off);
    const bool           need_rowsum = gemm_needs_rowsum(st.p);
    if (st.kind == SD_LINEAR_I8_INPUT_F32 && r1 > r0 && !reserve_quantize_scratch(K, st.group)) {
        t->no_memory = true;
        return;
    }

    for (int64_t r = r0; r < r1; ++r) {
        if (((r - r0) & 7) == 0 && (t->aborted.load(std::memory_order_relaxed) || t->stop())) {
            t->aborted = true;
            return;
        }
        if (st.kind == SD_LINEAR_I8_INPUT_F32) {
            const float * x = (const float *) t->s.input->data + r * K;
            int8_t *      q = act + r * K4;
            scale[r] = quantize_row(st.p, x, K, st.group, q, &rowsum[r]);
            memset(q + K, 0, (size_t) (K4 - K));
            continue;
        }
        const int8_t * src = (const int8_t *) t->s.input->data + r * K;
        if (t->act_to_ws) {
            memcpy(act + r * K4, src, (size_t) K);
            memset(act + r * K4 + K, 0, (size_t) (K4 - K));
            scale[r] = t->g.a_scale[r]; // the source scales (copied because they may overlap too)
        }
        if (need_rowsum) {
            int32_t sum = 0;
            for (int64_t k = 0; k < K; ++k) sum += src[k];
            rowsum[r] = sum;
        }
    }

    if (t->w_to_ws) {
        const int64_t o0 = st.N * ith / nth, o1 = st.N * (ith + 1) / nth;
        if (o1 > o0) memcpy(t->ws + st.off_wcopy + o0 * K, (const int8_t *) t->s.weight->data + o0 * K, (size_t) ((o1 - o0) * K));
    }
    if (ith == 0 && t->params_to_ws) {
        if (t->s.weight_scale) memcpy(t->ws + st.off_wscale, t->s.weight_scale->data, sizeof(float) * (size_t) st.N);
        if (t->s.bias) memcpy(t->ws + st.off_bias, t->s.bias->data, sizeof(float) * (size_t) st.N);
    }
    if (ith == 0 && t->gate_to_ws) memcpy(t->ws + st.off_gate, t->gate_src, sizeof(float) * (size_t) st.N);
    if (t->res_to_ws && r1 > r0) {
        memcpy(t->ws + st.off_res + sizeof(float) * (size_t) (r0 * st.N), t->res_src + r0 * st.N,
               sizeof(float) * (size_t) ((r1 - r0) * st.N));
    }
}

void linear_phase2(int ith, int nth, void * data) {
    linear_task * t  = static_cast<linear_task *>(data);
    const bool    ok = gemm(t->st->p, t->g, ith, nth, t->stop);
    if (!ok) t->aborted = true;
}

bool same_bytes(const ggml_tensor * a, const ggml_tensor * b) {
    return a->data == b->data && ggml_nbytes(a) == ggml_nbytes(b);
}

// node: the linear; out: where the result goes (node itself, or the fused chain's last node, of
// the linear's shape); gate / residual: the fused epilogue's operands or NULL.
ggml_status linear_run(ggml_backend_t backend, const ggml_tensor * node, ggml_tensor * out, const ggml_tensor * gate,
                       const ggml_tensor * residual, void * state, void * ws, size_t ws_bytes) {
    const ggml_ext_cpu_parallel_v1 * svc = cpu_service();
    if (!svc || !ggml_backend_is_cpu(backend)) return GGML_STATUS_FAILED;
    const linear_state * st   = static_cast<linear_state *>(state);
    if ((gate || residual) && !st->fused) return GGML_STATUS_FAILED;
    if (!ws || ws_bytes < st->total) return GGML_STATUS_FAILED;
    if (st->rows == 0) return GGML_STATUS_SUCCESS;

    linear_task t;
    t.st = st;
    if (!sd_int8_schema::linear_operands(node, t.s)) return GGML_STATUS_FAILED;
    t.ws   = (uint8_t *) (((uintptr_t) ws + 63) & ~(uintptr_t) 63);
    t.stop = {svc, backend};

    // where the activation scales come from
    const float * src_scale = nullptr;
    if (st->kind == SD_LINEAR_I8_INPUT_PACKED) {
        src_scale = (const float *) ((const int8_t *) t.s.input->data + sd_int8_schema::packed_scale_offset(st->K, st->rows));
    } else if (st->kind == SD_LINEAR_I8_INPUT_I8) {
        src_scale = (const float *) t.s.input_scale->data;
    }
    const bool act_overlap = overlaps(out, t.s.input) || (t.s.input_scale && overlaps(out, t.s.input_scale));
    t.act_to_ws    = st->kind == SD_LINEAR_I8_INPUT_F32 || act_overlap || (gemm_needs_k4(st->p) && st->K4 != st->K);
    t.w_to_ws      = overlaps(out, t.s.weight);
    t.params_to_ws = (t.s.weight_scale && overlaps(out, t.s.weight_scale)) || (t.s.bias && overlaps(out, t.s.bias));
    t.gate_to_ws   = gate && overlaps(out, gate);
    const bool res_inplace = residual && same_bytes(out, residual);
    t.res_to_ws    = residual && !res_inplace && overlaps(out, residual);
    // in place over the residual with K in several blocks: partial sums must not pass through the output
    const bool partials = res_inplace && gemm_splits_k(st->p, st->K);
    // prepare reserves what the addresses it saw could need; addresses that changed since then
    // in a way it could not foresee are refused rather than written past the workspace
    if ((t.w_to_ws && !st->wcopy) || (t.gate_to_ws && !st->gate_copy) || ((t.res_to_ws || partials) && !st->res_space))
        return GGML_STATUS_FAILED;
    t.gate_src     = gate ? (const float *) gate->data : nullptr;
    t.res_src      = residual ? (const float *) residual->data : nullptr;

    gemm_problem & g = t.g;
    g.rows     = st->rows;
    g.K        = st->K;
    g.N        = st->N;
    g.a_scale  = src_scale; // read by phase 1 when copying
    g.a        = t.act_to_ws ? (const int8_t *) (t.ws + st->act.act_off) : (const int8_t *) t.s.input->data;
    g.lda      = t.act_to_ws ? st->K4 : st->K;
    g.a_rowsum = (const int32_t *) (t.ws + st->act.rowsum_off);
    g.w        = t.w_to_ws ? (const int8_t *) (t.ws + st->off_wcopy) : (const int8_t *) t.s.weight->data;
    g.w_scale  = t.s.weight_scale ? (t.params_to_ws ? (const float *) (t.ws + st->off_wscale) : (const float *) t.s.weight_scale->data) : nullptr;
    g.bias     = t.s.bias ? (t.params_to_ws ? (const float *) (t.ws + st->off_bias) : (const float *) t.s.bias->data) : nullptr;
    g.y        = (float *) out->data;
    g.gate     = gate ? (t.gate_to_ws ? (const float *) (t.ws + st->off_gate) : t.gate_src) : nullptr;
    g.residual = residual ? (t.res_to_ws ? (const float *) (t.ws + st->off_res) : t.res_src) : nullptr;
    g.partial  = partials ? (int32_t *) (t.ws + st->off_res) : nullptr;
    g.next_unit = &t.next_unit;

    ggml_status s = svc->parallel_for(backend, linear_phase1, &t);
    if (s != GGML_STATUS_SUCCESS) return s;
    if (t.no_memory) return GGML_STATUS_ALLOC_FAILED;
    if (t.aborted) return GGML_STATUS_ABORTED;
    if (t.act_to_ws) g.a_scale = (const float *) (t.ws + st->act.scale_off);
    if (svc->should_abort(backend)) return GGML_STATUS_ABORTED;

    s = svc->parallel_for(backend, linear_phase2, &t);
    if (s != GGML_STATUS_SUCCESS) return s;
    return t.aborted ? GGML_STATUS_ABORTED : GGML_STATUS_SUCCESS;
}

ggml_status linear_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void * state, void * ws, size_t ws_bytes,
                           void *) {
    ggml_tensor * node = nodes->nodes[nodes->n_nodes - 1];
    return linear_run(backend, node, node, nullptr, nullptr, state, ws, ws_bytes);
}

void destroy_linear(void * state, void *) { delete static_cast<linear_state *>(state); }

// ---------------------------------------------------------------------------------------------
// Fusion: sd.linear_i8.v1 -> MUL(., gate) -> ADD(residual, .), or sd.linear_i8.v1 -> ADD

using sd_chain::gate_of;
using sd_chain::residual_of;

bool is_fusable_linear(const ggml_tensor * t) {
    return ggml_ext_get_op(t) == sd_op_linear_i8() && linear_supports(nullptr, t, nullptr);
}

// Operands of a matched chain; the gate and residual are never nodes of the chain itself (the
// linear's output and the product are not written by the fused kernel).
struct epilogue_chain {
    const ggml_tensor *lin = nullptr, *gate = nullptr, *residual = nullptr;
};

bool chain_of(const ggml_tensor * const * n, int count, epilogue_chain & c) {
    c     = epilogue_chain{};
    c.lin = n[0];
    if (count == 3) {
        c.gate = gate_of(n[1], n[0]);
        if (!c.gate || c.gate == n[0]) return false;
    }
    c.residual = residual_of(n[count - 1], n[count - 2]);
    return c.residual && c.residual != n[0] && c.residual != n[1];
}

int epilogue_match(ggml_backend_dev_t, const ggml_cgraph * graph, int first, void *) {
    if (!sd_ggml_fusion_enabled()) return 0;
    ggml_cgraph * g = const_cast<ggml_cgraph *>(graph); // the accessors are not const; read only
    const int     n = ggml_graph_n_nodes(g);
    if (first + 1 >= n || !is_fusable_linear(ggml_graph_node(g, first))) return 0;
    const ggml_tensor * nodes[3] = {ggml_graph_node(g, first), ggml_graph_node(g, first + 1),
                                    first + 2 < n ? ggml_graph_node(g, first + 2) : nullptr};
    epilogue_chain c;
    if (nodes[2] && chain_of(nodes, 3, c)) return 3;
    return chain_of(nodes, 2, c) ? 2 : 0;
}

ggml_status epilogue_prepare(ggml_backend_dev_t, const ggml_ext_nodes * nodes, void ** state, size_t * ws, void *) {
    epilogue_chain c;
    if ((nodes->n_nodes != 2 && nodes->n_nodes != 3) || !chain_of(nodes->nodes, nodes->n_nodes, c))
        return GGML_STATUS_FAILED;
    return linear_prepare_node(c.lin, nodes->nodes[nodes->n_nodes - 1], c.gate, c.residual, true, state, ws);
}

ggml_status epilogue_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void * state, void * ws, size_t ws_bytes,
                             void *) {
    epilogue_chain c;
    if ((nodes->n_nodes != 2 && nodes->n_nodes != 3) || !chain_of(nodes->nodes, nodes->n_nodes, c))
        return GGML_STATUS_FAILED;
    return linear_run(backend, c.lin, nodes->nodes[nodes->n_nodes - 1], c.gate, c.residual, state, ws, ws_bytes);
}

} // namespace

bool sd_cpu_register_int8(ggml_backend_dev_t dev) {
    static sd_kernels::once_per_device once; // the first attempt's result, for every later call
    if (!dev) return false;
    return once(dev, [&] {
        const ggml_ext_op_t qop = sd_op_quantize_i8_convrot();
        const ggml_ext_op_t lop = sd_op_linear_i8();
        if (!qop || !lop) {
            fprintf(stderr, "sd int8: operators not registered; CPU INT8 kernels not registered\n");
            return false;
        }
        using namespace sd_kernels;
        return register_all(dev,
                            {op_kernel("sd.cpu.quantize_i8_convrot", qop, quant_supports, quant_prepare, quant_execute,
                                       destroy_quant),
                             op_kernel("sd.cpu.linear_i8", lop, linear_supports, linear_prepare, linear_execute,
                                       destroy_linear),
                             fusion_rule(SD_CPU_KERNEL_LINEAR_I8_GATE_RESIDUAL, epilogue_match, nullptr,
                                         epilogue_prepare, epilogue_execute, destroy_linear)},
                            "sd int8");
    });
}
