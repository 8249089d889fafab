#pragma once

// vec-avx512.h — AVX-512 vector math and conversions for the fast CPU kernels (*-avx512.cpp).
//
// Include this header LAST in a *-avx512.cpp file: it switches the rest of the translation unit to
// the AVX-512 target (so the library still builds without -march=native), and anything defined
// after it may contain AVX-512 instructions. Standard and project headers must come before it, so
// their inline functions (shared with other translation units through the linker) stay portable.
// Code after it runs only once ops-fast.h's ggml_cpu_fast_avx512() has said the CPU can.
//
// Accuracy (float inputs, max error measured against double on dense samples of the ranges named;
// "ulp" is of the float result):
//   v_exp:      2.2 ulp on [-104, 89] (below -104.x -> 0, above 88.73 -> inf, NaN -> NaN).
//   v_sigmoid:  5.0 ulp on [-100, 100], 3.4 on [-8, 8] (subnormal results in the far negative tail
//               excepted).
//   v_silu:     4.7 ulp on [-20, 20].  v_gelu_quick: 12.4 ulp / rel 8.4e-7 at x ~ -6.8, v_gelu:
//               87 ulp / rel 5.8e-6 at x ~ -8: both are the conditioning of rounding the float
//               argument (1.702 x, z) before the exponential, not the vector code; same as the
//               portable float formula.
//   (Measured after the degree-5 exp and the one-FMA reduction in the logistic family, 2^20
//   samples per range against long double; before them: exp 0.86, sigmoid 2.4, silu 3.0, tanh
//   1.3, erfc 6.2 ulp. The harness bound for these ops is rel 1e-5, 84-168 ulp.)
//   v_tanh:     1.9 ulp on [-10, 10] (odd polynomial below |x| = 0.625, 1 - 2/(e^2|x| + 1) above).
//   v_erfc:     9.3 ulp on [-10, 10] (relative error; subnormal results excepted).
//   v_gelu_erf: rel 2.8e-6 on [-6, 6] (44 ulp at x ~ -6, again the conditioning of x/sqrt2).
//   Conversions: bit-identical to the scalar ggml conversions (checked on every 97th float bit
//   pattern and all 65536 halves, NaNs and subnormals included).

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
// GCC 12's intrinsics that start from _mm512_undefined_* trip false positives
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <immintrin.h>

#include <cstdint>

namespace avx512 {

// ---------------------------------------------------------------------------------------------
// masks for row tails

inline __mmask16 tail_mask(int64_t n) { return n >= 16 ? (__mmask16) 0xFFFF : (__mmask16) ((1u << n) - 1u); }

inline __m512 load(const float * p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
inline void   store(float * p, __m512 v, __mmask16 m) { _mm512_mask_storeu_ps(p, m, v); }

inline __m512 v_abs(__m512 x) {
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7FFFFFFF)));
}

// ---------------------------------------------------------------------------------------------
// exp: n = round(x log2 e), r = x - n ln2 (|r| <= ln2/2), e^r = 1 + r + r^2 Q(r) with Q of degree 3
// (a relative-error minimax fit made for this file: 1.1e-7 on |r| <= ln2/2 with the coefficients
// rounded to float; the degree-4 Q it replaced was 3.1e-9, but cost one more FMA, and the FMA pipe
// is what bounds these kernels), result scaled by 2^n with vscalefps, which rounds once and
// produces subnormals, 0 and inf correctly.

namespace detail {
// e^r for |r| <= ln2/2 (plus rounding slack), before the 2^n scaling
inline __m512 exp_poly(__m512 r) {
    __m512 p = _mm512_set1_ps(8.3127902860138467e-03f);
    p        = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1889686739588941e-02f));
    p        = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6667113433299424e-01f));
    p        = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.9999238755239672e-01f));
    p        = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
}

// e^x for x already clamped to [-105, 89] (or NaN). EXACT_LN2: ln2 in two parts, so r carries no
// error from the reduction; otherwise one FMA with ln2 rounded to float (one FMA fewer), which
// leaves |n| * 1.9e-9 in r: <= 5.5e-8 relative for |x| <= 20, 2.9e-7 at |x| = 105.
template <bool EXACT_LN2 = true>
inline __m512 exp_clamped(__m512 x) {
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r;
    if (EXACT_LN2) {
        r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
        r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723212e-6f), r);
    } else {
        r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693147182464599609375f), x);
    }
    return _mm512_scalef_ps(exp_poly(r), n);
}

// -|x| (sign bit set; NaN stays NaN)
inline __m512 neg_abs(__m512 x) {
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int) 0x80000000u)));
}

// The logistic family from e = e^{-|u|} and d = 1 + e: sigmoid(u) = 1/d for u >= 0 and e/d for
// u < 0, so the negative tail keeps its relative accuracy down to the subnormals instead of
// flushing once e^-u overflows. e uses the one-FMA reduction (|u| <= 105: <= 2.9e-7 relative,
// 5.5e-8 for |u| <= 20). One correctly rounded divide: it runs on the divider, beside the FMA
// pipes; re-measured with the 4-vector loops, silu took 3.7 ns/vector with it and 4.5 with
// vrcp14ps plus a Newton step (three more FMA-pipe ops).
struct logistic {
    __m512    e, d;
    __mmask16 neg; // u < 0
};
inline logistic logistic_of(__m512 u) {
    logistic l;
    // max with the constant first: the second operand is returned for NaN, so NaN survives
    l.e   = exp_clamped<false>(_mm512_max_ps(_mm512_set1_ps(-105.0f), neg_abs(u)));
    l.d   = _mm512_add_ps(_mm512_set1_ps(1.0f), l.e);
    l.neg = _mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_LT_OQ);
    return l;
}

// x * sigmoid(u) for u with the sign of x: (x or x e) / d. x is first clamped to >= -FLT_MAX so
// that x -> -inf gives -inf * 0 -> -0 (the limit, as the portable kernels return), not NaN.
inline __m512 times_logistic(__m512 x, const logistic & l) {
    const __m512 xc = _mm512_max_ps(_mm512_set1_ps(-3.40282347e+38f), x);
    return _mm512_div_ps(_mm512_mask_mul_ps(xc, l.neg, xc, l.e), l.d);
}
} // namespace detail

inline __m512 v_exp(__m512 x) {
    // min/max with the constant first: the second operand is returned for NaN, so NaN survives
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
    x = _mm512_max_ps(_mm512_set1_ps(-105.0f), x);
    return detail::exp_clamped(x);
}

inline __m512 v_sigmoid(__m512 x) {
    const detail::logistic l = detail::logistic_of(x);
    return _mm512_div_ps(_mm512_mask_blend_ps(l.neg, _mm512_set1_ps(1.0f), l.e), l.d);
}

// x * s where s -> 0 as x -> -inf: the limit is -0, not (-inf) * 0 (matches the portable kernels).
inline __m512 v_times_gate(__m512 x, __m512 s) {
    const __mmask16 z = _mm512_cmp_ps_mask(s, _mm512_setzero_ps(), _CMP_EQ_OQ);
    return _mm512_mask_blend_ps(z, _mm512_mul_ps(x, s), _mm512_set1_ps(-0.0f));
}

inline __m512 v_silu(__m512 x) { return detail::times_logistic(x, detail::logistic_of(x)); }

// tanh-form gelu 0.5 x (1 + tanh(z)) computed as x * sigmoid(2z), which has no cancellation for
// negative x; 2z = x (a + b x^2) with a = 2 sqrt(2/pi), b = 0.044715 a (same sign as x; x^2 -> inf
// for huge |x| only drives 2z to +-inf, where the logistic is exact).
inline __m512 v_gelu(__m512 x) {
    const __m512 w = _mm512_fmadd_ps(_mm512_set1_ps(0.0713548162726008f), _mm512_mul_ps(x, x), _mm512_set1_ps(1.5957691216057308f));
    return detail::times_logistic(x, detail::logistic_of(_mm512_mul_ps(x, w)));
}

inline __m512 v_gelu_quick(__m512 x) {
    return detail::times_logistic(x, detail::logistic_of(_mm512_mul_ps(_mm512_set1_ps(1.702f), x)));
}

inline __m512 v_copysign(__m512 mag, __m512 sgn) {
    const __m512i s = _mm512_and_si512(_mm512_castps_si512(sgn), _mm512_set1_epi32((int) 0x80000000u));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(mag), s));
}

// tanh: below |x| = 0.625 the odd polynomial x + x^3 Q(x^2) (Q: Chebyshev fit, error 1.6e-9),
// above it 1 - 2 / (e^{2|x|} + 1), where the subtraction loses nothing (tanh >= 0.55).
inline __m512 v_tanh(__m512 x) {
    const __m512 ax = v_abs(x);
    const __m512 y  = _mm512_mul_ps(x, x);
    __m512       q  = _mm512_set1_ps(0.0022927448161781423f);
    q               = _mm512_fmadd_ps(q, y, _mm512_set1_ps(-0.008343945515839152f));
    q               = _mm512_fmadd_ps(q, y, _mm512_set1_ps(0.02176891865102821f));
    q               = _mm512_fmadd_ps(q, y, _mm512_set1_ps(-0.053959259577204543f));
    q               = _mm512_fmadd_ps(q, y, _mm512_set1_ps(0.13333303556915742f));
    q               = _mm512_fmadd_ps(q, y, _mm512_set1_ps(-0.33333333172140362f));
    const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(q, y), x, x);
    const __m512 e     = v_exp(_mm512_add_ps(ax, ax));
    const __m512 big   = _mm512_sub_ps(_mm512_set1_ps(1.0f),
                                       _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
    const __mmask16 is_small = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.625f), _CMP_LT_OQ);
    // NaN compares false and goes through the big branch, where it propagates
    return _mm512_mask_blend_ps(is_small, v_copysign(big, x), small);
}

// erfc(x) for any x: for u = |x|, erfc(u) = t exp(-u^2 + P(t)) with t = 1/(1 + u/2) and P a
// degree-9 Chebyshev fit of log(erfc(u)/t) + u^2 on t in [0.15, 1] (u <= 11.3; u is clamped to
// 11, where erfc is already 0 in float); error of the fit 6e-8. u^2 = hi + lo exactly (FMA) and
// e^{-hi} is applied last as its own factor, so no large exponent argument is rounded: the error
// stays a few ulp for every u. Negative x: erfc(x) = 2 - erfc(u).
inline __m512 v_erfc(__m512 x) {
    const __m512 u  = _mm512_min_ps(_mm512_set1_ps(11.0f), v_abs(x)); // NaN stays NaN
    const __m512 t  = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(u, _mm512_set1_ps(0.5f), _mm512_set1_ps(1.0f)));
    __m512       p  = _mm512_set1_ps(0.1582473977980184f);
    p               = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.75242256860797321f));
    p               = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.3227127633417931f));
    p               = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.91335193002642026f));
    p               = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.095678951021368733f));
    p               = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.090038920390589619f));
    p               = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.064820619939276863f));
    p               = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.3805130594473215f));
    p               = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.99932126437300389f));
    p               = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.2654805782779573f));
    const __m512 hi = _mm512_mul_ps(u, u);
    const __m512 lo = _mm512_fmsub_ps(u, u, hi); // u*u - hi exactly; e^{-lo} = 1 - lo to float precision
    const __m512 a  = _mm512_mul_ps(_mm512_mul_ps(t, v_exp(p)), _mm512_fnmadd_ps(lo, _mm512_set1_ps(1.0f), _mm512_set1_ps(1.0f)));
    const __m512 r  = _mm512_mul_ps(a, v_exp(_mm512_sub_ps(_mm512_setzero_ps(), hi)));
    const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_mask_sub_ps(r, neg, _mm512_set1_ps(2.0f), r);
}

// gelu_erf(x) = 0.5 x (1 + erf(x/sqrt2)) = 0.5 x erfc(-x/sqrt2), accurate in the negative tail.
inline __m512 v_gelu_erf(__m512 x) {
    const __m512 s = _mm512_mul_ps(_mm512_set1_ps(0.5f), v_erfc(_mm512_mul_ps(x, _mm512_set1_ps(-0.70710678118654752f))));
    return v_times_gate(x, s);
}

// ---------------------------------------------------------------------------------------------
// F16 / BF16 conversions (16 lanes). All bit-exact against ggml_fp16_to_fp32 / ggml_fp32_to_fp16 /
// ggml_bf16_to_fp32 / ggml_fp32_to_bf16, including NaN payloads and subnormals.

// binary16 -> binary32. vcvtph2ps is exact but quiets signalling NaNs; the reference keeps the
// payload bits as they are, so NaN lanes are rebuilt by integer operations.
inline __m512 f16_to_f32(__m256i h) {
    const __m512    f   = _mm512_cvtph_ps(h);
    const __m512i   w   = _mm512_cvtepu16_epi32(h);
    const __m512i   mag = _mm512_and_si512(w, _mm512_set1_epi32(0x7FFF));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(mag, _mm512_set1_epi32(0x7C00));
    if (__builtin_expect(nan == 0, 1)) return f;
    const __m512i bits = _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(0x8000)), 16),
                                         _mm512_or_si512(_mm512_set1_epi32(0x7F800000),
                                                         _mm512_slli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(0x3FF)), 13)));
    return _mm512_mask_blend_ps(nan, f, _mm512_castsi512_ps(bits));
}

// binary32 -> binary16, round to nearest even (vcvtps2ph with an explicit rounding mode, so
// MXCSR does not matter; it rounds overflow to inf and produces subnormals exactly like the
// reference). NaNs become the reference's canonical sign|0x7E00.
inline __m256i f32_to_f16(__m512 f) {
    __m256i         h   = _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i   mag = _mm512_and_si512(_mm512_castps_si512(f), _mm512_set1_epi32(0x7FFFFFFF));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(mag, _mm512_set1_epi32(0x7F800000));
    if (__builtin_expect(nan == 0, 1)) return h;
    const __m512i canon = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(f), 16), _mm512_set1_epi32(0x8000)),
                                          _mm512_set1_epi32(0x7E00));
    return _mm256_mask_blend_epi16(nan, h, _mm512_cvtepi32_epi16(canon));
}

inline __m512 bf16_to_f32(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }

// binary32 -> bfloat16 by integer round-to-nearest-even, exactly the reference's formula.
// (vcvtneps2bf16 is not used: it flushes subnormal inputs to zero.)
inline __m256i f32_to_bf16(__m512 f) {
    const __m512i   x   = _mm512_castps_si512(f);
    const __m512i   lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    const __m512i   rnd = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7FFF)), lsb), 16);
    const __m512i   mag = _mm512_and_si512(x, _mm512_set1_epi32(0x7FFFFFFF));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(mag, _mm512_set1_epi32(0x7F800000));
    const __m512i   q   = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rnd, q));
}

inline __m256i load_h(const uint16_t * p, __mmask16 m) { return _mm256_maskz_loadu_epi16(m, p); }
inline void    store_h(uint16_t * p, __m256i v, __mmask16 m) { _mm256_mask_storeu_epi16(p, m, v); }

// ---------------------------------------------------------------------------------------------
// reductions

inline float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }
inline float hmax(__m512 v) { return _mm512_reduce_max_ps(v); }

} // namespace avx512
