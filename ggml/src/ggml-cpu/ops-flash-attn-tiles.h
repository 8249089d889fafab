#pragma once

// ops-flash-attn-tiles.h — what the SIMD flash-attention kernels of every level share
// (ops-flash-attn-avx2.cpp, ops-flash-attn-neon.cpp): the node's arguments decoded once, and the
// walk over this thread's (query tile, head, sequence) units, grouped into chunks of consecutive
// units that read the same K/V head (so a chunk converts each K/V block once). Scalar code with
// internal linkage: each kernel file includes it before its target flags take effect and keeps
// its own copy, so no instruction of one level can reach another's.

#include "cpu-ops.h"
#include "ggml-impl.h"

#include <cstdint>

namespace {

struct fa_args {
    const ggml_tensor *q, *k, *v, *mask, *sinks, *dst;
    float              scale, max_bias, softcap;
    int64_t            D, Dv, n_q, n_head, S, n_kv, rk2, rv2, rk3, rv3;
    bool               k_direct, v_direct; // F32 rows read in place
};

struct fa_tile {
    int64_t h, s, iq0, nq; // queries [iq0, iq0 + nq) of head h, sequence s
};

// nd: output dims the kernel's value micro-tile reads from a V row at a time
inline fa_args fa_args_of(struct ggml_tensor * dst, int64_t nd) {
    fa_args a;
    a.q        = dst->src[0];
    a.k        = dst->src[1];
    a.v        = dst->src[2];
    a.mask     = dst->src[3];
    a.sinks    = dst->src[4];
    a.dst      = dst;
    a.scale    = ggml_get_op_params_f32(dst, 0);
    a.max_bias = ggml_get_op_params_f32(dst, 1);
    a.softcap  = ggml_get_op_params_f32(dst, 2);
    a.D        = a.q->ne[0];
    a.n_q      = a.q->ne[1];
    a.n_head   = a.q->ne[2];
    a.S        = a.q->ne[3];
    a.n_kv     = a.k->ne[1];
    a.Dv       = a.v->ne[0];
    a.rk2      = a.n_head / a.k->ne[2];
    a.rv2      = a.n_head / a.v->ne[2];
    a.rk3      = a.S / a.k->ne[3];
    a.rv3      = a.S / a.v->ne[3];
    // F32 rows are read in place when their stride is whole floats; V also needs Dv to be a
    // multiple of nd (the value kernel reads nd dims at a time and must not run past a row)
    a.k_direct = a.k->type == GGML_TYPE_F32 && a.k->nb[1] % sizeof(float) == 0;
    a.v_direct = a.v->type == GGML_TYPE_F32 && a.v->nb[1] % sizeof(float) == 0 && a.Dv % nd == 0;
    return a;
}

// Calls run_chunk(tiles, n_tiles, qv) for this thread's units in order, where every tile of a
// chunk is qv vectors of VL queries wide. Tiles hold up to QBS_MAX queries; narrower ones when
// there are few (head, seq) pairs, so every thread gets work, or few queries. Stops early when the
// graph is aborted.
template <int VL, int64_t QBS_MAX, int G_MAX, class RunChunk>
void fa_for_each_chunk(const struct ggml_compute_params * params, const fa_args & a, RunChunk run_chunk) {
    int64_t qb = QBS_MAX;
    while (qb > VL && ((a.n_q + qb - 1) / qb) * a.n_head * a.S < 2 * (int64_t) params->nth) qb -= VL;
    if (a.n_q <= qb) qb = (a.n_q + VL - 1) / VL * VL;
    const int64_t n_qt    = (a.n_q + qb - 1) / qb;
    const int64_t n_units = n_qt * a.n_head * a.S;

    int64_t u0, u1;
    ggml_cpu_split_range(n_units, params->ith, params->nth, &u0, &u1);
    for (int64_t u = u0; u < u1;) {
        if (ggml_cpu_should_abort(params)) return;
        // next chunk: up to G_MAX consecutive units of one tile width that read the same K/V head
        fa_tile t[G_MAX];
        int     ng = 0, qv = 0;
        for (; u < u1 && ng < G_MAX; ++u) {
            const int64_t qt  = u % n_qt;
            const int64_t h   = (u / n_qt) % a.n_head;
            const int64_t s   = u / (n_qt * a.n_head);
            const int64_t iq0 = qt * qb;
            const int64_t nq  = qb < a.n_q - iq0 ? qb : a.n_q - iq0;
            const int     w   = (int) ((nq + VL - 1) / VL);
            if (ng > 0 && (w != qv || h / a.rk2 != t[0].h / a.rk2 || h / a.rv2 != t[0].h / a.rv2 ||
                           s / a.rk3 != t[0].s / a.rk3 || s / a.rv3 != t[0].s / a.rv3))
                break;
            t[ng++] = {h, s, iq0, nq};
            qv      = w;
        }
        run_chunk(t, ng, qv);
    }
}

} // namespace
