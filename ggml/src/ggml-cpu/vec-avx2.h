#pragma once

// vec-avx2.h — AVX2 (+FMA, F16C) vector math and conversions for the AVX2 row kernels
// (ops-elementwise-avx2.cpp, ops-rows-avx2.cpp). The 8-lane counterpart of vec-avx512.h: the
// same algorithms and coefficients, so the same accuracy (stated there), and where the AVX-512
// code relies on an instruction AVX2 lacks the replacement is chosen to round identically:
//   * 2^n scaling (vscalefps): p * 2^(n/2) * 2^(n - n/2). The first product is exact (both factors
//     are normal and so is the result), the second rounds once, so results match vscalefps bit for
//     bit, subnormals, zero and inf included, for every n the clamped exponentials produce.
//   * masked tails: vmaskmovps loads/stores (lanes past the end read as 0, are never written).
// So v_exp, v_sigmoid, v_silu, v_gelu, v_gelu_quick, v_tanh, v_erfc, v_gelu_erf return the same
// bits as their AVX-512 versions, and the conversions are bit-identical to the scalar ggml ones.
//
// Include this header LAST in a *-avx2.cpp file: it switches the rest of the translation unit to
// the AVX2 target (the library is also built for baseline x86-64, GGML_NATIVE=OFF), and anything
// defined after it may contain AVX2/FMA/F16C instructions. Standard and project headers must come
// before it, so their inline functions (merged with other translation units by the linker) stay
// baseline code. What follows runs only when cpu-isa.h's active level allows avx2.

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("avx2,fma,f16c")
#endif

#include <immintrin.h>

#include <cstdint>

namespace avx2 {

// ---------------------------------------------------------------------------------------------
// tails: a lane mask for the first n (< 8 or more) lanes, and masked load/store with it

inline __m256i tail_mask(int64_t n) {
    const int k = n >= 8 ? 8 : (int) n;
    // lane i is all-ones when i < k
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline __m256 load(const float * p, __m256i m) { return _mm256_maskload_ps(p, m); }
inline void   store(float * p, __m256 v, __m256i m) { _mm256_maskstore_ps(p, m, v); }

inline __m256 v_abs(__m256 x) { return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF))); }

// ---------------------------------------------------------------------------------------------
// exp (algorithm and polynomial: vec-avx512.h)

namespace detail {
inline __m256 exp_poly(__m256 r) {
    __m256 p = _mm256_set1_ps(8.3127902860138467e-03f);
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1889686739588941e-02f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6667113433299424e-01f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.9999238755239672e-01f));
    p        = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    return _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
}

// p * 2^n for integral n in [-152, 129] (the clamped exponentials' range): n is split in two
// halves, each a normal power of two built in the exponent field. p * 2^n1 stays normal and is
// exact; the second product rounds once, like vscalefps. NaN p stays NaN whatever n holds.
inline __m256 scale2(__m256 p, __m256 n) {
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256  f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
    const __m256  f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
}

template <bool EXACT_LN2 = true>
inline __m256 exp_clamped(__m256 x) {
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r;
    if (EXACT_LN2) {
        r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
        r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723212e-6f), r);
    } else {
        r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693147182464599609375f), x);
    }
    return scale2(exp_poly(r), n);
}

// -|x| (sign bit set; NaN stays NaN)
inline __m256 neg_abs(__m256 x) { return _mm256_or_ps(x, _mm256_set1_ps(-0.0f)); }

// the logistic family from e = e^{-|u|}, d = 1 + e (see vec-avx512.h); neg: all-ones where u < 0
struct logistic {
    __m256 e, d, neg;
};
inline logistic logistic_of(__m256 u) {
    logistic l;
    // max with the constant first: the second operand is returned for NaN, so NaN survives
    l.e   = exp_clamped<false>(_mm256_max_ps(_mm256_set1_ps(-105.0f), neg_abs(u)));
    l.d   = _mm256_add_ps(_mm256_set1_ps(1.0f), l.e);
    l.neg = _mm256_cmp_ps(u, _mm256_setzero_ps(), _CMP_LT_OQ);
    return l;
}

// x * sigmoid(u) for u with the sign of x: (x or x e) / d, x clamped to >= -FLT_MAX first
inline __m256 times_logistic(__m256 x, const logistic & l) {
    const __m256 xc = _mm256_max_ps(_mm256_set1_ps(-3.40282347e+38f), x);
    return _mm256_div_ps(_mm256_blendv_ps(xc, _mm256_mul_ps(xc, l.e), l.neg), l.d);
}
} // namespace detail

inline __m256 v_exp(__m256 x) {
    // min/max with the constant first: the second operand is returned for NaN, so NaN survives
    x = _mm256_min_ps(_mm256_set1_ps(89.0f), x);
    x = _mm256_max_ps(_mm256_set1_ps(-105.0f), x);
    return detail::exp_clamped(x);
}

inline __m256 v_sigmoid(__m256 x) {
    const detail::logistic l = detail::logistic_of(x);
    return _mm256_div_ps(_mm256_blendv_ps(_mm256_set1_ps(1.0f), l.e, l.neg), l.d);
}

// x * s where s -> 0 as x -> -inf: the limit is -0, not (-inf) * 0
inline __m256 v_times_gate(__m256 x, __m256 s) {
    const __m256 z = _mm256_cmp_ps(s, _mm256_setzero_ps(), _CMP_EQ_OQ);
    return _mm256_blendv_ps(_mm256_mul_ps(x, s), _mm256_set1_ps(-0.0f), z);
}

inline __m256 v_silu(__m256 x) { return detail::times_logistic(x, detail::logistic_of(x)); }

// tanh-form gelu as x * sigmoid(2z) (no cancellation for negative x; see vec-avx512.h)
inline __m256 v_gelu(__m256 x) {
    const __m256 w = _mm256_fmadd_ps(_mm256_set1_ps(0.0713548162726008f), _mm256_mul_ps(x, x), _mm256_set1_ps(1.5957691216057308f));
    return detail::times_logistic(x, detail::logistic_of(_mm256_mul_ps(x, w)));
}

inline __m256 v_gelu_quick(__m256 x) {
    return detail::times_logistic(x, detail::logistic_of(_mm256_mul_ps(_mm256_set1_ps(1.702f), x)));
}

inline __m256 v_copysign(__m256 mag, __m256 sgn) {
    return _mm256_or_ps(mag, _mm256_and_ps(sgn, _mm256_set1_ps(-0.0f)));
}

// tanh: odd polynomial below |x| = 0.625, 1 - 2/(e^{2|x|} + 1) above (see vec-avx512.h)
inline __m256 v_tanh(__m256 x) {
    const __m256 ax = v_abs(x);
    const __m256 y  = _mm256_mul_ps(x, x);
    __m256       q  = _mm256_set1_ps(0.0022927448161781423f);
    q               = _mm256_fmadd_ps(q, y, _mm256_set1_ps(-0.008343945515839152f));
    q               = _mm256_fmadd_ps(q, y, _mm256_set1_ps(0.02176891865102821f));
    q               = _mm256_fmadd_ps(q, y, _mm256_set1_ps(-0.053959259577204543f));
    q               = _mm256_fmadd_ps(q, y, _mm256_set1_ps(0.13333303556915742f));
    q               = _mm256_fmadd_ps(q, y, _mm256_set1_ps(-0.33333333172140362f));
    const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(q, y), x, x);
    const __m256 e     = v_exp(_mm256_add_ps(ax, ax));
    const __m256 big   = _mm256_sub_ps(_mm256_set1_ps(1.0f),
                                       _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    const __m256 is_small = _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ);
    // NaN compares false and goes through the big branch, where it propagates
    return _mm256_blendv_ps(v_copysign(big, x), small, is_small);
}

// erfc(x) = t exp(-u^2 + P(t)), u = |x|, t = 1/(1 + u/2); erfc(-u) = 2 - erfc(u) (see vec-avx512.h)
inline __m256 v_erfc(__m256 x) {
    const __m256 u  = _mm256_min_ps(_mm256_set1_ps(11.0f), v_abs(x)); // NaN stays NaN
    const __m256 t  = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(u, _mm256_set1_ps(0.5f), _mm256_set1_ps(1.0f)));
    __m256       p  = _mm256_set1_ps(0.1582473977980184f);
    p               = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.75242256860797321f));
    p               = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.3227127633417931f));
    p               = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.91335193002642026f));
    p               = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.095678951021368733f));
    p               = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.090038920390589619f));
    p               = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.064820619939276863f));
    p               = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.3805130594473215f));
    p               = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.99932126437300389f));
    p               = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.2654805782779573f));
    const __m256 hi = _mm256_mul_ps(u, u);
    const __m256 lo = _mm256_fmsub_ps(u, u, hi); // u*u - hi exactly
    const __m256 a  = _mm256_mul_ps(_mm256_mul_ps(t, v_exp(p)), _mm256_fnmadd_ps(lo, _mm256_set1_ps(1.0f), _mm256_set1_ps(1.0f)));
    const __m256 r  = _mm256_mul_ps(a, v_exp(_mm256_sub_ps(_mm256_setzero_ps(), hi)));
    const __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    return _mm256_blendv_ps(r, _mm256_sub_ps(_mm256_set1_ps(2.0f), r), neg);
}

// gelu_erf(x) = 0.5 x erfc(-x/sqrt2)
inline __m256 v_gelu_erf(__m256 x) {
    const __m256 s = _mm256_mul_ps(_mm256_set1_ps(0.5f), v_erfc(_mm256_mul_ps(x, _mm256_set1_ps(-0.70710678118654752f))));
    return v_times_gate(x, s);
}

// ---------------------------------------------------------------------------------------------
// F16 / BF16 conversions (8 lanes), bit-exact against the scalar ggml conversions

// binary16 -> binary32: vcvtph2ps is exact but quiets signalling NaNs, which the reference keeps
// as they are, so NaN lanes are rebuilt from the bits.
inline __m256 f16_to_f32(__m128i h) {
    const __m256  f   = _mm256_cvtph_ps(h);
    const __m256i w   = _mm256_cvtepu16_epi32(h);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x7FFF)), _mm256_set1_epi32(0x7C00));
    if (__builtin_expect(_mm256_testz_si256(nan, nan), 1)) return f;
    const __m256i bits = _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x8000)), 16),
                                         _mm256_or_si256(_mm256_set1_epi32(0x7F800000),
                                                         _mm256_slli_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0x3FF)), 13)));
    return _mm256_blendv_ps(f, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(nan));
}

// 8 x 32-bit values <= 0xFFFF -> 8 x 16 bits (packus works in 128-bit halves)
inline __m128i narrow16(__m256i v) {
    return _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

// binary32 -> binary16, round to nearest even by an explicit rounding mode (MXCSR does not
// matter); NaNs become the reference's canonical sign|0x7E00.
inline __m128i f32_to_f16(__m256 f) {
    const __m128i h   = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i x   = _mm256_castps_si256(f);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
    if (__builtin_expect(_mm256_testz_si256(nan, nan), 1)) return h;
    const __m256i canon = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x8000)),
                                          _mm256_set1_epi32(0x7E00));
    // the 32-bit NaN lanes narrowed to 16-bit lanes (all-ones stays all-ones under packs)
    const __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan), _mm256_extracti128_si256(nan, 1));
    return _mm_blendv_epi8(h, narrow16(canon), nan16);
}

inline __m256 bf16_to_f32(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }

// binary32 -> bfloat16 by the reference's integer round-to-nearest-even, still in 32-bit lanes
// (vcvtneps2bf16 is not used: it flushes subnormal inputs)
inline __m256i f32_to_bf16_32(__m256 f) {
    const __m256i x   = _mm256_castps_si256(f);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i rnd = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFF)), lsb), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
    const __m256i q   = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(rnd, q, nan);
}
inline __m128i f32_to_bf16(__m256 f) { return narrow16(f32_to_bf16_32(f)); }

// 16-bit loads/stores of the first n (<= 8) elements
inline __m128i load_h(const uint16_t * p, int64_t n) {
    if (n >= 8) return _mm_loadu_si128((const __m128i *) p);
    alignas(16) uint16_t b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n; ++i) b[i] = p[i];
    return _mm_load_si128((const __m128i *) b);
}
inline void store_h(uint16_t * p, __m128i v, int64_t n) {
    if (n >= 8) {
        _mm_storeu_si128((__m128i *) p, v);
        return;
    }
    alignas(16) uint16_t b[8];
    _mm_store_si128((__m128i *) b, v);
    for (int64_t i = 0; i < n; ++i) p[i] = b[i];
}

// ---------------------------------------------------------------------------------------------
// reductions

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s        = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s        = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
inline float hmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s        = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s        = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
// 4 doubles as (v2 + v0) + (v3 + v1): the order of vec-avx512's 8-lane reduction's last two steps
inline double hsum_pd(__m256d v) {
    const __m128d h = _mm_add_pd(_mm256_extractf128_pd(v, 1), _mm256_castpd256_pd128(v));
    return _mm_cvtsd_f64(h) + _mm_cvtsd_f64(_mm_unpackhi_pd(h, h));
}

} // namespace avx2
