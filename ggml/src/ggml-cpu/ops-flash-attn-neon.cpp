// ops-flash-attn-neon.cpp — AArch64 Advanced SIMD FLASH_ATTN_EXT (baseline ARMv8-A: runs on every
// AArch64 CPU; same semantics as ops-flash-attn.cpp, same arithmetic as ops-flash-attn-avx2.cpp).
//
// The AVX2 kernel's scheme on 4-float vectors: blocked online softmax with the query tile held
// TRANSPOSED, so one vector holds one quantity for 4 queries (a tile is QV = 1..4 vectors, 4..16
// queries):
//   Qt[d][i]  (D x QBS)   the tile's queries, i along the vector
//   St[j][i]  (KB x QBS)  scores of kv row j: sum_d K[j][d] * Qt[d][i], later the probabilities
//   Ot[d][i]  (Dv x QBS)  output accumulator: sum_j V[j][d] * St[j][i]
// so the running max and normaliser of the online softmax are per-lane vector operations and no
// horizontal sum is ever needed.
//
// Register budget (32 q registers): the score micro-kernel keeps NJ x QV = 4 x 4 accumulators,
// the 4 K vectors of the current 4 dims (one vector load per K row per 4 dims, used through FMLA's
// by-element form, vfmaq_laneq_f32) and one Q vector: 21 live. The value micro-kernel keeps ND x QV
// accumulators, one V vector (ND = 4 dims of one row, again by element) and one P vector. 16
// independent FMA chains cover the FMA latency (4 cycles) x 2-4 FP pipes of current cores.
//
// Arithmetic, lane by lane the AVX2 kernel's: K and V (F32; F16 via FCVTL, vcvt_f32_f16, baseline
// ARMv8-A; BF16 via a 16-bit shift) and Q are widened exactly to F32; every product and sum is an
// F32 FMA (NEON FMLA is IEEE fused like x86 FMA) in the same order (scores over d ascending, the
// output over j ascending); the exponential and tanh are the AVX2 kernel's polynomials with the
// same constants and operation order. So results match that kernel's (and meet GGML_PREC_F32's
// bound whatever precision the node asks for). No FP16 arithmetic is used even where the CPU has it:
// F16 products would break the F32 bound. Explicit intrinsics everywhere it matters, and a
// register barrier (keep()) where GCC's default -ffp-contract=fast could fuse a separate multiply
// and add into one FMA (a different rounding from the AVX2 kernel's).
//
// K/V blocks: F32 rows are read in place where the layout allows it; F16/BF16 blocks are widened
// once per chunk of up to G_MAX query tiles that read the same K/V head, into per-thread scratch.
// Rows past the end of a short block point at a zero row, so the micro-kernels never branch.
//
// Nothing is declined: every node ggml_cpu_flash_attn_ext_supported accepts runs here (masks F16/
// F32 with ALiBi slopes, softcap, sinks, GQA/MQA broadcast over heads and sequences, any D / Dv,
// strided q/k/v rows).

#include "ops-flash-attn-neon.h"
#include "ops-flash-attn-tiles.h"

#include "ggml-impl.h"

#include <cmath>
#include <cstring>

#if defined(__aarch64__)

#include <arm_neon.h>

namespace {

constexpr int     VL      = 4;            // floats per vector
constexpr int     QV_MAX  = 4;            // vectors of queries per tile
constexpr int64_t QBS_MAX = QV_MAX * VL;  // queries per tile
constexpr int64_t KB      = 128;          // kv rows per block
constexpr int     NJ      = 4;            // kv rows per score micro-tile
constexpr int     ND      = 4;            // output dims per value micro-tile (one V vector)
constexpr int     G_MAX   = 8;            // query tiles sharing one K/V block conversion

inline int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }
inline int64_t min_i(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max_i(int64_t a, int64_t b) { return a > b ? a : b; }

// Per-thread scratch, in floats; every region starts at a multiple of 16 floats (64 bytes) from the
// 64-byte aligned thread base.
struct layout {
    int64_t ldk, ldv, dvpad, ltmp;
    int64_t qt_sz, ot_sz;
    int64_t off_qt, off_k, off_v, off_zero, off_tmp, off_st, off_mt, off_ot, off_m, off_l;
    int64_t total;
};

// Row strides of the widened K / V blocks: the micro-kernels read from 4 rows at a time, walking
// 128 rows per block; a stride of an even number of 64-byte lines maps those rows to a fraction of
// the L1 sets, where they evict each other and the Q / P tiles. An odd number spreads them.
inline int64_t pad_stride(int64_t ld) { return ld % 16 == 0 && (ld / 16) % 2 == 0 ? ld + 16 : ld; }

layout make_layout(int64_t D, int64_t Dv) {
    layout l;
    l.ldk      = pad_stride(round_up(max_i(D, 1), 16));
    l.dvpad    = round_up(max_i(Dv, 1), ND); // the value micro-kernel covers ND dims at a time
    l.ldv      = pad_stride(round_up(l.dvpad, 16));
    l.ltmp     = round_up(max_i(max_i(l.ldk, l.ldv), KB), 16);
    l.qt_sz    = round_up(D * QBS_MAX, 16);
    l.ot_sz    = round_up(l.dvpad * QBS_MAX, 16);
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
    const uint32_t n_log2 = 1u << (uint32_t) std::floor(std::log2((double) n_head));
    const float    m0     = std::pow(2.0f, -max_bias / (float) n_log2);
    const float    m1     = std::pow(2.0f, -(max_bias / 2.0f) / (float) n_log2);
    return (uint32_t) h < n_log2 ? std::pow(m0, (float) (h + 1)) : std::pow(m1, (float) (2 * (h - n_log2) + 1));
}

// The value as computed, rounded: GCC may not fuse it with a following add into one FMA.
inline float32x4_t keep(float32x4_t v) {
    asm volatile("" : "+w"(v));
    return v;
}

// ---- exponential and tanh (ops-flash-attn-avx2.cpp's exp_nonpos / tanh_v, operation by operation) --

// e^x for x <= ~0 (the softmax arguments x - max and the correction factors), NaN -> NaN,
// -inf -> 0. n = round(x / ln2) (to nearest even), r = x - n ln2 with ln2 in two parts, e^r by a
// degree-6 polynomial fitted on |r| <= ln2/2 (relative 2e-8 in float coefficients), times 2^n built
// in the exponent field. Below -87.33 the result is 0 rather than a subnormal.
inline float32x4_t exp_nonpos(float32x4_t x) {
    const float32x4_t lo    = vdupq_n_f32(-87.33f);
    const uint32x4_t  under = vcltq_f32(x, lo);
    x                       = vmaxq_f32(lo, x); // NaN stays NaN
    const float32x4_t n     = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t       r     = vfmsq_f32(x, n, vdupq_n_f32(0.693145751953125f)); // x - n * c, fused
    r                       = vfmsq_f32(r, n, vdupq_n_f32(1.428606820309417e-06f));
    float32x4_t p           = vdupq_n_f32(0.0013835798017680645f);
    p                       = vfmaq_f32(vdupq_n_f32(0.00837564468383789f), p, r);
    p                       = vfmaq_f32(vdupq_n_f32(0.04166828840970993f), p, r);
    p                       = vfmaq_f32(vdupq_n_f32(0.16666410863399506f), p, r);
    p                       = vfmaq_f32(vdupq_n_f32(0.49999991059303284f), p, r);
    p                       = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p                       = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    // n in [-126, 1] here: 2^n = (n + 127) << 23 is a normal float (n is integral: the conversion is exact)
    const int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(vmulq_f32(p, vreinterpretq_f32_s32(e))), under));
}

// tanh(x) (softcap only). |x| < 0.625: x + x^3 P(x^2), P of degree 5; above: (1 - e) / (1 + e)
// with e = e^{-2|x|} <= 1. The sign is copied back; NaN takes the big branch and propagates.
inline float32x4_t tanh_v(float32x4_t x) {
    const uint32x4_t  sign = vdupq_n_u32(0x80000000u);
    const float32x4_t ax   = vabsq_f32(x);
    const float32x4_t y    = vmulq_f32(x, x);
    float32x4_t       q    = vdupq_n_f32(0.0021429636981338263f);
    q                      = vfmaq_f32(vdupq_n_f32(-0.008177400566637516f), q, y);
    q                      = vfmaq_f32(vdupq_n_f32(0.021700704470276833f), q, y);
    q                      = vfmaq_f32(vdupq_n_f32(-0.05394676327705383f), q, y);
    q                      = vfmaq_f32(vdupq_n_f32(0.1333320587873459f), q, y);
    q                      = vfmaq_f32(vdupq_n_f32(-0.3333333134651184f), q, y);
    const float32x4_t small = vfmaq_f32(x, keep(vmulq_f32(q, y)), x);
    const float32x4_t e     = exp_nonpos(vmulq_f32(ax, vdupq_n_f32(-2.0f)));
    const float32x4_t one   = vdupq_n_f32(1.0f);
    const float32x4_t big   = vdivq_f32(vsubq_f32(one, e), vaddq_f32(one, e));
    const float32x4_t big_s = vreinterpretq_f32_u32(
        vorrq_u32(vreinterpretq_u32_f32(big), vandq_u32(sign, vreinterpretq_u32_f32(x))));
    return vbslq_f32(vcltq_f32(ax, vdupq_n_f32(0.625f)), small, big_s);
}

// ---- conversions ---------------------------------------------------------------------------------

inline float32x4_t f16x4_to_f32(const uint16_t * p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
inline float32x4_t bf16x4_to_f32(const uint16_t * p) { return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16)); }

inline float f16_to_f32_scalar(uint16_t h) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))), 0);
}

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
            for (; i + VL <= n; i += VL) vst1q_f32(dst + i, vld1q_f32(s + i));
            for (; i < n; ++i) dst[i] = s[i];
            break;
        }
        case GGML_TYPE_F16: {
            const uint16_t * s = (const uint16_t *) src;
            for (; i + VL <= n; i += VL) vst1q_f32(dst + i, f16x4_to_f32(s + i));
            for (; i < n; ++i) dst[i] = f16_to_f32_scalar(s[i]);
            break;
        }
        case GGML_TYPE_BF16: {
            const uint16_t * s = (const uint16_t *) src;
            for (; i + VL <= n; i += VL) vst1q_f32(dst + i, bf16x4_to_f32(s + i));
            for (; i < n; ++i) dst[i] = bf16_to_f32_scalar(s[i]);
            break;
        }
        default: GGML_ABORT("flash_attn_ext: unsupported type %d", (int) type);
    }
    for (; i < pad; ++i) dst[i] = 0.0f;
}

// r[k] (4 rows of 4) -> r[k] = column k
inline void transpose4(float32x4_t (&r)[4]) {
    const float32x4_t t0 = vtrn1q_f32(r[0], r[1]); // r0[0] r1[0] r0[2] r1[2]
    const float32x4_t t1 = vtrn2q_f32(r[0], r[1]); // r0[1] r1[1] r0[3] r1[3]
    const float32x4_t t2 = vtrn1q_f32(r[2], r[3]);
    const float32x4_t t3 = vtrn2q_f32(r[2], r[3]);
    r[0] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
    r[1] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
    r[2] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
    r[3] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
}

// ---- micro-kernels -------------------------------------------------------------------------------

// One dim d + L of the score micro-tile: acc[r][c] += K[r][d + L] * Qt[d + L][c], K[r][d..d+3] in kv[r].
template <int QV, int L>
inline void score_dim(float32x4_t (&acc)[NJ][QV], const float32x4_t (&kv)[NJ], const float * qrow) {
    for (int c = 0; c < QV; ++c) {
        const float32x4_t q = vld1q_f32(qrow + VL * c);
        acc[0][c]           = vfmaq_laneq_f32(acc[0][c], q, kv[0], L);
        acc[1][c]           = vfmaq_laneq_f32(acc[1][c], q, kv[1], L);
        acc[2][c]           = vfmaq_laneq_f32(acc[2][c], q, kv[2], L);
        acc[3][c]           = vfmaq_laneq_f32(acc[3][c], q, kv[3], L);
    }
}

// St[j0 + r][...] = sum_d K[j0 + r][d] * Qt[d][...] for r < NJ (d ascending, one FMA each);
// bm: running max over the rows < kb (rows past kb are the zero row's scores, stored, never maxed).
template <int QV>
inline void score_tile(const float * const * kr, const float * qt, int64_t D, float * st, int64_t j0, int64_t kb,
                       float32x4_t * bm) {
    constexpr int64_t QBS = QV * VL;
    float32x4_t       acc[NJ][QV];
    for (int r = 0; r < NJ; ++r)
        for (int c = 0; c < QV; ++c) acc[r][c] = vdupq_n_f32(0.0f);
    const float * k[NJ] = {kr[j0 + 0], kr[j0 + 1], kr[j0 + 2], kr[j0 + 3]};
    const int64_t D4    = D / 4 * 4; // K rows are read 4 dims at a time only within the row
    int64_t       d     = 0;
    for (; d < D4; d += 4) {
        const float32x4_t kv[NJ] = {vld1q_f32(k[0] + d), vld1q_f32(k[1] + d), vld1q_f32(k[2] + d), vld1q_f32(k[3] + d)};
        const float *     q      = qt + d * QBS;
        score_dim<QV, 0>(acc, kv, q);
        score_dim<QV, 1>(acc, kv, q + QBS);
        score_dim<QV, 2>(acc, kv, q + 2 * QBS);
        score_dim<QV, 3>(acc, kv, q + 3 * QBS);
    }
    for (; d < D; ++d) {
        const float32x4_t kv[NJ] = {vld1q_dup_f32(k[0] + d), vld1q_dup_f32(k[1] + d), vld1q_dup_f32(k[2] + d),
                                    vld1q_dup_f32(k[3] + d)};
        score_dim<QV, 0>(acc, kv, qt + d * QBS);
    }
    for (int r = 0; r < NJ; ++r)
        for (int c = 0; c < QV; ++c) vst1q_f32(st + (j0 + r) * QBS + VL * c, acc[r][c]);
    for (int r = 0; r < NJ; ++r)
        if (j0 + r < kb)
            for (int c = 0; c < QV; ++c) bm[c] = vmaxq_f32(bm[c], acc[r][c]);
}

// Ot[d0 + r][...] = Ot[d0 + r][...] * corr + sum_j V[j][d0 + r] * P[j][...] for r < ND (j ascending)
template <int QV>
inline void value_tile(const float * const * vr, const float * pt, int64_t kbp, float * ot, const float32x4_t * corr,
                       int64_t d0) {
    constexpr int64_t QBS = QV * VL;
    float32x4_t       acc[ND][QV];
    for (int r = 0; r < ND; ++r)
        for (int c = 0; c < QV; ++c) acc[r][c] = vmulq_f32(vld1q_f32(ot + (d0 + r) * QBS + VL * c), corr[c]);
    for (int64_t j = 0; j < kbp; ++j) {
        const float32x4_t v = vld1q_f32(vr[j] + d0);
        const float *     p = pt + j * QBS;
        for (int c = 0; c < QV; ++c) {
            const float32x4_t pc = vld1q_f32(p + VL * c);
            acc[0][c]            = vfmaq_laneq_f32(acc[0][c], pc, v, 0);
            acc[1][c]            = vfmaq_laneq_f32(acc[1][c], pc, v, 1);
            acc[2][c]            = vfmaq_laneq_f32(acc[2][c], pc, v, 2);
            acc[3][c]            = vfmaq_laneq_f32(acc[3][c], pc, v, 3);
        }
    }
    for (int r = 0; r < ND; ++r)
        for (int c = 0; c < QV; ++c) vst1q_f32(ot + (d0 + r) * QBS + VL * c, acc[r][c]);
}

// every cache line of n rows of `bytes` bytes, `stride` apart, towards L2: the next block's K/V
// rows come from L3 or memory and are read once per chunk of tiles
inline void prefetch_rows(const char * p, size_t stride, int64_t n, int64_t bytes) {
    for (int64_t j = 0; j < n; ++j, p += stride)
        for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b, 0, 2);
}

// ---- the op ---------------------------------------------------------------------------------------

// slope * mask of queries [iq0, iq0 + nq) and kv rows [j0, j0 + kb), transposed into mt[j][i]
// (lanes nq..QBS get -inf: they never see anything). Returns whether any entry is visible.
template <int QV>
bool build_mask(const fa_args & a, const char * mbase, float slope, int64_t iq0, int64_t nq, int64_t j0, int64_t kb,
                float * mt, float * tmp) {
    constexpr int64_t QBS  = QV * VL;
    const float32x4_t ninf = vdupq_n_f32(-INFINITY);
    const float32x4_t vs   = vdupq_n_f32(slope);
    const bool        f16  = a.mask->type == GGML_TYPE_F16;
    uint32x4_t        vis  = vdupq_n_u32(0); // any lane != -inf (NaN counts as visible)
    const int64_t     kb4  = kb / VL * VL;
    for (int c = 0; c < QV; ++c) {
        const char * rows[VL];
        for (int k = 0; k < VL; ++k) {
            const int64_t i = VL * c + k;
            rows[k]         = i < nq ? mbase + (iq0 + i) * a.mask->nb[1] : nullptr;
        }
        // 4 x 4 blocks: 4 queries' rows converted, transposed in registers
        for (int64_t j = 0; j < kb4; j += VL) {
            float32x4_t r[VL];
            for (int k = 0; k < VL; ++k) {
                if (!rows[k]) {
                    r[k] = ninf;
                } else if (f16) {
                    r[k] = vmulq_f32(vs, f16x4_to_f32((const uint16_t *) rows[k] + j0 + j));
                } else {
                    r[k] = vmulq_f32(vs, vld1q_f32((const float *) rows[k] + j0 + j));
                }
            }
            transpose4(r);
            for (int k = 0; k < VL; ++k) {
                vst1q_f32(mt + (j + k) * QBS + VL * c, r[k]);
                vis = vorrq_u32(vis, vmvnq_u32(vceqq_f32(r[k], ninf)));
            }
        }
        // the last kb % 4 rows one element at a time
        for (int64_t j = kb4; j < kb; ++j) {
            for (int k = 0; k < VL; ++k) {
                float m = -INFINITY;
                if (rows[k]) {
                    m = f16 ? f16_to_f32_scalar(((const uint16_t *) rows[k])[j0 + j]) : ((const float *) rows[k])[j0 + j];
                    m = slope * m;
                }
                tmp[k] = m;
            }
            const float32x4_t x = vld1q_f32(tmp);
            vst1q_f32(mt + j * QBS + VL * c, x);
            vis = vorrq_u32(vis, vmvnq_u32(vceqq_f32(x, ninf)));
        }
    }
    return vmaxvq_u32(vis) != 0;
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
            vst1q_f32(mx + VL * c, vdupq_n_f32(-INFINITY));
            vst1q_f32(sm + VL * c, vdupq_n_f32(0.0f));
        }
        mbases[g] = a.mask ? (const char *) a.mask->data + (h % a.mask->ne[2]) * a.mask->nb[2] + (s % a.mask->ne[3]) * a.mask->nb[3]
                           : nullptr;
        slopes[g] = a.mask ? alibi_slope(a.max_bias, h, a.n_head) : 1.0f;
    }

    const char *      kbase   = (const char *) a.k->data + (t[0].h / a.rk2) * a.k->nb[2] + (t[0].s / a.rk3) * a.k->nb[3];
    const char *      vbase   = (const char *) a.v->data + (t[0].h / a.rv2) * a.v->nb[2] + (t[0].s / a.rv3) * a.v->nb[3];
    const bool        softcap = a.softcap != 0.0f;
    const float32x4_t vcap    = vdupq_n_f32(a.softcap);
    const float32x4_t vicap   = vdupq_n_f32(softcap ? 1.0f / a.softcap : 0.0f);
    // Without mask and softcap (and scale > 0, so max of scale * s = scale * max of s) the scores
    // stay raw: the score kernel's running max gives the block max, and the scale goes into the
    // exponent's argument, s * scale - m in one FMA. Otherwise one pass writes the logits first.
    const bool        raw    = !a.mask && !softcap && a.scale > 0.0f;
    const float32x4_t vscale = vdupq_n_f32(a.scale);
    const float32x4_t escale = raw ? vscale : vdupq_n_f32(1.0f);
    const float32x4_t ninf   = vdupq_n_f32(-INFINITY);

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
            float32x4_t bm[QV];
            for (int c = 0; c < QV; ++c) bm[c] = ninf;
            for (int64_t j = 0; j < kbp; j += NJ) score_tile<QV>(kr, qts[g], D, st, j, kb, bm);

            // scores -> probabilities, online softmax per lane (query)
            float32x4_t corr[QV];
            bool        live = false;
            for (int c = 0; c < QV; ++c) {
                if (raw) {
                    bm[c] = vmulq_f32(bm[c], vscale);
                } else {
                    bm[c] = ninf;
                    for (int64_t j = 0; j < kb; ++j) {
                        float *     p = st + j * QBS + VL * c;
                        float32x4_t x = keep(vmulq_f32(vld1q_f32(p), vscale));
                        if (softcap) x = keep(vmulq_f32(vcap, tanh_v(vmulq_f32(x, vicap))));
                        if (mbases[g]) x = vaddq_f32(x, vld1q_f32(mt + j * QBS + VL * c));
                        vst1q_f32(p, x);
                        bm[c] = vmaxq_f32(bm[c], x);
                    }
                }
                const float32x4_t mold = vld1q_f32(mx + VL * c);
                const float32x4_t mnew = vmaxq_f32(mold, bm[c]);
                const uint32x4_t  dead = vceqq_f32(mnew, ninf);
                live |= vminvq_u32(dead) == 0;
                // lanes that have seen nothing yet use 0 as the max: all their exps are of -inf -> 0
                const float32x4_t muse  = vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(mnew), dead));
                const float32x4_t nmuse = vnegq_f32(muse);
                corr[c]                 = exp_nonpos(vsubq_f32(mold, muse));
                float32x4_t lsum        = vdupq_n_f32(0.0f);
                for (int64_t j = 0; j < kb; ++j) {
                    float *           p = st + j * QBS + VL * c;
                    const float32x4_t e = exp_nonpos(vfmaq_f32(nmuse, vld1q_f32(p), escale)); // p * escale - muse, fused
                    vst1q_f32(p, e);
                    lsum = vaddq_f32(lsum, e);
                }
                for (int64_t j = kb; j < kbp; ++j) vst1q_f32(st + j * QBS + VL * c, vdupq_n_f32(0.0f));
                vst1q_f32(mx + VL * c, mnew);
                vst1q_f32(sm + VL * c, vfmaq_f32(lsum, vld1q_f32(sm + VL * c), corr[c]));
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
                    r = m == -INFINITY ? 0.0f : std::exp(m - sv);
                    sum *= r;
                    m = sv;
                }
                sum += std::exp(sv - m);
            }
            inv[i] = sum > 0.0f ? r / sum : 0.0f;
        }
        auto out_row = [&](int64_t i) {
            return (float *) ((char *) a.dst->data + h * a.dst->nb[1] + (iq0 + i) * a.dst->nb[2] + s * a.dst->nb[3]);
        };
        // Ot is dims x queries: 4 x 4 blocks transposed in registers; dims past the last full 4 one by one
        const int64_t dv4 = Dv / VL * VL;
        for (int64_t i0 = 0; i0 < nq; i0 += VL) {
            const int64_t ni = min_i(VL, nq - i0);
            for (int64_t d0 = 0; d0 < dv4; d0 += VL) {
                float32x4_t r[VL];
                for (int k = 0; k < VL; ++k) r[k] = vld1q_f32(ot + (d0 + k) * QBS + i0);
                transpose4(r);
                for (int64_t k = 0; k < ni; ++k) vst1q_f32(out_row(i0 + k) + d0, vmulq_f32(r[k], vdupq_n_f32(inv[i0 + k])));
            }
        }
        for (int64_t i = 0; i < nq; ++i) {
            float * out = out_row(i);
            for (int64_t d = dv4; d < Dv; ++d) out[d] = ot[d * QBS + i] * inv[i];
        }
    }
}

} // namespace

size_t ggml_neon_flash_attn_floats(int64_t D, int64_t Dv) { return (size_t) make_layout(D, Dv).total; }

void ggml_neon_flash_attn_ext(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const fa_args a = fa_args_of(dst, ND);

    const layout l   = make_layout(a.D, a.Dv);
    const int    ith = params->ith;
    float *      ws  = (float *) (((uintptr_t) params->wdata + 63) & ~(uintptr_t) 63) + (size_t) ith * (size_t) l.total;
    // the zero row stands in for K/V rows past the end of a short block (P is 0 there, but 0 times
    // whatever an earlier node left in the work buffer could be NaN)
    memset(ws + l.off_zero, 0, (size_t) l.ltmp * sizeof(float));

    fa_for_each_chunk<VL, QBS_MAX, G_MAX>(params, a, [&](const fa_tile * t, int ng, int qv) {
        switch (qv) {
            case 4: run_chunk<4>(a, l, ws, t, ng); break;
            case 3: run_chunk<3>(a, l, ws, t, ng); break;
            case 2: run_chunk<2>(a, l, ws, t, ng); break;
            default: run_chunk<1>(a, l, ws, t, ng); break;
        }
    });
}

#else // not AArch64: the level never allows neon there

size_t ggml_neon_flash_attn_floats(int64_t, int64_t) { return 0; }
void   ggml_neon_flash_attn_ext(const struct ggml_compute_params *, struct ggml_tensor *) { GGML_ABORT("no AArch64 build"); }

#endif
