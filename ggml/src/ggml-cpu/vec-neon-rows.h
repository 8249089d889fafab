#pragma once

// vec-neon-rows.h — NEON (baseline ARMv8-A AdvSIMD) vector math and conversions for the NEON row
// kernels (ops-elementwise-neon.cpp, ops-rows-neon.cpp). The 4-lane counterpart of vec-avx2.h:
// the same algorithms, coefficients and operation order, one x86 instruction mapped onto the
// AArch64 one that rounds identically, so v_exp, v_sigmoid, v_silu, v_gelu, v_gelu_quick, v_tanh,
// v_erfc and v_gelu_erf return the same bits as the AVX2 / AVX-512 kernels, and the conversions
// are bit-identical to the scalar ggml ones. The mapping and why each step is exact:
//   * fused multiply-add: FMLA/FMLS are IEEE fused like vfmadd/vfnmadd. x86 fmsub (a*b - c) has no
//     single AArch64 form: a*b + (-c) is the same exact value rounded once (negation is exact),
//     and an exact zero result is +0 in both (not -(c - a*b), which would give -0).
//   * rounding to integral: FRINTN (ties to even) = _mm256_round_ps(TO_NEAREST_INT); FCVTNS on an
//     integral value = _mm256_cvtps_epi32 on it (a NaN converts to 0 here, INT_MIN there, but its
//     lane's result is NaN in both, as the product that uses it has a NaN factor).
//   * min/max against a constant: x86 returns the second operand when one is NaN, FMIN/FMAX return
//     the (quieted) NaN: both give a NaN lane with the input's sign and payload, and every later
//     arithmetic step would quiet it anyway.
//   * compares + blendv: FCMxx gives all-ones/all-zero lanes (false for NaN like the _OQ
//     predicates), and BSL selects on them as blendv does on their sign bits.
//   * subnormals: Linux runs AArch64 user code with FPCR.FZ = 0 (no flush), like MXCSR's default.
//   * 2^n scaling: the same two-halves product as vec-avx2.h.
//
// Only the NEON row-kernel files include this; every instruction here is baseline ARMv8-A.

#if defined(__aarch64__)

#include <arm_neon.h>

#include <cstdint>

namespace neon_rows {

inline float32x4_t splat(float v) { return vdupq_n_f32(v); }

// a * b - c, fused (x86 vfmsub)
inline float32x4_t fmsub(float32x4_t a, float32x4_t b, float32x4_t c) { return vfmaq_f32(vnegq_f32(c), a, b); }
// a * b + c, fused (x86 vfmadd)
inline float32x4_t fmadd(float32x4_t a, float32x4_t b, float32x4_t c) { return vfmaq_f32(c, a, b); }
// c - a * b, fused (x86 vfnmadd)
inline float32x4_t fnmadd(float32x4_t a, float32x4_t b, float32x4_t c) { return vfmsq_f32(c, a, b); }

inline float32x4_t v_abs(float32x4_t x) { return vabsq_f32(x); }

// where m: t, else f (m: all-ones / all-zero lanes)
inline float32x4_t select(uint32x4_t m, float32x4_t t, float32x4_t f) { return vbslq_f32(m, t, f); }

// ---------------------------------------------------------------------------------------------
// exp (algorithm and polynomial: vec-avx512.h)

namespace detail {
inline float32x4_t exp_poly(float32x4_t r) {
    float32x4_t p = splat(8.3127902860138467e-03f);
    p             = fmadd(p, r, splat(4.1889686739588941e-02f));
    p             = fmadd(p, r, splat(1.6667113433299424e-01f));
    p             = fmadd(p, r, splat(4.9999238755239672e-01f));
    p             = fmadd(p, r, splat(1.0f));
    return fmadd(p, r, splat(1.0f));
}

// p * 2^n for integral n in [-152, 129]: n in two halves, each a normal power of two; the first
// product is exact, the second rounds once (vec-avx2.h's scale2, vscalefps' bits)
inline float32x4_t scale2(float32x4_t p, float32x4_t n) {
    const int32x4_t   ni = vcvtnq_s32_f32(n);
    const int32x4_t   n1 = vshrq_n_s32(ni, 1); // arithmetic shift: floor(n / 2), like srai
    const int32x4_t   n2 = vsubq_s32(ni, n1);
    const float32x4_t f1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, vdupq_n_s32(127)), 23));
    const float32x4_t f2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, vdupq_n_s32(127)), 23));
    return vmulq_f32(vmulq_f32(p, f1), f2);
}

template <bool EXACT_LN2 = true>
inline float32x4_t exp_clamped(float32x4_t x) {
    const float32x4_t n = vrndnq_f32(vmulq_f32(x, splat(1.44269504088896341f)));
    float32x4_t       r;
    if (EXACT_LN2) {
        r = fnmadd(n, splat(0.693145751953125f), x);
        r = fnmadd(n, splat(1.42860682030941723212e-6f), r);
    } else {
        r = fnmadd(n, splat(0.693147182464599609375f), x);
    }
    return scale2(exp_poly(r), n);
}

// -|x| (sign bit set; NaN stays NaN)
inline float32x4_t neg_abs(float32x4_t x) { return vnegq_f32(vabsq_f32(x)); }

// the logistic family from e = e^{-|u|}, d = 1 + e; neg: all-ones where u < 0
struct logistic {
    float32x4_t e, d;
    uint32x4_t  neg;
};
inline logistic logistic_of(float32x4_t u) {
    logistic l;
    l.e   = exp_clamped<false>(vmaxq_f32(splat(-105.0f), neg_abs(u)));
    l.d   = vaddq_f32(splat(1.0f), l.e);
    l.neg = vcltq_f32(u, vdupq_n_f32(0.0f));
    return l;
}

// x * sigmoid(u) for u with the sign of x: (x or x e) / d, x clamped to >= -FLT_MAX first
inline float32x4_t times_logistic(float32x4_t x, const logistic & l) {
    const float32x4_t xc = vmaxq_f32(splat(-3.40282347e+38f), x);
    return vdivq_f32(select(l.neg, vmulq_f32(xc, l.e), xc), l.d);
}
} // namespace detail

inline float32x4_t v_exp(float32x4_t x) {
    x = vminq_f32(splat(89.0f), x);
    x = vmaxq_f32(splat(-105.0f), x);
    return detail::exp_clamped(x);
}

inline float32x4_t v_sigmoid(float32x4_t x) {
    const detail::logistic l = detail::logistic_of(x);
    return vdivq_f32(select(l.neg, l.e, splat(1.0f)), l.d);
}

// x * s where s -> 0 as x -> -inf: the limit is -0, not (-inf) * 0
inline float32x4_t v_times_gate(float32x4_t x, float32x4_t s) {
    const uint32x4_t z = vceqq_f32(s, vdupq_n_f32(0.0f));
    return select(z, splat(-0.0f), vmulq_f32(x, s));
}

inline float32x4_t v_silu(float32x4_t x) { return detail::times_logistic(x, detail::logistic_of(x)); }

// tanh-form gelu as x * sigmoid(2z)
inline float32x4_t v_gelu(float32x4_t x) {
    const float32x4_t w = fmadd(splat(0.0713548162726008f), vmulq_f32(x, x), splat(1.5957691216057308f));
    return detail::times_logistic(x, detail::logistic_of(vmulq_f32(x, w)));
}

inline float32x4_t v_gelu_quick(float32x4_t x) {
    return detail::times_logistic(x, detail::logistic_of(vmulq_f32(splat(1.702f), x)));
}

inline float32x4_t v_copysign(float32x4_t mag, float32x4_t sgn) {
    const uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(sgn), vdupq_n_u32(0x80000000u));
    return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(mag), sign));
}

// tanh: odd polynomial below |x| = 0.625, 1 - 2/(e^{2|x|} + 1) above
inline float32x4_t v_tanh(float32x4_t x) {
    const float32x4_t ax = v_abs(x);
    const float32x4_t y  = vmulq_f32(x, x);
    float32x4_t       q  = splat(0.0022927448161781423f);
    q                    = fmadd(q, y, splat(-0.008343945515839152f));
    q                    = fmadd(q, y, splat(0.02176891865102821f));
    q                    = fmadd(q, y, splat(-0.053959259577204543f));
    q                    = fmadd(q, y, splat(0.13333303556915742f));
    q                    = fmadd(q, y, splat(-0.33333333172140362f));
    const float32x4_t small = fmadd(vmulq_f32(q, y), x, x);
    const float32x4_t e     = v_exp(vaddq_f32(ax, ax));
    const float32x4_t big   = vsubq_f32(splat(1.0f), vdivq_f32(splat(2.0f), vaddq_f32(e, splat(1.0f))));
    const uint32x4_t  is_small = vcltq_f32(ax, splat(0.625f));
    // NaN compares false and goes through the big branch, where it propagates
    return select(is_small, small, v_copysign(big, x));
}

// erfc(x) = t exp(-u^2 + P(t)), u = |x|, t = 1/(1 + u/2); erfc(-u) = 2 - erfc(u)
inline float32x4_t v_erfc(float32x4_t x) {
    const float32x4_t u = vminq_f32(splat(11.0f), v_abs(x));
    const float32x4_t t = vdivq_f32(splat(1.0f), fmadd(u, splat(0.5f), splat(1.0f)));
    float32x4_t       p = splat(0.1582473977980184f);
    p                   = fmadd(p, t, splat(-0.75242256860797321f));
    p                   = fmadd(p, t, splat(1.3227127633417931f));
    p                   = fmadd(p, t, splat(-0.91335193002642026f));
    p                   = fmadd(p, t, splat(0.095678951021368733f));
    p                   = fmadd(p, t, splat(-0.090038920390589619f));
    p                   = fmadd(p, t, splat(0.064820619939276863f));
    p                   = fmadd(p, t, splat(0.3805130594473215f));
    p                   = fmadd(p, t, splat(0.99932126437300389f));
    p                   = fmadd(p, t, splat(-1.2654805782779573f));
    const float32x4_t hi = vmulq_f32(u, u);
    const float32x4_t lo = fmsub(u, u, hi); // u*u - hi exactly
    const float32x4_t a  = vmulq_f32(vmulq_f32(t, v_exp(p)), fnmadd(lo, splat(1.0f), splat(1.0f)));
    const float32x4_t r  = vmulq_f32(a, v_exp(vsubq_f32(vdupq_n_f32(0.0f), hi)));
    const uint32x4_t  neg = vcltq_f32(x, vdupq_n_f32(0.0f));
    return select(neg, vsubq_f32(splat(2.0f), r), r);
}

// gelu_erf(x) = 0.5 x erfc(-x/sqrt2)
inline float32x4_t v_gelu_erf(float32x4_t x) {
    const float32x4_t s = vmulq_f32(splat(0.5f), v_erfc(vmulq_f32(x, splat(-0.70710678118654752f))));
    return v_times_gate(x, s);
}

// ---------------------------------------------------------------------------------------------
// F16 / BF16 conversions (4 lanes), bit-exact against the scalar ggml conversions

inline bool any(uint32x4_t m) { return vmaxvq_u32(m) != 0; }

// binary16 -> binary32: FCVTL is exact but quiets signalling NaNs, which the reference keeps as
// they are, so NaN lanes are rebuilt from the bits.
inline float32x4_t f16_to_f32(uint16x4_t h) {
    const float32x4_t f   = vcvt_f32_f16(vreinterpret_f16_u16(h));
    const uint32x4_t  w   = vmovl_u16(h);
    const uint32x4_t  nan = vcgtq_u32(vandq_u32(w, vdupq_n_u32(0x7FFF)), vdupq_n_u32(0x7C00));
    if (__builtin_expect(!any(nan), 1)) return f;
    const uint32x4_t bits = vorrq_u32(vshlq_n_u32(vandq_u32(w, vdupq_n_u32(0x8000)), 16),
                                      vorrq_u32(vdupq_n_u32(0x7F800000), vshlq_n_u32(vandq_u32(w, vdupq_n_u32(0x3FF)), 13)));
    return vbslq_f32(nan, vreinterpretq_f32_u32(bits), f);
}

// binary32 -> binary16: FCVTN rounds by FPCR (round to nearest even, Linux's default, which no
// code here changes), with IEEE half-precision (FPCR.AHP = 0); NaNs become the reference's
// canonical sign|0x7E00 (FCVTN would keep the top payload bits).
inline uint16x4_t f32_to_f16(float32x4_t f) {
    const uint16x4_t h   = vreinterpret_u16_f16(vcvt_f16_f32(f));
    const uint32x4_t x   = vreinterpretq_u32_f32(f);
    const uint32x4_t nan = vcgtq_u32(vandq_u32(x, vdupq_n_u32(0x7FFFFFFF)), vdupq_n_u32(0x7F800000));
    if (__builtin_expect(!any(nan), 1)) return h;
    const uint32x4_t canon = vorrq_u32(vandq_u32(vshrq_n_u32(x, 16), vdupq_n_u32(0x8000)), vdupq_n_u32(0x7E00));
    return vbsl_u16(vmovn_u32(nan), vmovn_u32(canon), h);
}

inline float32x4_t bf16_to_f32(uint16x4_t h) { return vreinterpretq_f32_u32(vshll_n_u16(h, 16)); }

// binary32 -> bfloat16 by the reference's integer round-to-nearest-even (NaN: quiet bit set)
inline uint16x4_t f32_to_bf16(float32x4_t f) {
    const uint32x4_t x   = vreinterpretq_u32_f32(f);
    const uint32x4_t lsb = vandq_u32(vshrq_n_u32(x, 16), vdupq_n_u32(1));
    const uint32x4_t rnd = vshrq_n_u32(vaddq_u32(vaddq_u32(x, vdupq_n_u32(0x7FFF)), lsb), 16);
    const uint32x4_t nan = vcgtq_u32(vandq_u32(x, vdupq_n_u32(0x7FFFFFFF)), vdupq_n_u32(0x7F800000));
    const uint32x4_t q   = vorrq_u32(vshrq_n_u32(x, 16), vdupq_n_u32(0x40));
    return vmovn_u32(vbslq_u32(nan, q, rnd));
}

// ---------------------------------------------------------------------------------------------
// tails: the first n (< 4) elements through a zero-filled 4-lane buffer (lanes past the end read
// as 0, like x86's masked loads, and are never written)

inline float32x4_t load_part(const float * p, int64_t n) {
    float b[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t i = 0; i < n; ++i) b[i] = p[i];
    return vld1q_f32(b);
}
inline void store_part(float * p, float32x4_t v, int64_t n) {
    float b[4];
    vst1q_f32(b, v);
    for (int64_t i = 0; i < n; ++i) p[i] = b[i];
}
inline uint16x4_t load_part_h(const uint16_t * p, int64_t n) {
    uint16_t b[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n; ++i) b[i] = p[i];
    return vld1_u16(b);
}
inline void store_part_h(uint16_t * p, uint16x4_t v, int64_t n) {
    uint16_t b[4];
    vst1_u16(b, v);
    for (int64_t i = 0; i < n; ++i) p[i] = b[i];
}

} // namespace neon_rows

#endif // __aarch64__
