// ops-elementwise-avx2.cpp — AVX2 row kernels behind the elementwise fast paths: maps (scale,
// unary activations), GLU, binary arithmetic and F32 <-> F16/BF16 conversion. The 8-lane
// counterparts of ops-elementwise-avx512.cpp, with the same rounding: arithmetic ops round like the
// portable loops (one IEEE operation per element), transcendental ones come from vec-avx2.h (the
// same bits as the AVX-512 kernels), conversions are bit-identical to the scalar ones.
//
// Tails use masked loads/stores (vmaskmovps) or, for the 16-bit side of a conversion, a small
// buffer, so any n (1 included) runs without a scalar loop.

#include "ops-fast.h"

#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)

#include "vec-avx2.h" // last: switches the rest of this file to the AVX2 target

using namespace avx2;

namespace {

// Four vectors per iteration: the transcendental maps are long dependency chains, and four
// independent ones keep both FMA pipes busy; the memory-bound ones lose nothing by it.
template <typename F>
inline void map_loop(const float * x, float * y, int64_t n, F f) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256 a = f(_mm256_loadu_ps(x + i));
        const __m256 b = f(_mm256_loadu_ps(x + i + 8));
        const __m256 c = f(_mm256_loadu_ps(x + i + 16));
        const __m256 d = f(_mm256_loadu_ps(x + i + 24));
        _mm256_storeu_ps(y + i, a);
        _mm256_storeu_ps(y + i + 8, b);
        _mm256_storeu_ps(y + i + 16, c);
        _mm256_storeu_ps(y + i + 24, d);
    }
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));
    if (i < n) {
        const __m256i m = tail_mask(n - i);
        store(y + i, f(load(x + i, m)), m);
    }
}

template <typename F>
inline void glu_loop(const float * x, const float * g, float * y, int64_t n, F f) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256 a = _mm256_mul_ps(f(_mm256_loadu_ps(x + i)), _mm256_loadu_ps(g + i));
        const __m256 b = _mm256_mul_ps(f(_mm256_loadu_ps(x + i + 8)), _mm256_loadu_ps(g + i + 8));
        const __m256 c = _mm256_mul_ps(f(_mm256_loadu_ps(x + i + 16)), _mm256_loadu_ps(g + i + 16));
        const __m256 d = _mm256_mul_ps(f(_mm256_loadu_ps(x + i + 24)), _mm256_loadu_ps(g + i + 24));
        _mm256_storeu_ps(y + i, a);
        _mm256_storeu_ps(y + i + 8, b);
        _mm256_storeu_ps(y + i + 16, c);
        _mm256_storeu_ps(y + i + 24, d);
    }
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(f(_mm256_loadu_ps(x + i)), _mm256_loadu_ps(g + i)));
    if (i < n) {
        const __m256i m = tail_mask(n - i);
        store(y + i, _mm256_mul_ps(f(load(x + i, m)), load(g + i, m)), m);
    }
}

template <typename F>
inline void bin_loop(const float * a, const float * b, float * d, int64_t n, bool b_scalar, F f) {
    if (b_scalar) {
        const __m256 bv = _mm256_set1_ps(b[0]);
        map_loop(a, d, n, [&](__m256 v) { return f(v, bv); });
        return;
    }
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256 r0 = f(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
        const __m256 r1 = f(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8));
        const __m256 r2 = f(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16));
        const __m256 r3 = f(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24));
        _mm256_storeu_ps(d + i, r0);
        _mm256_storeu_ps(d + i + 8, r1);
        _mm256_storeu_ps(d + i + 16, r2);
        _mm256_storeu_ps(d + i + 24, r3);
    }
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, f(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    if (i < n) {
        const __m256i m = tail_mask(n - i);
        store(d + i, f(load(a + i, m), load(b + i, m)), m);
    }
}

// x > 0 ? x : 0 (NaN -> 0, -0 -> 0, like the portable relu)
inline __m256 relu(__m256 v) { return _mm256_and_ps(v, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ)); }

} // namespace

void ggml_avx2_map_row(ggml_fast_map op, const float * x, float * y, int64_t n, float a, float b) {
    const __m256 av = _mm256_set1_ps(a);
    const __m256 bv = _mm256_set1_ps(b);
    switch (op) {
        case ggml_fast_map::scale: map_loop(x, y, n, [&](__m256 v) { return _mm256_mul_ps(av, v); }); break;
        // s*x + b rounded twice, as the portable kernel does (no FMA contraction)
        case ggml_fast_map::scale_bias:
            map_loop(x, y, n, [&](__m256 v) { return _mm256_add_ps(_mm256_mul_ps(av, v), bv); });
            break;
        case ggml_fast_map::sqr: map_loop(x, y, n, [](__m256 v) { return _mm256_mul_ps(v, v); }); break;
        case ggml_fast_map::sqrt: map_loop(x, y, n, [](__m256 v) { return _mm256_sqrt_ps(v); }); break;
        case ggml_fast_map::silu: map_loop(x, y, n, [](__m256 v) { return v_silu(v); }); break;
        case ggml_fast_map::gelu: map_loop(x, y, n, [](__m256 v) { return v_gelu(v); }); break;
        case ggml_fast_map::gelu_erf: map_loop(x, y, n, [](__m256 v) { return v_gelu_erf(v); }); break;
        case ggml_fast_map::gelu_quick: map_loop(x, y, n, [](__m256 v) { return v_gelu_quick(v); }); break;
        case ggml_fast_map::sigmoid: map_loop(x, y, n, [](__m256 v) { return v_sigmoid(v); }); break;
        case ggml_fast_map::tanh: map_loop(x, y, n, [](__m256 v) { return v_tanh(v); }); break;
        case ggml_fast_map::exp: map_loop(x, y, n, [](__m256 v) { return v_exp(v); }); break;
        case ggml_fast_map::relu: map_loop(x, y, n, [](__m256 v) { return relu(v); }); break;
        case ggml_fast_map::neg: map_loop(x, y, n, [](__m256 v) { return _mm256_xor_ps(v, _mm256_set1_ps(-0.0f)); }); break;
        case ggml_fast_map::abs: map_loop(x, y, n, [](__m256 v) { return v_abs(v); }); break;
    }
}

void ggml_avx2_glu_row(ggml_fast_glu op, const float * x, const float * g, float * y, int64_t n) {
    switch (op) {
        case ggml_fast_glu::reglu: glu_loop(x, g, y, n, [](__m256 v) { return relu(v); }); break;
        case ggml_fast_glu::geglu: glu_loop(x, g, y, n, [](__m256 v) { return v_gelu(v); }); break;
        case ggml_fast_glu::swiglu: glu_loop(x, g, y, n, [](__m256 v) { return v_silu(v); }); break;
        case ggml_fast_glu::geglu_erf: glu_loop(x, g, y, n, [](__m256 v) { return v_gelu_erf(v); }); break;
        case ggml_fast_glu::geglu_quick: glu_loop(x, g, y, n, [](__m256 v) { return v_gelu_quick(v); }); break;
    }
}

void ggml_avx2_binary_row(ggml_fast_bin op, const float * a, const float * b, float * d, int64_t n, bool b_scalar) {
    switch (op) {
        case ggml_fast_bin::add: bin_loop(a, b, d, n, b_scalar, [](__m256 u, __m256 v) { return _mm256_add_ps(u, v); }); break;
        case ggml_fast_bin::sub: bin_loop(a, b, d, n, b_scalar, [](__m256 u, __m256 v) { return _mm256_sub_ps(u, v); }); break;
        case ggml_fast_bin::mul: bin_loop(a, b, d, n, b_scalar, [](__m256 u, __m256 v) { return _mm256_mul_ps(u, v); }); break;
        case ggml_fast_bin::div: bin_loop(a, b, d, n, b_scalar, [](__m256 u, __m256 v) { return _mm256_div_ps(u, v); }); break;
    }
}

void ggml_avx2_f32_to_f16(const float * x, uint16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m128i h0 = f32_to_f16(_mm256_loadu_ps(x + i));
        const __m128i h1 = f32_to_f16(_mm256_loadu_ps(x + i + 8));
        _mm_storeu_si128((__m128i *) (y + i), h0);
        _mm_storeu_si128((__m128i *) (y + i + 8), h1);
    }
    for (; i < n; i += 8) store_h(y + i, f32_to_f16(load(x + i, tail_mask(n - i))), n - i);
}

void ggml_avx2_f16_to_f32(const uint16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 f0 = f16_to_f32(_mm_loadu_si128((const __m128i *) (x + i)));
        const __m256 f1 = f16_to_f32(_mm_loadu_si128((const __m128i *) (x + i + 8)));
        _mm256_storeu_ps(y + i, f0);
        _mm256_storeu_ps(y + i + 8, f1);
    }
    for (; i < n; i += 8) store(y + i, f16_to_f32(load_h(x + i, n - i)), tail_mask(n - i));
}

void ggml_avx2_f32_to_bf16(const float * x, uint16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        // one 256-bit pack for 16 values: packus interleaves the 128-bit halves, permute restores order
        const __m256i a = f32_to_bf16_32(_mm256_loadu_ps(x + i));
        const __m256i b = f32_to_bf16_32(_mm256_loadu_ps(x + i + 8));
        _mm256_storeu_si256((__m256i *) (y + i), _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8));
    }
    for (; i < n; i += 8) store_h(y + i, f32_to_bf16(load(x + i, tail_mask(n - i))), n - i);
}

void ggml_avx2_bf16_to_f32(const uint16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 f0 = bf16_to_f32(_mm_loadu_si128((const __m128i *) (x + i)));
        const __m256 f1 = bf16_to_f32(_mm_loadu_si128((const __m128i *) (x + i + 8)));
        _mm256_storeu_ps(y + i, f0);
        _mm256_storeu_ps(y + i + 8, f1);
    }
    for (; i < n; i += 8) store(y + i, bf16_to_f32(load_h(x + i, n - i)), tail_mask(n - i));
}

#else // not an x86-64 GCC/Clang build: the AVX2 table is nullptr there, so these never run

void ggml_avx2_map_row(ggml_fast_map, const float *, float *, int64_t, float, float) { GGML_ABORT("no AVX2 build"); }
void ggml_avx2_glu_row(ggml_fast_glu, const float *, const float *, float *, int64_t) { GGML_ABORT("no AVX2 build"); }
void ggml_avx2_binary_row(ggml_fast_bin, const float *, const float *, float *, int64_t, bool) { GGML_ABORT("no AVX2 build"); }
void ggml_avx2_f32_to_f16(const float *, uint16_t *, int64_t) { GGML_ABORT("no AVX2 build"); }
void ggml_avx2_f16_to_f32(const uint16_t *, float *, int64_t) { GGML_ABORT("no AVX2 build"); }
void ggml_avx2_f32_to_bf16(const float *, uint16_t *, int64_t) { GGML_ABORT("no AVX2 build"); }
void ggml_avx2_bf16_to_f32(const uint16_t *, float *, int64_t) { GGML_ABORT("no AVX2 build"); }

#endif
