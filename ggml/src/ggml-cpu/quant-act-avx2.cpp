// quant-act-avx2.cpp — the activation quantizers of quantized MUL_MAT with AVX2 (+ F16C for the
// block scales), bit-identical to the references in ggml-quants.cpp (interface and contract:
// quant-act-fast.h). The same float operations in the same order per element as the references
// (and as quant-act-avx512.cpp, whose notes on each rule apply here):
//  - the NaN-ignoring maximum of |x|: _mm256_max_ps(v, acc) returns acc when v is NaN, as
//    std::max(amax, NaN) keeps amax; max is exact, so the lane order of the reduction is free;
//  - Q8_0 / Q8_1: std::round (half away from zero) = trunc(v) + sign(v) where |v - trunc(v)| >= 0.5
//    (the difference is exact in F32), clamped to [-128, 127], 0 for a non-finite product;
//  - Q8_K: ties-to-even rounding clamped to [-128, 127], NaN -> 0 (the reference's nearest_int
//    saturates huge values to +-4194303 first, which the clamp maps to the same +-128 / 127).
// Compiled for AVX2 with a target pragma: a GGML_NATIVE=OFF (baseline x86-64) build still has
// these, and they run only when the active level (cpu-isa.h) allows avx2.

#include "quant-act-fast.h"

#if defined(__x86_64__) && defined(__GNUC__)

#include "formats/ggml-common.h"
#include "cpu-isa.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace {

inline __m256 abs_ps(__m256 v) { return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }

inline float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m        = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m        = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

inline int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s         = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s         = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

// NaN-ignoring maximum of |x[0..n)| (n a multiple of 8)
inline float amax_of(const float * x, int n) {
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) acc = _mm256_max_ps(abs_ps(_mm256_loadu_ps(x + i)), acc);
    return hmax(acc);
}

// round_to_i8 of 8 products, as int32 lanes
inline __m256i round_away_clamped(__m256 v) {
    const __m256 t    = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 half = _mm256_cmp_ps(abs_ps(_mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 sgn  = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
    __m256       r    = _mm256_add_ps(t, _mm256_and_ps(half, sgn));
    // max(r, -128) with r NaN gives -128; the finiteness mask below zeroes that lane anyway
    r                 = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-128.0f)), _mm256_set1_ps(127.0f));
    const __m256 fin  = _mm256_cmp_ps(abs_ps(v), _mm256_set1_ps(INFINITY), _CMP_LT_OQ); // false: NaN, Inf
    return _mm256_cvtps_epi32(_mm256_and_ps(fin, r));
}

// nearest_int (ties to even) clamped to [-128, 127], NaN -> 0, of 8 products
inline __m256i round_even_clamped(__m256 v) {
    __m256 r         = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r                = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-128.0f)), _mm256_set1_ps(127.0f));
    const __m256 ord = _mm256_cmp_ps(v, v, _CMP_ORD_Q);
    return _mm256_cvtps_epi32(_mm256_and_ps(ord, r));
}

// 32 int32 lanes (each in [-128, 127]) -> 32 int8 in element order. packs works within 128-bit
// halves, so the packed dwords come out as (a0 b0 c0 d0 a1 b1 c1 d1) and vpermd restores the order.
inline __m256i pack_32(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b);
    const __m256i cd = _mm256_packs_epi32(c, d);
    const __m256i p  = _mm256_packs_epi16(ab, cd);
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// One Q8_0 / Q8_1 block of 32: *d = its scale (amax / 127, as the references divide), the 32 quants
// into qs; returns their sum
inline int q8_block(const float * x, float * d, int8_t * qs) {
    *d             = amax_of(x, 32) / 127;
    const __m256 s = _mm256_set1_ps(*d != 0.0f ? 1.0f / *d : 0.0f);
    __m256i      q[4];
    for (int i = 0; i < 4; ++i) q[i] = round_away_clamped(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), s));
    _mm256_storeu_si256((__m256i *) qs, pack_32(q[0], q[1], q[2], q[3]));
    return hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
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
        for (int i = 0; i < QK_K; i += 8) {
            const int m = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + i)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (m) {
                max = x[i + __builtin_ctz((unsigned) m)];
                break;
            }
        }
        const float  iscale = -127.f / max;
        const __m256 s      = _mm256_set1_ps(iscale);
        for (int j = 0; j < QK_K / 32; ++j) {
            __m256i q[4];
            for (int i = 0; i < 4; ++i) q[i] = round_even_clamped(_mm256_mul_ps(s, _mm256_loadu_ps(x + 32 * j + 8 * i)));
            _mm256_storeu_si256((__m256i *) (y[b].qs + 32 * j), pack_32(q[0], q[1], q[2], q[3]));
            y[b].bsums[2 * j]     = (int16_t) hsum_epi32(_mm256_add_epi32(q[0], q[1]));
            y[b].bsums[2 * j + 1] = (int16_t) hsum_epi32(_mm256_add_epi32(q[2], q[3]));
        }
        y[b].d = 1 / iscale;
    }
}

} // namespace

#pragma GCC pop_options

ggml_quantize_act_fn ggml_cpu_quantize_act_avx2(enum ggml_type vec_dot_type) {
    const ggml_cpu_features & f = ggml_cpu_active_features();
    if (!(f.avx2 && f.fma && f.f16c)) return nullptr;
    switch (vec_dot_type) {
        case GGML_TYPE_Q8_0: return quantize_q8_0;
        case GGML_TYPE_Q8_1: return quantize_q8_1;
        case GGML_TYPE_Q8_K: return quantize_q8_K;
        default: return nullptr;
    }
}

#else // not x86-64 GCC/Clang: the references run

ggml_quantize_act_fn ggml_cpu_quantize_act_avx2(enum ggml_type) { return nullptr; }

#endif
