// quant-act-avx512.cpp — the activation quantizers of quantized MUL_MAT with AVX-512, bit-identical
// to the references in ggml-quants.cpp (interface and contract: quant-act-fast.h).
//
// Per element the references compute, in this order: |x| folded into a running maximum that
// ignores NaN (std::max(amax, NaN) keeps amax; _mm512_max_ps(v, acc) keeps acc for a NaN v), one
// scalar scale per block, the product x * id (or iscale * x), and a rounding:
//  - Q8_0 / Q8_1: round_to_i8 = std::round (half away from zero), clamp to [-128, 127], 0 for a
//    non-finite product. Half away from zero is trunc(v) + sign(v) where |v - trunc(v)| >= 0.5
//    (v - trunc(v) is exact in F32).
//  - Q8_K: nearest_int (ties to even, as _MM_FROUND_TO_NEAREST_INT) clamped to [-128, 127], NaN 0.
// The block scales go through the same scalar code (ggml_fp32_to_fp16, the same divisions).

#include "quant-act-fast.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include "formats/ggml-common.h"
#include "cpu-isa.h"

// GCC 12's _mm512_reduce_* expansions read a never-initialized helper vector's lanes that the
// shuffles then discard: -Wmaybe-uninitialized at every use says nothing about this code
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cmath>
#include <cstring>

#pragma GCC push_options
#pragma GCC target("avx512f")

namespace {

inline __m512 abs_ps(__m512 v) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff))); }

// NaN-ignoring maximum of |x[0..n)| (n a multiple of 16), as the references' loops compute it
inline float amax_of(const float * x, int n) {
    __m512 acc = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) acc = _mm512_max_ps(abs_ps(_mm512_loadu_ps(x + i)), acc);
    return _mm512_reduce_max_ps(acc);
}

// round_to_i8 of 16 products, as int32 lanes
inline __m512i round_away_clamped(__m512 v) {
    const __m512    t    = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask16 half = _mm512_cmp_ps_mask(abs_ps(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __m512    sgn  = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(_mm512_set1_ps(1.0f)),
                                                               _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN))));
    __m512          r    = _mm512_mask_add_ps(t, half, t, sgn);
    r                    = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(-128.0f)), _mm512_set1_ps(127.0f));
    const __mmask16 fin  = _mm512_cmp_ps_mask(abs_ps(v), _mm512_set1_ps(INFINITY), _CMP_LT_OQ); // false: NaN, Inf
    return _mm512_cvtps_epi32(_mm512_maskz_mov_ps(fin, r));
}

// nearest_int (ties to even) clamped to [-128, 127], NaN -> 0, of 16 products
inline __m512i round_even_clamped(__m512 v) {
    __m512 r = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r        = _mm512_min_ps(_mm512_max_ps(r, _mm512_set1_ps(-128.0f)), _mm512_set1_ps(127.0f));
    const __mmask16 ord = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
    return _mm512_cvtps_epi32(_mm512_maskz_mov_ps(ord, r));
}

// One Q8_0 / Q8_1 block of 32: *d = its scale (amax / 127, as the references divide), the 32 quants
// into qs; returns their sum
inline int q8_block(const float * x, float * d, int8_t * qs) {
    *d                = amax_of(x, 32) / 127;
    const __m512  s   = _mm512_set1_ps(*d != 0.0f ? 1.0f / *d : 0.0f);
    const __m512i q0  = round_away_clamped(_mm512_mul_ps(_mm512_loadu_ps(x), s));
    const __m512i q1  = round_away_clamped(_mm512_mul_ps(_mm512_loadu_ps(x + 16), s));
    _mm_storeu_si128((__m128i *) qs, _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128((__m128i *) (qs + 16), _mm512_cvtepi32_epi8(q1));
    return _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
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
        for (int i = 0; i < QK_K; i += 16) {
            const __mmask16 m = _mm512_cmp_ps_mask(abs_ps(_mm512_loadu_ps(x + i)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (m) {
                max = x[i + __builtin_ctz((unsigned) m)];
                break;
            }
        }
        const float  iscale = -127.f / max;
        const __m512 s      = _mm512_set1_ps(iscale);
        for (int j = 0; j < QK_K / 16; ++j) {
            const __m512i q = round_even_clamped(_mm512_mul_ps(s, _mm512_loadu_ps(x + 16 * j)));
            _mm_storeu_si128((__m128i *) (y[b].qs + 16 * j), _mm512_cvtepi32_epi8(q));
            y[b].bsums[j] = (int16_t) _mm512_reduce_add_epi32(q);
        }
        y[b].d = 1 / iscale;
    }
}

} // namespace

#pragma GCC pop_options

ggml_quantize_act_fn ggml_cpu_quantize_act_avx512(enum ggml_type vec_dot_type) {
    if (!ggml_cpu_active_features().avx512f) return nullptr;
    switch (vec_dot_type) {
        case GGML_TYPE_Q8_0: return quantize_q8_0;
        case GGML_TYPE_Q8_1: return quantize_q8_1;
        case GGML_TYPE_Q8_K: return quantize_q8_K;
        default: return nullptr;
    }
}

#else // not x86-64 GCC/Clang: the references run

ggml_quantize_act_fn ggml_cpu_quantize_act_avx512(enum ggml_type) { return nullptr; }

#endif
