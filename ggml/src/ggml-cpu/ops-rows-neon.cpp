// ops-rows-neon.cpp — the NEON level's row kernels for the normalisations (rms_norm, norm),
// soft_max and rope (cos/sin cache and rotation), and the NEON row-kernel table (ops-fast.h),
// whose elementwise entries live in ops-elementwise-neon.cpp.
//
// Same algorithms and precision as ops-rows-avx2.cpp, 4 lanes at a time:
//  * rms_norm rounds bit for bit like the AVX2 / AVX-512 kernels: the sd fusions (src/core/cpu/
//    rms-norm-cpu.h) reproduce one RMS_NORM rounding for every fast level. The AVX-512 kernel's
//    16-lane double sum is kept as eight 2-lane accumulators in the same lane order.
//  * rope_cache / rope_row use the same operations per lane as the x86 kernels (double angle
//    reduction, float polynomials, fmsub/fmadd rotation), so they give the same bits.
//  * norm and soft_max sum in the same precision (float partial sums of four vectors, widened
//    into double), grouped by 4-lane vectors, hence the same error bounds.

#include "ops-fast.h"

#if defined(__aarch64__)

#include <cmath>

#include "vec-neon-rows.h"

using namespace neon_rows;

namespace {

inline float64x2_t lo_pd(float32x4_t v) { return vcvt_f64_f32(vget_low_f32(v)); }
inline float64x2_t hi_pd(float32x4_t v) { return vcvt_high_f64_f32(v); }

} // namespace

// Sum of squares in double in the AVX-512 kernel's lane order: element i goes to lane i % 16 of
// its 16-lane accumulator, here eight 2-lane vectors a[0..7] (a[k] holds lanes 2k, 2k+1). Its
// reduction adds lanes k and k+8 (a[j] + a[j+4]), then the upper 4 onto the lower 4, then 2 + 2,
// then 1 + 1. Squares of floats are exact in double, so the FMA rounds like a multiply and an add.
void ggml_neon_rms_norm_row(const float * x, float * y, int64_t n, float eps) {
    float64x2_t a[8];
    for (float64x2_t & v : a) v = vdupq_n_f64(0.0);
    auto acc = [&](const float * p) {
        for (int k = 0; k < 4; ++k) {
            const float32x4_t u = vld1q_f32(p + 4 * k);
            const float64x2_t l = lo_pd(u), h = hi_pd(u);
            a[2 * k]     = vfmaq_f64(a[2 * k], l, l);
            a[2 * k + 1] = vfmaq_f64(a[2 * k + 1], h, h);
        }
    };
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) acc(x + i);
    if (i < n) { // lanes past the end are 0 and add +0, which changes no sum of squares
        float b[16] = {0};
        for (int64_t k = 0; i + k < n; ++k) b[k] = x[i + k];
        acc(b);
    }
    // c (lanes k + 8 added) as four 2-lane vectors, then t = c[4..7] + c[0..3]
    const float64x2_t c0 = vaddq_f64(a[0], a[4]), c1 = vaddq_f64(a[1], a[5]);
    const float64x2_t c2 = vaddq_f64(a[2], a[6]), c3 = vaddq_f64(a[3], a[7]);
    const float64x2_t t0 = vaddq_f64(c2, c0), t1 = vaddq_f64(c3, c1); // lanes 0-1, 2-3 of t
    const float64x2_t h  = vaddq_f64(t1, t0);                          // (t2 + t0, t3 + t1)
    const double      ss = vgetq_lane_f64(h, 0) + vgetq_lane_f64(h, 1);
    const float  scale = (float) (1.0 / std::sqrt(ss / (double) n + (double) eps));
    const float32x4_t vs = vdupq_n_f32(scale);
    i                    = 0;
    for (; i + 16 <= n; i += 16) {
        const float32x4_t r0 = vmulq_f32(vld1q_f32(x + i), vs), r1 = vmulq_f32(vld1q_f32(x + i + 4), vs);
        const float32x4_t r2 = vmulq_f32(vld1q_f32(x + i + 8), vs), r3 = vmulq_f32(vld1q_f32(x + i + 12), vs);
        vst1q_f32(y + i, r0);
        vst1q_f32(y + i + 4, r1);
        vst1q_f32(y + i + 8, r2);
        vst1q_f32(y + i + 12, r3);
    }
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(vld1q_f32(x + i), vs));
    if (i < n) store_part(y + i, vmulq_f32(load_part(x + i, n - i), vs), n - i);
}

// The x86 kernels' two passes (see ops-rows-avx512.cpp for why): statistics of d = x - x0 in
// float over 16-element blocks widened into double, then (x - mean) * s as a double-float FMA pair.
void ggml_neon_norm_row(const float * x, float * y, int64_t n, float eps) {
    const float32x4_t x0 = vdupq_n_f32(x[0]);
    float64x2_t       s0 = vdupq_n_f64(0.0), s1 = vdupq_n_f64(0.0);
    float64x2_t       q0 = vdupq_n_f64(0.0), q1 = vdupq_n_f64(0.0);
    auto flush = [&](float32x4_t s, float32x4_t q) {
        s0 = vaddq_f64(s0, lo_pd(s));
        s1 = vaddq_f64(s1, hi_pd(s));
        q0 = vaddq_f64(q0, lo_pd(q));
        q1 = vaddq_f64(q1, hi_pd(q));
    };
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const float32x4_t d0 = vsubq_f32(vld1q_f32(x + i), x0);
        const float32x4_t d1 = vsubq_f32(vld1q_f32(x + i + 4), x0);
        const float32x4_t d2 = vsubq_f32(vld1q_f32(x + i + 8), x0);
        const float32x4_t d3 = vsubq_f32(vld1q_f32(x + i + 12), x0);
        const float32x4_t sv = vaddq_f32(vaddq_f32(d0, d1), vaddq_f32(d2, d3));
        const float32x4_t qv = vaddq_f32(fmadd(d0, d0, vmulq_f32(d1, d1)), fmadd(d2, d2, vmulq_f32(d3, d3)));
        flush(sv, qv);
    }
    for (; i < n; i += 4) {
        const int64_t k = n - i < 4 ? n - i : 4;
        // lanes past the end: 0 (not 0 - x0)
        const uint32x4_t  live = vcltq_u32((uint32x4_t){0, 1, 2, 3}, vdupq_n_u32((uint32_t) k));
        const float32x4_t d    = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(vsubq_f32(load_part(x + i, k), x0)), live));
        flush(d, vmulq_f32(d, d));
    }
    const float64x2_t st  = vaddq_f64(s0, s1), qt = vaddq_f64(q0, q1);
    const double      md  = (vgetq_lane_f64(st, 0) + vgetq_lane_f64(st, 1)) / (double) n;
    const double      mq  = (vgetq_lane_f64(qt, 0) + vgetq_lane_f64(qt, 1)) / (double) n;
    const double      md2 = md * md;
    double            var = mq - md2;
    var                   = var > 0.0 ? var : 0.0;
    const double mean     = (double) x[0] + md;
    const double sc       = 1.0 / std::sqrt(var + (double) eps);
    const double c        = -mean * sc;
    const float  sh = (float) sc, sl = (float) (sc - (double) sh);
    const float  ch = (float) c, cl = (float) (c - (double) ch);
    const float32x4_t vsh = vdupq_n_f32(sh), vsl = vdupq_n_f32(sl), vch = vdupq_n_f32(ch), vcl = vdupq_n_f32(cl);
    auto out = [&](float32x4_t v) { return vaddq_f32(fmadd(v, vsh, vch), fmadd(v, vsl, vcl)); };
    i        = 0;
    for (; i + 8 <= n; i += 8) {
        const float32x4_t ra = out(vld1q_f32(x + i)), rb = out(vld1q_f32(x + i + 4));
        vst1q_f32(y + i, ra);
        vst1q_f32(y + i + 4, rb);
    }
    for (; i < n; i += 4) {
        const int64_t k = n - i < 4 ? n - i : 4;
        store_part(y + i, out(load_part(x + i, k)), k);
    }
}

void ggml_neon_soft_max_row(const float * x, float * y, float * tmp, int64_t n, float scale, const void * mask,
                            bool mask_f16, float slope, float sink) {
    const float32x4_t vscale = vdupq_n_f32(scale);
    const float32x4_t vslope = vdupq_n_f32(slope);
    float32x4_t       vmax   = vdupq_n_f32(-INFINITY);
    for (int64_t i = 0; i < n; i += 4) {
        const int64_t k = n - i < 4 ? n - i : 4;
        float32x4_t   v = vmulq_f32(load_part(x + i, k), vscale);
        if (mask) {
            const float32x4_t mv =
                mask_f16 ? f16_to_f32(load_part_h((const uint16_t *) mask + i, k)) : load_part((const float *) mask + i, k);
            v = vaddq_f32(v, vmulq_f32(vslope, mv));
        }
        store_part(tmp + i, v, k);
        // lanes past the end: -inf, so the max never sees the zero-filled tail
        const uint32x4_t live = vcltq_u32((uint32x4_t){0, 1, 2, 3}, vdupq_n_u32((uint32_t) k));
        vmax                  = vmaxq_f32(vmax, vbslq_f32(live, v, vdupq_n_f32(-INFINITY)));
    }
    float maxv = vmaxvq_f32(vmax);
    if (sink > maxv) maxv = sink;
    if (maxv == -INFINITY) {
        for (int64_t i = 0; i < n; ++i) y[i] = 0.0f;
        return;
    }
    const float32x4_t vm = vdupq_n_f32(maxv);
    float64x2_t       s0 = vdupq_n_f64(0.0), s1 = vdupq_n_f64(0.0);
    // four independent exp chains per iteration, added in float (four terms in (0, 1] per lane)
    // before being widened into the double sum, as in the x86 kernels
    auto widen = [&](float32x4_t s) {
        s0 = vaddq_f64(s0, lo_pd(s));
        s1 = vaddq_f64(s1, hi_pd(s));
    };
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const float32x4_t e0 = v_exp(vsubq_f32(vld1q_f32(tmp + i), vm));
        const float32x4_t e1 = v_exp(vsubq_f32(vld1q_f32(tmp + i + 4), vm));
        const float32x4_t e2 = v_exp(vsubq_f32(vld1q_f32(tmp + i + 8), vm));
        const float32x4_t e3 = v_exp(vsubq_f32(vld1q_f32(tmp + i + 12), vm));
        vst1q_f32(tmp + i, e0);
        vst1q_f32(tmp + i + 4, e1);
        vst1q_f32(tmp + i + 8, e2);
        vst1q_f32(tmp + i + 12, e3);
        widen(vaddq_f32(vaddq_f32(e0, e1), vaddq_f32(e2, e3)));
    }
    for (; i < n; i += 4) {
        const int64_t    k    = n - i < 4 ? n - i : 4;
        const uint32x4_t live = vcltq_u32((uint32x4_t){0, 1, 2, 3}, vdupq_n_u32((uint32_t) k));
        // lanes past the end: exp(0 - max) would count, so they are zeroed
        const float32x4_t e =
            vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(v_exp(vsubq_f32(load_part(tmp + i, k), vm))), live));
        store_part(tmp + i, e, k);
        widen(e);
    }
    const float64x2_t st  = vaddq_f64(s0, s1);
    double            sum = vgetq_lane_f64(st, 0) + vgetq_lane_f64(st, 1);
    if (sink != -INFINITY) sum += std::exp((double) (sink - maxv));
    const float32x4_t inv = vdupq_n_f32((float) (1.0 / sum));
    i                     = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(vld1q_f32(tmp + i), inv));
    if (i < n) store_part(y + i, vmulq_f32(load_part(tmp + i, n - i), inv), n - i);
}

// ---------------------------------------------------------------------------------------------
// rope

namespace {

// sin and cos of r, |r| <= pi/4 (the x86 kernels' Taylor polynomials)
inline void sincos_small(float32x4_t r, float32x4_t & s, float32x4_t & c) {
    const float32x4_t z  = vmulq_f32(r, r);
    float32x4_t       ps = splat(-2.5052108385441720e-08f);
    ps                   = fmadd(ps, z, splat(2.7557319223985893e-06f));
    ps                   = fmadd(ps, z, splat(-1.9841269841269841e-04f));
    ps                   = fmadd(ps, z, splat(8.3333333333333333e-03f));
    ps                   = fmadd(ps, z, splat(-1.6666666666666667e-01f));
    s                    = fmadd(vmulq_f32(ps, z), r, r);
    float32x4_t pc       = splat(2.0876756987868099e-09f);
    pc                   = fmadd(pc, z, splat(-2.7557319223985891e-07f));
    pc                   = fmadd(pc, z, splat(2.4801587301587302e-05f));
    pc                   = fmadd(pc, z, splat(-1.3888888888888889e-03f));
    pc                   = fmadd(pc, z, splat(4.1666666666666667e-02f));
    pc                   = fmadd(pc, z, splat(-0.5f));
    c                    = fmadd(pc, z, splat(1.0f));
}

// sin/cos of 4 angles given in double (two halves): quadrant reduction in double, then float
inline void sincos4(float64x2_t t0, float64x2_t t1, float32x4_t & s, float32x4_t & c) {
    const float64x2_t two_over_pi = vdupq_n_f64(0.63661977236758134308);
    // pi/2 in two parts: the first has 33 significant bits, so k * hi is exact for |k| < 2^20
    const float64x2_t pio2_hi = vdupq_n_f64(1.5707963267341256141662597656e+00);
    const float64x2_t pio2_lo = vdupq_n_f64(6.0771005065061922e-11);
    const float64x2_t k0      = vrndnq_f64(vmulq_f64(t0, two_over_pi));
    const float64x2_t k1      = vrndnq_f64(vmulq_f64(t1, two_over_pi));
    // t - k*hi - k*lo, each step fused (x86 fnmadd)
    const float64x2_t r0 = vfmsq_f64(vfmsq_f64(t0, k0, pio2_hi), k0, pio2_lo);
    const float64x2_t r1 = vfmsq_f64(vfmsq_f64(t1, k1, pio2_hi), k1, pio2_lo);
    // double -> float rounds to nearest even (FCVTN under the default FPCR, cvtpd_ps under MXCSR)
    const float32x4_t r = vcvt_high_f32_f64(vcvt_f32_f64(r0), r1);
    // k is integral: the conversion is exact, then narrowed to 32 bits like cvtpd_epi32
    const int32x4_t q = vcombine_s32(vmovn_s64(vcvtnq_s64_f64(k0)), vmovn_s64(vcvtnq_s64_f64(k1)));
    float32x4_t     sr, cr;
    sincos_small(r, sr, cr);
    // quadrant q: (sin, cos) = (s, c), (c, -s), (-s, -c), (-c, s)
    const int32x4_t  one  = vdupq_n_s32(1), two = vdupq_n_s32(2);
    const uint32x4_t swap = vceqq_s32(vandq_s32(q, one), one);
    const float32x4_t s1  = vbslq_f32(swap, cr, sr);
    const float32x4_t c1  = vbslq_f32(swap, sr, cr);
    // bit 1 of q (of q + 1 for the cosine), moved to the sign bit
    const uint32x4_t sneg = vreinterpretq_u32_s32(vshlq_n_s32(vandq_s32(q, two), 30));
    const uint32x4_t cneg = vreinterpretq_u32_s32(vshlq_n_s32(vandq_s32(vaddq_s32(q, one), two), 30));
    s = vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(s1), sneg));
    c = vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(c1), cneg));
}

} // namespace

void ggml_neon_rope_cache(const double * coef, int half, double pos, float mscale, bool neox, float * cs, float * sn) {
    const float64x2_t vp = vdupq_n_f64(pos);
    const float32x4_t ms = vdupq_n_f32(mscale);
    // sn[2i] = -sin_i, sn[2i+1] = +sin_i in the interleaved layout
    const uint32x4_t neg_even = {0x80000000u, 0u, 0x80000000u, 0u};
    for (int i = 0; i < half; i += 4) {
        const int   left = half - i < 4 ? half - i : 4;
        double      cb[4] = {0.0, 0.0, 0.0, 0.0}; // angles past the end: coefficient 0, never stored
        for (int k = 0; k < left; ++k) cb[k] = coef[i + k];
        const float64x2_t t0 = vmulq_f64(vp, vld1q_f64(cb));
        const float64x2_t t1 = vmulq_f64(vp, vld1q_f64(cb + 2));
        float32x4_t       s, c;
        sincos4(t0, t1, s, c);
        s = vmulq_f32(s, ms);
        c = vmulq_f32(c, ms);
        if (neox) {
            if (left == 4) {
                vst1q_f32(cs + i, c);
                vst1q_f32(sn + i, s);
            } else {
                store_part(cs + i, c, left);
                store_part(sn + i, s, left);
            }
        } else {
            // {c0 c0 c1 c1}, {c2 c2 c3 c3}; the sines with the even lanes negated
            const float32x4x2_t cc = vzipq_f32(c, c), ss = vzipq_f32(s, s);
            const float32x4_t   s_lo = vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(ss.val[0]), neg_even));
            const float32x4_t   s_hi = vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(ss.val[1]), neg_even));
            const int64_t       n2   = 2 * (int64_t) left; // floats of the interleaved cache still to write
            if (n2 == 8) {
                vst1q_f32(cs + 2 * i, cc.val[0]);
                vst1q_f32(cs + 2 * i + 4, cc.val[1]);
                vst1q_f32(sn + 2 * i, s_lo);
                vst1q_f32(sn + 2 * i + 4, s_hi);
            } else {
                store_part(cs + 2 * i, cc.val[0], n2 < 4 ? n2 : 4);
                store_part(sn + 2 * i, s_lo, n2 < 4 ? n2 : 4);
                if (n2 > 4) {
                    store_part(cs + 2 * i + 4, cc.val[1], n2 - 4);
                    store_part(sn + 2 * i + 4, s_hi, n2 - 4);
                }
            }
        }
    }
}

namespace {

// neox rotation of 4 pairs (x0[j], x1[j]): lo = x0 c - x1 s (fused like fmsub), hi = x0 s + x1 c
inline void rot_neox(float32x4_t x0, float32x4_t x1, float32x4_t c, float32x4_t s, float32x4_t & lo, float32x4_t & hi) {
    lo = fmsub(x0, c, vmulq_f32(x1, s));
    hi = fmadd(x0, s, vmulq_f32(x1, c));
}

// interleaved pairs: y = x * cos + swap(x) * (-sin, +sin)
inline float32x4_t rot_pairs(float32x4_t v, float32x4_t c, float32x4_t s) {
    return fmadd(vrev64q_f32(v), s, vmulq_f32(v, c));
}

} // namespace

void ggml_neon_rope_row(const float * x, float * y, int64_t ne0, int n_offs, int n_dims, bool neox, const float * cs,
                        const float * sn) {
    const float * xr = x + n_offs;
    float *       yr = y + n_offs;
    if (neox) {
        const int half = n_dims / 2;
        int       i    = 0;
        for (; i + 4 <= half; i += 4) {
            float32x4_t lo, hi;
            rot_neox(vld1q_f32(xr + i), vld1q_f32(xr + half + i), vld1q_f32(cs + i), vld1q_f32(sn + i), lo, hi);
            vst1q_f32(yr + i, lo);
            vst1q_f32(yr + half + i, hi);
        }
        if (i < half) {
            const int64_t k = half - i;
            float32x4_t   lo, hi;
            rot_neox(load_part(xr + i, k), load_part(xr + half + i, k), load_part(cs + i, k), load_part(sn + i, k), lo, hi);
            store_part(yr + i, lo, k);
            store_part(yr + half + i, hi, k);
        }
    } else {
        int i = 0;
        for (; i + 4 <= n_dims; i += 4) vst1q_f32(yr + i, rot_pairs(vld1q_f32(xr + i), vld1q_f32(cs + i), vld1q_f32(sn + i)));
        if (i < n_dims) {
            const int64_t k = n_dims - i; // whole pairs: 2
            store_part(yr + i, rot_pairs(load_part(xr + i, k), load_part(cs + i, k), load_part(sn + i, k)), k);
        }
    }
    if (x != y) {
        for (int64_t i = 0; i < n_offs; ++i) y[i] = x[i];
        for (int64_t i = n_offs + n_dims; i < ne0; ++i) y[i] = x[i];
    }
}

const ggml_cpu_row_kernels * ggml_cpu_row_kernels_neon(void) {
    static const ggml_cpu_row_kernels table = {
        "neon",
        ggml_neon_map_row,
        ggml_neon_glu_row,
        ggml_neon_binary_row,
        ggml_neon_f32_to_f16,
        ggml_neon_f16_to_f32,
        ggml_neon_f32_to_bf16,
        ggml_neon_bf16_to_f32,
        ggml_neon_rms_norm_row,
        ggml_neon_norm_row,
        ggml_neon_soft_max_row,
        ggml_neon_rope_cache,
        ggml_neon_rope_row,
    };
    return &table;
}

#else // not an AArch64 build: no NEON level

const ggml_cpu_row_kernels * ggml_cpu_row_kernels_neon(void) { return nullptr; }

#endif
