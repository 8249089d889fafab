// ops-flash-attn-avx512.cpp — AVX-512 FLASH_ATTN_EXT (same semantics as ops-flash-attn.cpp).
//
// Blocked online softmax with the query tile held TRANSPOSED, so that every vector holds one
// quantity for 16 queries:
//   Qt[d][i]  (D x QBS)   the tile's queries, i along the vector
//   St[j][i]  (KB x QBS)  scores of kv row j for all queries: sum_d K[j][d] * Qt[d][i]
//                         (broadcast of one K element times a Q vector: no horizontal sums)
//   Ot[d][i]  (Dv x QBS)  output accumulator: sum_j V[j][d] * Pt[j][i]
// The running max / normaliser of the online softmax are then plain per-lane vector operations
// in F32. The probabilities use exp with the one-FMA argument reduction of vec-avx512.h's logistic
// family (relative error <= 1.7e-7 for arguments >= -20, 2.9e-7 at -105; below -105 they are 0);
// the correction factors use avx512::v_exp. Without mask and softcap (and scale > 0) the scores
// stay raw: the score kernel keeps the block's running max, and the argument is scale * s - max in
// one FMA.
//
// Up to G_MAX query tiles of one thread that read the same K/V head (consecutive tiles of a head,
// the query heads of one GQA group) run together over each kv block, so each K/V block is
// converted once for all of them.
//
// Two product kernels:
//  * F32 path ("f32fma": GGML_PREC_F32 requested, a CPU without AVX512_BF16, or the kernel table /
//    GGML_CPU_KERNEL picks it, see kernel-choice.h): K and V blocks are widened once per
//    (chunk of tiles, block) into row-major F32 scratch and reused by all its queries; products
//    and accumulation are exact F32 FMAs. Its speed is bounded by the FMA rate (Zen 4: one
//    512-bit FMA per cycle and core, measured 117 GFLOP/s per core at 3.66 GHz, so 234 at 2
//    threads); its micro-kernels run at that rate when every operand is in a register (pin()),
//    and the op as a whole at ~87% of it (the rest: exp, conversions, the transposed output).
//  * BF16 path ("bf16dot": GGML_PREC_DEFAULT, CPU with AVX512_BF16, chosen by the kernel table;
//    K and V of any supported type): Q.K^T and P.V use vdpbf16ps,
//    whose lanes multiply PAIRS of bf16 and accumulate in F32. So every product operand is
//    rounded to bf16 once: Q rows when the tile is built, K/V blocks when they are converted
//    (F32, F16 -> bf16; BF16 data is used as is), and the probabilities P in [0, 1] before P.V.
//    PRECISION: each operand of each product has relative error <= 2^-9 from the rounding to bf16
//    of its F32 value (round to nearest even; vcvtneps2bf16, vcvtne2ps2bf16 and vdpbf16ps also
//    treat subnormals as zero, an absolute error < 1.2e-38); for P that F32 value is the exp
//    above. The products are exact and accumulated in F32 (vdpbf16ps rounds like two F32 adds).
//    The softmax normaliser sums the ROUNDED probabilities (a vdpbf16ps of the P pairs with
//    (1, 1): exact products, the same two F32 adds), so the output stays an exact convex
//    combination of the (rounded) V rows. Layouts for vdpbf16ps: Qp[d/2][i] holds the pair
//    (Q[i][d], Q[i][d+1]) in lane i and K rows stay row-major (a pair of consecutive K elements is
//    one 32-bit broadcast); for P.V the pairs run along kv: Pp[j/2][i] = (P[j][i], P[j+1][i]) and
//    Vp[j/2][d] = (V[j][d], V[j+1][d]).

#include "kernel-choice.h"
#include "ops-fast.h"

#include <cmath>
#include <cstring>

#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)

#include "vec-avx512.h" // last: switches the rest of this file to the AVX-512 target

#if defined(__GNUC__) && !defined(__clang__)
// the BF16 kernels also need vdpbf16ps / vcvtneps2bf16; they run only when the CPU reports
// AVX512_BF16 (checked in ggml_avx512_flash_attn_ext)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c,avx512bf16")
#endif

using namespace avx512;

namespace {

constexpr int64_t QBS_MAX = 64; // queries per tile (4 vectors)
constexpr int64_t KB      = 64; // kv rows per block
constexpr int     NJ      = 4;  // kv rows per register tile of the score kernel
constexpr int     ND      = 4;  // output dims per register tile of the value kernel
// query tiles run together over each kv block (tiles of one thread's range that share the K/V
// head: consecutive tiles of a head and the GQA heads of one kv head), so each K/V block is
// converted once per G_MAX tiles instead of once per tile
constexpr int     G_MAX   = 4;

// Local helpers instead of std::min / std::fill: template instantiations made after the target
// switch could be merged by the linker with the portable files' copies.
inline int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }
inline int64_t min_i(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max_i(int64_t a, int64_t b) { return a > b ? a : b; }
inline void    fill0(float * p, int64_t n) { memset(p, 0, (size_t) n * sizeof(float)); }

struct layout {
    int64_t ldk, ldv;       // row strides of the widened K / V blocks
    int64_t qt_sz, ot_sz;   // floats of one tile's Qt / Ot (G_MAX of each)
    int64_t off_qt, off_k, off_v, off_st, off_mt, off_ot, off_m, off_l, off_pp;
    int64_t total;
};

layout make_layout(int64_t D, int64_t Dv) {
    layout l;
    l.ldk    = round_up(max_i(D, 1), 16);
    l.ldv    = round_up(max_i(Dv, 1), 16);
    l.qt_sz  = round_up(D * QBS_MAX, 16);
    l.ot_sz  = round_up(Dv, ND) * QBS_MAX;
    l.off_qt = 0;
    l.off_k  = l.off_qt + G_MAX * l.qt_sz;
    l.off_v  = l.off_k + KB * l.ldk;
    l.off_st = l.off_v + KB * l.ldv;
    l.off_mt = l.off_st + KB * QBS_MAX;
    l.off_ot = l.off_mt + KB * QBS_MAX;
    l.off_m  = l.off_ot + G_MAX * l.ot_sz;
    l.off_l  = l.off_m + G_MAX * QBS_MAX;
    l.off_pp = l.off_l + G_MAX * QBS_MAX;
    l.total  = round_up(l.off_pp + KB / 2 * QBS_MAX, 16);
    return l;
}

float alibi_slope(float max_bias, int64_t h, int64_t n_head) {
    if (max_bias <= 0.0f) return 1.0f;
    const uint32_t n_log2 = 1u << (uint32_t) std::floor(std::log2((double) n_head));
    const float    m0     = std::pow(2.0f, -max_bias / (float) n_log2);
    const float    m1     = std::pow(2.0f, -(max_bias / 2.0f) / (float) n_log2);
    return (uint32_t) h < n_log2 ? std::pow(m0, (float) (h + 1)) : std::pow(m1, (float) (2 * (h - n_log2) + 1));
}

// Keeps a loaded vector in a register: without it GCC folds the load into every FMA that uses it
// (QV loads become NJ * QV memory operands) and the micro-kernels run at ~80% of the FMA rate.
inline __m512 pin(__m512 v) {
    asm volatile("" : "+v"(v));
    return v;
}

// n elements of a row of `type` -> F32, zero-padded to `pad` elements
void widen(enum ggml_type type, const void * src, float * dst, int64_t n, int64_t pad) {
    int64_t i = 0;
    switch (type) {
        case GGML_TYPE_F32:
            for (; i < n; i += 16) {
                const __mmask16 m = tail_mask(n - i);
                _mm512_storeu_ps(dst + i, load((const float *) src + i, m));
            }
            break;
        case GGML_TYPE_F16:
            for (; i < n; i += 16) {
                const __mmask16 m = tail_mask(n - i);
                _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(load_h((const uint16_t *) src + i, m)));
            }
            break;
        case GGML_TYPE_BF16:
            for (; i < n; i += 16) {
                const __mmask16 m = tail_mask(n - i);
                _mm512_storeu_ps(dst + i, bf16_to_f32(load_h((const uint16_t *) src + i, m)));
            }
            break;
        default: GGML_ABORT("flash_attn_ext: unsupported type %d", (int) type);
    }
    for (; i < pad; i += 16) _mm512_storeu_ps(dst + i, _mm512_setzero_ps());
}

// St[j][0..QV*16) = sum_d K[j][d] * Qt[d][...] for j in [j0, j0 + NJ); bm: max over rows < kb
// Stores the NJ x QV score accumulators of rows j0.. into St and folds the real rows (those
// below kb; the padding rows past kb are zeros) into the running max bm; shared by both paths.
template <int QV>
inline void store_scores(const __m512 (&acc)[NJ][QV], float * st, int64_t ldq, int64_t j0, int64_t kb, __m512 * bm) {
    for (int r = 0; r < NJ; ++r)
        for (int c = 0; c < QV; ++c) _mm512_store_ps(st + (j0 + r) * ldq + 16 * c, acc[r][c]);
    for (int r = 0; r < NJ; ++r)
        if (j0 + r < kb)
            for (int c = 0; c < QV; ++c) bm[c] = _mm512_max_ps(bm[c], acc[r][c]);
}

template <int QV>
inline void score_tile(const float * kbf, int64_t ldk, const float * qt, int64_t ldq, int64_t D, float * st, int64_t j0,
                       int64_t kb, __m512 * bm) {
    __m512 acc[NJ][QV];
    for (int r = 0; r < NJ; ++r)
        for (int c = 0; c < QV; ++c) acc[r][c] = _mm512_setzero_ps();
    const float * k0 = kbf + (j0 + 0) * ldk;
    const float * k1 = kbf + (j0 + 1) * ldk;
    const float * k2 = kbf + (j0 + 2) * ldk;
    const float * k3 = kbf + (j0 + 3) * ldk;
    for (int64_t d = 0; d < D; ++d) {
        __m512 q[QV];
        for (int c = 0; c < QV; ++c) q[c] = pin(_mm512_load_ps(qt + d * ldq + 16 * c));
        const __m512 b0 = _mm512_set1_ps(k0[d]);
        const __m512 b1 = _mm512_set1_ps(k1[d]);
        const __m512 b2 = _mm512_set1_ps(k2[d]);
        const __m512 b3 = _mm512_set1_ps(k3[d]);
        for (int c = 0; c < QV; ++c) {
            acc[0][c] = _mm512_fmadd_ps(b0, q[c], acc[0][c]);
            acc[1][c] = _mm512_fmadd_ps(b1, q[c], acc[1][c]);
            acc[2][c] = _mm512_fmadd_ps(b2, q[c], acc[2][c]);
            acc[3][c] = _mm512_fmadd_ps(b3, q[c], acc[3][c]);
        }
    }
    store_scores<QV>(acc, st, ldq, j0, kb, bm);
}

// Ot[d][...] = Ot[d][...] * corr + sum_j V[j][d] * Pt[j][...] for d in [d0, d0 + ND)
template <int QV>
inline void value_tile(const float * vb, int64_t ldv, const float * pt, int64_t ldq, int64_t kb, float * ot,
                       const __m512 * corr, int64_t d0) {
    __m512 acc[ND][QV];
    for (int r = 0; r < ND; ++r)
        for (int c = 0; c < QV; ++c) acc[r][c] = _mm512_mul_ps(_mm512_load_ps(ot + (d0 + r) * ldq + 16 * c), corr[c]);
    for (int64_t j = 0; j < kb; ++j) {
        __m512 p[QV];
        for (int c = 0; c < QV; ++c) p[c] = pin(_mm512_load_ps(pt + j * ldq + 16 * c));
        const float * v  = vb + j * ldv + d0;
        const __m512  b0 = _mm512_set1_ps(v[0]);
        const __m512  b1 = _mm512_set1_ps(v[1]);
        const __m512  b2 = _mm512_set1_ps(v[2]);
        const __m512  b3 = _mm512_set1_ps(v[3]);
        for (int c = 0; c < QV; ++c) {
            acc[0][c] = _mm512_fmadd_ps(b0, p[c], acc[0][c]);
            acc[1][c] = _mm512_fmadd_ps(b1, p[c], acc[1][c]);
            acc[2][c] = _mm512_fmadd_ps(b2, p[c], acc[2][c]);
            acc[3][c] = _mm512_fmadd_ps(b3, p[c], acc[3][c]);
        }
    }
    for (int r = 0; r < ND; ++r)
        for (int c = 0; c < QV; ++c) _mm512_store_ps(ot + (d0 + r) * ldq + 16 * c, acc[r][c]);
}


// ---- BF16 path -------------------------------------------------------------------------------

inline __m512bh as_bh(__m512i v) { return (__m512bh) v; }

// 16 floats -> 16 bf16 (RNE), zero-extended into 32-bit lanes
inline __m512i bf16_lanes(__m512 v) { return _mm512_cvtepu16_epi32((__m256i) _mm512_cvtneps_pbh(v)); }

// n elements of a K row (F32, F16 or BF16) -> bf16, zero-padded to `pad` (a multiple of 16) elements
void to_bf16(enum ggml_type type, const void * src, uint16_t * dst, int64_t n, int64_t pad) {
    int64_t i = 0;
    if (type == GGML_TYPE_F32) {
        for (; i < n; i += 16) {
            const __mmask16 m = tail_mask(n - i);
            _mm256_storeu_si256((__m256i *) (dst + i), (__m256i) _mm512_cvtneps_pbh(load((const float *) src + i, m)));
        }
    } else if (type == GGML_TYPE_F16) {
        for (; i < n; i += 16) {
            const __mmask16 m = tail_mask(n - i);
            _mm256_storeu_si256((__m256i *) (dst + i), (__m256i) _mm512_cvtneps_pbh(_mm512_cvtph_ps(load_h((const uint16_t *) src + i, m))));
        }
    } else {
        for (; i < n; i += 16) {
            const __mmask16 m = tail_mask(n - i);
            _mm256_storeu_si256((__m256i *) (dst + i), load_h((const uint16_t *) src + i, m));
        }
    }
    for (; i < pad; i += 16) _mm256_storeu_si256((__m256i *) (dst + i), _mm256_setzero_si256());
}

// 16 elements of a V row (F32, F16 or BF16) from element d, as bf16 in 32-bit lanes (0 past n)
inline __m512i v_lanes(enum ggml_type type, const void * row, int64_t d, int64_t n) {
    if (d >= n) return _mm512_setzero_si512();
    if (type == GGML_TYPE_F32) return bf16_lanes(load((const float *) row + d, tail_mask(n - d)));
    const __m256i h = load_h((const uint16_t *) row + d, tail_mask(n - d));
    if (type == GGML_TYPE_F16) return bf16_lanes(_mm512_cvtph_ps(h));
    return _mm512_cvtepu16_epi32(h);
}

// St[j][0..QV*16) = sum_d K[j][d] * Q[d][...] for j in [j0, j0 + NJ); kh: bf16 rows, qp: pairs;
// bm: max over rows < kb
template <int QV>
inline void score_tile_bf(const uint16_t * kh, int64_t ldk, const uint32_t * qp, int64_t ldq, int64_t D2, float * st,
                          int64_t j0, int64_t kb, __m512 * bm) {
    __m512 acc[NJ][QV];
    for (int r = 0; r < NJ; ++r)
        for (int c = 0; c < QV; ++c) acc[r][c] = _mm512_setzero_ps();
    const uint32_t * k0 = (const uint32_t *) (kh + (j0 + 0) * ldk);
    const uint32_t * k1 = (const uint32_t *) (kh + (j0 + 1) * ldk);
    const uint32_t * k2 = (const uint32_t *) (kh + (j0 + 2) * ldk);
    const uint32_t * k3 = (const uint32_t *) (kh + (j0 + 3) * ldk);
    for (int64_t d = 0; d < D2; ++d) {
        __m512bh q[QV];
        for (int c = 0; c < QV; ++c) q[c] = as_bh(_mm512_load_si512(qp + d * ldq + 16 * c));
        const __m512bh b0 = as_bh(_mm512_set1_epi32((int) k0[d]));
        const __m512bh b1 = as_bh(_mm512_set1_epi32((int) k1[d]));
        const __m512bh b2 = as_bh(_mm512_set1_epi32((int) k2[d]));
        const __m512bh b3 = as_bh(_mm512_set1_epi32((int) k3[d]));
        for (int c = 0; c < QV; ++c) {
            acc[0][c] = _mm512_dpbf16_ps(acc[0][c], b0, q[c]);
            acc[1][c] = _mm512_dpbf16_ps(acc[1][c], b1, q[c]);
            acc[2][c] = _mm512_dpbf16_ps(acc[2][c], b2, q[c]);
            acc[3][c] = _mm512_dpbf16_ps(acc[3][c], b3, q[c]);
        }
    }
    store_scores<QV>(acc, st, ldq, j0, kb, bm);
}

// Ot[d][...] = Ot[d][...] * corr + sum_j V[j][d] * P[j][...] for d in [d0, d0 + ND); vp, pp: pairs along j
template <int QV>
inline void value_tile_bf(const uint32_t * vp, int64_t ldv, const uint32_t * pp, int64_t ldq, int64_t kb2, float * ot,
                          const __m512 * corr, int64_t d0) {
    __m512 acc[ND][QV];
    for (int r = 0; r < ND; ++r)
        for (int c = 0; c < QV; ++c) acc[r][c] = _mm512_mul_ps(_mm512_load_ps(ot + (d0 + r) * ldq + 16 * c), corr[c]);
    for (int64_t j = 0; j < kb2; ++j) {
        __m512bh p[QV];
        for (int c = 0; c < QV; ++c) p[c] = as_bh(_mm512_load_si512(pp + j * ldq + 16 * c));
        const uint32_t * v  = vp + j * ldv + d0;
        const __m512bh   b0 = as_bh(_mm512_set1_epi32((int) v[0]));
        const __m512bh   b1 = as_bh(_mm512_set1_epi32((int) v[1]));
        const __m512bh   b2 = as_bh(_mm512_set1_epi32((int) v[2]));
        const __m512bh   b3 = as_bh(_mm512_set1_epi32((int) v[3]));
        for (int c = 0; c < QV; ++c) {
            acc[0][c] = _mm512_dpbf16_ps(acc[0][c], b0, p[c]);
            acc[1][c] = _mm512_dpbf16_ps(acc[1][c], b1, p[c]);
            acc[2][c] = _mm512_dpbf16_ps(acc[2][c], b2, p[c]);
            acc[3][c] = _mm512_dpbf16_ps(acc[3][c], b3, p[c]);
        }
    }
    for (int r = 0; r < ND; ++r)
        for (int c = 0; c < QV; ++c) _mm512_store_ps(ot + (d0 + r) * ldq + 16 * c, acc[r][c]);
}

// e^(x * sc - m) for arguments <= 0 (up to rounding) or NaN: the one-FMA reduction of
// vec-avx512.h's logistic family (no upper clamp needed; <= 2.9e-7 relative at -105, below it 0)
inline __m512 p_exp(__m512 x, __m512 sc, __m512 m) {
    return detail::exp_clamped<false>(_mm512_max_ps(_mm512_set1_ps(-105.0f), _mm512_fmsub_ps(x, sc, m)));
}

// every cache line of n rows of `bytes` bytes, `stride` apart, towards L2
inline void prefetch_rows(const char * p, size_t stride, int64_t n, int64_t bytes) {
    for (int64_t j = 0; j < n; ++j, p += stride)
        for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(p + b, _MM_HINT_T1);
}

// r[k][j] -> r[j][k] for a 16 x 16 block: pairs, quads (within 128-bit lanes), then two lane
// shuffles
inline void transpose16(__m512 (&r)[16]) {
    __m512 t[16], u[16], v[16];
    for (int k = 0; k < 16; k += 2) {
        t[k]     = _mm512_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm512_unpackhi_ps(r[k], r[k + 1]);
    }
    // u[4b + c]: column 4L + c of rows 4b..4b+3 in 128-bit lane L
    for (int b = 0; b < 4; ++b) {
        u[4 * b + 0] = _mm512_shuffle_ps(t[4 * b + 0], t[4 * b + 2], 0x44);
        u[4 * b + 1] = _mm512_shuffle_ps(t[4 * b + 0], t[4 * b + 2], 0xEE);
        u[4 * b + 2] = _mm512_shuffle_ps(t[4 * b + 1], t[4 * b + 3], 0x44);
        u[4 * b + 3] = _mm512_shuffle_ps(t[4 * b + 1], t[4 * b + 3], 0xEE);
    }
    for (int h = 0; h < 2; ++h) {
        for (int c = 0; c < 4; ++c) {
            v[8 * h + c]     = _mm512_shuffle_f32x4(u[8 * h + c], u[8 * h + 4 + c], 0x88);
            v[8 * h + 4 + c] = _mm512_shuffle_f32x4(u[8 * h + c], u[8 * h + 4 + c], 0xDD);
        }
    }
    for (int c = 0; c < 8; ++c) {
        r[c]     = _mm512_shuffle_f32x4(v[c], v[8 + c], 0x88);
        r[c + 8] = _mm512_shuffle_f32x4(v[c], v[8 + c], 0xDD);
    }
}

struct fa_args {
    const ggml_tensor *q, *k, *v, *mask, *sinks, *dst;
    float              scale, max_bias, softcap;
    int64_t            D, Dv, n_q, n_head, S, n_kv, rk2, rv2, rk3, rv3;
};

struct tile {
    int64_t h, s, iq0, nq; // queries [iq0, iq0 + nq) of head h, sequence s
};

// Tiles t[0..ng) (all reading the same K and V head) over every kv block. BF: the bf16 product
// kernels (K and V are F16/BF16, D <= 4096). Each K/V block is converted once, by the first tile
// that needs it, and reused by the others.
template <int QV, bool BF>
void run_chunk(const fa_args & a, const layout & l, float * ws, const tile * t, int ng) {
    constexpr int64_t QBS = QV * 16;
    const int64_t     D = a.D, Dv = a.Dv;
    float *           kf = ws + l.off_k;
    float *           vf = ws + l.off_v;
    float *           st = ws + l.off_st;
    float *           mt = ws + l.off_mt;
    // BF16 path: the same regions hold the bf16 operands (each fits in its F32 counterpart)
    uint16_t *        kh    = (uint16_t *) kf;
    uint32_t *        vp    = (uint32_t *) vf;
    uint32_t *        pp    = (uint32_t *) (ws + l.off_pp);
    const int64_t     D2    = (D + 1) / 2;
    const int64_t     ldkh  = round_up(max_i(D, 1), 32);
    const int64_t     dvpad = round_up(Dv, ND);
    const int64_t     ldvp  = round_up(dvpad, 16);
    const int64_t     dv_pad = dvpad;

    float *      qts[G_MAX];
    float *      ots[G_MAX];
    const char * mbases[G_MAX];
    float        slopes[G_MAX];
    for (int g = 0; g < ng; ++g) {
        const int64_t h = t[g].h, s = t[g].s, iq0 = t[g].iq0, nq = t[g].nq;
        float *       qt = qts[g] = ws + l.off_qt + g * l.qt_sz;
        float *       ot = ots[g] = ws + l.off_ot + g * l.ot_sz;
        // transposed queries (missing queries of a short tile are zeros and never stored)
        if (BF) {
            // bf16 pairs: lane i of Qp[d/2] is (Q[i][d], Q[i][d+1]); an odd D gets a zero partner
            uint32_t *           qp = (uint32_t *) qt;
            alignas(64) float    row[4096 + 16];
            alignas(64) uint32_t pr[2048 + 8];
            for (int64_t i = 0; i < QBS; ++i) {
                if (i < nq) {
                    const char * src = (const char *) a.q->data + (iq0 + i) * a.q->nb[1] + h * a.q->nb[2] + s * a.q->nb[3];
                    widen(a.q->type, src, row, D, D); // zero-filled to a multiple of 16
                    for (int64_t d = 0; d < D; d += 16)
                        _mm256_store_si256((__m256i *) (pr + d / 2), (__m256i) _mm512_cvtneps_pbh(_mm512_load_ps(row + d)));
                    for (int64_t d = 0; d < D2; ++d) qp[d * QBS + i] = pr[d];
                } else {
                    for (int64_t d = 0; d < D2; ++d) qp[d * QBS + i] = 0;
                }
            }
        } else {
            float   row[4096 + 16];
            float * tmp = D <= 4096 ? row : nullptr;
            for (int64_t i = 0; i < QBS; ++i) {
                if (i < nq) {
                    const char * src = (const char *) a.q->data + (iq0 + i) * a.q->nb[1] + h * a.q->nb[2] + s * a.q->nb[3];
                    if (tmp) {
                        widen(a.q->type, src, tmp, D, D);
                        for (int64_t d = 0; d < D; ++d) qt[d * QBS + i] = tmp[d];
                    } else {
                        for (int64_t d = 0; d < D; ++d) qt[d * QBS + i] = ggml_load_f32(a.q->type, src + d * ggml_type_size(a.q->type));
                    }
                } else {
                    for (int64_t d = 0; d < D; ++d) qt[d * QBS + i] = 0.0f;
                }
            }
        }
        fill0(ot, dv_pad * QBS);
        float * mx = ws + l.off_m + g * QBS_MAX;
        float * sm = ws + l.off_l + g * QBS_MAX;
        for (int c = 0; c < QV; ++c) {
            _mm512_store_ps(mx + 16 * c, _mm512_set1_ps(-INFINITY));
            _mm512_store_ps(sm + 16 * c, _mm512_setzero_ps());
        }
        mbases[g] = a.mask ? (const char *) a.mask->data + (h % a.mask->ne[2]) * a.mask->nb[2] + (s % a.mask->ne[3]) * a.mask->nb[3]
                           : nullptr;
        slopes[g] = a.mask ? alibi_slope(a.max_bias, h, a.n_head) : 1.0f;
    }

    const char * kbase = (const char *) a.k->data + (t[0].h / a.rk2) * a.k->nb[2] + (t[0].s / a.rk3) * a.k->nb[3];
    const char * vbase = (const char *) a.v->data + (t[0].h / a.rv2) * a.v->nb[2] + (t[0].s / a.rv3) * a.v->nb[3];
    const bool   softcap = a.softcap != 0.0f;
    const __m512 vcap    = _mm512_set1_ps(a.softcap);
    const __m512 vicap   = _mm512_set1_ps(softcap ? 1.0f / a.softcap : 0.0f);
    // Without mask or softcap (and scale > 0, so scale * max = max of scale * scores) the scores
    // stay raw in St: the kernel's running max gives the block max and the scale is applied inside
    // the exponent's argument, scale * s - m, one rounding. Otherwise a pass writes the final
    // logits into St first.
    const bool   raw     = !a.mask && !softcap && a.scale > 0.0f;
    const __m512 vscale  = _mm512_set1_ps(a.scale);
    const __m512 escale  = raw ? vscale : _mm512_set1_ps(1.0f);
    // BF16 P: one vcvtne2ps2bf16 gives [P[j] | P[j+1]] as 2 x 16 bf16, the permute interleaves
    // them into the pairs (P[j][i], P[j+1][i]) of lane i
    alignas(64) static const uint16_t pair_order[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                        8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const __m512i pair_idx = _mm512_load_si512(pair_order);
    const __m512i ones     = _mm512_set1_epi32(0x3F803F80); // bf16 (1, 1)

    for (int64_t j0 = 0; j0 < a.n_kv; j0 += KB) {
        const int64_t kb  = min_i(KB, a.n_kv - j0);
        const int64_t kbp = round_up(kb, NJ);
        bool          k_ready = false, v_ready = false;
        // the next block's K and V rows towards L2 while this block computes: they are read once
        // per chunk of tiles, from L3 or memory, and their conversion stalled on every line
        if (j0 + KB < a.n_kv) {
            const int64_t nb = min_i(KB, a.n_kv - j0 - KB);
            prefetch_rows(kbase + (j0 + KB) * a.k->nb[1], a.k->nb[1], nb, D * (int64_t) ggml_type_size(a.k->type));
            prefetch_rows(vbase + (j0 + KB) * a.v->nb[1], a.v->nb[1], nb, Dv * (int64_t) ggml_type_size(a.v->type));
        }

        for (int g = 0; g < ng; ++g) {
            const int64_t iq0 = t[g].iq0, nq = t[g].nq;
            const char *  mbase = mbases[g];
            float *       ot    = ots[g];
            float *       mx    = ws + l.off_m + g * QBS_MAX;
            float *       sm    = ws + l.off_l + g * QBS_MAX;

            // transposed slope*mask; a block no query of the tile can see is skipped whole
            if (mbase) {
                bool any = false;
                for (int64_t i = 0; i < nq; ++i) {
                    const char * row = mbase + (iq0 + i) * a.mask->nb[1];
                    for (int64_t j = 0; j < kb; ++j) {
                        const float m = a.mask->type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(((const ggml_fp16_t *) row)[j0 + j])
                                                                      : ((const float *) row)[j0 + j];
                        const float v = slopes[g] * m;
                        mt[j * QBS + i] = v;
                        any |= v != -INFINITY;
                    }
                }
                if (!any) continue;
            }

            if (!k_ready) {
                if (BF) {
                    for (int64_t j = 0; j < kbp; ++j) {
                        if (j < kb) to_bf16(a.k->type, kbase + (j0 + j) * a.k->nb[1], kh + j * ldkh, D, ldkh);
                        else        memset(kh + j * ldkh, 0, (size_t) ldkh * sizeof(uint16_t));
                    }
                } else {
                    for (int64_t j = 0; j < kbp; ++j) {
                        if (j < kb) widen(a.k->type, kbase + (j0 + j) * a.k->nb[1], kf + j * l.ldk, D, D);
                        else        fill0(kf + j * l.ldk, D);
                    }
                }
                k_ready = true;
            }
            __m512 bm[QV];
            for (int c = 0; c < QV; ++c) bm[c] = _mm512_set1_ps(-INFINITY);
            if (BF) {
                for (int64_t j = 0; j < kbp; j += NJ) score_tile_bf<QV>(kh, ldkh, (const uint32_t *) qts[g], QBS, D2, st, j, kb, bm);
            } else {
                for (int64_t j = 0; j < kbp; j += NJ) score_tile<QV>(kf, l.ldk, qts[g], QBS, D, st, j, kb, bm);
            }

            // scores -> probabilities, per lane (query) online softmax
            __m512 corr[QV];
            bool   live = false;
            for (int c = 0; c < QV; ++c) {
                if (raw) {
                    bm[c] = _mm512_mul_ps(bm[c], vscale);
                } else {
                    bm[c] = _mm512_set1_ps(-INFINITY);
                    for (int64_t j = 0; j < kb; ++j) {
                        float * p = st + j * QBS + 16 * c;
                        __m512  x = _mm512_mul_ps(_mm512_load_ps(p), vscale);
                        if (softcap) x = _mm512_mul_ps(vcap, v_tanh(_mm512_mul_ps(x, vicap)));
                        if (mbase) x = _mm512_add_ps(x, _mm512_load_ps(mt + j * QBS + 16 * c)); // lanes >= nq: unused
                        _mm512_store_ps(p, x);
                        bm[c] = _mm512_max_ps(bm[c], x);
                    }
                }
                const __m512    mold  = _mm512_load_ps(mx + 16 * c);
                const __m512    mnew  = _mm512_max_ps(mold, bm[c]);
                const __mmask16 dead  = _mm512_cmp_ps_mask(mnew, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
                live |= dead != 0xFFFF;
                // lanes that have seen nothing yet use 0 as the max: every exp is then of -inf -> 0
                const __m512    muse  = _mm512_mask_blend_ps(dead, mnew, _mm512_setzero_ps());
                corr[c]               = v_exp(_mm512_sub_ps(mold, muse));
                __m512          lsum  = _mm512_setzero_ps();
                if (BF) {
                    // probabilities rounded to bf16 and paired along kv; the normaliser sums the
                    // rounded values (kbp is even: rows past kb are zero)
                    for (int64_t j = 0; j < kbp; j += 2) {
                        const __m512  e0 = j < kb ? p_exp(_mm512_load_ps(st + j * QBS + 16 * c), escale, muse)
                                                  : _mm512_setzero_ps();
                        const __m512  e1 = j + 1 < kb ? p_exp(_mm512_load_ps(st + (j + 1) * QBS + 16 * c), escale, muse)
                                                      : _mm512_setzero_ps();
                        const __m512i pr = _mm512_permutexvar_epi16(pair_idx, (__m512i) _mm512_cvtne2ps_pbh(e1, e0));
                        _mm512_store_si512(pp + (j / 2) * QBS + 16 * c, pr);
                        // += 1 * P[j] + 1 * P[j+1]: exact products, the same two F32 adds
                        lsum = _mm512_dpbf16_ps(lsum, as_bh(pr), as_bh(ones));
                    }
                } else {
                    for (int64_t j = 0; j < kb; ++j) {
                        float *      p = st + j * QBS + 16 * c;
                        const __m512 e = p_exp(_mm512_load_ps(p), escale, muse);
                        _mm512_store_ps(p, e);
                        lsum = _mm512_add_ps(lsum, e);
                    }
                    for (int64_t j = kb; j < kbp; ++j) _mm512_store_ps(st + j * QBS + 16 * c, _mm512_setzero_ps());
                }
                _mm512_store_ps(mx + 16 * c, mnew);
                _mm512_store_ps(sm + 16 * c, _mm512_fmadd_ps(_mm512_load_ps(sm + 16 * c), corr[c], lsum));
            }
            if (!live) continue;

            if (!v_ready) {
                if (BF) {
                    for (int64_t j = 0; j < kbp; j += 2) {
                        const char * r0 = vbase + (j0 + j) * a.v->nb[1];
                        const char * r1 = j + 1 < kb ? r0 + a.v->nb[1] : nullptr;
                        uint32_t *   o  = vp + (j / 2) * ldvp;
                        for (int64_t d = 0; d < ldvp; d += 16) {
                            const __m512i h0 = j < kb ? v_lanes(a.v->type, r0, d, Dv) : _mm512_setzero_si512();
                            const __m512i h1 = r1 ? v_lanes(a.v->type, r1, d, Dv) : _mm512_setzero_si512();
                            _mm512_store_si512(o + d, _mm512_or_si512(h0, _mm512_slli_epi32(h1, 16)));
                        }
                    }
                } else {
                    for (int64_t j = 0; j < kbp; ++j) {
                        if (j < kb) widen(a.v->type, vbase + (j0 + j) * a.v->nb[1], vf + j * l.ldv, Dv, dv_pad);
                        else        fill0(vf + j * l.ldv, dv_pad);
                    }
                }
                v_ready = true;
            }
            if (BF) {
                for (int64_t d0 = 0; d0 < dvpad; d0 += ND) value_tile_bf<QV>(vp, ldvp, pp, QBS, kbp / 2, ot, corr, d0);
            } else {
                for (int64_t d0 = 0; d0 < dv_pad; d0 += ND) value_tile<QV>(vf, l.ldv, st, QBS, kbp, ot, corr, d0);
            }
        }
    }

    // normalise (with the optional sink logit) and store each query's row
    for (int g = 0; g < ng; ++g) {
        const int64_t h = t[g].h, s = t[g].s, iq0 = t[g].iq0, nq = t[g].nq;
        const float * ot = ots[g];
        const float * mx = ws + l.off_m + g * QBS_MAX;
        const float * sm = ws + l.off_l + g * QBS_MAX;
        alignas(64) float inv[QBS_MAX];
        for (int64_t i = 0; i < nq; ++i) {
            float m   = mx[i];
            float sum = sm[i];
            float r   = 1.0f;
            if (a.sinks && ((const float *) a.sinks->data)[h] != -INFINITY) {
                const float sv = ((const float *) a.sinks->data)[h];
                if (sv > m) {
                    r   = m == -INFINITY ? 0.0f : std::exp(m - sv);
                    sum *= r;
                    m   = sv;
                }
                sum += std::exp(sv - m);
            }
            inv[i] = sum > 0.0f ? r / sum : 0.0f;
        }
        auto out_row = [&](int64_t i) {
            return (float *) ((char *) a.dst->data + h * a.dst->nb[1] + (iq0 + i) * a.dst->nb[2] + s * a.dst->nb[3]);
        };
        // Ot is dims x queries: 16 x 16 blocks are transposed in registers (a scalar gather of
        // each query's row cost ~5% of the whole op); the dims past the last full 16 one by one
        const int64_t dv16 = Dv / 16 * 16;
        for (int64_t i0 = 0; i0 < nq; i0 += 16) {
            const int64_t ni = min_i(16, nq - i0);
            for (int64_t d0 = 0; d0 < dv16; d0 += 16) {
                __m512 r[16];
                for (int k = 0; k < 16; ++k) r[k] = _mm512_load_ps(ot + (d0 + k) * QBS + i0);
                transpose16(r);
                for (int64_t k = 0; k < ni; ++k) _mm512_storeu_ps(out_row(i0 + k) + d0, _mm512_mul_ps(r[k], _mm512_set1_ps(inv[i0 + k])));
            }
        }
        for (int64_t i = 0; i < nq; ++i) {
            float * out = out_row(i);
            for (int64_t d = dv16; d < Dv; ++d) out[d] = ot[d * QBS + i] * inv[i];
        }
    }
}

} // namespace

size_t ggml_avx512_flash_attn_floats(int64_t D, int64_t Dv) { return (size_t) make_layout(D, Dv).total; }

bool ggml_avx512_flash_attn_uses_bf16(const struct ggml_tensor * dst) {
    // bf16 products only when the node did not ask for F32 precision (ggml_flash_attn_ext_set_prec:
    // rounding Q, K, V and P to bf16 costs ~2^-9 relative per product, 2e-3 at the DiT shape) and
    // this CPU's table row (or GGML_CPU_KERNEL) picks bf16dot for flash attention; then F32 K/V
    // are rounded to bf16 too (GGML_PREC_DEFAULT allows it, as upstream's GPU backends do: on Zen 4
    // the exact F32 path cannot pass the FMA peak, ~55% of the bf16 path's rate)
    return dst->src[0]->ne[0] <= 4096 &&
           ggml_flash_attn_ext_get_prec(dst) == GGML_PREC_DEFAULT &&
           ggml_cpu_kernel_for(ggml_cpu_kernel_family::flash_attn) == ggml_cpu_kernel::bf16dot;
}

void ggml_avx512_flash_attn_ext(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    fa_args a;
    a.q = dst->src[0];
    a.k = dst->src[1];
    a.v = dst->src[2];
    a.mask = dst->src[3];
    a.sinks = dst->src[4];
    a.dst = dst;
    a.scale    = ggml_get_op_params_f32(dst, 0);
    a.max_bias = ggml_get_op_params_f32(dst, 1);
    a.softcap  = ggml_get_op_params_f32(dst, 2);
    a.D      = a.q->ne[0];
    a.n_q    = a.q->ne[1];
    a.n_head = a.q->ne[2];
    a.S      = a.q->ne[3];
    a.n_kv   = a.k->ne[1];
    a.Dv     = a.v->ne[0];
    a.rk2 = a.n_head / a.k->ne[2];
    a.rv2 = a.n_head / a.v->ne[2];
    a.rk3 = a.S / a.k->ne[3];
    a.rv3 = a.S / a.v->ne[3];

    const bool bf = ggml_avx512_flash_attn_uses_bf16(dst);

    const layout l   = make_layout(a.D, a.Dv);
    const int    ith = params->ith, nth = params->nth;
    float *      ws  = (float *) (((uintptr_t) params->wdata + 63) & ~(uintptr_t) 63) + (size_t) ith * (size_t) l.total;

    // smaller tiles when there are few (head, seq) pairs, so every thread gets work
    int64_t qb = QBS_MAX;
    while (qb > 16 && ((a.n_q + qb - 1) / qb) * a.n_head * a.S < 2 * (int64_t) nth) qb /= 2;
    if (a.n_q <= 16) qb = 16;
    const int64_t n_qt    = (a.n_q + qb - 1) / qb;
    const int64_t n_units = n_qt * a.n_head * a.S;

    int64_t u0, u1;
    ggml_cpu_split_range(n_units, ith, nth, &u0, &u1);
    for (int64_t u = u0; u < u1;) {
        if (ggml_cpu_should_abort(params)) return;
        // next chunk: up to G_MAX consecutive tiles with one tile width that read the same K/V head
        tile t[G_MAX];
        int  ng = 0, qv = 0;
        for (; u < u1 && ng < G_MAX; ++u) {
            const int64_t qt  = u % n_qt;
            const int64_t h   = (u / n_qt) % a.n_head;
            const int64_t s   = u / (n_qt * a.n_head);
            const int64_t iq0 = qt * qb;
            const int64_t nq  = min_i(qb, a.n_q - iq0);
            const int     w   = nq > 32 ? 4 : nq > 16 ? 2 : 1;
            if (ng > 0 && (w != qv || h / a.rk2 != t[0].h / a.rk2 || h / a.rv2 != t[0].h / a.rv2 ||
                           s / a.rk3 != t[0].s / a.rk3 || s / a.rv3 != t[0].s / a.rv3))
                break;
            t[ng++] = {h, s, iq0, nq};
            qv      = w;
        }
        if (bf) {
            if (qv == 4)      run_chunk<4, true>(a, l, ws, t, ng);
            else if (qv == 2) run_chunk<2, true>(a, l, ws, t, ng);
            else              run_chunk<1, true>(a, l, ws, t, ng);
        } else {
            if (qv == 4)      run_chunk<4, false>(a, l, ws, t, ng);
            else if (qv == 2) run_chunk<2, false>(a, l, ws, t, ng);
            else              run_chunk<1, false>(a, l, ws, t, ng);
        }
    }
}

#else

size_t ggml_avx512_flash_attn_floats(int64_t, int64_t) { return 0; }
bool   ggml_avx512_flash_attn_uses_bf16(const struct ggml_tensor *) { return false; }
void   ggml_avx512_flash_attn_ext(const struct ggml_compute_params *, struct ggml_tensor *) { GGML_ABORT("no AVX-512 build"); }

#endif
