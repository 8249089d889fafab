#pragma once

// rms-norm-cpu.h — the CPU backend's RMS_NORM rounding (ggml/src/ggml-cpu/ops-norm.cpp and
// ops-rows-avx512.cpp), reproduced bit for bit for the sd fusion rules that start with an
// RMS_NORM (rope.cpp, norm-quant.cpp). Include only from files compiled with
// -ffp-contract=off: every product below must round on its own.
//
// The backend has two row paths and they round differently:
//   AVX-512: sum of squares in double over 16 lanes, scale = float(1/sqrt(ss/n + eps)),
//            y = x * scale in float;
//   portable (no AVX-512, or ggml_backend_cpu_set_use_ref): sequential double sum,
//            scale kept in double, y = float(double(x) * scale).

#include "cpu-isa-service.h"
#include "ggml-cpu.h"

#include <cmath>
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
// GCC 12's AVX-512 headers seed some intrinsics with a self-initialized "undefined" vector and
// then warn about it at every inlining site; the warning says nothing about this code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace sd_cpu_rms {

// Whether the backend's RMS_NORM takes its AVX-512 row path: it does when the CPU has AVX-512
// F/BW/VL, FMA and F16C (x86-64 GCC/Clang builds), unless the backend was told to use the
// portable reference path (ggml_backend_cpu_set_use_ref; checked by the caller).
inline bool cpu_has_avx512_rms_path() {
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
    // the level the backend's RMS_NORM runs at (its row table, ggml-cpu/ops-fast.h)
    return sd_cpu::isa_can_use("avx512");
#else
    return false;
#endif
}

// Sum of squares in double, in the AVX-512 kernel's order: 16 lanes (element i goes to lane
// i % 16), lanes k and k+8 added, then the 8 lanes reduced as 4+4, 2+2, 1+1. Squares of floats
// are exact in double, so fused and unfused multiply-adds give the same sums.
inline double sum_sq_lanes16(const float * x, int64_t n) {
#if defined(__AVX512F__)
    // the same instructions as the backend's kernel (tail lanes load as zero and add nothing)
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
#else
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
#endif
}

// The row scale of one RMS_NORM row, in the representation the chosen path applies it in.
struct row_scale {
    bool   avx512; // apply as float x * f, else as float(double(x) * d)
    float  f;
    double d;
};

inline row_scale rms_row_scale(const float * x, int64_t n, float eps, bool avx512_semantics) {
    row_scale s{avx512_semantics, 0.0f, 0.0};
    if (avx512_semantics) {
        const double ss = sum_sq_lanes16(x, n);
        s.f             = (float) (1.0 / std::sqrt(ss / (double) n + (double) eps));
    } else {
        double acc = 0.0;
        for (int64_t i = 0; i < n; ++i) acc += (double) x[i] * (double) x[i];
        s.d = 1.0 / std::sqrt(acc / (double) n + (double) eps);
    }
    return s;
}

// y[i] = rms_norm(x)[i] * w[i], rounded like RMS_NORM followed by MUL.
inline void rms_norm_mul_row(const float * x, const float * w, float * y, int64_t n, float eps, bool avx512_semantics) {
    const row_scale s = rms_row_scale(x, n, eps, avx512_semantics);
    if (s.avx512) {
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
