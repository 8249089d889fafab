// convrot.cu — the ConvRot quantizer sd.quantize_i8_convrot.v1 on CUDA, and its launcher for the
// F32-input INT8 linear (int8.cu).
//
// Exactness (int8-convrot-facts.md and the CPU portable kernel, src/core/cpu/int8-convrot.cpp):
// each group of G values is scaled by 1/sqrt(G) first, then the butterfly stages s = 1, 4, 16, ...
// run with every quartet sum evaluated left to right in float (__fadd_rn / __fsub_rn: never
// contracted or reassociated); amax over the whole row is exact in any order; s = amax / 127 and
// inv = 1 / s are IEEE divisions (__fdiv_rn), q = clamp(round_half_even(v * inv), -127, 127) with
// NaN -> 0, and a row holding a non-finite rotated value is all zeros with scale NaN. The packed
// bytes and scales are therefore bit-identical to the CPU kernel's.
//
// Layout (the CPU's): rows quantized rows of K bytes, zero rows up to pad4(rows), then the rows
// F32 scales at byte K * pad4(rows).
//
// One 256-thread block per row; the row is walked in chunks of max(1024, G) floats held in shared
// memory (a chunk is a whole number of groups since G and 1024 are powers of 4 and G divides K).
// Two passes, as the CPU's portable kernel: amax over the rotated row, then the rotation again
// and the quantization (recomputing gives the same bits and keeps shared memory bounded).
// Groups up to 4096 use at most 16 KiB of shared memory; 16384 needs 64 KiB (opt-in, checked
// against the device). Larger groups decline, and the scheduler runs the node on the CPU.
//
// The activation chains that feed this quantizer (Scale / Norm -> Mul / modulation / SwiGLU /
// SiLU|Sigmoid -> Mul -> ConvRot) are fused in convrot_fusion.cu; both use the row arithmetic of convrot_row.cuh.

#include "convrot_row.cuh"
#include "cuda_kernels.h"

#include "../ggml_extensions.h"
#include "../int8_schema.h"
#include "../kernel_desc.h"

#include <cmath>

namespace SD_CUDA_NAMESPACE {

namespace {

using convrot_row::block_row_scale;
using convrot_row::fold_amax;
using convrot_row::quant_value;
using convrot_row::rotate_chunk;

constexpr int     kQuantThreads  = 256;
constexpr int     kMinChunk      = 1024;
constexpr int     kMaxGroup      = 16384;
using convrot_row::kDefaultSmem;

int chunk_floats(int group) { return group > kMinChunk ? group : kMinChunk; }

// Loads x[c0, c0 + len) into s and rotates it.
__device__ void load_rotated(float * s, const float * x, int len, int G, float c) {
    for (int i = threadIdx.x; i < len; i += blockDim.x) s[i] = x[i];
    __syncthreads();
    if (G > 1) rotate_chunk(s, len, G, c);
}

__global__ void __launch_bounds__(kQuantThreads)
    quantize_kernel(const float * __restrict__ x, int8_t * __restrict__ q, float * __restrict__ scales, int64_t K,
                    int G, float gscale, int chunk) {
    extern __shared__ float s[];
    __shared__ float red_max[kQuantThreads / 32];
    __shared__ int   red_nf[kQuantThreads / 32];
    const int64_t    r  = blockIdx.x;
    const float *    xr = x + r * K;
    int8_t *         qr = q + r * K;

    // pass 1: amax of the rotated row, and whether any rotated value is non-finite
    float amax = 0.0f;
    int   nf   = 0;
    for (int64_t c0 = 0; c0 < K; c0 += chunk) {
        const int len = (int) (K - c0 < chunk ? K - c0 : chunk);
        load_rotated(s, xr + c0, len, G, gscale);
        for (int i = threadIdx.x; i < len; i += blockDim.x) fold_amax(s[i], amax, nf);
        __syncthreads(); // s is reloaded next
    }
    float       inv = 0.0f;
    const float sx  = block_row_scale(amax, nf, red_max, red_nf, inv);
    if (threadIdx.x == 0) scales[r] = sx;
    if (nf || sx == 0.0f) { // all zeros (scale NaN for a non-finite row)
        for (int64_t i = threadIdx.x; i < K; i += blockDim.x) qr[i] = 0;
        return;
    }
    // pass 2: the same rotation again, quantized
    for (int64_t c0 = 0; c0 < K; c0 += chunk) {
        const int len = (int) (K - c0 < chunk ? K - c0 : chunk);
        load_rotated(s, xr + c0, len, G, gscale);
        for (int i = threadIdx.x; i < len; i += blockDim.x) qr[c0 + i] = quant_value(__fmul_rn(s[i], inv));
        __syncthreads();
    }
}

// The 64 KiB opt-in of group 16384, once per device.
bool allow_large_chunk(int device, size_t bytes) {
    static convrot_row::smem_opt_in opt_in;
    return opt_in.allow(quantize_kernel, device, bytes, "quantizer shared-memory opt-in");
}

} // namespace

bool quantizer_group_supported(ggml_backend_dev_t dev, int group) {
    if (!sd_int8_schema::valid_group(group) || group > kMaxGroup) return false;
    const size_t bytes = sizeof(float) * (size_t) chunk_floats(group);
    if (bytes <= (size_t) kDefaultSmem) return true;
    ggml_ext_gpu_device_info info{};
    return dev && device_info(dev, info) && info.shared_mem_per_block_optin >= bytes + 1024;
}

bool launch_quantize(const float * x, void * dst, int64_t K, int64_t rows, int group, cudaStream_t stream) {
    if (rows <= 0) return true;
    const int64_t prows  = pad_up(rows, 4);
    int8_t *      q      = (int8_t *) dst;
    float *       scales = (float *) (q + K * prows);
    const int     G      = group < 1 ? 1 : group;
    const int     chunk  = chunk_floats(G);
    const size_t  smem   = sizeof(float) * (size_t) chunk;
    int           device = -1;
    if (smem > (size_t) kDefaultSmem && (!cuda_ok(cudaGetDevice(&device), "cudaGetDevice") || !allow_large_chunk(device, smem)))
        return false;
    const float gscale = 1.0f / sqrtf((float) G); // a power of two for G = 4^n: exact, as the CPU's
    quantize_kernel<<<(unsigned) rows, kQuantThreads, smem, stream>>>(x, q, scales, K, G, gscale, chunk);
    if (!launched("quantize_i8_convrot")) return false;
    if (prows > rows && !cuda_ok(cudaMemsetAsync(q + K * rows, 0, (size_t) ((prows - rows) * K), stream), "pad rows"))
        return false;
    return true;
}

bool quantize_node_supported(ggml_backend_dev_t dev, const ggml_tensor * node) {
    sd_int8_schema::quantize_node q;
    if (!sd_int8_schema::decode_quantize(node, q)) return false; // the schema's checks
    ggml_ext_gpu_device_info info{};
    if (dev && !device_info(dev, info)) return false;
    // this backend's limits: one block per row (int32 grid), float-aligned input, the groups the
    // shared-memory rotation covers
    return q.rows <= INT32_MAX && aligned_to(q.x, 4) && aligned_to(node, 4) && quantizer_group_supported(dev, q.group);
}

namespace {

bool quant_supports(ggml_backend_dev_t dev, const ggml_tensor * node, void *) { return quantize_node_supported(dev, node); }

ggml_status quant_prepare(ggml_backend_dev_t, const ggml_ext_nodes * nodes, void ** state, size_t * ws, void *) {
    *state = nullptr;
    *ws    = ggml_nbytes(nodes->nodes[nodes->n_nodes - 1]); // staging when the output overlaps the input
    return GGML_STATUS_SUCCESS;
}

ggml_status quant_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void *, void * ws, size_t ws_bytes,
                          void *) {
    ggml_tensor * node = nodes->nodes[nodes->n_nodes - 1];
    exec_ctx      ctx;
    if (!get_exec(backend, ctx)) return GGML_STATUS_FAILED;
    const ggml_tensor * x = node->src[0];
    sd_quantize_i8_attrs at{};
    ggml_ext_get_attrs(node, &at, sizeof(at));
    const bool stage = overlaps(node, x);
    if (stage && (!ws || ws_bytes < ggml_nbytes(node))) return GGML_STATUS_FAILED;
    void * dst = stage ? ws : node->data;
    if (!launch_quantize((const float *) x->data, dst, x->ne[0], rows_of(x), at.group, ctx.stream))
        return GGML_STATUS_FAILED;
    // the bytes after the scales (the last K-byte row's remainder) are never read; zero them so
    // the output is deterministic like the CPU's staging copy
    const size_t used = (size_t) (x->ne[0] * pad_up(rows_of(x), 4)) + sizeof(float) * (size_t) rows_of(x);
    if (ggml_nbytes(node) > used &&
        !cuda_ok(cudaMemsetAsync((char *) dst + used, 0, ggml_nbytes(node) - used, ctx.stream), "scale tail"))
        return GGML_STATUS_FAILED;
    if (stage && !cuda_ok(cudaMemcpyAsync(node->data, ws, ggml_nbytes(node), cudaMemcpyDeviceToDevice, ctx.stream),
                          "quantizer copy"))
        return GGML_STATUS_FAILED;
    return GGML_STATUS_SUCCESS;
}

} // namespace

bool register_convrot(ggml_backend_dev_t dev) {
    using namespace sd_kernels;
    const ggml_ext_kernel_desc descs[] = {
        op_kernel(SD_CUDA_KERNEL_QUANTIZE_I8, sd_op_quantize_i8_convrot(), quant_supports, quant_prepare,
                  quant_execute),
    };
    return register_all(dev, descs, 1, "sd cuda convrot");
}

} // namespace SD_CUDA_NAMESPACE
