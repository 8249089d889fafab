// ops-elementwise-avx512.cpp — AVX-512 row kernels behind the elementwise fast paths: maps
// (scale, unary activations), GLU, binary arithmetic and F32 <-> F16/BF16 conversion.
//
// Each works on one packed row; tails use masked loads/stores, so any n (including 1) is handled
// without a scalar loop. Arithmetic ops round exactly like the portable loops (one IEEE operation
// per element); transcendental ones use vec-avx512.h (accuracy stated there).

#include "ops-fast.h"

#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)

#include "vec-avx512.h" // last: switches the rest of this file to the AVX-512 target

using namespace avx512;

namespace {

// Four vectors per iteration: the transcendental maps are long dependency chains, and four
// independent ones keep both FMA pipes busy.
template <typename F>
inline void map_loop(const float * x, float * y, int64_t n, F f) {
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512 a = f(_mm512_loadu_ps(x + i));
        const __m512 b = f(_mm512_loadu_ps(x + i + 16));
        const __m512 c = f(_mm512_loadu_ps(x + i + 32));
        const __m512 d = f(_mm512_loadu_ps(x + i + 48));
        _mm512_storeu_ps(y + i, a);
        _mm512_storeu_ps(y + i + 16, b);
        _mm512_storeu_ps(y + i + 32, c);
        _mm512_storeu_ps(y + i + 48, d);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        store(y + i, f(load(x + i, m)), m);
    }
}

// four vectors per iteration, like map_loop: the gates are the same long chains
template <typename F>
inline void glu_loop(const float * x, const float * g, float * y, int64_t n, F f) {
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512 a = _mm512_mul_ps(f(_mm512_loadu_ps(x + i)), _mm512_loadu_ps(g + i));
        const __m512 b = _mm512_mul_ps(f(_mm512_loadu_ps(x + i + 16)), _mm512_loadu_ps(g + i + 16));
        const __m512 c = _mm512_mul_ps(f(_mm512_loadu_ps(x + i + 32)), _mm512_loadu_ps(g + i + 32));
        const __m512 d = _mm512_mul_ps(f(_mm512_loadu_ps(x + i + 48)), _mm512_loadu_ps(g + i + 48));
        _mm512_storeu_ps(y + i, a);
        _mm512_storeu_ps(y + i + 16, b);
        _mm512_storeu_ps(y + i + 32, c);
        _mm512_storeu_ps(y + i + 48, d);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        store(y + i, _mm512_mul_ps(f(load(x + i, m)), load(g + i, m)), m);
    }
}

template <typename F>
inline void bin_loop(const float * a, const float * b, float * d, int64_t n, bool b_scalar, F f) {
    if (b_scalar) {
        const __m512 bv = _mm512_set1_ps(b[0]);
        map_loop(a, d, n, [&](__m512 v) { return f(v, bv); });
        return;
    }
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 r0 = f(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i));
        const __m512 r1 = f(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16));
        _mm512_storeu_ps(d + i, r0);
        _mm512_storeu_ps(d + i + 16, r1);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        store(d + i, f(load(a + i, m), load(b + i, m)), m);
    }
}

} // namespace

void ggml_avx512_map_row(ggml_fast_map op, const float * x, float * y, int64_t n, float a, float b) {
    const __m512 av = _mm512_set1_ps(a);
    const __m512 bv = _mm512_set1_ps(b);
    switch (op) {
        case ggml_fast_map::scale: map_loop(x, y, n, [&](__m512 v) { return _mm512_mul_ps(av, v); }); break;
        // s*x + b rounded twice, as the portable kernel does (no FMA contraction)
        case ggml_fast_map::scale_bias:
            map_loop(x, y, n, [&](__m512 v) { return _mm512_add_ps(_mm512_mul_ps(av, v), bv); });
            break;
        case ggml_fast_map::sqr: map_loop(x, y, n, [](__m512 v) { return _mm512_mul_ps(v, v); }); break;
        case ggml_fast_map::sqrt: map_loop(x, y, n, [](__m512 v) { return _mm512_sqrt_ps(v); }); break;
        case ggml_fast_map::silu: map_loop(x, y, n, [](__m512 v) { return v_silu(v); }); break;
        case ggml_fast_map::gelu: map_loop(x, y, n, [](__m512 v) { return v_gelu(v); }); break;
        case ggml_fast_map::gelu_erf: map_loop(x, y, n, [](__m512 v) { return v_gelu_erf(v); }); break;
        case ggml_fast_map::gelu_quick: map_loop(x, y, n, [](__m512 v) { return v_gelu_quick(v); }); break;
        case ggml_fast_map::sigmoid: map_loop(x, y, n, [](__m512 v) { return v_sigmoid(v); }); break;
        case ggml_fast_map::tanh: map_loop(x, y, n, [](__m512 v) { return v_tanh(v); }); break;
        case ggml_fast_map::exp: map_loop(x, y, n, [](__m512 v) { return v_exp(v); }); break;
        // x > 0 ? x : 0 (NaN -> 0, -0 -> 0, like the portable relu)
        case ggml_fast_map::relu:
            map_loop(x, y, n, [](__m512 v) {
                return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ), v);
            });
            break;
        case ggml_fast_map::neg:
            map_loop(x, y, n, [](__m512 v) {
                return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int) 0x80000000u)));
            });
            break;
        case ggml_fast_map::abs: map_loop(x, y, n, [](__m512 v) { return v_abs(v); }); break;
    }
}

void ggml_avx512_glu_row(ggml_fast_glu op, const float * x, const float * g, float * y, int64_t n) {
    switch (op) {
        case ggml_fast_glu::reglu:
            glu_loop(x, g, y, n, [](__m512 v) {
                return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ), v);
            });
            break;
        case ggml_fast_glu::geglu: glu_loop(x, g, y, n, [](__m512 v) { return v_gelu(v); }); break;
        case ggml_fast_glu::swiglu: glu_loop(x, g, y, n, [](__m512 v) { return v_silu(v); }); break;
        case ggml_fast_glu::geglu_erf: glu_loop(x, g, y, n, [](__m512 v) { return v_gelu_erf(v); }); break;
        case ggml_fast_glu::geglu_quick: glu_loop(x, g, y, n, [](__m512 v) { return v_gelu_quick(v); }); break;
    }
}

void ggml_avx512_binary_row(ggml_fast_bin op, const float * a, const float * b, float * d, int64_t n, bool b_scalar) {
    switch (op) {
        case ggml_fast_bin::add: bin_loop(a, b, d, n, b_scalar, [](__m512 u, __m512 v) { return _mm512_add_ps(u, v); }); break;
        case ggml_fast_bin::sub: bin_loop(a, b, d, n, b_scalar, [](__m512 u, __m512 v) { return _mm512_sub_ps(u, v); }); break;
        case ggml_fast_bin::mul: bin_loop(a, b, d, n, b_scalar, [](__m512 u, __m512 v) { return _mm512_mul_ps(u, v); }); break;
        case ggml_fast_bin::div: bin_loop(a, b, d, n, b_scalar, [](__m512 u, __m512 v) { return _mm512_div_ps(u, v); }); break;
    }
}

void ggml_avx512_f32_to_f16(const float * x, uint16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i h0 = f32_to_f16(_mm512_loadu_ps(x + i));
        const __m256i h1 = f32_to_f16(_mm512_loadu_ps(x + i + 16));
        _mm256_storeu_si256((__m256i *) (y + i), h0);
        _mm256_storeu_si256((__m256i *) (y + i + 16), h1);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        store_h(y + i, f32_to_f16(load(x + i, m)), m);
    }
}

void ggml_avx512_f16_to_f32(const uint16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 f0 = f16_to_f32(_mm256_loadu_si256((const __m256i *) (x + i)));
        const __m512 f1 = f16_to_f32(_mm256_loadu_si256((const __m256i *) (x + i + 16)));
        _mm512_storeu_ps(y + i, f0);
        _mm512_storeu_ps(y + i + 16, f1);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        store(y + i, f16_to_f32(load_h(x + i, m)), m);
    }
}

void ggml_avx512_f32_to_bf16(const float * x, uint16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i h0 = f32_to_bf16(_mm512_loadu_ps(x + i));
        const __m256i h1 = f32_to_bf16(_mm512_loadu_ps(x + i + 16));
        _mm256_storeu_si256((__m256i *) (y + i), h0);
        _mm256_storeu_si256((__m256i *) (y + i + 16), h1);
    }
    for (; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        store_h(y + i, f32_to_bf16(load(x + i, m)), m);
    }
}

void ggml_avx512_bf16_to_f32(const uint16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        store(y + i, bf16_to_f32(load_h(x + i, m)), m);
    }
}

#else // no AVX-512 build: never selected (ggml_cpu_fast_avx512 is false)

void ggml_avx512_map_row(ggml_fast_map, const float *, float *, int64_t, float, float) { GGML_ABORT("no AVX-512 build"); }
void ggml_avx512_glu_row(ggml_fast_glu, const float *, const float *, float *, int64_t) { GGML_ABORT("no AVX-512 build"); }
void ggml_avx512_binary_row(ggml_fast_bin, const float *, const float *, float *, int64_t, bool) { GGML_ABORT("no AVX-512 build"); }
void ggml_avx512_f32_to_f16(const float *, uint16_t *, int64_t) { GGML_ABORT("no AVX-512 build"); }
void ggml_avx512_f16_to_f32(const uint16_t *, float *, int64_t) { GGML_ABORT("no AVX-512 build"); }
void ggml_avx512_f32_to_bf16(const float *, uint16_t *, int64_t) { GGML_ABORT("no AVX-512 build"); }
void ggml_avx512_bf16_to_f32(const uint16_t *, float *, int64_t) { GGML_ABORT("no AVX-512 build"); }

#endif
