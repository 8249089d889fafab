// ops-rows-avx512.cpp — AVX-512 row kernels for the normalisations (rms_norm, norm), soft_max and
// rope (cos/sin cache and rotation). The portable kernels keep the partitioning and call these
// per packed F32 row.
//
// Precision mirrors the portable kernels: norm statistics and the soft_max normaliser are summed
// in double (norm's output pass is float with a double-float correction, see there); rope angles are formed and reduced in double (the float sin/cos polynomials then see
// |r| <= pi/4 only).

#include "ops-fast.h"

#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)

#include <cmath>

#include "vec-avx512.h" // last: switches the rest of this file to the AVX-512 target

using namespace avx512;

namespace {

// two 8-float halves -> one 16-float vector (AVX-512F only; vinsertf32x8 would need DQ)
inline __m512 join(__m256 lo, __m256 hi) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
}

// sum of x (or x^2) over a row, in double (two 8-lane halves per 16 floats)
template <bool SQUARE>
inline double row_sum_d(const float * x, int64_t n) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        const __m512  v  = load(x + i, tail_mask(n - i));
        const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
        const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
        if (SQUARE) {
            a0 = _mm512_fmadd_pd(lo, lo, a0);
            a1 = _mm512_fmadd_pd(hi, hi, a1);
        } else {
            a0 = _mm512_add_pd(a0, lo);
            a1 = _mm512_add_pd(a1, hi);
        }
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
}

} // namespace

void ggml_avx512_rms_norm_row(const float * x, float * y, int64_t n, float eps) {
    const double ss    = row_sum_d<true>(x, n);
    const float  scale = (float) (1.0 / std::sqrt(ss / (double) n + (double) eps));
    const __m512 vs    = _mm512_set1_ps(scale);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        store(y + i, _mm512_mul_ps(load(x + i, m), vs), m);
    }
}

// One statistics pass and one output pass, both streaming the row once:
//  * statistics: d = x - x0 (x0 = the row's first element, a shift that keeps E[d^2] - E[d]^2
//    from cancelling when |mean| >> std) in float; d and d^2 are summed in float over 64-element
//    blocks and the block sums in double, so the statistics carry ~1e-7 relative error for any
//    row length.
//  * output: (x - mean) * s as fl(fl(x s_hi + c_hi) + fl(x s_lo + c_lo)) with s = s_hi + s_lo and
//    c = -mean s = c_hi + c_lo split into float pairs: the first FMA cancels x s_hi against c_hi
//    exactly before its one rounding, the second restores the low parts, so the result is within
//    ~1 ulp of the double formula even when |mean| >> std, at float speed.
void ggml_avx512_norm_row(const float * x, float * y, int64_t n, float eps) {
    const __m512 x0 = _mm512_set1_ps(x[0]);
    __m512d      s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    __m512d      q0 = _mm512_setzero_pd(), q1 = _mm512_setzero_pd();
    // float partial sums over 4 vectors (each lane adds 4 terms: error ~2^-22 relative), then
    // widened into the double accumulators
    auto flush = [&](__m512 s, __m512 q) {
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(s)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1))));
        q0 = _mm512_add_pd(q0, _mm512_cvtps_pd(_mm512_castps512_ps256(q)));
        q1 = _mm512_add_pd(q1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(q), 1))));
    };
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(x + i), x0);
        const __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 16), x0);
        const __m512 d2 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 32), x0);
        const __m512 d3 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 48), x0);
        const __m512 sv = _mm512_add_ps(_mm512_add_ps(d0, d1), _mm512_add_ps(d2, d3));
        const __m512 qv = _mm512_add_ps(_mm512_fmadd_ps(d0, d0, _mm512_mul_ps(d1, d1)), _mm512_fmadd_ps(d2, d2, _mm512_mul_ps(d3, d3)));
        flush(sv, qv);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512    d = _mm512_maskz_sub_ps(m, load(x + i, m), x0); // lanes past the end: 0
        flush(d, _mm512_mul_ps(d, d));
    }
    const double md   = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1)) / (double) n;
    double       var  = _mm512_reduce_add_pd(_mm512_add_pd(q0, q1)) / (double) n - md * md;
    var               = var > 0.0 ? var : 0.0;
    const double mean = (double) x[0] + md;
    const double sc   = 1.0 / std::sqrt(var + (double) eps);
    const double c    = -mean * sc;
    const float  sh = (float) sc, sl = (float) (sc - (double) sh);
    const float  ch = (float) c, cl = (float) (c - (double) ch);
    const __m512 vsh = _mm512_set1_ps(sh), vsl = _mm512_set1_ps(sl), vch = _mm512_set1_ps(ch), vcl = _mm512_set1_ps(cl);
    i                = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        const __m512 ra = _mm512_add_ps(_mm512_fmadd_ps(a, vsh, vch), _mm512_fmadd_ps(a, vsl, vcl));
        const __m512 rb = _mm512_add_ps(_mm512_fmadd_ps(b, vsh, vch), _mm512_fmadd_ps(b, vsl, vcl));
        _mm512_storeu_ps(y + i, ra);
        _mm512_storeu_ps(y + i + 16, rb);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512    v = load(x + i, m);
        store(y + i, _mm512_add_ps(_mm512_fmadd_ps(v, vsh, vch), _mm512_fmadd_ps(v, vsl, vcl)), m);
    }
}

void ggml_avx512_soft_max_row(const float * x, float * y, float * tmp, int64_t n, float scale, const void * mask,
                              bool mask_f16, float slope, float sink) {
    const __m512 vscale = _mm512_set1_ps(scale);
    const __m512 vslope = _mm512_set1_ps(slope);
    __m512       vmax   = _mm512_set1_ps(-INFINITY);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        __m512          v = _mm512_mul_ps(load(x + i, m), vscale);
        if (mask) {
            const __m512 mv = mask_f16 ? f16_to_f32(load_h((const uint16_t *) mask + i, m)) : load((const float *) mask + i, m);
            v               = _mm512_add_ps(v, _mm512_mul_ps(vslope, mv));
        }
        _mm512_storeu_ps(tmp + i, v); // tmp has room for the padded tail
        vmax = _mm512_mask_max_ps(vmax, m, vmax, v);
    }
    float maxv = hmax(vmax);
    if (sink > maxv) maxv = sink;
    if (maxv == -INFINITY) {
        for (int64_t i = 0; i < n; i += 16) store(y + i, _mm512_setzero_ps(), tail_mask(n - i));
        return;
    }
    const __m512 vm = _mm512_set1_ps(maxv);
    __m512d      s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    // the exponentials come 64 at a time (four independent exp chains) and are first added in
    // float, four terms per lane (each term in (0, 1]: relative error <= 3 * 2^-24), before being
    // widened into the double sum; widening every vector cost as much as the exp itself
    auto widen = [&](__m512 s) {
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(s)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s), 1))));
    };
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512 e0 = v_exp(_mm512_sub_ps(_mm512_loadu_ps(tmp + i), vm));
        const __m512 e1 = v_exp(_mm512_sub_ps(_mm512_loadu_ps(tmp + i + 16), vm));
        const __m512 e2 = v_exp(_mm512_sub_ps(_mm512_loadu_ps(tmp + i + 32), vm));
        const __m512 e3 = v_exp(_mm512_sub_ps(_mm512_loadu_ps(tmp + i + 48), vm));
        _mm512_storeu_ps(tmp + i, e0);
        _mm512_storeu_ps(tmp + i + 16, e1);
        _mm512_storeu_ps(tmp + i + 32, e2);
        _mm512_storeu_ps(tmp + i + 48, e3);
        widen(_mm512_add_ps(_mm512_add_ps(e0, e1), _mm512_add_ps(e2, e3)));
    }
    for (; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512    e = _mm512_maskz_mov_ps(m, v_exp(_mm512_sub_ps(_mm512_loadu_ps(tmp + i), vm)));
        _mm512_storeu_ps(tmp + i, e);
        widen(e);
    }
    double sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    if (sink != -INFINITY) sum += std::exp((double) (sink - maxv));
    const __m512 inv = _mm512_set1_ps((float) (1.0 / sum));
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        store(y + i, _mm512_mul_ps(_mm512_loadu_ps(tmp + i), inv), m);
    }
}

// ---------------------------------------------------------------------------------------------
// rope

namespace {

// sin and cos of r, |r| <= pi/4: Taylor polynomials to r^11 / r^12 (truncation < 2e-10)
inline void sincos_small(__m512 r, __m512 & s, __m512 & c) {
    const __m512 z = _mm512_mul_ps(r, r);
    __m512       ps = _mm512_set1_ps(-2.5052108385441720e-08f);
    ps              = _mm512_fmadd_ps(ps, z, _mm512_set1_ps(2.7557319223985893e-06f));
    ps              = _mm512_fmadd_ps(ps, z, _mm512_set1_ps(-1.9841269841269841e-04f));
    ps              = _mm512_fmadd_ps(ps, z, _mm512_set1_ps(8.3333333333333333e-03f));
    ps              = _mm512_fmadd_ps(ps, z, _mm512_set1_ps(-1.6666666666666667e-01f));
    s               = _mm512_fmadd_ps(_mm512_mul_ps(ps, z), r, r);
    __m512 pc       = _mm512_set1_ps(2.0876756987868099e-09f);
    pc              = _mm512_fmadd_ps(pc, z, _mm512_set1_ps(-2.7557319223985891e-07f));
    pc              = _mm512_fmadd_ps(pc, z, _mm512_set1_ps(2.4801587301587302e-05f));
    pc              = _mm512_fmadd_ps(pc, z, _mm512_set1_ps(-1.3888888888888889e-03f));
    pc              = _mm512_fmadd_ps(pc, z, _mm512_set1_ps(4.1666666666666667e-02f));
    pc              = _mm512_fmadd_ps(pc, z, _mm512_set1_ps(-0.5f));
    c               = _mm512_fmadd_ps(pc, z, _mm512_set1_ps(1.0f));
}

// sin/cos of 16 angles given in double (two halves): quadrant reduction in double, then float
inline void sincos16(__m512d t0, __m512d t1, __m512 & s, __m512 & c) {
    const __m512d two_over_pi = _mm512_set1_pd(0.63661977236758134308);
    // pi/2 in two parts: the first has 33 significant bits, so k * hi is exact for |k| < 2^20
    const __m512d pio2_hi = _mm512_set1_pd(1.5707963267341256141662597656e+00);
    const __m512d pio2_lo = _mm512_set1_pd(6.0771005065061922e-11);
    const __m512d k0      = _mm512_roundscale_pd(_mm512_mul_pd(t0, two_over_pi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512d k1      = _mm512_roundscale_pd(_mm512_mul_pd(t1, two_over_pi), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512d r0      = _mm512_fnmadd_pd(k0, pio2_lo, _mm512_fnmadd_pd(k0, pio2_hi, t0));
    const __m512d r1      = _mm512_fnmadd_pd(k1, pio2_lo, _mm512_fnmadd_pd(k1, pio2_hi, t1));
    const __m512  r = join(_mm512_cvtpd_ps(r0), _mm512_cvtpd_ps(r1));
    const __m256i q0 = _mm512_cvtpd_epi32(k0);
    const __m256i q1 = _mm512_cvtpd_epi32(k1);
    const __m512i q  = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
    __m512        sr, cr;
    sincos_small(r, sr, cr);
    // quadrant q: (sin, cos) = (s, c), (c, -s), (-s, -c), (-c, s)
    const __mmask16 swap = _mm512_test_epi32_mask(q, _mm512_set1_epi32(1));
    const __m512    s1   = _mm512_mask_blend_ps(swap, sr, cr);
    const __m512    c1   = _mm512_mask_blend_ps(swap, cr, sr);
    const __m512i   sgn  = _mm512_set1_epi32((int) 0x80000000u);
    const __mmask16 sneg = _mm512_test_epi32_mask(q, _mm512_set1_epi32(2));
    const __mmask16 cneg = _mm512_test_epi32_mask(_mm512_add_epi32(q, _mm512_set1_epi32(1)), _mm512_set1_epi32(2));
    s = _mm512_castsi512_ps(_mm512_mask_xor_epi32(_mm512_castps_si512(s1), sneg, _mm512_castps_si512(s1), sgn));
    c = _mm512_castsi512_ps(_mm512_mask_xor_epi32(_mm512_castps_si512(c1), cneg, _mm512_castps_si512(c1), sgn));
}

} // namespace

void ggml_avx512_rope_cache(const double * coef, int half, double pos, float mscale, bool neox, float * cs, float * sn) {
    const __m512d vp = _mm512_set1_pd(pos);
    const __m512  ms = _mm512_set1_ps(mscale);
    for (int i = 0; i < half; i += 16) {
        const int       left = half - i;
        const __mmask16 m    = tail_mask(left);
        const __m512d   t0   = _mm512_mul_pd(vp, _mm512_maskz_loadu_pd((__mmask8) (m & 0xFF), coef + i));
        const __m512d   t1   = _mm512_mul_pd(vp, _mm512_maskz_loadu_pd((__mmask8) (m >> 8), coef + i + 8));
        __m512          s, c;
        sincos16(t0, t1, s, c);
        s = _mm512_mul_ps(s, ms);
        c = _mm512_mul_ps(c, ms);
        if (neox) {
            store(cs + i, c, m);
            store(sn + i, s, m);
        } else {
            // interleave: cs[2i] = cs[2i+1] = c_i; sn[2i] = -s_i, sn[2i+1] = s_i
            const __m512i lo_idx = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
            const __m512i hi_idx = _mm512_set_epi32(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
            const __m512i neg_ev = _mm512_set_epi32(0, (int) 0x80000000u, 0, (int) 0x80000000u, 0, (int) 0x80000000u, 0,
                                                    (int) 0x80000000u, 0, (int) 0x80000000u, 0, (int) 0x80000000u, 0,
                                                    (int) 0x80000000u, 0, (int) 0x80000000u);
            const __m512    c_lo = _mm512_permutexvar_ps(lo_idx, c), c_hi = _mm512_permutexvar_ps(hi_idx, c);
            const __m512    s_lo = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_permutexvar_ps(lo_idx, s)), neg_ev));
            const __m512    s_hi = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_permutexvar_ps(hi_idx, s)), neg_ev));
            const __mmask16 m_lo = tail_mask(2 * (int64_t) left);
            const __mmask16 m_hi = tail_mask(2 * (int64_t) left - 16 > 0 ? 2 * (int64_t) left - 16 : 0);
            store(cs + 2 * i, c_lo, m_lo);
            store(sn + 2 * i, s_lo, m_lo);
            if (m_hi) {
                store(cs + 2 * i + 16, c_hi, m_hi);
                store(sn + 2 * i + 16, s_hi, m_hi);
            }
        }
    }
}

void ggml_avx512_rope_row(const float * x, float * y, int64_t ne0, int n_offs, int n_dims, bool neox, const float * cs,
                          const float * sn) {
    const float * xr = x + n_offs;
    float *       yr = y + n_offs;
    if (neox) {
        const int half = n_dims / 2;
        for (int i = 0; i < half; i += 16) {
            const __mmask16 m  = tail_mask(half - i);
            const __m512    x0 = load(xr + i, m), x1 = load(xr + half + i, m);
            const __m512    c = load(cs + i, m), s = load(sn + i, m);
            store(yr + i, _mm512_fmsub_ps(x0, c, _mm512_mul_ps(x1, s)), m);
            store(yr + half + i, _mm512_fmadd_ps(x0, s, _mm512_mul_ps(x1, c)), m);
        }
    } else {
        // pairs (2i, 2i+1): y = x * cos + swap(x) * (-sin, +sin)
        for (int i = 0; i < n_dims; i += 16) {
            const __mmask16 m  = tail_mask(n_dims - i);
            const __m512    v  = load(xr + i, m);
            const __m512    sw = _mm512_permute_ps(v, 0xB1);
            store(yr + i, _mm512_fmadd_ps(sw, load(sn + i, m), _mm512_mul_ps(v, load(cs + i, m))), m);
        }
    }
    if (x != y) {
        for (int64_t i = 0; i < n_offs; ++i) y[i] = x[i];
        for (int64_t i = n_offs + n_dims; i < ne0; ++i) y[i] = x[i];
    }
}

#else

void ggml_avx512_rms_norm_row(const float *, float *, int64_t, float) { GGML_ABORT("no AVX-512 build"); }
void ggml_avx512_norm_row(const float *, float *, int64_t, float) { GGML_ABORT("no AVX-512 build"); }
void ggml_avx512_soft_max_row(const float *, float *, float *, int64_t, float, const void *, bool, float, float) {
    GGML_ABORT("no AVX-512 build");
}
void ggml_avx512_rope_cache(const double *, int, double, float, bool, float *, float *) { GGML_ABORT("no AVX-512 build"); }
void ggml_avx512_rope_row(const float *, float *, int64_t, int, int, bool, const float *, const float *) {
    GGML_ABORT("no AVX-512 build");
}

#endif
