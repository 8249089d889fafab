// ops-rows.cu — CUDA kernels of the ops that reduce or transform whole rows: normalisations
// (NORM, RMS_NORM, L2_NORM, GROUP_NORM), SOFT_MAX, ROPE, the reductions SUM, SUM_ROWS, MEAN,
// ARGMAX and the row sorts ARGSORT, TOP_K.
//
// Semantics are the CPU backend's portable kernels (ggml-cpu/ops-norm.cpp, ops-norm-group.cpp,
// ops-softmax.cpp, ops-rope.cpp, ops-reduce.cpp): same op_params slots, same broadcasting, same
// edge cases (an all -inf softmax row gives zeros). Row statistics and sums are accumulated in
// double as the CPU does, through block reductions of a fixed order (deterministic, no atomics).
// A thread only rewrites elements it read itself, so in-place nodes are safe.

#include "ops-common.cuh"

#include <cmath>

namespace {

constexpr int ROW_THREADS = 256; // threads of a row block (8 warps)

// Sum of v over the block, returned to every thread. Fixed shuffle/shared order: deterministic.
template <typename T> __device__ T block_sum(T v, T * sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    __syncthreads(); // sh may still be read from a previous reduction
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    T r = lane < nw ? sh[lane] : (T) 0;
    for (int o = 16; o > 0; o >>= 1) r += __shfl_xor_sync(0xFFFFFFFFu, r, o);
    return r;
}

__device__ float block_max(float v, float * sh) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    float r = lane < nw ? sh[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) r = fmaxf(r, __shfl_xor_sync(0xFFFFFFFFu, r, o));
    return r;
}

unsigned row_blocks(int64_t nrows) { return (unsigned) (nrows < 1 ? 1 : (nrows > 65535 * 16 ? 65535 * 16 : nrows)); }

// ---------------------------------------------------------------------------------------------
// NORM (0), RMS_NORM (1), L2_NORM (2): one block per row.

__global__ void k_norm(ggml_cuda_tdesc a, ggml_cuda_tdesc d, int kind, float eps, int64_t nrows) {
    __shared__ double sh[32];
    const int64_t ne0 = a.ne[0];
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        const int64_t i1 = r % a.ne[1], i2 = (r / a.ne[1]) % a.ne[2], i3 = r / (a.ne[1] * a.ne[2]);
        const char *  s  = a.data + ggml_cuda_offset(a, 0, i1, i2, i3);
        char *        y  = d.data + ggml_cuda_offset(d, 0, i1, i2, i3);

        double acc = 0.0;
        for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) {
            const double x = ggml_cuda_load_f32(s + i * a.nb[0], a.type);
            acc += kind == 0 ? x : x * x;
        }
        acc = block_sum(acc, sh);

        if (kind == 2) {
            const float scale = 1.0f / fmaxf((float) sqrt(acc), eps);
            for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) {
                const float x = ggml_cuda_load_f32(s + i * a.nb[0], a.type);
                ggml_cuda_store_f32(y + i * d.nb[0], d.type, x * scale);
            }
            continue;
        }
        double mean = 0.0, scale;
        if (kind == 0) {
            mean       = acc / (double) ne0;
            double var = 0.0;
            for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) {
                const double dx = (double) ggml_cuda_load_f32(s + i * a.nb[0], a.type) - mean;
                var += dx * dx;
            }
            var   = block_sum(var, sh) / (double) ne0;
            scale = 1.0 / sqrt(var + (double) eps);
        } else {
            scale = 1.0 / sqrt(acc / (double) ne0 + (double) eps);
        }
        for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) {
            const double x = ggml_cuda_load_f32(s + i * a.nb[0], a.type);
            ggml_cuda_store_f32(y + i * d.nb[0], d.type, (float) ((x - mean) * scale));
        }
    }
}

// GROUP_NORM: one block per (image i3, group g) over channels [c0, c1).
__global__ void k_group_norm(ggml_cuda_tdesc a, ggml_cuda_tdesc d, int n_groups, float eps) {
    __shared__ double sh[32];
    const int64_t ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
    const int64_t cpg = (ne2 + n_groups - 1) / n_groups;
    const int64_t i3  = blockIdx.x / n_groups;
    const int64_t g   = blockIdx.x % n_groups;
    const int64_t c0  = g * cpg;
    const int64_t c1  = c0 + cpg < ne2 ? c0 + cpg : ne2;
    if (c0 >= c1) return;
    const int64_t m = ne0 * ne1 * (c1 - c0);

    double sum = 0.0;
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x) {
        const int64_t i0 = e % ne0, i1 = (e / ne0) % ne1, c = c0 + e / (ne0 * ne1);
        sum += ggml_cuda_load_f32(a.data + ggml_cuda_offset(a, i0, i1, c, i3), a.type);
    }
    const double mean = block_sum(sum, sh) / (double) m;
    double       var  = 0.0;
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x) {
        const int64_t i0 = e % ne0, i1 = (e / ne0) % ne1, c = c0 + e / (ne0 * ne1);
        const double  dx = (double) ggml_cuda_load_f32(a.data + ggml_cuda_offset(a, i0, i1, c, i3), a.type) - mean;
        var += dx * dx;
    }
    var               = block_sum(var, sh);
    const float scale = (float) (1.0 / sqrt(var / (double) m + (double) eps));
    const float fmean = (float) mean;
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x) {
        const int64_t i0 = e % ne0, i1 = (e / ne0) % ne1, c = c0 + e / (ne0 * ne1);
        const float   x  = ggml_cuda_load_f32(a.data + ggml_cuda_offset(a, i0, i1, c, i3), a.type);
        ggml_cuda_store_f32(d.data + ggml_cuda_offset(d, i0, i1, c, i3), d.type, (x - fmean) * scale);
    }
}

// ---------------------------------------------------------------------------------------------
// SOFT_MAX: out = softmax(x*scale + slope*mask) over ne0, optional sink logit per head (i2).
// One block per row; the logits are staged in the output row itself (each thread only touches
// its own columns, so dst may alias src).

struct alibi_params {
    float    max_bias, m0, m1;
    uint32_t n_log2;
};

alibi_params make_alibi(float max_bias, int64_t n_head) {
    alibi_params p;
    p.max_bias = max_bias;
    p.n_log2   = n_head > 0 ? 1u << (uint32_t) std::floor(std::log2((double) n_head)) : 1u;
    p.m0       = std::pow(2.0f, -max_bias / (float) p.n_log2);
    p.m1       = std::pow(2.0f, -(max_bias / 2.0f) / (float) p.n_log2);
    return p;
}

__device__ float alibi_slope(const alibi_params & p, int64_t h) {
    if (p.max_bias <= 0.0f) return 1.0f;
    return (uint32_t) h < p.n_log2 ? powf(p.m0, (float) (h + 1)) : powf(p.m1, (float) (2 * (h - p.n_log2) + 1));
}

__global__ void k_soft_max(ggml_cuda_tdesc a, ggml_cuda_tdesc mask, bool has_mask, const float * sinks,
                           ggml_cuda_tdesc d, float scale, alibi_params ap, int64_t nrows) {
    __shared__ float  shf[32];
    __shared__ double shd[32];
    const int64_t ne0 = a.ne[0];
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        const int64_t i1 = r % a.ne[1], i2 = (r / a.ne[1]) % a.ne[2], i3 = r / (a.ne[1] * a.ne[2]);
        const float * x  = (const float *) (a.data + ggml_cuda_offset(a, 0, i1, i2, i3));
        float *       y  = (float *) (d.data + ggml_cuda_offset(d, 0, i1, i2, i3));
        const char *  mr = has_mask ? mask.data + ggml_cuda_offset(mask, 0, i1, i2 % mask.ne[2], i3 % mask.ne[3]) : nullptr;
        const float slope = has_mask ? alibi_slope(ap, i2) : 1.0f;

        float maxv = -INFINITY;
        for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) {
            float v = x[i] * scale;
            if (mr) v += slope * ggml_cuda_load_f32(mr + i * mask.nb[0], mask.type);
            y[i] = v;
            maxv = fmaxf(maxv, v);
        }
        const float sink = sinks ? sinks[i2] : -INFINITY;
        maxv             = fmaxf(block_max(maxv, shf), sink);
        if (maxv == -INFINITY) {
            for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) y[i] = 0.0f;
            continue;
        }
        double sum = 0.0;
        for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) {
            const float e = expf(y[i] - maxv);
            y[i]          = e;
            sum += e;
        }
        sum = block_sum(sum, shd);
        if (sinks) sum += expf(sink - maxv);
        const float inv = (float) (1.0 / sum);
        for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) y[i] *= inv;
    }
}

// ---------------------------------------------------------------------------------------------
// ROPE: one thread per output element; the first element of a rotated pair computes and writes
// both (reading both first), elements outside the rotated window are copied.

struct rope_args {
    int    n_dims, n_offs, mode; // mode: 0 NORMAL, 2 NEOX, 8 MROPE, 24 VISION, 40 IMROPE
    int    sect[4];
    float  freq_base, freq_scale, ext_factor, attn_factor, corr_low, corr_high;
    double mscale;
};

__device__ double rope_theta(const rope_args & ra, double pos, int i, int fidx, const float * ff) {
    const double f      = ff ? (double) ff[i] : 1.0;
    const double extrap = pos * pow((double) ra.freq_base, -2.0 * fidx / (double) ra.n_dims) / f;
    const double interp = (double) ra.freq_scale * extrap;
    if (ra.ext_factor == 0.0f) return interp;
    const double y    = ((double) i - ra.corr_low) / fmax(0.001, (double) ra.corr_high - ra.corr_low);
    const double ramp = 1.0 - fmin(1.0, fmax(0.0, y));
    const double mix  = ramp * ra.ext_factor;
    return interp * (1.0 - mix) + extrap * mix;
}

__global__ void k_rope(ggml_cuda_tdesc a, const int32_t * pos, const float * ff, ggml_cuda_tdesc d, rope_args ra,
                       int64_t n) {
    const bool    multi = ra.mode == GGML_ROPE_TYPE_MROPE || ra.mode == GGML_ROPE_TYPE_VISION ||
                       ra.mode == GGML_ROPE_TYPE_IMROPE;
    const int64_t ne2   = a.ne[2];
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t i0, i1, i2, i3;
        ggml_cuda_unravel(e, d.ne, i0, i1, i2, i3);
        const char * s = a.data + ggml_cuda_offset(a, 0, i1, i2, i3);
        char *       y = d.data + ggml_cuda_offset(d, 0, i1, i2, i3);
        const int64_t es = a.type == GGML_TYPE_F32 ? 4 : 2; // rows are packed (supports())

        int     pair = -1, fidx = 0, comp = 0;
        int64_t j0 = 0, j1 = 0; // element positions of the pair
        if (!multi) {
            const int64_t local = i0 - ra.n_offs;
            const int     half  = ra.n_dims / 2;
            if (local >= 0 && local < ra.n_dims) {
                if (ra.mode == GGML_ROPE_TYPE_NEOX) {
                    if (local < half) {
                        pair = (int) local;
                        j0   = ra.n_offs + local;
                        j1   = j0 + half;
                    } else {
                        continue; // written by its partner
                    }
                } else {
                    if (local % 2 == 0) {
                        pair = (int) (local / 2);
                        j0   = ra.n_offs + local;
                        j1   = j0 + 1;
                    } else {
                        continue;
                    }
                }
                fidx = pair;
            }
        } else {
            const bool vision  = ra.mode == GGML_ROPE_TYPE_VISION;
            const int  n_pairs = vision ? ra.n_dims : ra.n_dims / 2;
            if (i0 < 2 * (int64_t) n_pairs) {
                if (i0 >= n_pairs) continue;
                pair = (int) i0;
                j0   = i0;
                j1   = i0 + n_pairs;
                // which position component (t, h, w, e) drives the pair, and its frequency index
                const int sect_dims = ra.sect[0] + ra.sect[1] + ra.sect[2] + ra.sect[3];
                const int sct       = pair % sect_dims;
                const int b1 = ra.sect[0], b2 = b1 + ra.sect[1], b3 = b2 + ra.sect[2];
                fidx = pair;
                if (ra.mode == GGML_ROPE_TYPE_IMROPE) {
                    if (sct % 3 == 1 && sct < 3 * ra.sect[1]) comp = 1;
                    else if (sct % 3 == 2 && sct < 3 * ra.sect[2]) comp = 2;
                    else if (sct % 3 == 0 && sct < 3 * ra.sect[0]) comp = 0;
                    else comp = 3;
                } else {
                    comp            = sct < b1 ? 0 : sct < b2 ? 1 : sct < b3 ? 2 : 3;
                    const int start = comp == 0 ? 0 : comp == 1 ? b1 : comp == 2 ? b2 : b3;
                    if (vision) fidx = sct - start;
                }
            }
        }
        if (pair < 0) { // outside the rotated window: unchanged (not scaled by mscale)
            ggml_cuda_copy_elem(y + i0 * es, s + i0 * es, (int) es);
            continue;
        }
        const double p     = (double) pos[i2 + (multi ? comp * ne2 : 0)];
        const double theta = rope_theta(ra, p, pair, fidx, ff);
        const float  c     = (float) (cos(theta) * ra.mscale);
        const float  sn    = (float) (sin(theta) * ra.mscale);
        const float  x0    = ggml_cuda_load_f32(s + j0 * es, a.type);
        const float  x1    = ggml_cuda_load_f32(s + j1 * es, a.type);
        ggml_cuda_store_f32(y + j0 * es, d.type, x0 * c - x1 * sn);
        ggml_cuda_store_f32(y + j1 * es, d.type, x0 * sn + x1 * c);
    }
}


// ---------------------------------------------------------------------------------------------
// SUM (one block over every element), SUM_ROWS / MEAN (one block per row), ARGMAX (one block
// per row, the first maximum).

__global__ void k_sum_all(ggml_cuda_tdesc a, ggml_cuda_tdesc d, int64_t n) {
    __shared__ double sh[32];
    double            s = 0.0;
    for (int64_t e = threadIdx.x; e < n; e += blockDim.x) {
        int64_t i0, i1, i2, i3;
        ggml_cuda_unravel(e, a.ne, i0, i1, i2, i3);
        s += ggml_cuda_load_f32(a.data + ggml_cuda_offset(a, i0, i1, i2, i3), a.type);
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0) ggml_cuda_store_f32(d.data, d.type, (float) s);
}

__global__ void k_sum_rows(ggml_cuda_tdesc a, ggml_cuda_tdesc d, bool mean, int64_t nrows) {
    __shared__ double sh[32];
    const int64_t     ne0 = a.ne[0];
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        const int64_t i1 = r % a.ne[1], i2 = (r / a.ne[1]) % a.ne[2], i3 = r / (a.ne[1] * a.ne[2]);
        const char *  s  = a.data + ggml_cuda_offset(a, 0, i1, i2, i3);
        double        acc = 0.0;
        for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) acc += ggml_cuda_load_f32(s + i * a.nb[0], a.type);
        acc = block_sum(acc, sh);
        if (mean) acc /= (double) ne0;
        if (threadIdx.x == 0) ggml_cuda_store_f32(d.data + ggml_cuda_offset(d, 0, i1, i2, i3), d.type, (float) acc);
    }
}

__global__ void k_argmax(ggml_cuda_tdesc a, char * d, int64_t dnb0, int64_t nrows) {
    __shared__ float   shv[ROW_THREADS];
    __shared__ int64_t shi[ROW_THREADS];
    const int64_t      ne0 = a.ne[0];
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        const char * s = a.data + r * a.nb[1];
        // each thread scans its columns in increasing order (a later equal value never wins)
        float   bv = -INFINITY;
        int64_t bi = -1;
        for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) {
            const float v = ggml_cuda_load_f32(s + i * a.nb[0], a.type);
            if (bi < 0 || v > bv) {
                bv = v;
                bi = i;
            }
        }
        __syncthreads();
        shv[threadIdx.x] = bv;
        shi[threadIdx.x] = bi;
        __syncthreads();
        // tree over threads: the larger value wins, ties go to the smaller column
        for (int w = blockDim.x / 2; w > 0; w >>= 1) {
            if ((int) threadIdx.x < w) {
                const float   ov = shv[threadIdx.x + w];
                const int64_t oi = shi[threadIdx.x + w];
                const float   mv = shv[threadIdx.x];
                const int64_t mi = shi[threadIdx.x];
                if (oi >= 0 && (mi < 0 || ov > mv || (ov == mv && oi < mi))) {
                    shv[threadIdx.x] = ov;
                    shi[threadIdx.x] = oi;
                }
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) *(int32_t *) (d + r * dnb0) = (int32_t) (shi[0] < 0 ? 0 : shi[0]);
    }
}

// ARGSORT / TOP_K: a stable sort as the CPU's std::stable_sort, by rank: element i goes to
// position #{j : v_j before v_i} + #{j < i : v_j equivalent to v_i}. One block per row, the row
// staged in shared memory; O(n^2) comparisons, so rows are limited to ARGSORT_MAX_COLS.
constexpr int64_t ARGSORT_MAX_COLS = 8192;

__global__ void k_argsort(ggml_cuda_tdesc a, ggml_cuda_tdesc d, bool desc, int64_t nrows) {
    __shared__ float row[ARGSORT_MAX_COLS];
    const int64_t    n = a.ne[0], k = d.ne[0];
    for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
        const int64_t i1 = r % a.ne[1], i2 = (r / a.ne[1]) % a.ne[2], i3 = r / (a.ne[1] * a.ne[2]);
        const char *  s  = a.data + ggml_cuda_offset(a, 0, i1, i2, i3);
        char *        y  = d.data + ggml_cuda_offset(d, 0, i1, i2, i3);
        __syncthreads(); // the previous row is no longer read
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) row[i] = ggml_cuda_load_f32(s + i * a.nb[0], a.type);
        __syncthreads();
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
            const float vi   = row[i];
            int64_t     rank = 0;
            for (int64_t j = 0; j < n; ++j) {
                const float vj     = row[j];
                const bool  before = desc ? vj > vi : vj < vi;
                const bool  after  = desc ? vi > vj : vi < vj;
                rank += before || (!after && j < i);
            }
            if (rank < k) *(int32_t *) (y + rank * d.nb[0]) = (int32_t) i;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Support checks

bool soft_max_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * mask = dst->src[1], * sinks = dst->src[2];
    if (!a || a->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 || !ggml_are_same_shape(a, dst)) return false;
    if (!ggml_cuda_rows_packed(a) || !ggml_cuda_rows_packed(dst) || !ggml_cuda_aligned_all(dst, 1)) return false;
    if (ggml_get_op_params_f32(dst, 1) > 0.0f && !mask) return false; // ALiBi needs a mask
    if (mask) {
        if (mask->type != GGML_TYPE_F32 && mask->type != GGML_TYPE_F16) return false;
        if (!ggml_cuda_elem_aligned(mask) || mask->ne[0] != a->ne[0] || mask->ne[1] < a->ne[1]) return false;
        if (mask->ne[2] <= 0 || mask->ne[3] <= 0 || a->ne[2] % mask->ne[2] != 0 || a->ne[3] % mask->ne[3] != 0) return false;
    }
    if (sinks && (sinks->type != GGML_TYPE_F32 || !ggml_is_contiguous(sinks) || sinks->ne[0] < a->ne[2])) return false;
    return true;
}

bool rope_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * pos = dst->src[1], * ff = dst->src[2];
    if (!a || !pos) return false;
    if (a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_F16) return false;
    if (dst->type != a->type || !ggml_are_same_shape(a, dst)) return false;
    if (!ggml_cuda_rows_packed(a) || !ggml_cuda_rows_packed(dst) || !ggml_cuda_aligned_all(dst, 1)) return false;
    const int mode   = ggml_get_op_params_i32(dst, 2);
    const int n_dims = ggml_get_op_params_i32(dst, 1);
    const int n_offs = ggml_get_op_params_i32(dst, 15);
    const bool multi = mode == GGML_ROPE_TYPE_MROPE || mode == GGML_ROPE_TYPE_IMROPE || mode == GGML_ROPE_TYPE_VISION;
    if (!multi && mode != GGML_ROPE_TYPE_NORMAL && mode != GGML_ROPE_TYPE_NEOX) return false;
    if (n_dims < 0 || n_dims % 2 != 0 || n_offs < 0) return false;
    const int64_t window = mode == GGML_ROPE_TYPE_VISION ? 2 * (int64_t) n_dims : n_dims;
    if (n_offs + window > a->ne[0]) return false;
    if (pos->type != GGML_TYPE_I32 || !ggml_is_contiguous(pos) || pos->ne[0] < (multi ? 4 : 1) * a->ne[2]) return false;
    if (multi) {
        if (n_offs != 0) return false;
        int sum = 0;
        for (int k = 0; k < 4; ++k) {
            const int s = ggml_get_op_params_i32(dst, 11 + k);
            if (s < 0) return false;
            sum += s;
        }
        if (sum <= 0) return false;
    }
    if (ff) {
        const int64_t need = mode == GGML_ROPE_TYPE_VISION ? n_dims : n_dims / 2; // pairs index the factors
        if (ff->type != GGML_TYPE_F32 || !ggml_is_contiguous(ff) || ff->ne[0] < need) return false;
    }
    return true;
}


bool reduce_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    if (!a || !ggml_cuda_is_float(a->type) || !ggml_cuda_aligned_all(dst, 1)) return false;
    switch (dst->op) {
        case GGML_OP_SUM: return dst->type == a->type && ggml_nelements(dst) == 1;
        case GGML_OP_SUM_ROWS:
        case GGML_OP_MEAN:
            if (dst->ne[0] != 1 || dst->ne[1] != a->ne[1] || dst->ne[2] != a->ne[2] || dst->ne[3] != a->ne[3]) return false;
            return dst->op == GGML_OP_MEAN ? dst->type == GGML_TYPE_F32 : dst->type == a->type;
        case GGML_OP_ARGMAX:
            return dst->type == GGML_TYPE_I32 && a->ne[2] == 1 && a->ne[3] == 1 && dst->ne[0] == a->ne[1] &&
                   a->ne[0] <= INT32_MAX;
        case GGML_OP_ARGSORT:
        case GGML_OP_TOP_K: {
            if (dst->type != GGML_TYPE_I32 || a->ne[0] > ARGSORT_MAX_COLS) return false;
            if (dst->ne[1] != a->ne[1] || dst->ne[2] != a->ne[2] || dst->ne[3] != a->ne[3]) return false;
            if (dst->op == GGML_OP_TOP_K) return dst->ne[0] <= a->ne[0];
            const int order = ggml_get_op_params_i32(dst, 0);
            return dst->ne[0] == a->ne[0] && (order == GGML_SORT_ORDER_ASC || order == GGML_SORT_ORDER_DESC);
        }
        default: return false;
    }
}

void compute_rope(ggml_cuda_op_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * pos = dst->src[1], * ff = dst->src[2];
    rope_args ra;
    ra.n_dims      = ggml_get_op_params_i32(dst, 1);
    ra.mode        = ggml_get_op_params_i32(dst, 2);
    ra.n_offs      = ggml_get_op_params_i32(dst, 15);
    for (int k = 0; k < 4; ++k) ra.sect[k] = ggml_get_op_params_i32(dst, 11 + k);
    const int n_ctx_orig = ggml_get_op_params_i32(dst, 4);
    ra.freq_base   = ggml_get_op_params_f32(dst, 5);
    ra.freq_scale  = ggml_get_op_params_f32(dst, 6);
    ra.ext_factor  = ggml_get_op_params_f32(dst, 7);
    ra.attn_factor = ggml_get_op_params_f32(dst, 8);
    const float beta_fast = ggml_get_op_params_f32(dst, 9);
    const float beta_slow = ggml_get_op_params_f32(dst, 10);
    ra.corr_low = ra.corr_high = 0.0f;
    if (ra.ext_factor != 0.0f && ra.n_dims > 0) {
        float corr[2];
        ggml_rope_yarn_corr_dims(ra.n_dims, n_ctx_orig, ra.freq_base, beta_fast, beta_slow, corr);
        ra.corr_low  = corr[0];
        ra.corr_high = corr[1];
    }
    ra.mscale = ra.attn_factor;
    if (ra.ext_factor != 0.0f) ra.mscale *= 1.0 + 0.1 * std::log(1.0 / (double) ra.freq_scale);

    const int64_t n = ggml_nelements(dst);
    k_rope<<<ggml_cuda_ew_blocks(n), GGML_CUDA_EW_THREADS, 0, ctx.stream>>>(
        ggml_cuda_desc(a), (const int32_t *) pos->data, ff ? (const float *) ff->data : nullptr, ggml_cuda_desc(dst), ra, n);
}


} // namespace

bool ggml_cuda_rows_supports(const ggml_tensor * op) {
    switch (op->op) {
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM:
        case GGML_OP_L2_NORM: return ggml_cuda_same_float_type(op);
        case GGML_OP_GROUP_NORM: return ggml_cuda_same_float_type(op) && ggml_get_op_params_i32(op, 0) > 0;
        case GGML_OP_SOFT_MAX: return soft_max_supported(op);
        case GGML_OP_ROPE: return rope_supported(op);
        case GGML_OP_SUM:
        case GGML_OP_SUM_ROWS:
        case GGML_OP_MEAN:
        case GGML_OP_ARGMAX:
        case GGML_OP_ARGSORT:
        case GGML_OP_TOP_K: return reduce_supported(op);
        default: return false;
    }
}

void ggml_cuda_rows_compute(ggml_cuda_op_ctx & ctx, ggml_tensor * node) {
    const ggml_tensor * a  = node->src[0];
    cudaStream_t        st = ctx.stream;
    if (ggml_nelements(node) == 0) return;

    switch (node->op) {
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM:
        case GGML_OP_L2_NORM: {
            const int64_t nrows = ggml_nrows(node);
            const int     kind  = node->op == GGML_OP_NORM ? 0 : node->op == GGML_OP_RMS_NORM ? 1 : 2;
            k_norm<<<row_blocks(nrows), ROW_THREADS, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node), kind,
                                                              ggml_get_op_params_f32(node, 0), nrows);
            break;
        }
        case GGML_OP_GROUP_NORM: {
            const int n_groups = ggml_get_op_params_i32(node, 0);
            k_group_norm<<<(unsigned) (node->ne[3] * n_groups), ROW_THREADS, 0, st>>>(
                ggml_cuda_desc(a), ggml_cuda_desc(node), n_groups, ggml_get_op_params_f32(node, 1));
            break;
        }
        case GGML_OP_SOFT_MAX: {
            const ggml_tensor * mask  = node->src[1];
            const ggml_tensor * sinks = node->src[2];
            const int64_t       nrows = ggml_nrows(node);
            k_soft_max<<<row_blocks(nrows), ROW_THREADS, 0, st>>>(
                ggml_cuda_desc(a), ggml_cuda_desc(mask ? mask : a), mask != nullptr,
                sinks ? (const float *) sinks->data : nullptr, ggml_cuda_desc(node), ggml_get_op_params_f32(node, 0),
                make_alibi(ggml_get_op_params_f32(node, 1), a->ne[2]), nrows);
            break;
        }
        case GGML_OP_ROPE: compute_rope(ctx, node); break;
        case GGML_OP_SUM:
            if (ggml_is_empty(a)) { // the sum of nothing is 0 (all-zero bits in every float type)
                CUDA_CHECK(cudaMemsetAsync(node->data, 0, ggml_type_size(node->type), st));
                break;
            }
            k_sum_all<<<1, ROW_THREADS, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node), ggml_nelements(a));
            break;
        case GGML_OP_SUM_ROWS:
        case GGML_OP_MEAN: {
            const int64_t nrows = ggml_nrows(a);
            k_sum_rows<<<row_blocks(nrows), ROW_THREADS, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node),
                                                                  node->op == GGML_OP_MEAN, nrows);
            break;
        }
        case GGML_OP_ARGMAX:
            k_argmax<<<row_blocks(a->ne[1]), ROW_THREADS, 0, st>>>(ggml_cuda_desc(a), (char *) node->data,
                                                                  (int64_t) node->nb[0], a->ne[1]);
            break;
        case GGML_OP_ARGSORT:
        case GGML_OP_TOP_K: {
            const int64_t nrows = ggml_nrows(a);
            const bool    desc  = node->op == GGML_OP_TOP_K || ggml_get_op_params_i32(node, 0) == GGML_SORT_ORDER_DESC;
            k_argsort<<<row_blocks(nrows), ROW_THREADS, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node), desc, nrows);
            break;
        }
        default: GGML_ABORT("ggml-cuda: row op %s not handled", ggml_op_name(node->op));
    }
}
