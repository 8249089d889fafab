// norm-quant.cpp — the CPU fusion of the modulated norm into the ConvRot quantizer
// (ggml_extensions.md "Fusion", dit-workloads.md §6):
//
//   h = RMS_NORM(x); h = MUL(h, w[K]); t = MUL(h, scale[K]); h = ADD(h, t);
//   a = ADD(h, shift[K]); q = sd.quantize_i8_convrot.v1(a)            (6 nodes, Krea2 a*/f*)
//   h = RMS_NORM(x); a = MUL(h, w[K]); q = sd.quantize_i8_convrot.v1(a) (3 nodes, Norm -> Mul -> ConvRot)
//
// One pass per row instead of six: the row's F32 values are formed in a per-thread buffer (they
// stay in L1/L2) and quantized from there, so none of the five [K, rows] F32 intermediates is
// written or read back.
//
// Bit-exactness: the output equals the unfused chain's. The RMS_NORM row is rounded exactly as
// the CPU backend rounds it on the path it would take (rms-norm-cpu.h; use_ref selects the
// portable one), then each elementwise op is one separately rounded F32 operation in graph order
// (this file is compiled with -ffp-contract=off, so no multiply-add is contracted), then the row
// goes through the same quantize_row_* the sd.quantize_i8_convrot.v1 kernel uses, on the same
// path choice (resolve_path at prepare). Non-finite values reach the quantizer unchanged, which
// defines the NaN row (zeros, NaN scale) independently of NaN payloads.

#include "cpu_kernels.h"
#include "storage-overlap.h"
#include "int8-impl.h"
#include "rms-norm-cpu.h"

#include "../ggml_extensions.h"
#include "../kernel_desc.h"
#include "ggml-cpu.h"
#include "ggml-graph.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <new>
#include <vector>

namespace {

using sd_int8::pad_up;

using sd_int8::rows_of;
// the packed quantizer output's ne1 (ggml_extensions.h, sd_quantize_i8_attrs)
using sd_int8::packed_ne1;

// ---------------------------------------------------------------------------------------------
// Matching

// The matched chain's external operands; scale and shift are NULL for the 3-node chain.
struct chain {
    const ggml_tensor * x     = nullptr;
    const ggml_tensor * w     = nullptr;
    const ggml_tensor * scale = nullptr;
    const ggml_tensor * shift = nullptr;
};

// An F32 node computed over x's full shape (the elementwise intermediates of the chain).
bool is_full_f32(const ggml_tensor * t, const ggml_tensor * x) {
    return t->type == GGML_TYPE_F32 && ggml_are_same_shape(t, x) && ggml_is_contiguous(t);
}

// A contiguous F32 vector over the row dimension: [K], [K,1,1] or [K,1,1,1]. Other broadcasts
// (per row, per batch) are not this rule.
bool is_row_vector(const ggml_tensor * t, int64_t K) {
    return t != nullptr && t->type == GGML_TYPE_F32 && ggml_is_contiguous(t) && t->ne[0] == K && t->ne[1] == 1 &&
           t->ne[2] == 1 && t->ne[3] == 1;
}

// sd.quantize_i8_convrot.v1 of `a` that the CPU quantizer kernel could run.
bool is_quantize_of(const ggml_tensor * q, const ggml_tensor * a) {
    return q != nullptr && q->src[0] == a && sd_int8::quantize_node_supported(q);
}

// The number of nodes (6, 3 or 0) of the chain starting at nodes[0], n nodes available.
int match_chain(const ggml_tensor * const * nodes, int n, chain * out) {
    if (n < 3) return 0;
    const ggml_tensor * norm = nodes[0];
    const ggml_tensor * mul  = nodes[1];
    if (norm->op != GGML_OP_RMS_NORM || mul->op != GGML_OP_MUL) return 0;
    chain c;
    c.x = norm->src[0];
    c.w = mul->src[1];
    if (c.x == nullptr || mul->src[0] != norm) return 0;
    const int64_t K = c.x->ne[0];
    // rows of x contiguous; any row strides (the row walk below uses nb[1..3])
    if (c.x->type != GGML_TYPE_F32 || c.x->nb[0] != sizeof(float) || !is_full_f32(norm, c.x)) return 0;
    if (!is_full_f32(mul, c.x) || !is_row_vector(c.w, K)) return 0;
    // an operand that is one of the matched nodes would be read before the fused step wrote it
    // (possible for single-row x, where the intermediates are themselves [K] vectors)
    auto inside = [&](const ggml_tensor * t, int len) {
        for (int i = 0; i < len; ++i) {
            if (nodes[i] == t) return true;
        }
        return false;
    };

    if (is_quantize_of(nodes[2], mul)) {
        if (inside(c.w, 3)) return 0;
        if (out) *out = c;
        return 3;
    }
    if (n < 6) return 0;
    const ggml_tensor * mod   = nodes[2]; // t = h * scale
    const ggml_tensor * sum   = nodes[3]; // h + t
    const ggml_tensor * shift = nodes[4]; // (h + t) + shift
    if (mod->op != GGML_OP_MUL || mod->src[0] != mul || !is_full_f32(mod, c.x)) return 0;
    if (sum->op != GGML_OP_ADD || sum->src[0] != mul || sum->src[1] != mod || !is_full_f32(sum, c.x)) return 0;
    if (shift->op != GGML_OP_ADD || shift->src[0] != sum || !is_full_f32(shift, c.x)) return 0;
    c.scale = mod->src[1];
    c.shift = shift->src[1];
    if (!is_row_vector(c.scale, K) || !is_row_vector(c.shift, K)) return 0;
    if (!is_quantize_of(nodes[5], shift)) return 0;
    if (inside(c.w, 6) || inside(c.scale, 6) || inside(c.shift, 6)) return 0;
    if (out) *out = c;
    return 6;
}

int fused_match(ggml_backend_dev_t, const ggml_cgraph * graph, int first, void *) {
    if (!sd_ggml_fusion_enabled()) return 0;
    ggml_cgraph * g = const_cast<ggml_cgraph *>(graph); // the accessors are not const; read only
    const int     n = std::min(6, ggml_graph_n_nodes(g) - first);
    if (n < 3) return 0;
    const ggml_tensor * nodes[6];
    for (int i = 0; i < n; ++i) nodes[i] = ggml_graph_node(g, first + i);
    return match_chain(nodes, n, nullptr);
}

// ---------------------------------------------------------------------------------------------
// Execution

struct nq_state {
    sd_int8::path p; // the quantizer path, chosen when sd.quantize_i8_convrot.v1 would choose it
    int           group;
};

using sd_cpu::output_may_overlap;
using sd_cpu::overlaps;

int operands(const chain & c, const ggml_tensor * inputs[4]) {
    inputs[0] = c.x;
    inputs[1] = c.w;
    inputs[2] = c.scale;
    inputs[3] = c.shift;
    return 4;
}

struct nq_job {
    const char *  x;
    size_t        nb1, nb2, nb3;
    int64_t       ne1, ne2;
    int64_t       K, rows;
    const float * w;
    const float * scale; // NULL: 3-node chain
    const float * shift;
    float         eps;
    sd_cpu_rms::rms_mode rms; // the backend's RMS_NORM rounding and the code reproducing it
    sd_int8::path p;
    int           group;
    int8_t *      out; // packed: rows x K I8, zero rows to pad4(rows), then rows F32 scales
    float *       scratch;
    int64_t       scratch_per_thread;
    int           max_threads;
    const ggml_ext_cpu_parallel_v1 * svc;
    ggml_backend_t                   backend;
    std::atomic<bool>                aborted{false};
    std::atomic<bool>                no_memory{false}; // a thread could not reserve its row scratch
};

// The chain's F32 values of one row, each op rounded on its own in graph order.
void form_row(const nq_job & j, const float * x, float * a) {
    if (j.scale == nullptr) { // the short chain RMSNorm -> Mul(weight)
        sd_cpu_rms::rms_norm_mul_row(x, j.w, a, j.K, j.eps, j.rms);
        return;
    }
    const sd_cpu_rms::row_scale s = sd_cpu_rms::rms_row_scale(x, j.K, j.eps, j.rms);
    const float * w = j.w;
    const int64_t K = j.K;
    const float * ms = j.scale;
    const float * sh = j.shift;
    if (s.fast) {
        const float f = s.f;
        for (int64_t i = 0; i < K; ++i) {
            const float r = x[i] * f;
            const float h = r * w[i];
            const float t = h * ms[i];
            const float u = h + t;
            a[i]          = u + sh[i];
        }
    } else {
        const double d = s.d;
        for (int64_t i = 0; i < K; ++i) {
            const float r = (float) ((double) x[i] * d);
            const float h = r * w[i];
            const float t = h * ms[i];
            const float u = h + t;
            a[i]          = u + sh[i];
        }
    }
}

void nq_task(int ith, int nth, void * data) {
    nq_job & j = *static_cast<nq_job *>(data);
    if (ith >= j.max_threads) return; // more threads than scratch slots: the others cover the work
    nth = std::min(nth, j.max_threads);

    const int64_t K = j.K, rows = j.rows, prows = pad_up(rows, 4);
    const int64_t r0 = rows * ith / nth, r1 = rows * (ith + 1) / nth;
    float *       a      = j.scratch + (int64_t) ith * j.scratch_per_thread;
    char *        scales = (char *) (j.out + K * prows);
    if (r1 > r0 && !sd_int8::reserve_quantize_scratch(K, j.group)) {
        j.no_memory = true;
        return;
    }
    for (int64_t r = r0; r < r1; ++r) {
        if (((r - r0) & 7) == 0 && (j.aborted.load(std::memory_order_relaxed) || (j.svc && j.svc->should_abort(j.backend)))) {
            j.aborted = true;
            return;
        }
        const int64_t i1 = r % j.ne1;
        const int64_t i2 = (r / j.ne1) % j.ne2;
        const int64_t i3 = r / (j.ne1 * j.ne2);
        form_row(j, (const float *) (j.x + i1 * j.nb1 + i2 * j.nb2 + i3 * j.nb3), a);
        int32_t     rowsum;
        const float s = sd_int8::quantize_row(j.p, a, K, j.group, j.out + r * K, &rowsum);
        memcpy(scales + r * (int64_t) sizeof(float), &s, sizeof(float));
    }
    if (ith == 0) {
        memset(j.out + rows * K, 0, (size_t) ((prows - rows) * K));
        // the bytes after the last scale to the end of the tensor: zero, so the output is fully
        // defined (the standalone quantizer leaves them unwritten; nothing reads them)
        const int64_t end = K * packed_ne1(K, rows);
        const int64_t used = K * prows + rows * (int64_t) sizeof(float);
        if (end > used) memset(j.out + used, 0, (size_t) (end - used));
    }
}

enum ggml_status fused_prepare(ggml_backend_dev_t, const ggml_ext_nodes * nodes, void ** state,
                               size_t * workspace_bytes, void *) {
    chain c;
    if (match_chain(nodes->nodes, nodes->n_nodes, &c) != nodes->n_nodes) return GGML_STATUS_FAILED;
    const ggml_tensor * out = nodes->nodes[nodes->n_nodes - 1];
    nq_state * st = new (std::nothrow) nq_state{sd_int8::resolve_path(), sd_int8_schema::quantize_group(out)};
    if (st == nullptr) return GGML_STATUS_ALLOC_FAILED;
    const ggml_tensor * inputs[4];
    const int           n_in = operands(c, inputs);
    *state                   = st;
    *workspace_bytes         = output_may_overlap(out, inputs, n_in) ? ggml_nbytes(out) : 0;
    return GGML_STATUS_SUCCESS;
}

enum ggml_status fused_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void * state, void * workspace,
                               size_t workspace_bytes, void * user_data) {
    chain c;
    if (state == nullptr || match_chain(nodes->nodes, nodes->n_nodes, &c) != nodes->n_nodes) return GGML_STATUS_FAILED;
    const nq_state *    st   = static_cast<const nq_state *>(state);
    const ggml_tensor * norm = nodes->nodes[0];
    ggml_tensor *       out  = nodes->nodes[nodes->n_nodes - 1];

    const ggml_ext_cpu_parallel_v1 * svc =
        ggml_backend_is_cpu(backend) ? static_cast<const ggml_ext_cpu_parallel_v1 *>(user_data) : nullptr;

    nq_job j;
    j.x     = (const char *) c.x->data;
    j.nb1   = c.x->nb[1];
    j.nb2   = c.x->nb[2];
    j.nb3   = c.x->nb[3];
    j.ne1   = c.x->ne[1];
    j.ne2   = c.x->ne[2];
    j.K     = c.x->ne[0];
    j.rows  = rows_of(c.x);
    j.w     = (const float *) c.w->data;
    j.scale = c.scale ? (const float *) c.scale->data : nullptr;
    j.shift = c.shift ? (const float *) c.shift->data : nullptr;
    memcpy(&j.eps, norm->op_params, sizeof(float));
    j.rms = sd_cpu_rms::choose_rms_mode(sd_cpu_rms::cpu_fast_rms_path() &&
                                        !(ggml_backend_is_cpu(backend) && ggml_backend_cpu_get_use_ref(backend)));
    j.p                  = st->p;
    j.group              = st->group;
    j.svc                = svc;
    j.backend            = backend;
    j.max_threads        = svc ? std::max(1, svc->n_threads(backend)) : 1;
    j.scratch_per_thread = pad_up(j.K, 16) + 16; // whole cache lines apart

    const ggml_tensor * inputs[4];
    const int           n_in    = operands(c, inputs);
    bool                overlap = false;
    for (int i = 0; i < n_in; ++i) overlap = overlap || overlaps(out, inputs[i]);

    std::vector<float>  scratch;
    std::vector<int8_t> staging;
    try {
        scratch.resize((size_t) (j.scratch_per_thread * j.max_threads + 16));
        // an output over an input: compute into the prepared workspace (or host memory when it
        // was not prepared for this case), then copy
        if (overlap && workspace_bytes < ggml_nbytes(out)) staging.resize(ggml_nbytes(out));
    } catch (const std::bad_alloc &) {
        return GGML_STATUS_ALLOC_FAILED;
    }
    // 64-byte aligned per-thread rows
    j.scratch = (float *) (((uintptr_t) scratch.data() + 63) & ~(uintptr_t) 63);
    int8_t * dst = (int8_t *) out->data;
    j.out        = overlap ? (staging.empty() ? (int8_t *) workspace : staging.data()) : dst;

    enum ggml_status s = GGML_STATUS_SUCCESS;
    if (svc) s = svc->parallel_for(backend, nq_task, &j);
    else     nq_task(0, 1, &j);
    if (s != GGML_STATUS_SUCCESS) return s;
    if (j.no_memory) return GGML_STATUS_ALLOC_FAILED;
    if (j.aborted) return GGML_STATUS_ABORTED;
    if (overlap) memcpy(dst, j.out, ggml_nbytes(out));
    return GGML_STATUS_SUCCESS;
}

void fused_destroy(void * state, void *) { delete static_cast<nq_state *>(state); }

} // namespace

bool sd_cpu_register_norm_quant(ggml_backend_dev_t dev, const struct ggml_ext_cpu_parallel_v1 * svc) {
    if (sd_op_quantize_i8_convrot() == 0) return false;
    // the service table is static in the CPU backend, so it outlives the registration
    void * ctx = const_cast<ggml_ext_cpu_parallel_v1 *>(svc);
    return sd_kernels::register_all(dev,
                                    {sd_kernels::fusion_rule(SD_CPU_KERNEL_RMS_NORM_MOD_QUANTIZE, fused_match, nullptr,
                                                             fused_prepare, fused_execute, fused_destroy, ctx)},
                                    "sd norm-quant");
}
