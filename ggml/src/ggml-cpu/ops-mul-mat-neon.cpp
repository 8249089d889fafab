// ops-mul-mat-neon.cpp — the AArch64 MUL_MAT fast path: out[m][n] = sum_k x[m][k] * w[n][k]
// (facts 4.8), w = src0 (weights: F32, F16 or BF16, packed rows; or block-quantized types the
// packing dequantizes, for ops-mul-mat-quant.cpp's dequantizing route), x = src1 (F32, F16 or BF16
// activations, any strides). Plain ARMv8-A Advanced SIMD (the neon level; no FP16 arithmetic, no
// dot-product instructions), so every AArch64 CPU runs it. Same semantics as the x86 "f32fma"
// kernels (ops-mul-mat-avx2.cpp, ops-mul-mat-x86.cpp): F16 weights are widened exactly with FCVTL
// (vcvt_f32_f16, base ARMv8-A), BF16 ones by shifting into the top half of an F32 (exact), every
// product and sum is F32 (FMLA), activations are never rounded. Results differ from the portable
// kernel only by summation order.
//
// Paths:
//   small: M <= SMALL_M_MAX activation rows (decode-like). Each weight element is used only M
//          times, so packing would cost about as much as the arithmetic: dot products straight
//          from the weight rows, vectors along K, 4 weight rows x up to 4 activation rows per pass
//          (16 accumulators + 4 weight + 4 activation vectors of the 32 registers).
//   f32:   packed, cache-blocked GEMM with an 8 x 12 micro-kernel: 8 activation rows (two q
//          registers, used lane by lane through FMLA by element, vfmaq_laneq_f32) x 12 weight
//          columns (three q registers): 24 accumulators + 3 weight + 2 activation = 29 of the 32
//          vector registers. Per K step: 24 FMLAs against 5 q-register loads (80 bytes), i.e.
//          4.8 FMLAs per load; no broadcast instructions (the by-element form selects the lane).
//
// Packed GEMM structure (as the AVX2 level): every thread packs a share of all activation
// matrices into the work buffer (per matrix, per K block of KC, per panel of MR rows, k-major
// [k][MR] F32, widened on the way), then a barrier. Output work is a list of (matrix, M chunk,
// 12-column weight panel) items in contiguous per-thread ranges; a thread takes runs of up to
// NC_PANELS panels, and per K block packs those weight panels into its private buffer ([k][12]
// F32, widened on the way), then for every MC_ROWS activation rows sweeps: weight panel (12 KiB,
// stays in L1) x the activation panels of those rows (MC_ROWS x 1 KiB, stay in L2).
//
// Thresholds are NOT measured on ARM hardware (none was available; see the report in the README):
// KC = 256 keeps a weight panel (12 KiB) plus an activation panel (8 KiB) well inside the 64 KiB L1
// of Neoverse N1/V1/N2 and the 32 KiB L1 of Cortex-A72; NC_PANELS x 12 KiB = 192 KiB and MC_ROWS
// x 1 KiB = 128 KiB fit the 512 KiB-1 MiB L2 of those cores together.

#include "ops-mul-mat-neon.h"

#if defined(__aarch64__)

#include "cpu-isa.h"

#include <arm_neon.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace {

constexpr int     NR        = 12;  // weight columns per micro-tile (three q registers)
constexpr int     MR        = 8;   // activation rows per micro-tile (two q registers)
constexpr int64_t KC        = 256; // K block (elements)
constexpr int64_t NC_PANELS = 16;  // weight panels packed per K block: 192 columns, 192 KiB
constexpr int64_t MC_ROWS   = 128; // activation rows swept per weight panel (a multiple of MR)
// Up to this many activation rows the dot products straight from the weight rows are used (the
// x86 levels measured 16..24 as their break-even; not measured here).
constexpr int64_t SMALL_M_MAX = 16;
constexpr size_t  ALIGN       = 64;

static_assert(MC_ROWS % MR == 0, "an activation sweep holds whole panels");

enum class path { none, small, f32 };

inline int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }
inline size_t  align_up(size_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }
inline char *  align_ptr(void * p) { return (char *) (((uintptr_t) p + ALIGN - 1) & ~(uintptr_t) (ALIGN - 1)); }

bool float_type(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }

// Block-quantized weights the packing dequantizes (whole blocks per K block of KC = 256: the 32-
// and 256-element block types), for ops-mul-mat-quant.cpp's dequantizing route only.
bool dequantizes(ggml_type t) {
    return ggml_blck_size(t) > 1 && KC % ggml_blck_size(t) == 0 && ggml_get_type_traits(t)->to_float != nullptr;
}

struct plan {
    path                       p  = path::none;
    const struct ggml_tensor * xs = nullptr; // activations (src1)
    const struct ggml_tensor * ws = nullptr; // weights (src0)
    int64_t K, N, M, B2, B3, r2, r3, n_mats; // r2, r3: broadcast ratios of the weights over the output
    int64_t mp;      // M rounded up to MR
    size_t  x_bytes; // packed (or gathered) activations, all matrices
    size_t  w_bytes; // one thread's packed weight block
};

plan make_plan(const struct ggml_tensor * dst) {
    plan                       pl;
    const struct ggml_tensor * a = dst->src[0];
    const struct ggml_tensor * b = dst->src[1];
    if (!a || !b) return pl;
    const bool quant = dequantizes(a->type);
    if ((!float_type(a->type) && !quant) || !float_type(b->type)) return pl;
    if (quant && a->ne[0] % ggml_blck_size(a->type) != 0) return pl;
    if (dst->type != GGML_TYPE_F32 || dst->nb[0] != sizeof(float)) return pl;
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

    // (quantized weights: the small-M dot reads float rows only, so they always take the packed GEMM)
    if (!quant && pl.M <= SMALL_M_MAX) {
        pl.p              = path::small;
        const bool direct = b->type == GGML_TYPE_F32 && b->nb[0] == sizeof(float);
        pl.x_bytes        = direct ? 0 : align_up((size_t) (pl.n_mats * pl.M * pl.K) * sizeof(float));
        pl.w_bytes        = 0;
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
// loads: 4 elements widened exactly to F32

template <ggml_type T> inline float32x4_t load4(const char * row, int64_t k) {
    if constexpr (T == GGML_TYPE_F32) {
        return vld1q_f32((const float *) row + k);
    } else if constexpr (T == GGML_TYPE_F16) {
        // FCVTL: every F16 value (subnormals included) is exactly representable in F32
        return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *) row + k)));
    } else {
        // BF16 is the top half of an F32: widen each lane to 32 bits shifted left by 16 (SHLL)
        return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *) row + k), 16));
    }
}

// The same for the last n < 4 elements of a row (the rest zero), without reading past them.
template <ggml_type T> inline float32x4_t load4_tail(const char * row, int64_t k, int64_t n) {
    constexpr size_t esz = T == GGML_TYPE_F32 ? 4 : 2;
    alignas(16) char tmp[16] = {0};
    memcpy(tmp, row + (size_t) k * esz, (size_t) n * esz);
    return load4<T>(tmp, 0);
}

// In-register transpose of a 4x4 matrix of floats: r[i] lane j -> r[j] lane i.
inline void transpose4(float32x4_t r[4]) {
    const float32x4_t t0 = vtrn1q_f32(r[0], r[1]); // r0[0] r1[0] r0[2] r1[2]
    const float32x4_t t1 = vtrn2q_f32(r[0], r[1]); // r0[1] r1[1] r0[3] r1[3]
    const float32x4_t t2 = vtrn1q_f32(r[2], r[3]);
    const float32x4_t t3 = vtrn2q_f32(r[2], r[3]);
    r[0] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
    r[1] = vreinterpretq_f32_f64(vtrn1q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
    r[2] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
    r[3] = vreinterpretq_f32_f64(vtrn2q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
}

// 4 rows (rows of them real, the rest zero), elements [k0, k0 + valid) -> dst[k * stride + i].
template <ggml_type T>
void pack_group4(const char * const src[4], int rows, int64_t k0, int64_t valid, float * dst, int stride) {
    float32x4_t r[4];
    int64_t     k = 0;
    for (; k + 4 <= valid; k += 4) {
        for (int i = 0; i < 4; ++i) r[i] = i < rows ? load4<T>(src[i], k0 + k) : vdupq_n_f32(0.0f);
        transpose4(r);
        for (int i = 0; i < 4; ++i) vst1q_f32(dst + (k + i) * stride, r[i]);
    }
    if (k < valid) {
        const int64_t n = valid - k;
        for (int i = 0; i < 4; ++i) r[i] = i < rows ? load4_tail<T>(src[i], k0 + k, n) : vdupq_n_f32(0.0f);
        transpose4(r);
        for (int64_t i = 0; i < n; ++i) vst1q_f32(dst + (k + i) * stride, r[i]);
    }
}

void pack_group4_any(ggml_type t, const char * const src[4], int rows, int64_t k0, int64_t valid, float * dst,
                     int stride) {
    switch (t) {
        case GGML_TYPE_F32: pack_group4<GGML_TYPE_F32>(src, rows, k0, valid, dst, stride); break;
        case GGML_TYPE_F16: pack_group4<GGML_TYPE_F16>(src, rows, k0, valid, dst, stride); break;
        default: pack_group4<GGML_TYPE_BF16>(src, rows, k0, valid, dst, stride); break;
    }
}

// ---------------------------------------------------------------------------------------------
// activations

// Element (k = 0) of x row m of matrix mat; elements are nb0 bytes apart, of type F32/F16/BF16.
struct act_view {
    const char * data;
    ggml_type    type;
    size_t       nb0, nb1, nb2, nb3;
    int64_t      B2;
    const char * row(int64_t mat, int64_t m) const { return data + (mat % B2) * nb2 + (mat / B2) * nb3 + m * nb1; }
    float        at(const char * r, int64_t k) const { return ggml_load_f32(type, r + k * nb0); }
    bool         packed() const { return nb0 == ggml_type_size(type); }
};

act_view make_act_view(const struct ggml_tensor * x, int64_t B2) {
    return {(const char *) x->data, x->type, x->nb[0], x->nb[1], x->nb[2], x->nb[3], B2};
}

// A whole x row widened to F32 (k in [0, K)).
void widen_x_row(const act_view & xv, const char * src, int64_t K, float * d) {
    if (!xv.packed()) {
        for (int64_t k = 0; k < K; ++k) d[k] = xv.at(src, k);
        return;
    }
    int64_t k = 0;
    switch (xv.type) {
        case GGML_TYPE_F32: memcpy(d, src, (size_t) K * sizeof(float)); return;
        case GGML_TYPE_F16:
            for (; k + 4 <= K; k += 4) vst1q_f32(d + k, load4<GGML_TYPE_F16>(src, k));
            break;
        default:
            for (; k + 4 <= K; k += 4) vst1q_f32(d + k, load4<GGML_TYPE_BF16>(src, k));
            break;
    }
    for (; k < K; ++k) d[k] = xv.at(src, k);
}

// Panel of MR rows starting at m0 (rows of them real, the rest zero), K range [k0, k0+valid):
// F32 [k][MR].
void pack_x_panel(const act_view & xv, int64_t mat, int64_t m0, int64_t rows, int64_t k0, int64_t valid, float * dst) {
    const char * src[MR];
    for (int r = 0; r < MR; ++r) src[r] = r < rows ? xv.row(mat, m0 + r) : nullptr;
    if (xv.packed()) {
        // two groups of 4 rows, each transposed 4 K steps at a time into its half of the panel
        for (int g = 0; g < MR / 4; ++g) {
            const int n = (int) std::max<int64_t>(0, std::min<int64_t>(4, rows - 4 * g));
            pack_group4_any(xv.type, src + 4 * g, n, k0, valid, dst + 4 * g, MR);
        }
        return;
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
// weights

// n_cols weight rows from row0 (row stride nb1), K range [k0, k0+valid) -> dst [panel][k][NR],
// zero columns past n_cols. Block-quantized rows (k0 and valid whole blocks) are dequantized by
// the type's to_float, 4 rows x one K block at a time, then packed as F32.
void pack_w(ggml_type t, const char * row0, size_t nb1, int64_t n_cols, int64_t k0, int64_t valid, float * dst) {
    const int64_t n_panels = (n_cols + NR - 1) / NR;
    if (ggml_blck_size(t) > 1) {
        const size_t      k0_bytes = ggml_row_size(t, k0);
        const auto        to_float = ggml_get_type_traits(t)->to_float;
        alignas(16) float deq[4][KC]; // 4 KiB: the dequantized rows of one 4-row group
        for (int64_t p = 0; p < n_panels; ++p) {
            for (int j0 = 0; j0 < NR; j0 += 4) {
                const int64_t c0   = p * NR + j0;
                const int     rows = (int) std::max<int64_t>(0, std::min<int64_t>(4, n_cols - c0));
                const char *  src[4];
                for (int i = 0; i < 4; ++i) {
                    src[i] = nullptr;
                    if (i < rows) {
                        to_float(row0 + (c0 + i) * nb1 + k0_bytes, deq[i], valid);
                        src[i] = (const char *) deq[i];
                    }
                }
                pack_group4<GGML_TYPE_F32>(src, rows, 0, valid, dst + p * valid * NR + j0, NR);
            }
        }
        return;
    }
    for (int64_t p = 0; p < n_panels; ++p) {
        float * pd = dst + p * valid * NR;
        for (int j0 = 0; j0 < NR; j0 += 4) {
            const int64_t c0   = p * NR + j0;
            const int     rows = (int) std::max<int64_t>(0, std::min<int64_t>(4, n_cols - c0));
            const char *  src[4];
            for (int i = 0; i < 4; ++i) src[i] = i < rows ? row0 + (c0 + i) * nb1 : nullptr;
            pack_group4_any(t, src, rows, k0, valid, pd + j0, NR);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// micro-kernel: MR rows x NR columns over kc K steps. xp: [kc][MR] activations, wp: [kc][NR]
// weights (zero-padded, so the full tile is always computed); c: output row 0, rows ldc_bytes
// apart; rows x cols of the tile are stored; acc: add to c (later K blocks) instead of
// overwriting it.

#define MM_NEON_ROW(r, xv, lane)                                  \
    c##r##0 = vfmaq_laneq_f32(c##r##0, w0, xv, lane);             \
    c##r##1 = vfmaq_laneq_f32(c##r##1, w1, xv, lane);             \
    c##r##2 = vfmaq_laneq_f32(c##r##2, w2, xv, lane)

void ukr_8x12(int64_t kc, const float * xp, const float * wp, char * c, size_t ldc_bytes, int rows, int cols, bool acc) {
    const float32x4_t z = vdupq_n_f32(0.0f);
    float32x4_t c00 = z, c01 = z, c02 = z, c10 = z, c11 = z, c12 = z, c20 = z, c21 = z, c22 = z, c30 = z, c31 = z,
                c32 = z, c40 = z, c41 = z, c42 = z, c50 = z, c51 = z, c52 = z, c60 = z, c61 = z, c62 = z, c70 = z,
                c71 = z, c72 = z;
#pragma GCC unroll 2
    for (int64_t k = 0; k < kc; ++k) {
        const float32x4_t w0 = vld1q_f32(wp), w1 = vld1q_f32(wp + 4), w2 = vld1q_f32(wp + 8);
        const float32x4_t x0 = vld1q_f32(xp), x1 = vld1q_f32(xp + 4);
        MM_NEON_ROW(0, x0, 0);
        MM_NEON_ROW(1, x0, 1);
        MM_NEON_ROW(2, x0, 2);
        MM_NEON_ROW(3, x0, 3);
        MM_NEON_ROW(4, x1, 0);
        MM_NEON_ROW(5, x1, 1);
        MM_NEON_ROW(6, x1, 2);
        MM_NEON_ROW(7, x1, 3);
        xp += MR;
        wp += NR;
    }
    // through a tile in memory: 24 stores per kc x 24 FMAs, and the tails need no special cases
    alignas(16) float t[MR][NR];
    const float32x4_t cv[MR][3] = {{c00, c01, c02}, {c10, c11, c12}, {c20, c21, c22}, {c30, c31, c32},
                                   {c40, c41, c42}, {c50, c51, c52}, {c60, c61, c62}, {c70, c71, c72}};
    if (cols == NR) {
        for (int r = 0; r < rows; ++r) {
            float * cr = (float *) (c + (size_t) r * ldc_bytes);
            for (int j = 0; j < 3; ++j) {
                float32x4_t v = cv[r][j];
                if (acc) v = vaddq_f32(v, vld1q_f32(cr + 4 * j));
                vst1q_f32(cr + 4 * j, v);
            }
        }
        return;
    }
    for (int r = 0; r < rows; ++r)
        for (int j = 0; j < 3; ++j) vst1q_f32(&t[r][4 * j], cv[r][j]);
    for (int r = 0; r < rows; ++r) {
        float * cr = (float *) (c + (size_t) r * ldc_bytes);
        for (int j = 0; j < cols; ++j) cr[j] = acc ? cr[j] + t[r][j] : t[r][j];
    }
}

#undef MM_NEON_ROW

// ---------------------------------------------------------------------------------------------
// packed GEMM driver

// Output element (m, n) of matrix mat.
struct out_view {
    char *  data;
    size_t  nb1, nb2, nb3;
    int64_t B2;
    char *  at(int64_t mat, int64_t m, int64_t n) const {
        return data + (mat % B2) * nb2 + (mat / B2) * nb3 + m * nb1 + (size_t) n * sizeof(float);
    }
};

out_view make_out_view(const plan & pl, struct ggml_tensor * dst) {
    return {(char *) dst->data, dst->nb[1], dst->nb[2], dst->nb[3], pl.B2};
}

// One run: matrix mat, activation rows [m0, m1) (m0 a multiple of MR), weight columns [n0, n0+nn).
void gemm_run(const plan & pl, const float * xbuf, float * wbuf, const out_view & ov, int64_t mat, int64_t m0,
              int64_t m1, int64_t n0, int64_t nn) {
    const struct ggml_tensor * a        = pl.ws;
    const int64_t              i2       = mat % pl.B2, i3 = mat / pl.B2;
    const char *               w_mat    = (const char *) a->data + (i2 / pl.r2) * a->nb[2] + (i3 / pl.r3) * a->nb[3];
    const char *               row0     = w_mat + n0 * a->nb[1];
    const int64_t              n_panels = (nn + NR - 1) / NR;
    const float *              x_mat    = xbuf + mat * pl.mp * pl.K;

    for (int64_t k0 = 0; k0 < pl.K; k0 += KC) {
        const int64_t valid = std::min(KC, pl.K - k0);
        pack_w(a->type, row0, a->nb[1], nn, k0, valid, wbuf);
        for (int64_t mc = m0; mc < m1; mc += MC_ROWS) {
            const int64_t mc1 = std::min(m1, mc + MC_ROWS);
            for (int64_t p = 0; p < n_panels; ++p) {
                const int     cols = (int) std::min<int64_t>(NR, nn - p * NR);
                const float * wp   = wbuf + p * valid * NR;
                for (int64_t m = mc; m < mc1; m += MR) {
                    const int     rows = (int) std::min<int64_t>(MR, pl.M - m);
                    const float * xp   = x_mat + pl.mp * k0 + (m / MR) * MR * valid;
                    ukr_8x12(valid, xp, wp, ov.at(mat, m, n0 + p * NR), ov.nb1, rows, cols, k0 > 0);
                }
            }
        }
    }
}

void gemm_packed(const plan & pl, const struct ggml_compute_params * params, struct ggml_tensor * dst, char * wbase) {
    const int ith = params->ith, nth = params->nth;

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
        gemm_run(pl, xbuf, wbuf, ov, mat, m0, m1, n0, std::min(np * NR, pl.N - n0));
        u += np;
    }
}

// ---------------------------------------------------------------------------------------------
// small M: vectors along K straight from the weight rows

template <int R>
__attribute__((always_inline)) inline void fma_rows(float32x4_t (&acc)[R], float32x4_t wv, const float32x4_t (&xv)[R]) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = vfmaq_f32(acc[r], wv, xv[r]);
}

// out[j][r] = w[j] . x[r] for 4 weight rows j and R (<= 4) activation rows r. One accumulator
// array per weight row (not one [4][R] array): GCC keeps arrays of up to 64 bytes in registers,
// the 256-byte one it stored to memory every K step.
template <ggml_type T, int R>
void dot_4xR(int64_t K, const char * const w[4], const float * const x[R], float out[4][4]) {
    float32x4_t a0[R], a1[R], a2[R], a3[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) a0[r] = a1[r] = a2[r] = a3[r] = vdupq_n_f32(0.0f);
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
        float32x4_t xv[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) xv[r] = vld1q_f32(x[r] + k);
        fma_rows<R>(a0, load4<T>(w[0], k), xv);
        fma_rows<R>(a1, load4<T>(w[1], k), xv);
        fma_rows<R>(a2, load4<T>(w[2], k), xv);
        fma_rows<R>(a3, load4<T>(w[3], k), xv);
    }
    if (k < K) {
        // the last K % 4 elements as one more vector step, zero-filled past the row ends (0 * 0
        // adds an exact 0): every weight type then sums in the same order, so F16/BF16 weights
        // give exactly the F32 result of their widened values
        const int64_t n = K - k;
        float32x4_t   xv[R];
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) xv[r] = load4_tail<GGML_TYPE_F32>((const char *) x[r], k, n);
        fma_rows<R>(a0, load4_tail<T>(w[0], k, n), xv);
        fma_rows<R>(a1, load4_tail<T>(w[1], k, n), xv);
        fma_rows<R>(a2, load4_tail<T>(w[2], k, n), xv);
        fma_rows<R>(a3, load4_tail<T>(w[3], k, n), xv);
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
        out[0][r] = vaddvq_f32(a0[r]);
        out[1][r] = vaddvq_f32(a1[r]);
        out[2][r] = vaddvq_f32(a2[r]);
        out[3][r] = vaddvq_f32(a3[r]);
    }
}

template <ggml_type T>
void dot_4xR_any(int R, int64_t K, const char * const w[4], const float * const x[4], float out[4][4]) {
    switch (R) {
        case 1: dot_4xR<T, 1>(K, w, x, out); break;
        case 2: dot_4xR<T, 2>(K, w, x, out); break;
        case 3: dot_4xR<T, 3>(K, w, x, out); break;
        default: dot_4xR<T, 4>(K, w, x, out); break;
    }
}

void gemv_small(const plan & pl, const struct ggml_compute_params * params, struct ggml_tensor * dst, char * wbase) {
    const struct ggml_tensor * a        = pl.ws;
    const int                  ith      = params->ith, nth = params->nth;
    const act_view             xv       = make_act_view(pl.xs, pl.B2);
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
        for (int64_t m0 = 0; m0 < pl.M; m0 += 4) {
            const int     R = (int) std::min<int64_t>(4, pl.M - m0);
            const float * x[4];
            for (int r = 0; r < 4; ++r) {
                const int64_t m = m0 + std::min(r, R - 1);
                x[r]            = gathered ? (const float *) wbase + (mat * pl.M + m) * pl.K
                                           : (const float *) xv.row(mat, m);
            }
            float out[4][4];
            switch (a->type) {
                case GGML_TYPE_F32: dot_4xR_any<GGML_TYPE_F32>(R, pl.K, w, x, out); break;
                case GGML_TYPE_F16: dot_4xR_any<GGML_TYPE_F16>(R, pl.K, w, x, out); break;
                default: dot_4xR_any<GGML_TYPE_BF16>(R, pl.K, w, x, out); break;
            }
            for (int r = 0; r < R; ++r) {
                float * o = (float *) ov.at(mat, m0 + r, n0);
                for (int64_t j = 0; j < nn; ++j) o[j] = out[j][r];
            }
        }
    }
}

const char * kernel_name(const plan & pl) {
    const ggml_type t = pl.ws ? pl.ws->type : GGML_TYPE_F32;
    switch (pl.p) {
        case path::small:
            return t == GGML_TYPE_F16    ? "neon small-M dot (f32, f16 weights widened)"
                   : t == GGML_TYPE_BF16 ? "neon small-M dot (f32, bf16 weights widened)"
                                         : "neon small-M dot (f32)";
        case path::f32:
            if (ggml_blck_size(t) > 1) return "neon f32fma, weights and activations dequantized";
            return t == GGML_TYPE_F16    ? "neon f32fma (f16 weights widened)"
                   : t == GGML_TYPE_BF16 ? "neon f32fma (bf16 weights widened)"
                                         : "neon f32fma";
        default: return nullptr;
    }
}

} // namespace

bool ggml_cpu_mul_mat_neon_shape_ok(const struct ggml_tensor * dst) { return make_plan(dst).p != path::none; }

bool ggml_cpu_mul_mat_neon_usable(const struct ggml_tensor * dst) {
    return ggml_cpu_isa_allows(ggml_cpu_isa::neon) && ggml_cpu_mul_mat_neon_shape_ok(dst);
}

size_t ggml_cpu_mul_mat_neon_work_size(const struct ggml_tensor * dst, int n_threads) {
    return plan_bytes(make_plan(dst), n_threads);
}

const char * ggml_cpu_mul_mat_neon_kernel(const struct ggml_tensor * dst) {
    if (!ggml_cpu_isa_allows(ggml_cpu_isa::neon)) return nullptr;
    return kernel_name(make_plan(dst));
}

bool ggml_cpu_mul_mat_neon_dequantizes(enum ggml_type t) { return dequantizes(t); }

const char * ggml_cpu_mul_mat_neon_dequant_kernel(const struct ggml_tensor *) {
    return ggml_cpu_isa_allows(ggml_cpu_isa::neon) ? "neon f32fma, weights and activations dequantized" : nullptr;
}

void ggml_cpu_mul_mat_neon(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const plan pl = make_plan(dst);
    GGML_ASSERT(pl.p != path::none && "mul_mat: NEON path called for an unsupported node");
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

#else // not AArch64: the x86 or portable paths do everything

bool ggml_cpu_mul_mat_neon_usable(const struct ggml_tensor *) { return false; }
bool ggml_cpu_mul_mat_neon_shape_ok(const struct ggml_tensor *) { return false; }
size_t ggml_cpu_mul_mat_neon_work_size(const struct ggml_tensor *, int) { return 0; }
bool ggml_cpu_mul_mat_neon_dequantizes(enum ggml_type) { return false; }
const char * ggml_cpu_mul_mat_neon_dequant_kernel(const struct ggml_tensor *) { return nullptr; }
const char * ggml_cpu_mul_mat_neon_kernel(const struct ggml_tensor *) { return nullptr; }
void ggml_cpu_mul_mat_neon(const struct ggml_compute_params *, struct ggml_tensor *) {}

#endif
