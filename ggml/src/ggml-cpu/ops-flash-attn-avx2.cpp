// ops-flash-attn-avx2.cpp — AVX2 + FMA + F16C FLASH_ATTN_EXT (same semantics as ops-flash-attn.cpp,
// same arithmetic as the AVX-512 kernel's f32fma path).
//
// Blocked online softmax with the query tile held TRANSPOSED, so that one 8-float vector holds one
// quantity for 8 queries (a tile is QV = 1..3 vectors, 8..24 queries):
//   Qt[d][i]  (D x QBS)   the tile's queries, i along the vector
//   St[j][i]  (KB x QBS)  scores of kv row j: sum_d K[j][d] * Qt[d][i] (a broadcast K element
//                         times Q vectors, so no horizontal sums), later the probabilities
//   Ot[d][i]  (Dv x QBS)  output accumulator: sum_j V[j][d] * St[j][i]
// The running max and normaliser of the online softmax are then per-lane vector operations.
//
// Register budget (16 ymm registers, no AVX-512): the score micro-kernel keeps NJ x QV = 4 x 3
// accumulators, QV query vectors and one broadcast live (16); the value micro-kernel ND x QV
// accumulators, QV probability vectors and one broadcast. 12 independent FMA chains cover the
// FMA latency x 2 pipes of Zen 3 / Haswell-class cores, and each FMA needs at most 7/12 of a
// load (Q/P vectors are loaded once per d / j, the K / V element once per row).
//
// Arithmetic: K and V (F32, F16 via vcvtph2ps, BF16 via a 16-bit shift) and Q are widened exactly
// to F32; products and sums are F32 FMAs; the exponential is a degree-6 polynomial after the
// two-constant ln2 reduction (relative error ~2e-8 before rounding, a few ulp after; arguments
// below -87.3 give 0 instead of a subnormal, an absolute error < 1.2e-38). So the kernel meets
// GGML_PREC_F32's bound whatever precision the node asks for (no bf16 rounding at this level).
//
// K/V blocks: F32 rows are read in place (row pointers) where the layout allows it; F16/BF16
// blocks are widened once per chunk of up to G_MAX query tiles that read the same K/V head
// (consecutive tiles of a head, the query heads of one GQA group), into per-thread scratch.
// Rows past the end of a short block point at a zero row, so the micro-kernels never branch.
//
// Nothing is declined: every node ggml_cpu_flash_attn_ext_supported accepts runs here (masks F16/
// F32 with ALiBi slopes, softcap, sinks, GQA/MQA broadcast over heads and sequences, any D / Dv,
// strided q/k/v rows).

#include "ops-flash-attn-avx2.h"
#include "ops-flash-attn-tiles.h"

#include "ggml-impl.h"

#include <cmath>
#include <cstring>

#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)

#include <immintrin.h>

// Everything below is compiled for AVX2 + FMA + F16C, whatever the build's -march (GGML_NATIVE=OFF
// builds baseline x86-64); it runs only when cpu-isa.h allows the avx2 level. No standard-library
// template is instantiated below this line: a copy compiled for AVX2 could be the one the linker
// keeps for the portable files too.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace {

constexpr int     VL      = 8;            // floats per vector
constexpr int     QV_MAX  = 3;            // vectors of queries per tile
constexpr int64_t QBS_MAX = QV_MAX * VL;  // queries per tile
constexpr int64_t KB      = 128;          // kv rows per block
constexpr int     NJ      = 4;            // kv rows per score micro-tile
constexpr int     ND      = 4;            // output dims per value micro-tile
constexpr int     G_MAX   = 8;            // query tiles sharing one K/V block conversion

inline int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }
inline int64_t min_i(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max_i(int64_t a, int64_t b) { return a > b ? a : b; }

// Per-thread scratch, in floats; every region starts at a multiple of 8 floats (32 bytes) from the
// 64-byte aligned thread base, so the tile rows (QBS = 8, 16 or 24 floats) are aligned vectors.
struct layout {
    int64_t ldk, ldv, dvpad, ltmp;
    int64_t qt_sz, ot_sz;
    int64_t off_qt, off_k, off_v, off_zero, off_tmp, off_st, off_mt, off_ot, off_m, off_l;
    int64_t total;
};

// Row strides of the widened K / V blocks: the micro-kernels read one element from each of 64 rows,
// and a stride of an even number of cache lines (D = 128: 8 lines) maps those rows to a fraction
// of the L1 sets (8 of 64 at D = 128), where they evict each other and the Q / P tiles. An odd
// number of lines spreads them over every set.
inline int64_t pad_stride(int64_t ld) { return ld % 16 == 0 && (ld / 16) % 2 == 0 ? ld + 16 : ld; }

layout make_layout(int64_t D, int64_t Dv) {
    layout l;
    l.ldk      = pad_stride(round_up(max_i(D, 1), VL));
    l.dvpad    = round_up(max_i(Dv, 1), ND); // the value micro-kernel covers ND dims at a time
    l.ldv      = pad_stride(round_up(l.dvpad, VL));
    l.ltmp     = max_i(max_i(l.ldk, l.ldv), KB);
    l.qt_sz    = round_up(D * QBS_MAX, VL);
    l.ot_sz    = l.dvpad * QBS_MAX;
    l.off_qt   = 0;
    l.off_k    = l.off_qt + G_MAX * l.qt_sz;
    l.off_v    = l.off_k + KB * l.ldk;
    l.off_zero = l.off_v + KB * l.ldv;
    l.off_tmp  = l.off_zero + l.ltmp;
    l.off_st   = l.off_tmp + l.ltmp;
    l.off_mt   = l.off_st + KB * QBS_MAX;
    l.off_ot   = l.off_mt + KB * QBS_MAX;
    l.off_m    = l.off_ot + G_MAX * l.ot_sz;
    l.off_l    = l.off_m + G_MAX * QBS_MAX;
    l.total    = round_up(l.off_l + G_MAX * QBS_MAX, 16); // 64-byte multiple: every thread base aligned
    return l;
}

float alibi_slope(float max_bias, int64_t h, int64_t n_head) {
    if (max_bias <= 0.0f) return 1.0f;
    const uint32_t n_log2 = 1u << (uint32_t) floor(log2((double) n_head));
    const float    m0     = powf(2.0f, -max_bias / (float) n_log2);
    const float    m1     = powf(2.0f, -(max_bias / 2.0f) / (float) n_log2);
    return (uint32_t) h < n_log2 ? powf(m0, (float) (h + 1)) : powf(m1, (float) (2 * (h - n_log2) + 1));
}

// Keeps a loaded vector in a register: otherwise GCC folds the load into each FMA that uses it, and
// the micro-kernels issue NJ (ND) loads per vector instead of one.
inline __m256 pin(__m256 v) {
    asm volatile("" : "+x"(v));
    return v;
}

// ---- exponential and tanh ----------------------------------------------------------------------

// e^x for x <= ~0 (the softmax arguments x - max and the correction factors), NaN -> NaN,
// -inf -> 0. n = round(x / ln2), r = x - n ln2 with ln2 in two parts (r exact up to one rounding),
// e^r by a degree-6 polynomial fitted on |r| <= ln2/2 (relative 2e-8 in float coefficients),
// times 2^n built in the exponent field. Below -87.33 (e^x under the smallest normal float) the
// result is 0 rather than a subnormal: 2^n would not fit the exponent field.
inline __m256 exp_nonpos(__m256 x) {
    const __m256 lo    = _mm256_set1_ps(-87.33f);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x                  = _mm256_max_ps(lo, x); // NaN x is returned as is (second operand)
    const __m256 n     = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
    r        = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606820309417e-06f), r);
    __m256 p = _mm256_set1_ps(0.0013835798017680645f);
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.00837564468383789f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.04166828840970993f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.16666410863399506f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.49999991059303284f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    // n in [-126, 1] here: 2^n = (n + 127) << 23 is a normal float
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

// tanh(x) (softcap only). |x| < 0.625: x + x^3 P(x^2), P of degree 5 fitted for relative error
// (3e-9 before rounding); above: (1 - e) / (1 + e) with e = e^{-2|x|} <= 1, which cannot overflow
// and has no cancellation there (e <= 0.29). The sign is copied back; NaN propagates.
inline __m256 tanh_v(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 ax   = _mm256_andnot_ps(sign, x);
    const __m256 y    = _mm256_mul_ps(x, x);
    __m256       q    = _mm256_set1_ps(0.0021429636981338263f);
    q                 = _mm256_fmadd_ps(q, y, _mm256_set1_ps(-0.008177400566637516f));
    q                 = _mm256_fmadd_ps(q, y, _mm256_set1_ps(0.021700704470276833f));
    q                 = _mm256_fmadd_ps(q, y, _mm256_set1_ps(-0.05394676327705383f));
    q                 = _mm256_fmadd_ps(q, y, _mm256_set1_ps(0.1333320587873459f));
    q                 = _mm256_fmadd_ps(q, y, _mm256_set1_ps(-0.3333333134651184f));
    const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(q, y), x, x);
    const __m256 e     = exp_nonpos(_mm256_mul_ps(ax, _mm256_set1_ps(-2.0f)));
    const __m256 one   = _mm256_set1_ps(1.0f);
    const __m256 big   = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
    const __m256 big_s = _mm256_or_ps(big, _mm256_and_ps(sign, x));
    // NaN compares false and takes the big branch, where it propagates
    return _mm256_blendv_ps(big_s, small, _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ));
}

// ---- conversions ---------------------------------------------------------------------------------

inline __m256 bf16x8_to_f32(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }

inline float bf16_to_f32_scalar(uint16_t h) {
    const uint32_t u = (uint32_t) h << 16;
    float          f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

// n elements of a row of `type` -> F32 (exact), then zeros up to `pad`
void widen(enum ggml_type type, const void * src, float * dst, int64_t n, int64_t pad) {
    int64_t i = 0;
    switch (type) {
        case GGML_TYPE_F32: {
            const float * s = (const float *) src;
            for (; i + VL <= n; i += VL) _mm256_storeu_ps(dst + i, _mm256_loadu_ps(s + i));
            for (; i < n; ++i) dst[i] = s[i];
            break;
        }
        case GGML_TYPE_F16: {
            const uint16_t * s = (const uint16_t *) src;
            for (; i + VL <= n; i += VL) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (s + i))));
            for (; i < n; ++i) dst[i] = _cvtsh_ss(s[i]);
            break;
        }
        case GGML_TYPE_BF16: {
            const uint16_t * s = (const uint16_t *) src;
            for (; i + VL <= n; i += VL) _mm256_storeu_ps(dst + i, bf16x8_to_f32(_mm_loadu_si128((const __m128i *) (s + i))));
            for (; i < n; ++i) dst[i] = bf16_to_f32_scalar(s[i]);
            break;
        }
        default: GGML_ABORT("flash_attn_ext: unsupported type %d", (int) type);
    }
    for (; i < pad; ++i) dst[i] = 0.0f;
}

// r[k] (8 rows of 8) -> r[k] = column k
inline void transpose8(__m256 (&r)[8]) {
    __m256 t[8], u[8];
    for (int k = 0; k < 8; k += 2) {
        t[k]     = _mm256_unpacklo_ps(r[k], r[k + 1]); // r0[0] r1[0] r0[1] r1[1] | r0[4] r1[4] r0[5] r1[5]
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    }
    for (int b = 0; b < 2; ++b) {
        // u[4b + c]: column c (and c + 4 in the high half) of rows 4b..4b+3
        u[4 * b + 0] = _mm256_shuffle_ps(t[4 * b + 0], t[4 * b + 2], 0x44);
        u[4 * b + 1] = _mm256_shuffle_ps(t[4 * b + 0], t[4 * b + 2], 0xEE);
        u[4 * b + 2] = _mm256_shuffle_ps(t[4 * b + 1], t[4 * b + 3], 0x44);
        u[4 * b + 3] = _mm256_shuffle_ps(t[4 * b + 1], t[4 * b + 3], 0xEE);
    }
    for (int c = 0; c < 4; ++c) {
        r[c]     = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[c + 4] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

// ---- micro-kernels -------------------------------------------------------------------------------

// St[j0 + r][...] = sum_d K[j0 + r][d] * Qt[d][...] for r < NJ; bm: running max over the rows < kb
// (rows past kb are the zero row's scores, stored but never maxed).
template <int QV>
inline void score_tile(const float * const * kr, const float * qt, int64_t D, float * st, int64_t j0, int64_t kb,
                       __m256 * bm) {
    constexpr int64_t QBS = QV * VL;
    __m256            acc[NJ][QV];
    for (int r = 0; r < NJ; ++r)
        for (int c = 0; c < QV; ++c) acc[r][c] = _mm256_setzero_ps();
    const float * k0 = kr[j0 + 0];
    const float * k1 = kr[j0 + 1];
    const float * k2 = kr[j0 + 2];
    const float * k3 = kr[j0 + 3];
    for (int64_t d = 0; d < D; ++d) {
        __m256 q[QV];
        for (int c = 0; c < QV; ++c) q[c] = pin(_mm256_load_ps(qt + d * QBS + VL * c));
        __m256 b = _mm256_broadcast_ss(k0 + d);
        for (int c = 0; c < QV; ++c) acc[0][c] = _mm256_fmadd_ps(b, q[c], acc[0][c]);
        b = _mm256_broadcast_ss(k1 + d);
        for (int c = 0; c < QV; ++c) acc[1][c] = _mm256_fmadd_ps(b, q[c], acc[1][c]);
        b = _mm256_broadcast_ss(k2 + d);
        for (int c = 0; c < QV; ++c) acc[2][c] = _mm256_fmadd_ps(b, q[c], acc[2][c]);
        b = _mm256_broadcast_ss(k3 + d);
        for (int c = 0; c < QV; ++c) acc[3][c] = _mm256_fmadd_ps(b, q[c], acc[3][c]);
    }
    for (int r = 0; r < NJ; ++r)
        for (int c = 0; c < QV; ++c) _mm256_store_ps(st + (j0 + r) * QBS + VL * c, acc[r][c]);
    for (int r = 0; r < NJ; ++r)
        if (j0 + r < kb)
            for (int c = 0; c < QV; ++c) bm[c] = _mm256_max_ps(bm[c], acc[r][c]);
}

// Ot[d0 + r][...] = Ot[d0 + r][...] * corr + sum_j V[j][d0 + r] * P[j][...] for r < ND
template <int QV>
inline void value_tile(const float * const * vr, const float * pt, int64_t kbp, float * ot, const __m256 * corr,
                       int64_t d0) {
    constexpr int64_t QBS = QV * VL;
    __m256            acc[ND][QV];
    for (int r = 0; r < ND; ++r)
        for (int c = 0; c < QV; ++c) acc[r][c] = _mm256_mul_ps(_mm256_load_ps(ot + (d0 + r) * QBS + VL * c), corr[c]);
    for (int64_t j = 0; j < kbp; ++j) {
        __m256 p[QV];
        for (int c = 0; c < QV; ++c) p[c] = pin(_mm256_load_ps(pt + j * QBS + VL * c));
        const float * v = vr[j] + d0;
        __m256        b = _mm256_broadcast_ss(v + 0);
        for (int c = 0; c < QV; ++c) acc[0][c] = _mm256_fmadd_ps(b, p[c], acc[0][c]);
        b = _mm256_broadcast_ss(v + 1);
        for (int c = 0; c < QV; ++c) acc[1][c] = _mm256_fmadd_ps(b, p[c], acc[1][c]);
        b = _mm256_broadcast_ss(v + 2);
        for (int c = 0; c < QV; ++c) acc[2][c] = _mm256_fmadd_ps(b, p[c], acc[2][c]);
        b = _mm256_broadcast_ss(v + 3);
        for (int c = 0; c < QV; ++c) acc[3][c] = _mm256_fmadd_ps(b, p[c], acc[3][c]);
    }
    for (int r = 0; r < ND; ++r)
        for (int c = 0; c < QV; ++c) _mm256_store_ps(ot + (d0 + r) * QBS + VL * c, acc[r][c]);
}

// every cache line of n rows of `bytes` bytes, `stride` apart, towards L2: the next block's K/V
// rows come from L3 or memory and are read once per chunk of tiles
inline void prefetch_rows(const char * p, size_t stride, int64_t n, int64_t bytes) {
    for (int64_t j = 0; j < n; ++j, p += stride)
        for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(p + b, _MM_HINT_T1);
}

// ---- the op ---------------------------------------------------------------------------------------

// slope * mask of queries [iq0, iq0 + nq) and kv rows [j0, j0 + kb), transposed into mt[j][i]
// (lanes nq..QBS get -inf: they never see anything). Returns whether any entry is visible.
template <int QV>
bool build_mask(const fa_args & a, const char * mbase, float slope, int64_t iq0, int64_t nq, int64_t j0, int64_t kb,
                float * mt, float * tmp) {
    constexpr int64_t QBS  = QV * VL;
    const __m256      ninf = _mm256_set1_ps(-INFINITY);
    const __m256      vs   = _mm256_set1_ps(slope);
    const bool        f16  = a.mask->type == GGML_TYPE_F16;
    __m256            vis  = _mm256_setzero_ps(); // any lane != -inf
    const int64_t     kb8  = kb / VL * VL;
    for (int c = 0; c < QV; ++c) {
        const char * rows[VL];
        for (int k = 0; k < VL; ++k) {
            const int64_t i = VL * c + k;
            rows[k]         = i < nq ? mbase + (iq0 + i) * a.mask->nb[1] : nullptr;
        }
        // 8 x 8 blocks: 8 queries' rows converted, transposed in registers
        for (int64_t j = 0; j < kb8; j += VL) {
            __m256 r[VL];
            for (int k = 0; k < VL; ++k) {
                if (!rows[k]) {
                    r[k] = ninf;
                } else if (f16) {
                    r[k] = _mm256_mul_ps(vs, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) ((const uint16_t *) rows[k] + j0 + j))));
                } else {
                    r[k] = _mm256_mul_ps(vs, _mm256_loadu_ps((const float *) rows[k] + j0 + j));
                }
            }
            transpose8(r);
            for (int k = 0; k < VL; ++k) {
                _mm256_store_ps(mt + (j + k) * QBS + VL * c, r[k]);
                vis = _mm256_or_ps(vis, _mm256_cmp_ps(r[k], ninf, _CMP_NEQ_UQ));
            }
        }
        // the last kb % 8 rows one element at a time
        for (int64_t j = kb8; j < kb; ++j) {
            for (int k = 0; k < VL; ++k) {
                float m = -INFINITY;
                if (rows[k]) {
                    m = f16 ? _cvtsh_ss(((const uint16_t *) rows[k])[j0 + j]) : ((const float *) rows[k])[j0 + j];
                    m = slope * m;
                }
                tmp[k] = m;
            }
            const __m256 x = _mm256_loadu_ps(tmp);
            _mm256_store_ps(mt + j * QBS + VL * c, x);
            vis = _mm256_or_ps(vis, _mm256_cmp_ps(x, ninf, _CMP_NEQ_UQ));
        }
    }
    return _mm256_movemask_ps(vis) != 0;
}

// Tiles t[0..ng) (all of width QV vectors, all reading the same K and V head) over every kv block.
template <int QV>
void run_chunk(const fa_args & a, const layout & l, float * ws, const fa_tile * t, int ng) {
    constexpr int64_t QBS = QV * VL;
    const int64_t     D = a.D, Dv = a.Dv;
    float *           kf   = ws + l.off_k;
    float *           vf   = ws + l.off_v;
    const float *     zero = ws + l.off_zero;
    float *           tmp  = ws + l.off_tmp;
    float *           st   = ws + l.off_st;
    float *           mt   = ws + l.off_mt;

    float *      qts[G_MAX];
    float *      ots[G_MAX];
    const char * mbases[G_MAX];
    float        slopes[G_MAX];
    for (int g = 0; g < ng; ++g) {
        const int64_t h = t[g].h, s = t[g].s, iq0 = t[g].iq0, nq = t[g].nq;
        float *       qt = qts[g] = ws + l.off_qt + g * l.qt_sz;
        float *       ot = ots[g] = ws + l.off_ot + g * l.ot_sz;
        // transposed queries; the lanes of missing queries (short last tile) are zeros
        for (int64_t i = 0; i < QBS; ++i) {
            if (i < nq) {
                const char * src = (const char *) a.q->data + (iq0 + i) * a.q->nb[1] + h * a.q->nb[2] + s * a.q->nb[3];
                widen(a.q->type, src, tmp, D, D);
                for (int64_t d = 0; d < D; ++d) qt[d * QBS + i] = tmp[d];
            } else {
                for (int64_t d = 0; d < D; ++d) qt[d * QBS + i] = 0.0f;
            }
        }
        memset(ot, 0, (size_t) (l.dvpad * QBS) * sizeof(float));
        float * mx = ws + l.off_m + g * QBS_MAX;
        float * sm = ws + l.off_l + g * QBS_MAX;
        for (int c = 0; c < QV; ++c) {
            _mm256_store_ps(mx + VL * c, _mm256_set1_ps(-INFINITY));
            _mm256_store_ps(sm + VL * c, _mm256_setzero_ps());
        }
        mbases[g] = a.mask ? (const char *) a.mask->data + (h % a.mask->ne[2]) * a.mask->nb[2] + (s % a.mask->ne[3]) * a.mask->nb[3]
                           : nullptr;
        slopes[g] = a.mask ? alibi_slope(a.max_bias, h, a.n_head) : 1.0f;
    }

    const char * kbase   = (const char *) a.k->data + (t[0].h / a.rk2) * a.k->nb[2] + (t[0].s / a.rk3) * a.k->nb[3];
    const char * vbase   = (const char *) a.v->data + (t[0].h / a.rv2) * a.v->nb[2] + (t[0].s / a.rv3) * a.v->nb[3];
    const bool   softcap = a.softcap != 0.0f;
    const __m256 vcap    = _mm256_set1_ps(a.softcap);
    const __m256 vicap   = _mm256_set1_ps(softcap ? 1.0f / a.softcap : 0.0f);
    // Without mask and softcap (and scale > 0, so max of scale * s = scale * max of s) the scores
    // stay raw: the score kernel's running max gives the block max, and the scale goes into the
    // exponent's argument, s * scale - m in one FMA. Otherwise one pass writes the logits first.
    const bool   raw    = !a.mask && !softcap && a.scale > 0.0f;
    const __m256 vscale = _mm256_set1_ps(a.scale);
    const __m256 escale = raw ? vscale : _mm256_set1_ps(1.0f);
    const __m256 ninf   = _mm256_set1_ps(-INFINITY);

    const float * kr[KB];
    const float * vr[KB];

    for (int64_t j0 = 0; j0 < a.n_kv; j0 += KB) {
        const int64_t kb      = min_i(KB, a.n_kv - j0);
        const int64_t kbp     = round_up(kb, NJ);
        bool          k_ready = false, v_ready = false;
        if (j0 + KB < a.n_kv) {
            const int64_t nb = min_i(KB, a.n_kv - j0 - KB);
            prefetch_rows(kbase + (j0 + KB) * a.k->nb[1], a.k->nb[1], nb, D * (int64_t) ggml_type_size(a.k->type));
            prefetch_rows(vbase + (j0 + KB) * a.v->nb[1], a.v->nb[1], nb, Dv * (int64_t) ggml_type_size(a.v->type));
        }

        for (int g = 0; g < ng; ++g) {
            const int64_t iq0 = t[g].iq0, nq = t[g].nq;
            float *       ot  = ots[g];
            float *       mx  = ws + l.off_m + g * QBS_MAX;
            float *       sm  = ws + l.off_l + g * QBS_MAX;

            // a block no query of the tile can see costs nothing more
            if (mbases[g] && !build_mask<QV>(a, mbases[g], slopes[g], iq0, nq, j0, kb, mt, tmp)) continue;

            if (!k_ready) {
                for (int64_t j = 0; j < kbp; ++j) {
                    if (j >= kb) {
                        kr[j] = zero;
                    } else if (a.k_direct) {
                        kr[j] = (const float *) (kbase + (j0 + j) * a.k->nb[1]);
                    } else {
                        widen(a.k->type, kbase + (j0 + j) * a.k->nb[1], kf + j * l.ldk, D, D);
                        kr[j] = kf + j * l.ldk;
                    }
                }
                k_ready = true;
            }
            __m256 bm[QV];
            for (int c = 0; c < QV; ++c) bm[c] = ninf;
            for (int64_t j = 0; j < kbp; j += NJ) score_tile<QV>(kr, qts[g], D, st, j, kb, bm);

            // scores -> probabilities, online softmax per lane (query)
            __m256 corr[QV];
            int    live = 0;
            for (int c = 0; c < QV; ++c) {
                if (raw) {
                    bm[c] = _mm256_mul_ps(bm[c], vscale);
                } else {
                    bm[c] = ninf;
                    for (int64_t j = 0; j < kb; ++j) {
                        float * p = st + j * QBS + VL * c;
                        __m256  x = _mm256_mul_ps(_mm256_load_ps(p), vscale);
                        if (softcap) x = _mm256_mul_ps(vcap, tanh_v(_mm256_mul_ps(x, vicap)));
                        if (mbases[g]) x = _mm256_add_ps(x, _mm256_load_ps(mt + j * QBS + VL * c));
                        _mm256_store_ps(p, x);
                        bm[c] = _mm256_max_ps(bm[c], x);
                    }
                }
                const __m256 mold = _mm256_load_ps(mx + VL * c);
                const __m256 mnew = _mm256_max_ps(mold, bm[c]);
                const __m256 dead = _mm256_cmp_ps(mnew, ninf, _CMP_EQ_OQ);
                live |= _mm256_movemask_ps(dead) != 0xFF;
                // lanes that have seen nothing yet use 0 as the max: all their exps are of -inf -> 0
                const __m256 muse = _mm256_andnot_ps(dead, mnew);
                corr[c]           = exp_nonpos(_mm256_sub_ps(mold, muse));
                __m256 lsum       = _mm256_setzero_ps();
                for (int64_t j = 0; j < kb; ++j) {
                    float *      p = st + j * QBS + VL * c;
                    const __m256 e = exp_nonpos(_mm256_fmsub_ps(_mm256_load_ps(p), escale, muse));
                    _mm256_store_ps(p, e);
                    lsum = _mm256_add_ps(lsum, e);
                }
                for (int64_t j = kb; j < kbp; ++j) _mm256_store_ps(st + j * QBS + VL * c, _mm256_setzero_ps());
                _mm256_store_ps(mx + VL * c, mnew);
                _mm256_store_ps(sm + VL * c, _mm256_fmadd_ps(_mm256_load_ps(sm + VL * c), corr[c], lsum));
            }
            if (!live) continue;

            if (!v_ready) {
                for (int64_t j = 0; j < kbp; ++j) {
                    if (j >= kb) {
                        vr[j] = zero;
                    } else if (a.v_direct) {
                        vr[j] = (const float *) (vbase + (j0 + j) * a.v->nb[1]);
                    } else {
                        widen(a.v->type, vbase + (j0 + j) * a.v->nb[1], vf + j * l.ldv, Dv, l.dvpad);
                        vr[j] = vf + j * l.ldv;
                    }
                }
                v_ready = true;
            }
            for (int64_t d0 = 0; d0 < l.dvpad; d0 += ND) value_tile<QV>(vr, st, kbp, ot, corr, d0);
        }
    }

    // normalise (with the optional sink logit) and store each query's row
    for (int g = 0; g < ng; ++g) {
        const int64_t h = t[g].h, s = t[g].s, iq0 = t[g].iq0, nq = t[g].nq;
        const float * ot = ots[g];
        const float * mx = ws + l.off_m + g * QBS_MAX;
        const float * sm = ws + l.off_l + g * QBS_MAX;
        float         inv[QBS_MAX];
        for (int64_t i = 0; i < nq; ++i) {
            float m   = mx[i];
            float sum = sm[i];
            float r   = 1.0f;
            if (a.sinks && ((const float *) a.sinks->data)[h] != -INFINITY) {
                // the sink is one more logit in the normaliser, with no value row
                const float sv = ((const float *) a.sinks->data)[h];
                if (sv > m) {
                    r = m == -INFINITY ? 0.0f : expf(m - sv);
                    sum *= r;
                    m = sv;
                }
                sum += expf(sv - m);
            }
            inv[i] = sum > 0.0f ? r / sum : 0.0f;
        }
        auto out_row = [&](int64_t i) {
            return (float *) ((char *) a.dst->data + h * a.dst->nb[1] + (iq0 + i) * a.dst->nb[2] + s * a.dst->nb[3]);
        };
        // Ot is dims x queries: 8 x 8 blocks transposed in registers; dims past the last full 8 one by one
        const int64_t dv8 = Dv / VL * VL;
        for (int64_t i0 = 0; i0 < nq; i0 += VL) {
            const int64_t ni = min_i(VL, nq - i0);
            for (int64_t d0 = 0; d0 < dv8; d0 += VL) {
                __m256 r[VL];
                for (int k = 0; k < VL; ++k) r[k] = _mm256_load_ps(ot + (d0 + k) * QBS + i0);
                transpose8(r);
                for (int64_t k = 0; k < ni; ++k)
                    _mm256_storeu_ps(out_row(i0 + k) + d0, _mm256_mul_ps(r[k], _mm256_set1_ps(inv[i0 + k])));
            }
        }
        for (int64_t i = 0; i < nq; ++i) {
            float * out = out_row(i);
            for (int64_t d = dv8; d < Dv; ++d) out[d] = ot[d * QBS + i] * inv[i];
        }
    }
}

} // namespace

size_t ggml_avx2_flash_attn_floats(int64_t D, int64_t Dv) { return (size_t) make_layout(D, Dv).total; }

void ggml_avx2_flash_attn_ext(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const fa_args a = fa_args_of(dst, ND);

    const layout l   = make_layout(a.D, a.Dv);
    const int    ith = params->ith;
    float *      ws  = (float *) (((uintptr_t) params->wdata + 63) & ~(uintptr_t) 63) + (size_t) ith * (size_t) l.total;
    // the zero row stands in for K/V rows past the end of a short block (P is 0 there, but 0 times
    // whatever an earlier node left in the work buffer could be NaN)
    memset(ws + l.off_zero, 0, (size_t) l.ltmp * sizeof(float));

    fa_for_each_chunk<VL, QBS_MAX, G_MAX>(params, a, [&](const fa_tile * t, int ng, int qv) {
        if (qv == 3)      run_chunk<3>(a, l, ws, t, ng);
        else if (qv == 2) run_chunk<2>(a, l, ws, t, ng);
        else              run_chunk<1>(a, l, ws, t, ng);
    });
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else // not x86-64 GCC/Clang: the level never allows avx2 there

size_t ggml_avx2_flash_attn_floats(int64_t, int64_t) { return 0; }
void   ggml_avx2_flash_attn_ext(const struct ggml_compute_params *, struct ggml_tensor *) { GGML_ABORT("no AVX2 build"); }

#endif
