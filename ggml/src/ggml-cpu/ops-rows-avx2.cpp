// ops-rows-avx2.cpp — the AVX2 level's row kernels for the normalisations (rms_norm, norm),
// soft_max and rope (cos/sin cache and rotation), and the AVX2 row-kernel table (ops-fast.h),
// whose elementwise entries live in ops-elementwise-avx2.cpp.
//
// Same algorithms and precision as ops-rows-avx512.cpp, 8 lanes at a time:
//  * rms_norm rounds bit for bit like the AVX-512 kernel: the sd fusions (src/core/cpu/
//    rms-norm-cpu.h) reproduce one RMS_NORM rounding for every fast level, so both levels must
//    agree. Its 16-lane double sum is kept as four 4-lane accumulators in the same lane order.
//  * rope_cache / rope_row use the same operations per lane as the AVX-512 kernels (double angle
//    reduction, float polynomials, fmsub/fmadd rotation), so they also give the same bits.
//  * norm and soft_max sum in the same precision (float partial sums of four vectors, widened
//    into double), with a different grouping (8-lane vectors), hence the same error bounds.

#include "ops-fast.h"

#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)

#include <cmath>

#include "vec-avx2.h" // last: switches the rest of this file to the AVX2 target

using namespace avx2;

namespace {

inline __m256d lo_pd(__m256 v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
inline __m256d hi_pd(__m256 v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }

// -inf in the lanes past the end (max reductions must not see the zero-filled tail)
inline __m256 or_neg_inf(__m256 v, __m256i m) {
    return _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v, _mm256_castsi256_ps(m));
}

} // namespace

// Sum of squares in double in the AVX-512 kernel's lane order: element i goes to lane i % 16 of
// its 16-lane accumulator; here lanes 0-3, 4-7, 8-11, 12-15 are a0..a3. Its reduction adds lanes
// k and k+8 (a0 + a2, a1 + a3), then the upper 4 onto the lower 4, then 2 + 2, then 1 + 1.
// Squares of floats are exact in double, so the FMA rounds exactly like a multiply and an add.
void ggml_avx2_rms_norm_row(const float * x, float * y, int64_t n, float eps) {
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd(), a2 = _mm256_setzero_pd(), a3 = _mm256_setzero_pd();
    int64_t i  = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256  u = _mm256_loadu_ps(x + i), v = _mm256_loadu_ps(x + i + 8);
        const __m256d u0 = lo_pd(u), u1 = hi_pd(u), v0 = lo_pd(v), v1 = hi_pd(v);
        a0 = _mm256_fmadd_pd(u0, u0, a0);
        a1 = _mm256_fmadd_pd(u1, u1, a1);
        a2 = _mm256_fmadd_pd(v0, v0, a2);
        a3 = _mm256_fmadd_pd(v1, v1, a3);
    }
    if (i < n) { // lanes past the end load as 0 and add +0, which changes no sum of squares
        const __m256  u = load(x + i, tail_mask(n - i)), v = load(x + i + 8, tail_mask(n - i - 8));
        const __m256d u0 = lo_pd(u), u1 = hi_pd(u), v0 = lo_pd(v), v1 = hi_pd(v);
        a0 = _mm256_fmadd_pd(u0, u0, a0);
        a1 = _mm256_fmadd_pd(u1, u1, a1);
        a2 = _mm256_fmadd_pd(v0, v0, a2);
        a3 = _mm256_fmadd_pd(v1, v1, a3);
    }
    const double ss    = hsum_pd(_mm256_add_pd(_mm256_add_pd(a1, a3), _mm256_add_pd(a0, a2)));
    const float  scale = (float) (1.0 / std::sqrt(ss / (double) n + (double) eps));
    const __m256 vs    = _mm256_set1_ps(scale);
    i                  = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 u = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i + 8), vs);
        _mm256_storeu_ps(y + i, u);
        _mm256_storeu_ps(y + i + 8, v);
    }
    for (; i < n; i += 8) {
        const __m256i m = tail_mask(n - i);
        store(y + i, _mm256_mul_ps(load(x + i, m), vs), m);
    }
}

// The AVX-512 kernel's two passes (see ops-rows-avx512.cpp for why): statistics of d = x - x0 in
// float over 32-element blocks widened into double, then (x - mean) * s as a double-float FMA pair.
void ggml_avx2_norm_row(const float * x, float * y, int64_t n, float eps) {
    const __m256 x0 = _mm256_set1_ps(x[0]);
    __m256d      s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    __m256d      q0 = _mm256_setzero_pd(), q1 = _mm256_setzero_pd();
    auto flush = [&](__m256 s, __m256 q) {
        s0 = _mm256_add_pd(s0, lo_pd(s));
        s1 = _mm256_add_pd(s1, hi_pd(s));
        q0 = _mm256_add_pd(q0, lo_pd(q));
        q1 = _mm256_add_pd(q1, hi_pd(q));
    };
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), x0);
        const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), x0);
        const __m256 d2 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 16), x0);
        const __m256 d3 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 24), x0);
        const __m256 sv = _mm256_add_ps(_mm256_add_ps(d0, d1), _mm256_add_ps(d2, d3));
        const __m256 qv = _mm256_add_ps(_mm256_fmadd_ps(d0, d0, _mm256_mul_ps(d1, d1)), _mm256_fmadd_ps(d2, d2, _mm256_mul_ps(d3, d3)));
        flush(sv, qv);
    }
    for (; i < n; i += 8) {
        const __m256i m = tail_mask(n - i);
        // lanes past the end: 0
        const __m256 d = _mm256_and_ps(_mm256_sub_ps(load(x + i, m), x0), _mm256_castsi256_ps(m));
        flush(d, _mm256_mul_ps(d, d));
    }
    const double md   = hsum_pd(_mm256_add_pd(s0, s1)) / (double) n;
    double       var  = hsum_pd(_mm256_add_pd(q0, q1)) / (double) n - md * md;
    var               = var > 0.0 ? var : 0.0;
    const double mean = (double) x[0] + md;
    const double sc   = 1.0 / std::sqrt(var + (double) eps);
    const double c    = -mean * sc;
    const float  sh = (float) sc, sl = (float) (sc - (double) sh);
    const float  ch = (float) c, cl = (float) (c - (double) ch);
    const __m256 vsh = _mm256_set1_ps(sh), vsl = _mm256_set1_ps(sl), vch = _mm256_set1_ps(ch), vcl = _mm256_set1_ps(cl);
    auto         out = [&](__m256 v) { return _mm256_add_ps(_mm256_fmadd_ps(v, vsh, vch), _mm256_fmadd_ps(v, vsl, vcl)); };
    i                = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 ra = out(_mm256_loadu_ps(x + i)), rb = out(_mm256_loadu_ps(x + i + 8));
        _mm256_storeu_ps(y + i, ra);
        _mm256_storeu_ps(y + i + 8, rb);
    }
    for (; i < n; i += 8) {
        const __m256i m = tail_mask(n - i);
        store(y + i, out(load(x + i, m)), m);
    }
}

void ggml_avx2_soft_max_row(const float * x, float * y, float * tmp, int64_t n, float scale, const void * mask,
                            bool mask_f16, float slope, float sink) {
    const __m256 vscale = _mm256_set1_ps(scale);
    const __m256 vslope = _mm256_set1_ps(slope);
    __m256       vmax   = _mm256_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 8) {
        const __m256i m = tail_mask(n - i);
        __m256        v = _mm256_mul_ps(load(x + i, m), vscale);
        if (mask) {
            const __m256 mv = mask_f16 ? f16_to_f32(load_h((const uint16_t *) mask + i, n - i)) : load((const float *) mask + i, m);
            v               = _mm256_add_ps(v, _mm256_mul_ps(vslope, mv));
        }
        store(tmp + i, v, m);
        vmax = _mm256_max_ps(vmax, or_neg_inf(v, m));
    }
    float maxv = hmax(vmax);
    if (sink > maxv) maxv = sink;
    if (maxv == -INFINITY) {
        for (int64_t i = 0; i < n; i += 8) store(y + i, _mm256_setzero_ps(), tail_mask(n - i));
        return;
    }
    const __m256 vm = _mm256_set1_ps(maxv);
    __m256d      s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    // four independent exp chains per iteration, added in float (four terms in (0, 1] per lane)
    // before being widened into the double sum, as in the AVX-512 kernel
    auto widen = [&](__m256 s) {
        s0 = _mm256_add_pd(s0, lo_pd(s));
        s1 = _mm256_add_pd(s1, hi_pd(s));
    };
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256 e0 = v_exp(_mm256_sub_ps(_mm256_loadu_ps(tmp + i), vm));
        const __m256 e1 = v_exp(_mm256_sub_ps(_mm256_loadu_ps(tmp + i + 8), vm));
        const __m256 e2 = v_exp(_mm256_sub_ps(_mm256_loadu_ps(tmp + i + 16), vm));
        const __m256 e3 = v_exp(_mm256_sub_ps(_mm256_loadu_ps(tmp + i + 24), vm));
        _mm256_storeu_ps(tmp + i, e0);
        _mm256_storeu_ps(tmp + i + 8, e1);
        _mm256_storeu_ps(tmp + i + 16, e2);
        _mm256_storeu_ps(tmp + i + 24, e3);
        widen(_mm256_add_ps(_mm256_add_ps(e0, e1), _mm256_add_ps(e2, e3)));
    }
    for (; i < n; i += 8) {
        const __m256i m = tail_mask(n - i);
        // lanes past the end: exp(0 - max) would count, so they are zeroed
        const __m256 e = _mm256_and_ps(v_exp(_mm256_sub_ps(load(tmp + i, m), vm)), _mm256_castsi256_ps(m));
        store(tmp + i, e, m);
        widen(e);
    }
    double sum = hsum_pd(_mm256_add_pd(s0, s1));
    if (sink != -INFINITY) sum += std::exp((double) (sink - maxv));
    const __m256 inv = _mm256_set1_ps((float) (1.0 / sum));
    i                = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(tmp + i), inv));
    if (i < n) {
        const __m256i m = tail_mask(n - i);
        store(y + i, _mm256_mul_ps(load(tmp + i, m), inv), m);
    }
}

// ---------------------------------------------------------------------------------------------
// rope

namespace {

// sin and cos of r, |r| <= pi/4 (the AVX-512 kernel's Taylor polynomials)
inline void sincos_small(__m256 r, __m256 & s, __m256 & c) {
    const __m256 z  = _mm256_mul_ps(r, r);
    __m256       ps = _mm256_set1_ps(-2.5052108385441720e-08f);
    ps              = _mm256_fmadd_ps(ps, z, _mm256_set1_ps(2.7557319223985893e-06f));
    ps              = _mm256_fmadd_ps(ps, z, _mm256_set1_ps(-1.9841269841269841e-04f));
    ps              = _mm256_fmadd_ps(ps, z, _mm256_set1_ps(8.3333333333333333e-03f));
    ps              = _mm256_fmadd_ps(ps, z, _mm256_set1_ps(-1.6666666666666667e-01f));
    s               = _mm256_fmadd_ps(_mm256_mul_ps(ps, z), r, r);
    __m256 pc       = _mm256_set1_ps(2.0876756987868099e-09f);
    pc              = _mm256_fmadd_ps(pc, z, _mm256_set1_ps(-2.7557319223985891e-07f));
    pc              = _mm256_fmadd_ps(pc, z, _mm256_set1_ps(2.4801587301587302e-05f));
    pc              = _mm256_fmadd_ps(pc, z, _mm256_set1_ps(-1.3888888888888889e-03f));
    pc              = _mm256_fmadd_ps(pc, z, _mm256_set1_ps(4.1666666666666667e-02f));
    pc              = _mm256_fmadd_ps(pc, z, _mm256_set1_ps(-0.5f));
    c               = _mm256_fmadd_ps(pc, z, _mm256_set1_ps(1.0f));
}

// sin/cos of 8 angles given in double (two halves): quadrant reduction in double, then float
inline void sincos8(__m256d t0, __m256d t1, __m256 & s, __m256 & c) {
    const __m256d two_over_pi = _mm256_set1_pd(0.63661977236758134308);
    // pi/2 in two parts: the first has 33 significant bits, so k * hi is exact for |k| < 2^20
    const __m256d pio2_hi = _mm256_set1_pd(1.5707963267341256141662597656e+00);
    const __m256d pio2_lo = _mm256_set1_pd(6.0771005065061922e-11);
    const __m256d k0      = _mm256_round_pd(_mm256_mul_pd(t0, two_over_pi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256d k1      = _mm256_round_pd(_mm256_mul_pd(t1, two_over_pi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256d r0      = _mm256_fnmadd_pd(k0, pio2_lo, _mm256_fnmadd_pd(k0, pio2_hi, t0));
    const __m256d r1      = _mm256_fnmadd_pd(k1, pio2_lo, _mm256_fnmadd_pd(k1, pio2_hi, t1));
    const __m256  r       = _mm256_set_m128(_mm256_cvtpd_ps(r1), _mm256_cvtpd_ps(r0));
    const __m256i q       = _mm256_set_m128i(_mm256_cvtpd_epi32(k1), _mm256_cvtpd_epi32(k0));
    __m256        sr, cr;
    sincos_small(r, sr, cr);
    // quadrant q: (sin, cos) = (s, c), (c, -s), (-s, -c), (-c, s)
    const __m256i one  = _mm256_set1_epi32(1), two = _mm256_set1_epi32(2);
    const __m256  swap = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(q, one), one));
    const __m256  s1   = _mm256_blendv_ps(sr, cr, swap);
    const __m256  c1   = _mm256_blendv_ps(cr, sr, swap);
    // bit 1 of q (of q + 1 for the cosine), moved to the sign bit
    const __m256i sneg = _mm256_slli_epi32(_mm256_and_si256(q, two), 30);
    const __m256i cneg = _mm256_slli_epi32(_mm256_and_si256(_mm256_add_epi32(q, one), two), 30);
    s = _mm256_xor_ps(s1, _mm256_castsi256_ps(sneg));
    c = _mm256_xor_ps(c1, _mm256_castsi256_ps(cneg));
}

} // namespace

void ggml_avx2_rope_cache(const double * coef, int half, double pos, float mscale, bool neox, float * cs, float * sn) {
    const __m256d vp = _mm256_set1_pd(pos);
    const __m256  ms = _mm256_set1_ps(mscale);
    for (int i = 0; i < half; i += 8) {
        const int left = half - i;
        __m256d   t0, t1;
        if (left >= 8) {
            t0 = _mm256_mul_pd(vp, _mm256_loadu_pd(coef + i));
            t1 = _mm256_mul_pd(vp, _mm256_loadu_pd(coef + i + 4));
        } else {
            // 64-bit lane masks for the two halves of the tail
            const __m256i idx = _mm256_setr_epi64x(0, 1, 2, 3);
            const __m256i m0  = _mm256_cmpgt_epi64(_mm256_set1_epi64x(left), idx);
            const __m256i m1  = _mm256_cmpgt_epi64(_mm256_set1_epi64x(left - 4), idx);
            t0                = _mm256_mul_pd(vp, _mm256_maskload_pd(coef + i, m0));
            t1                = _mm256_mul_pd(vp, _mm256_maskload_pd(coef + i + 4, m1));
        }
        __m256 s, c;
        sincos8(t0, t1, s, c);
        s = _mm256_mul_ps(s, ms);
        c = _mm256_mul_ps(c, ms);
        if (neox) {
            const __m256i m = tail_mask(left);
            store(cs + i, c, m);
            store(sn + i, s, m);
        } else {
            // interleave: cs[2i] = cs[2i+1] = c_i; sn[2i] = -s_i, sn[2i+1] = s_i. unpack works in
            // 128-bit halves ({c0 c0 c1 c1 | c4 c4 c5 c5}, {c2 c2 c3 c3 | c6 c6 c7 c7}), the
            // cross-half permutes put pairs 0-3 and 4-7 in order.
            const __m256 cl = _mm256_unpacklo_ps(c, c), ch = _mm256_unpackhi_ps(c, c);
            const __m256 sl = _mm256_unpacklo_ps(s, s), sh = _mm256_unpackhi_ps(s, s);
            const __m256 neg_ev = _mm256_setr_ps(-0.0f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f);
            const __m256 c_lo = _mm256_permute2f128_ps(cl, ch, 0x20), c_hi = _mm256_permute2f128_ps(cl, ch, 0x31);
            const __m256 s_lo = _mm256_xor_ps(_mm256_permute2f128_ps(sl, sh, 0x20), neg_ev);
            const __m256 s_hi = _mm256_xor_ps(_mm256_permute2f128_ps(sl, sh, 0x31), neg_ev);
            const int64_t n2  = 2 * (int64_t) left; // floats of the interleaved cache still to write
            const __m256i m_lo = tail_mask(n2);
            store(cs + 2 * i, c_lo, m_lo);
            store(sn + 2 * i, s_lo, m_lo);
            if (n2 > 8) {
                const __m256i m_hi = tail_mask(n2 - 8);
                store(cs + 2 * i + 8, c_hi, m_hi);
                store(sn + 2 * i + 8, s_hi, m_hi);
            }
        }
    }
}

void ggml_avx2_rope_row(const float * x, float * y, int64_t ne0, int n_offs, int n_dims, bool neox, const float * cs,
                        const float * sn) {
    const float * xr = x + n_offs;
    float *       yr = y + n_offs;
    if (neox) {
        const int half = n_dims / 2;
        int       i    = 0;
        for (; i + 8 <= half; i += 8) {
            const __m256 x0 = _mm256_loadu_ps(xr + i), x1 = _mm256_loadu_ps(xr + half + i);
            const __m256 c = _mm256_loadu_ps(cs + i), s = _mm256_loadu_ps(sn + i);
            const __m256 lo = _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s));
            const __m256 hi = _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c));
            _mm256_storeu_ps(yr + i, lo);
            _mm256_storeu_ps(yr + half + i, hi);
        }
        if (i < half) {
            const __m256i m  = tail_mask(half - i);
            const __m256  x0 = load(xr + i, m), x1 = load(xr + half + i, m);
            const __m256  c = load(cs + i, m), s = load(sn + i, m);
            store(yr + i, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)), m);
            store(yr + half + i, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)), m);
        }
    } else {
        // pairs (2i, 2i+1): y = x * cos + swap(x) * (-sin, +sin)
        int i = 0;
        for (; i + 8 <= n_dims; i += 8) {
            const __m256 v  = _mm256_loadu_ps(xr + i);
            const __m256 sw = _mm256_permute_ps(v, 0xB1);
            _mm256_storeu_ps(yr + i, _mm256_fmadd_ps(sw, _mm256_loadu_ps(sn + i), _mm256_mul_ps(v, _mm256_loadu_ps(cs + i))));
        }
        if (i < n_dims) {
            const __m256i m  = tail_mask(n_dims - i);
            const __m256  v  = load(xr + i, m);
            const __m256  sw = _mm256_permute_ps(v, 0xB1);
            store(yr + i, _mm256_fmadd_ps(sw, load(sn + i, m), _mm256_mul_ps(v, load(cs + i, m))), m);
        }
    }
    if (x != y) {
        for (int64_t i = 0; i < n_offs; ++i) y[i] = x[i];
        for (int64_t i = n_offs + n_dims; i < ne0; ++i) y[i] = x[i];
    }
}

const ggml_cpu_row_kernels * ggml_cpu_row_kernels_avx2(void) {
    static const ggml_cpu_row_kernels table = {
        "avx2",
        ggml_avx2_map_row,
        ggml_avx2_glu_row,
        ggml_avx2_binary_row,
        ggml_avx2_f32_to_f16,
        ggml_avx2_f16_to_f32,
        ggml_avx2_f32_to_bf16,
        ggml_avx2_bf16_to_f32,
        ggml_avx2_rms_norm_row,
        ggml_avx2_norm_row,
        ggml_avx2_soft_max_row,
        ggml_avx2_rope_cache,
        ggml_avx2_rope_row,
    };
    return &table;
}

#else // not an x86-64 GCC/Clang build: no AVX2 level

const ggml_cpu_row_kernels * ggml_cpu_row_kernels_avx2(void) { return nullptr; }

#endif
