// quant-act-neon.cpp — the activation quantizers of quantized MUL_MAT with baseline ARMv8-A NEON,
// bit-identical to the references in ggml-quants.cpp (interface and contract: quant-act-fast.h).
// The same float operations in the same order per element as the references:
//  - the NaN-ignoring maximum of |x|: the reference's std::max(amax, |x|) keeps amax unless
//    amax < |x|, which is false for NaN. vmaxq_f32 (FMAX) would return NaN and vmaxnmq_f32 a NaN
//    for a signalling NaN, so the lanes select with vcltq + vbslq instead; max is exact, so the
//    lane order of the reduction is free;
//  - one F32 division per block (amax / 127, 1 / d) in scalar code as the reference writes it, and
//    the products x * id with vmulq_f32 (a single rounding, no FMA anywhere);
//  - Q8_0 / Q8_1: std::round is ties-away-from-zero: vcvtaq_s32_f32 (FCVTAS) rounds the same way
//    and saturates; the saturating narrows to int16 and int8 then equal the clamp to [-128, 127];
//    a non-finite product is 0 in the reference (FCVTAS gives 0 for NaN only, so Inf is masked);
//  - Q8_K: nearest_int is ties-to-even (nearbyint in the default mode): vcvtnq_s32_f32 (FCVTNS),
//    NaN -> 0 as the reference; the reference saturates huge values to +-4194303 before its clamp,
//    which maps them to the same 127 / -128 as FCVTNS's saturation and the narrows.

#include "quant-act-fast.h"

#if defined(__aarch64__)

#include "formats/ggml-common.h"

#include <arm_neon.h>

#include <cmath>
#include <cstring>

namespace {

// NaN-ignoring maximum of |x[0..n)| (n a multiple of 16)
inline float amax_of(const float * x, int n) {
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int i = 0; i < n; i += 16) {
        for (int k = 0; k < 4; ++k) {
            const float32x4_t v = vabsq_f32(vld1q_f32(x + i + 4 * k));
            acc[k]              = vbslq_f32(vcltq_f32(acc[k], v), v, acc[k]);
        }
    }
    for (int k = 1; k < 4; ++k) acc[0] = vbslq_f32(vcltq_f32(acc[0], acc[k]), acc[k], acc[0]);
    float l[4];
    vst1q_f32(l, acc[0]);
    float m = l[0];
    for (int k = 1; k < 4; ++k) m = m < l[k] ? l[k] : m;
    return m;
}

// 16 int32 lanes (each already in the int8 range after the saturating narrows) -> 16 int8
inline int8x16_t narrow16(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
    const int16x8_t ab = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
    const int16x8_t cd = vcombine_s16(vqmovn_s32(c), vqmovn_s32(d));
    return vcombine_s8(vqmovn_s16(ab), vqmovn_s16(cd));
}

// round_to_i8 of 4 products: ties away, clamped, 0 for NaN / Inf (as int32 lanes before the narrow)
inline int32x4_t round_away(float32x4_t v) {
    const uint32x4_t finite = vcltq_f32(vabsq_f32(v), vdupq_n_f32(INFINITY));
    return vandq_s32(vcvtaq_s32_f32(v), vreinterpretq_s32_u32(finite));
}

// One Q8_0 / Q8_1 block of 32: *d = its scale, the 32 quants into qs; returns their sum
inline int q8_block(const float * x, float * d, int8_t * qs) {
    *d                   = amax_of(x, 32) / 127;
    const float       id = *d != 0.0f ? 1.0f / *d : 0.0f;
    const float32x4_t s  = vdupq_n_f32(id);
    int32x4_t         q[8];
    for (int i = 0; i < 8; ++i) q[i] = round_away(vmulq_f32(vld1q_f32(x + 4 * i), s));
    const int8x16_t lo = narrow16(q[0], q[1], q[2], q[3]);
    const int8x16_t hi = narrow16(q[4], q[5], q[6], q[7]);
    vst1q_s8(qs, lo);
    vst1q_s8(qs + 16, hi);
    return vaddlvq_s8(lo) + vaddlvq_s8(hi);
}

static_assert(QK8_0 == 32 && QK8_1 == 32, "q8_block quantizes blocks of 32");

void quantize_q8_0(const float * x, void * vy, int64_t k) {
    block_q8_0 * y = (block_q8_0 *) vy;
    for (int64_t b = 0; b < k / QK8_0; b++, x += QK8_0) {
        float d;
        q8_block(x, &d, y[b].qs);
        y[b].d = ggml_fp32_to_fp16(d);
    }
}

void quantize_q8_1(const float * x, void * vy, int64_t k) {
    block_q8_1 * y = (block_q8_1 *) vy;
    for (int64_t b = 0; b < k / QK8_1; b++, x += QK8_1) {
        float     d;
        const int sum = q8_block(x, &d, y[b].qs);
        y[b].d        = ggml_fp32_to_fp16(d);
        y[b].s        = ggml_fp32_to_fp16((float) sum * d);
    }
}

void quantize_q8_K(const float * x, void * vy, int64_t k) {
    block_q8_K * y = (block_q8_K *) vy;
    for (int64_t b = 0; b < k / QK_K; ++b, x += QK_K) {
        const float amax = amax_of(x, QK_K);
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof(block_q8_K));
            continue;
        }
        // the first element of largest magnitude, with its sign (signed_absmax)
        float max = 0.0f;
        for (int i = 0; i < QK_K; ++i) {
            if (std::fabs(x[i]) == amax) {
                max = x[i];
                break;
            }
        }
        const float       iscale = -127.f / max;
        const float32x4_t s      = vdupq_n_f32(iscale);
        for (int j = 0; j < QK_K / 16; ++j) {
            int32x4_t q[4];
            for (int i = 0; i < 4; ++i) q[i] = vcvtnq_s32_f32(vmulq_f32(s, vld1q_f32(x + 16 * j + 4 * i)));
            const int8x16_t v = narrow16(q[0], q[1], q[2], q[3]);
            vst1q_s8(y[b].qs + 16 * j, v);
            y[b].bsums[j] = (int16_t) vaddlvq_s8(v);
        }
        y[b].d = 1 / iscale;
    }
}

} // namespace

ggml_quantize_act_fn ggml_cpu_quantize_act_neon(enum ggml_type vec_dot_type) {
    switch (vec_dot_type) {
        case GGML_TYPE_Q8_0: return quantize_q8_0;
        case GGML_TYPE_Q8_1: return quantize_q8_1;
        case GGML_TYPE_Q8_K: return quantize_q8_K;
        default: return nullptr;
    }
}

#else // not AArch64: the references (or the x86 quantizers) run

ggml_quantize_act_fn ggml_cpu_quantize_act_neon(enum ggml_type) { return nullptr; }

#endif
