#pragma once

// rms-norm-cpu.h — the CPU backend's RMS_NORM rounding (ggml/src/ggml-cpu/ops-norm.cpp and
// ops-rows-avx512.cpp), reproduced bit for bit for the sd fusion rules that start with an
// RMS_NORM (rope.cpp, norm-quant.cpp). Include only from files compiled with
// -ffp-contract=off: every product below must round on its own.
//
// The backend has two roundings of a row:
//   fast (its avx2, avx512 and neon row kernels, bit-identical to each other): sum of squares in double
//            over 16 lanes, scale = float(1/sqrt(ss/n + eps)), y = x * scale in float;
//   portable (level portable, or ggml_backend_cpu_set_use_ref): sequential double sum,
//            scale kept in double, y = float(double(x) * scale).
// The SIMD code below is chosen at run time (target attributes, the CPU service's level), so the
// file builds for baseline x86-64 and a GGML_CPU_ISA cap also caps it.

#include "cpu-isa-service.h"
#include "ggml-cpu.h"

#include <cmath>
#include <cstdint>

#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
#define SD_RMS_X86 1
#include <immintrin.h>
// GCC 12's AVX-512 headers seed some intrinsics with a self-initialized "undefined" vector and
// then warn about it at every inlining site; the warning says nothing about this code.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif
#if defined(__aarch64__)
#define SD_RMS_NEON 1
#include <arm_neon.h> // baseline ARMv8-A: used only when the service allows the neon level
#endif

namespace sd_cpu_rms {

// How the backend's RMS_NORM rounds a row, and which code here reproduces it. The three lanes16
// variants give the same bits (the SIMD ones only run faster); which one runs is chosen once per
// job by the CPU service's instruction-set level (GGML_CPU_ISA caps it), never by compile flags.
enum class rms_mode {
    portable,        // sequential double sum, scale in double, y = float(double(x) * scale)
    lanes16_scalar,  // the fast row kernels' rounding (below), in scalar code
    lanes16_avx2,    //   ... with AVX2 (four 4-lane double accumulators)
    lanes16_avx512,  //   ... with AVX-512 (the backend kernel's own instructions)
    lanes16_neon,    //   ... with NEON (eight 2-lane double accumulators, as ops-rows-neon.cpp)
};

// Whether the backend's RMS_NORM takes a fast row kernel: it does at every level from avx2 up and
// from neon up (ggml-cpu/ops-fast.h; the avx2, avx512 and neon kernels round identically), unless
// the backend was told to use the portable reference path (ggml_backend_cpu_set_use_ref; checked by
// the caller).
inline bool cpu_fast_rms_path() {
#if defined(SD_RMS_X86)
    return sd_cpu::isa_can_use("avx2");
#elif defined(SD_RMS_NEON)
    return sd_cpu::isa_can_use("neon");
#else
    return false;
#endif
}

// The mode for a job: the backend's rounding (fast path or not), done by the best code allowed now.
inline rms_mode choose_rms_mode(bool fast_path) {
    if (!fast_path) return rms_mode::portable;
#if defined(SD_RMS_X86)
    if (sd_cpu::isa_can_use("avx512")) return rms_mode::lanes16_avx512;
    if (sd_cpu::isa_can_use("avx2")) return rms_mode::lanes16_avx2;
#endif
#if defined(SD_RMS_NEON)
    if (sd_cpu::isa_can_use("neon")) return rms_mode::lanes16_neon;
#endif
    return rms_mode::lanes16_scalar;
}

// Sum of squares in double, in the fast kernels' order: 16 lanes (element i goes to lane i % 16),
// lanes k and k+8 added, then the 8 lanes reduced as 4+4, 2+2, 1+1. Squares of floats are exact
// in double, so fused and unfused multiply-adds give the same sums.
inline double sum_sq_lanes16_scalar(const float * x, int64_t n) {
    double  lane[16] = {0};
    int64_t i        = 0;
    for (; i + 16 <= n; i += 16) {
        for (int k = 0; k < 16; ++k) lane[k] += (double) x[i + k] * (double) x[i + k];
    }
    for (int k = 0; i + k < n; ++k) lane[k] += (double) x[i + k] * (double) x[i + k];
    double c[8], t3[4];
    for (int k = 0; k < 8; ++k) c[k] = lane[k] + lane[k + 8];
    for (int k = 0; k < 4; ++k) t3[k] = c[k + 4] + c[k];
    const double t60 = t3[2] + t3[0];
    const double t61 = t3[3] + t3[1];
    return t60 + t61;
}

#if defined(SD_RMS_X86)
// the backend's AVX-512 instructions (tail lanes load as zero and add nothing)
__attribute__((target("avx512f"))) inline double sum_sq_lanes16_avx512(const float * x, int64_t n) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m  = (__mmask16) (n - i >= 16 ? 0xFFFF : ((1u << (n - i)) - 1));
        const __m512    v  = _mm512_maskz_loadu_ps(m, x + i);
        const __m512d   lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
        const __m512d   hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
        a0                 = _mm512_add_pd(a0, _mm512_mul_pd(lo, lo));
        a1                 = _mm512_add_pd(a1, _mm512_mul_pd(hi, hi));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
}

// lanes 0-3, 4-7, 8-11, 12-15 of the 16 in a0..a3; tail lanes load as zero and add nothing
__attribute__((target("avx2"))) inline double sum_sq_lanes16_avx2(const float * x, int64_t n) {
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd(), a2 = _mm256_setzero_pd(), a3 = _mm256_setzero_pd();
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int64_t i = 0; i < n; i += 16) {
        __m256 u, v;
        if (n - i >= 16) {
            u = _mm256_loadu_ps(x + i);
            v = _mm256_loadu_ps(x + i + 8);
        } else {
            const int left = (int) (n - i);
            u = _mm256_maskload_ps(x + i, _mm256_cmpgt_epi32(_mm256_set1_epi32(left), idx));
            v = _mm256_maskload_ps(x + i + 8, _mm256_cmpgt_epi32(_mm256_set1_epi32(left - 8), idx));
        }
        const __m256d u0 = _mm256_cvtps_pd(_mm256_castps256_ps128(u)), u1 = _mm256_cvtps_pd(_mm256_extractf128_ps(u, 1));
        const __m256d v0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), v1 = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        a0 = _mm256_add_pd(a0, _mm256_mul_pd(u0, u0));
        a1 = _mm256_add_pd(a1, _mm256_mul_pd(u1, u1));
        a2 = _mm256_add_pd(a2, _mm256_mul_pd(v0, v0));
        a3 = _mm256_add_pd(a3, _mm256_mul_pd(v1, v1));
    }
    // (lanes 4-7 + lanes 12-15) + (lanes 0-3 + lanes 8-11), then 2 + 2, then 1 + 1
    const __m256d t = _mm256_add_pd(_mm256_add_pd(a1, a3), _mm256_add_pd(a0, a2));
    const __m128d h = _mm_add_pd(_mm256_extractf128_pd(t, 1), _mm256_castpd256_pd128(t));
    return _mm_cvtsd_f64(h) + _mm_cvtsd_f64(_mm_unpackhi_pd(h, h));
}
#endif

#if defined(SD_RMS_NEON)
// a[k] holds lanes 2k, 2k+1 of the 16; tail lanes are zero and add nothing
inline double sum_sq_lanes16_neon(const float * x, int64_t n) {
    float64x2_t a[8];
    for (float64x2_t & v : a) v = vdupq_n_f64(0.0);
    for (int64_t i = 0; i < n; i += 16) {
        float         b[16];
        const float * p = x + i;
        if (n - i < 16) {
            for (int64_t k = 0; k < 16; ++k) b[k] = i + k < n ? x[i + k] : 0.0f;
            p = b;
        }
        for (int k = 0; k < 4; ++k) {
            const float32x4_t u = vld1q_f32(p + 4 * k);
            const float64x2_t l = vcvt_f64_f32(vget_low_f32(u)), h = vcvt_high_f64_f32(u);
            a[2 * k]            = vaddq_f64(a[2 * k], vmulq_f64(l, l));
            a[2 * k + 1]        = vaddq_f64(a[2 * k + 1], vmulq_f64(h, h));
        }
    }
    // lanes k + 8 added, the upper 4 onto the lower 4, then 2 + 2, then 1 + 1
    const float64x2_t c0 = vaddq_f64(a[0], a[4]), c1 = vaddq_f64(a[1], a[5]);
    const float64x2_t c2 = vaddq_f64(a[2], a[6]), c3 = vaddq_f64(a[3], a[7]);
    const float64x2_t h  = vaddq_f64(vaddq_f64(c3, c1), vaddq_f64(c2, c0));
    return vgetq_lane_f64(h, 0) + vgetq_lane_f64(h, 1);
}
#endif

inline double sum_sq_lanes16(const float * x, int64_t n, rms_mode mode) {
#if defined(SD_RMS_X86)
    if (mode == rms_mode::lanes16_avx512) return sum_sq_lanes16_avx512(x, n);
    if (mode == rms_mode::lanes16_avx2) return sum_sq_lanes16_avx2(x, n);
#elif defined(SD_RMS_NEON)
    if (mode == rms_mode::lanes16_neon) return sum_sq_lanes16_neon(x, n);
#else
    (void) mode;
#endif
    return sum_sq_lanes16_scalar(x, n);
}

// The row scale of one RMS_NORM row, in the representation the chosen path applies it in.
struct row_scale {
    bool   fast; // apply as float x * f (the fast kernels), else as float(double(x) * d)
    float  f;
    double d;
};

inline row_scale rms_row_scale(const float * x, int64_t n, float eps, rms_mode mode) {
    row_scale s{mode != rms_mode::portable, 0.0f, 0.0};
    if (s.fast) {
        const double ss = sum_sq_lanes16(x, n, mode);
        s.f             = (float) (1.0 / std::sqrt(ss / (double) n + (double) eps));
    } else {
        double acc = 0.0;
        for (int64_t i = 0; i < n; ++i) acc += (double) x[i] * (double) x[i];
        s.d = 1.0 / std::sqrt(acc / (double) n + (double) eps);
    }
    return s;
}

// y[i] = rms_norm(x)[i] * w[i], rounded like RMS_NORM followed by MUL.
inline void rms_norm_mul_row(const float * x, const float * w, float * y, int64_t n, float eps, rms_mode mode) {
    const row_scale s = rms_row_scale(x, n, eps, mode);
    if (s.fast) {
        for (int64_t i = 0; i < n; ++i) {
            const float r = x[i] * s.f;
            y[i]          = r * w[i];
        }
    } else {
        for (int64_t i = 0; i < n; ++i) {
            const float r = (float) ((double) x[i] * s.d);
            y[i]          = r * w[i];
        }
    }
}

} // namespace sd_cpu_rms
