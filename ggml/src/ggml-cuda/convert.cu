// convert.cu — contiguous F16 / BF16 / F32 and block-quantized data to F16 or F32 on the device
// (ggml_cuda_convert_to_f16 / _f32, declared in common.cuh).
//
// One thread per output element: each decodes its element straight from the block
// (dequant-block.cuh: scale, min and quant bits), which keeps every type a few lines long and
// memory access coalesced enough for what this is used for (weights dequantized once per
// mul_mat). F32 outputs match the CPU's dequantizers bit for bit (test-cuda checks the decoders
// against them on the host).

#include "common.cuh"
#include "convert.cuh"
#include "dequant-block.cuh"

#include <cuda_bf16.h>

namespace {

constexpr int k_block_threads = 256;

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t b) { return __uint_as_float((uint32_t) b << 16); }

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
    dst[i] = from_f32<Dst>(ggml_cuda_dq::decode(row[i0 / QK], (int) (i0 % QK)));
}

// F16 / BF16 / F32 sources: element-wise (F16 -> F16 is a plain copy through F32, exact)
template <typename Dst> __global__ void float_kernel(const void * __restrict__ src, ggml_type type, Dst * __restrict__ dst, int64_t n) {
    const int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float x;
    switch (type) {
        case GGML_TYPE_F16:  x = ggml_cuda_dq::half_bits_to_f32(((const ggml_fp16_t *) src)[i]); break;
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
