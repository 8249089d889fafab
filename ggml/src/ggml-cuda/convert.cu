// convert.cu — contiguous F16 / BF16 / F32 and block-quantized data to F16 or F32 on the device
// (ggml_cuda_convert_to_f16 / _f32, declared in common.cuh).
//
// One thread per output element: each decodes its element straight from the block (scale, min
// and quant bits), which keeps every type a few lines long and memory access coalesced enough
// for what this is used for (weights dequantized once per mul_mat). The element formulas are the
// reference dequantizers' (ggml/src/formats/ggml-quants.cpp) with the same F32 order of
// operations, so F32 outputs match the CPU bit for bit; the block layouts are
// ggml/src/formats/ggml-common.h's.

#include "common.cuh"
#include "convert.cuh"
#include "formats/ggml-common.h"

#include <cuda_bf16.h>

namespace {

constexpr int k_block_threads = 256;

__device__ __forceinline__ float half_bits_to_f32(ggml_fp16_t h) { return __half2float(__ushort_as_half(h)); }

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t b) { return __uint_as_float((uint32_t) b << 16); }

// 4-bit quant of element j (0..31) of a Q4_0 / Q4_1 / Q5_0 / Q5_1 block: low nibbles hold
// elements 0..15, high nibbles 16..31
__device__ __forceinline__ int nibble32(const uint8_t * qs, int j) { return j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4; }

// the fifth bit of element j of a Q5_0 / Q5_1 block: bit j of qh, little-endian
__device__ __forceinline__ int bit5(const uint8_t * qh, int j) { return (qh[j / 8] >> (j % 8)) & 1; }

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7), packed into 12 bytes
__device__ __forceinline__ void scale_min_k4(int j, const uint8_t * s, int & sc, int & m) {
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
__device__ __forceinline__ int nibble_k(const uint8_t * qs, int e) {
    const int c = e / 64, r = e % 64;
    return r < 32 ? qs[32 * c + r] & 0xF : qs[32 * c + r - 32] >> 4;
}

// The value of element e of a block; one overload per block type.
__device__ __forceinline__ float decode(const block_q8_0 & b, int e) { return half_bits_to_f32(b.d) * (float) b.qs[e]; }

__device__ __forceinline__ float decode(const block_q4_0 & b, int e) {
    return half_bits_to_f32(b.d) * (float) (nibble32(b.qs, e) - 8);
}

__device__ __forceinline__ float decode(const block_q4_1 & b, int e) {
    return half_bits_to_f32(b.d) * (float) nibble32(b.qs, e) + half_bits_to_f32(b.m);
}

__device__ __forceinline__ float decode(const block_q5_0 & b, int e) {
    const int q = nibble32(b.qs, e) | (bit5(b.qh, e) << 4);
    return half_bits_to_f32(b.d) * (float) (q - 16);
}

__device__ __forceinline__ float decode(const block_q5_1 & b, int e) {
    const int q = nibble32(b.qs, e) | (bit5(b.qh, e) << 4);
    return half_bits_to_f32(b.d) * (float) q + half_bits_to_f32(b.m);
}

// K-quants: x = (d * sc) * q - (dmin * m), the reference's order
__device__ __forceinline__ float decode(const block_q4_K & b, int e) {
    int sc, m;
    scale_min_k4(e / 32, b.scales, sc, m);
    const float dl = half_bits_to_f32(b.d) * (float) sc;
    const float ml = half_bits_to_f32(b.dmin) * (float) m;
    return dl * (float) nibble_k(b.qs, e) - ml;
}

__device__ __forceinline__ float decode(const block_q5_K & b, int e) {
    int sc, m;
    scale_min_k4(e / 32, b.scales, sc, m);
    const float dl = half_bits_to_f32(b.d) * (float) sc;
    const float ml = half_bits_to_f32(b.dmin) * (float) m;
    const int   q  = nibble_k(b.qs, e) | (((b.qh[e % 32] >> (e / 32)) & 1) << 4);
    return dl * (float) q - ml;
}

// Q6_K: element 128c + 32k + l has its low 4 bits in ql[64c + l + 32 (k & 1)] (low nibble for
// k < 2, high otherwise) and its top 2 bits in bits 2k..2k+1 of qh[32c + l]; stored q + 32
__device__ __forceinline__ float decode(const block_q6_K & b, int e) {
    const int c = e / 128, k = (e % 128) / 32, l = e % 32;
    const int lo = (b.ql[64 * c + l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xF;
    const int hi = (b.qh[32 * c + l] >> (2 * k)) & 3;
    const float dl = half_bits_to_f32(b.d) * (float) b.scales[e / 16];
    return dl * (float) ((lo | (hi << 4)) - 32);
}

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float  from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }

// Element i of the packed output is element i0 of row (i1, i2, i3) of the source; rows are runs
// of whole blocks at byte strides nb1..nb3 (a contiguous run of n elements is one row of n).
struct row_layout {
    int64_t ne0 = 0, ne1 = 1, ne2 = 1;
    size_t  nb1 = 0, nb2 = 0, nb3 = 0;
};

template <typename Block, int QK, typename Dst>
__global__ void dequantize_kernel(const char * __restrict__ src, row_layout l, Dst * __restrict__ dst, int64_t n) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int64_t i0 = i % l.ne0, r = i / l.ne0;
    const int64_t i1 = r % l.ne1, i2 = (r / l.ne1) % l.ne2, i3 = r / (l.ne1 * l.ne2);
    const Block * row = (const Block *) (src + i1 * l.nb1 + i2 * l.nb2 + i3 * l.nb3);
    dst[i] = from_f32<Dst>(decode(row[i0 / QK], (int) (i0 % QK)));
}

// F16 / BF16 / F32 sources: element-wise (F16 -> F16 is a plain copy through F32, exact)
template <typename Dst> __global__ void float_kernel(const void * __restrict__ src, ggml_type type, Dst * __restrict__ dst, int64_t n) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x;
    switch (type) {
        case GGML_TYPE_F16:  x = half_bits_to_f32(((const ggml_fp16_t *) src)[i]); break;
        case GGML_TYPE_BF16: x = bf16_bits_to_f32(((const uint16_t *) src)[i]); break;
        default:             x = ((const float *) src)[i]; break;
    }
    dst[i] = from_f32<Dst>(x);
}

template <typename Block, int QK, typename Dst>
void launch_dequantize(const void * src, const row_layout & l, Dst * dst, int64_t n, cudaStream_t stream) {
    GGML_ASSERT(l.ne0 % QK == 0 && "quantized data is converted in whole blocks");
    const int64_t grid = (n + k_block_threads - 1) / k_block_threads;
    dequantize_kernel<Block, QK, Dst><<<(unsigned) grid, k_block_threads, 0, stream>>>((const char *) src, l, dst, n);
}

template <typename Dst>
void dequantize(const void * src, ggml_type type, const row_layout & l, Dst * dst, int64_t n, cudaStream_t stream) {
    switch (type) {
        case GGML_TYPE_Q8_0: launch_dequantize<block_q8_0, QK8_0, Dst>(src, l, dst, n, stream); return;
        case GGML_TYPE_Q4_0: launch_dequantize<block_q4_0, QK4_0, Dst>(src, l, dst, n, stream); return;
        case GGML_TYPE_Q4_1: launch_dequantize<block_q4_1, QK4_1, Dst>(src, l, dst, n, stream); return;
        case GGML_TYPE_Q5_0: launch_dequantize<block_q5_0, QK5_0, Dst>(src, l, dst, n, stream); return;
        case GGML_TYPE_Q5_1: launch_dequantize<block_q5_1, QK5_1, Dst>(src, l, dst, n, stream); return;
        case GGML_TYPE_Q4_K: launch_dequantize<block_q4_K, QK_K, Dst>(src, l, dst, n, stream); return;
        case GGML_TYPE_Q5_K: launch_dequantize<block_q5_K, QK_K, Dst>(src, l, dst, n, stream); return;
        case GGML_TYPE_Q6_K: launch_dequantize<block_q6_K, QK_K, Dst>(src, l, dst, n, stream); return;
        default: GGML_ABORT("ggml-cuda: no device conversion from %s (ggml_cuda_can_convert said no)", ggml_type_name(type));
    }
}

template <typename Dst> void convert(const void * src, ggml_type type, Dst * dst, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    GGML_ASSERT((n + k_block_threads - 1) / k_block_threads <= INT32_MAX && "conversion too large for one grid");
    if (type == GGML_TYPE_F16 || type == GGML_TYPE_BF16 || type == GGML_TYPE_F32) {
        const int64_t grid = (n + k_block_threads - 1) / k_block_threads;
        float_kernel<Dst><<<(unsigned) grid, k_block_threads, 0, stream>>>(src, type, dst, n);
        return;
    }
    row_layout l;
    l.ne0 = n; // one row of n elements
    dequantize(src, type, l, dst, n, stream);
}

template <typename Dst> void convert_rows(const ggml_tensor * t, Dst * dst, cudaStream_t stream) {
    const int64_t n = ggml_nelements(t);
    if (n <= 0) return;
    GGML_ASSERT(ggml_is_quantized(t->type) && t->nb[0] == ggml_type_size(t->type) && "rows of whole blocks");
    GGML_ASSERT((n + k_block_threads - 1) / k_block_threads <= INT32_MAX && "conversion too large for one grid");
    row_layout l;
    l.ne0 = t->ne[0], l.ne1 = t->ne[1], l.ne2 = t->ne[2];
    l.nb1 = t->nb[1], l.nb2 = t->nb[2], l.nb3 = t->nb[3];
    dequantize(t->data, t->type, l, dst, n, stream);
}

} // namespace

bool ggml_cuda_can_convert(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_F16:
        case GGML_TYPE_BF16:
        case GGML_TYPE_F32:
        case GGML_TYPE_Q8_0:
        case GGML_TYPE_Q4_0:
        case GGML_TYPE_Q4_1:
        case GGML_TYPE_Q5_0:
        case GGML_TYPE_Q5_1:
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q5_K:
        case GGML_TYPE_Q6_K: return true;
        default: return false;
    }
}

void ggml_cuda_convert_to_f16(const void * src, enum ggml_type type, __half * dst, int64_t n, cudaStream_t stream) {
    convert<__half>(src, type, dst, n, stream);
}

void ggml_cuda_convert_to_f32(const void * src, enum ggml_type type, float * dst, int64_t n, cudaStream_t stream) {
    convert<float>(src, type, dst, n, stream);
}

void ggml_cuda_dequantize_rows_to_f16(const ggml_tensor * t, __half * dst, cudaStream_t stream) {
    convert_rows<__half>(t, dst, stream);
}

void ggml_cuda_dequantize_rows_to_f32(const ggml_tensor * t, float * dst, cudaStream_t stream) {
    convert_rows<float>(t, dst, stream);
}
