// quant-dot-fast-avx512.cpp — AVX-512 + VNNI tiles for MUL_MAT with Q8_0, Q4_0, Q5_0, Q4_1, Q5_1,
// Q4_K, Q5_K and Q6_K weights (interface: quant-dot-fast.h). Activations arrive quantized by the
// reference quantizer (Q8_0 blocks for Q8_0/Q4_0/Q5_0, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants),
// so every integer sum here equals
// vec_dot_ref's; only the F32 scaling and summation order differ.
//
// Why the tiles look like this: vpdpbusd multiplies unsigned by signed bytes into 16 int32 lanes
// (4 products per lane). A micro-tile of R weight rows x C activation rows keeps R*C F32
// accumulators in registers; each 64-byte step of K costs one vpdpbusd per (row, column) plus a
// few ops to scale it, and the weight unpacking (nibbles, high bits, scales) is done once per row
// and shared by the C columns.
//  - Q8_0 (signed x signed): the activations are offset to unsigned (a + 128, an xor) and the
//    weight sums times 128 are subtracted, in the int32 lanes, by starting vpdpbusd from
//    -128 * sum(w) (itself one vpdpbusd of the weights with 0x80 bytes).
//  - Q4_0 / Q5_0: stored quants q are unsigned; x = d (q - 8) / d (q - 16): the accumulation starts
//    at -8 * sum(a) / -16 * sum(a). Q5_0's fifth bit is a byte-masked add of 16.
//  - Q4_1 / Q5_1: x = d q + m; the m * s terms are a separate dot product over the blocks.
//  - K-quants: per 32-element (Q4_K/Q5_K) or 16-element (Q6_K) sub-block, the int32 lanes of one
//    vpdpbusd fit in int16 (|lane| <= 4 * 63 * 128), so vpdpwssd multiplies them by the integer
//    sub-block scales and accumulates the super-block in int32; the float scale d_w * d_a is
//    applied once per 256 elements. Mins (Q4_K/Q5_K) use the activation's bsums; Q6_K's -32 offset
//    too, folded into the same int32 sum.

#include "quant-dot-fast.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include "formats/ggml-common.h"
#include "cpu-isa.h"

#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include <cstring>
#include <utility>

// Micro-tile shapes (weight rows x activation rows), chosen by CPU time per core on Zen 4 (K 3072,
// N 3072, M 256, one thread): Q8_0 2x8 115 GFLOP/s (4x4: 108, 3x6: 113, 4x5: 111); Q4_0 2x8 ~100
// (4x4: 89); K-quants 4x4 (2x8 was 5-12% slower: their per-row unpacking is shared by the columns
// of a super-block step, and the 4x4 tile keeps the unpacked row in registers).
#ifndef QMM_Q8_0_TR
#define QMM_Q8_0_TR 2
#define QMM_Q8_0_TC 8
#define QMM_Q4_0_TR 2
#define QMM_Q4_0_TC 8
#define QMM_K_TR 4
#define QMM_K_TC 4
#endif

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,fma,f16c")

namespace {

inline float h2f(ggml_fp16_t h) { return _cvtsh_ss(h); }

// lanes 0-7 = a, lanes 8-15 = b
inline __m512 two_scales(float a, float b) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(a)), _mm256_castps_pd(_mm256_set1_ps(b)), 1));
}

inline __m512i load_two_32(const void * lo, const void * hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *) lo)),
                              _mm256_loadu_si256((const __m256i *) hi), 1);
}

// ---------------------------------------------------------------------------------------------
// Q8_0 weights x Q8_0 activations

// 64 quants of blocks b and b+1 (or b and zeros when only b is left)
inline __m512i q8_0_pair(const block_q8_0 * blk, int64_t b, bool two) {
    if (two) return load_two_32(blk[b].qs, blk[b + 1].qs);
    return _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *) blk[b].qs));
}
inline __m512 q8_0_pair_d(const block_q8_0 * blk, int64_t b, bool two) {
    return two_scales(h2f(blk[b].d), two ? h2f(blk[b + 1].d) : 0.0f);
}

// Repacked Q8_0 activation row: per pair of blocks (one 64-element step) 64 bytes of quants as
// unsigned a + 128 (the xor of the Q8_0 tile) and 64 bytes of scales (lanes 0-7 the first block's d,
// 8-15 the second's; an odd last block is paired with zeros and scale 0).
constexpr size_t Q8_0_STEP = 128;

size_t q8_0_act_bytes(int64_t K) { return (size_t) ((K / QK8_0 + 1) / 2) * Q8_0_STEP; }

void q8_0_act_repack(const void * blocks, void * row, int64_t K) {
    const block_q8_0 * xb   = (const block_q8_0 *) blocks;
    const int64_t      nblk = K / QK8_0;
    char *             out  = (char *) row;
    const __m512i      k80  = _mm512_set1_epi8((char) 0x80);
    for (int64_t b = 0; b < nblk; b += 2) {
        const bool two = b + 1 < nblk;
        // zeros xor 0x80 = 128 = quant 0 (times a zero scale)
        _mm512_storeu_si512(out, _mm512_xor_si512(q8_0_pair(xb, b, two), k80));
        _mm512_storeu_ps(out + 64, q8_0_pair_d(xb, b, two));
        out += Q8_0_STEP;
    }
}

template <int R, int C>
void tile_q8_0(int64_t nblk, const char * w, size_t ws, const char * x, size_t xs, float * out, size_t ldo) {
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    const __m512i k80 = _mm512_set1_epi8((char) 0x80);
    for (int64_t b = 0; b < nblk; b += 2) {
        const bool   two = b + 1 < nblk;
        const char * xp  = x + (b / 2) * Q8_0_STEP;
        __m512i      xa[C];
        for (int c = 0; c < C; ++c) xa[c] = _mm512_loadu_si512((const void *) (xp + c * xs)); // a + 128
        for (int r = 0; r < R; ++r) {
            const block_q8_0 * wb   = (const block_q8_0 *) (w + r * ws);
            const __m512i      q    = q8_0_pair(wb, b, two);
            // -128 * (sum of 4 weights) per lane: the offset of the unsigned activations
            const __m512i      corr = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), k80, q));
            const __m512       wd   = q8_0_pair_d(wb, b, two);
            for (int c = 0; c < C; ++c) {
                const __m512i s  = _mm512_dpbusd_epi32(corr, xa[c], q);
                const __m512  xd = _mm512_loadu_ps((const float *) (xp + c * xs + 64));
                acc[r][c]        = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(wd, xd), acc[r][c]);
            }
        }
    }
    for (int c = 0; c < C; ++c)
        for (int r = 0; r < R; ++r) out[c * ldo + r] = _mm512_reduce_add_ps(acc[r][c]);
}

// ---------------------------------------------------------------------------------------------
// Q4_0 weights x Q8_0 activations

// 64 nibbles of blocks b, b+1 of a 32-element nibble type (Q4_0, Q4_1, and the low bits of Q5_0 /
// Q5_1) as bytes in element order (low nibbles = elements 0..15 of a block)
template <class B> inline __m512i nibble_pair(const B * blk, int64_t b, bool two) {
    const __m128i q0 = _mm_loadu_si128((const __m128i *) blk[b].qs);
    const __m128i q1 = two ? _mm_loadu_si128((const __m128i *) blk[b + 1].qs) : _mm_setzero_si128();
    const __m256i v  = _mm256_inserti128_si256(_mm256_castsi128_si256(q0), q1, 1);
    const __m256i m  = _mm256_set1_epi8(0x0F);
    const __m256i lo = _mm256_and_si256(v, m);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
    // [lo0 lo1 hi0 hi1] -> [lo0 hi0 lo1 hi1] (128-bit lanes)
    const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
}

// Q5_0 / Q5_1: the nibbles plus bit 4 of element j from bit j of qh; byte i of the pair is element
// i, so the two qh words are the byte mask of the +16 (a missing second block adds nothing)
template <class B> inline __m512i q5_pair(const B * blk, int64_t b, bool two) {
    uint32_t h0, h1 = 0;
    memcpy(&h0, blk[b].qh, 4);
    if (two) memcpy(&h1, blk[b + 1].qh, 4);
    const __mmask64 hm = (__mmask64) h0 | ((__mmask64) h1 << 32);
    const __m512i   q  = nibble_pair(blk, b, two);
    return _mm512_mask_add_epi8(q, hm, q, _mm512_set1_epi8(16));
}

template <class B, bool FIVE> inline __m512i quants_pair(const B * blk, int64_t b, bool two) {
    if constexpr (FIVE) return q5_pair(blk, b, two);
    else return nibble_pair(blk, b, two);
}

// the F16 scale d of blocks b and b+1, lanes 0-7 / 8-15
template <class B> inline __m512 d_pair(const B * blk, int64_t b, bool two) {
    return two_scales(h2f(blk[b].d), two ? h2f(blk[b + 1].d) : 0.0f);
}

// Repacked Q8_0 activation row for x = d (q - OFFSET) weights (Q4_0: 8, Q5_0: 16): per 64-element
// step the quants (signed, 64 B), -OFFSET * (sum of each lane's 4 quants) as int32 (64 B), and the
// scales (64 B).
constexpr size_t SYM_STEP = 192;

size_t sym_act_bytes(int64_t K) { return (size_t) ((K / QK8_0 + 1) / 2) * SYM_STEP; }

template <int OFFSET> void sym_act_repack(const void * blocks, void * row, int64_t K) {
    const block_q8_0 * xb   = (const block_q8_0 *) blocks;
    const int64_t      nblk = K / QK8_0;
    char *             out  = (char *) row;
    const __m512i      ko   = _mm512_set1_epi8(OFFSET);
    for (int64_t b = 0; b < nblk; b += 2) {
        const bool    two = b + 1 < nblk;
        const __m512i a   = q8_0_pair(xb, b, two);
        _mm512_storeu_si512(out, a);
        _mm512_storeu_si512(out + 64, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), ko, a)));
        _mm512_storeu_ps(out + 128, q8_0_pair_d(xb, b, two));
        out += SYM_STEP;
    }
}

// The block loop of the 32-element nibble types: per 64-element step and (row, column) one
// vpdpbusd of the unsigned stored quants with the signed activations, converted to F32 and scaled
// by d * d_a into acc. AFFINE (Q4_1 / Q5_1 against the affine row layout below): the int32 sum
// starts at 0, d_a at +64 of a 128-byte step; otherwise (Q4_0 / Q5_0, x = d (q - OFFSET)) it
// starts at the row's -OFFSET * sum(a) (+64), d_a at +128 of a 192-byte step.
template <int R, int C, class B, bool FIVE, bool AFFINE>
inline void nibble_block_loop(__m512 (&acc)[R][C], int64_t nblk, const char * w, size_t ws, const char * x, size_t xs) {
    constexpr size_t step = AFFINE ? 128 : SYM_STEP, scale_at = AFFINE ? 64 : 128;
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nblk; b += 2) {
        const bool   two = b + 1 < nblk;
        const char * xp  = x + (b / 2) * step;
        for (int r = 0; r < R; ++r) {
            const B *     wb = (const B *) (w + r * ws);
            const __m512i q  = quants_pair<B, FIVE>(wb, b, two);
            const __m512  wd = d_pair(wb, b, two);
            for (int c = 0; c < C; ++c) {
                const char *  xc   = xp + c * xs;
                const __m512i init = AFFINE ? _mm512_setzero_si512() : _mm512_loadu_si512((const void *) (xc + 64));
                const __m512i s    = _mm512_dpbusd_epi32(init, q, _mm512_loadu_si512((const void *) xc));
                acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(wd, _mm512_loadu_ps((const float *) (xc + scale_at))),
                                            acc[r][c]);
            }
        }
    }
}

// Q4_0 / Q5_0 weights (unsigned stored quants q, x = d (q - OFFSET)) x Q8_0 activations
template <int R, int C, class B, bool FIVE>
void tile_sym(int64_t nblk, const char * w, size_t ws, const char * x, size_t xs, float * out, size_t ldo) {
    __m512 acc[R][C];
    nibble_block_loop<R, C, B, FIVE, false>(acc, nblk, w, ws, x, xs);
    for (int c = 0; c < C; ++c)
        for (int r = 0; r < R; ++r) out[c * ldo + r] = _mm512_reduce_add_ps(acc[r][c]);
}
template <int R, int C> void tile_q4_0(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * o, size_t l) {
    tile_sym<R, C, block_q4_0, false>(n, w, ws, x, xs, o, l);
}
template <int R, int C> void tile_q5_0(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * o, size_t l) {
    tile_sym<R, C, block_q5_0, true>(n, w, ws, x, xs, o, l);
}

// ---------------------------------------------------------------------------------------------
// Q4_1 / Q5_1 weights (x = d q + m) x Q8_1 activations (a = d_a qa, s = d_a sum(qa)):
// sum(x a) = d d_a sum(q qa) + m s per block. The first term is the Q4_0 tile's loop (no offset);
// the second is a dot product of the row's mins with the activation row's block sums, done after
// the loop over 16 blocks at a time (an FMA per (row, column) per step inside the loop instead ran
// at 0.53-0.78x of our F32 GEMM at the square DiT shapes, this way 0.79-1.08x; Zen 4, 2 threads).

// Repacked Q8_1 activation row: per 64-element step the quants (signed, 64 B) and the scales d_a
// (64 B), lanes 0-7 the first block's, 8-15 the second's (an odd last block is paired with zeros);
// then the block sums s as F32, zero-padded to a multiple of 16 blocks.
constexpr size_t AFF_STEP = 128;

int64_t affine_steps(int64_t K) { return (K / QK8_1 + 1) / 2; }
int64_t affine_sums_padded(int64_t K) { return (K / QK8_1 + 15) / 16 * 16; }

size_t affine_act_bytes(int64_t K) {
    return (size_t) affine_steps(K) * AFF_STEP + (size_t) affine_sums_padded(K) * sizeof(float);
}

void affine_act_repack(const void * blocks, void * row, int64_t K) {
    const block_q8_1 * xb   = (const block_q8_1 *) blocks;
    const int64_t      nblk = K / QK8_1;
    char *             out  = (char *) row;
    for (int64_t b = 0; b < nblk; b += 2) {
        const bool    two = b + 1 < nblk;
        const __m512i a   = two ? load_two_32(xb[b].qs, xb[b + 1].qs)
                                : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *) xb[b].qs));
        _mm512_storeu_si512(out, a);
        _mm512_storeu_ps(out + 64, d_pair(xb, b, two));
        out += AFF_STEP;
    }
    float * sums = (float *) out;
    for (int64_t b = 0; b < affine_sums_padded(K); ++b) sums[b] = b < nblk ? h2f(xb[b].s) : 0.0f;
}

template <int R, int C, class B, bool FIVE>
void tile_affine(int64_t nblk, const char * w, size_t ws, const char * x, size_t xs, float * out, size_t ldo) {
    static_assert(AFF_STEP == 128, "nibble_block_loop's affine step");
    __m512 acc[R][C];
    nibble_block_loop<R, C, B, FIVE, true>(acc, nblk, w, ws, x, xs);
    // + sum over blocks of m * s
    const size_t sums_at = (size_t) ((nblk + 1) / 2) * AFF_STEP;
    for (int r = 0; r < R; ++r) {
        const B * wb = (const B *) (w + r * ws);
        __m512    ms[C];
        for (int c = 0; c < C; ++c) ms[c] = _mm512_setzero_ps();
        for (int64_t b0 = 0; b0 < nblk; b0 += 16) {
            alignas(64) float mv[16];
            for (int i = 0; i < 16; ++i) mv[i] = b0 + i < nblk ? h2f(wb[b0 + i].m) : 0.0f;
            const __m512 m = _mm512_load_ps(mv);
            for (int c = 0; c < C; ++c) {
                ms[c] = _mm512_fmadd_ps(m, _mm512_loadu_ps((const float *) (x + c * xs + sums_at) + b0), ms[c]);
            }
        }
        for (int c = 0; c < C; ++c) out[c * ldo + r] = _mm512_reduce_add_ps(acc[r][c]) + _mm512_reduce_add_ps(ms[c]);
    }
}
template <int R, int C> void tile_q4_1(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * o, size_t l) {
    tile_affine<R, C, block_q4_1, false>(n, w, ws, x, xs, o, l);
}
template <int R, int C> void tile_q5_1(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * o, size_t l) {
    tile_affine<R, C, block_q5_1, true>(n, w, ws, x, xs, o, l);
}

// ---------------------------------------------------------------------------------------------
// K-quants x Q8_K activations

// Q4_K/Q5_K: the 6-bit scales and mins of the 8 sub-blocks, unpacked from 12 bytes (layout in
// ggml-common.h: bytes 0-3 hold sc 0-3 (low 6 bits) and the top 2 bits of sc 4-7; bytes 4-7 the
// same for the mins; bytes 8-11 the low 4 bits of sc 4-7 (low nibble) and of m 4-7 (high nibble)).
// Done on 32-bit words: 4 sub-blocks per word.
inline void k_scales_mins(const uint8_t * s12, uint8_t sc[8], uint8_t mn[8]) {
    uint32_t w[3];
    memcpy(w, s12, 12);
    const uint32_t low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, low2 = 0x03030303u;
    const uint32_t sc03 = w[0] & low6;
    const uint32_t mn03 = w[1] & low6;
    const uint32_t sc47 = (w[2] & low4) | (((w[0] >> 6) & low2) << 4);
    const uint32_t mn47 = ((w[2] >> 4) & low4) | (((w[1] >> 6) & low2) << 4);
    memcpy(sc, &sc03, 4);
    memcpy(sc + 4, &sc47, 4);
    memcpy(mn, &mn03, 4);
    memcpy(mn + 4, &mn47, 4);
}

// Per weight row and super-block: the 4 unpacked 64-element steps (unsigned q), the int32 scale
// vector of each step (lanes 0-7: sub-block 2j, 8-15: 2j+1), the mins as int16 pairs matching the
// activation's bsums, and [d x8 | -dmin x8].
struct k4_row {
    __m512i q[4];
    __m512i sc[4];
    __m256i mn;
    __m512  dd;
};

inline void k_row_scales(const uint8_t * s12, ggml_fp16_t d, ggml_fp16_t dmin, k4_row & o) {
    uint8_t sc[8], mn[8];
    k_scales_mins(s12, sc, mn);
    uint64_t sc64, mn64;
    memcpy(&sc64, sc, 8);
    memcpy(&mn64, mn, 8);
    const __m512i all = _mm512_cvtepu8_epi32(_mm_cvtsi64_si128((long long) sc64)); // lanes 0-7 = sc
    for (int j = 0; j < 4; ++j) {
        const __m512i idx = _mm512_inserti64x4(_mm512_set1_epi32(2 * j), _mm256_set1_epi32(2 * j + 1), 1);
        o.sc[j]           = _mm512_permutexvar_epi32(idx, all);
    }
    const __m128i m8 = _mm_cvtsi64_si128((long long) mn64);
    o.mn             = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)); // m0 m0 m1 m1 ... (int16)
    o.dd             = two_scales(h2f(d), -h2f(dmin));
}

inline void q4_k_row(const block_q4_K & b, k4_row & o) {
    const __m256i m = _mm256_set1_epi8(0x0F);
    for (int j = 0; j < 4; ++j) {
        const __m256i v = _mm256_loadu_si256((const __m256i *) (b.qs + 32 * j));
        o.q[j] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(v, m)),
                                    _mm256_and_si256(_mm256_srli_epi16(v, 4), m), 1);
    }
    k_row_scales(b.scales, b.d, b.dmin, o);
}

inline void q5_k_row(const block_q5_K & b, k4_row & o) {
    const __m256i m  = _mm256_set1_epi8(0x0F);
    const __m512i hz = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *) b.qh));
    const __m512i k16 = _mm512_set1_epi8(16);
    for (int j = 0; j < 4; ++j) {
        const __m256i v = _mm256_loadu_si256((const __m256i *) (b.qs + 32 * j));
        __m512i       q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(v, m)),
                                             _mm256_and_si256(_mm256_srli_epi16(v, 4), m), 1);
        // fifth bit: bit 2j of qh[l] for element 64j + l, bit 2j+1 for element 64j + 32 + l
        const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8((char) (1u << (2 * j))),
                                                _mm256_set1_epi8((char) (1u << (2 * j + 1))), 1);
        q      = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(hz, bits), q, k16);
        o.q[j] = q;
    }
    k_row_scales(b.scales, b.d, b.dmin, o);
}

// One (weight row, activation row) super-block of Q4_K/Q5_K: acc += the F32 contribution.
inline __m512 k4_superblock(const k4_row & w, const block_q8_K & xb, __m512 acc) {
    __m512i isum = _mm512_setzero_si512();
    for (int j = 0; j < 4; ++j) {
        const __m512i a = _mm512_loadu_si512((const void *) (xb.qs + 64 * j));
        const __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.q[j], a); // |lane| <= 4*31*128
        isum            = _mm512_dpwssd_epi32(isum, t, w.sc[j]);
    }
    // 8 lanes of scaled sums, then 8 lanes of m_j * (sum of a over sub-block j)
    const __m256i main8 = _mm256_add_epi32(_mm512_castsi512_si256(isum), _mm512_extracti64x4_epi64(isum, 1));
    const __m256i mins8 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *) xb.bsums), w.mn);
    const __m512  f     = _mm512_cvtepi32_ps(_mm512_inserti64x4(_mm512_castsi256_si512(main8), mins8, 1));
    return _mm512_fmadd_ps(f, _mm512_mul_ps(w.dd, _mm512_set1_ps(xb.d)), acc);
}

template <int R, int C, typename BLK, void (*UNPACK)(const BLK &, k4_row &)>
void tile_k4(int64_t nblk, const char * w, size_t ws, const char * x, size_t xs, float * out, size_t ldo) {
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nblk; ++i) {
        for (int r = 0; r < R; ++r) {
            k4_row wr;
            UNPACK(((const BLK *) (w + r * ws))[i], wr);
            for (int c = 0; c < C; ++c) acc[r][c] = k4_superblock(wr, ((const block_q8_K *) (x + c * xs))[i], acc[r][c]);
        }
    }
    for (int c = 0; c < C; ++c)
        for (int r = 0; r < R; ++r) out[c * ldo + r] = _mm512_reduce_add_ps(acc[r][c]);
}

template <int R, int C> void tile_q4_K(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * o, size_t l) {
    tile_k4<R, C, block_q4_K, q4_k_row>(n, w, ws, x, xs, o, l);
}
template <int R, int C> void tile_q5_K(int64_t n, const char * w, size_t ws, const char * x, size_t xs, float * o, size_t l) {
    tile_k4<R, C, block_q5_K, q5_k_row>(n, w, ws, x, xs, o, l);
}

// Q6_K: q = 6 bits (0..63) with x = d * sc * (q - 32); 16 sub-blocks of 16 with int8 scales.
struct k6_row {
    __m512i q[4];
    __m512i sc[4]; // int32 lanes holding the int16 scale in the low half (high half 0)
    __m512i off;   // int16 -32 * sc_j in the low 256 bits (pairs with bsums_j), 0 above
    float   d;
};

inline void q6_k_row(const block_q6_K & b, k6_row & o) {
    const __m512i lo4 = _mm512_set1_epi8(0x0F);
    const __m512i lo2 = _mm512_set1_epi8(0x03);
    for (int h = 0; h < 2; ++h) {
        // element 128h + 32g + l (g = 0..3, l < 32): low 4 bits from ql[64h + l + 32 (g & 1)] (low
        // nibble for g < 2, high for g >= 2), high 2 bits from qh[32h + l] bits 2g, 2g+1
        const __m512i ql = _mm512_loadu_si512((const void *) (b.ql + 64 * h));
        const __m256i qh = _mm256_loadu_si256((const __m256i *) (b.qh + 32 * h));
        const __m512i hz = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
        const __m512i hA = _mm512_slli_epi16(_mm512_and_si512(hz, lo2), 4);
        const __m512i hB = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hz, 4), lo2), 4);
        o.q[2 * h]     = _mm512_or_si512(_mm512_and_si512(ql, lo4), hA);
        o.q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), lo4), hB);
    }
    const __m128i s8  = _mm_loadu_si128((const __m128i *) b.scales);
    const __m512i all = _mm512_and_si512(_mm512_cvtepi8_epi32(s8), _mm512_set1_epi32(0xFFFF));
    for (int s = 0; s < 4; ++s) {
        // lane l of step s belongs to sub-block 4s + l/4
        const __m512i idx = _mm512_set_epi32(4 * s + 3, 4 * s + 3, 4 * s + 3, 4 * s + 3, 4 * s + 2, 4 * s + 2, 4 * s + 2,
                                             4 * s + 2, 4 * s + 1, 4 * s + 1, 4 * s + 1, 4 * s + 1, 4 * s, 4 * s, 4 * s, 4 * s);
        o.sc[s] = _mm512_permutexvar_epi32(idx, all);
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(s8);
    o.off              = _mm512_zextsi256_si512(_mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5)));
    o.d                = h2f(b.d);
}

inline __m512 k6_superblock(const k6_row & w, const block_q8_K & xb, __m512 acc) {
    __m512i isum = _mm512_dpwssd_epi32(_mm512_setzero_si512(),
                                       _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *) xb.bsums)), w.off);
    for (int j = 0; j < 4; ++j) {
        const __m512i a = _mm512_loadu_si512((const void *) (xb.qs + 64 * j));
        const __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.q[j], a); // |lane| <= 4*63*128
        isum            = _mm512_dpwssd_epi32(isum, t, w.sc[j]);
    }
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(w.d * xb.d), acc);
}

template <int R, int C>
void tile_q6_K(int64_t nblk, const char * w, size_t ws, const char * x, size_t xs, float * out, size_t ldo) {
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nblk; ++i) {
        for (int r = 0; r < R; ++r) {
            k6_row wr;
            q6_k_row(((const block_q6_K *) (w + r * ws))[i], wr);
            for (int c = 0; c < C; ++c) acc[r][c] = k6_superblock(wr, ((const block_q8_K *) (x + c * xs))[i], acc[r][c]);
        }
    }
    for (int c = 0; c < C; ++c)
        for (int r = 0; r < R; ++r) out[c * ldo + r] = _mm512_reduce_add_ps(acc[r][c]);
}

// ---------------------------------------------------------------------------------------------
// Tiling of a (rows x columns) block into exact-size micro-tiles.

using micro_fn = void (*)(int64_t, const char *, size_t, const char *, size_t, float *, size_t);

// Exact-size micro-tiles up to TR x TC for every edge: table[r-1][c-1] = tile<r, c>.
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

// Weight micro-panels outermost (their TR rows stay in L1 while the block's activation rows pass).
template <typename T> void run_tiles(int64_t K, const char * w, size_t ws, int nr, const char * x, size_t xs, int nc, float * out,
                                     size_t ldo) {
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

// Per type: block size and micro-tile (R*C accumulators + the shared operands fit the 32 zmm).
#define QDOT_KERNEL(T, qk, tr, tc)                                                                                  \
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
QDOT_KERNEL(q8_0, QK8_0, QMM_Q8_0_TR, QMM_Q8_0_TC)
QDOT_KERNEL(q4_0, QK4_0, QMM_Q4_0_TR, QMM_Q4_0_TC)
QDOT_KERNEL(q5_0, QK5_0, QMM_Q4_0_TR, QMM_Q4_0_TC)
QDOT_KERNEL(q4_1, QK4_1, QMM_Q4_0_TR, QMM_Q4_0_TC)
QDOT_KERNEL(q5_1, QK5_1, QMM_Q4_0_TR, QMM_Q4_0_TC)
QDOT_KERNEL(q4_K, QK_K, QMM_K_TR, QMM_K_TC)
QDOT_KERNEL(q5_K, QK_K, QMM_K_TR, QMM_K_TC)
QDOT_KERNEL(q6_K, QK_K, QMM_K_TR, QMM_K_TC)

const ggml_quant_dot_fast k_fast_q8_0 = {"avx512 vnni q8_0", entry_q8_0, q8_0_act_bytes, q8_0_act_repack};
const ggml_quant_dot_fast k_fast_q4_0 = {"avx512 vnni q4_0", entry_q4_0, sym_act_bytes, sym_act_repack<8>};
const ggml_quant_dot_fast k_fast_q5_0 = {"avx512 vnni q5_0", entry_q5_0, sym_act_bytes, sym_act_repack<16>};
const ggml_quant_dot_fast k_fast_q4_1 = {"avx512 vnni q4_1", entry_q4_1, affine_act_bytes, affine_act_repack};
const ggml_quant_dot_fast k_fast_q5_1 = {"avx512 vnni q5_1", entry_q5_1, affine_act_bytes, affine_act_repack};
const ggml_quant_dot_fast k_fast_q4_K = {"avx512 vnni q4_K", entry_q4_K, nullptr, nullptr};
const ggml_quant_dot_fast k_fast_q5_K = {"avx512 vnni q5_K", entry_q5_K, nullptr, nullptr};
const ggml_quant_dot_fast k_fast_q6_K = {"avx512 vnni q6_K", entry_q6_K, nullptr, nullptr};

} // namespace

#pragma GCC pop_options

const ggml_quant_dot_fast * ggml_cpu_quant_dot_avx512(enum ggml_type type) {
    const ggml_cpu_features & f = ggml_cpu_active_features();
    if (!(f.avx512f && f.avx512bw && f.avx512vl && f.avx512_vnni && f.f16c && f.fma)) return nullptr;
    switch (type) {
        case GGML_TYPE_Q8_0: return &k_fast_q8_0;
        case GGML_TYPE_Q4_0: return &k_fast_q4_0;
        case GGML_TYPE_Q5_0: return &k_fast_q5_0;
        case GGML_TYPE_Q4_1: return &k_fast_q4_1;
        case GGML_TYPE_Q5_1: return &k_fast_q5_1;
        case GGML_TYPE_Q4_K: return &k_fast_q4_K;
        case GGML_TYPE_Q5_K: return &k_fast_q5_K;
        case GGML_TYPE_Q6_K: return &k_fast_q6_K;
        default: return nullptr;
    }
}

#else // not x86-64 GCC/Clang: the portable vec_dot_ref path does everything

const ggml_quant_dot_fast * ggml_cpu_quant_dot_avx512(enum ggml_type) { return nullptr; }

#endif
