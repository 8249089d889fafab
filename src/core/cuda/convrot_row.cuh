#pragma once

// convrot_row.cuh — the ConvRot row arithmetic every CUDA quantizer kernel shares (the standalone
// sd.quantize_i8_convrot.v1 in convrot.cu and the activation fusions in convrot_fusion.cu), so
// the fused and unfused quantizations cannot drift apart: the in-place rotation of a chunk in
// shared memory and the rounding of one rotated value. Exactness is described in convrot.cu.
// Also the host side both need: the shared-memory budget and its per-device opt-in. Include from
// .cu files.

#include "runtime.h"

#include <cfloat>
#include <mutex>

namespace SD_CUDA_NAMESPACE {
namespace convrot_row {

// Rotates s[0, len) in place (len a multiple of G, G > 1), every thread of the block taking part:
// the 1/sqrt(G) pre-scale c, then the butterfly stages s = 1, 4, 16, ... with every quartet sum
// evaluated left to right in float (never contracted or reassociated).
__device__ inline void rotate_chunk(float * s, int len, int G, float c) {
    for (int i = threadIdx.x; i < len; i += blockDim.x) s[i] = __fmul_rn(s[i], c);
    __syncthreads();
    for (int st = 1; st < G; st *= 4) {
        for (int q = threadIdx.x; q < len / 4; q += blockDim.x) {
            const int   base = (q / st) * 4 * st + q % st;
            const float a = s[base], b = s[base + st], cc = s[base + 2 * st], d = s[base + 3 * st];
            s[base]          = __fsub_rn(__fadd_rn(__fadd_rn(a, b), cc), d);
            s[base + st]     = __fadd_rn(__fsub_rn(__fadd_rn(a, b), cc), d);
            s[base + 2 * st] = __fadd_rn(__fadd_rn(__fsub_rn(a, b), cc), d);
            s[base + 3 * st] = __fadd_rn(__fadd_rn(__fadd_rn(-a, b), cc), d);
        }
        __syncthreads();
    }
}

// q = clamp(round_half_even(f), -127, 127); NaN (0 * Inf) -> 0
__device__ inline int8_t quant_value(float f) {
    if (!(f == f)) return 0;
    f = fminf(fmaxf(f, -127.0f), 127.0f);
    return (int8_t) __float2int_rn(f);
}

// Folds one rotated value into the thread's running amax; a non-finite value sets nf instead.
__device__ inline void fold_amax(float v, float & amax, int & nf) {
    const float a = fabsf(v);
    if (!(a <= FLT_MAX)) nf = 1;
    else amax = fmaxf(amax, a);
}

// The row's scale from every thread's amax / nf (all threads of the block call it; red_max and
// red_nf are shared, one slot per warp): amax / 127, NaN for a row with a non-finite value. inv
// is 1 / scale, or 0 when the row quantizes to zeros (non-finite or all zero).
__device__ inline float block_row_scale(float amax, int nf, float * red_max, int * red_nf, float & inv) {
    amax = warp_max_f32(amax);
    nf   = warp_or(nf);
    if (threadIdx.x % 32 == 0) {
        red_max[threadIdx.x / 32] = amax;
        red_nf[threadIdx.x / 32]  = nf;
    }
    __syncthreads();
    amax = 0.0f;
    nf   = 0;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) {
        amax = fmaxf(amax, red_max[w]);
        nf |= red_nf[w];
    }
    const float sx = nf ? NAN : __fdiv_rn(amax, 127.0f);
    inv            = (nf || sx == 0.0f) ? 0.0f : __fdiv_rn(1.0f, sx);
    return sx;
}

// Shared memory a block may use without the opt-in attribute.
constexpr int64_t kDefaultSmem = 48 * 1024;

// The shared-memory opt-in of one kernel above kDefaultSmem (group 16384's 64 KiB chunk): a
// function attribute, set once per device (not stream work, so it stays out of captured graphs).
struct smem_opt_in {
    std::mutex mu;
    bool       done[64] = {};

    template <typename Kernel> bool allow(Kernel * kernel, int device, size_t bytes, const char * what) {
        if (bytes <= (size_t) kDefaultSmem) return true;
        std::lock_guard<std::mutex> lock(mu);
        if (device >= 0 && device < 64 && done[device]) return true;
        if (!cuda_ok(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int) bytes), what))
            return false;
        if (device >= 0 && device < 64) done[device] = true;
        return true;
    }
};

} // namespace convrot_row
} // namespace SD_CUDA_NAMESPACE
