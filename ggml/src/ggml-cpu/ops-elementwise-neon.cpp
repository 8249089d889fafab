// ops-elementwise-neon.cpp — NEON row kernels behind the elementwise fast paths: maps (scale,
// unary activations), GLU, binary arithmetic and F32 <-> F16/BF16 conversion. The 4-lane
// counterparts of ops-elementwise-avx2.cpp, with the same rounding: arithmetic ops round like the
// portable loops (one IEEE operation per element), transcendental ones come from vec-neon-rows.h
// (the same bits as the AVX2 / AVX-512 kernels), conversions are bit-identical to the scalar ones.
//
// Four vectors (16 floats) per iteration: the transcendental maps are long dependency chains and
// four independent ones keep both FP pipes of a Neoverse/Cortex-A7x core busy. Tails (< 4 or
// < 16 elements) go through the same vector code on a zero-padded copy, so a lane's result never
// depends on where it sits in the row.

#include "ops-fast.h"

#if defined(__aarch64__)

#include "vec-neon-rows.h"

using namespace neon_rows;

namespace {

template <typename F>
inline void map_loop(const float * x, float * y, int64_t n, F f) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const float32x4_t a = f(vld1q_f32(x + i));
        const float32x4_t b = f(vld1q_f32(x + i + 4));
        const float32x4_t c = f(vld1q_f32(x + i + 8));
        const float32x4_t d = f(vld1q_f32(x + i + 12));
        vst1q_f32(y + i, a);
        vst1q_f32(y + i + 4, b);
        vst1q_f32(y + i + 8, c);
        vst1q_f32(y + i + 12, d);
    }
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, f(vld1q_f32(x + i)));
    if (i < n) store_part(y + i, f(load_part(x + i, n - i)), n - i);
}

template <typename F>
inline void glu_loop(const float * x, const float * g, float * y, int64_t n, F f) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const float32x4_t a = vmulq_f32(f(vld1q_f32(x + i)), vld1q_f32(g + i));
        const float32x4_t b = vmulq_f32(f(vld1q_f32(x + i + 4)), vld1q_f32(g + i + 4));
        const float32x4_t c = vmulq_f32(f(vld1q_f32(x + i + 8)), vld1q_f32(g + i + 8));
        const float32x4_t d = vmulq_f32(f(vld1q_f32(x + i + 12)), vld1q_f32(g + i + 12));
        vst1q_f32(y + i, a);
        vst1q_f32(y + i + 4, b);
        vst1q_f32(y + i + 8, c);
        vst1q_f32(y + i + 12, d);
    }
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(f(vld1q_f32(x + i)), vld1q_f32(g + i)));
    if (i < n) store_part(y + i, vmulq_f32(f(load_part(x + i, n - i)), load_part(g + i, n - i)), n - i);
}

template <typename F>
inline void bin_loop(const float * a, const float * b, float * d, int64_t n, bool b_scalar, F f) {
    if (b_scalar) {
        const float32x4_t bv = vdupq_n_f32(b[0]);
        map_loop(a, d, n, [&](float32x4_t v) { return f(v, bv); });
        return;
    }
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const float32x4_t r0 = f(vld1q_f32(a + i), vld1q_f32(b + i));
        const float32x4_t r1 = f(vld1q_f32(a + i + 4), vld1q_f32(b + i + 4));
        const float32x4_t r2 = f(vld1q_f32(a + i + 8), vld1q_f32(b + i + 8));
        const float32x4_t r3 = f(vld1q_f32(a + i + 12), vld1q_f32(b + i + 12));
        vst1q_f32(d + i, r0);
        vst1q_f32(d + i + 4, r1);
        vst1q_f32(d + i + 8, r2);
        vst1q_f32(d + i + 12, r3);
    }
    for (; i + 4 <= n; i += 4) vst1q_f32(d + i, f(vld1q_f32(a + i), vld1q_f32(b + i)));
    if (i < n) store_part(d + i, f(load_part(a + i, n - i), load_part(b + i, n - i)), n - i);
}

// x > 0 ? x : 0 (NaN -> 0, -0 -> 0, like the portable relu)
inline float32x4_t relu(float32x4_t v) {
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(v), vcgtq_f32(v, vdupq_n_f32(0.0f))));
}

} // namespace

void ggml_neon_map_row(ggml_fast_map op, const float * x, float * y, int64_t n, float a, float b) {
    const float32x4_t av = vdupq_n_f32(a);
    const float32x4_t bv = vdupq_n_f32(b);
    switch (op) {
        case ggml_fast_map::scale: map_loop(x, y, n, [&](float32x4_t v) { return vmulq_f32(av, v); }); break;
        // s*x + b rounded twice, as the portable kernel does (no FMA)
        case ggml_fast_map::scale_bias:
            map_loop(x, y, n, [&](float32x4_t v) { return vaddq_f32(vmulq_f32(av, v), bv); });
            break;
        case ggml_fast_map::sqr: map_loop(x, y, n, [](float32x4_t v) { return vmulq_f32(v, v); }); break;
        case ggml_fast_map::sqrt: map_loop(x, y, n, [](float32x4_t v) { return vsqrtq_f32(v); }); break;
        case ggml_fast_map::silu: map_loop(x, y, n, [](float32x4_t v) { return v_silu(v); }); break;
        case ggml_fast_map::gelu: map_loop(x, y, n, [](float32x4_t v) { return v_gelu(v); }); break;
        case ggml_fast_map::gelu_erf: map_loop(x, y, n, [](float32x4_t v) { return v_gelu_erf(v); }); break;
        case ggml_fast_map::gelu_quick: map_loop(x, y, n, [](float32x4_t v) { return v_gelu_quick(v); }); break;
        case ggml_fast_map::sigmoid: map_loop(x, y, n, [](float32x4_t v) { return v_sigmoid(v); }); break;
        case ggml_fast_map::tanh: map_loop(x, y, n, [](float32x4_t v) { return v_tanh(v); }); break;
        case ggml_fast_map::exp: map_loop(x, y, n, [](float32x4_t v) { return v_exp(v); }); break;
        case ggml_fast_map::relu: map_loop(x, y, n, [](float32x4_t v) { return relu(v); }); break;
        case ggml_fast_map::neg: map_loop(x, y, n, [](float32x4_t v) { return vnegq_f32(v); }); break;
        case ggml_fast_map::abs: map_loop(x, y, n, [](float32x4_t v) { return v_abs(v); }); break;
    }
}

void ggml_neon_glu_row(ggml_fast_glu op, const float * x, const float * g, float * y, int64_t n) {
    switch (op) {
        case ggml_fast_glu::reglu: glu_loop(x, g, y, n, [](float32x4_t v) { return relu(v); }); break;
        case ggml_fast_glu::geglu: glu_loop(x, g, y, n, [](float32x4_t v) { return v_gelu(v); }); break;
        case ggml_fast_glu::swiglu: glu_loop(x, g, y, n, [](float32x4_t v) { return v_silu(v); }); break;
        case ggml_fast_glu::geglu_erf: glu_loop(x, g, y, n, [](float32x4_t v) { return v_gelu_erf(v); }); break;
        case ggml_fast_glu::geglu_quick: glu_loop(x, g, y, n, [](float32x4_t v) { return v_gelu_quick(v); }); break;
    }
}

void ggml_neon_binary_row(ggml_fast_bin op, const float * a, const float * b, float * d, int64_t n, bool b_scalar) {
    switch (op) {
        case ggml_fast_bin::add: bin_loop(a, b, d, n, b_scalar, [](float32x4_t u, float32x4_t v) { return vaddq_f32(u, v); }); break;
        case ggml_fast_bin::sub: bin_loop(a, b, d, n, b_scalar, [](float32x4_t u, float32x4_t v) { return vsubq_f32(u, v); }); break;
        case ggml_fast_bin::mul: bin_loop(a, b, d, n, b_scalar, [](float32x4_t u, float32x4_t v) { return vmulq_f32(u, v); }); break;
        case ggml_fast_bin::div: bin_loop(a, b, d, n, b_scalar, [](float32x4_t u, float32x4_t v) { return vdivq_f32(u, v); }); break;
    }
}

void ggml_neon_f32_to_f16(const float * x, uint16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint16x4_t h0 = f32_to_f16(vld1q_f32(x + i));
        const uint16x4_t h1 = f32_to_f16(vld1q_f32(x + i + 4));
        vst1q_u16(y + i, vcombine_u16(h0, h1));
    }
    for (; i < n; i += 4) {
        const int64_t k = n - i < 4 ? n - i : 4;
        store_part_h(y + i, f32_to_f16(load_part(x + i, k)), k);
    }
}

void ggml_neon_f16_to_f32(const uint16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint16x8_t h = vld1q_u16(x + i);
        vst1q_f32(y + i, f16_to_f32(vget_low_u16(h)));
        vst1q_f32(y + i + 4, f16_to_f32(vget_high_u16(h)));
    }
    for (; i < n; i += 4) {
        const int64_t k = n - i < 4 ? n - i : 4;
        store_part(y + i, f16_to_f32(load_part_h(x + i, k)), k);
    }
}

void ggml_neon_f32_to_bf16(const float * x, uint16_t * y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint16x4_t h0 = f32_to_bf16(vld1q_f32(x + i));
        const uint16x4_t h1 = f32_to_bf16(vld1q_f32(x + i + 4));
        vst1q_u16(y + i, vcombine_u16(h0, h1));
    }
    for (; i < n; i += 4) {
        const int64_t k = n - i < 4 ? n - i : 4;
        store_part_h(y + i, f32_to_bf16(load_part(x + i, k)), k);
    }
}

void ggml_neon_bf16_to_f32(const uint16_t * x, float * y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint16x8_t h = vld1q_u16(x + i);
        vst1q_f32(y + i, bf16_to_f32(vget_low_u16(h)));
        vst1q_f32(y + i + 4, bf16_to_f32(vget_high_u16(h)));
    }
    for (; i < n; i += 4) {
        const int64_t k = n - i < 4 ? n - i : 4;
        store_part(y + i, bf16_to_f32(load_part_h(x + i, k)), k);
    }
}

#else // not an AArch64 build: the NEON table is nullptr there, so these never run

void ggml_neon_map_row(ggml_fast_map, const float *, float *, int64_t, float, float) { GGML_ABORT("no NEON build"); }
void ggml_neon_glu_row(ggml_fast_glu, const float *, const float *, float *, int64_t) { GGML_ABORT("no NEON build"); }
void ggml_neon_binary_row(ggml_fast_bin, const float *, const float *, float *, int64_t, bool) { GGML_ABORT("no NEON build"); }
void ggml_neon_f32_to_f16(const float *, uint16_t *, int64_t) { GGML_ABORT("no NEON build"); }
void ggml_neon_f16_to_f32(const uint16_t *, float *, int64_t) { GGML_ABORT("no NEON build"); }
void ggml_neon_f32_to_bf16(const float *, uint16_t *, int64_t) { GGML_ABORT("no NEON build"); }
void ggml_neon_bf16_to_f32(const uint16_t *, float *, int64_t) { GGML_ABORT("no NEON build"); }

#endif
