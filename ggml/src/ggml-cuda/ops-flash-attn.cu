// ops-flash-attn.cu — FLASH_ATTN_EXT on CUDA: a straightforward online-softmax kernel with F32
// accumulation, written for exactness first (the CPU backend's ggml-cpu/ops-flash-attn.cpp is
// the reference for every parameter).
//
// For each (query iq, head h, sequence s): s_j = q.k_j * scale; s_j = softcap * tanh(s_j / softcap)
// when softcap != 0; s_j += slope * mask_j (ALiBi slope, 1 without max_bias). Positions whose
// slope-scaled mask is -inf are skipped; a query with no visible position (and no sink) yields
// zeros. A sink is one more logit in the normaliser with no value row. K/V heads are shared by
// n_head / n_head_kv query heads (GQA, head / ratio), the mask broadcasts over heads and
// sequences by modulo. The result is stored permuted: dst element (d, h, iq, s).
//
// One block per query row: the block's warps score a tile of kv rows (one warp per row, lanes
// split the head dimension, shuffle reduction), warp 0 updates the running max and normaliser,
// then every thread rescales and accumulates its own output dimensions. Fixed reduction orders,
// no atomics: results are deterministic.

#include "ops-common.cuh"

#include <cmath>

namespace {

constexpr int FA_THREADS = 128; // 4 warps
constexpr int FA_KB      = 64;  // kv rows per tile (warp 0 handles two per lane)
constexpr int64_t FA_MAX_SHARED_FLOATS = 10 * 1024; // q + accumulator + tile scores, within 48 KiB

struct fa_alibi {
    float    max_bias, m0, m1;
    uint32_t n_log2;
};

__device__ float fa_slope(const fa_alibi & p, int64_t h) {
    if (p.max_bias <= 0.0f) return 1.0f;
    return (uint32_t) h < p.n_log2 ? powf(p.m0, (float) (h + 1)) : powf(p.m1, (float) (2 * (h - p.n_log2) + 1));
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}

__global__ void __launch_bounds__(FA_THREADS)
k_flash_attn(ggml_cuda_tdesc q, ggml_cuda_tdesc k, ggml_cuda_tdesc v, ggml_cuda_tdesc mask, bool has_mask,
             const float * sinks, ggml_cuda_tdesc dst, float scale, float softcap, fa_alibi alibi) {
    extern __shared__ float smem[];
    __shared__ float run_max, run_sum, tile_r;
    __shared__ int   tile_skip;

    const int64_t D = q.ne[0], Dv = v.ne[0], n_q = q.ne[1], n_head = q.ne[2], S = q.ne[3], n_kv = k.ne[1];
    float * qs = smem;          // [D]
    float * acc = smem + D;     // [Dv]
    float * p   = acc + Dv;     // [FA_KB]

    const int64_t b  = blockIdx.x;
    const int64_t iq = b % n_q;
    const int64_t h  = (b / n_q) % n_head;
    const int64_t s  = b / (n_q * n_head);

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, nwarps = FA_THREADS / 32;

    const char * qrow  = q.data + iq * q.nb[1] + h * q.nb[2] + s * q.nb[3];
    const char * kbase = k.data + (h / (n_head / k.ne[2])) * k.nb[2] + (s / (S / k.ne[3])) * k.nb[3];
    const char * vbase = v.data + (h / (n_head / v.ne[2])) * v.nb[2] + (s / (S / v.ne[3])) * v.nb[3];
    const char * mrow  = has_mask ? mask.data + iq * mask.nb[1] + (h % mask.ne[2]) * mask.nb[2] +
                                       (s % mask.ne[3]) * mask.nb[3]
                                 : nullptr;
    const float slope = has_mask ? fa_slope(alibi, h) : 1.0f;

    for (int64_t d = tid; d < D; d += FA_THREADS) qs[d] = ggml_cuda_load_f32(qrow + d * q.nb[0], q.type);
    for (int64_t d = tid; d < Dv; d += FA_THREADS) acc[d] = 0.0f;
    if (tid == 0) {
        run_max = -INFINITY;
        run_sum = 0.0f;
    }
    __syncthreads();

    for (int64_t j0 = 0; j0 < n_kv; j0 += FA_KB) {
        const int kb = (int) (n_kv - j0 < FA_KB ? n_kv - j0 : FA_KB);

        // 1. scores of the tile (masked-out rows are -inf and cost no dot product)
        for (int jj = warp; jj < kb; jj += nwarps) {
            const int64_t j     = j0 + jj;
            const float   mterm = mrow ? slope * ggml_cuda_load_f32(mrow + j * mask.nb[0], mask.type) : 0.0f;
            if (mterm == -INFINITY) {
                if (lane == 0) p[jj] = -INFINITY;
                continue;
            }
            const char * krow = kbase + j * k.nb[1];
            float        dot  = 0.0f;
            for (int64_t d = lane; d < D; d += 32) dot += qs[d] * ggml_cuda_load_f32(krow + d * k.nb[0], k.type);
            dot     = warp_sum(dot);
            float x = dot * scale;
            if (softcap != 0.0f) x = softcap * tanhf(x / softcap);
            x += mterm;
            if (lane == 0) p[jj] = x;
        }
        __syncthreads();

        // 2. running max / normaliser (warp 0); p becomes the tile's probabilities
        if (warp == 0) {
            const float x0 = lane < kb ? p[lane] : -INFINITY;
            const float x1 = lane + 32 < kb ? p[lane + 32] : -INFINITY;
            const float bm = warp_max(fmaxf(x0, x1));
            if (bm == -INFINITY) {
                if (lane == 0) tile_skip = 1;
            } else {
                const float m_old = run_max;
                const float m_new = fmaxf(m_old, bm);
                const float r     = expf(m_old - m_new); // 0 on the first visible tile
                const float e0    = lane < kb ? expf(x0 - m_new) : 0.0f;
                const float e1    = lane + 32 < kb ? expf(x1 - m_new) : 0.0f;
                if (lane < kb) p[lane] = e0;
                if (lane + 32 < kb) p[lane + 32] = e1;
                const float sum = warp_sum(e0 + e1);
                if (lane == 0) {
                    run_sum   = run_sum * r + sum;
                    run_max   = m_new;
                    tile_r    = r;
                    tile_skip = 0;
                }
            }
        }
        __syncthreads();

        // 3. rescale and accumulate this thread's output dimensions
        if (!tile_skip) {
            const float r = tile_r;
            for (int64_t d = tid; d < Dv; d += FA_THREADS) {
                float a = acc[d] * r;
                for (int jj = 0; jj < kb; ++jj) {
                    const float pj = p[jj];
                    if (pj != 0.0f) a += pj * ggml_cuda_load_f32(vbase + (j0 + jj) * v.nb[1] + d * v.nb[0], v.type);
                }
                acc[d] = a;
            }
        }
        __syncthreads(); // p and the tile flags are rewritten by the next tile
    }

    float m = run_max, l = run_sum, r = 1.0f;
    if (sinks) {
        const float sv = sinks[h];
        if (sv != -INFINITY) {
            if (sv > m) {
                r = expf(m - sv);
                l *= r;
                m = sv;
            }
            l += expf(sv - m);
        }
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    char *      out = dst.data + h * dst.nb[1] + iq * dst.nb[2] + s * dst.nb[3];
    for (int64_t d = tid; d < Dv; d += FA_THREADS) ((float *) out)[d] = acc[d] * r * inv;
}

} // namespace

bool ggml_cuda_flash_attn_supports(const ggml_tensor * dst) {
    const ggml_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2];
    const ggml_tensor * mask = dst->src[3], * sinks = dst->src[4];
    if (!q || !k || !v) return false;
    if (!ggml_cuda_is_float(q->type) || !ggml_cuda_is_float(k->type) || !ggml_cuda_is_float(v->type)) return false;
    if (!ggml_cuda_elem_aligned(q) || !ggml_cuda_elem_aligned(k) || !ggml_cuda_elem_aligned(v)) return false;
    if (dst->type != GGML_TYPE_F32 || dst->nb[0] != sizeof(float) || !ggml_cuda_elem_aligned(dst)) return false;
    const int64_t D = q->ne[0], Dv = v->ne[0], n_q = q->ne[1], n_head = q->ne[2], S = q->ne[3];
    if (k->ne[0] != D || v->ne[1] != k->ne[1]) return false;
    if (dst->ne[0] != Dv || dst->ne[1] != n_head || dst->ne[2] != n_q || dst->ne[3] != S) return false;
    if (k->ne[2] <= 0 || v->ne[2] <= 0 || k->ne[3] <= 0 || v->ne[3] <= 0) return false;
    if (n_head % k->ne[2] != 0 || n_head % v->ne[2] != 0 || S % k->ne[3] != 0 || S % v->ne[3] != 0) return false;
    if (D + Dv + FA_KB > FA_MAX_SHARED_FLOATS) return false;
    if (ggml_get_op_params_f32(dst, 1) > 0.0f && !mask) return false; // ALiBi needs a mask
    if (mask) {
        if (mask->type != GGML_TYPE_F16 && mask->type != GGML_TYPE_F32) return false;
        if (!ggml_cuda_elem_aligned(mask) || mask->ne[0] < k->ne[1] || mask->ne[1] < n_q) return false;
        if (mask->ne[2] <= 0 || mask->ne[3] <= 0 || n_head % mask->ne[2] != 0 || S % mask->ne[3] != 0) return false;
    }
    if (sinks && (sinks->type != GGML_TYPE_F32 || !ggml_is_contiguous(sinks) || sinks->ne[0] < n_head)) return false;
    return n_q * n_head * S <= INT32_MAX;
}

void ggml_cuda_flash_attn_compute(ggml_cuda_op_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2];
    const ggml_tensor * mask = dst->src[3], * sinks = dst->src[4];
    const int64_t       blocks = q->ne[1] * q->ne[2] * q->ne[3];
    if (blocks == 0 || v->ne[0] == 0) return;

    const float max_bias = ggml_get_op_params_f32(dst, 1);
    fa_alibi    alibi;
    alibi.max_bias = max_bias;
    alibi.n_log2   = 1u << (uint32_t) std::floor(std::log2((double) q->ne[2]));
    alibi.m0       = std::pow(2.0f, -max_bias / (float) alibi.n_log2);
    alibi.m1       = std::pow(2.0f, -(max_bias / 2.0f) / (float) alibi.n_log2);

    const size_t shared = (size_t) (q->ne[0] + v->ne[0] + FA_KB) * sizeof(float);
    k_flash_attn<<<(unsigned) blocks, FA_THREADS, shared, ctx.stream>>>(
        ggml_cuda_desc(q), ggml_cuda_desc(k), ggml_cuda_desc(v), ggml_cuda_desc(mask ? mask : q), mask != nullptr,
        sinks ? (const float *) sinks->data : nullptr, ggml_cuda_desc(dst), ggml_get_op_params_f32(dst, 0),
        ggml_get_op_params_f32(dst, 2), alibi);
}
