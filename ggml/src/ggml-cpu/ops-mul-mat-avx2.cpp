// ops-mul-mat-avx2.cpp — the AVX2 level of the x86 MUL_MAT fast path: out[m][n] = sum_k x[m][k] *
// w[n][k] (facts 4.8), w = src0 (weights: F32, F16, BF16, or block-quantized types the packing
// dequantizes), x = src1 (F32, F16 or BF16 activations, any strides; F16/BF16 widened exactly while
// packing or gathering, no separate F32 copy). Same semantics as the AVX-512 "f32fma"
// kernels of ops-mul-mat-x86.cpp: F16/BF16 weights are widened exactly to F32, every product and
// sum is F32, activations are never rounded. Written for CPUs with AVX2 + FMA + F16C and no
// AVX-512 (AMD Zen 1-3, Intel Haswell..Alder Lake): 16 ymm registers, two 256-bit FMA pipes.
//
// Paths:
//   small: M <= SMALL_M_MAX activation rows (decode-like). Each weight element is used only M
//          times, so packing would cost as much as the arithmetic: dot products straight from the
//          weight rows, vectors along K, 4 weight rows x up to 3 activation rows per pass (12
//          accumulators, enough independent FMA chains to cover the FMA latency on both pipes).
//   f32:   packed, cache-blocked GEMM with a 6 x 16 FMA micro-kernel (6 activation rows
//          broadcast, 16 weight columns in two ymm: 12 accumulators + 2 weight vectors + 1
//          broadcast = 15 of the 16 ymm). Per K step: 12 FMAs (6 cycles on 2 pipes) against 2
//          vector loads and 6 broadcast loads, well within Zen 3's 3 loads per cycle.
//
// Packed GEMM structure: every thread packs a share of all activation matrices into the work
// buffer (per matrix, per K block of KC, per panel of MR rows, k-major [k][MR]), then a barrier.
// Output work is a list of (matrix, M chunk, 16-column weight panel) items in contiguous
// per-thread ranges; a thread takes runs of up to NC_PANELS panels, and per K block packs those
// weight panels into its private buffer ([k][16] F32, widened or dequantized on the way), then for
// every MC_ROWS activation rows sweeps: weight panel (16 KiB, stays in L1) x the activation panels
// of those rows (144 KiB, stay in L2). That is the order of BLIS's Haswell/Zen kernels: per K step
// the L1 misses are the 6 broadcast floats (24 bytes from L2), not the 64 bytes of weights; the
// AVX-512 level (larger L2, 32 columns per tile) keeps the opposite order.
//
// Operand swap: when src0 has fewer rows than src1 (stable-diffusion.cpp's conv_2d multiplies the
// F16 im2col matrix of a few pixels, src0, by a large F16 kernel, src1) the roles are exchanged:
// src0 is packed whole (or gathered, for the small-M path) and src1 streams through the per-thread
// panels, and the micro-kernel stores its tile transposed. The large operand is then read once as
// F16 instead of being written and read back as packed F32, and the work buffer holds the small one.
//
// Thresholds (SMALL_M_MAX, MC_ROWS) were measured on an AMD EPYC Zen 3 (2 cores, 512 KiB L2 per
// core, shared with other work: CPU-time timings, best of several).

#include "ops-mul-mat-avx2.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace {

constexpr int     NR        = 16;  // weight columns per micro-tile (two ymm)
constexpr int     MR        = 6;   // activation rows per micro-tile (12 accumulators)
constexpr int64_t KC        = 256; // K block (elements): a 16-column weight panel is 16 KiB
constexpr int64_t NC_PANELS = 24;  // weight panels packed per K block: 384 columns, 384 KiB
constexpr int64_t MC_ROWS   = 144; // activation rows swept per weight panel: 144 KiB of packed rows
// Up to this many activation rows the small-M dot products beat packing the weights (Zen 3, one
// thread, CPU time: 1.1-1.5x the packed GEMM at M = 8..16 and K = 3072 / 12288 for F32 and BF16
// weights, ~1.1x at 24, even at 32).
constexpr int64_t SMALL_M_MAX = 24;
constexpr size_t  ALIGN       = 64;
// Operand swap (plan::swap): src0 rows up to this many, or src1 packed whole over this many bytes.
constexpr int64_t SWAP_N_MAX   = 128;
constexpr size_t  SWAP_X_BYTES = (size_t) 16 << 20;

enum class path { none, small, f32 };


inline int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }
inline size_t  align_up(size_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }
inline char *  align_ptr(void * p) { return (char *) (((uintptr_t) p + ALIGN - 1) & ~(uintptr_t) (ALIGN - 1)); }

bool dequantizes(ggml_type t) {
    // whole blocks per K block (KC = 256: the 32- and 256-element block types)
    return ggml_blck_size(t) > 1 && KC % ggml_blck_size(t) == 0 && ggml_get_type_traits(t)->to_float != nullptr;
}

struct plan {
    path    p = path::none;
    // GEMM view: out[m][n] = x[m] . w[n]. Normally x = src1 (activations, M rows) and w = src0
    // (weights, N rows). swapped: x = src0 and w = src1 (the output is stored transposed), chosen
    // when src0 has fewer rows than src1 (stable-diffusion.cpp's conv_2d: src0 = the im2col
    // matrix of a few pixels, src1 = a large F16 kernel): the small operand is the one packed or
    // gathered whole into the work buffer, the large one streams through the per-thread panels.
    bool                       swap = false;
    const struct ggml_tensor * xs   = nullptr; // x operand (F32, F16 or BF16, any strides)
    const struct ggml_tensor * ws   = nullptr; // w operand (packed rows)
    int64_t K, N, M, B2, B3, r2, r3, n_mats;    // r2, r3: broadcast ratios of ws over the output
    int64_t mp;      // M rounded up to MR
    size_t  x_bytes; // packed (or gathered) activations, all matrices
    size_t  w_bytes; // one thread's packed weight block
};

bool x_type_ok(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }

plan make_plan(const struct ggml_tensor * dst) {
    plan                       pl;
    const struct ggml_tensor * a = dst->src[0];
    const struct ggml_tensor * b = dst->src[1];
    if (!a || !b) return pl;
    const bool quant = dequantizes(a->type);
    if (a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_F16 && a->type != GGML_TYPE_BF16 && !quant) return pl;
    if (quant && a->ne[0] % ggml_blck_size(a->type) != 0) return pl;
    if (!x_type_ok(b->type) || dst->type != GGML_TYPE_F32 || dst->nb[0] != sizeof(float)) return pl;
    if (a->ne[0] > 1 && a->nb[0] != ggml_type_size(a->type)) return pl;
    if (a->ne[0] != b->ne[0] || a->ne[2] <= 0 || a->ne[3] <= 0) return pl;
    if (b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) return pl;

    pl.K      = a->ne[0];
    pl.N      = a->ne[1];
    pl.M      = b->ne[1];
    pl.B2     = b->ne[2];
    pl.B3     = b->ne[3];
    pl.r2     = pl.B2 / a->ne[2];
    pl.r3     = pl.B3 / a->ne[3];
    pl.n_mats = pl.B2 * pl.B3;
    pl.xs     = b;
    pl.ws     = a;
    if (pl.K == 0) return pl; // the portable path writes the zeros

    // swap the roles when src0 is the smaller operand (no broadcast, float types, packed src1 rows)
    // and either small (packing src1 whole would cost about as much memory traffic as the
    // arithmetic: 8 bytes per element against 2 N flops) or src1's packed copy would be large (the
    // work buffer); otherwise the plain orientation keeps its cheaper stores
    const size_t x_whole = (size_t) (pl.n_mats * round_up(pl.M, MR) * pl.K) * sizeof(float);
    if (!quant && pl.M > SMALL_M_MAX && pl.N < pl.M && (pl.N <= SWAP_N_MAX || x_whole > SWAP_X_BYTES) &&
        a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3] && (pl.K <= 1 || b->nb[0] == ggml_type_size(b->type))) {
        pl.swap = true;
        std::swap(pl.M, pl.N);
        std::swap(pl.xs, pl.ws);
        pl.r2 = pl.r3 = 1;
    }
    const struct ggml_tensor * x = pl.xs;

    // (quantized weights: the small-M dot reads float rows only, so they always take the packed GEMM)
    if (!quant && pl.M <= SMALL_M_MAX) {
        pl.p       = path::small;
        const bool direct = x->type == GGML_TYPE_F32 && x->nb[0] == sizeof(float);
        pl.x_bytes = direct ? 0 : align_up((size_t) (pl.n_mats * pl.M * pl.K) * sizeof(float));
        pl.w_bytes = 0;
        return pl;
    }
    pl.p       = path::f32;
    pl.mp      = round_up(pl.M, MR);
    pl.x_bytes = align_up((size_t) (pl.n_mats * pl.mp * pl.K) * sizeof(float));
    pl.w_bytes = align_up((size_t) (NC_PANELS * NR * std::min(KC, pl.K)) * sizeof(float));
    return pl;
}

size_t plan_bytes(const plan & pl, int n_threads) {
    if (pl.p == path::none) return 0;
    const size_t bytes = pl.x_bytes + (size_t) n_threads * pl.w_bytes;
    return bytes == 0 ? 0 : bytes + ALIGN;
}

// ---------------------------------------------------------------------------------------------
// activations

// 8 elements of a row from element k, widened exactly to F32.
template <ggml_type T> inline __m256 load8(const char * row, int64_t k) {
    if constexpr (T == GGML_TYPE_F32) {
        return _mm256_loadu_ps((const float *) row + k);
    } else if constexpr (T == GGML_TYPE_F16) {
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) ((const uint16_t *) row + k)));
    } else {
        // BF16 is the top half of an F32: shift into place (exact, NaN payloads included)
        const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) ((const uint16_t *) row + k)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    }
}

// The same for the last n < 8 elements of a row (the rest zero), without reading past them.
template <ggml_type T> inline __m256 load8_tail(const char * row, int64_t k, int64_t n) {
    constexpr size_t esz = T == GGML_TYPE_F32 ? 4 : 2;
    alignas(32) char tmp[32] = {0};
    memcpy(tmp, row + (size_t) k * esz, (size_t) n * esz);
    return load8<T>(tmp, 0);
}

// Element (k = 0) of x row m of matrix mat; elements are nb0 bytes apart, of type F32/F16/BF16.
struct act_view {
    const char * data;
    ggml_type    type;
    size_t       nb0, nb1, nb2, nb3;
    int64_t      B2;
    const char * row(int64_t mat, int64_t m) const { return data + (mat % B2) * nb2 + (mat / B2) * nb3 + m * nb1; }
    float at(const char * r, int64_t k) const {
        const char * p = r + k * nb0;
        switch (type) {
            case GGML_TYPE_F32: return *(const float *) p;
            case GGML_TYPE_F16: return _cvtsh_ss(*(const uint16_t *) p);
            default: {
                const uint32_t u = (uint32_t) * (const uint16_t *) p << 16;
                float          f;
                memcpy(&f, &u, sizeof(f));
                return f;
            }
        }
    }
    bool packed() const { return nb0 == ggml_type_size(type); }
};

act_view make_act_view(const struct ggml_tensor * x, int64_t B2) {
    return {(const char *) x->data, x->type, x->nb[0], x->nb[1], x->nb[2], x->nb[3], B2};
}

// A whole x row widened to F32 (k in [0, K)).
void widen_x_row(const act_view & xv, const char * src, int64_t K, float * d) {
    if (!xv.packed() || xv.type == GGML_TYPE_F32) {
        if (xv.type == GGML_TYPE_F32 && xv.packed()) {
            memcpy(d, src, (size_t) K * sizeof(float));
        } else {
            for (int64_t k = 0; k < K; ++k) d[k] = xv.at(src, k);
        }
        return;
    }
    int64_t k = 0;
    if (xv.type == GGML_TYPE_F16) {
        for (; k + 8 <= K; k += 8) _mm256_storeu_ps(d + k, load8<GGML_TYPE_F16>(src, k));
    } else {
        for (; k + 8 <= K; k += 8) _mm256_storeu_ps(d + k, load8<GGML_TYPE_BF16>(src, k));
    }
    for (; k < K; ++k) d[k] = xv.at(src, k);
}

// Panel of MR rows starting at m0 (rows of them real, the rest zero), K range [k0, k0+valid):
// F32 [k][MR].
template <ggml_type T>
void pack_x_panel_full(const char * const src[MR], int64_t k0, int64_t valid, float * dst, const act_view & xv) {
    // 8 K steps of all 6 rows at once: 6 row loads, then 48 scalar stores from registers (the
    // [k][6] layout has no 8-wide lane pattern a shuffle network would beat at this size)
    int64_t k = 0;
    for (; k + 8 <= valid; k += 8) {
        alignas(32) float t[MR][8];
        for (int r = 0; r < MR; ++r) _mm256_store_ps(t[r], load8<T>(src[r], k0 + k));
        for (int i = 0; i < 8; ++i)
            for (int r = 0; r < MR; ++r) dst[(k + i) * MR + r] = t[r][i];
    }
    for (; k < valid; ++k)
        for (int r = 0; r < MR; ++r) dst[k * MR + r] = xv.at(src[r], k0 + k);
}

void pack_x_panel(const act_view & xv, int64_t mat, int64_t m0, int64_t rows, int64_t k0, int64_t valid, float * dst) {
    const char * src[MR];
    for (int r = 0; r < MR; ++r) src[r] = r < rows ? xv.row(mat, m0 + r) : nullptr;
    if (xv.packed() && rows == MR) {
        switch (xv.type) {
            case GGML_TYPE_F32: pack_x_panel_full<GGML_TYPE_F32>(src, k0, valid, dst, xv); return;
            case GGML_TYPE_F16: pack_x_panel_full<GGML_TYPE_F16>(src, k0, valid, dst, xv); return;
            default: pack_x_panel_full<GGML_TYPE_BF16>(src, k0, valid, dst, xv); return;
        }
    }
    for (int r = 0; r < MR; ++r) {
        if (!src[r]) {
            for (int64_t k = 0; k < valid; ++k) dst[k * MR + r] = 0.0f;
        } else {
            for (int64_t k = 0; k < valid; ++k) dst[k * MR + r] = xv.at(src[r], k0 + k);
        }
    }
}

// Every thread packs a share of all activation matrices.
void pack_x_all(const plan & pl, const act_view & xv, float * xbuf, int ith, int nth) {
    const int64_t panels_per_mat = pl.mp / MR;
    const int64_t n_items        = pl.n_mats * panels_per_mat;
    int64_t       i0, i1;
    ggml_cpu_split_range(n_items, ith, nth, &i0, &i1);
    for (int64_t it = i0; it < i1; ++it) {
        const int64_t mat  = it / panels_per_mat;
        const int64_t ip   = it % panels_per_mat;
        const int64_t m0   = ip * MR;
        const int64_t rows = std::min<int64_t>(MR, pl.M - m0);
        float *       base = xbuf + mat * pl.mp * pl.K;
        for (int64_t k0 = 0; k0 < pl.K; k0 += KC) {
            const int64_t valid = std::min(KC, pl.K - k0);
            // the K block starts at mp * k0 elements (earlier blocks are full)
            pack_x_panel(xv, mat, m0, rows, k0, valid, base + pl.mp * k0 + ip * MR * valid);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// weights: 8 rows x 8 elements at a time, widened to F32 and transposed in registers

// In-register transpose of an 8x8 matrix of floats: r[i] lane j -> r[j] lane i.
inline void transpose8(__m256 r[8]) {
    __m256 t[8], s[8];
    for (int i = 0; i < 4; ++i) {
        t[2 * i]     = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // t[0] = r0[0] r1[0] r0[1] r1[1] | r0[4] r1[4] r0[5] r1[5]; t[1]: elements 2,3 | 6,7
    for (int i = 0; i < 2; ++i) {
        s[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        s[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        s[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        s[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    // s[c] (c < 4), 128-bit half h = rows 0..3 at element c + 4h; s[4 + c]: rows 4..7
    for (int c = 0; c < 4; ++c) {
        r[c]     = _mm256_permute2f128_ps(s[c], s[4 + c], 0x20);
        r[c + 4] = _mm256_permute2f128_ps(s[c], s[4 + c], 0x31);
    }
}

// 8 weight rows (rows of them real, the rest zero columns), elements [0, valid) from src[i] ->
// dst[k * NR + i] (dst: one half of a [k][16] panel, 32-byte aligned).
template <ggml_type T> void pack_w_group(const char * const src[8], int rows, int64_t valid, float * dst) {
    __m256  r[8];
    int64_t k = 0;
    for (; k + 8 <= valid; k += 8) {
        for (int i = 0; i < 8; ++i) r[i] = i < rows ? load8<T>(src[i], k) : _mm256_setzero_ps();
        transpose8(r);
        for (int i = 0; i < 8; ++i) _mm256_store_ps(dst + (k + i) * NR, r[i]);
    }
    if (k < valid) {
        const int64_t n = valid - k;
        for (int i = 0; i < 8; ++i) r[i] = i < rows ? load8_tail<T>(src[i], k, n) : _mm256_setzero_ps();
        transpose8(r);
        for (int64_t i = 0; i < n; ++i) _mm256_store_ps(dst + (k + i) * NR, r[i]);
    }
}

// n_cols weight rows from row0 (row stride nb1), K range [k0, k0+valid) -> dst [panel][k][16],
// zero columns past n_cols. Block-quantized rows (k0 and valid whole blocks) are dequantized by
// the type's to_float, 8 rows x one K block at a time, then packed as F32.
void pack_w(ggml_type t, const char * row0, size_t nb1, int64_t n_cols, int64_t k0, int64_t valid, float * dst) {
    const bool    quant    = ggml_blck_size(t) > 1;
    const size_t  k0_bytes = ggml_row_size(t, k0);
    const int64_t n_panels = (n_cols + NR - 1) / NR;
    alignas(64) float deq[8][KC]; // 8 KiB: the dequantized rows of one 8-row group
    for (int64_t p = 0; p < n_panels; ++p) {
        float * pd = dst + p * valid * NR;
        for (int j0 = 0; j0 < NR; j0 += 8) {
            const int64_t c0   = p * NR + j0;
            const int     rows = (int) std::max<int64_t>(0, std::min<int64_t>(8, n_cols - c0));
            const char *  src[8];
            for (int i = 0; i < 8; ++i) {
                src[i] = i < rows ? row0 + (c0 + i) * nb1 + k0_bytes : nullptr;
                if (quant && i < rows) {
                    ggml_get_type_traits(t)->to_float(src[i], deq[i], valid);
                    src[i] = (const char *) deq[i];
                }
            }
            switch (quant ? GGML_TYPE_F32 : t) {
                case GGML_TYPE_F32: pack_w_group<GGML_TYPE_F32>(src, rows, valid, pd + j0); break;
                case GGML_TYPE_F16: pack_w_group<GGML_TYPE_F16>(src, rows, valid, pd + j0); break;
                default: pack_w_group<GGML_TYPE_BF16>(src, rows, valid, pd + j0); break;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// micro-kernel: R (<= MR) rows x 16 columns over kc K steps. xp: [kc][MR] activations, wp: [kc][16]
// weights; c rows are ldc floats apart, cols (<= 16) of them are stored; acc: add to c (later K
// blocks) instead of overwriting it.

// lanes [0, n) set for a masked load/store of n (0..8) floats
inline __m256i lane_mask(int n) {
    static const int32_t tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *) (tab + 8 - n));
}

// tr (swapped operands): element (r, j) of the tile goes to c[j * ldc + r] instead of c[r * ldc + j].
template <int R>
void ukr(int64_t kc, const float * xp, const float * wp, float * c, int64_t ldc, int cols, bool acc, bool tr) {
    __m256 c0[R], c1[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        c0[r] = c1[r] = _mm256_setzero_ps();
        // the C lines are read (later K blocks) or written after ~kc * 6 cycles of arithmetic:
        // asking for them now hides their miss
        if (!tr) {
            _mm_prefetch((const char *) (c + r * ldc), _MM_HINT_T0);
            _mm_prefetch((const char *) (c + r * ldc + NR - 1), _MM_HINT_T0);
        }
    }
    // unrolled 4x (less loop overhead per 12 FMAs); the activation panel streams from L2, so its
    // line 8 K steps ahead is requested now (~3% at 2 threads on Zen 3, M = 256)
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; ++k) {
        _mm_prefetch((const char *) (xp + 8 * MR), _MM_HINT_T0);
        const __m256 w0 = _mm256_load_ps(wp);
        const __m256 w1 = _mm256_load_ps(wp + 8);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const __m256 xb = _mm256_broadcast_ss(xp + r);
            c0[r]           = _mm256_fmadd_ps(w0, xb, c0[r]);
            c1[r]           = _mm256_fmadd_ps(w1, xb, c1[r]);
        }
        xp += MR;
        wp += NR;
    }
    if (tr) {
        // 8 x 8 register transposes of the (up to 6, zero-padded) rows: column j of the tile is
        // then one vector whose lanes [0, R) are stored at c + j * ldc
        const __m256i mr = lane_mask(R);
        for (int h = 0; h < 2; ++h) {
            __m256 t[8];
            for (int r = 0; r < 8; ++r) t[r] = r < R ? (h ? c1[r < R ? r : 0] : c0[r < R ? r : 0]) : _mm256_setzero_ps();
            transpose8(t);
            const int jn = std::min(cols - 8 * h, 8);
            for (int j = 0; j < jn; ++j) {
                float * cj = c + (int64_t) (8 * h + j) * ldc;
                if constexpr (R == MR) {
                    // 6 lanes as 4 + 2 plain stores (cheaper than a masked store)
                    __m128 lo = _mm256_castps256_ps128(t[j]), hi = _mm256_extractf128_ps(t[j], 1);
                    if (acc) {
                        lo = _mm_add_ps(lo, _mm_loadu_ps(cj));
                        hi = _mm_add_ps(hi, _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *) (cj + 4))));
                    }
                    _mm_storeu_ps(cj, lo);
                    _mm_storel_epi64((__m128i *) (cj + 4), _mm_castps_si128(hi));
                } else {
                    __m256 v = t[j];
                    if (acc) v = _mm256_add_ps(v, _mm256_maskload_ps(cj, mr));
                    _mm256_maskstore_ps(cj, mr, v);
                }
            }
        }
        return;
    }
    if (cols == NR) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            float * cr = c + r * ldc;
            if (acc) {
                c0[r] = _mm256_add_ps(c0[r], _mm256_loadu_ps(cr));
                c1[r] = _mm256_add_ps(c1[r], _mm256_loadu_ps(cr + 8));
            }
            _mm256_storeu_ps(cr, c0[r]);
            _mm256_storeu_ps(cr + 8, c1[r]);
        }
        return;
    }
    const __m256i m0 = lane_mask(std::min(cols, 8)), m1 = lane_mask(std::max(cols - 8, 0));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
        float * cr = c + r * ldc;
        if (acc) {
            c0[r] = _mm256_add_ps(c0[r], _mm256_maskload_ps(cr, m0));
            c1[r] = _mm256_add_ps(c1[r], _mm256_maskload_ps(cr + 8, m1));
        }
        _mm256_maskstore_ps(cr, m0, c0[r]);
        _mm256_maskstore_ps(cr + 8, m1, c1[r]);
    }
}

using ukr_fn = void (*)(int64_t, const float *, const float *, float *, int64_t, int, bool, bool);
const ukr_fn k_ukr[MR] = {&ukr<1>, &ukr<2>, &ukr<3>, &ukr<4>, &ukr<5>, &ukr<6>};

// ---------------------------------------------------------------------------------------------
// packed GEMM driver

// GEMM element (m, n) of matrix mat: dst row m, column n; swapped: dst row n, column m.
struct out_view {
    char *  data;
    size_t  nb1, nb2, nb3;
    int64_t B2;
    bool    swap;
    float * at(int64_t mat, int64_t m, int64_t n) const {
        if (swap) std::swap(m, n);
        return (float *) (data + (mat % B2) * nb2 + (mat / B2) * nb3 + m * nb1) + n;
    }
};

out_view make_out_view(const plan & pl, struct ggml_tensor * dst) {
    return {(char *) dst->data, dst->nb[1], dst->nb[2], dst->nb[3], pl.B2, pl.swap};
}

// One run: matrix mat, activation rows [m0, m1) (m0 a multiple of MR), weight columns [n0, n0+nn).
void gemm_run(const plan & pl, const struct ggml_tensor * a /* = pl.ws */, const float * xbuf, float * wbuf, const out_view & ov,
              int64_t mat, int64_t m0, int64_t m1, int64_t n0, int64_t nn) {
    const int64_t i2 = mat % pl.B2, i3 = mat / pl.B2;
    const char *  w_mat    = (const char *) a->data + (i2 / pl.r2) * a->nb[2] + (i3 / pl.r3) * a->nb[3];
    const char *  row0     = w_mat + n0 * a->nb[1];
    const int64_t n_panels = (nn + NR - 1) / NR;
    const int64_t ldc      = (int64_t) (ov.nb1 / sizeof(float));
    const float * x_mat    = xbuf + mat * pl.mp * pl.K;

    for (int64_t k0 = 0; k0 < pl.K; k0 += KC) {
        const int64_t valid = std::min(KC, pl.K - k0);
        pack_w(a->type, row0, a->nb[1], nn, k0, valid, wbuf);
        for (int64_t mc = m0; mc < m1; mc += MC_ROWS) {
            const int64_t mc1 = std::min(m1, mc + MC_ROWS);
            for (int64_t p = 0; p < n_panels; ++p) {
                const int     cols = (int) std::min<int64_t>(NR, nn - p * NR);
                const float * wp   = wbuf + p * valid * NR;
                for (int64_t m = mc; m < mc1; m += MR) {
                    const int64_t rows = std::min<int64_t>(MR, pl.M - m);
                    const float * xp   = x_mat + pl.mp * k0 + (m / MR) * MR * valid;
                    k_ukr[rows - 1](valid, xp, wp, ov.at(mat, m, n0 + p * NR), ldc, cols, k0 > 0, pl.swap);
                }
            }
        }
    }
}

void gemm_packed(const plan & pl, const struct ggml_compute_params * params, struct ggml_tensor * dst, char * wbase) {
    const struct ggml_tensor * a   = pl.ws;
    const int                  ith = params->ith, nth = params->nth;

    const act_view xv   = make_act_view(pl.xs, pl.B2);
    float *        xbuf = (float *) wbase;
    pack_x_all(pl, xv, xbuf, ith, nth);
    // every thread must reach the barrier, so no early return before it
    ggml_cpu_barrier(params);

    float *        wbuf = (float *) (wbase + pl.x_bytes + (size_t) ith * pl.w_bytes);
    const out_view ov   = make_out_view(pl, dst);

    // Items (matrix, M chunk, weight panel). M is cut into chunks only when there are too few
    // weight panels to keep the threads evenly busy; each chunk re-packs its weight panels.
    const int64_t n_panels = (pl.N + NR - 1) / NR;
    const int64_t m_panels = pl.mp / MR;
    int64_t       m_chunks = 1;
    const int64_t want     = 8 * (int64_t) nth;
    while (pl.n_mats * n_panels * m_chunks < want && m_chunks * 2 <= m_panels) m_chunks *= 2;
    const int64_t mc_panels = (m_panels + m_chunks - 1) / m_chunks;
    m_chunks                = (m_panels + mc_panels - 1) / mc_panels;

    const int64_t n_items = pl.n_mats * m_chunks * n_panels;
    int64_t       u0, u1;
    ggml_cpu_split_range(n_items, ith, nth, &u0, &u1);
    for (int64_t u = u0; u < u1;) {
        if (ggml_cpu_should_abort(params)) break;
        const int64_t p0  = u % n_panels;
        const int64_t mcx = (u / n_panels) % m_chunks;
        const int64_t mat = u / (n_panels * m_chunks);
        // a run stays inside one (matrix, M chunk) and holds at most NC_PANELS panels
        const int64_t np = std::min({NC_PANELS, n_panels - p0, u1 - u});
        const int64_t m0 = mcx * mc_panels * MR;
        const int64_t m1 = std::min(pl.M, (mcx + 1) * mc_panels * MR);
        const int64_t n0 = p0 * NR;
        gemm_run(pl, a, xbuf, wbuf, ov, mat, m0, m1, n0, std::min(np * NR, pl.N - n0));
        u += np;
    }
}

// ---------------------------------------------------------------------------------------------
// small M: vectors along K straight from the weight rows

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s        = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s        = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// out[j][r] = w[j] . x[r] for 4 weight rows j and R activation rows r (12 accumulators at R = 3).
template <ggml_type T, int R>
void dot_4xR(int64_t K, const char * const w[4], const float * const x[R], float out[4][3]) {
    __m256 acc[4][R];
    for (int j = 0; j < 4; ++j)
        for (int r = 0; r < R; ++r) acc[j][r] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 xv[R];
        for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_ps(x[r] + k);
        for (int j = 0; j < 4; ++j) {
            const __m256 wv = load8<T>(w[j], k);
            for (int r = 0; r < R; ++r) acc[j][r] = _mm256_fmadd_ps(wv, xv[r], acc[j][r]);
        }
    }
    if (k < K) {
        // the last K % 8 elements as one more vector step, zero-filled past the row ends (0 * 0 adds
        // an exact 0): every weight type then sums in the same order, so F16/BF16 weights give
        // exactly the F32 result of their widened values
        const int64_t n = K - k;
        const __m256i mk = lane_mask((int) n);
        __m256        xv[R];
        for (int r = 0; r < R; ++r) xv[r] = _mm256_maskload_ps(x[r] + k, mk);
        for (int j = 0; j < 4; ++j) {
            const __m256 wv = load8_tail<T>(w[j], k, n);
            for (int r = 0; r < R; ++r) acc[j][r] = _mm256_fmadd_ps(wv, xv[r], acc[j][r]);
        }
    }
    for (int j = 0; j < 4; ++j)
        for (int r = 0; r < R; ++r) out[j][r] = hsum(acc[j][r]);
}

template <ggml_type T>
void dot_4xR_any(int R, int64_t K, const char * const w[4], const float * const x[3], float out[4][3]) {
    switch (R) {
        case 1: dot_4xR<T, 1>(K, w, x, out); break;
        case 2: dot_4xR<T, 2>(K, w, x, out); break;
        default: dot_4xR<T, 3>(K, w, x, out); break;
    }
}

void gemv_small(const plan & pl, const struct ggml_compute_params * params, struct ggml_tensor * dst, char * wbase) {
    const struct ggml_tensor * a   = pl.ws;
    const int                  ith = params->ith, nth = params->nth;
    const act_view             xv  = make_act_view(pl.xs, pl.B2);
    const bool                 gathered = pl.x_bytes > 0; // x rows not packed F32: gathered (widened) first

    if (gathered) {
        const int64_t rows = pl.n_mats * pl.M;
        int64_t       r0, r1;
        ggml_cpu_split_range(rows, ith, nth, &r0, &r1);
        for (int64_t r = r0; r < r1; ++r) {
            widen_x_row(xv, xv.row(r / pl.M, r % pl.M), pl.K, (float *) wbase + r * pl.K);
        }
        // every thread must reach the barrier, so no early return before it
        ggml_cpu_barrier(params);
    }

    const out_view ov      = make_out_view(pl, dst);
    const int64_t  groups  = (pl.N + 3) / 4;
    const int64_t  n_items = pl.n_mats * groups;
    int64_t        u0, u1;
    ggml_cpu_split_range(n_items, ith, nth, &u0, &u1);
    for (int64_t u = u0; u < u1; ++u) {
        if ((u - u0) % 256 == 0 && ggml_cpu_should_abort(params)) return;
        const int64_t mat   = u / groups;
        const int64_t n0    = (u % groups) * 4;
        const int64_t nn    = std::min<int64_t>(4, pl.N - n0);
        const int64_t i2    = mat % pl.B2, i3 = mat / pl.B2;
        const char *  w_mat = (const char *) a->data + (i2 / pl.r2) * a->nb[2] + (i3 / pl.r3) * a->nb[3];
        const char *  w[4];
        for (int j = 0; j < 4; ++j) w[j] = w_mat + (n0 + std::min<int64_t>(j, nn - 1)) * a->nb[1]; // tail: repeat
        // the 4 weight rows stay in L1/L2 while every activation row passes by
        for (int64_t m0 = 0; m0 < pl.M; m0 += 3) {
            const int     R = (int) std::min<int64_t>(3, pl.M - m0);
            const float * x[3];
            for (int r = 0; r < 3; ++r) {
                const int64_t m = m0 + std::min(r, R - 1);
                x[r]            = gathered ? (const float *) wbase + (mat * pl.M + m) * pl.K
                                           : (const float *) xv.row(mat, m);
            }
            float out[4][3];
            switch (a->type) {
                case GGML_TYPE_F32: dot_4xR_any<GGML_TYPE_F32>(R, pl.K, w, x, out); break;
                case GGML_TYPE_F16: dot_4xR_any<GGML_TYPE_F16>(R, pl.K, w, x, out); break;
                default: dot_4xR_any<GGML_TYPE_BF16>(R, pl.K, w, x, out); break;
            }
            for (int r = 0; r < R; ++r) {
                for (int64_t j = 0; j < nn; ++j) *ov.at(mat, m0 + r, n0 + j) = out[j][r];
            }
        }
    }
}

void run(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const plan pl = make_plan(dst);
    GGML_ASSERT(pl.p != path::none && "mul_mat: AVX2 path called for an unsupported node");
    if (pl.N == 0 || pl.M == 0 || pl.n_mats == 0) return;
    const size_t need = plan_bytes(pl, params->nth);
    GGML_ASSERT(params->wsize >= need && "mul_mat: work buffer too small");
    char * wbase = need ? align_ptr(params->wdata) : nullptr;
    if (pl.p == path::small) {
        gemv_small(pl, params, dst, wbase);
    } else {
        gemm_packed(pl, params, dst, wbase);
    }
}

} // namespace

#pragma GCC pop_options

const char * ggml_cpu_mul_mat_avx2_kernel(const struct ggml_tensor * dst) {
    switch (make_plan(dst).p) {
        case path::small: return "avx2 small-M dot (f32)";
        case path::f32: return "avx2 f32fma";
        default: return nullptr;
    }
}

size_t ggml_cpu_mul_mat_avx2_work_size(const struct ggml_tensor * dst, int n_threads) {
    return plan_bytes(make_plan(dst), n_threads);
}

bool ggml_cpu_mul_mat_avx2_dequantizes(enum ggml_type t) { return dequantizes(t); }

void ggml_cpu_mul_mat_avx2(const struct ggml_compute_params * params, struct ggml_tensor * dst) { run(params, dst); }

#else // not x86-64 GCC/Clang

const char * ggml_cpu_mul_mat_avx2_kernel(const struct ggml_tensor *) { return nullptr; }
size_t ggml_cpu_mul_mat_avx2_work_size(const struct ggml_tensor *, int) { return 0; }
bool ggml_cpu_mul_mat_avx2_dequantizes(enum ggml_type) { return false; }
void ggml_cpu_mul_mat_avx2(const struct ggml_compute_params *, struct ggml_tensor *) {}

#endif
