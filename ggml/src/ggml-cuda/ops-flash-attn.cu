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
// One block per group of four queries of one head: the block stages a tile of K and V rows in
// shared memory (widened to F32 once, shared by the four queries), then each warp serves one
// query: lane j scores row j of the tile, the warp updates its running max and normaliser with
// shuffles, and every lane accumulates its own output dimensions in registers. Fixed reduction
// orders, no atomics: results are deterministic.

#include "ops-common.cuh"

#include <cmath>

namespace {

constexpr int FA_WARPS   = 4; // queries per block, one warp each
constexpr int FA_THREADS = 32 * FA_WARPS;
constexpr int FA_MAX_RR  = 16; // output dimensions per lane: Dv <= 512
constexpr int64_t FA_MAX_D     = 512;
constexpr size_t  FA_MAX_SHARED = 48 * 1024; // the default dynamic shared memory limit

// kv rows per tile (32, or fewer for wide heads) so that K (rows padded by one float against
// bank conflicts), V and the four query rows fit in shared memory; 0: does not fit
int fa_tile_rows(int64_t D, int64_t Dv) {
    for (int kb = 32; kb >= 8; kb /= 2) {
        const size_t floats = (size_t) kb * (size_t) (D + 1) + (size_t) kb * (size_t) Dv + (size_t) FA_WARPS * (size_t) D;
        if (floats * sizeof(float) <= FA_MAX_SHARED) return kb;
    }
    return 0;
}

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
             const float * sinks, ggml_cuda_tdesc dst, float scale, float softcap, fa_alibi alibi, int kb) {
    extern __shared__ float smem[];
    const int64_t D = q.ne[0], Dv = v.ne[0], n_q = q.ne[1], n_head = q.ne[2], S = q.ne[3], n_kv = k.ne[1];
    const int64_t ldk = D + 1;
    float * ks = smem;                 // [kb][D + 1]
    float * vs = ks + kb * ldk;        // [kb][Dv]
    float * qs = vs + kb * Dv;         // [FA_WARPS][D]

    const int     tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int64_t n_qt = (n_q + FA_WARPS - 1) / FA_WARPS;
    const int64_t b    = blockIdx.x;
    const int64_t qt   = b % n_qt;
    const int64_t h    = (b / n_qt) % n_head;
    const int64_t s    = b / (n_qt * n_head);
    const int64_t iq   = qt * FA_WARPS + warp;
    const bool    live = iq < n_q; // warp-uniform

    const char * kbase = k.data + (h / (n_head / k.ne[2])) * k.nb[2] + (s / (S / k.ne[3])) * k.nb[3];
    const char * vbase = v.data + (h / (n_head / v.ne[2])) * v.nb[2] + (s / (S / v.ne[3])) * v.nb[3];
    const char * mrow  = has_mask && live ? mask.data + iq * mask.nb[1] + (h % mask.ne[2]) * mask.nb[2] +
                                                (s % mask.ne[3]) * mask.nb[3]
                                          : nullptr;
    const float slope = has_mask ? fa_slope(alibi, h) : 1.0f;

    float * qw = qs + warp * D;
    if (live) {
        const char * qrow = q.data + iq * q.nb[1] + h * q.nb[2] + s * q.nb[3];
        for (int64_t d = lane; d < D; d += 32) qw[d] = ggml_cuda_load_f32(qrow + d * q.nb[0], q.type);
    }

    float run_max = -INFINITY, run_sum = 0.0f;
    float acc[FA_MAX_RR];
#pragma unroll
    for (int rr = 0; rr < FA_MAX_RR; ++rr) acc[rr] = 0.0f;

    for (int64_t j0 = 0; j0 < n_kv; j0 += kb) {
        const int rows = (int) (n_kv - j0 < kb ? n_kv - j0 : kb);

        // 1. stage the tile's K and V rows (F32), all threads
        __syncthreads(); // the previous tile is consumed
        for (int64_t e = tid; e < (int64_t) rows * D; e += FA_THREADS) {
            const int64_t j = e / D, d = e % D;
            ks[j * ldk + d] = ggml_cuda_load_f32(kbase + (j0 + j) * k.nb[1] + d * k.nb[0], k.type);
        }
        for (int64_t e = tid; e < (int64_t) rows * Dv; e += FA_THREADS) {
            const int64_t j = e / Dv, d = e % Dv;
            vs[j * Dv + d] = ggml_cuda_load_f32(vbase + (j0 + j) * v.nb[1] + d * v.nb[0], v.type);
        }
        __syncthreads();
        if (!live) continue;

        // 2. lane j scores row j (masked-out rows are -inf and cost no dot product)
        float x = -INFINITY;
        if (lane < rows) {
            const float mterm = mrow ? slope * ggml_cuda_load_f32(mrow + (j0 + lane) * mask.nb[0], mask.type) : 0.0f;
            if (mterm != -INFINITY) {
                const float * kr  = ks + lane * ldk;
                float         dot = 0.0f;
                for (int64_t d = 0; d < D; ++d) dot += qw[d] * kr[d];
                x = dot * scale;
                if (softcap != 0.0f) x = softcap * tanhf(x / softcap);
                x += mterm;
            }
        }

        // 3. online softmax update of this query (warp-uniform branch)
        const float bm = warp_max(x);
        if (bm == -INFINITY) continue;
        const float m_new = fmaxf(run_max, bm);
        const float r     = expf(run_max - m_new); // 0 on the first visible tile
        const float p     = expf(x - m_new);       // -inf -> 0
        run_sum           = run_sum * r + warp_sum(p);
        run_max           = m_new;

        // 4. rescale and accumulate this lane's output dimensions d = rr*32 + lane
#pragma unroll
        for (int rr = 0; rr < FA_MAX_RR; ++rr) acc[rr] *= r;
        for (int j = 0; j < rows; ++j) {
            const float pj = __shfl_sync(0xFFFFFFFFu, p, j);
            if (pj == 0.0f) continue;
            const float * vr = vs + j * Dv;
#pragma unroll
            for (int rr = 0; rr < FA_MAX_RR; ++rr) {
                const int64_t d = rr * 32 + lane;
                if (d < Dv) acc[rr] += pj * vr[d];
            }
        }
    }
    if (!live) return;

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
    float *     out = (float *) (dst.data + h * dst.nb[1] + iq * dst.nb[2] + s * dst.nb[3]);
#pragma unroll
    for (int rr = 0; rr < FA_MAX_RR; ++rr) {
        const int64_t d = rr * 32 + lane;
        if (d < Dv) out[d] = acc[rr] * r * inv;
    }
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
    if (D > FA_MAX_D || Dv > 32 * FA_MAX_RR || fa_tile_rows(D, Dv) == 0) return false;
    if (ggml_get_op_params_f32(dst, 1) > 0.0f && !mask) return false; // ALiBi needs a mask
    if (mask) {
        if (mask->type != GGML_TYPE_F16 && mask->type != GGML_TYPE_F32) return false;
        if (!ggml_cuda_elem_aligned(mask) || mask->ne[0] < k->ne[1] || mask->ne[1] < n_q) return false;
        if (mask->ne[2] <= 0 || mask->ne[3] <= 0 || n_head % mask->ne[2] != 0 || S % mask->ne[3] != 0) return false;
    }
    if (sinks && (sinks->type != GGML_TYPE_F32 || !ggml_is_contiguous(sinks) || sinks->ne[0] < n_head)) return false;
    return ((n_q + FA_WARPS - 1) / FA_WARPS) * n_head * S <= INT32_MAX;
}

void ggml_cuda_flash_attn_compute(ggml_cuda_op_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2];
    const ggml_tensor * mask = dst->src[3], * sinks = dst->src[4];
    const int64_t       blocks = ((q->ne[1] + FA_WARPS - 1) / FA_WARPS) * q->ne[2] * q->ne[3];
    if (blocks == 0 || v->ne[0] == 0) return;

    const float max_bias = ggml_get_op_params_f32(dst, 1);
    fa_alibi    alibi;
    alibi.max_bias = max_bias;
    alibi.n_log2   = 1u << (uint32_t) std::floor(std::log2((double) q->ne[2]));
    alibi.m0       = std::pow(2.0f, -max_bias / (float) alibi.n_log2);
    alibi.m1       = std::pow(2.0f, -(max_bias / 2.0f) / (float) alibi.n_log2);

    const int    kb     = fa_tile_rows(q->ne[0], v->ne[0]);
    const size_t shared = ((size_t) kb * (size_t) (q->ne[0] + 1) + (size_t) kb * (size_t) v->ne[0] +
                           (size_t) FA_WARPS * (size_t) q->ne[0]) * sizeof(float);
    k_flash_attn<<<(unsigned) blocks, FA_THREADS, shared, ctx.stream>>>(
        ggml_cuda_desc(q), ggml_cuda_desc(k), ggml_cuda_desc(v), ggml_cuda_desc(mask ? mask : q), mask != nullptr,
        sinks ? (const float *) sinks->data : nullptr, ggml_cuda_desc(dst), ggml_get_op_params_f32(dst, 0),
        ggml_get_op_params_f32(dst, 2), alibi, kb);
}
