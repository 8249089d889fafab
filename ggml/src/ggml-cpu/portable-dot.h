#pragma once

// portable-dot.h — plain-C++ building blocks shared by the portable mul_mat and flash-attention
// kernels: exact F16/BF16 row widening that vectorises, and register-tiled F32 dot products.
// Internal to the CPU backend; one copy so both kernels round identically.

#include "../ggml-impl.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace ggml_cpu_portable {

inline float bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}
inline uint32_t f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

// Branch-free exact binary16 -> binary32 so that widening loops vectorise (the library function
// is an out-of-line call per element). Mask arithmetic instead of ?: keeps the loop branch-free.
inline float fp16_to_f32_inline(uint16_t h) {
    const uint32_t sign  = (uint32_t) (h & 0x8000u) << 16;
    const uint32_t e     = (h >> 10) & 0x1fu;
    const uint32_t m     = h & 0x3ffu;
    const uint32_t sub   = f32_to_bits((float) m * 0x1p-24f); // subnormal (or zero): exact
    const uint32_t e31   = (uint32_t) (e == 31);                // inf/nan: exponent 31 -> 255
    const uint32_t norm  = ((e + 112u + 112u * e31) << 23) | (m << 13);
    const uint32_t zmask = 0u - (uint32_t) (e == 0);
    return bits_to_f32(sign | (sub & zmask) | (norm & ~zmask));
}

// Widens n packed elements of an F32/F16/BF16 row to F32 (exact), or dequantizes n elements
// (whole blocks) of a Q8_0 row exactly as dequantize_row_q8_0 does (q * d in F32). `who` names
// the caller in the abort message for an unsupported type.
inline void widen_row(enum ggml_type type, const void * src, float * dst, int64_t n, const char * who) {
    switch (type) {
        case GGML_TYPE_Q8_0: {
            GGML_ASSERT(n % QK8_0 == 0);
            const block_q8_0 * blk = (const block_q8_0 *) src;
            for (int64_t b = 0; b < n / QK8_0; ++b) {
                const float d = fp16_to_f32_inline(blk[b].d);
                for (int j = 0; j < QK8_0; ++j) dst[b * QK8_0 + j] = (float) blk[b].qs[j] * d;
            }
        } break;
        case GGML_TYPE_F32: memcpy(dst, src, (size_t) n * sizeof(float)); break;
        case GGML_TYPE_F16: {
            const uint16_t * s = (const uint16_t *) src;
            for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32_inline(s[i]);
        } break;
        case GGML_TYPE_BF16: {
            const uint16_t * s = (const uint16_t *) src;
            for (int64_t i = 0; i < n; ++i) dst[i] = bits_to_f32((uint32_t) s[i] << 16);
        } break;
        case GGML_TYPE_F8_E4M3: ggml_f8_e4m3_to_fp32_row((const uint8_t *) src, dst, n); break;
        case GGML_TYPE_F8_E5M2: ggml_f8_e5m2_to_fp32_row((const uint8_t *) src, dst, n); break;
        default: GGML_ABORT("%s: unsupported type %d", who, (int) type);
    }
}

constexpr int DOT_NR = 4; // register tile: rows of a
constexpr int DOT_MR = 2; // register tile: rows of b

// out[c * ldo + r] += a[r] . b[c] for r < NR, c < MR, over K elements.
//
// NR*MR independent sums over k: GCC vectorises each into a vector accumulator only when it may
// reassociate the sum, which is allowed here (and only here) by the attribute. The summation order
// becomes "lane-wise partial sums, then combine" — still F32, usually more accurate than serial.
template <int NR, int MR>
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((optimize("associative-math", "no-signed-zeros", "no-trapping-math")))
#endif
void dot_tile(const float * const * a, const float * const * b, int64_t K, float * out, int64_t ldo) {
    float s[NR][MR] = {};
    const float * ap[NR];
    const float * bp[MR];
    for (int r = 0; r < NR; ++r) ap[r] = a[r];
    for (int c = 0; c < MR; ++c) bp[c] = b[c];
#if defined(__clang__)
#pragma clang loop vectorize(assume_safety)
#endif
    for (int64_t k = 0; k < K; ++k) {
#pragma GCC unroll 4
        for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 4
            for (int c = 0; c < MR; ++c) s[r][c] += ap[r][k] * bp[c][k];
        }
    }
    for (int r = 0; r < NR; ++r) {
        for (int c = 0; c < MR; ++c) out[c * ldo + r] += s[r][c];
    }
}

// out[c * ldo + r] += a[r] . b[c] for r < na, c < nb; odd edges use exact-size tiles.
inline void dot_block(const float * const * a, int64_t na, const float * const * b, int64_t nb, int64_t K,
                      float * out, int64_t ldo) {
    using dot_tile_fn = void (*)(const float * const *, const float * const *, int64_t, float *, int64_t);
    // [NR-1][MR-1] -> instantiation
    static const dot_tile_fn tiles[DOT_NR][DOT_MR] = {
        { &dot_tile<1, 1>, &dot_tile<1, 2> },
        { &dot_tile<2, 1>, &dot_tile<2, 2> },
        { &dot_tile<3, 1>, &dot_tile<3, 2> },
        { &dot_tile<4, 1>, &dot_tile<4, 2> },
    };
    for (int64_t c = 0; c < nb; c += DOT_MR) {
        const int mr = (int) std::min<int64_t>(DOT_MR, nb - c);
        for (int64_t r = 0; r < na; r += DOT_NR) {
            const int nr = (int) std::min<int64_t>(DOT_NR, na - r);
            tiles[nr - 1][mr - 1](a + r, b + c, K, out + c * ldo + r, ldo);
        }
    }
}

} // namespace ggml_cpu_portable
