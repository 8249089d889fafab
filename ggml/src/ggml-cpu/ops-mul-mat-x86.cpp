// ops-mul-mat-x86.cpp — fast x86 MUL_MAT: out[m][n] = sum_k x[m][k] * w[n][k] (facts 4.8), with
// w = src0 (weights, F32/F16/BF16, packed rows), x = src1 (F32 activations, any strides).
//
// Levels (cpu-isa.h): the kernels below are the avx512 level's; at the avx2 and avx_vnni levels the
// entry points at the bottom hand every node to ops-mul-mat-avx2.cpp (the same F32 semantics as
// f32fma, 6 x 16 AVX2 micro-kernel), and below avx2 nothing here runs.
//
// Paths (chosen at run time by CPU feature, see make_plan):
//   small: M <= SMALL_M_MAX (decode-like; 4 for BF16 weights on AVX512_BF16 CPUs). Dot products
//          straight from the weight rows, vectors along K; no packing, since each weight element
//          is used only M times. Exact F32 math (F16/BF16 weights are widened exactly).
//   f32:   packed, cache-blocked GEMM with an AVX-512 FMA micro-kernel of MR x 32 outputs
//          (MR activation rows broadcast, 32 weight columns in two zmm). F16 and BF16 weights are
//          widened exactly to F32 while packing, so F16 weights keep full F32 precision; BF16
//          weights use this path ("f32fma") on CPUs without AVX512_BF16 and where the kernel
//          table (kernel-choice.cpp) or GGML_CPU_KERNEL picks it: on CPUs whose vdpbf16ps is slow
//          it runs at our F32 GEMM's speed (issue 16), and it is exact.
//   bf16:  ("bf16dot") BF16 weights on AVX512_BF16 CPUs whose kernel-table row picks it (AMD Zen 4:
//          twice the FMA path's rate): activations are rounded to BF16 (round to nearest
//          even) while packing and the products use vdpbf16ps, accumulating in F32. PRECISION
//          CHOICE: rounding activations costs up to 2^-9 relative error per product (bounded by
//          2^-9 * sum_k |w_k x_k| overall); upstream ggml's CPU backend rounds activations to
//          BF16 for BF16 weights too. It doubles the arithmetic rate and halves packed bytes.
//   amx:   BF16 weights on CPUs with AMX-BF16 (tdpbf16ps), same precision as bf16. UNTESTED on
//          hardware (written on a machine without AMX), so it is opt-in: selected only when the
//          environment sets GGML_CPU_AMX=1, the CPU reports AMX-BF16 and the OS grants the
//          tile-data permission. Until it has passed test-backend-ops on an AMX machine, an
//          untested kernel must not become the default there (CI may run on such a machine).
//
// Packed GEMM structure (f32/bf16/amx): all activation matrices are packed once into the work
// buffer (every thread packs a share, then a barrier): per matrix, per K block, per panel of MR
// rows, laid out k-major ([k][MR] F32, or [k/2][MR] BF16 pairs). Output work is a list of
// (matrix, M chunk, 32-column weight panel) items cut into contiguous per-thread ranges; a thread
// takes runs of up to NC_PANELS panels of one (matrix, M chunk), and for every K block packs those
// weight panels into its private buffer ([k][32], or [k/2][32] BF16 pairs = the AMX "VNNI"
// layout) then sweeps: activation panel (stays in L1) x weight panels (stream from L2).

#include "ops-mul-mat-x86.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include "cpu-isa.h"
#include "kernel-choice.h"
#include "ops-mul-mat-avx2.h"

// GCC 12 reports the deliberately undefined pass-through operands inside avx512fintrin.h's own
// masked/reduce intrinsics as maybe-uninitialized; nothing in this file reads an undefined value.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int     NR          = 32;  // weight columns per micro-tile (two zmm)
constexpr int     MR          = 14;  // activation rows per micro-tile (28 accumulators)
constexpr int     AMX_MR      = 32;  // activation rows per AMX tile pair
constexpr int64_t KC_F32      = 256; // K block, F32 elements: a 32-column panel is 32 KiB
constexpr int64_t KC_BF16     = 512; // K block, BF16 elements: same bytes per panel
constexpr int64_t NC_PANELS   = 16;  // weight panels per block (512 columns): 512 KiB, fits L2
// Up to this many activation rows, dot products straight from the weight rows beat packing the
// weights (measured, K = N = 3072): F32/F16 weights are re-read from L1/L2 per group of 4 rows;
// BF16 weights with vdpbf16ps win from M = 5 on.
constexpr int64_t SMALL_M_MAX      = 16;
constexpr int64_t SMALL_M_MAX_BF16 = 4;
constexpr size_t  ALIGN       = 64;

enum class path { none, small, f32, bf16, amx };

inline int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }
inline size_t  align_up(size_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }
inline char *  align_ptr(void * p) { return (char *) (((uintptr_t) p + ALIGN - 1) & ~(uintptr_t) (ALIGN - 1)); }

struct plan {
    path    p = path::none;
    int64_t K, N, M, B2, B3, r2, r3, n_mats;
    int64_t kc;      // K block (elements)
    int64_t k_align; // packed K blocks are padded to a multiple of this (1, 2 or 32)
    int64_t kp;      // packed K length per matrix (K rounded up to k_align)
    int64_t mr;      // activation rows per packed panel
    int64_t mp;      // M rounded up to mr
    size_t  esz;     // packed element size (4 F32, 2 BF16)
    size_t  x_bytes; // packed activations, all matrices
    size_t  w_bytes; // one thread's packed weight block
};

// AMX is a level of its own (cpu-isa.h): opted in by GGML_CPU_ISA=amx or GGML_CPU_AMX=1
bool amx_ok() {
    const ggml_cpu_features & f = ggml_cpu_active_features();
    return f.amx_bf16 && f.avx512_bf16 && ggml_cpu_amx_request_permission();
}

// bf16_kernel: the kernel for BF16 weights (ggml_cpu_kernel_for(mul_mat_bf16) when running).
// sized: path::none = the path this CPU runs now (active features); any other path = that path's
// plan whatever the CPU and the cap (none if the node's types rule it out), so the work size can
// cover every path that might run by compute time (an override or the cap may change until then).
plan make_plan(const struct ggml_tensor * dst, ggml_cpu_kernel bf16_kernel, path sized = path::none) {
    plan                       pl;
    const struct ggml_tensor * a = dst->src[0];
    const struct ggml_tensor * b = dst->src[1];
    const ggml_cpu_features &  f = ggml_cpu_active_features();
    if (!a || !b) return pl;
    if (sized == path::none && (!f.avx512f || !f.avx512bw || !f.fma || !f.f16c)) return pl;
    const bool quant = ggml_cpu_mul_mat_x86_dequantizes(a->type);
    if (a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_F16 && a->type != GGML_TYPE_BF16 && !quant) return pl;
    if (quant && a->ne[0] % ggml_blck_size(a->type) != 0) return pl;
    if (b->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 || dst->nb[0] != sizeof(float)) return pl;
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
    if (pl.K == 0) return pl; // the portable path writes the zeros

    const bool bf16_dp = a->type == GGML_TYPE_BF16 && f.avx512_bf16 && bf16_kernel == ggml_cpu_kernel::bf16dot;
    // (quantized weights: the small-M dot reads float rows only, so they always take the packed GEMM)
    const bool small = !quant && pl.M <= (sized != path::none ? SMALL_M_MAX : bf16_dp ? SMALL_M_MAX_BF16 : SMALL_M_MAX);
    if (sized == path::none ? small : sized == path::small) {
        if (!small) return pl;
        pl.p       = path::small;
        pl.x_bytes = b->nb[0] == sizeof(float) ? 0 : align_up((size_t) (pl.n_mats * pl.M * pl.K) * sizeof(float));
        pl.w_bytes = 0;
        return pl;
    }
    if (sized != path::none) {
        if ((sized == path::bf16 || sized == path::amx) && a->type != GGML_TYPE_BF16) return pl;
        pl.p = sized;
    } else if (a->type == GGML_TYPE_BF16 && amx_ok()) {
        pl.p = path::amx;
    } else if (bf16_dp) {
        pl.p = path::bf16;
    } else {
        pl.p = path::f32;
    }
    switch (pl.p) {
        case path::f32:  pl.kc = KC_F32;  pl.k_align = 1;  pl.mr = MR;     pl.esz = 4; break;
        case path::bf16: pl.kc = KC_BF16; pl.k_align = 2;  pl.mr = MR;     pl.esz = 2; break;
        default:         pl.kc = KC_BF16; pl.k_align = 32; pl.mr = AMX_MR; pl.esz = 2; break;
    }
    pl.kp      = round_up(pl.K, pl.k_align);
    pl.mp      = round_up(pl.M, pl.mr);
    pl.x_bytes = align_up((size_t) (pl.n_mats * pl.mp * pl.kp) * pl.esz);
    pl.w_bytes = align_up((size_t) (NC_PANELS * NR * round_up(std::min(pl.kc, pl.kp), pl.k_align)) * pl.esz);
    return pl;
}

} // namespace

// Everything above runs on any x86-64 CPU (the planning also sizes work buffers on CPUs without
// AVX-512); the kernels below are compiled for AVX-512 and run only at the avx512 level.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,fma,f16c")

namespace {

inline uint16_t f32_to_bf16_rne(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t) ((u >> 16) | 0x40u); // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t) (u >> 16);
}

// ---------------------------------------------------------------------------------------------
// activation packing

// Pointer to element (k = 0) of activation row m of matrix mat; elements are x_nb0 bytes apart.
struct act_view {
    const char * data;
    size_t       nb0, nb1, nb2, nb3;
    int64_t      B2;
    const float * row(int64_t mat, int64_t m) const {
        return (const float *) (data + (mat % B2) * nb2 + (mat / B2) * nb3 + m * nb1);
    }
    float at(const float * r, int64_t k) const { return *(const float *) ((const char *) r + k * nb0); }
};

// Panel of MR (or AMX_MR) rows starting at m0, K block [k0, k0+valid) padded to kl: F32 [k][MR].
void pack_x_f32_panel(const act_view & xv, int64_t mat, int64_t m0, int64_t rows, int64_t k0, int64_t valid,
                      float * dst) {
    for (int64_t r = 0; r < MR; ++r) {
        if (r >= rows) {
            for (int64_t k = 0; k < valid; ++k) dst[k * MR + r] = 0.0f;
            continue;
        }
        const float * src = xv.row(mat, m0 + r);
        if (xv.nb0 == sizeof(float)) {
            src += k0;
            for (int64_t k = 0; k < valid; ++k) dst[k * MR + r] = src[k];
        } else {
            for (int64_t k = 0; k < valid; ++k) dst[k * MR + r] = xv.at(src, k0 + k);
        }
    }
}

// BF16 pairs [k/2][MR][2], zero beyond valid up to kl (even).
void pack_x_bf16_panel(const act_view & xv, int64_t mat, int64_t m0, int64_t rows, int64_t k0, int64_t valid,
                       int64_t kl, uint16_t * dst) {
    for (int64_t r = 0; r < MR; ++r) {
        const float * src = r < rows ? xv.row(mat, m0 + r) : nullptr;
        for (int64_t k = 0; k < kl; ++k) {
            const uint16_t v = (src && k < valid) ? f32_to_bf16_rne(xv.at(src, k0 + k)) : 0;
            dst[(k >> 1) * (2 * MR) + 2 * r + (k & 1)] = v;
        }
    }
}

// AMX: plain rows of BF16, [m][kp] for the whole K (tile loads take a row stride).
void pack_x_amx_row(const act_view & xv, int64_t mat, int64_t m, int64_t M, int64_t K, int64_t kp,
                    uint16_t * dst) {
    if (m >= M) {
        memset(dst, 0, (size_t) kp * sizeof(uint16_t));
        return;
    }
    const float * src = xv.row(mat, m);
    int64_t       k   = 0;
    if (xv.nb0 == sizeof(float)) {
        for (; k + 16 <= K; k += 16) {
            _mm256_storeu_si256((__m256i *) (dst + k), (__m256i) _mm512_cvtneps_pbh(_mm512_loadu_ps(src + k)));
        }
    }
    for (; k < K; ++k) dst[k] = f32_to_bf16_rne(xv.at(src, k));
    for (; k < kp; ++k) dst[k] = 0;
}

// Every thread packs a share of all activation matrices.
void pack_x_all(const plan & pl, const act_view & xv, char * xbuf, int ith, int nth) {
    if (pl.p == path::amx) {
        const int64_t rows = pl.n_mats * pl.mp;
        int64_t       r0, r1;
        ggml_cpu_split_range(rows, ith, nth, &r0, &r1);
        for (int64_t r = r0; r < r1; ++r) {
            pack_x_amx_row(xv, r / pl.mp, r % pl.mp, pl.M, pl.K, pl.kp, (uint16_t *) xbuf + r * pl.kp);
        }
        return;
    }
    const int64_t panels_per_mat = pl.mp / pl.mr;
    const int64_t n_items        = pl.n_mats * panels_per_mat;
    int64_t       i0, i1;
    ggml_cpu_split_range(n_items, ith, nth, &i0, &i1);
    for (int64_t it = i0; it < i1; ++it) {
        const int64_t mat  = it / panels_per_mat;
        const int64_t ip   = it % panels_per_mat;
        const int64_t m0   = ip * pl.mr;
        const int64_t rows = std::min<int64_t>(pl.mr, pl.M - m0);
        char *        base = xbuf + (size_t) (mat * pl.mp * pl.kp) * pl.esz;
        for (int64_t k0 = 0; k0 < pl.K; k0 += pl.kc) {
            const int64_t valid = std::min(pl.kc, pl.K - k0);
            const int64_t kl    = round_up(valid, pl.k_align);
            // block starts at mp * k0 elements (earlier blocks are full and aligned)
            char * blk = base + (size_t) (pl.mp * k0 + ip * pl.mr * kl) * pl.esz;
            if (pl.p == path::f32) {
                pack_x_f32_panel(xv, mat, m0, rows, k0, valid, (float *) blk);
            } else {
                pack_x_bf16_panel(xv, mat, m0, rows, k0, valid, kl, (uint16_t *) blk);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// weight packing: 16 rows x 16 (32-bit) units at a time, transposed in registers

// In-register transpose of a 16x16 matrix of 32-bit elements: r[i] lane j -> r[j] lane i.
inline void transpose16(__m512 r[16]) {
    __m512 a[16], b[16];
    for (int i = 0; i < 8; ++i) {
        a[2 * i]     = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {
        const __m512d a0 = _mm512_castps_pd(a[4 * i + 0]), a1 = _mm512_castps_pd(a[4 * i + 1]);
        const __m512d a2 = _mm512_castps_pd(a[4 * i + 2]), a3 = _mm512_castps_pd(a[4 * i + 3]);
        b[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a0, a2));
        b[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a0, a2));
        b[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(a1, a3));
        b[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(a1, a3));
    }
    // b[4q + c], 128-bit lane l = rows 4q..4q+3 of column 4l + c
    for (int c = 0; c < 4; ++c) {
        const __m512 d0 = _mm512_shuffle_f32x4(b[c], b[4 + c], 0x44);
        const __m512 d1 = _mm512_shuffle_f32x4(b[c], b[4 + c], 0xEE);
        const __m512 d2 = _mm512_shuffle_f32x4(b[8 + c], b[12 + c], 0x44);
        const __m512 d3 = _mm512_shuffle_f32x4(b[8 + c], b[12 + c], 0xEE);
        r[c]      = _mm512_shuffle_f32x4(d0, d2, 0x88);
        r[4 + c]  = _mm512_shuffle_f32x4(d0, d2, 0xDD);
        r[8 + c]  = _mm512_shuffle_f32x4(d1, d3, 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(d1, d3, 0xDD);
    }
}

inline __mmask16 mask16(int64_t n) { return n >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << n) - 1u); }
inline __mmask32 mask32(int64_t n) { return n >= 32 ? (__mmask32) 0xffffffffu : (__mmask32) ((1u << n) - 1u); }

// 16 elements of row src starting at k (n_valid of them, rest zero), widened to F32.
inline __m512 load_w_f32(ggml_type t, const char * row, int64_t k, int64_t n_valid) {
    const __mmask16 m = mask16(n_valid);
    switch (t) {
        case GGML_TYPE_F32: return _mm512_maskz_loadu_ps(m, (const float *) row + k);
        case GGML_TYPE_F16:
            return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *) row + k));
        default: {
            const __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *) row + k));
            return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
        }
    }
}

// F32 panels: n_cols weight rows from row0 (row stride nb1), K range [k0, k0+valid) ->
// dst [panel][k][32], zero columns past n_cols. Block-quantized rows (k0 and valid whole blocks)
// are dequantized by the type's to_float, 16 rows x one K block at a time, then packed as F32.
void pack_w_f32(ggml_type t, const char * row0, size_t nb1, int64_t n_cols, int64_t k0, int64_t valid, float * dst) {
    const bool    quant    = ggml_blck_size(t) > 1;
    const size_t  k0_bytes = ggml_row_size(t, k0);
    const int64_t n_panels = (n_cols + NR - 1) / NR;
    __m512        r[16];
    alignas(64) float deq[16][KC_F32]; // 16 KiB: the dequantized rows of one 16-row group
    for (int64_t p = 0; p < n_panels; ++p) {
        float * pd = dst + p * valid * NR;
        for (int64_t j0 = 0; j0 < NR; j0 += 16) {
            const int64_t c0 = p * NR + j0;
            if (quant) {
                for (int i = 0; i < 16 && c0 + i < n_cols; ++i) {
                    ggml_get_type_traits(t)->to_float(row0 + (c0 + i) * nb1 + k0_bytes, deq[i], valid);
                }
            }
            for (int64_t k = 0; k < valid; k += 16) {
                const int64_t nk = std::min<int64_t>(16, valid - k);
                for (int i = 0; i < 16; ++i) {
                    if (c0 + i >= n_cols) {
                        r[i] = _mm512_setzero_ps();
                    } else if (quant) {
                        r[i] = _mm512_maskz_loadu_ps(mask16(nk), deq[i] + k);
                    } else {
                        r[i] = load_w_f32(t, row0 + (c0 + i) * nb1 + k0_bytes, k, nk);
                    }
                }
                transpose16(r);
                for (int64_t i = 0; i < nk; ++i) _mm512_store_ps(pd + (k + i) * NR + j0, r[i]);
            }
        }
    }
}

// BF16 pairs ("VNNI" layout, also AMX's B-tile layout): dst [panel][k/2][32][2], K padded to kl
// (even) with zeros. A pair of BF16 is one 32-bit unit, so this is the same 16x16 transpose.
void pack_w_bf16(const char * row0, size_t nb1, int64_t n_cols, int64_t k0, int64_t valid, int64_t kl,
                 uint16_t * dst) {
    const int64_t n_panels = (n_cols + NR - 1) / NR;
    const int64_t units    = kl / 2;
    __m512        r[16];
    for (int64_t p = 0; p < n_panels; ++p) {
        uint32_t * pd = (uint32_t *) (dst + p * kl * NR);
        for (int64_t j0 = 0; j0 < NR; j0 += 16) {
            const int64_t c0 = p * NR + j0;
            for (int64_t u = 0; u < units; u += 16) {
                const int64_t nu = std::min<int64_t>(16, units - u);
                const int64_t ne = std::max<int64_t>(0, std::min<int64_t>(32, valid - 2 * u)); // valid bf16
                for (int i = 0; i < 16; ++i) {
                    if (c0 + i < n_cols) {
                        const uint16_t * src = (const uint16_t *) (row0 + (c0 + i) * nb1) + k0 + 2 * u;
                        r[i] = _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(mask32(ne), src));
                    } else {
                        r[i] = _mm512_setzero_ps();
                    }
                }
                transpose16(r);
                for (int64_t i = 0; i < nu; ++i) _mm512_store_ps((float *) (pd + (u + i) * NR + j0), r[i]);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// micro-kernels: rows R (<= MR) x 32 columns; c rows are ldc floats apart; store masks m0/m1 cut
// the weight-column tail; acc: add to c (later K blocks) instead of overwriting it.

template <int R>
void ukr_f32(int64_t kc, const float * xp, const float * wp, float * c, int64_t ldc, __mmask16 m0, __mmask16 m1,
             bool acc) {
    __m512 c0[R], c1[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; ++k) {
        const __m512 w0 = _mm512_load_ps(wp);
        const __m512 w1 = _mm512_load_ps(wp + 16);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const __m512 xb = _mm512_set1_ps(xp[r]);
            c0[r]           = _mm512_fmadd_ps(w0, xb, c0[r]);
            c1[r]           = _mm512_fmadd_ps(w1, xb, c1[r]);
        }
        xp += MR;
        wp += NR;
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
        float * cr = c + r * ldc;
        if (acc) {
            c0[r] = _mm512_add_ps(c0[r], _mm512_maskz_loadu_ps(m0, cr));
            c1[r] = _mm512_add_ps(c1[r], _mm512_maskz_loadu_ps(m1, cr + 16));
        }
        _mm512_mask_storeu_ps(cr, m0, c0[r]);
        _mm512_mask_storeu_ps(cr + 16, m1, c1[r]);
    }
}

// kc2 = K pairs; xp: [kc2][MR] 32-bit BF16 pairs; wp: [kc2][32] pairs.
template <int R>
void ukr_bf16(int64_t kc2, const uint32_t * xp, const uint32_t * wp, float * c, int64_t ldc, __mmask16 m0,
              __mmask16 m1, bool acc) {
    __m512 c0[R], c1[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc2; ++k) {
        const __m512bh w0 = (__m512bh) _mm512_load_si512(wp);
        const __m512bh w1 = (__m512bh) _mm512_load_si512(wp + 16);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
            const __m512bh xb = (__m512bh) _mm512_set1_epi32((int) xp[r]);
            c0[r]             = _mm512_dpbf16_ps(c0[r], w0, xb);
            c1[r]             = _mm512_dpbf16_ps(c1[r], w1, xb);
        }
        xp += MR;
        wp += NR;
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
        float * cr = c + r * ldc;
        if (acc) {
            c0[r] = _mm512_add_ps(c0[r], _mm512_maskz_loadu_ps(m0, cr));
            c1[r] = _mm512_add_ps(c1[r], _mm512_maskz_loadu_ps(m1, cr + 16));
        }
        _mm512_mask_storeu_ps(cr, m0, c0[r]);
        _mm512_mask_storeu_ps(cr + 16, m1, c1[r]);
    }
}

using ukr_f32_fn  = void (*)(int64_t, const float *, const float *, float *, int64_t, __mmask16, __mmask16, bool);
using ukr_bf16_fn = void (*)(int64_t, const uint32_t *, const uint32_t *, float *, int64_t, __mmask16, __mmask16,
                             bool);

template <int... I> struct ukr_table {
    static constexpr ukr_f32_fn  f32[]  = {&ukr_f32<I + 1>...};
    static constexpr ukr_bf16_fn bf16[] = {&ukr_bf16<I + 1>...};
};
using ukr_all = ukr_table<0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13>;
static_assert(sizeof(ukr_all::f32) / sizeof(ukr_all::f32[0]) == MR, "one kernel per tail height");

// ---------------------------------------------------------------------------------------------
// AMX-BF16 (UNTESTED on hardware). Tiles: 0..3 = C (2x2 blocks of 16x16 F32), 4..5 = A
// (activations, 16 rows x 32 BF16), 6..7 = B (weights, 16 K-pairs x 16 columns x 2 BF16).

struct alignas(64) amx_tilecfg {
    uint8_t  palette_id;
    uint8_t  start_row;
    uint8_t  reserved[14];
    uint16_t colsb[16];
    uint8_t  rows[16];
};
static_assert(sizeof(amx_tilecfg) == 64, "AMX tile config is 64 bytes");

// GCC 12's _tile_loadconfig tells the compiler it reads only 8 bytes of the config, so ordinary
// stores to the rest may be dropped as dead. Writing through a volatile object makes every store
// happen; the memory clobber keeps them before ldtilecfg.
__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bf16"))) void amx_configure() {
    volatile amx_tilecfg cfg;
    uint8_t *            raw = (uint8_t *) &cfg;
    for (int i = 0; i < 64; ++i) ((volatile uint8_t *) raw)[i] = 0;
    cfg.palette_id = 1;
    for (int t = 0; t < 8; ++t) {
        cfg.colsb[t] = 64;
        cfg.rows[t]  = 16;
    }
    __asm__ __volatile__("" ::: "memory");
    _tile_loadconfig((const void *) raw);
    __asm__ __volatile__("" ::: "memory");
}

__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bf16"))) void amx_release() {
    _tile_release();
}

// 32 x 32 outputs over kl (multiple of 32) K elements: xa = activation rows (row stride x_stride
// bytes), wb = packed weight panel [kl/2][32][2]. Result to cbuf [32][32] F32.
__attribute__((target("amx-tile,amx-bf16,avx512f,avx512bf16"))) void amx_tile_32x32(
    int64_t kl, const uint16_t * xa, size_t x_stride, const uint16_t * wb, float * cbuf) {
    __asm__ __volatile__("" ::: "memory"); // packed inputs are written before the tile loads read them
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t k = 0; k < kl; k += 32) {
        const uint16_t * a0 = xa + k;
        const uint16_t * a1 = (const uint16_t *) ((const char *) a0 + 16 * x_stride);
        const uint16_t * b  = wb + (k / 2) * (NR * 2); // 16 K-pairs of 32 columns, 128 bytes per pair
        _tile_loadd(4, a0, x_stride);
        _tile_loadd(5, a1, x_stride);
        _tile_loadd(6, b, NR * 4);
        _tile_loadd(7, b + 32, NR * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, cbuf, 32 * sizeof(float));
    _tile_stored(1, cbuf + 16, 32 * sizeof(float));
    _tile_stored(2, cbuf + 16 * 32, 32 * sizeof(float));
    _tile_stored(3, cbuf + 16 * 32 + 16, 32 * sizeof(float));
    __asm__ __volatile__("" ::: "memory"); // the stores above are invisible to the compiler
}

// ---------------------------------------------------------------------------------------------
// packed GEMM driver

struct out_view {
    char *  data;
    size_t  nb1, nb2, nb3;
    int64_t B2;
    float * at(int64_t mat, int64_t m, int64_t n) const {
        return (float *) (data + (mat % B2) * nb2 + (mat / B2) * nb3 + m * nb1) + n;
    }
};

// One run: matrix mat, activation rows [m0, m1) (m0 a multiple of mr), weight columns [n0, n0+nn).
void gemm_run(const plan & pl, const struct ggml_tensor * a, const char * xbuf, char * wbuf, const out_view & ov,
              int64_t mat, int64_t m0, int64_t m1, int64_t n0, int64_t nn) {
    const int64_t i2 = mat % pl.B2, i3 = mat / pl.B2;
    const char *  w_mat    = (const char *) a->data + (i2 / pl.r2) * a->nb[2] + (i3 / pl.r3) * a->nb[3];
    const char *  row0     = w_mat + n0 * a->nb[1];
    const int64_t n_panels = (nn + NR - 1) / NR;
    const int64_t ldc      = (int64_t) (ov.nb1 / sizeof(float));
    const char *  x_mat    = xbuf + (size_t) (mat * pl.mp * pl.kp) * pl.esz;
    alignas(64) float cbuf[AMX_MR * NR];

    for (int64_t k0 = 0; k0 < pl.K; k0 += pl.kc) {
        const int64_t valid = std::min(pl.kc, pl.K - k0);
        const int64_t kl    = round_up(valid, pl.k_align);
        const bool    acc   = k0 > 0;
        if (pl.p == path::f32) {
            pack_w_f32(a->type, row0, a->nb[1], nn, k0, valid, (float *) wbuf);
        } else {
            pack_w_bf16(row0, a->nb[1], nn, k0, valid, kl, (uint16_t *) wbuf);
        }
        for (int64_t m = m0; m < m1; m += pl.mr) {
            const int64_t rows = std::min<int64_t>(pl.mr, pl.M - m);
            const int64_t ip   = m / pl.mr;
            for (int64_t p = 0; p < n_panels; ++p) {
                const int64_t   cols = std::min<int64_t>(NR, nn - p * NR);
                const __mmask16 mk0  = mask16(cols), mk1 = mask16(cols - 16 > 0 ? cols - 16 : 0);
                float *         c    = ov.at(mat, m, n0 + p * NR);
                if (pl.p == path::f32) {
                    const float * xp = (const float *) x_mat + pl.mp * k0 + ip * MR * kl;
                    ukr_all::f32[rows - 1](kl, xp, (const float *) wbuf + p * kl * NR, c, ldc, mk0, mk1, acc);
                } else if (pl.p == path::bf16) {
                    const uint32_t * xp = (const uint32_t *) ((const uint16_t *) x_mat + pl.mp * k0 + ip * MR * kl);
                    const uint32_t * wp = (const uint32_t *) ((const uint16_t *) wbuf + p * kl * NR);
                    ukr_all::bf16[rows - 1](kl / 2, xp, wp, c, ldc, mk0, mk1, acc);
                } else {
                    const uint16_t * xa = (const uint16_t *) x_mat + m * pl.kp + k0;
                    amx_tile_32x32(kl, xa, (size_t) pl.kp * sizeof(uint16_t), (const uint16_t *) wbuf + p * kl * NR,
                                   cbuf);
                    for (int64_t r = 0; r < rows; ++r) {
                        float * cr = c + r * ldc;
                        __m512  v0 = _mm512_load_ps(cbuf + r * NR), v1 = _mm512_load_ps(cbuf + r * NR + 16);
                        if (acc) {
                            v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(mk0, cr));
                            v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(mk1, cr + 16));
                        }
                        _mm512_mask_storeu_ps(cr, mk0, v0);
                        _mm512_mask_storeu_ps(cr + 16, mk1, v1);
                    }
                }
            }
        }
    }
}

void gemm_packed(const plan & pl, const struct ggml_compute_params * params, struct ggml_tensor * dst, char * wbase) {
    const struct ggml_tensor * a = dst->src[0];
    const struct ggml_tensor * b = dst->src[1];
    const int                  ith = params->ith, nth = params->nth;

    const act_view xv{(const char *) b->data, b->nb[0], b->nb[1], b->nb[2], b->nb[3], pl.B2};
    char *         xbuf = wbase;
    pack_x_all(pl, xv, xbuf, ith, nth);
    // every thread must reach the barrier, so no early return before it
    ggml_cpu_barrier(params);

    char * wbuf = wbase + pl.x_bytes + (size_t) ith * pl.w_bytes;
    const out_view ov{(char *) dst->data, dst->nb[1], dst->nb[2], dst->nb[3], pl.B2};

    // Items (matrix, M chunk, weight panel). M is cut into chunks only when there are too few
    // weight panels to keep the threads evenly busy; each chunk re-packs its weight panels.
    const int64_t n_panels  = (pl.N + NR - 1) / NR;
    const int64_t m_panels  = pl.mp / pl.mr;
    int64_t       m_chunks  = 1;
    const int64_t want      = 8 * (int64_t) nth;
    while (pl.n_mats * n_panels * m_chunks < want && m_chunks * 2 <= m_panels) m_chunks *= 2;
    const int64_t mc_panels = (m_panels + m_chunks - 1) / m_chunks;
    m_chunks                = (m_panels + mc_panels - 1) / mc_panels;

    const int64_t n_items = pl.n_mats * m_chunks * n_panels;
    int64_t       u0, u1;
    ggml_cpu_split_range(n_items, ith, nth, &u0, &u1);

    if (pl.p == path::amx && u0 < u1) amx_configure();
    for (int64_t u = u0; u < u1;) {
        if (ggml_cpu_should_abort(params)) break;
        const int64_t p0  = u % n_panels;
        const int64_t mcx = (u / n_panels) % m_chunks;
        const int64_t mat = u / (n_panels * m_chunks);
        // a run stays inside one (matrix, M chunk) and holds at most NC_PANELS panels
        const int64_t np  = std::min({NC_PANELS, n_panels - p0, u1 - u});
        const int64_t m0  = mcx * mc_panels * pl.mr;
        const int64_t m1  = std::min(pl.M, (mcx + 1) * mc_panels * pl.mr);
        const int64_t n0  = p0 * NR;
        gemm_run(pl, a, xbuf, wbuf, ov, mat, m0, m1, n0, std::min(np * NR, pl.N - n0));
        u += np;
    }
    if (pl.p == path::amx && u0 < u1) amx_release();
}

// ---------------------------------------------------------------------------------------------
// small M: vectors along K straight from the weight rows

inline __m512 load_w_row16(ggml_type t, const char * row, int64_t k, __mmask16 m) {
    switch (t) {
        case GGML_TYPE_F32: return _mm512_maskz_loadu_ps(m, (const float *) row + k);
        case GGML_TYPE_F16: return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *) row + k));
        default: {
            const __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *) row + k));
            return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
        }
    }
}

// out[j][r] = w[j] . x[r] for 4 weight rows j and R activation rows r.
template <ggml_type T, int R>
void dot_4xR(int64_t K, const char * const w[4], const float * const x[R], float out[4][R]) {
    __m512 acc[4][R];
    for (int j = 0; j < 4; ++j)
        for (int r = 0; r < R; ++r) acc[j][r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 16) {
        const __mmask16 m = mask16(K - k);
        __m512          xv[R];
        for (int r = 0; r < R; ++r) xv[r] = _mm512_maskz_loadu_ps(m, x[r] + k);
        for (int j = 0; j < 4; ++j) {
            const __m512 wv = load_w_row16(T, w[j], k, m);
            for (int r = 0; r < R; ++r) acc[j][r] = _mm512_fmadd_ps(wv, xv[r], acc[j][r]);
        }
    }
    for (int j = 0; j < 4; ++j)
        for (int r = 0; r < R; ++r) out[j][r] = _mm512_reduce_add_ps(acc[j][r]);
}

template <ggml_type T>
void dot_4xR_any(int R, int64_t K, const char * const w[4], const float * const x[4], float out[4][4]) {
    float o1[4][1], o2[4][2], o3[4][3];
    switch (R) {
        case 1: dot_4xR<T, 1>(K, w, x, o1); for (int j = 0; j < 4; ++j) out[j][0] = o1[j][0]; break;
        case 2: dot_4xR<T, 2>(K, w, x, o2); for (int j = 0; j < 4; ++j) std::copy(o2[j], o2[j] + 2, out[j]); break;
        case 3: dot_4xR<T, 3>(K, w, x, o3); for (int j = 0; j < 4; ++j) std::copy(o3[j], o3[j] + 3, out[j]); break;
        default: dot_4xR<T, 4>(K, w, x, out); break;
    }
}

void gemv_small(const plan & pl, const struct ggml_compute_params * params, struct ggml_tensor * dst, char * wbase) {
    const struct ggml_tensor * a = dst->src[0];
    const struct ggml_tensor * b = dst->src[1];
    const int                  ith = params->ith, nth = params->nth;
    const act_view             xv{(const char *) b->data, b->nb[0], b->nb[1], b->nb[2], b->nb[3], pl.B2};
    const bool                 packed = pl.x_bytes > 0; // activation elements not adjacent: gather rows first

    if (packed) {
        const int64_t rows = pl.n_mats * pl.M;
        int64_t       r0, r1;
        ggml_cpu_split_range(rows, ith, nth, &r0, &r1);
        for (int64_t r = r0; r < r1; ++r) {
            const float * src = xv.row(r / pl.M, r % pl.M);
            float *       d   = (float *) wbase + r * pl.K;
            for (int64_t k = 0; k < pl.K; ++k) d[k] = xv.at(src, k);
        }
        ggml_cpu_barrier(params);
    }

    const out_view ov{(char *) dst->data, dst->nb[1], dst->nb[2], dst->nb[3], pl.B2};
    const int64_t  groups = (pl.N + 3) / 4;
    const int64_t  n_items = pl.n_mats * groups;
    int64_t        u0, u1;
    ggml_cpu_split_range(n_items, ith, nth, &u0, &u1);
    for (int64_t u = u0; u < u1; ++u) {
        if ((u - u0) % 256 == 0 && ggml_cpu_should_abort(params)) return;
        const int64_t mat = u / groups;
        const int64_t n0  = (u % groups) * 4;
        const int64_t nn  = std::min<int64_t>(4, pl.N - n0);
        const int64_t i2 = mat % pl.B2, i3 = mat / pl.B2;
        const char *  w_mat = (const char *) a->data + (i2 / pl.r2) * a->nb[2] + (i3 / pl.r3) * a->nb[3];
        const char *  w[4];
        for (int j = 0; j < 4; ++j) w[j] = w_mat + (n0 + std::min<int64_t>(j, nn - 1)) * a->nb[1]; // tail: repeat
        // the 4 weight rows stay in L1/L2 while every activation row passes by
        for (int64_t m0 = 0; m0 < pl.M; m0 += 4) {
            const int     R = (int) std::min<int64_t>(4, pl.M - m0);
            const float * x[4];
            for (int r = 0; r < 4; ++r) {
                const int64_t m = m0 + std::min(r, R - 1);
                x[r] = packed ? (const float *) wbase + (mat * pl.M + m) * pl.K : xv.row(mat, m);
            }
            float out[4][4];
            switch (a->type) {
                case GGML_TYPE_F32: dot_4xR_any<GGML_TYPE_F32>(R, pl.K, w, x, out); break;
                case GGML_TYPE_F16: dot_4xR_any<GGML_TYPE_F16>(R, pl.K, w, x, out); break;
                default: dot_4xR_any<GGML_TYPE_BF16>(R, pl.K, w, x, out); break;
            }
            for (int r = 0; r < R; ++r) {
                float * o = ov.at(mat, m0 + r, n0);
                for (int64_t j = 0; j < nn; ++j) o[j] = out[j][r];
            }
        }
    }
}

} // namespace

#pragma GCC pop_options

namespace {
ggml_cpu_kernel current_bf16_kernel() { return ggml_cpu_kernel_for(ggml_cpu_kernel_family::mul_mat_bf16); }

size_t plan_bytes(const plan & pl, int n_threads) {
    if (pl.p == path::none) return 0;
    const size_t bytes = pl.x_bytes + (size_t) n_threads * pl.w_bytes;
    return bytes == 0 ? 0 : bytes + ALIGN;
}

// The level whose kernels run now: the AVX-512 ones from the avx512 level up, the AVX2 ones
// (ops-mul-mat-avx2.cpp) at avx2 and avx_vnni, none below. Only one level's kernels ever run for
// a node, and never one above the active level (ggml_cpu_active_features clears what is above it).
enum class x86_level { none, avx2, avx512 };

x86_level active_level() {
    const ggml_cpu_features & f = ggml_cpu_active_features();
    if (f.avx512f && f.avx512bw && f.fma && f.f16c) return x86_level::avx512;
    if (f.avx2 && f.fma && f.f16c) return x86_level::avx2;
    return x86_level::none;
}

// The level whose kernels run this node: the active one if it has a kernel for the node, else the
// AVX2 one below it. The AVX2 level covers nodes the AVX-512 plans do not (F16/BF16 activations
// widened while packing, the operand swap of stable-diffusion.cpp's F16 im2col x F16 conv
// weights); without this fallback such nodes ran the portable code on AVX-512 CPUs, and sd.cpp's
// sampling was 2.5x slower at the avx512 level than at avx2 on Zen 4.
x86_level node_level(const struct ggml_tensor * dst) {
    const x86_level l = active_level();
    if (l == x86_level::avx512 && make_plan(dst, ggml_cpu_kernel::f32fma).p != path::none) return l;
    if (l != x86_level::none && ggml_cpu_mul_mat_avx2_kernel(dst) != nullptr) return x86_level::avx2;
    return x86_level::none;
}
} // namespace

bool ggml_cpu_mul_mat_x86_usable(const struct ggml_tensor * dst) { return node_level(dst) != x86_level::none; }

bool ggml_cpu_mul_mat_x86_shape_ok(const struct ggml_tensor * dst) {
    return make_plan(dst, ggml_cpu_kernel::f32fma, path::f32).p != path::none ||
           make_plan(dst, ggml_cpu_kernel::f32fma, path::small).p != path::none ||
           ggml_cpu_mul_mat_avx2_kernel(dst) != nullptr;
}

// Every path of every level, whatever runs now: the cap, the kernel override and AMX's opt-in may
// change between planning and computing, and the buffer must fit whichever path runs then.
// Levels the CPU lacks never run (the cap only lowers the level), so their plans are not sized:
// on an AVX2-only CPU the buffer is the AVX2 kernel's.
size_t ggml_cpu_mul_mat_x86_work_size(const struct ggml_tensor * dst, int n_threads) {
    size_t bytes = ggml_cpu_mul_mat_avx2_work_size(dst, n_threads);
    if ((int) ggml_cpu_isa_detected() < (int) ggml_cpu_isa::avx512) return bytes;
    for (path p : {path::small, path::f32, path::bf16, path::amx}) {
        bytes = std::max(bytes, plan_bytes(make_plan(dst, ggml_cpu_kernel::f32fma, p), n_threads));
    }
    return bytes;
}

bool ggml_cpu_mul_mat_x86_dequantizes(enum ggml_type t) {
    // whole blocks per K block of the F32 paths (KC_F32 = 256 at both levels: 32- and 256-element blocks)
    return ggml_blck_size(t) > 1 && KC_F32 % ggml_blck_size(t) == 0 && ggml_get_type_traits(t)->to_float != nullptr &&
           ggml_cpu_mul_mat_avx2_dequantizes(t);
}

const char * ggml_cpu_mul_mat_x86_kernel(const struct ggml_tensor * dst) {
    switch (node_level(dst)) {
        case x86_level::avx512:
            switch (make_plan(dst, current_bf16_kernel()).p) {
                case path::small: return "avx512 small-M dot (f32)";
                case path::f32: return "avx512 f32fma";
                case path::bf16: return "avx512 bf16dot";
                case path::amx: return "amx bf16";
                default: return nullptr;
            }
        case x86_level::avx2: return ggml_cpu_mul_mat_avx2_kernel(dst);
        default: return nullptr;
    }
}

const char * ggml_cpu_mul_mat_x86_dequant_kernel(const struct ggml_tensor * dst) {
    switch (active_level()) {
        case x86_level::avx512: return "avx512 f32fma, weights and activations dequantized";
        case x86_level::avx2: return "avx2 f32fma, weights and activations dequantized";
        default: return nullptr;
    }
}

void ggml_cpu_mul_mat_x86(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    if (node_level(dst) == x86_level::avx2) {
        ggml_cpu_mul_mat_avx2(params, dst);
        return;
    }
    const plan pl = make_plan(dst, current_bf16_kernel());
    GGML_ASSERT(pl.p != path::none && "mul_mat: x86 path called for an unsupported node");
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

#else // not x86-64 GCC/Clang: the portable path does everything

bool ggml_cpu_mul_mat_x86_usable(const struct ggml_tensor *) { return false; }
bool ggml_cpu_mul_mat_x86_shape_ok(const struct ggml_tensor *) { return false; }
const char * ggml_cpu_mul_mat_x86_dequant_kernel(const struct ggml_tensor *) { return nullptr; }
bool ggml_cpu_mul_mat_x86_dequantizes(enum ggml_type) { return false; }
size_t ggml_cpu_mul_mat_x86_work_size(const struct ggml_tensor *, int) { return 0; }
const char * ggml_cpu_mul_mat_x86_kernel(const struct ggml_tensor *) { return nullptr; }
void ggml_cpu_mul_mat_x86(const struct ggml_compute_params *, struct ggml_tensor *) {}

#endif
