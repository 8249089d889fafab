// ConvRot row quantizer for AArch64 Advanced SIMD (baseline ARMv8-A: every AArch64 INT8 path
// uses it). Bit-identical to quantize_row_portable (int8-convrot.cpp): the same float operations
// in the same order, four lanes at a time.
//
// Rotation of a group (int8-convrot-facts.md): every value times 1/sqrt(G), then the butterfly
// stages s = 1, 4, 16, ... In 16-value chunks the stride-1 stage runs on the chunk loaded
// de-interleaved (vld4q_f32: vector j holds elements j, j+4, j+8, j+12, so the quartets of
// stride 1 are whole vectors), then a 4x4 transpose restores the natural order and the stride-4
// stage takes the four vectors as its quartet. Stages s >= 16 are whole-vector quartets over the
// rotated group in memory (the per-thread scratch, or a 256-float local block). Each output slot
// is summed left to right like the scalar ((a + b) + c) - d; b - a is the scalar -a + b exactly.
// No multiply-add is fused anywhere (explicit vmulq / vaddq / vsubq).
//
// Quantization: amax = max |v| (vmaxq: exact in any order), a lane mask for NaN / |v| > FLT_MAX,
// s = amax / 127, inv = 1 / s, then q = vcvtnq_s32_f32(clamp(v * inv, -127, 127)) (round to
// nearest, ties to even, as lrintf in the default mode).

#include "int8-impl.h"

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cfloat>
#include <cstring>

namespace sd_int8 {

namespace {

using namespace convrot_detail;

// One quartet (a, b, c, d) -> (a+b+c-d, a+b-c+d, a-b+c+d, -a+b+c+d), each left to right.
inline void quartet(float32x4_t & a, float32x4_t & b, float32x4_t & c, float32x4_t & d) {
    const float32x4_t ab = vaddq_f32(a, b);
    const float32x4_t o0 = vsubq_f32(vaddq_f32(ab, c), d);
    const float32x4_t o1 = vaddq_f32(vsubq_f32(ab, c), d);
    const float32x4_t o2 = vaddq_f32(vaddq_f32(vsubq_f32(a, b), c), d);
    const float32x4_t o3 = vaddq_f32(vaddq_f32(vsubq_f32(b, a), c), d);
    a = o0;
    b = o1;
    c = o2;
    d = o3;
}

// 4x4 transpose of floats: x[i] lane j <-> x[j] lane i.
inline void transpose4(float32x4_t & x0, float32x4_t & x1, float32x4_t & x2, float32x4_t & x3) {
    const float32x4_t t0 = vzip1q_f32(x0, x1), t1 = vzip2q_f32(x0, x1);
    const float32x4_t t2 = vzip1q_f32(x2, x3), t3 = vzip2q_f32(x2, x3);
    x0 = vreinterpretq_f32_f64(vzip1q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
    x1 = vreinterpretq_f32_f64(vzip2q_f64(vreinterpretq_f64_f32(t0), vreinterpretq_f64_f32(t2)));
    x2 = vreinterpretq_f32_f64(vzip1q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
    x3 = vreinterpretq_f32_f64(vzip2q_f64(vreinterpretq_f64_f32(t1), vreinterpretq_f64_f32(t3)));
}

// Rotates group (>= 4) of x into out (may be x): the scaling and stages 1 and 4 per 16 values
// in registers (group 4: stage 1 only), then the stages s >= 16 in place over out.
void rotate_group_neon(const float * x, float * out, int group) {
    const float32x4_t c = vdupq_n_f32(group_scale(group));
    if (group == 4) { // a lone group (a row's tail): one quartet in lane 0
        alignas(16) float t[16] = {};
        memcpy(t, x, sizeof(float) * 4);
        float32x4x4_t v = vld4q_f32(t);
        for (int j = 0; j < 4; ++j) v.val[j] = vmulq_f32(v.val[j], c);
        quartet(v.val[0], v.val[1], v.val[2], v.val[3]);
        vst4q_f32(t, v);
        memcpy(out, t, sizeof(float) * 4);
        return;
    }
    for (int i = 0; i < group; i += 16) {
        float32x4x4_t v = vld4q_f32(x + i);
        for (int j = 0; j < 4; ++j) v.val[j] = vmulq_f32(v.val[j], c);
        quartet(v.val[0], v.val[1], v.val[2], v.val[3]); // stage 1 (de-interleaved)
        transpose4(v.val[0], v.val[1], v.val[2], v.val[3]);
        quartet(v.val[0], v.val[1], v.val[2], v.val[3]); // stage 4 (natural order)
        for (int j = 0; j < 4; ++j) vst1q_f32(out + i + 4 * j, v.val[j]);
    }
    for (int s = 16; s < group; s *= 4) {
        for (int blk = 0; blk < group; blk += 4 * s) {
            for (int j = 0; j < s; j += 4) {
                float *     p = out + blk + j;
                float32x4_t a = vld1q_f32(p), b = vld1q_f32(p + s), cc = vld1q_f32(p + 2 * s), d = vld1q_f32(p + 3 * s);
                quartet(a, b, cc, d);
                vst1q_f32(p, a);
                vst1q_f32(p + s, b);
                vst1q_f32(p + 2 * s, cc);
                vst1q_f32(p + 3 * s, d);
            }
        }
    }
}

// Group 4 over a run of n values (a multiple of 4): four groups per de-interleaved load.
void rotate_run_g4(const float * x, float * out, int64_t n) {
    const float32x4_t c = vdupq_n_f32(group_scale(4));
    int64_t           i = 0;
    for (; i + 16 <= n; i += 16) {
        float32x4x4_t v = vld4q_f32(x + i);
        for (int j = 0; j < 4; ++j) v.val[j] = vmulq_f32(v.val[j], c);
        quartet(v.val[0], v.val[1], v.val[2], v.val[3]);
        vst4q_f32(out + i, v);
    }
    for (; i < n; i += 4) rotate_group_neon(x + i, out + i, 4);
}

struct amax_acc {
    float32x4_t vmax = vdupq_n_f32(0.0f);
    uint32x4_t  ok   = vdupq_n_u32(~0u); // lanes that saw only finite values
};

inline void amax_add(amax_acc & m, float32x4_t v) {
    const float32x4_t a = vabsq_f32(v);
    m.ok   = vandq_u32(m.ok, vcleq_f32(a, vdupq_n_f32(FLT_MAX))); // false for NaN and Inf
    m.vmax = vmaxq_f32(m.vmax, a);
}

// amax of n values (any n); returns false when one is not finite.
bool amax_of(const float * v, int64_t n, float & amax) {
    amax_acc m;
    int64_t  i = 0;
    for (; i + 4 <= n; i += 4) amax_add(m, vld1q_f32(v + i));
    bool  ok = vminvq_u32(m.ok) != 0;
    float r  = vmaxvq_f32(m.vmax);
    for (; i < n; ++i) {
        const float a = fabsf(v[i]);
        if (!(a <= FLT_MAX)) ok = false;
        if (a > r) r = a;
    }
    if (r > amax) amax = r;
    return ok;
}

// q = clamp(round_half_to_even(v * inv), -127, 127) of n values into q; returns their sum.
int32_t quantize_run(const float * v, int64_t n, float inv, int8_t * q) {
    const float32x4_t vinv = vdupq_n_f32(inv);
    const float32x4_t lo = vdupq_n_f32(-127.0f), hi = vdupq_n_f32(127.0f);
    int32x4_t         vsum = vdupq_n_s32(0);
    int64_t           i    = 0;
    for (; i + 16 <= n; i += 16) {
        int32x4_t qi[4];
        for (int j = 0; j < 4; ++j) {
            float32x4_t f = vmulq_f32(vld1q_f32(v + i + 4 * j), vinv);
            f             = vminq_f32(vmaxq_f32(f, lo), hi);
            qi[j]         = vcvtnq_s32_f32(f);
            vsum          = vaddq_s32(vsum, qi[j]);
        }
        // values are in [-127, 127]: the narrowing is exact
        const int16x8_t h0 = vcombine_s16(vmovn_s32(qi[0]), vmovn_s32(qi[1]));
        const int16x8_t h1 = vcombine_s16(vmovn_s32(qi[2]), vmovn_s32(qi[3]));
        vst1q_s8(q + i, vcombine_s8(vmovn_s16(h0), vmovn_s16(h1)));
    }
    uint32_t sum = (uint32_t) vaddvq_s32(vsum);
    for (; i < n; ++i) {
        float f = v[i] * inv;
        if (f > 127.0f) f = 127.0f;
        if (f < -127.0f) f = -127.0f;
        q[i] = (int8_t) vcvtns_s32_f32(f);
        sum += (uint32_t) (int32_t) q[i];
    }
    return (int32_t) sum;
}

// The rotated values of [k0, k0 + n) (n: one group, or the whole row for group 1 / 4) into buf,
// or x itself for group 1.
const float * rotated_span(const float * x, int64_t k0, int64_t n, int group, float * buf) {
    if (group == 1) return x + k0;
    if (group == 4) {
        rotate_run_g4(x + k0, buf, n);
        return buf;
    }
    rotate_group_neon(x + k0, buf, group);
    return buf;
}

} // namespace

float quantize_row_neon(const float * x, int64_t K, int group, int8_t * q, int32_t * rowsum) {
    if (group < 1) group = 1;
    // the row is rotated once and kept when it fits the scratch (keeps_row); otherwise each
    // pass rotates it again (both give the same bits)
    const bool keep  = keeps_row(K, group);
    // spans of work: one group, or for groups 1 and 4 the whole row when kept, else 256 values
    const int64_t span = group > 4 ? group : (keep ? K : 256);
    alignas(16) float local[256];
    float *           scratch = (keep || group > 256) && group > 1 ? scratch_for(K, group) : nullptr;
    auto              buf_for = [&](int64_t k0) -> float * {
        if (keep) return scratch + k0;
        return group > 256 ? scratch : local;
    };

    float amax = 0.0f;
    bool  ok   = true;
    for (int64_t k0 = 0; k0 < K; k0 += span) {
        const int64_t n = K - k0 < span ? K - k0 : span;
        ok = amax_of(rotated_span(x, k0, n, group, buf_for(k0)), n, amax) && ok;
    }
    if (!ok) return nonfinite_row(K, q, rowsum);
    const float s = amax / 127.0f;
    if (s == 0.0f) {
        memset(q, 0, (size_t) K);
        *rowsum = 0;
        return s;
    }
    const float inv = 1.0f / s;
    if (!(inv <= FLT_MAX)) return quantize_row_portable(x, K, group, q, rowsum); // subnormal scale
    uint32_t sum = 0;
    for (int64_t k0 = 0; k0 < K; k0 += span) {
        const int64_t n = K - k0 < span ? K - k0 : span;
        const float * v = keep && group > 1 ? scratch + k0 : rotated_span(x, k0, n, group, buf_for(k0));
        sum += (uint32_t) quantize_run(v, n, inv, q + k0);
    }
    *rowsum = (int32_t) sum;
    return s;
}

} // namespace sd_int8

#else

#include "int8-impl.h"

namespace sd_int8 {
float quantize_row_neon(const float * x, int64_t K, int group, int8_t * q, int32_t * rowsum) {
    return quantize_row_portable(x, K, group, q, rowsum);
}
} // namespace sd_int8

#endif
