// ops-flash-attn.cpp — FLASH_ATTN_EXT kernel (facts 4.12).
//
// For each (query, head, seq): out = sum_j softmax(s)_j v_j with
//   s_j = q.k_j * scale; s_j = softcap * tanh(s_j / softcap) when softcap != 0; s_j += slope * mask_j.
// Positions whose (slope-scaled) mask is -inf are skipped; a query with no visible position (and no
// sink) yields zeros. The result is stored permuted: dst element (d, head, iq, seq).
//
// Online softmax over kv blocks: a tile of queries of one head is scored against a block of kv
// rows at a time (K/V rows widened to F32 once per block and shared by the tile), the running max
// and normaliser are rescaled once per block, and V is accumulated in F32. No n_q x n_kv matrix
// exists; scratch is per thread in the work buffer.
//
// Kernel by instruction-set level (cpu-isa.h; use_ref always runs this file's portable kernel):
// avx512 and above -> ops-flash-attn-avx512.cpp, avx2 / avx_vnni -> ops-flash-attn-avx2.cpp (F32
// products); on AArch64 neon and above -> ops-flash-attn-neon.cpp (F32 products, baseline ARMv8-A);
// below -> the portable kernel here.

#include "cpu-ops.h"
#include "ops-fast.h"
#include "ops-flash-attn-avx2.h"
#include "ops-flash-attn-neon.h"
#include "portable-dot.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace {

constexpr int64_t FA_QB_MAX = 32; // queries per tile (the planner may shrink it for parallelism); each
                                  // widened K/V block is reused by this many queries
constexpr int64_t FA_KB     = 64; // kv rows per block
constexpr int64_t FA_FALIGN = 16; // floats (64 bytes)

inline int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

using ggml_cpu_portable::dot_block;
using ggml_cpu_portable::fp16_to_f32_inline;

inline void widen_row(enum ggml_type type, const void * src, float * dst, int64_t n) {
    ggml_cpu_portable::widen_row(type, src, dst, n, "flash_attn_ext");
}

// Per-thread scratch, in floats; every region starts 64-byte aligned relative to the thread base.
struct fa_layout {
    int64_t ldq, ldk, ldv;                  // row strides of the widened q/k/v rows
    int64_t off_q, off_k, off_v, off_mask;  // region offsets
    int64_t off_s, off_acc, off_max, off_sum;
    int64_t total;
};

fa_layout make_layout(int64_t D, int64_t Dv) {
    fa_layout l;
    l.ldq      = round_up(std::max<int64_t>(D, 1), FA_FALIGN);
    l.ldk      = l.ldq;
    l.ldv      = round_up(std::max<int64_t>(Dv, 1), FA_FALIGN);
    l.off_q    = 0;
    l.off_k    = l.off_q + FA_QB_MAX * l.ldq;
    l.off_v    = l.off_k + FA_KB * l.ldk;
    l.off_mask = l.off_v + FA_KB * l.ldv;
    l.off_s    = l.off_mask + FA_QB_MAX * FA_KB;
    l.off_acc  = l.off_s + FA_QB_MAX * FA_KB;
    l.off_max  = l.off_acc + FA_QB_MAX * l.ldv;
    l.off_sum  = l.off_max + round_up(FA_QB_MAX, FA_FALIGN);
    l.total    = l.off_sum + round_up(FA_QB_MAX, FA_FALIGN);
    return l;
}

inline char * align64(void * p) { return (char *) (((uintptr_t) p + 63) & ~(uintptr_t) 63); }

bool float_type(enum ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }

bool rows_packed(const struct ggml_tensor * t) { return t->ne[0] <= 1 || t->nb[0] == ggml_type_size(t->type); }

float alibi_slope(float max_bias, int64_t h, int64_t n_head) {
    if (max_bias <= 0.0f) return 1.0f;
    const uint32_t n_log2 = 1u << (uint32_t) std::floor(std::log2((double) n_head));
    const float    m0     = std::pow(2.0f, -max_bias / (float) n_log2);
    const float    m1     = std::pow(2.0f, -(max_bias / 2.0f) / (float) n_log2);
    return (uint32_t) h < n_log2 ? std::pow(m0, (float) (h + 1)) : std::pow(m1, (float) (2 * (h - n_log2) + 1));
}

} // namespace

bool ggml_cpu_flash_attn_ext_supported(const struct ggml_tensor * dst) {
    const struct ggml_tensor * q     = dst->src[0];
    const struct ggml_tensor * k     = dst->src[1];
    const struct ggml_tensor * v     = dst->src[2];
    const struct ggml_tensor * mask  = dst->src[3];
    const struct ggml_tensor * sinks = dst->src[4];
    if (!q || !k || !v) return false;
    if (!float_type(q->type) || !float_type(k->type) || !float_type(v->type)) return false;
    if (!rows_packed(q) || !rows_packed(k) || !rows_packed(v)) return false;
    if (dst->type != GGML_TYPE_F32 || dst->nb[0] != sizeof(float)) return false;
    if (k->ne[0] != q->ne[0] || v->ne[1] != k->ne[1]) return false;
    if (k->ne[2] <= 0 || v->ne[2] <= 0 || k->ne[3] <= 0 || v->ne[3] <= 0) return false;
    if (q->ne[2] % k->ne[2] != 0 || q->ne[2] % v->ne[2] != 0) return false;
    if (q->ne[3] % k->ne[3] != 0 || q->ne[3] % v->ne[3] != 0) return false;
    if (mask) {
        if (mask->type != GGML_TYPE_F16 && mask->type != GGML_TYPE_F32) return false;
        if (!rows_packed(mask) || mask->ne[0] < k->ne[1] || mask->ne[1] < q->ne[1]) return false;
        if (mask->ne[2] <= 0 || mask->ne[3] <= 0) return false;
        if (q->ne[2] % mask->ne[2] != 0 || q->ne[3] % mask->ne[3] != 0) return false;
    }
    if (sinks && (sinks->type != GGML_TYPE_F32 || sinks->ne[0] < q->ne[2])) return false;
    return true;
}

size_t ggml_cpu_flash_attn_ext_work_size(const struct ggml_tensor * dst, int n_threads) {
    const fa_layout l      = make_layout(dst->src[0]->ne[0], dst->src[2]->ne[0]);
    size_t          floats = (size_t) l.total;
    // room for the scratch of every kernel this CPU has (whatever the cap: the cap may change
    // between planning and running, ggml_cpu_set_isa / GGML_CPU_ISA)
    const ggml_cpu_isa level = ggml_cpu_isa_detected();
    const bool         arm   = ggml_cpu_isa_is_arm(level); // levels order only within their family
    if (!arm && (int) level >= (int) ggml_cpu_isa::avx2) {
        floats = std::max(floats, ggml_avx2_flash_attn_floats(dst->src[0]->ne[0], dst->src[2]->ne[0]));
    }
    if (!arm && (int) level >= (int) ggml_cpu_isa::avx512) {
        floats = std::max(floats, ggml_avx512_flash_attn_floats(dst->src[0]->ne[0], dst->src[2]->ne[0]));
    }
    if (arm) { // every AArch64 level (neon, dotprod, i8mm) runs the neon kernel
        floats = std::max(floats, ggml_neon_flash_attn_floats(dst->src[0]->ne[0], dst->src[2]->ne[0]));
    }
    return 64 + (size_t) n_threads * floats * sizeof(float);
}

void ggml_cpu_op_flash_attn_ext(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * q     = dst->src[0];
    const struct ggml_tensor * k     = dst->src[1];
    const struct ggml_tensor * v     = dst->src[2];
    const struct ggml_tensor * mask  = dst->src[3];
    const struct ggml_tensor * sinks = dst->src[4];

    GGML_ASSERT(ggml_cpu_flash_attn_ext_supported(dst) && "flash_attn_ext: unsupported types or shapes");

    const float scale    = ggml_get_op_params_f32(dst, 0);
    const float max_bias = ggml_get_op_params_f32(dst, 1);
    const float softcap  = ggml_get_op_params_f32(dst, 2);

    const int64_t D      = q->ne[0];
    const int64_t n_q    = q->ne[1];
    const int64_t n_head = q->ne[2];
    const int64_t S      = q->ne[3];
    const int64_t n_kv   = k->ne[1];
    const int64_t Dv     = v->ne[0];

    GGML_ASSERT(dst->ne[0] == Dv && dst->ne[1] == n_head && dst->ne[2] == n_q && dst->ne[3] == S);
    GGML_ASSERT((max_bias <= 0.0f || mask) && "flash_attn_ext: ALiBi (max_bias > 0) needs a mask");

    if (Dv == 0 || n_q == 0 || n_head == 0 || S == 0) return;

    if (!params->use_ref && ggml_cpu_isa_allows(ggml_cpu_isa::avx512)) {
        GGML_ASSERT(params->wsize >= ggml_cpu_flash_attn_ext_work_size(dst, params->nth));
        ggml_avx512_flash_attn_ext(params, dst);
        return;
    }
    if (!params->use_ref && ggml_cpu_isa_allows(ggml_cpu_isa::avx2)) {
        GGML_ASSERT(params->wsize >= ggml_cpu_flash_attn_ext_work_size(dst, params->nth));
        ggml_avx2_flash_attn_ext(params, dst);
        return;
    }
    // AArch64 (neon, and dotprod / i8mm above it: no integer products here, so one kernel serves
    // them all); ggml_cpu_isa_allows(neon) is never true on x86
    if (!params->use_ref && ggml_cpu_isa_allows(ggml_cpu_isa::neon)) {
        GGML_ASSERT(params->wsize >= ggml_cpu_flash_attn_ext_work_size(dst, params->nth));
        ggml_neon_flash_attn_ext(params, dst);
        return;
    }

    const int64_t rk2 = n_head / k->ne[2], rv2 = n_head / v->ne[2]; // GQA: kv head = head / r (division)
    const int64_t rk3 = S / k->ne[3], rv3 = S / v->ne[3];

    const int ith = params->ith;
    const int nth = params->nth;

    const fa_layout l = make_layout(D, Dv);
    GGML_ASSERT(params->wsize >= ggml_cpu_flash_attn_ext_work_size(dst, nth));
    float * ws = (float *) align64(params->wdata) + (size_t) ith * (size_t) l.total;

    float * qf    = ws + l.off_q;
    float * kf    = ws + l.off_k;
    float * vf    = ws + l.off_v;
    float * mrow  = ws + l.off_mask; // slope * mask per (query, kv) of the block, later probabilities
    float * sc    = ws + l.off_s;    // raw dot products
    float * acc   = ws + l.off_acc;
    float * rmax  = ws + l.off_max;
    float * rsum  = ws + l.off_sum;

    // Smaller query tiles when there are few (head, seq) pairs, so every thread gets work.
    int64_t qb = FA_QB_MAX;
    while (qb > 1 && ((n_q + qb - 1) / qb) * n_head * S < 2 * (int64_t) nth) qb /= 2;
    const int64_t n_qt    = (n_q + qb - 1) / qb;
    const int64_t n_units = n_qt * n_head * S;

    int64_t u0, u1;
    ggml_cpu_split_range(n_units, ith, nth, &u0, &u1);

    const float * qptr[FA_QB_MAX];
    const float * kptr[FA_KB];
    const float * vptr[FA_KB];
    bool          live[FA_QB_MAX];

    for (int64_t u = u0; u < u1; ++u) {
        if (ggml_cpu_should_abort(params)) return;

        // units: seq outermost, then head, query tile innermost (neighbouring units share K/V)
        const int64_t qt = u % n_qt;
        const int64_t h  = (u / n_qt) % n_head;
        const int64_t s  = u / (n_qt * n_head);

        const int64_t iq0 = qt * qb;
        const int64_t nq  = std::min(qb, n_q - iq0);

        const char * kbase = (const char *) k->data + (h / rk2) * k->nb[2] + (s / rk3) * k->nb[3];
        const char * vbase = (const char *) v->data + (h / rv2) * v->nb[2] + (s / rv3) * v->nb[3];
        const char * mbase = mask ? (const char *) mask->data + (h % mask->ne[2]) * mask->nb[2] +
                                        (s % mask->ne[3]) * mask->nb[3]
                                  : nullptr;
        const float slope = mask ? alibi_slope(max_bias, h, n_head) : 1.0f;

        for (int64_t i = 0; i < nq; ++i) {
            const char * src = (const char *) q->data + (iq0 + i) * q->nb[1] + h * q->nb[2] + s * q->nb[3];
            widen_row(q->type, src, qf + i * l.ldq, D);
            qptr[i] = qf + i * l.ldq;
            std::fill(acc + i * l.ldv, acc + i * l.ldv + Dv, 0.0f);
            rmax[i] = -INFINITY;
            rsum[i] = 0.0f;
        }

        for (int64_t j0 = 0; j0 < n_kv; j0 += FA_KB) {
            const int64_t kb = std::min(FA_KB, n_kv - j0);

            // mask first: blocks invisible to every query of the tile cost nothing more
            bool any = false;
            for (int64_t i = 0; i < nq; ++i) {
                float * mr = mrow + i * FA_KB;
                if (mbase) {
                    const char * row = mbase + (iq0 + i) * mask->nb[1];
                    if (mask->type == GGML_TYPE_F16) {
                        const uint16_t * m16 = (const uint16_t *) row + j0;
                        for (int64_t j = 0; j < kb; ++j) mr[j] = slope * fp16_to_f32_inline(m16[j]);
                    } else {
                        const float * m32 = (const float *) row + j0;
                        for (int64_t j = 0; j < kb; ++j) mr[j] = slope * m32[j];
                    }
                    bool vis = false;
                    for (int64_t j = 0; j < kb; ++j) vis |= mr[j] != -INFINITY;
                    live[i] = vis;
                    any |= vis;
                } else {
                    std::fill(mr, mr + kb, 0.0f);
                    live[i] = true;
                    any     = true;
                }
            }
            if (!any) continue;

            for (int64_t j = 0; j < kb; ++j) {
                const char * row = kbase + (j0 + j) * k->nb[1];
                if (k->type == GGML_TYPE_F32) {
                    kptr[j] = (const float *) row;
                } else {
                    widen_row(k->type, row, kf + j * l.ldk, D);
                    kptr[j] = kf + j * l.ldk;
                }
            }

            std::fill(sc, sc + nq * FA_KB, 0.0f);
            dot_block(kptr, kb, qptr, nq, D, sc, FA_KB);

            // scores -> block-wise online softmax update; mrow becomes the probabilities
            for (int64_t i = 0; i < nq; ++i) {
                if (!live[i]) continue;
                float *       p  = mrow + i * FA_KB;
                const float * si = sc + i * FA_KB;
                float         bm = -INFINITY;
                for (int64_t j = 0; j < kb; ++j) {
                    if (p[j] == -INFINITY) continue;
                    float x = si[j] * scale;
                    if (softcap != 0.0f) x = softcap * std::tanh(x / softcap);
                    x += p[j];
                    p[j] = x;
                    bm   = x > bm ? x : bm;
                }
                if (bm == -INFINITY) {
                    live[i] = false;
                    continue;
                }
                if (bm > rmax[i]) {
                    const float r = std::exp(rmax[i] - bm); // 0 on the first visible block
                    float *     a = acc + i * l.ldv;
                    for (int64_t d = 0; d < Dv; ++d) a[d] *= r;
                    rsum[i] *= r;
                    rmax[i] = bm;
                }
                float sum = 0.0f;
                for (int64_t j = 0; j < kb; ++j) {
                    const float e = std::exp(p[j] - rmax[i]); // -inf -> 0
                    p[j]          = e;
                    sum += e;
                }
                rsum[i] += sum;
            }

            bool any_live = false;
            for (int64_t i = 0; i < nq; ++i) any_live |= live[i];
            if (!any_live) continue;

            for (int64_t j = 0; j < kb; ++j) {
                const char * row = vbase + (j0 + j) * v->nb[1];
                if (v->type == GGML_TYPE_F32) {
                    vptr[j] = (const float *) row;
                } else {
                    widen_row(v->type, row, vf + j * l.ldv, Dv);
                    vptr[j] = vf + j * l.ldv;
                }
            }

            for (int64_t i = 0; i < nq; ++i) {
                if (!live[i]) continue;
                const float * p = mrow + i * FA_KB;
                float *       a = acc + i * l.ldv;
                int64_t       j = 0;
                // four value rows per pass: one load/store of the accumulator per four FMAs
                for (; j + 4 <= kb; j += 4) {
                    const float   p0 = p[j], p1 = p[j + 1], p2 = p[j + 2], p3 = p[j + 3];
                    const float * v0 = vptr[j];
                    const float * v1 = vptr[j + 1];
                    const float * v2 = vptr[j + 2];
                    const float * v3 = vptr[j + 3];
                    for (int64_t d = 0; d < Dv; ++d) a[d] += p0 * v0[d] + p1 * v1[d] + p2 * v2[d] + p3 * v3[d];
                }
                for (; j < kb; ++j) {
                    const float   pj = p[j];
                    const float * vr = vptr[j];
                    for (int64_t d = 0; d < Dv; ++d) a[d] += pj * vr[d];
                }
            }
        }

        for (int64_t i = 0; i < nq; ++i) {
            float * a = acc + i * l.ldv;
            if (sinks && ((const float *) sinks->data)[h] != -INFINITY) {
                // the sink is one more logit in the normaliser, with no value row
                const float sv = ((const float *) sinks->data)[h];
                if (sv > rmax[i]) {
                    const float r = std::exp(rmax[i] - sv);
                    for (int64_t d = 0; d < Dv; ++d) a[d] *= r;
                    rsum[i] *= r;
                    rmax[i] = sv;
                }
                rsum[i] += std::exp(sv - rmax[i]);
            }
            const float inv = rsum[i] > 0.0f ? 1.0f / rsum[i] : 0.0f;
            float *     out = (float *) ((char *) dst->data + h * dst->nb[1] + (iq0 + i) * dst->nb[2] + s * dst->nb[3]);
            for (int64_t d = 0; d < Dv; ++d) out[d] = a[d] * inv;
        }
    }
}
