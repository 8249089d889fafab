// ggml-quants.cpp — reference code of the block-quantized types: quantizers (upstream ggml's
// reference algorithms), dequantizers, and the portable dot products mul_mat is defined by.
//
// Exactness: the quantizers reproduce upstream's quantize_row_*_ref step by step (same float
// operations in the same order), so blocks are bit-identical to upstream's reference built without
// FMA contraction (test-quants checks Q4_0..Q8_0 against the Python `gguf` package and the K-quants
// against a numpy transcription). This file is compiled with -ffp-contract=off (ggml/CMakeLists.txt):
// an FMA contracted from a*b + c rounds once instead of twice and changes K-quant blocks. Where upstream's C converts an out-of-range or non-finite float to an integer (undefined
// behaviour; x86 yields 0 after truncation to a byte), this code returns 0 explicitly, which is also
// what numpy yields for the gguf package, so every block stays deterministic.
//
// Layouts and the meaning of every field: ggml-common.h.

#include "formats/ggml-quants.h"

#include "ggml-impl.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace {

inline float h2f(ggml_fp16_t h) {
    return ggml_fp16_to_fp32(h);
}
inline ggml_fp16_t f2h(float f) {
    return ggml_fp32_to_fp16(f);
}

// (int8_t)(v) followed by MIN(hi, .) in upstream's Q4_0/Q4_1/Q5_0/Q5_1 quantizers: truncation
// toward zero of a value that is in [0, hi + 1) for every finite input.
inline int trunc_clamped(float v, int hi) {
    if (!std::isfinite(v) || v < 0.0f) return 0;
    return v >= (float) hi ? hi : (int) v;
}

// roundf then conversion to int8_t in upstream's Q8_0/Q8_1 quantizers (half away from zero).
inline int8_t round_to_i8(float v) {
    if (!std::isfinite(v)) return 0;
    const float r = std::round(v);
    return (int8_t) std::max(-128.0f, std::min(127.0f, r));
}

} // namespace

// =============================================================================================
// 32-element blocks

void quantize_row_q4_0_ref(const float * x, block_q4_0 * y, int64_t k) {
    GGML_ASSERT(k % QK4_0 == 0);
    for (int64_t b = 0; b < k / QK4_0; b++) {
        const float * xb = x + b * QK4_0;
        // the element of largest magnitude, with its sign: it is mapped to q = 0 exactly (-8 * d)
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK4_0; j++) {
            if (amax < std::fabs(xb[j])) {
                amax = std::fabs(xb[j]);
                max  = xb[j];
            }
        }
        const float d  = max / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f; // from the float d, before it is rounded to half
        y[b].d         = f2h(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int q0 = trunc_clamped(xb[j] * id + 8.5f, 15);
            const int q1 = trunc_clamped(xb[j + QK4_0 / 2] * id + 8.5f, 15);
            y[b].qs[j]   = (uint8_t) (q0 | (q1 << 4));
        }
    }
}

void quantize_row_q4_1_ref(const float * x, block_q4_1 * y, int64_t k) {
    GGML_ASSERT(k % QK4_1 == 0);
    for (int64_t b = 0; b < k / QK4_1; b++) {
        const float * xb  = x + b * QK4_1;
        float         min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QK4_1; j++) {
            if (xb[j] < min) min = xb[j];
            if (xb[j] > max) max = xb[j];
        }
        const float d  = (max - min) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d         = f2h(d);
        y[b].m         = f2h(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const int q0 = trunc_clamped((xb[j] - min) * id + 0.5f, 15);
            const int q1 = trunc_clamped((xb[j + QK4_1 / 2] - min) * id + 0.5f, 15);
            y[b].qs[j]   = (uint8_t) (q0 | (q1 << 4));
        }
    }
}

namespace {

// qs/qh of Q5_0 and Q5_1 from 32 five-bit values: low nibbles as Q4_0, bit 4 of element j in bit j of qh
template <typename Block> void pack_q5(const int * q, Block & blk) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        blk.qs[j] = (uint8_t) ((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
        qh |= (uint32_t) ((q[j] >> 4) & 1) << j;
        qh |= (uint32_t) ((q[j + 16] >> 4) & 1) << (j + 16);
    }
    memcpy(blk.qh, &qh, sizeof(qh)); // little-endian, as the file format
}

// the 32 stored values of a Q4_0/Q4_1 block (0..15) or Q5_0/Q5_1 block (0..31), element order
template <typename Block> void unpack_nibbles(const Block & blk, int * q) {
    for (int j = 0; j < 16; j++) {
        q[j]      = blk.qs[j] & 0x0F;
        q[j + 16] = blk.qs[j] >> 4;
    }
}
template <typename Block> void unpack_q5(const Block & blk, int * q) {
    unpack_nibbles(blk, q);
    uint32_t qh;
    memcpy(&qh, blk.qh, sizeof(qh));
    for (int j = 0; j < 32; j++) q[j] |= (int) ((qh >> j) & 1u) << 4;
}

} // namespace

void quantize_row_q5_0_ref(const float * x, block_q5_0 * y, int64_t k) {
    GGML_ASSERT(k % QK5_0 == 0);
    for (int64_t b = 0; b < k / QK5_0; b++) {
        const float * xb   = x + b * QK5_0;
        float         amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK5_0; j++) {
            if (amax < std::fabs(xb[j])) {
                amax = std::fabs(xb[j]);
                max  = xb[j];
            }
        }
        const float d  = max / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d         = f2h(d);
        int q[QK5_0];
        for (int j = 0; j < QK5_0; j++) q[j] = trunc_clamped(xb[j] * id + 16.5f, 31);
        pack_q5(q, y[b]);
    }
}

void quantize_row_q5_1_ref(const float * x, block_q5_1 * y, int64_t k) {
    GGML_ASSERT(k % QK5_1 == 0);
    for (int64_t b = 0; b < k / QK5_1; b++) {
        const float * xb  = x + b * QK5_1;
        float         min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QK5_1; j++) {
            if (xb[j] < min) min = xb[j];
            if (xb[j] > max) max = xb[j];
        }
        const float d  = (max - min) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d         = f2h(d);
        y[b].m         = f2h(min);
        int q[QK5_1];
        // upstream does not clamp here ((max - min) * id + 0.5 < 32 for finite inputs); 31 is the same
        for (int j = 0; j < QK5_1; j++) q[j] = trunc_clamped((xb[j] - min) * id + 0.5f, 31);
        pack_q5(q, y[b]);
    }
}

void quantize_row_q8_0_ref(const float * x, block_q8_0 * y, int64_t k) {
    GGML_ASSERT(k % QK8_0 == 0);
    for (int64_t b = 0; b < k / QK8_0; b++) {
        const float * xb   = x + b * QK8_0;
        float         amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) amax = std::max(amax, std::fabs(xb[j]));
        const float d  = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d         = f2h(d);
        for (int j = 0; j < QK8_0; j++) y[b].qs[j] = round_to_i8(xb[j] * id);
    }
}

void quantize_row_q8_1_ref(const float * x, block_q8_1 * y, int64_t k) {
    GGML_ASSERT(k % QK8_1 == 0);
    for (int64_t b = 0; b < k / QK8_1; b++) {
        const float * xb   = x + b * QK8_1;
        float         amax = 0.0f;
        for (int j = 0; j < QK8_1; j++) amax = std::max(amax, std::fabs(xb[j]));
        const float d  = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d         = f2h(d);
        int sum        = 0;
        for (int j = 0; j < QK8_1; j++) {
            y[b].qs[j] = round_to_i8(xb[j] * id);
            sum += y[b].qs[j];
        }
        // the float d (not its half rounding) times the integer sum, as upstream
        y[b].s = f2h((float) sum * d);
    }
}

void dequantize_row_q4_0(const block_q4_0 * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK4_0 == 0);
    for (int64_t b = 0; b < k / QK4_0; b++) {
        const float d = h2f(x[b].d);
        int         q[QK4_0];
        unpack_nibbles(x[b], q);
        for (int j = 0; j < QK4_0; j++) y[b * QK4_0 + j] = (float) (q[j] - 8) * d;
    }
}

void dequantize_row_q4_1(const block_q4_1 * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK4_1 == 0);
    for (int64_t b = 0; b < k / QK4_1; b++) {
        const float d = h2f(x[b].d), m = h2f(x[b].m);
        int         q[QK4_1];
        unpack_nibbles(x[b], q);
        for (int j = 0; j < QK4_1; j++) y[b * QK4_1 + j] = (float) q[j] * d + m;
    }
}

void dequantize_row_q5_0(const block_q5_0 * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK5_0 == 0);
    for (int64_t b = 0; b < k / QK5_0; b++) {
        const float d = h2f(x[b].d);
        int         q[QK5_0];
        unpack_q5(x[b], q);
        for (int j = 0; j < QK5_0; j++) y[b * QK5_0 + j] = (float) (q[j] - 16) * d;
    }
}

void dequantize_row_q5_1(const block_q5_1 * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK5_1 == 0);
    for (int64_t b = 0; b < k / QK5_1; b++) {
        const float d = h2f(x[b].d), m = h2f(x[b].m);
        int         q[QK5_1];
        unpack_q5(x[b], q);
        for (int j = 0; j < QK5_1; j++) y[b * QK5_1 + j] = (float) q[j] * d + m;
    }
}

void dequantize_row_q8_0(const block_q8_0 * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK8_0 == 0);
    for (int64_t b = 0; b < k / QK8_0; b++) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK8_0; j++) y[b * QK8_0 + j] = (float) x[b].qs[j] * d;
    }
}

void dequantize_row_q8_1(const block_q8_1 * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK8_1 == 0);
    for (int64_t b = 0; b < k / QK8_1; b++) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK8_1; j++) y[b * QK8_1 + j] = (float) x[b].qs[j] * d;
    }
}

// =============================================================================================
// 256-element super-blocks (K-quants)

namespace {

// upstream's nearest_int: round half to even, for |v| < 2^22 (upstream asserts that range; beyond
// it, and for NaN, this returns the clamped value / 0 instead of undefined bits)
inline int nearest_int(float v) {
    if (!(std::fabs(v) <= 4194303.0f)) return v > 0 ? 4194303 : v < 0 ? -4194303 : 0;
    return (int) std::nearbyint(v); // the default rounding mode: to nearest, ties to even
}

constexpr float k_group_max_eps = 1e-15f; // upstream's GROUP_MAX_EPS: below it a group is all zero

// The first element of largest magnitude, with its sign.
inline float signed_absmax(int n, const float * x, float * amax_out) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max  = x[i];
        }
    }
    *amax_out = amax;
    return max;
}

// upstream's make_qx_quants with rmse_type 1 and no importance weights (weights x^2): symmetric
// quants L in [0, 2 nmax) (value l - nmax) and the scale minimizing the weighted squared error,
// searched over 19 candidate inverse scales -(nmax + 0.1 is) / max.
float make_qx_quants_rmse1(int n, int nmax, const float * x, int8_t * L) {
    float       amax;
    const float max = signed_absmax(n, x, &amax);
    if (amax < k_group_max_eps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.0f;
    }
    auto sums = [&](float iscale, float & sumlx, float & suml2, bool store) {
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
            if (store) L[i] = (int8_t) (l + nmax);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * (float) l;
            suml2 += w * (float) l * (float) l;
        }
    };
    float sumlx, suml2;
    sums((float) -nmax / max, sumlx, suml2, true);
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best  = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        const float iscale = -((float) nmax + 0.1f * (float) is) / max;
        sums(iscale, sumlx, suml2, false);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            sums(iscale, sumlx, suml2, true);
            scale = sumlx / suml2;
            best  = scale * sumlx;
        }
    }
    return scale;
}

// upstream's make_qkx2_quants: affine quants L in [0, nmax] with x ~ scale * L - the_min (the_min >= 0),
// minimizing the weighted error (squared, or absolute with use_mad) over nstep + 1 candidate scales
// (rmin + rdelta is + nmax) / (max - min), each refined by a weighted least-squares fit.
float make_qkx2_quants(int n, int nmax, const float * x, const float * weights, uint8_t * L, float * the_min,
                       uint8_t * Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.0f;
    }
    auto err_of = [&](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };
    float iscale     = (float) nmax / (max - min);
    float scale      = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l      = nearest_int(iscale * (x[i] - min));
        L[i]             = (uint8_t) std::max(0, std::min(nmax, l));
        const float diff = scale * (float) L[i] + min - x[i];
        best_error += weights[i] * err_of(diff);
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale      = (rmin + rdelta * (float) is + (float) nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
            Laux[i]     = (uint8_t) l;
            const float w = weights[i];
            sum_l += w * (float) l;
            sum_l2 += w * (float) l * (float) l;
            sum_xl += w * (float) l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min   = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min   = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                const float diff = this_scale * (float) Laux[i] + this_min - x[i];
                cur_error += weights[i] * err_of(diff);
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale      = this_scale;
                min        = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

// upstream's make_q3_quants with do_rmse: symmetric quants L in [0, 2 nmax) (value l - nmax) from
// iscale = -nmax / max, then up to 5 passes that move single elements to the quant that most
// improves the x^2-weighted least-squares fit, and the fitted scale.
float make_q3_quants(int n, int nmax, const float * x, int8_t * L) {
    float       amax;
    const float max = signed_absmax(n, x, &amax);
    if (amax < k_group_max_eps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.0f;
    }
    const float iscale = (float) -nmax / max;
    float       sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l   = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
        L[i]          = (int8_t) l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float) l;
        suml2 += w * (float) l * (float) l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w   = x[i] * x[i];
            float       slx = sumlx - w * x[i] * (float) L[i];
            if (slx > 0) {
                float sl2   = suml2 - w * (float) L[i] * (float) L[i];
                int   new_l = std::max(-nmax, std::min(nmax - 1, nearest_int(x[i] * sl2 / slx)));
                if (new_l != L[i]) {
                    slx += w * x[i] * (float) new_l;
                    sl2 += w * (float) new_l * (float) new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i]  = (int8_t) new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = (int8_t) (L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Q2_K and Q3_K store 2-bit values in 128-element halves: byte l of half c holds elements
// 128c + 32k + l at bits 2k..2k+1 (k = 0..3).
int q2k_crumb(const uint8_t * qs, int e) {
    const int c = e / 128, k = (e % 128) / 32, l = e % 32;
    return (qs[32 * c + l] >> (2 * k)) & 3;
}
void pack_crumbs(const uint8_t * L, uint8_t * qs) {
    for (int c = 0; c < 2; ++c) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t * Lc = L + 128 * c;
            qs[32 * c + l]     = (uint8_t) (Lc[l] | (Lc[l + 32] << 2) | (Lc[l + 64] << 4) | (Lc[l + 96] << 6));
        }
    }
}

// Q3_K: 16 six-bit scales (stored + 32) in 12 bytes: the low 4 bits of scale j in the low (j < 8)
// or high (j >= 8) nibble of byte j % 8, its top 2 bits at bits 2 (j / 4) of byte 8 + j % 4.
int q3k_scale(const uint8_t * s, int j) {
    const int low  = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (low | (high << 4)) - 32;
}

// Q4_K/Q5_K: 8 six-bit scales and 8 six-bit mins in 12 bytes. Sub-blocks 0..3 use the low 6 bits
// of bytes 0..3 (scale) and 4..7 (min); sub-blocks 4..7 keep their low 4 bits in bytes 8..11 (scale
// low nibble, min high nibble) and their top 2 bits in the top 2 bits of bytes 0..3 / 4..7.
void pack_scale_min_k4(const uint8_t * ls, const uint8_t * lm, uint8_t * s) {
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            s[j]     = ls[j];
            s[j + 4] = lm[j];
        } else {
            s[j + 4] = (uint8_t) ((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            s[j - 4] |= (uint8_t) ((ls[j] >> 4) << 6);
            s[j] |= (uint8_t) ((lm[j] >> 4) << 6);
        }
    }
}
void get_scale_min_k4(int j, const uint8_t * s, int * sc, int * m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m  = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *m  = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// The integer content of a K-quant super-block: per element its quant (offset applied, so that
// x = d * sc * q - dmin * mn), per sub-block its integer scale and min.
struct k_unpacked {
    int    sub = 0;      // elements per sub-block: 16 or 32
    bool   has_min = false;
    float  d = 0, dmin = 0;
    int    sc[16] = {};
    int    mn[16] = {};
    int8_t q[QK_K] = {};
};

// Q4_K and Q5_K store L = 0..15 / 0..31 in 64-element chunks: byte l of chunk c holds element
// 64c + l (low nibble) and 64c + 32 + l (high nibble).
int q4k_nibble(const uint8_t * qs, int e) {
    const int c = e / 64, r = e % 64;
    return r < 32 ? qs[32 * c + r] & 0xF : qs[32 * c + r - 32] >> 4;
}

void unpack(const block_q2_K & b, k_unpacked & u) {
    u.sub = 16, u.has_min = true, u.d = h2f(b.d), u.dmin = h2f(b.dmin);
    for (int j = 0; j < 16; ++j) {
        u.sc[j] = b.scales[j] & 0xF;
        u.mn[j] = b.scales[j] >> 4;
    }
    for (int e = 0; e < QK_K; ++e) u.q[e] = (int8_t) q2k_crumb(b.qs, e);
}

// the high bit of element e is bit e / 32 of hmask[e % 32]; a set bit means the value is the crumb
// itself (0..3), a clear one that it is the crumb - 4 (-4..-1)
void unpack(const block_q3_K & b, k_unpacked & u) {
    u.sub = 16, u.has_min = false, u.d = h2f(b.d);
    for (int j = 0; j < 16; ++j) u.sc[j] = q3k_scale(b.scales, j);
    for (int e = 0; e < QK_K; ++e) {
        const int high = (b.hmask[e % 32] >> (e / 32)) & 1;
        u.q[e]         = (int8_t) (q2k_crumb(b.qs, e) - (high ? 0 : 4));
    }
}

void unpack(const block_q4_K & b, k_unpacked & u) {
    u.sub = 32, u.has_min = true, u.d = h2f(b.d), u.dmin = h2f(b.dmin);
    for (int j = 0; j < 8; ++j) get_scale_min_k4(j, b.scales, &u.sc[j], &u.mn[j]);
    for (int e = 0; e < QK_K; ++e) u.q[e] = (int8_t) q4k_nibble(b.qs, e);
}

void unpack(const block_q5_K & b, k_unpacked & u) {
    u.sub = 32, u.has_min = true, u.d = h2f(b.d), u.dmin = h2f(b.dmin);
    for (int j = 0; j < 8; ++j) get_scale_min_k4(j, b.scales, &u.sc[j], &u.mn[j]);
    // the fifth bit of element e is bit e / 32 of qh[e % 32]
    for (int e = 0; e < QK_K; ++e) u.q[e] = (int8_t) (q4k_nibble(b.qs, e) | (((b.qh[e % 32] >> (e / 32)) & 1) << 4));
}

// Q6_K: per 128-element half c, element 128c + 32k + l (k = 0..3) has its low 4 bits in
// ql[64c + l + 32 (k & 1)] (low nibble for k < 2, high nibble otherwise) and its top 2 bits in bits
// 2k..2k+1 of qh[32c + l]; stored L = q + 32.
void unpack(const block_q6_K & b, k_unpacked & u) {
    u.sub = 16, u.has_min = false, u.d = h2f(b.d);
    for (int j = 0; j < 16; ++j) u.sc[j] = b.scales[j];
    for (int e = 0; e < QK_K; ++e) {
        const int c = e / 128, k = (e % 128) / 32, l = e % 32;
        const int lo = (b.ql[64 * c + l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xF;
        const int hi = (b.qh[32 * c + l] >> (2 * k)) & 3;
        u.q[e]       = (int8_t) ((lo | (hi << 4)) - 32);
    }
}

// x = (d * sc) * q - dmin * mn: upstream's order of operations, which the gguf package also uses
void dequantize_unpacked(const k_unpacked & u, float * y) {
    for (int j = 0; j < QK_K / u.sub; ++j) {
        const float dl = u.d * (float) u.sc[j];
        const float ml = u.dmin * (float) u.mn[j];
        for (int i = 0; i < u.sub; ++i) {
            const int e = j * u.sub + i;
            y[e]        = u.has_min ? dl * (float) u.q[e] - ml : dl * (float) u.q[e];
        }
    }
}

template <typename Block> void dequantize_k(const Block * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    k_unpacked u;
    for (int64_t b = 0; b < k / QK_K; ++b) {
        unpack(x[b], u);
        dequantize_unpacked(u, y + b * QK_K);
    }
}

// Q4_K and Q5_K share everything but the quant width (nmax 15 or 31), the search parameters and
// the packing of L; this does the common part: per-sub-block (scale, min) search, 6-bit scales
// and mins relative to the largest, and L requantized with the stored (rounded) scales.
template <typename Block>
void quantize_k_affine32(const float * x, Block & y, int nmax, float rmin, float rdelta, int nstep, uint8_t * L) {
    float   mins[QK_K / 32], scales[QK_K / 32], weights[32];
    uint8_t Laux[32];
    float   max_scale = 0, max_min = 0; // with the min taken out, scales are positive
    for (int j = 0; j < QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep,
                                     false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min   = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t     ls[QK_K / 32], lm[QK_K / 32];
    for (int j = 0; j < QK_K / 32; ++j) {
        // upstream converts to uint8_t before the MIN (a negative scale would wrap, then clamp to 63)
        ls[j] = std::min<uint8_t>(63, (uint8_t) nearest_int(inv_scale * scales[j]));
        lm[j] = std::min<uint8_t>(63, (uint8_t) nearest_int(inv_min * mins[j]));
    }
    memset(y.scales, 0, sizeof(y.scales));
    pack_scale_min_k4(ls, lm, y.scales);
    y.d    = f2h(max_scale / 63.f);
    y.dmin = f2h(max_min / 63.f);
    for (int j = 0; j < QK_K / 32; ++j) {
        int sc, m;
        get_scale_min_k4(j, y.scales, &sc, &m);
        const float d = h2f(y.d) * (float) sc;
        if (d == 0.0f) continue; // keep the search's L
        const float dm = h2f(y.dmin) * (float) m;
        for (int ii = 0; ii < 32; ++ii) {
            const int l     = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t) std::max(0, std::min(nmax, l));
        }
    }
}

} // namespace

void quantize_row_q2_K_ref(const float * x, block_q2_K * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    uint8_t     L[QK_K], Laux[16];
    float       weights[16], mins[QK_K / 16], scales[QK_K / 16];
    const float q4scale = 15.f;
    for (int64_t b = 0; b < k / QK_K; ++b, x += QK_K) {
        float max_scale = 0, max_min = 0; // with the min taken out, scales are positive
        for (int j = 0; j < QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        // 4-bit scale (low nibble) and min (high nibble) per sub-block; upstream's int -> uint8_t
        // conversions are kept (they only matter for a negative fitted scale)
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) y[b].scales[j] = (uint8_t) nearest_int(iscale * scales[j]);
            y[b].d = f2h(max_scale / q4scale);
        } else {
            for (int j = 0; j < QK_K / 16; ++j) y[b].scales[j] = 0;
            y[b].d = f2h(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < QK_K / 16; ++j) {
                y[b].scales[j] = (uint8_t) (y[b].scales[j] | (nearest_int(iscale * mins[j]) << 4));
            }
            y[b].dmin = f2h(max_min / q4scale);
        } else {
            y[b].dmin = f2h(0.f);
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = h2f(y[b].d) * (float) (y[b].scales[j] & 0xF);
            if (d == 0.0f) continue; // keep the search's L
            const float dm = h2f(y[b].dmin) * (float) (y[b].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                const int l     = nearest_int((x[16 * j + ii] + dm) / d);
                L[16 * j + ii] = (uint8_t) std::max(0, std::min(3, l));
            }
        }
        pack_crumbs(L, y[b].qs);
    }
}

void quantize_row_q3_K_ref(const float * x, block_q3_K * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    int8_t L[QK_K];
    float  scales[QK_K / 16];
    for (int64_t b = 0; b < k / QK_K; ++b, x += QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < QK_K / 16; ++j) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
            if (std::fabs(scales[j]) > amax) {
                amax      = std::fabs(scales[j]);
                max_scale = scales[j];
            }
        }
        memset(y[b].scales, 0, sizeof(y[b].scales));
        if (max_scale != 0.0f) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) {
                // upstream stores nearest_int into an int8_t before clamping
                int l = (int8_t) nearest_int(iscale * scales[j]);
                l     = std::max(-32, std::min(31, l)) + 32;
                if (j < 8) {
                    y[b].scales[j] = (uint8_t) (l & 0xF);
                } else {
                    y[b].scales[j - 8] |= (uint8_t) ((l & 0xF) << 4);
                }
                y[b].scales[j % 4 + 8] |= (uint8_t) ((l >> 4) << (2 * (j / 4)));
            }
            y[b].d = f2h(1 / iscale);
        } else {
            y[b].d = f2h(0.f);
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = h2f(y[b].d) * (float) q3k_scale(y[b].scales, j);
            if (d == 0.0f) continue; // keep the search's L
            for (int ii = 0; ii < 16; ++ii) {
                const int l     = std::max(-4, std::min(3, nearest_int(x[16 * j + ii] / d)));
                L[16 * j + ii] = (int8_t) (l + 4);
            }
        }
        // high bit of element j -> bit j / 32 of hmask[j % 32]; the crumbs keep the low two bits
        memset(y[b].hmask, 0, sizeof(y[b].hmask));
        uint8_t crumbs[QK_K];
        for (int j = 0; j < QK_K; ++j) {
            if (L[j] > 3) {
                y[b].hmask[j % 32] |= (uint8_t) (1u << (j / 32));
                L[j] = (int8_t) (L[j] - 4);
            }
            crumbs[j] = (uint8_t) L[j];
        }
        pack_crumbs(crumbs, y[b].qs);
    }
}

void quantize_row_q4_K_ref(const float * x, block_q4_K * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    uint8_t L[QK_K];
    for (int64_t b = 0; b < k / QK_K; ++b, x += QK_K) {
        quantize_k_affine32(x, y[b], 15, -1.0f, 0.1f, 20, L);
        for (int c = 0; c < QK_K / 64; ++c) {
            for (int l = 0; l < 32; ++l) y[b].qs[32 * c + l] = (uint8_t) (L[64 * c + l] | (L[64 * c + l + 32] << 4));
        }
    }
}

void quantize_row_q5_K_ref(const float * x, block_q5_K * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    uint8_t L[QK_K];
    for (int64_t b = 0; b < k / QK_K; ++b, x += QK_K) {
        quantize_k_affine32(x, y[b], 31, -0.5f, 0.1f, 15, L);
        memset(y[b].qh, 0, sizeof(y[b].qh));
        for (int c = 0; c < QK_K / 64; ++c) {
            for (int l = 0; l < 32; ++l) {
                const int l1 = L[64 * c + l], l2 = L[64 * c + l + 32];
                // the fifth bit of element e goes to bit e / 32 of qh[e % 32]
                y[b].qh[l] |= (uint8_t) (((l1 >> 4) << (2 * c)) | ((l2 >> 4) << (2 * c + 1)));
                y[b].qs[32 * c + l] = (uint8_t) ((l1 & 0xF) | ((l2 & 0xF) << 4));
            }
        }
    }
}

void quantize_row_q6_K_ref(const float * x, block_q6_K * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    int8_t L[QK_K];
    float  scales[QK_K / 16];
    for (int64_t b = 0; b < k / QK_K; ++b, x += QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            scales[ib] = make_qx_quants_rmse1(16, 32, x + 16 * ib, L + 16 * ib);
            if (std::fabs(scales[ib]) > max_abs_scale) {
                max_abs_scale = std::fabs(scales[ib]);
                max_scale     = scales[ib];
            }
        }
        if (max_abs_scale < k_group_max_eps) {
            memset(&y[b], 0, sizeof(block_q6_K)); // all quants 0 with d = 0
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[b].d             = f2h(1 / iscale);
        for (int ib = 0; ib < QK_K / 16; ++ib) y[b].scales[ib] = (int8_t) std::min(127, nearest_int(iscale * scales[ib]));
        for (int j = 0; j < QK_K / 16; ++j) {
            const float d = h2f(y[b].d) * (float) y[b].scales[j];
            if (d == 0.0f) continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l     = std::max(-32, std::min(31, nearest_int(x[16 * j + ii] / d)));
                L[16 * j + ii] = (int8_t) (l + 32);
            }
        }
        for (int c = 0; c < 2; ++c) {
            const int8_t * Lc = L + 128 * c;
            for (int l = 0; l < 32; ++l) {
                y[b].ql[64 * c + l]      = (uint8_t) ((Lc[l] & 0xF) | ((Lc[l + 64] & 0xF) << 4));
                y[b].ql[64 * c + l + 32] = (uint8_t) ((Lc[l + 32] & 0xF) | ((Lc[l + 96] & 0xF) << 4));
                y[b].qh[32 * c + l]      = (uint8_t) ((Lc[l] >> 4) | ((Lc[l + 32] >> 4) << 2) | ((Lc[l + 64] >> 4) << 4) |
                                                 ((Lc[l + 96] >> 4) << 6));
            }
        }
    }
}

void quantize_row_q8_K_ref(const float * x, block_q8_K * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    for (int64_t b = 0; b < k / QK_K; ++b, x += QK_K) {
        float       amax;
        const float max = signed_absmax(QK_K, x, &amax);
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof(block_q8_K)); // upstream leaves bsums unset here; zero is their value
            continue;
        }
        // -127, not -128: the element of largest magnitude maps to -127 and nothing reaches -128
        const float iscale = -127.f / max;
        // (the clamp at -128 only matters when iscale overflows, for rows below ~1e-37: upstream's
        // conversion is undefined there)
        for (int j = 0; j < QK_K; ++j) y[b].qs[j] = (int8_t) std::max(-128, std::min(127, nearest_int(iscale * x[j])));
        for (int j = 0; j < QK_K / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii) sum += y[b].qs[16 * j + ii];
            y[b].bsums[j] = (int16_t) sum;
        }
        y[b].d = 1 / iscale;
    }
}

void dequantize_row_q2_K(const block_q2_K * x, float * y, int64_t k) {
    dequantize_k(x, y, k);
}
void dequantize_row_q3_K(const block_q3_K * x, float * y, int64_t k) {
    dequantize_k(x, y, k);
}
void dequantize_row_q4_K(const block_q4_K * x, float * y, int64_t k) {
    dequantize_k(x, y, k);
}
void dequantize_row_q5_K(const block_q5_K * x, float * y, int64_t k) {
    dequantize_k(x, y, k);
}
void dequantize_row_q6_K(const block_q6_K * x, float * y, int64_t k) {
    dequantize_k(x, y, k);
}
void dequantize_row_q8_K(const block_q8_K * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    for (int64_t b = 0; b < k / QK_K; ++b) {
        for (int j = 0; j < QK_K; ++j) y[b * QK_K + j] = x[b].d * (float) x[b].qs[j];
    }
}

// =============================================================================================
// Dot products: integer sums per block, scaled in F32 (the definition the fast paths must meet).

namespace {

template <typename Block> const Block * as_blocks(const void * p) {
    return static_cast<const Block *>(p);
}

// integer dot of a block's 32 stored values (minus `offset`) with a Q8 block's quants
inline int dot32(const int * q, int offset, const int8_t * a) {
    int s = 0;
    for (int j = 0; j < 32; j++) s += (q[j] - offset) * a[j];
    return s;
}

// x = d * (q - offset) against Q8_0: sum over blocks of sumi * dx * dy
template <typename Block, void (*unpack)(const Block &, int *), int offset>
void vec_dot_sym_q8_0(int64_t n, float * s, const void * vx, const void * vy) {
    GGML_ASSERT(n % 32 == 0);
    const Block *      x   = as_blocks<Block>(vx);
    const block_q8_0 * y   = as_blocks<block_q8_0>(vy);
    float              sum = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        int q[32];
        unpack(x[b], q);
        const int sumi = dot32(q, offset, y[b].qs);
        sum += (float) sumi * h2f(x[b].d) * h2f(y[b].d);
    }
    *s = sum;
}

// x = d * q + m against Q8_1 (a = dy * qa, s = dy * sum(qa)): sum(x * a) = dx*dy*sumi + m*s
template <typename Block, void (*unpack)(const Block &, int *)>
void vec_dot_affine_q8_1(int64_t n, float * s, const void * vx, const void * vy) {
    GGML_ASSERT(n % 32 == 0);
    const Block *      x   = as_blocks<Block>(vx);
    const block_q8_1 * y   = as_blocks<block_q8_1>(vy);
    float              sum = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        int q[32];
        unpack(x[b], q);
        const int sumi = dot32(q, 0, y[b].qs);
        sum += (h2f(x[b].d) * h2f(y[b].d)) * (float) sumi + h2f(x[b].m) * h2f(y[b].s);
    }
    *s = sum;
}

void unpack_q8_0(const block_q8_0 & blk, int * q) {
    for (int j = 0; j < 32; j++) q[j] = blk.qs[j];
}

void quantize_act_q8_0(const float * x, void * y, int64_t n) {
    quantize_row_q8_0_ref(x, static_cast<block_q8_0 *>(y), n);
}
void quantize_act_q8_1(const float * x, void * y, int64_t n) {
    quantize_row_q8_1_ref(x, static_cast<block_q8_1 *>(y), n);
}

// K-quant weights against Q8_K (a = ad * qa): per super-block the integer sums
// sumi = sum_j sc_j sum_{e in j} q_e qa_e and summ = sum_j mn_j sum_{e in j} qa_e, then
// x . a = (d ad) sumi - (dmin ad) summ. The mins use the quants themselves, not Q8_K's bsums, so
// the reference does not depend on bsums being right (test-quants checks them separately).
template <typename Block> void vec_dot_k_q8_K(int64_t n, float * s, const void * vx, const void * vy) {
    GGML_ASSERT(n % QK_K == 0);
    const Block *      x   = as_blocks<Block>(vx);
    const block_q8_K * y   = as_blocks<block_q8_K>(vy);
    float              sum = 0.0f;
    k_unpacked         u;
    for (int64_t b = 0; b < n / QK_K; b++) {
        unpack(x[b], u);
        int sumi = 0, summ = 0;
        for (int j = 0; j < QK_K / u.sub; ++j) {
            int dot = 0, asum = 0;
            for (int i = 0; i < u.sub; ++i) {
                const int e = j * u.sub + i;
                dot += u.q[e] * y[b].qs[e];
                asum += y[b].qs[e];
            }
            sumi += u.sc[j] * dot;
            summ += u.mn[j] * asum;
        }
        sum += (u.d * y[b].d) * (float) sumi;
        if (u.has_min) sum -= (u.dmin * y[b].d) * (float) summ;
    }
    *s = sum;
}

void quantize_act_q8_K(const float * x, void * y, int64_t n) {
    quantize_row_q8_K_ref(x, static_cast<block_q8_K *>(y), n);
}

} // namespace

const struct ggml_quant_dot_traits * ggml_get_quant_dot_traits(enum ggml_type type) {
    static const ggml_quant_dot_traits q4_0 = {GGML_TYPE_Q8_0, quantize_act_q8_0,
                                               vec_dot_sym_q8_0<block_q4_0, unpack_nibbles<block_q4_0>, 8>};
    static const ggml_quant_dot_traits q5_0 = {GGML_TYPE_Q8_0, quantize_act_q8_0,
                                               vec_dot_sym_q8_0<block_q5_0, unpack_q5<block_q5_0>, 16>};
    static const ggml_quant_dot_traits q8_0 = {GGML_TYPE_Q8_0, quantize_act_q8_0,
                                               vec_dot_sym_q8_0<block_q8_0, unpack_q8_0, 0>};
    static const ggml_quant_dot_traits q4_1 = {GGML_TYPE_Q8_1, quantize_act_q8_1,
                                               vec_dot_affine_q8_1<block_q4_1, unpack_nibbles<block_q4_1>>};
    static const ggml_quant_dot_traits q5_1 = {GGML_TYPE_Q8_1, quantize_act_q8_1,
                                               vec_dot_affine_q8_1<block_q5_1, unpack_q5<block_q5_1>>};
    // activation-only type (upstream has no dot product with Q8_1 weights): no vec_dot_ref
    static const ggml_quant_dot_traits q8_1 = {GGML_TYPE_Q8_1, quantize_act_q8_1, nullptr};
    static const ggml_quant_dot_traits q2_K = {GGML_TYPE_Q8_K, quantize_act_q8_K, vec_dot_k_q8_K<block_q2_K>};
    static const ggml_quant_dot_traits q3_K = {GGML_TYPE_Q8_K, quantize_act_q8_K, vec_dot_k_q8_K<block_q3_K>};
    static const ggml_quant_dot_traits q4_K = {GGML_TYPE_Q8_K, quantize_act_q8_K, vec_dot_k_q8_K<block_q4_K>};
    static const ggml_quant_dot_traits q5_K = {GGML_TYPE_Q8_K, quantize_act_q8_K, vec_dot_k_q8_K<block_q5_K>};
    static const ggml_quant_dot_traits q6_K = {GGML_TYPE_Q8_K, quantize_act_q8_K, vec_dot_k_q8_K<block_q6_K>};
    static const ggml_quant_dot_traits q8_K = {GGML_TYPE_Q8_K, quantize_act_q8_K, nullptr}; // activation-only
    switch (type) {
        case GGML_TYPE_Q2_K: return &q2_K;
        case GGML_TYPE_Q3_K: return &q3_K;
        case GGML_TYPE_Q4_K: return &q4_K;
        case GGML_TYPE_Q5_K: return &q5_K;
        case GGML_TYPE_Q6_K: return &q6_K;
        case GGML_TYPE_Q8_K: return &q8_K;
        case GGML_TYPE_Q4_0: return &q4_0;
        case GGML_TYPE_Q4_1: return &q4_1;
        case GGML_TYPE_Q5_0: return &q5_0;
        case GGML_TYPE_Q5_1: return &q5_1;
        case GGML_TYPE_Q8_0: return &q8_0;
        case GGML_TYPE_Q8_1: return &q8_1;
        default: return nullptr;
    }
}
