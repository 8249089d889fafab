#pragma once

// dequant-block.cuh — the value of one element of a block-quantized block, per block type: the
// reference dequantizers' formulas (ggml/src/formats/ggml-quants.cpp) with the same F32 order of
// operations, on the block layouts of ggml/src/formats/ggml-common.h. Used by the device
// conversion kernels (convert.cu) and, compiled for the host, by test-cuda, which checks every
// type bit for bit against the CPU's dequantizers on machines without a GPU.

#include "formats/ggml-common.h"

#include <cstdint>

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define GGML_CUDA_HD __host__ __device__ __forceinline__
#else
#define GGML_CUDA_HD inline
#endif

namespace ggml_cuda_dq {

// Products and sums rounded separately, never fused into an FMA: the reference rounds each
// (ggml-quants.cpp is compiled with -ffp-contract=off), and so must the device. Host builds of
// this header (test-cuda) use -ffp-contract=off for the same reason.
GGML_CUDA_HD float mul(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
GGML_CUDA_HD float sub(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}
GGML_CUDA_HD float add(float a, float b) {
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

// F16 bits to F32 (exact either way: the device's conversion, or ggml's on the host)
GGML_CUDA_HD float half_bits_to_f32(ggml_fp16_t h) {
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(h));
#else
    return ggml_fp16_to_fp32(h);
#endif
}

// 4-bit quant of element j (0..31) of a Q4_0 / Q4_1 / Q5_0 / Q5_1 block: low nibbles hold
// elements 0..15, high nibbles 16..31
GGML_CUDA_HD int nibble32(const uint8_t * qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }

// the fifth bit of element j of a Q5_0 / Q5_1 block: bit j of qh, little-endian
GGML_CUDA_HD int bit5(const uint8_t * qh, int j) { return (qh[j / 8] >> (j % 8)) & 1; }

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7), packed into 12 bytes
GGML_CUDA_HD void scale_min_k4(int j, const uint8_t * s, int & sc, int & m) {
    if (j < 4) {
        sc = s[j] & 63;
        m  = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        m  = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

// Q4_K / Q5_K: 64-element chunks; byte l of chunk c holds element 64c + l (low nibble) and
// 64c + 32 + l (high nibble)
GGML_CUDA_HD int nibble_k(const uint8_t * qs, int e) {
    const int c = e / 64, r = e % 64;
    return r < 32 ? qs[32 * c + r] & 0xF : qs[32 * c + r - 32] >> 4;
}

// The value of element e of a block; one overload per block type.
GGML_CUDA_HD float decode(const block_q8_0 & b, int e) { return mul(half_bits_to_f32(b.d), (float) b.qs[e]); }

GGML_CUDA_HD float decode(const block_q4_0 & b, int e) {
    return mul(half_bits_to_f32(b.d), (float) (nibble32(b.qs, e) - 8));
}

GGML_CUDA_HD float decode(const block_q4_1 & b, int e) {
    return add(mul(half_bits_to_f32(b.d), (float) nibble32(b.qs, e)), half_bits_to_f32(b.m));
}

GGML_CUDA_HD float decode(const block_q5_0 & b, int e) {
    const int q = nibble32(b.qs, e) | (bit5(b.qh, e) << 4);
    return mul(half_bits_to_f32(b.d), (float) (q - 16));
}

GGML_CUDA_HD float decode(const block_q5_1 & b, int e) {
    const int q = nibble32(b.qs, e) | (bit5(b.qh, e) << 4);
    return add(mul(half_bits_to_f32(b.d), (float) q), half_bits_to_f32(b.m));
}

// K-quants: x = (d * sc) * q - (dmin * m), the reference's order
GGML_CUDA_HD float decode(const block_q4_K & b, int e) {
    int sc, m;
    scale_min_k4(e / 32, b.scales, sc, m);
    const float dl = mul(half_bits_to_f32(b.d), (float) sc);
    const float ml = mul(half_bits_to_f32(b.dmin), (float) m);
    return sub(mul(dl, (float) nibble_k(b.qs, e)), ml);
}

GGML_CUDA_HD float decode(const block_q5_K & b, int e) {
    int sc, m;
    scale_min_k4(e / 32, b.scales, sc, m);
    const float dl = mul(half_bits_to_f32(b.d), (float) sc);
    const float ml = mul(half_bits_to_f32(b.dmin), (float) m);
    const int   q  = nibble_k(b.qs, e) | (((b.qh[e % 32] >> (e / 32)) & 1) << 4);
    return sub(mul(dl, (float) q), ml);
}

// Q6_K: element 128c + 32k + l has its low 4 bits in ql[64c + l + 32 (k & 1)] (low nibble for
// k < 2, high otherwise) and its top 2 bits in bits 2k..2k+1 of qh[32c + l]; stored q + 32
GGML_CUDA_HD float decode(const block_q6_K & b, int e) {
    const int c = e / 128, k = (e % 128) / 32, l = e % 32;
    const int lo = (b.ql[64 * c + l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xF;
    const int hi = (b.qh[32 * c + l] >> (2 * k)) & 3;
    const float dl = mul(half_bits_to_f32(b.d), (float) b.scales[e / 16]);
    return mul(dl, (float) ((lo | (hi << 4)) - 32));
}

} // namespace ggml_cuda_dq
