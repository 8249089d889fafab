// quant-dot-fast-avx2.cpp — AVX2 tiles for MUL_MAT with Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, Q4_K, Q5_K and
// Q6_K weights (interface: quant-dot-fast.h). Activations arrive quantized by the reference
// quantizer (Q8_0 blocks for Q8_0/Q4_0/Q5_0, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants); every
// integer block sum here equals vec_dot_ref's, only the F32 scaling and summation order differ.
//
// AVX2 has no vpdpbusd. Its byte product is vpmaddubsw (unsigned x signed bytes, adjacent pairs added
// into SATURATING int16), then vpmaddwd widens to int32. The pair sum is exact only while it fits
// int16, which decides each type's formulation (every bound below holds for any stored bits and any
// activation byte, -128 included):
//  - 4/5/6-bit weights: stored quants q are unsigned (0..15 / 31 / 63), so vpmaddubsw(q, a) pairs
//    are at most 2 * 63 * 128 = 16128.
//  - Q5_0 (x = d (q - OFF)): the offset is subtracted from those pair sums per activation block
//    (vpmaddubsw(OFF, a), computed once per activation block and shared by the tile's rows):
//    |pair (q - OFF) a| <= 2 * 16 * 128, no wrap.
//  - Q4_0: the "panel" tiles (weight rows in the vector lanes, see there) add the vpmaddubsw(q, a)
//    pairs (<= 2 * 15 * 128) of a whole block in int16 and subtract 8 sum(a) per block.
//  - Q8_0 (signed x signed): vpmaddubsw(|w|, sign(a, w)). |w| <= 128 fits an unsigned byte (even
//    for w = -128) and sign(a, w) = +-a is exact for a in [-127, 127], so pairs stay within
//    2 * 128 * 127 = 32512. The reference quantizer never writes -128 (|x / d| <= 127), but a
//    crafted activation block can; the repack flags such rows and tiles that contain one take an
//    exact vpmaddwd (int16) path instead.
//  - K-quants: the int16 pair sums of a 32-element chunk are multiplied by the chunk's integer
//    sub-block scale with vpmaddwd (|lane| <= 2 * 16128 * 128) and summed over the super-block in
//    int32; the F32 scales d_w * d_a (and dmin for the mins) are applied once per 256 elements.
// A micro-tile of R weight rows x C activation rows keeps its R*C accumulators in the 16 ymm
// registers; the weight unpacking (nibbles, high bits, scales) is done once per row and shared by
// the C columns, the activation's per-block work once per column and shared by the R rows.

#include "quant-dot-fast.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include "formats/ggml-common.h"
#include "cpu-isa.h"

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

// Micro-tile shapes (weight rows x activation rows), chosen by thread CPU time of the tiles alone on
// a loaded 2-core Zen 3 (K 3072, 256 x 256 outputs in ops-mul-mat-quant's 16 x 64 blocks, one
// thread; the same run's F32 mul_mat 79-84 GFLOP/s): Q4_K 1x8 ~100 (2x4 80, 2x5 82, 2x6 77, 3x4 77:
// a K-quant row's per-super-block unpacking of scales and mins is shared by more columns); Q6_K 1x8
// ~108 best (2x4 ~98, 2x6 ~90, 3x4 ~92, same runs; all with one running int32 sum per accumulator,
// see keep_in_register). The Q4_0 shape also serves Q5_0, Q4_1 and Q5_1; Q4_0 and Q8_0 themselves
// run the panel tiles (QMM2_PANEL_*).
#ifndef QMM2_Q4_0_TR
#define QMM2_Q4_0_TR 2
#define QMM2_Q4_0_TC 4
#define QMM2_K_TR 1
#define QMM2_K_TC 8
#define QMM2_Q6_K_TR 1
#define QMM2_Q6_K_TC 8
#endif

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace {

inline float h2f(ggml_fp16_t h) { return _cvtsh_ss(h); }

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s        = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s        = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// An empty asm that "modifies" v: GCC may not reassociate a chain of adds across it. Without it,
// GCC turns each accumulator's chain into trees over two chunks, keeps all products alive at once and
// spills half the accumulators of the K-quant tile to the stack.
inline void keep_in_register(__m256i & v) { __asm__("" : "+x"(v)); }

inline size_t align64(size_t n) { return (n + 63) / 64 * 64; }

// ---------------------------------------------------------------------------------------------
// Repacked activation rows (Q8_0 / Q8_1 blocks): [64-byte header][quants, 32 bytes per block,
// 32-byte aligned][d_a per block as F32][Q8_1 only: s per block as F32, zero-padded to 8 blocks].
// Header word 0: 1 when some quant is -128 (the Q8_0 tile's sign trick would not be exact).
// Scales as F32 so the tile broadcasts them with one load instead of converting an F16 per use.

constexpr size_t ACT_HDR = 64;

inline int64_t sums_padded(int64_t nblk) { return (nblk + 7) / 8 * 8; }

size_t q8_act_bytes(int64_t K) {
    const int64_t nblk = K / 32;
    return ACT_HDR + (size_t) nblk * 32 + align64((size_t) nblk * 4);
}
size_t q8_1_act_bytes(int64_t K) { return q8_act_bytes(K) + (size_t) sums_padded(K / 32) * 4; }

inline const int8_t * act_qs(const char * row) { return (const int8_t *) (row + ACT_HDR); }
inline const float *  act_d(const char * row, int64_t nblk) { return (const float *) (row + ACT_HDR + nblk * 32); }
inline const float *  act_s(const char * row, int64_t nblk) {
    return (const float *) (row + ACT_HDR + nblk * 32 + align64((size_t) nblk * 4));
}

template <class B> void q8_pack_common(const B * xb, int64_t nblk, char * out) {
    int8_t *      qs  = (int8_t *) (out + ACT_HDR);
    float *       d   = (float *) (out + ACT_HDR + nblk * 32);
    const __m256i m128 = _mm256_set1_epi8((char) 0x80);
    int           any = 0;
    for (int64_t b = 0; b < nblk; ++b) {
        const __m256i q = _mm256_loadu_si256((const __m256i *) xb[b].qs);
        any |= _mm256_movemask_epi8(_mm256_cmpeq_epi8(q, m128));
        _mm256_storeu_si256((__m256i *) (qs + 32 * b), q);
        d[b] = h2f(xb[b].d);
    }
    memset(out, 0, ACT_HDR);
    const int32_t flag = any != 0;
    memcpy(out, &flag, sizeof flag);
}

void q8_0_act_repack(const void * blocks, void * row, int64_t K) {
    q8_pack_common((const block_q8_0 *) blocks, K / QK8_0, (char *) row);
}

void q8_1_act_repack(const void * blocks, void * row, int64_t K) {
    const block_q8_1 * xb   = (const block_q8_1 *) blocks;
    const int64_t      nblk = K / QK8_1;
    q8_pack_common(xb, nblk, (char *) row);
    float * s = (float *) act_s((const char *) row, nblk);
    for (int64_t b = 0; b < sums_padded(nblk); ++b) s[b] = b < nblk ? h2f(xb[b].s) : 0.0f;
}

// ---------------------------------------------------------------------------------------------
// Q8_0 and Q4_0: 8 weight rows in the 8 int32 lanes ("panels")
//
// The per-pair tiles (tile_sym below; Q8_0 had one too) put 32 elements of ONE (weight row,
// activation row) pair in a vector, so every pair pays the horizontal part of the block sum
// (vpmaddwd to int32) and its own cvtdq2ps, scale product and FMA per block: 6 ops per pair and
// block for Q8_0 and Q4_0. Here lane j of a vector is weight row j of a panel of 8, and 4 bytes of
// the activation row are broadcast (vpbroadcastd from memory) to all lanes. The block sum then needs
// no horizontal work, and the F32 part (cvtdq2ps, d_w * d_a, FMA) runs once per 8 pairs with the 8
// rows' d_w as one vector. A tile is R panels (8R weight rows) x C activation rows, so each
// broadcast serves R panels and each weight vector C activation rows.
// The weights must be interleaved for that: entry_panels repacks 8R rows once per call into a
// per-thread buffer and reuses it for all the call's activation rows (64 in ops-mul-mat-quant's
// blocks, so the repack is a few percent of the call).
//  - Q8_0: vpmaddubsw(|w|, sign(a, w)) (exact as stated at the top; tiles with a -128 activation
//    take the exact path) then vpmaddwd and vpaddd per 4 elements and 8 pairs: 4 ops per pair and
//    block instead of 6. Sign-extended int16 pairs (vpmaddwd + vpaddd per 2 elements, exact for
//    every byte) cost the same ops but double the activation bytes, which stream from L3 when M is
//    large: 10-20% slower at M = 1024, equal at M = 256.
//  - Q4_0: vpmaddubsw(q, a) with the unsigned stored quants q (0..15): a pair is at most
//    2 * 15 * 128 = 3840 in magnitude, so the 8 products of a block add up in int16 (<= 30720)
//    before one vpmaddwd; the offset is subtracted as 8 * sum(a) per activation block, computed
//    at repack time: sum (q - 8) a = sum q a - 8 sum a, exactly.
// The panel's lanes are filled by a 4x4 dword transpose inside each 128-bit half (vpunpck only,
// no lane crossing): half 0 holds rows 0-3 and half 1 rows 4-7, each loaded half-and-half.
// Measured as the shapes above (one thread, CPU time, old and new alternating in one process):
// Q8_0 64-69 -> 109-119 GFLOP/s, Q4_0 63-68 -> 175-200 (R x C = 2x4; 1x6 and 1x8 were 5-10% lower
// for Q8_0 and ~20% lower for Q4_0, 2x3 within the noise of 2x4). keep_in_register matters here:
// without it GCC sums each block's products as a tree, spills them, and Q8_0 is no faster than
// the per-pair tile.

#ifndef QMM2_PANEL_Q8_0_TC
#define QMM2_PANEL_Q8_0_R 2
#define QMM2_PANEL_Q8_0_TC 4
#define QMM2_PANEL_Q4_0_R 2
#define QMM2_PANEL_Q4_0_TC 4
#endif

// per-thread scratch for one repacked weight panel (grows to the largest K seen)
inline char * panel_scratch(size_t bytes) {
    thread_local std::vector<char> buf;
    if (buf.size() < bytes + 32) buf.resize(bytes + 32);
    return (char *) (((uintptr_t) buf.data() + 31) & ~(uintptr_t) 31);
}

// in-lane 4x4 transpose of dwords: o[k] half h = (y[0] dword k, y[1] dword k, y[2] dword k, y[3] dword k) of half h
inline void transpose4x4_halves(const __m256i (&y)[4], __m256i * o) {
    const __m256i t0 = _mm256_unpacklo_epi32(y[0], y[1]); // y0k0 y1k0 y0k1 y1k1
    const __m256i t1 = _mm256_unpackhi_epi32(y[0], y[1]); // y0k2 y1k2 y0k3 y1k3
    const __m256i t2 = _mm256_unpacklo_epi32(y[2], y[3]);
    const __m256i t3 = _mm256_unpackhi_epi32(y[2], y[3]);
    _mm256_store_si256(o + 0, _mm256_unpacklo_epi64(t0, t2));
    _mm256_store_si256(o + 1, _mm256_unpackhi_epi64(t0, t2));
    _mm256_store_si256(o + 2, _mm256_unpacklo_epi64(t1, t3));
    _mm256_store_si256(o + 3, _mm256_unpackhi_epi64(t1, t3));
}

template <class B> inline void panel_scales(const B * const * rows, int64_t b, float * dst) {
    alignas(16) ggml_fp16_t h[8];
    for (int r = 0; r < 8; ++r) h[r] = rows[r][b].d;
    _mm256_store_ps(dst, _mm256_cvtph_ps(_mm_load_si128((const __m128i *) h)));
}

// Q4_0's repacked activation rows: q8_pack_common's layout followed by 8 * (sum of the block's
// quants) per block as int32 (64-byte aligned). Q8_0's panels read q8_pack_common's rows as they are.
inline const int32_t * pact_off(const char * row, int64_t nblk) {
    return (const int32_t *) (row + ACT_HDR + nblk * 32 + align64((size_t) nblk * 4));
}

size_t q4_0_pact_bytes(int64_t K) { return q8_act_bytes(K) + align64((size_t) (K / 32) * 4); }

void q4_0_pact_repack(const void * blocks, void * row, int64_t K) {
    const block_q8_0 * xb   = (const block_q8_0 *) blocks;
    const int64_t      nblk = K / QK8_0;
    q8_pack_common(xb, nblk, (char *) row);
    int32_t * off = (int32_t *) pact_off((const char *) row, nblk);
    for (int64_t b = 0; b < nblk; ++b) {
        int32_t s = 0;
        for (int i = 0; i < 32; ++i) s += xb[b].qs[i];
        off[b] = 8 * s;
    }
}

inline int32_t load_i32(const void * p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

// Exact for every byte pair (vpmaddwd on sign-extended int16): the tiles whose activation rows
// hold a -128 (never written by the reference quantizer) come here, one dot product at a time.
float q8_0_dot_exact(int64_t nblk, const block_q8_0 * wb, const char * xrow) {
    const int8_t * qs  = act_qs(xrow);
    const float *  d   = act_d(xrow, nblk);
    __m256         acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nblk; ++b) {
        __m256i s = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
            const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) (wb[b].qs + 16 * h)));
            const __m256i a = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) (qs + 32 * b + 16 * h)));
            s               = _mm256_add_epi32(s, _mm256_madd_epi16(w, a));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(h2f(wb[b].d) * d[b]), acc);
    }
    return hsum(acc);
}

// per block and sub-panel i (rows 8i .. 8i + 7): for each step s (elements 4s .. 4s + 3 of the 8
// rows) the vector of |w| then the vector of w, then the R vectors of 8 d_w
template <int R> struct panel_q8_0 {
    static constexpr int    ROWS = 8 * R;
    static constexpr size_t BLK  = R * (16 * 32 + 32);
    static constexpr int    TC   = QMM2_PANEL_Q8_0_TC;
    static constexpr bool   HAS_EXACT = true;

    static void pack(const block_q8_0 * const (&rows)[ROWS], int64_t nblk, char * dst) {
        for (int64_t b = 0; b < nblk; ++b) {
            for (int i = 0; i < R; ++i) {
                __m256i *                  o  = (__m256i *) (dst + b * BLK) + 16 * i;
                const block_q8_0 * const * rr = rows + 8 * i;
                for (int h = 0; h < 2; ++h) { // elements 16h .. 16h + 15 of rows r (half 0) and r + 4 (half 1)
                    __m256i y[4], t[4];
                    for (int r = 0; r < 4; ++r)
                        y[r] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *) (rr[r][b].qs + 16 * h))),
                                                       _mm_loadu_si128((const __m128i *) (rr[r + 4][b].qs + 16 * h)), 1);
                    transpose4x4_halves(y, t);
                    for (int k = 0; k < 4; ++k) {
                        const __m256i v = _mm256_load_si256(t + k);
                        _mm256_store_si256(o + 2 * (4 * h + k), _mm256_abs_epi8(v));
                        _mm256_store_si256(o + 2 * (4 * h + k) + 1, v);
                    }
                }
                panel_scales(rr, b, (float *) (dst + b * BLK + R * 16 * 32) + 8 * i);
            }
        }
    }

    // vpmaddubsw(|w|, sign(a, w)): exact unless an activation byte is -128 (see the top), which
    // entry_panels rules out for the C rows before calling this
    template <int C> static void cols(int64_t nblk, const char * p, const char * x, size_t xs, __m256 (&acc)[R][C]) {
        const int8_t * aq[C];
        const float *  ad[C];
        for (int c = 0; c < C; ++c) {
            aq[c] = act_qs(x + c * xs);
            ad[c] = act_d(x + c * xs, nblk);
            for (int i = 0; i < R; ++i) acc[i][c] = _mm256_setzero_ps();
        }
        const __m256i ones = _mm256_set1_epi16(1);
        for (int64_t b = 0; b < nblk; ++b) {
            const __m256i * wv = (const __m256i *) (p + b * BLK);
            __m256i         is[R][C];
            for (int i = 0; i < R; ++i)
                for (int c = 0; c < C; ++c) is[i][c] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int s = 0; s < 8; ++s) {
                __m256i aw[R];
                for (int i = 0; i < R; ++i) aw[i] = _mm256_load_si256(wv + 16 * i + 2 * s);
                for (int c = 0; c < C; ++c) {
                    const __m256i a = _mm256_set1_epi32(load_i32(aq[c] + 32 * b + 4 * s));
                    for (int i = 0; i < R; ++i) {
                        const __m256i t = _mm256_sign_epi8(a, _mm256_load_si256(wv + 16 * i + 2 * s + 1));
                        is[i][c]        = _mm256_add_epi32(is[i][c], _mm256_madd_epi16(_mm256_maddubs_epi16(aw[i], t), ones));
                        keep_in_register(is[i][c]); // one running sum each, not a tree of spilled products
                    }
                }
            }
            for (int c = 0; c < C; ++c) {
                const __m256 da = _mm256_broadcast_ss(ad[c] + b);
                for (int i = 0; i < R; ++i)
                    acc[i][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[i][c]), _mm256_mul_ps(_mm256_load_ps((const float *) (wv + 16 * R) + 8 * i), da),
                                                acc[i][c]);
            }
        }
    }

    // a tile whose activation rows hold a -128: the exact dot products, from the original rows
    static void exact(int64_t nblk, const block_q8_0 * const (&rows)[ROWS], int pr, const char * x, size_t xs, int cc, float * out, size_t ldo) {
        for (int c = 0; c < cc; ++c)
            for (int r = 0; r < pr; ++r) out[c * ldo + r] = q8_0_dot_exact(nblk, rows[r], x + c * xs);
    }
};

// per block and sub-panel i: 8 vectors of byte quads (vector s = elements 4s .. 4s + 3 of the 8
// rows), then the R vectors of 8 d_w
template <int R> struct panel_q4_0 {
    static constexpr int    ROWS = 8 * R;
    static constexpr size_t BLK  = R * (8 * 32 + 32);
    static constexpr int    TC   = QMM2_PANEL_Q4_0_TC;
    static constexpr bool   HAS_EXACT = false; // exact for every byte

    static void pack(const block_q4_0 * const (&rows)[ROWS], int64_t nblk, char * dst) {
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        for (int64_t b = 0; b < nblk; ++b) {
            for (int i = 0; i < R; ++i) {
                __m256i *                  o  = (__m256i *) (dst + b * BLK) + 8 * i;
                const block_q4_0 * const * rr = rows + 8 * i;
                __m256i                    lo[4], hi[4]; // elements 0..15 (low nibbles) and 16..31 (high) of rows r | r + 4
                for (int r = 0; r < 4; ++r) {
                    const __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *) rr[r][b].qs)),
                                                              _mm_loadu_si128((const __m128i *) rr[r + 4][b].qs), 1);
                    lo[r] = _mm256_and_si256(v, m4);
                    hi[r] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                }
                transpose4x4_halves(lo, o);
                transpose4x4_halves(hi, o + 4);
                panel_scales(rr, b, (float *) (dst + b * BLK + R * 8 * 32) + 8 * i);
            }
        }
    }

    template <int C> static void cols(int64_t nblk, const char * p, const char * x, size_t xs, __m256 (&acc)[R][C]) {
        const int8_t *  aq[C];
        const float *   ad[C];
        const int32_t * ao[C];
        for (int c = 0; c < C; ++c) {
            aq[c] = act_qs(x + c * xs);
            ad[c] = act_d(x + c * xs, nblk);
            ao[c] = pact_off(x + c * xs, nblk);
            for (int i = 0; i < R; ++i) acc[i][c] = _mm256_setzero_ps();
        }
        const __m256i ones = _mm256_set1_epi16(1);
        for (int64_t b = 0; b < nblk; ++b) {
            const __m256i * wv = (const __m256i *) (p + b * BLK);
            __m256i         p16[R][C];
            for (int i = 0; i < R; ++i)
                for (int c = 0; c < C; ++c) p16[i][c] = _mm256_setzero_si256();
#pragma GCC unroll 8
            for (int s = 0; s < 8; ++s) {
                __m256i w[R];
                for (int i = 0; i < R; ++i) w[i] = _mm256_load_si256(wv + 8 * i + s);
                for (int c = 0; c < C; ++c) {
                    const __m256i a = _mm256_set1_epi32(load_i32(aq[c] + 32 * b + 4 * s));
                    for (int i = 0; i < R; ++i) {
                        p16[i][c] = _mm256_add_epi16(p16[i][c], _mm256_maddubs_epi16(w[i], a));
                        keep_in_register(p16[i][c]);
                    }
                }
            }
            for (int c = 0; c < C; ++c) {
                const __m256  da  = _mm256_broadcast_ss(ad[c] + b);
                const __m256i off = _mm256_set1_epi32(ao[c][b]);
                for (int i = 0; i < R; ++i) {
                    const __m256i v = _mm256_sub_epi32(_mm256_madd_epi16(p16[i][c], ones), off);
                    acc[i][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_mul_ps(_mm256_load_ps((const float *) (wv + 8 * R) + 8 * i), da), acc[i][c]);
                }
            }
        }
    }
};

// C activation rows against the packed panel; lane j of acc[i][c] is weight row 8i + j
template <class P, int C>
void panel_cols(int cc, int64_t nblk, const char * p, const char * x, size_t xs, float * out, size_t ldo, int pr) {
    if constexpr (C > 1) {
        if (cc < C) return panel_cols<P, C - 1>(cc, nblk, p, x, xs, out, ldo, pr);
    }
    constexpr int R = P::ROWS / 8;
    __m256        acc[R][C];
    P::template cols<C>(nblk, p, x, xs, acc);
    for (int c = 0; c < C; ++c) {
        if (pr == P::ROWS) {
            for (int i = 0; i < R; ++i) _mm256_storeu_ps(out + c * ldo + 8 * i, acc[i][c]);
        } else {
            alignas(32) float t[P::ROWS];
            for (int i = 0; i < R; ++i) _mm256_store_ps(t + 8 * i, acc[i][c]);
            for (int r = 0; r < pr; ++r) out[c * ldo + r] = t[r];
        }
    }
}

// header word 0 of the C repacked activation rows (q8_pack_common): some quant is -128
inline bool any_m128(const char * x, size_t xs, int C) {
    int32_t any = 0;
    for (int c = 0; c < C; ++c) any |= load_i32(x + c * xs);
    return any != 0;
}

template <class P, class B> void entry_panels(int64_t K, const char * w, size_t ws, int nr, const char * x, size_t xs, int nc, float * out,
                                              size_t ldo) {
    const int64_t nblk = K / 32;
    char *        buf  = panel_scratch((size_t) nblk * P::BLK);
    for (int r0 = 0; r0 < nr; r0 += P::ROWS) {
        const int pr = nr - r0 < P::ROWS ? nr - r0 : P::ROWS;
        const B * rows[P::ROWS];
        for (int r = 0; r < P::ROWS; ++r) rows[r] = (const B *) (w + (r0 + (r < pr ? r : 0)) * ws); // missing rows: row 0 again, not stored
        P::pack(rows, nblk, buf);
        for (int c0 = 0; c0 < nc; c0 += P::TC) {
            const int cc = nc - c0 < P::TC ? nc - c0 : P::TC;
            if constexpr (P::HAS_EXACT) {
                if (any_m128(x + c0 * xs, xs, cc)) {
                    P::exact(nblk, rows, pr, x + c0 * xs, xs, cc, out + c0 * ldo + r0, ldo);
                    continue;
                }
            }
            panel_cols<P, P::TC>(cc, nblk, buf, x + c0 * xs, xs, out + c0 * ldo + r0, ldo, pr);
        }
    }
}

void entry_q8_0(int64_t K, const char * w, size_t ws, int nr, const char * x, size_t xs, int nc, float * out, size_t ldo) {
    entry_panels<panel_q8_0<QMM2_PANEL_Q8_0_R>, block_q8_0>(K, w, ws, nr, x, xs, nc, out, ldo);
}
void entry_q4_0(int64_t K, const char * w, size_t ws, int nr, const char * x, size_t xs, int nc, float * out, size_t ldo) {
    entry_panels<panel_q4_0<QMM2_PANEL_Q4_0_R>, block_q4_0>(K, w, ws, nr, x, xs, nc, out, ldo);
}

// ---------------------------------------------------------------------------------------------
// 32-element nibble types: Q4_0 / Q5_0 (x = d (q - OFF)) x Q8_0, Q4_1 / Q5_1 (x = d q + m) x Q8_1

// The 32 stored quants of a block as bytes in element order (low nibbles = elements 0..15)
inline __m256i nibbles32(const uint8_t * qs) {
    const __m128i v = _mm_loadu_si128((const __m128i *) qs);
    const __m256i x = _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1);
    return _mm256_and_si256(x, _mm256_set1_epi8(0x0F));
}

// byte j = 0xFF where bit j of h is set: each byte picks the byte of h that holds its bit
inline __m256i bits_to_bytes(uint32_t h) {
    const __m256i v   = _mm256_shuffle_epi8(_mm256_set1_epi32((int) h),
                                            _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2,
                                                             3, 3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x((long long) 0x8040201008040201ull);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

template <class B, bool FIVE> inline __m256i quants32(const B & blk) {
    const __m256i q = nibbles32(blk.qs);
    if constexpr (FIVE) {
        uint32_t h;
        memcpy(&h, blk.qh, 4);
        return _mm256_or_si256(q, _mm256_and_si256(bits_to_bytes(h), _mm256_set1_epi8(16)));
    } else {
        return q;
    }
}

// OFF > 0: x = d (q - OFF) against Q8_0 activations; OFF == 0: x = d q + m against Q8_1 (the m s
// terms are added after the block loop, see tile_nib).
template <int R, int C, class B, bool FIVE, int OFF>
void nib_block_loop(__m256 (&acc)[R][C], int64_t nblk, const char * w, size_t ws, const char * x, size_t xs) {
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i offb = _mm256_set1_epi8(OFF);
    for (int64_t b = 0; b < nblk; ++b) {
        __m256i q[R];
        __m256  dw[R];
        for (int r = 0; r < R; ++r) {
            const B & blk = ((const B *) (w + r * ws))[b];
            q[r]          = quants32<B, FIVE>(blk);
            dw[r]         = _mm256_set1_ps(h2f(blk.d));
        }
        for (int c = 0; c < C; ++c) {
            const char *  xr = x + c * xs;
            const __m256i a  = _mm256_load_si256((const __m256i *) (act_qs(xr) + 32 * b));
            const __m256  da = _mm256_broadcast_ss(act_d(xr, nblk) + b);
            __m256i       o  = _mm256_setzero_si256();
            if constexpr (OFF != 0) o = _mm256_maddubs_epi16(offb, a); // OFF * (pair sums of a)
            for (int r = 0; r < R; ++r) {
                __m256i p = _mm256_maddubs_epi16(q[r], a);
                if constexpr (OFF != 0) p = _mm256_sub_epi16(p, o);
                const __m256i i = _mm256_madd_epi16(p, ones);
                acc[r][c]       = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_mul_ps(dw[r], da), acc[r][c]);
            }
        }
    }
}

template <int R, int C, class B, bool FIVE, int OFF>
void tile_sym(int64_t nblk, const char * w, size_t ws, const char * x, size_t xs, float * out, size_t ldo) {
    __m256 acc[R][C];
    nib_block_loop<R, C, B, FIVE, OFF>(acc, nblk, w, ws, x, xs);
    for (int c = 0; c < C; ++c)
        for (int r = 0; r < R; ++r) out[c * ldo + r] = hsum(acc[r][c]);
}

// Q4_1 / Q5_1: sum(x a) = d d_a sum(q qa) + m s per block; the m s terms are a dot product of the
// row's mins with the activation row's block sums, 8 blocks at a time after the block loop.
template <int R, int C, class B, bool FIVE>
void tile_affine(int64_t nblk, const char * w, size_t ws, const char * x, size_t xs, float * out, size_t ldo) {
    __m256 acc[R][C];
    nib_block_loop<R, C, B, FIVE, 0>(acc, nblk, w, ws, x, xs);
    for (int r = 0; r < R; ++r) {
        const B * wb = (const B *) (w + r * ws);
        __m256    ms[C];
        for (int c = 0; c < C; ++c) ms[c] = _mm256_setzero_ps();
        for (int64_t b0 = 0; b0 < nblk; b0 += 8) {
            alignas(16) uint16_t mh[8];
            for (int i = 0; i < 8; ++i) mh[i] = b0 + i < nblk ? wb[b0 + i].m : 0;
            const __m256 m = _mm256_cvtph_ps(_mm_load_si128((const __m128i *) mh));
            for (int c = 0; c < C; ++c) ms[c] = _mm256_fmadd_ps(m, _mm256_loadu_ps(act_s(x + c * xs, nblk) + b0), ms[c]);
        }
        for (int c = 0; c < C; ++c) out[c * ldo + r] = hsum(acc[r][c]) + hsum(ms[c]);
    }
}

template <int R, int C> void tile_q5_0(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * o, size_t l) {
    tile_sym<R, C, block_q5_0, true, 16>(n, w, ws, x, xs, o, l);
}
template <int R, int C> void tile_q4_1(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * o, size_t l) {
    tile_affine<R, C, block_q4_1, false>(n, w, ws, x, xs, o, l);
}
template <int R, int C> void tile_q5_1(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * o, size_t l) {
    tile_affine<R, C, block_q5_1, true>(n, w, ws, x, xs, o, l);
}

// ---------------------------------------------------------------------------------------------
// K-quants x Q8_K activations (read in place: qs are 256 bytes per super-block, bsums beside them)

// Q4_K/Q5_K: the 6-bit scales and mins of the 8 sub-blocks from their 12 bytes (ggml-common.h:
// bytes 0-3 hold sc 0-3 in the low 6 bits and the top 2 bits of sc 4-7; bytes 4-7 the same for the
// mins; bytes 8-11 the low 4 bits of sc 4-7 (low nibble) and of m 4-7 (high nibble)), 4 per word.
inline void k_scales_mins(const uint8_t * s12, uint8_t sc[8], uint8_t mn[8]) {
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

// One weight row's super-block: quants unpacked per 32-element chunk j (0..7) on demand; the 8
// sub-block scales as int16 in both 128-bit halves (vpshufb then broadcasts scale j in one op); the
// mins as int16 pairs matching the activation's bsums (two 16-element sums per chunk).
struct k4_row {
    const uint8_t * qs;
    const uint8_t * qh; // Q5_K only
    __m256i         sc16, mn16;
    __m256          d, mdmin; // d and -dmin, broadcast
};

template <bool FIVE> inline void k4_load(const char * blk, k4_row & o) {
    const uint8_t * s12;
    ggml_fp16_t     d, dmin;
    if constexpr (FIVE) {
        const block_q5_K & b = *(const block_q5_K *) blk;
        o.qs = b.qs; o.qh = b.qh; s12 = b.scales; d = b.d; dmin = b.dmin;
    } else {
        const block_q4_K & b = *(const block_q4_K *) blk;
        o.qs = b.qs; o.qh = nullptr; s12 = b.scales; d = b.d; dmin = b.dmin;
    }
    uint8_t sc[8], mn[8];
    k_scales_mins(s12, sc, mn);
    uint64_t sc64, mn64;
    memcpy(&sc64, sc, 8);
    memcpy(&mn64, mn, 8);
    o.sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long) sc64)));
    const __m128i m8 = _mm_cvtsi64_si128((long long) mn64);
    o.mn16  = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)); // m0 m0 m1 m1 ... (int16)
    o.d     = _mm256_set1_ps(h2f(d));
    o.mdmin = _mm256_set1_ps(-h2f(dmin));
}

// vpshufb control that broadcasts int16 element e of each 128-bit half to the whole half
inline __m256i bcast16_ctrl(int e) { return _mm256_set1_epi16((short) ((2 * e) | ((2 * e + 1) << 8))); }

// chunk j (0..7): the low (j even) or high (j odd) nibbles of qs[32 (j / 2) ..]; Q5_K's fifth bit
// of element l is bit j of qh[l] (the 16-bit shift moves bits across bytes; the mask keeps each
// byte's own bit j, moved to bit 4)
template <bool FIVE, int ODD> inline __m256i k4_chunk(const k4_row & w, int j) {
    const __m256i v = _mm256_loadu_si256((const __m256i *) (w.qs + 32 * (j / 2)));
    __m256i       q = _mm256_and_si256(ODD ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0F));
    if constexpr (FIVE) {
        const __m256i h = _mm256_srl_epi16(_mm256_loadu_si256((const __m256i *) w.qh), _mm_cvtsi32_si128(j));
        q               = _mm256_or_si256(q, _mm256_and_si256(_mm256_slli_epi16(h, 4), _mm256_set1_epi8(16)));
    }
    return q;
}

// One 32-element chunk of the super-block for the whole micro-tile. The sub-block scales come from
// memory (vpmaddwd's memory operand), so the R x C int32 sums, R unpacked chunks and the activation
// chunk are all the registers it needs.
template <int R, int C, bool FIVE, int ODD>
inline void k4_step(__m256i (&isum)[R][C], const k4_row (&wr)[R], const __m256i (*scv)[8], const block_q8_K * const (&xb)[C],
                    int j) {
    __m256i q[R];
    for (int r = 0; r < R; ++r) q[r] = k4_chunk<FIVE, ODD>(wr[r], j);
    for (int c = 0; c < C; ++c) {
        const __m256i a = _mm256_loadu_si256((const __m256i *) (xb[c]->qs + 32 * j));
        for (int r = 0; r < R; ++r) {
            isum[r][c] = _mm256_add_epi32(isum[r][c], _mm256_madd_epi16(_mm256_maddubs_epi16(q[r], a), scv[r][j]));
            keep_in_register(isum[r][c]);
        }
    }
}

template <int R, int C, class BLK, bool FIVE>
void tile_k4(int64_t nblk, const char * w, size_t ws, const char * x, size_t xs, float * out, size_t ldo) {
    __m256 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nblk; ++i) {
        k4_row  wr[R];
        __m256i scv[R][8]; // per row and chunk: the chunk's scale in all 16 int16 lanes
        for (int r = 0; r < R; ++r) {
            k4_load<FIVE>((const char *) ((const BLK *) (w + r * ws) + i), wr[r]);
            for (int j = 0; j < 8; ++j) scv[r][j] = _mm256_shuffle_epi8(wr[r].sc16, bcast16_ctrl(j));
        }
        const block_q8_K * xb[C];
        for (int c = 0; c < C; ++c) xb[c] = (const block_q8_K *) (x + c * xs) + i;
        __m256i isum[R][C];
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) isum[r][c] = _mm256_setzero_si256();
#pragma GCC unroll 1
        for (int j = 0; j < 8; j += 2) {
            k4_step<R, C, FIVE, 0>(isum, wr, scv, xb, j);
            k4_step<R, C, FIVE, 1>(isum, wr, scv, xb, j + 1);
        }
        for (int c = 0; c < C; ++c) {
            const __m256i bs = _mm256_loadu_si256((const __m256i *) xb[c]->bsums);
            const __m256  da = _mm256_broadcast_ss(&xb[c]->d);
            for (int r = 0; r < R; ++r) {
                // d sum(sc q a) - dmin sum_j m_j (sum of a over chunk j), then times d_a
                const __m256 mins = _mm256_cvtepi32_ps(_mm256_madd_epi16(bs, wr[r].mn16));
                const __m256 v = _mm256_fmadd_ps(mins, wr[r].mdmin, _mm256_mul_ps(_mm256_cvtepi32_ps(isum[r][c]), wr[r].d));
                acc[r][c]      = _mm256_fmadd_ps(v, da, acc[r][c]);
            }
        }
    }
    for (int c = 0; c < C; ++c)
        for (int r = 0; r < R; ++r) out[c * ldo + r] = hsum(acc[r][c]);
}

template <int R, int C> void tile_q4_K(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * o, size_t l) {
    tile_k4<R, C, block_q4_K, false>(n, w, ws, x, xs, o, l);
}
template <int R, int C> void tile_q5_K(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * o, size_t l) {
    tile_k4<R, C, block_q5_K, true>(n, w, ws, x, xs, o, l);
}

// Q6_K: q = 6 bits (0..63), x = d * sc * (q - 32), 16 sub-blocks of 16 with int8 scales. Chunk
// idx = 4h + g (h = 0, 1; g = 0..3) is elements 128h + 32g + l: the low 4 bits from
// ql[64h + 32 (g & 1) + l] (low nibble for g < 2, high for g >= 2), the top 2 from qh[32h + l]
// bits 2g, 2g+1; its two 16-element halves are sub-blocks 2 idx and 2 idx + 1, which are exactly the
// two 128-bit halves of the vpmaddubsw result. The -32 offset is -32 * sum_j sc_j * bsum_j per
// super-block, folded into the same int32 sum.
template <int R, int C>
void tile_q6_K(int64_t nblk, const char * w, size_t ws, const char * x, size_t xs, float * out, size_t ldo) {
    __m256 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm256_setzero_ps();
    const __m256i lo4 = _mm256_set1_epi8(0x0F), lo2 = _mm256_set1_epi8(0x03);
    for (int64_t i = 0; i < nblk; ++i) {
        const block_q6_K * wb[R];
        for (int r = 0; r < R; ++r) wb[r] = (const block_q6_K *) (w + r * ws) + i;
        const block_q8_K * xb[C];
        for (int c = 0; c < C; ++c) xb[c] = (const block_q8_K *) (x + c * xs) + i;
        __m256i isum[R][C];
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c) isum[r][c] = _mm256_setzero_si256();
        __m256i s_lo[R], s_hi[R]; // scales 0-7 / 8-15 as int16, in both 128-bit halves
        for (int r = 0; r < R; ++r) {
            const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) wb[r]->scales));
            s_lo[r]            = _mm256_permute2x128_si256(sc16, sc16, 0x00);
            s_hi[r]            = _mm256_permute2x128_si256(sc16, sc16, 0x11);
        }
        // fully unrolled: idx is a constant in each copy
#pragma GCC unroll 8
        for (int idx = 0; idx < 8; ++idx) {
            const int h = idx / 4, g = idx % 4;
            // low half: scale 2 idx, high half: 2 idx + 1 (both in s_lo for idx < 4, else s_hi)
            const __m256i ctrl = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm256_castsi256_si128(bcast16_ctrl((2 * idx) % 8))),
                                                         _mm256_castsi256_si128(bcast16_ctrl((2 * idx + 1) % 8)), 1);
            __m256i   q[R], sc[R];
            for (int r = 0; r < R; ++r) {
                const __m256i ql  = _mm256_loadu_si256((const __m256i *) (wb[r]->ql + 64 * h + 32 * (g & 1)));
                const __m256i qh  = _mm256_loadu_si256((const __m256i *) (wb[r]->qh + 32 * h));
                const __m256i nib = _mm256_and_si256(g < 2 ? ql : _mm256_srli_epi16(ql, 4), lo4);
                // (qh >> 2g) & 3 per byte, then << 4: values <= 48 stay inside their byte
                const __m256i hb  = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), lo2), 4);
                q[r]              = _mm256_or_si256(nib, hb);
                sc[r]             = _mm256_shuffle_epi8(idx < 4 ? s_lo[r] : s_hi[r], ctrl);
            }
            for (int c = 0; c < C; ++c) {
                const __m256i a = _mm256_loadu_si256((const __m256i *) (xb[c]->qs + 32 * idx));
                for (int r = 0; r < R; ++r) {
                    isum[r][c] = _mm256_add_epi32(isum[r][c], _mm256_madd_epi16(_mm256_maddubs_epi16(q[r], a), sc[r]));
                    keep_in_register(isum[r][c]);
                }
            }
        }
        for (int r = 0; r < R; ++r) {
            const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) wb[r]->scales));
            const float   d    = h2f(wb[r]->d);
            for (int c = 0; c < C; ++c) {
                const __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *) xb[c]->bsums), sc16);
                const __m256i s   = _mm256_sub_epi32(isum[r][c], _mm256_slli_epi32(off, 5));
                acc[r][c]         = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(d * xb[c]->d), acc[r][c]);
            }
        }
    }
    for (int c = 0; c < C; ++c)
        for (int r = 0; r < R; ++r) out[c * ldo + r] = hsum(acc[r][c]);
}

// ---------------------------------------------------------------------------------------------
// Tiling of a (rows x columns) block into exact-size micro-tiles.

using micro_fn = void (*)(int64_t, const char *, size_t, const char *, size_t, float *, size_t);

// table.f[r-1][c-1] = the r x c micro-tile, so every edge runs a tile of exactly its size
template <typename T, int TR, int TC> struct micro_table {
    micro_fn f[TR][TC];
    template <int R, int... Cs> void fill_row(std::integer_sequence<int, Cs...>) {
        const micro_fn row[] = {&T::template tile<R, Cs + 1>...};
        for (int c = 0; c < TC; ++c) f[R - 1][c] = row[c];
    }
    template <int... Rs> void fill(std::integer_sequence<int, Rs...>) {
        (fill_row<Rs + 1>(std::make_integer_sequence<int, TC>()), ...);
    }
    micro_table() { fill(std::make_integer_sequence<int, TR>()); }
};

// weight micro-panels outermost: their TR rows stay in L1 while the block's activation rows pass
template <typename T> void run_tiles(int64_t K, const char * w, size_t ws, int nr, const char * x, size_t xs, int nc,
                                     float * out, size_t ldo) {
    static const micro_table<T, T::TR, T::TC> table;
    const int64_t nblk = K / T::QK;
    for (int r0 = 0; r0 < nr; r0 += T::TR) {
        const int rr = nr - r0 < T::TR ? nr - r0 : T::TR;
        for (int c0 = 0; c0 < nc; c0 += T::TC) {
            const int cc = nc - c0 < T::TC ? nc - c0 : T::TC;
            table.f[rr - 1][cc - 1](nblk, w + r0 * ws, ws, x + c0 * xs, xs, out + c0 * ldo + r0, ldo);
        }
    }
}

#define QDOT2_KERNEL(T, qk, tr, tc)                                                                                 \
    struct kern_##T {                                                                                              \
        static constexpr int64_t QK = qk;                                                                          \
        static constexpr int     TR = tr, TC = tc;                                                                 \
        template <int R, int C> static void tile(int64_t n, const char * w, size_t ws, const char * x, size_t xs,   \
                                                 float * o, size_t l) {                                            \
            tile_##T<R, C>(n, w, ws, x, xs, o, l);                                                                 \
        }                                                                                                          \
    };                                                                                                             \
    void entry_##T(int64_t K, const char * w, size_t ws, int nr, const char * x, size_t xs, int nc, float * out,    \
                   size_t ldo) {                                                                                   \
        run_tiles<kern_##T>(K, w, ws, nr, x, xs, nc, out, ldo);                                                    \
    }
QDOT2_KERNEL(q5_0, QK5_0, QMM2_Q4_0_TR, QMM2_Q4_0_TC)
QDOT2_KERNEL(q4_1, QK4_1, QMM2_Q4_0_TR, QMM2_Q4_0_TC)
QDOT2_KERNEL(q5_1, QK5_1, QMM2_Q4_0_TR, QMM2_Q4_0_TC)
QDOT2_KERNEL(q4_K, QK_K, QMM2_K_TR, QMM2_K_TC)
QDOT2_KERNEL(q5_K, QK_K, QMM2_K_TR, QMM2_K_TC)
QDOT2_KERNEL(q6_K, QK_K, QMM2_Q6_K_TR, QMM2_Q6_K_TC)

const ggml_quant_dot_fast k_avx2_q8_0 = {"avx2 q8_0", entry_q8_0, q8_act_bytes, q8_0_act_repack};
const ggml_quant_dot_fast k_avx2_q4_0 = {"avx2 q4_0", entry_q4_0, q4_0_pact_bytes, q4_0_pact_repack};
const ggml_quant_dot_fast k_avx2_q5_0 = {"avx2 q5_0", entry_q5_0, q8_act_bytes, q8_0_act_repack};
const ggml_quant_dot_fast k_avx2_q4_1 = {"avx2 q4_1", entry_q4_1, q8_1_act_bytes, q8_1_act_repack};
const ggml_quant_dot_fast k_avx2_q5_1 = {"avx2 q5_1", entry_q5_1, q8_1_act_bytes, q8_1_act_repack};
const ggml_quant_dot_fast k_avx2_q4_K = {"avx2 q4_K", entry_q4_K, nullptr, nullptr};
const ggml_quant_dot_fast k_avx2_q5_K = {"avx2 q5_K", entry_q5_K, nullptr, nullptr};
const ggml_quant_dot_fast k_avx2_q6_K = {"avx2 q6_K", entry_q6_K, nullptr, nullptr};

} // namespace

#pragma GCC pop_options

const ggml_quant_dot_fast * ggml_cpu_quant_dot_avx2(enum ggml_type type) {
    const ggml_cpu_features & f = ggml_cpu_active_features();
    if (!(f.avx2 && f.fma && f.f16c)) return nullptr;
    switch (type) {
        case GGML_TYPE_Q8_0: return &k_avx2_q8_0;
        case GGML_TYPE_Q4_0: return &k_avx2_q4_0;
        case GGML_TYPE_Q5_0: return &k_avx2_q5_0;
        case GGML_TYPE_Q4_1: return &k_avx2_q4_1;
        case GGML_TYPE_Q5_1: return &k_avx2_q5_1;
        case GGML_TYPE_Q4_K: return &k_avx2_q4_K;
        case GGML_TYPE_Q5_K: return &k_avx2_q5_K;
        case GGML_TYPE_Q6_K: return &k_avx2_q6_K;
        default: return nullptr;
    }
}

#else // not x86-64 GCC/Clang: the portable vec_dot_ref path does everything

const ggml_quant_dot_fast * ggml_cpu_quant_dot_avx2(enum ggml_type) { return nullptr; }

#endif
