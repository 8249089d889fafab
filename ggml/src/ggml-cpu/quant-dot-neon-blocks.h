#pragma once

// quant-dot-neon-blocks.h — the pieces the AArch64 quantized-MUL_MAT tiles share (included by
// quant-dot-fast-neon.cpp, -dotprod.cpp and -i8mm.cpp only; interface: quant-dot-fast.h):
//  - per weight type a decoder that turns 32 elements ("a chunk") of a block into 32 int8 values
//    v with the reference's integer sum = sum_j sc_j * sum_{e in sub-block j} v_e a_e (Q4_0 / Q5_0:
//    v = q - 8 / q - 16; Q6_K: v = q - 32; the others v = q), plus the block's scales;
//  - a row x column engine (tile_rc) templated on the int8 product (vmull_s8 + vpadalq_s16 at the
//    neon level, SDOT at the dotprod level), with the F32 part done 4 columns at a time.
// Everything is in an anonymous namespace: each level's file compiles its own copy with its own
// -march (cmake/arm-kernel-flags.cmake), so no function compiled for a higher level can be picked
// by the linker for a lower level's file.
//
// Exactness: every product v * a is at most 128 * 128 in magnitude and every int32 partial sum is
// a partial sum of the reference's int sumi, so the integer block sums equal vec_dot_ref's; only
// the F32 scaling and summation order differ (bound: tests/test-quant-dot.cpp).

#if defined(__aarch64__)

#include "formats/ggml-common.h"
#include "../ggml-impl.h"

#include <arm_neon.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace {

inline float nb_h2f(ggml_fp16_t h) { return ggml_fp16_to_fp32(h); }

enum class dot_kind {
    sym,    // sum += d_w d_a sumi (one 32-element block)
    affine, // sum += d_w d_a sumi + m_w s_a (one 32-element block, Q8_1 activations)
    k_min,  // per 256: d_w d_a sum_j sc_j dot_j - dmin d_a sum_j mn_j asum_j (32-element sub-blocks)
    k_16,   // per 256: d_w d_a sum_j sc_j dot_j over 16-element sub-blocks (Q6_K)
};

// the 5th bit of Q5_0 / Q5_1 elements 16 h .. 16 h + 15 (bit e of qh), moved to bit 4 of each byte
inline uint8x16_t q5_high_bits(const uint8_t * qh4, int h) {
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    const uint8x16_t bytes = vreinterpretq_u8_u32(vdupq_n_u32(qh));
    static const uint8_t idx[2][16] = {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
                                       {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3}};
    static const uint8_t bit[16]    = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t     b          = vqtbl1q_u8(bytes, vld1q_u8(idx[h]));
    return vandq_u8(vtstq_u8(b, vld1q_u8(bit)), vdupq_n_u8(0x10));
}

// ---------------------------------------------------------------------------------------------
// Decoders. chunk(s, j, lo, hi): elements 32 j .. 32 j + 31 of the block (lo: the first 16).

struct dec_q8_0 {
    using W = block_q8_0;
    using A = block_q8_0;
    static constexpr int      QK = 32, CHUNKS = 1;
    static constexpr dot_kind KIND = dot_kind::sym;
    static constexpr bool     WIDE = true; // |v| up to 128: two products may not share an int16
    struct row {
        const W * b;
        float     d;
    };
    static void load(const W * b, row & s) { s.b = b; s.d = nb_h2f(b->d); }
    static void chunk(const row & s, int, int8x16_t & lo, int8x16_t & hi) {
        lo = vld1q_s8(s.b->qs);
        hi = vld1q_s8(s.b->qs + 16);
    }
};

struct dec_q4_0 {
    using W = block_q4_0;
    using A = block_q8_0;
    static constexpr int      QK = 32, CHUNKS = 1;
    static constexpr dot_kind KIND = dot_kind::sym;
    static constexpr bool     WIDE = false;
    struct row {
        const W * b;
        float     d;
    };
    static void load(const W * b, row & s) { s.b = b; s.d = nb_h2f(b->d); }
    static void chunk(const row & s, int, int8x16_t & lo, int8x16_t & hi) {
        const uint8x16_t v = vld1q_u8(s.b->qs);
        lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), vdupq_n_s8(8));
        hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), vdupq_n_s8(8));
    }
};

struct dec_q5_0 {
    using W = block_q5_0;
    using A = block_q8_0;
    static constexpr int      QK = 32, CHUNKS = 1;
    static constexpr dot_kind KIND = dot_kind::sym;
    static constexpr bool     WIDE = false;
    struct row {
        const W * b;
        float     d;
    };
    static void load(const W * b, row & s) { s.b = b; s.d = nb_h2f(b->d); }
    static void chunk(const row & s, int, int8x16_t & lo, int8x16_t & hi) {
        const uint8x16_t v = vld1q_u8(s.b->qs);
        lo = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0F)), q5_high_bits(s.b->qh, 0))), vdupq_n_s8(16));
        hi = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), q5_high_bits(s.b->qh, 1))), vdupq_n_s8(16));
    }
};

struct dec_q4_1 {
    using W = block_q4_1;
    using A = block_q8_1;
    static constexpr int      QK = 32, CHUNKS = 1;
    static constexpr dot_kind KIND = dot_kind::affine;
    static constexpr bool     WIDE = false;
    struct row {
        const W * b;
        float     d, m;
    };
    static void load(const W * b, row & s) { s.b = b; s.d = nb_h2f(b->d); s.m = nb_h2f(b->m); }
    static void chunk(const row & s, int, int8x16_t & lo, int8x16_t & hi) {
        const uint8x16_t v = vld1q_u8(s.b->qs);
        lo = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F)));
        hi = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
    }
};

struct dec_q5_1 {
    using W = block_q5_1;
    using A = block_q8_1;
    static constexpr int      QK = 32, CHUNKS = 1;
    static constexpr dot_kind KIND = dot_kind::affine;
    static constexpr bool     WIDE = false;
    struct row {
        const W * b;
        float     d, m;
    };
    static void load(const W * b, row & s) { s.b = b; s.d = nb_h2f(b->d); s.m = nb_h2f(b->m); }
    static void chunk(const row & s, int, int8x16_t & lo, int8x16_t & hi) {
        const uint8x16_t v = vld1q_u8(s.b->qs);
        lo = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(v, vdupq_n_u8(0x0F)), q5_high_bits(s.b->qh, 0)));
        hi = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(v, 4), q5_high_bits(s.b->qh, 1)));
    }
};

// Q4_K / Q5_K 12-byte scales: bytes 0-3 the low 6 bits of sc 0-3 (top 2 bits: high bits of sc 4-7),
// bytes 4-7 the same for the mins, bytes 8-11 the low 4 bits of sc 4-7 (low nibble) and m 4-7 (high)
inline void nb_k_scales_mins(const uint8_t * s12, uint8_t sc[8], uint8_t mn[8]) {
    uint32_t v[3];
    memcpy(v, s12, 12);
    const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    const uint32_t s_lo = v[0] & m6, m_lo = v[1] & m6;
    const uint32_t s_hi = (v[2] & m4) | (((v[0] >> 6) & m2) << 4);
    const uint32_t m_hi = ((v[2] >> 4) & m4) | (((v[1] >> 6) & m2) << 4);
    memcpy(sc, &s_lo, 4);
    memcpy(sc + 4, &s_hi, 4);
    memcpy(mn, &m_lo, 4);
    memcpy(mn + 4, &m_hi, 4);
}

// Q4_K (FIVE false) / Q5_K: chunk j = the low (j even) or high (j odd) nibbles of qs[32 (j / 2) ..],
// Q5_K's fifth bit of chunk element l is bit j of qh[l]
template <bool FIVE> struct dec_k_min {
    using W = typename std::conditional<FIVE, block_q5_K, block_q4_K>::type;
    using A = block_q8_K;
    static constexpr int      QK = QK_K, CHUNKS = 8;
    static constexpr dot_kind KIND = dot_kind::k_min;
    static constexpr bool     WIDE = false;
    struct row {
        const W * b;
        float     d, dmin;
        int32_t   sc[8];
        int16x8_t mn; // the 8 mins as int16
    };
    static void load(const W * b, row & s) {
        s.b    = b;
        s.d    = nb_h2f(b->d);
        s.dmin = nb_h2f(b->dmin);
        uint8_t sc[8], mn[8];
        nb_k_scales_mins(b->scales, sc, mn);
        for (int j = 0; j < 8; ++j) s.sc[j] = sc[j];
        s.mn = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn)));
    }
    static void chunk(const row & s, int j, int8x16_t & lo, int8x16_t & hi) {
        const uint8_t * q  = s.b->qs + 32 * (j / 2);
        uint8x16_t      l  = vld1q_u8(q), h = vld1q_u8(q + 16);
        if (j & 1) {
            l = vshrq_n_u8(l, 4);
            h = vshrq_n_u8(h, 4);
        } else {
            l = vandq_u8(l, vdupq_n_u8(0x0F));
            h = vandq_u8(h, vdupq_n_u8(0x0F));
        }
        if constexpr (FIVE) {
            const uint8x16_t bitj = vdupq_n_u8((uint8_t) (1u << j)), b4 = vdupq_n_u8(0x10);
            l = vorrq_u8(l, vandq_u8(vtstq_u8(vld1q_u8(s.b->qh), bitj), b4));
            h = vorrq_u8(h, vandq_u8(vtstq_u8(vld1q_u8(s.b->qh + 16), bitj), b4));
        }
        lo = vreinterpretq_s8_u8(l);
        hi = vreinterpretq_s8_u8(h);
    }
    // sum_j mn_j (bsums[2j] + bsums[2j + 1]) as 4 int32 lanes (exact: |bsum pair| <= 32 * 128)
    static int32x4_t min_sums(const row & s, const A * a) {
        const int16x8_t pairs = vpaddq_s16(vld1q_s16(a->bsums), vld1q_s16(a->bsums + 8));
        return vmlal_high_s16(vmull_s16(vget_low_s16(pairs), vget_low_s16(s.mn)), pairs, s.mn);
    }
};
using dec_q4_K = dec_k_min<false>;
using dec_q5_K = dec_k_min<true>;

// Q6_K: chunk idx = 4h + g is elements 128h + 32g + l: low 4 bits from ql[64h + 32 (g & 1) + l]
// (low nibble for g < 2), the top 2 from bits 2g, 2g + 1 of qh[32h + l]; v = q - 32. Its halves are
// sub-blocks 2 idx and 2 idx + 1.
struct dec_q6_K {
    using W = block_q6_K;
    using A = block_q8_K;
    static constexpr int      QK = QK_K, CHUNKS = 8;
    static constexpr dot_kind KIND = dot_kind::k_16;
    static constexpr bool     WIDE = false;
    struct row {
        const W * b;
        float     d;
    };
    static void load(const W * b, row & s) { s.b = b; s.d = nb_h2f(b->d); }
    static int32_t scale(const row & s, int sub) { return s.b->scales[sub]; }
    static void chunk(const row & s, int idx, int8x16_t & lo, int8x16_t & hi) {
        const int       h = idx / 4, g = idx % 4;
        const uint8_t * ql = s.b->ql + 64 * h + 32 * (g & 1);
        const uint8_t * qh = s.b->qh + 32 * h;
        uint8x16_t      l = vld1q_u8(ql), u = vld1q_u8(ql + 16);
        if (g >= 2) {
            l = vshrq_n_u8(l, 4);
            u = vshrq_n_u8(u, 4);
        } else {
            l = vandq_u8(l, vdupq_n_u8(0x0F));
            u = vandq_u8(u, vdupq_n_u8(0x0F));
        }
        const int8x16_t  sh  = vdupq_n_s8((int8_t) -(2 * g));
        const uint8x16_t m3  = vdupq_n_u8(3);
        const uint8x16_t hl  = vshlq_n_u8(vandq_u8(vshlq_u8(vld1q_u8(qh), sh), m3), 4);
        const uint8x16_t hu  = vshlq_n_u8(vandq_u8(vshlq_u8(vld1q_u8(qh + 16), sh), m3), 4);
        lo = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(l, hl)), vdupq_n_s8(32));
        hi = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(u, hu)), vdupq_n_s8(32));
    }
};

// activation block accessors
inline const int8_t * act_qs(const block_q8_0 * a) { return a->qs; }
inline const int8_t * act_qs(const block_q8_1 * a) { return a->qs; }
inline const int8_t * act_qs(const block_q8_K * a) { return a->qs; }
inline float          act_d(const block_q8_0 * a) { return nb_h2f(a->d); }
inline float          act_d(const block_q8_1 * a) { return nb_h2f(a->d); }
inline float          act_d(const block_q8_K * a) { return a->d; }
inline float          act_s(const block_q8_1 * a) { return nb_h2f(a->s); }
inline float          act_s(const block_q8_0 *) { return 0.0f; }
inline float          act_s(const block_q8_K *) { return 0.0f; }

// lanes (sum v0, sum v1, sum v2, sum v3), exact
inline int32x4_t reduce4(int32x4_t v0, int32x4_t v1, int32x4_t v2, int32x4_t v3) {
    return vpaddq_s32(vpaddq_s32(v0, v1), vpaddq_s32(v2, v3));
}

// ---------------------------------------------------------------------------------------------
// The row x column engine. P (the level's product) provides
//   dot32(acc, wlo, whi, alo, ahi) / dot16(acc, w, a): acc + the int32 lane sums of the products,
//   templated on D::WIDE where the formulation depends on the weights' range.
// A tile is R weight rows (clamped: rows past nr repeat the last row and are not stored) x C <= 4
// activation rows. The decoded chunk of each row is shared by the C columns, each activation chunk
// by the R rows. At the end of a block each row's C int32x4 sums become one vector of C lanes
// (reduce4), so the F32 part (convert, scale, FMA) runs once per row and 4 columns.

template <class D, class P, int R, int C>
void tile_rc(int64_t nblk, const char * w, size_t ws, int nr, const char * x, size_t xs, float * out, size_t ldo) {
    using W = typename D::W;
    using A = typename D::A;
    static_assert(C >= 1 && C <= 4, "columns per tile");
    const W * wrow[R];
    for (int r = 0; r < R; ++r) wrow[r] = (const W *) (w + (r < nr ? r : nr - 1) * ws);
    const A * xrow[C];
    for (int c = 0; c < C; ++c) xrow[c] = (const A *) (x + c * xs);
    float32x4_t acc[R];
    for (int r = 0; r < R; ++r) acc[r] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < nblk; ++i) {
        typename D::row wr[R];
        for (int r = 0; r < R; ++r) D::load(wrow[r] + i, wr[r]);
        const A * xb[C];
        for (int c = 0; c < C; ++c) xb[c] = xrow[c] + i;
        int32x4_t isum[R][4];
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < 4; ++c) isum[r][c] = vdupq_n_s32(0);
        for (int j = 0; j < D::CHUNKS; ++j) {
            int8x16_t wlo[R], whi[R];
            for (int r = 0; r < R; ++r) D::chunk(wr[r], j, wlo[r], whi[r]);
            for (int c = 0; c < C; ++c) {
                const int8x16_t alo = vld1q_s8(act_qs(xb[c]) + 32 * j);
                const int8x16_t ahi = vld1q_s8(act_qs(xb[c]) + 32 * j + 16);
                for (int r = 0; r < R; ++r) {
                    if constexpr (D::KIND == dot_kind::sym || D::KIND == dot_kind::affine) {
                        isum[r][c] = P::template dot32<D::WIDE>(isum[r][c], wlo[r], whi[r], alo, ahi);
                    } else if constexpr (D::KIND == dot_kind::k_min) {
                        const int32x4_t d = P::template dot32<D::WIDE>(vdupq_n_s32(0), wlo[r], whi[r], alo, ahi);
                        isum[r][c]        = vmlaq_n_s32(isum[r][c], d, wr[r].sc[j]);
                    } else {
                        const int32x4_t dl = P::template dot16<D::WIDE>(vdupq_n_s32(0), wlo[r], alo);
                        const int32x4_t dh = P::template dot16<D::WIDE>(vdupq_n_s32(0), whi[r], ahi);
                        isum[r][c]         = vmlaq_n_s32(isum[r][c], dl, D::scale(wr[r], 2 * j));
                        isum[r][c]         = vmlaq_n_s32(isum[r][c], dh, D::scale(wr[r], 2 * j + 1));
                    }
                }
            }
        }
        // the F32 part, 4 columns per vector
        float da_s[4] = {0, 0, 0, 0}, sa_s[4] = {0, 0, 0, 0};
        for (int c = 0; c < C; ++c) {
            da_s[c] = act_d(xb[c]);
            if constexpr (D::KIND == dot_kind::affine) sa_s[c] = act_s(xb[c]);
        }
        const float32x4_t da = vld1q_f32(da_s);
        for (int r = 0; r < R; ++r) {
            const int32x4_t sumi = reduce4(isum[r][0], isum[r][1], isum[r][2], isum[r][3]);
            acc[r]               = vfmaq_f32(acc[r], vcvtq_f32_s32(sumi), vmulq_n_f32(da, wr[r].d));
            if constexpr (D::KIND == dot_kind::affine) acc[r] = vfmaq_n_f32(acc[r], vld1q_f32(sa_s), wr[r].m);
            if constexpr (D::KIND == dot_kind::k_min) {
                int32x4_t ms[4];
                for (int c = 0; c < 4; ++c) ms[c] = c < C ? D::min_sums(wr[r], xb[c]) : vdupq_n_s32(0);
                const int32x4_t summ = reduce4(ms[0], ms[1], ms[2], ms[3]);
                acc[r]               = vfmaq_f32(acc[r], vcvtq_f32_s32(summ), vmulq_n_f32(da, -wr[r].dmin));
            }
        }
    }
    for (int r = 0; r < R && r < nr; ++r) {
        float v[4];
        vst1q_f32(v, acc[r]);
        for (int c = 0; c < C; ++c) out[c * ldo + r] = v[c];
    }
}

#if defined(__ARM_FEATURE_DOTPROD)
// SDOT: 4 int8 x int8 products added into each int32 lane, exact for every byte pair (the
// dotprod level's product; the i8mm level uses it too for single activation rows)
struct prod_sdot {
    template <bool> static int32x4_t dot16(int32x4_t acc, int8x16_t w, int8x16_t a) { return vdotq_s32(acc, w, a); }
    template <bool> static int32x4_t dot32(int32x4_t acc, int8x16_t wlo, int8x16_t whi, int8x16_t alo, int8x16_t ahi) {
        return vdotq_s32(vdotq_s32(acc, wlo, alo), whi, ahi);
    }
};
#endif

// All of a call's tiles: R-row panels outermost (their weights stay in L1 while the columns pass),
// 4 columns at a time, then single columns for the rest.
template <class D, class P, int R>
void run_rc(int64_t K, const char * w, size_t ws, int nr, const char * x, size_t xs, int nc, float * out, size_t ldo) {
    const int64_t nblk = K / D::QK;
    for (int r0 = 0; r0 < nr; r0 += R) {
        const int rr = nr - r0 < R ? nr - r0 : R;
        int       c0 = 0;
        for (; c0 + 4 <= nc; c0 += 4) tile_rc<D, P, R, 4>(nblk, w + r0 * ws, ws, rr, x + c0 * xs, xs, out + c0 * ldo + r0, ldo);
        switch (nc - c0) {
            case 3: tile_rc<D, P, R, 3>(nblk, w + r0 * ws, ws, rr, x + c0 * xs, xs, out + c0 * ldo + r0, ldo); break;
            case 2: tile_rc<D, P, R, 2>(nblk, w + r0 * ws, ws, rr, x + c0 * xs, xs, out + c0 * ldo + r0, ldo); break;
            case 1: tile_rc<D, P, R, 1>(nblk, w + r0 * ws, ws, rr, x + c0 * xs, xs, out + c0 * ldo + r0, ldo); break;
            default: break;
        }
    }
}

} // namespace

#endif // __aarch64__
