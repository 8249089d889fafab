// quant-dot-fast-i8mm.cpp — ARMv8.6-A i8mm (SMMLA) tiles for MUL_MAT with Q8_0, Q4_0, Q5_0, Q4_1,
// Q5_1, Q4_K, Q5_K and Q6_K weights (interface: quant-dot-fast.h; decoders: quant-dot-neon-blocks.h).
// Built with -march=armv8.2-a+dotprod+fp16+i8mm+bf16 (cmake/arm-kernel-flags.cmake) and returned
// only when the active level allows i8mm.
//
// vmmlaq_s32(acc, w, a) multiplies a 2x8 int8 matrix (w: 8 elements of weight rows r0, r1) by an
// 8x2 one (a: the same 8 elements of activation rows c0, c1) into the 2x2 int32 lanes
// (r0c0, r0c1, r1c0, r1c1): 32 exact int8 MACs per instruction, and each output's block sum lands
// in its own lane, so no horizontal reduction is needed. A chunk of 32 elements takes 4 SMMLA per
// (row pair, column pair). The decoded weight rows are paired with zip1/zip2 on 64-bit lanes (once
// per row pair and chunk, shared by the column pairs); the activation pairs are built by loads
// (8 bytes of each row into one register), not ALU work.
// Micro-tile: 2 row pairs x 2 column pairs (4 x 4 outputs). Odd counts: the missing row / column
// repeats the last one and its lanes are not stored. A single activation row (matrix-vector) runs
// the SDOT engine instead, which wastes no lanes.

#include "quant-dot-fast.h"

#if defined(__aarch64__)

#include "quant-dot-neon-blocks.h"

namespace {

constexpr int MM_ROW_PAIRS = 2, MM_COL_PAIRS = 2;

inline int8x16_t zip_lo64(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
inline int8x16_t zip_hi64(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
inline int32x4_t pair_lanes_i(int32_t a, int32_t b) { return vcombine_s32(vdup_n_s32(a), vdup_n_s32(b)); }
inline float32x4_t pair_lanes_f(float a, float b) { return vcombine_f32(vdup_n_f32(a), vdup_n_f32(b)); }
inline float32x4_t alt_lanes_f(float a, float b) {
    const float v[4] = {a, b, a, b};
    return vld1q_f32(v);
}

template <class D, int RP, int CP>
void tile_mm(int64_t nblk, const char * w, size_t ws, int nr, const char * x, size_t xs, int nc, float * out, size_t ldo) {
    using W = typename D::W;
    using A = typename D::A;
    const W * wrow[2 * RP];
    for (int r = 0; r < 2 * RP; ++r) wrow[r] = (const W *) (w + (r < nr ? r : nr - 1) * ws);
    const A * xrow[2 * CP];
    for (int c = 0; c < 2 * CP; ++c) xrow[c] = (const A *) (x + (c < nc ? c : nc - 1) * xs);
    float32x4_t acc[RP][CP];
    for (int p = 0; p < RP; ++p)
        for (int q = 0; q < CP; ++q) acc[p][q] = vdupq_n_f32(0.0f);
    for (int64_t i = 0; i < nblk; ++i) {
        typename D::row wr[2 * RP];
        for (int r = 0; r < 2 * RP; ++r) D::load(wrow[r] + i, wr[r]);
        const A * xb[2 * CP];
        for (int c = 0; c < 2 * CP; ++c) xb[c] = xrow[c] + i;
        int32x4_t isum[RP][CP];
        for (int p = 0; p < RP; ++p)
            for (int q = 0; q < CP; ++q) isum[p][q] = vdupq_n_s32(0);
        for (int j = 0; j < D::CHUNKS; ++j) {
            int8x16_t wz[RP][4];
            for (int p = 0; p < RP; ++p) {
                int8x16_t l0, h0, l1, h1;
                D::chunk(wr[2 * p], j, l0, h0);
                D::chunk(wr[2 * p + 1], j, l1, h1);
                wz[p][0] = zip_lo64(l0, l1);
                wz[p][1] = zip_hi64(l0, l1);
                wz[p][2] = zip_lo64(h0, h1);
                wz[p][3] = zip_hi64(h0, h1);
            }
            for (int q = 0; q < CP; ++q) {
                const int8_t * a0 = act_qs(xb[2 * q]) + 32 * j;
                const int8_t * a1 = act_qs(xb[2 * q + 1]) + 32 * j;
                int8x16_t      az[4];
                for (int k = 0; k < 4; ++k) az[k] = vcombine_s8(vld1_s8(a0 + 8 * k), vld1_s8(a1 + 8 * k));
                for (int p = 0; p < RP; ++p) {
                    if constexpr (D::KIND == dot_kind::sym || D::KIND == dot_kind::affine) {
                        for (int k = 0; k < 4; ++k) isum[p][q] = vmmlaq_s32(isum[p][q], wz[p][k], az[k]);
                    } else if constexpr (D::KIND == dot_kind::k_min) {
                        int32x4_t t = vmmlaq_s32(vdupq_n_s32(0), wz[p][0], az[0]);
                        for (int k = 1; k < 4; ++k) t = vmmlaq_s32(t, wz[p][k], az[k]);
                        isum[p][q] = vmlaq_s32(isum[p][q], t, pair_lanes_i(wr[2 * p].sc[j], wr[2 * p + 1].sc[j]));
                    } else {
                        const int32x4_t tl = vmmlaq_s32(vmmlaq_s32(vdupq_n_s32(0), wz[p][0], az[0]), wz[p][1], az[1]);
                        const int32x4_t th = vmmlaq_s32(vmmlaq_s32(vdupq_n_s32(0), wz[p][2], az[2]), wz[p][3], az[3]);
                        isum[p][q] = vmlaq_s32(isum[p][q], tl, pair_lanes_i(D::scale(wr[2 * p], 2 * j), D::scale(wr[2 * p + 1], 2 * j)));
                        isum[p][q] = vmlaq_s32(isum[p][q], th,
                                               pair_lanes_i(D::scale(wr[2 * p], 2 * j + 1), D::scale(wr[2 * p + 1], 2 * j + 1)));
                    }
                }
            }
        }
        // the F32 part: lanes (r0c0, r0c1, r1c0, r1c1)
        for (int q = 0; q < CP; ++q) {
            const float32x4_t da = alt_lanes_f(act_d(xb[2 * q]), act_d(xb[2 * q + 1]));
            for (int p = 0; p < RP; ++p) {
                const float32x4_t dw = pair_lanes_f(wr[2 * p].d, wr[2 * p + 1].d);
                acc[p][q]            = vfmaq_f32(acc[p][q], vcvtq_f32_s32(isum[p][q]), vmulq_f32(dw, da));
                if constexpr (D::KIND == dot_kind::affine) {
                    acc[p][q] = vfmaq_f32(acc[p][q], pair_lanes_f(wr[2 * p].m, wr[2 * p + 1].m),
                                          alt_lanes_f(act_s(xb[2 * q]), act_s(xb[2 * q + 1])));
                }
                if constexpr (D::KIND == dot_kind::k_min) {
                    const int32x4_t summ = reduce4(D::min_sums(wr[2 * p], xb[2 * q]), D::min_sums(wr[2 * p], xb[2 * q + 1]),
                                                   D::min_sums(wr[2 * p + 1], xb[2 * q]), D::min_sums(wr[2 * p + 1], xb[2 * q + 1]));
                    const float32x4_t mdmin = pair_lanes_f(-wr[2 * p].dmin, -wr[2 * p + 1].dmin);
                    acc[p][q]               = vfmaq_f32(acc[p][q], vcvtq_f32_s32(summ), vmulq_f32(mdmin, da));
                }
            }
        }
    }
    for (int p = 0; p < RP; ++p) {
        for (int q = 0; q < CP; ++q) {
            float v[4];
            vst1q_f32(v, acc[p][q]);
            for (int k = 0; k < 4; ++k) {
                const int r = 2 * p + k / 2, c = 2 * q + k % 2;
                if (r < nr && c < nc) out[c * ldo + r] = v[k];
            }
        }
    }
}

template <class D> void entry(int64_t K, const char * w, size_t ws, int nr, const char * x, size_t xs, int nc, float * out, size_t ldo) {
    if (nc == 1) {
        run_rc<D, prod_sdot, 4>(K, w, ws, nr, x, xs, nc, out, ldo);
        return;
    }
    const int64_t nblk = K / D::QK;
    constexpr int TR = 2 * MM_ROW_PAIRS, TC = 2 * MM_COL_PAIRS;
    for (int r0 = 0; r0 < nr; r0 += TR) {
        const int rr = nr - r0 < TR ? nr - r0 : TR;
        int       c0 = 0;
        for (; c0 + TC <= nc; c0 += TC) {
            tile_mm<D, MM_ROW_PAIRS, MM_COL_PAIRS>(nblk, w + r0 * ws, ws, rr, x + c0 * xs, xs, TC, out + c0 * ldo + r0, ldo);
        }
        // the remaining 1..3 columns one pair at a time (an odd last one repeats and is not stored)
        for (; c0 < nc; c0 += 2) {
            const int cc = nc - c0 < 2 ? nc - c0 : 2;
            tile_mm<D, MM_ROW_PAIRS, 1>(nblk, w + r0 * ws, ws, rr, x + c0 * xs, xs, cc, out + c0 * ldo + r0, ldo);
        }
    }
}

const ggml_quant_dot_fast k_i8mm_q8_0 = {"i8mm q8_0", entry<dec_q8_0>, nullptr, nullptr};
const ggml_quant_dot_fast k_i8mm_q4_0 = {"i8mm q4_0", entry<dec_q4_0>, nullptr, nullptr};
const ggml_quant_dot_fast k_i8mm_q5_0 = {"i8mm q5_0", entry<dec_q5_0>, nullptr, nullptr};
const ggml_quant_dot_fast k_i8mm_q4_1 = {"i8mm q4_1", entry<dec_q4_1>, nullptr, nullptr};
const ggml_quant_dot_fast k_i8mm_q5_1 = {"i8mm q5_1", entry<dec_q5_1>, nullptr, nullptr};
const ggml_quant_dot_fast k_i8mm_q4_K = {"i8mm q4_K", entry<dec_q4_K>, nullptr, nullptr};
const ggml_quant_dot_fast k_i8mm_q5_K = {"i8mm q5_K", entry<dec_q5_K>, nullptr, nullptr};
const ggml_quant_dot_fast k_i8mm_q6_K = {"i8mm q6_K", entry<dec_q6_K>, nullptr, nullptr};

} // namespace

const ggml_quant_dot_fast * ggml_cpu_quant_dot_i8mm(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q8_0: return &k_i8mm_q8_0;
        case GGML_TYPE_Q4_0: return &k_i8mm_q4_0;
        case GGML_TYPE_Q5_0: return &k_i8mm_q5_0;
        case GGML_TYPE_Q4_1: return &k_i8mm_q4_1;
        case GGML_TYPE_Q5_1: return &k_i8mm_q5_1;
        case GGML_TYPE_Q4_K: return &k_i8mm_q4_K;
        case GGML_TYPE_Q5_K: return &k_i8mm_q5_K;
        case GGML_TYPE_Q6_K: return &k_i8mm_q6_K;
        default: return nullptr;
    }
}

#else // not AArch64: no SMMLA tiles

const ggml_quant_dot_fast * ggml_cpu_quant_dot_i8mm(enum ggml_type) { return nullptr; }

#endif
