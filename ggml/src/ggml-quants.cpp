// ggml-quants.cpp — reference code of the block-quantized types: quantizers (upstream ggml's
// reference algorithms), dequantizers, and the portable dot products mul_mat is defined by.
//
// Exactness: the quantizers reproduce upstream's quantize_row_*_ref step by step (same float
// operations in the same order), so blocks are bit-identical to upstream's and to the Python
// `gguf` package's. This file is compiled with -ffp-contract=off (ggml/CMakeLists.txt): an FMA
// contracted from a*b + c rounds once instead of twice and would change blocks and dequantized
// values. Where upstream's C converts an out-of-range or non-finite float to an integer (undefined
// behaviour; x86 yields 0 after truncation to a byte), this code returns 0 explicitly, which is also
// what numpy yields for the gguf package, so every block stays deterministic.
//
// Layouts and the meaning of every field: ggml-common.h.

#include "ggml-quants.h"

#include "ggml-impl.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace {

inline float h2f(ggml_fp16_t h) {
    return ggml_fp16_to_fp32(h);
}
inline ggml_fp16_t f2h(float f) {
    return ggml_fp32_to_fp16(f);
}

// (int8_t)(v) followed by MIN(hi, .) in upstream's Q4_0/Q4_1/Q5_0/Q5_1 quantizers: truncation
// toward zero of a value that is in [0, hi + 1) for every finite input.
inline int trunc_clamped(float v, int hi) {
    if (!std::isfinite(v) || v < 0.0f) return 0;
    return v >= (float) hi ? hi : (int) v;
}

// roundf then conversion to int8_t in upstream's Q8_0/Q8_1 quantizers (half away from zero).
inline int8_t round_to_i8(float v) {
    if (!std::isfinite(v)) return 0;
    const float r = std::round(v);
    return (int8_t) std::max(-128.0f, std::min(127.0f, r));
}

} // namespace

// =============================================================================================
// 32-element blocks

void quantize_row_q4_0_ref(const float * x, block_q4_0 * y, int64_t k) {
    GGML_ASSERT(k % QK4_0 == 0);
    for (int64_t b = 0; b < k / QK4_0; b++) {
        const float * xb = x + b * QK4_0;
        // the element of largest magnitude, with its sign: it is mapped to q = 0 exactly (-8 * d)
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK4_0; j++) {
            if (amax < std::fabs(xb[j])) {
                amax = std::fabs(xb[j]);
                max  = xb[j];
            }
        }
        const float d  = max / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f; // from the float d, before it is rounded to half
        y[b].d         = f2h(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            const int q0 = trunc_clamped(xb[j] * id + 8.5f, 15);
            const int q1 = trunc_clamped(xb[j + QK4_0 / 2] * id + 8.5f, 15);
            y[b].qs[j]   = (uint8_t) (q0 | (q1 << 4));
        }
    }
}

void quantize_row_q4_1_ref(const float * x, block_q4_1 * y, int64_t k) {
    GGML_ASSERT(k % QK4_1 == 0);
    for (int64_t b = 0; b < k / QK4_1; b++) {
        const float * xb  = x + b * QK4_1;
        float         min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QK4_1; j++) {
            if (xb[j] < min) min = xb[j];
            if (xb[j] > max) max = xb[j];
        }
        const float d  = (max - min) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d         = f2h(d);
        y[b].m         = f2h(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            const int q0 = trunc_clamped((xb[j] - min) * id + 0.5f, 15);
            const int q1 = trunc_clamped((xb[j + QK4_1 / 2] - min) * id + 0.5f, 15);
            y[b].qs[j]   = (uint8_t) (q0 | (q1 << 4));
        }
    }
}

namespace {

// qs/qh of Q5_0 and Q5_1 from 32 five-bit values: low nibbles as Q4_0, bit 4 of element j in bit j of qh
template <typename Block> void pack_q5(const int * q, Block & blk) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        blk.qs[j] = (uint8_t) ((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
        qh |= (uint32_t) ((q[j] >> 4) & 1) << j;
        qh |= (uint32_t) ((q[j + 16] >> 4) & 1) << (j + 16);
    }
    memcpy(blk.qh, &qh, sizeof(qh)); // little-endian, as the file format
}

// the 32 stored values of a Q4_0/Q4_1 block (0..15) or Q5_0/Q5_1 block (0..31), element order
template <typename Block> void unpack_nibbles(const Block & blk, int * q) {
    for (int j = 0; j < 16; j++) {
        q[j]      = blk.qs[j] & 0x0F;
        q[j + 16] = blk.qs[j] >> 4;
    }
}
template <typename Block> void unpack_q5(const Block & blk, int * q) {
    unpack_nibbles(blk, q);
    uint32_t qh;
    memcpy(&qh, blk.qh, sizeof(qh));
    for (int j = 0; j < 32; j++) q[j] |= (int) ((qh >> j) & 1u) << 4;
}

} // namespace

void quantize_row_q5_0_ref(const float * x, block_q5_0 * y, int64_t k) {
    GGML_ASSERT(k % QK5_0 == 0);
    for (int64_t b = 0; b < k / QK5_0; b++) {
        const float * xb   = x + b * QK5_0;
        float         amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK5_0; j++) {
            if (amax < std::fabs(xb[j])) {
                amax = std::fabs(xb[j]);
                max  = xb[j];
            }
        }
        const float d  = max / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d         = f2h(d);
        int q[QK5_0];
        for (int j = 0; j < QK5_0; j++) q[j] = trunc_clamped(xb[j] * id + 16.5f, 31);
        pack_q5(q, y[b]);
    }
}

void quantize_row_q5_1_ref(const float * x, block_q5_1 * y, int64_t k) {
    GGML_ASSERT(k % QK5_1 == 0);
    for (int64_t b = 0; b < k / QK5_1; b++) {
        const float * xb  = x + b * QK5_1;
        float         min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QK5_1; j++) {
            if (xb[j] < min) min = xb[j];
            if (xb[j] > max) max = xb[j];
        }
        const float d  = (max - min) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d         = f2h(d);
        y[b].m         = f2h(min);
        int q[QK5_1];
        // upstream does not clamp here ((max - min) * id + 0.5 < 32 for finite inputs); 31 is the same
        for (int j = 0; j < QK5_1; j++) q[j] = trunc_clamped((xb[j] - min) * id + 0.5f, 31);
        pack_q5(q, y[b]);
    }
}

void quantize_row_q8_0_ref(const float * x, block_q8_0 * y, int64_t k) {
    GGML_ASSERT(k % QK8_0 == 0);
    for (int64_t b = 0; b < k / QK8_0; b++) {
        const float * xb   = x + b * QK8_0;
        float         amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) amax = std::max(amax, std::fabs(xb[j]));
        const float d  = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d         = f2h(d);
        for (int j = 0; j < QK8_0; j++) y[b].qs[j] = round_to_i8(xb[j] * id);
    }
}

void quantize_row_q8_1_ref(const float * x, block_q8_1 * y, int64_t k) {
    GGML_ASSERT(k % QK8_1 == 0);
    for (int64_t b = 0; b < k / QK8_1; b++) {
        const float * xb   = x + b * QK8_1;
        float         amax = 0.0f;
        for (int j = 0; j < QK8_1; j++) amax = std::max(amax, std::fabs(xb[j]));
        const float d  = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d         = f2h(d);
        int sum        = 0;
        for (int j = 0; j < QK8_1; j++) {
            y[b].qs[j] = round_to_i8(xb[j] * id);
            sum += y[b].qs[j];
        }
        // the float d (not its half rounding) times the integer sum, as upstream
        y[b].s = f2h((float) sum * d);
    }
}

void dequantize_row_q4_0(const block_q4_0 * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK4_0 == 0);
    for (int64_t b = 0; b < k / QK4_0; b++) {
        const float d = h2f(x[b].d);
        int         q[QK4_0];
        unpack_nibbles(x[b], q);
        for (int j = 0; j < QK4_0; j++) y[b * QK4_0 + j] = (float) (q[j] - 8) * d;
    }
}

void dequantize_row_q4_1(const block_q4_1 * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK4_1 == 0);
    for (int64_t b = 0; b < k / QK4_1; b++) {
        const float d = h2f(x[b].d), m = h2f(x[b].m);
        int         q[QK4_1];
        unpack_nibbles(x[b], q);
        for (int j = 0; j < QK4_1; j++) y[b * QK4_1 + j] = (float) q[j] * d + m;
    }
}

void dequantize_row_q5_0(const block_q5_0 * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK5_0 == 0);
    for (int64_t b = 0; b < k / QK5_0; b++) {
        const float d = h2f(x[b].d);
        int         q[QK5_0];
        unpack_q5(x[b], q);
        for (int j = 0; j < QK5_0; j++) y[b * QK5_0 + j] = (float) (q[j] - 16) * d;
    }
}

void dequantize_row_q5_1(const block_q5_1 * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK5_1 == 0);
    for (int64_t b = 0; b < k / QK5_1; b++) {
        const float d = h2f(x[b].d), m = h2f(x[b].m);
        int         q[QK5_1];
        unpack_q5(x[b], q);
        for (int j = 0; j < QK5_1; j++) y[b * QK5_1 + j] = (float) q[j] * d + m;
    }
}

void dequantize_row_q8_0(const block_q8_0 * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK8_0 == 0);
    for (int64_t b = 0; b < k / QK8_0; b++) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK8_0; j++) y[b * QK8_0 + j] = (float) x[b].qs[j] * d;
    }
}

void dequantize_row_q8_1(const block_q8_1 * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK8_1 == 0);
    for (int64_t b = 0; b < k / QK8_1; b++) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK8_1; j++) y[b * QK8_1 + j] = (float) x[b].qs[j] * d;
    }
}

// =============================================================================================
// Dot products: integer sums per block, scaled in F32 (the definition the fast paths must meet).

namespace {

template <typename Block> const Block * as_blocks(const void * p) {
    return static_cast<const Block *>(p);
}

// integer dot of a block's 32 stored values (minus `offset`) with a Q8 block's quants
inline int dot32(const int * q, int offset, const int8_t * a) {
    int s = 0;
    for (int j = 0; j < 32; j++) s += (q[j] - offset) * a[j];
    return s;
}

// x = d * (q - offset) against Q8_0: sum over blocks of sumi * dx * dy
template <typename Block, void (*unpack)(const Block &, int *), int offset>
void vec_dot_sym_q8_0(int64_t n, float * s, const void * vx, const void * vy) {
    GGML_ASSERT(n % 32 == 0);
    const Block *      x   = as_blocks<Block>(vx);
    const block_q8_0 * y   = as_blocks<block_q8_0>(vy);
    float              sum = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        int q[32];
        unpack(x[b], q);
        const int sumi = dot32(q, offset, y[b].qs);
        sum += (float) sumi * h2f(x[b].d) * h2f(y[b].d);
    }
    *s = sum;
}

// x = d * q + m against Q8_1 (a = dy * qa, s = dy * sum(qa)): sum(x * a) = dx*dy*sumi + m*s
template <typename Block, void (*unpack)(const Block &, int *)>
void vec_dot_affine_q8_1(int64_t n, float * s, const void * vx, const void * vy) {
    GGML_ASSERT(n % 32 == 0);
    const Block *      x   = as_blocks<Block>(vx);
    const block_q8_1 * y   = as_blocks<block_q8_1>(vy);
    float              sum = 0.0f;
    for (int64_t b = 0; b < n / 32; b++) {
        int q[32];
        unpack(x[b], q);
        const int sumi = dot32(q, 0, y[b].qs);
        sum += (h2f(x[b].d) * h2f(y[b].d)) * (float) sumi + h2f(x[b].m) * h2f(y[b].s);
    }
    *s = sum;
}

void unpack_q8_0(const block_q8_0 & blk, int * q) {
    for (int j = 0; j < 32; j++) q[j] = blk.qs[j];
}

void quantize_act_q8_0(const float * x, void * y, int64_t n) {
    quantize_row_q8_0_ref(x, static_cast<block_q8_0 *>(y), n);
}
void quantize_act_q8_1(const float * x, void * y, int64_t n) {
    quantize_row_q8_1_ref(x, static_cast<block_q8_1 *>(y), n);
}

} // namespace

const struct ggml_quant_dot_traits * ggml_get_quant_dot_traits(enum ggml_type type) {
    static const ggml_quant_dot_traits q4_0 = {GGML_TYPE_Q8_0, quantize_act_q8_0,
                                               vec_dot_sym_q8_0<block_q4_0, unpack_nibbles<block_q4_0>, 8>};
    static const ggml_quant_dot_traits q5_0 = {GGML_TYPE_Q8_0, quantize_act_q8_0,
                                               vec_dot_sym_q8_0<block_q5_0, unpack_q5<block_q5_0>, 16>};
    static const ggml_quant_dot_traits q8_0 = {GGML_TYPE_Q8_0, quantize_act_q8_0,
                                               vec_dot_sym_q8_0<block_q8_0, unpack_q8_0, 0>};
    static const ggml_quant_dot_traits q4_1 = {GGML_TYPE_Q8_1, quantize_act_q8_1,
                                               vec_dot_affine_q8_1<block_q4_1, unpack_nibbles<block_q4_1>>};
    static const ggml_quant_dot_traits q5_1 = {GGML_TYPE_Q8_1, quantize_act_q8_1,
                                               vec_dot_affine_q8_1<block_q5_1, unpack_q5<block_q5_1>>};
    // activation-only type (upstream has no dot product with Q8_1 weights): no vec_dot_ref
    static const ggml_quant_dot_traits q8_1 = {GGML_TYPE_Q8_1, quantize_act_q8_1, nullptr};
    switch (type) {
        case GGML_TYPE_Q4_0: return &q4_0;
        case GGML_TYPE_Q4_1: return &q4_1;
        case GGML_TYPE_Q5_0: return &q5_0;
        case GGML_TYPE_Q5_1: return &q5_1;
        case GGML_TYPE_Q8_0: return &q8_0;
        case GGML_TYPE_Q8_1: return &q8_1;
        default: return nullptr;
    }
}
