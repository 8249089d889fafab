// ops-rows.cu — CUDA kernels of the ops that work along rows or move data by index:
// normalisations (NORM, RMS_NORM, L2_NORM, GROUP_NORM), SOFT_MAX, ROPE, GET_ROWS, CONCAT, PAD,
// REPEAT, ARANGE, TIMESTEP_EMBEDDING, UPSCALE, IM2COL and the direct image ops CONV_2D,
// CONV_2D_DW and POOL_2D.
//
// Semantics are the CPU backend's portable kernels (ggml-cpu/ops-norm.cpp, ops-norm-group.cpp,
// ops-softmax.cpp, ops-rope.cpp, ops-layout.cpp, ops-pool-upscale.cpp, ops-conv.cpp): same
// op_params slots, same broadcasting, same edge cases (all -inf softmax rows give zeros, out of
// range taps read zero). Row statistics are accumulated in double as the CPU does, through
// block reductions of a fixed order (deterministic). A thread only writes elements it read
// itself (or that no other thread reads), so in-place nodes are safe.

#include "ops-common.cuh"

#include <cfloat>
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
        const int64_t es = a.nb[0];

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
            ggml_cuda_copy_elem(y + i0 * d.nb[0], s + i0 * es, (int) es);
            continue;
        }
        const double p     = (double) pos[i2 + (multi ? comp * ne2 : 0)];
        const double theta = rope_theta(ra, p, pair, fidx, ff);
        const float  c     = (float) (cos(theta) * ra.mscale);
        const float  sn    = (float) (sin(theta) * ra.mscale);
        const float  x0    = ggml_cuda_load_f32(s + j0 * es, a.type);
        const float  x1    = ggml_cuda_load_f32(s + j1 * es, a.type);
        ggml_cuda_store_f32(y + j0 * d.nb[0], d.type, x0 * c - x1 * sn);
        ggml_cuda_store_f32(y + j1 * d.nb[0], d.type, x0 * sn + x1 * c);
    }
}

// ---------------------------------------------------------------------------------------------
// GET_ROWS: dst (i0, i10, i11, i12) = a (i0, b[i10, i11, i12], i11, i12). An index out of
// range gives a zero row (the CPU aborts; a kernel cannot).

__device__ __forceinline__ int64_t load_index(const ggml_cuda_tdesc & b, int64_t i10, int64_t i11, int64_t i12) {
    const char * p = b.data + ggml_cuda_offset(b, i10, i11, i12, 0);
    return b.type == GGML_TYPE_I32 ? (int64_t) * (const int32_t *) p : *(const int64_t *) p;
}

__global__ void k_get_rows(ggml_cuda_tdesc a, ggml_cuda_tdesc b, ggml_cuda_tdesc d, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t i0, i10, i11, i12;
        ggml_cuda_unravel(e, d.ne, i0, i10, i11, i12);
        const int64_t idx = load_index(b, i10, i11, i12);
        char *        dp  = d.data + ggml_cuda_offset(d, i0, i10, i11, i12);
        if (idx < 0 || idx >= a.ne[1]) {
            ggml_cuda_store_f32(dp, d.type, 0.0f);
            continue;
        }
        const char * sp = a.data + ggml_cuda_offset(a, i0, idx, i11, i12);
        if (a.type == d.type) {
            ggml_cuda_copy_elem(dp, sp, a.type == GGML_TYPE_F16 || a.type == GGML_TYPE_BF16 ? 2 : 4);
        } else {
            ggml_cuda_store_f32(dp, d.type, ggml_cuda_load_f32(sp, a.type));
        }
    }
}

// Block-quantized rows: the selected rows' raw bytes gathered into a packed buffer (then
// dequantized by the shared converter). Out-of-range indices give zero bytes.
__global__ void k_gather_rows(ggml_cuda_tdesc a, ggml_cuda_tdesc b, char * out, int64_t row_bytes, int64_t n) {
    const int64_t nb10 = b.ne[0], nb11 = b.ne[1];
    GGML_CUDA_GRID_STRIDE(e, n) {
        const int64_t r   = e / row_bytes, off = e % row_bytes;
        const int64_t i10 = r % nb10, i11 = (r / nb10) % nb11, i12 = r / (nb10 * nb11);
        const int64_t idx = load_index(b, i10, i11, i12);
        out[e] = (idx < 0 || idx >= a.ne[1]) ? 0 : a.data[idx * a.nb[1] + i11 * a.nb[2] + i12 * a.nb[3] + off];
    }
}

// ---------------------------------------------------------------------------------------------
// CONCAT / PAD / REPEAT: raw element moves (es bytes), one thread per output element.

__device__ __forceinline__ void zero_elem(char * p, int es) {
    for (int k = 0; k < es; ++k) p[k] = 0;
}

__global__ void k_concat(ggml_cuda_tdesc a, ggml_cuda_tdesc b, ggml_cuda_tdesc d, int dim, int es, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t i[4];
        ggml_cuda_unravel(e, d.ne, i[0], i[1], i[2], i[3]);
        char * dp = d.data + ggml_cuda_offset(d, i[0], i[1], i[2], i[3]);
        const ggml_cuda_tdesc * s = &a;
        if (i[dim] >= a.ne[dim]) {
            s = &b;
            i[dim] -= a.ne[dim];
        }
        ggml_cuda_copy_elem(dp, s->data + ggml_cuda_offset(*s, i[0], i[1], i[2], i[3]), es);
    }
}

struct pad_args {
    int64_t lp[4];
    bool    circular;
};

__global__ void k_pad(ggml_cuda_tdesc a, ggml_cuda_tdesc d, pad_args pa, int es, int64_t n) {
    const bool src_empty = a.ne[0] * a.ne[1] * a.ne[2] * a.ne[3] == 0;
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t i[4], j[4];
        ggml_cuda_unravel(e, d.ne, i[0], i[1], i[2], i[3]);
        char * dp     = d.data + ggml_cuda_offset(d, i[0], i[1], i[2], i[3]);
        bool   inside = !src_empty;
        for (int k = 0; k < 4 && inside; ++k) {
            j[k] = i[k] - pa.lp[k];
            if (j[k] < 0 || j[k] >= a.ne[k]) {
                if (pa.circular) {
                    const int64_t rr = j[k] % a.ne[k];
                    j[k]             = rr < 0 ? rr + a.ne[k] : rr;
                } else {
                    inside = false;
                }
            }
        }
        if (inside) {
            ggml_cuda_copy_elem(dp, a.data + ggml_cuda_offset(a, j[0], j[1], j[2], j[3]), es);
        } else {
            zero_elem(dp, es);
        }
    }
}

__global__ void k_repeat(ggml_cuda_tdesc a, ggml_cuda_tdesc d, int es, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t i0, i1, i2, i3;
        ggml_cuda_unravel(e, d.ne, i0, i1, i2, i3);
        ggml_cuda_copy_elem(d.data + ggml_cuda_offset(d, i0, i1, i2, i3),
                            a.data + ggml_cuda_offset(a, i0 % a.ne[0], i1 % a.ne[1], i2 % a.ne[2], i3 % a.ne[3]), es);
    }
}

// ---------------------------------------------------------------------------------------------
// ARANGE and TIMESTEP_EMBEDDING (double phase, as the CPU)

__global__ void k_arange(char * d, int64_t nb0, double start, double step, int64_t n) {
    GGML_CUDA_GRID_STRIDE(i, n) { *(float *) (d + i * nb0) = (float) (start + (double) i * step); }
}

__global__ void k_timestep(ggml_cuda_tdesc t, ggml_cuda_tdesc d, int64_t half, double log_mp, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        const int64_t j = e % d.ne[0], r = e / d.ne[0];
        float         v = 0.0f;
        if (j < 2 * half) {
            const double ts  = ggml_cuda_load_f32(t.data + r * t.nb[0], t.type);
            const int64_t jj = j < half ? j : j - half;
            const double  f  = exp(-log_mp * (double) jj / (double) half);
            v                = j < half ? (float) cos(ts * f) : (float) sin(ts * f);
        }
        *(float *) (d.data + r * d.nb[1] + j * d.nb[0]) = v;
    }
}

// ---------------------------------------------------------------------------------------------
// UPSCALE: nearest / bilinear / bicubic (a = -0.75), optional align-corners; float math as the CPU.

struct upscale_args {
    float sf[4];
    float off;
    int   base;
};

__device__ __forceinline__ int64_t clamp_i(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

__device__ __forceinline__ float at(const ggml_cuda_tdesc & a, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return ggml_cuda_load_f32(a.data + ggml_cuda_offset(a, i0, i1, i2, i3), a.type);
}

__device__ void cubic_weights(float t, float w[4]) {
    const float a = -0.75f;
    // |x| <= 1: ((a + 2) x - (a + 3)) x^2 + 1; 1 < |x| < 2: ((a x - 5a) x + 8a) x - 4a
    auto c1 = [a](float x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };
    auto c2 = [a](float x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };
    w[0]    = c2(t + 1);
    w[1]    = c1(t);
    w[2]    = c1(1 - t);
    w[3]    = c2(2 - t);
}

__global__ void k_upscale(ggml_cuda_tdesc a, ggml_cuda_tdesc d, upscale_args u, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t i0, i1, i2, i3;
        ggml_cuda_unravel(e, d.ne, i0, i1, i2, i3);
        const int64_t j2 = min((int64_t) ((float) i2 / u.sf[2]), a.ne[2] - 1);
        const int64_t j3 = min((int64_t) ((float) i3 / u.sf[3]), a.ne[3] - 1);
        float         v;
        if (u.base == GGML_SCALE_MODE_NEAREST) {
            const int64_t j0 = min((int64_t) ((float) i0 / u.sf[0]), a.ne[0] - 1);
            const int64_t j1 = min((int64_t) ((float) i1 / u.sf[1]), a.ne[1] - 1);
            v                = at(a, j0, j1, j2, j3);
        } else if (u.base == GGML_SCALE_MODE_BILINEAR) {
            const float   y  = ((float) i1 + u.off) / u.sf[1] - u.off;
            const int64_t yf = (int64_t) floorf(y);
            const float   dy = fmaxf(0.0f, fminf(1.0f, y - (float) yf));
            const int64_t y0 = clamp_i(yf, 0, a.ne[1] - 1), y1 = clamp_i(yf + 1, 0, a.ne[1] - 1);
            const float   x  = ((float) i0 + u.off) / u.sf[0] - u.off;
            const int64_t xf = (int64_t) floorf(x);
            const float   dx = fmaxf(0.0f, fminf(1.0f, x - (float) xf));
            const int64_t x0 = clamp_i(xf, 0, a.ne[0] - 1), x1 = clamp_i(xf + 1, 0, a.ne[0] - 1);
            v = at(a, x0, y0, j2, j3) * (1 - dx) * (1 - dy) + at(a, x1, y0, j2, j3) * dx * (1 - dy) +
                at(a, x0, y1, j2, j3) * (1 - dx) * dy + at(a, x1, y1, j2, j3) * dx * dy;
        } else {
            const float   y  = ((float) i1 + u.off) / u.sf[1] - u.off;
            const int64_t yf = (int64_t) floorf(y);
            const float   x  = ((float) i0 + u.off) / u.sf[0] - u.off;
            const int64_t xf = (int64_t) floorf(x);
            float         wy[4], wx[4];
            cubic_weights(y - (float) yf, wy);
            cubic_weights(x - (float) xf, wx);
            float acc = 0.0f;
            for (int j = 0; j < 4; ++j) {
                const int64_t yy = clamp_i(yf - 1 + j, 0, a.ne[1] - 1);
                float         rs = 0.0f;
                for (int i = 0; i < 4; ++i) rs += wx[i] * at(a, clamp_i(xf - 1 + i, 0, a.ne[0] - 1), yy, j2, j3);
                acc += wy[j] * rs;
            }
            v = acc;
        }
        ggml_cuda_store_f32(d.data + ggml_cuda_offset(d, i0, i1, i2, i3), d.type, v);
    }
}

// ---------------------------------------------------------------------------------------------
// IM2COL, CONV_2D, CONV_2D_DW, POOL_2D: one thread per output element.

struct conv_args {
    int s0, s1, p0, p1, d0, d1;
};

// im2col: dst row (ow, oh, n) element k = (c*KH + ky)*KW + kx. The image is [W, H, C, N] (2D)
// or [W, C, N] (1D, H = 1).
__global__ void k_im2col(ggml_cuda_tdesc b, ggml_cuda_tdesc d, conv_args g, int64_t KW, int64_t KH, bool is2d,
                         int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t k, ow, i2, i3;
        ggml_cuda_unravel(e, d.ne, k, ow, i2, i3);
        const int64_t kx = k % KW, ky = (k / KW) % KH, c = k / (KW * KH);
        const int64_t oh = is2d ? i2 : 0;
        const int64_t nn = is2d ? i3 : i2;
        const int64_t x  = ow * g.s0 + kx * g.d0 - g.p0;
        float         v  = 0.0f;
        if (is2d) {
            const int64_t y = oh * g.s1 + ky * g.d1 - g.p1;
            if (x >= 0 && x < b.ne[0] && y >= 0 && y < b.ne[1]) v = at(b, x, y, c, nn);
        } else {
            if (x >= 0 && x < b.ne[0]) v = at(b, x, c, nn, 0);
        }
        ggml_cuda_store_f32(d.data + ggml_cuda_offset(d, k, ow, i2, i3), d.type, v);
    }
}

// direct convolution: k [KW, KH, IC, OC], b [W, H, IC, N] -> dst [OW, OH, OC, N]; depthwise:
// k [KW, KH, 1, C], channel c reads only image channel c.
__global__ void k_conv_2d(ggml_cuda_tdesc kt, ggml_cuda_tdesc b, ggml_cuda_tdesc d, conv_args g, bool depthwise,
                          int64_t n) {
    const int64_t KW = kt.ne[0], KH = kt.ne[1];
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t ow, oh, oc, nn;
        ggml_cuda_unravel(e, d.ne, ow, oh, oc, nn);
        const int64_t IC  = depthwise ? 1 : kt.ne[2];
        float         acc = 0.0f;
        for (int64_t c = 0; c < IC; ++c) {
            const int64_t ic = depthwise ? oc : c;
            for (int64_t ky = 0; ky < KH; ++ky) {
                const int64_t y = oh * g.s1 + ky * g.d1 - g.p1;
                if (y < 0 || y >= b.ne[1]) continue;
                for (int64_t kx = 0; kx < KW; ++kx) {
                    const int64_t x = ow * g.s0 + kx * g.d0 - g.p0;
                    if (x < 0 || x >= b.ne[0]) continue;
                    const float w = depthwise ? at(kt, kx, ky, 0, oc) : at(kt, kx, ky, c, oc);
                    acc += w * at(b, x, y, ic, nn);
                }
            }
        }
        ggml_cuda_store_f32(d.data + ggml_cuda_offset(d, ow, oh, oc, nn), d.type, acc);
    }
}

struct pool_args {
    int op, k0, k1, s0, s1, p0, p1;
};

__global__ void k_pool_2d(ggml_cuda_tdesc a, ggml_cuda_tdesc d, pool_args pa, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t ox, oy, i2, i3;
        ggml_cuda_unravel(e, d.ne, ox, oy, i2, i3);
        const bool is_max = pa.op == GGML_OP_POOL_MAX;
        float      acc    = is_max ? -FLT_MAX : 0.0f;
        for (int ky = 0; ky < pa.k1; ++ky) {
            const int64_t y = oy * pa.s1 + ky - pa.p1;
            if (y < 0 || y >= a.ne[1]) continue;
            for (int kx = 0; kx < pa.k0; ++kx) {
                const int64_t x = ox * pa.s0 + kx - pa.p0;
                if (x < 0 || x >= a.ne[0]) continue;
                const float v = at(a, x, y, i2, i3);
                acc           = is_max ? fmaxf(acc, v) : acc + v;
            }
        }
        if (!is_max) acc /= (float) (pa.k0 * pa.k1);
        *(float *) (d.data + ggml_cuda_offset(d, ox, oy, i2, i3)) = acc;
    }
}

// ---------------------------------------------------------------------------------------------
// Support checks

bool aligned_all(const ggml_tensor * node, int n_src) {
    if (!ggml_cuda_elem_aligned(node)) return false;
    for (int i = 0; i < n_src; ++i) {
        if (node->src[i] && !ggml_cuda_elem_aligned(node->src[i])) return false;
    }
    return true;
}

bool same_float_type(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    return a && ggml_cuda_is_float(a->type) && dst->type == a->type && ggml_are_same_shape(a, dst) &&
           aligned_all(dst, 1);
}

// element sizes the raw moves handle
bool movable(ggml_type t) {
    if (ggml_blck_size(t) != 1) return false;
    const size_t ts = ggml_type_size(t);
    return ts == 1 || ts == 2 || ts == 4 || ts == 8;
}

bool soft_max_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * mask = dst->src[1], * sinks = dst->src[2];
    if (!a || a->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 || !ggml_are_same_shape(a, dst)) return false;
    if (!ggml_cuda_rows_packed(a) || !ggml_cuda_rows_packed(dst) || !aligned_all(dst, 1)) return false;
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
    if (!ggml_cuda_rows_packed(a) || !ggml_cuda_rows_packed(dst) || !aligned_all(dst, 1)) return false;
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

bool get_rows_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * idx = dst->src[1];
    if (!a || !idx || (idx->type != GGML_TYPE_I32 && idx->type != GGML_TYPE_I64)) return false;
    if (!ggml_cuda_elem_aligned(idx) || !ggml_cuda_elem_aligned(dst)) return false;
    if (dst->ne[0] != a->ne[0] || dst->ne[1] != idx->ne[0] || dst->ne[2] != idx->ne[1] || dst->ne[3] != idx->ne[2]) return false;
    if (idx->ne[1] != a->ne[2] || idx->ne[2] != a->ne[3] || idx->ne[3] != 1) return false;
    if (ggml_cuda_is_word(a->type)) {
        return ggml_cuda_elem_aligned(a) && (dst->type == GGML_TYPE_F32 || dst->type == GGML_TYPE_I32);
    }
    // block-quantized rows: gathered, then dequantized straight into a packed F32 dst
    return ggml_blck_size(a->type) > 1 && ggml_cuda_can_convert(a->type) && dst->type == GGML_TYPE_F32 &&
           ggml_is_contiguous(dst) && a->ne[0] % ggml_blck_size(a->type) == 0 &&
           a->nb[0] == ggml_type_size(a->type);
}

bool concat_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * b = dst->src[1];
    const int           dim = ggml_get_op_params_i32(dst, 0);
    if (!a || !b || a->type != dst->type || b->type != dst->type || !movable(dst->type)) return false;
    if (dim < 0 || dim >= GGML_MAX_DIMS || !aligned_all(dst, 2)) return false;
    for (int d = 0; d < GGML_MAX_DIMS; ++d) {
        if (d == dim ? dst->ne[d] != a->ne[d] + b->ne[d] : (dst->ne[d] != a->ne[d] || dst->ne[d] != b->ne[d])) return false;
    }
    return true;
}

bool pad_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    if (!a || a->type != dst->type || !movable(dst->type) || !aligned_all(dst, 1)) return false;
    for (int d = 0; d < 4; ++d) {
        const int64_t lp = ggml_get_op_params_i32(dst, 2 * d), rp = ggml_get_op_params_i32(dst, 2 * d + 1);
        if (lp < 0 || rp < 0 || dst->ne[d] != a->ne[d] + lp + rp) return false;
    }
    return ggml_get_op_params_i32(dst, 8) == 0 || !ggml_is_empty(a);
}

bool upscale_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    if (!a || !ggml_cuda_is_float(a->type) || dst->type != a->type || !aligned_all(dst, 1)) return false;
    const uint32_t mode = (uint32_t) ggml_get_op_params_i32(dst, 0);
    if ((mode & ~(0xFFu | (uint32_t) GGML_SCALE_FLAG_ALIGN_CORNERS)) != 0) return false;
    return (mode & 0xFF) < GGML_SCALE_MODE_COUNT;
}

bool im2col_supported(const ggml_tensor * dst) {
    const ggml_tensor * k = dst->src[0], * b = dst->src[1];
    if (!k || !b || !ggml_cuda_is_float(b->type) || !ggml_cuda_is_float(dst->type)) return false;
    if (!ggml_cuda_elem_aligned(b) || !ggml_cuda_elem_aligned(dst)) return false;
    const bool    is2d = ggml_get_op_params_i32(dst, 6) != 0;
    const int64_t KH   = is2d ? k->ne[1] : 1;
    const int64_t IC   = is2d ? b->ne[2] : b->ne[1];
    if (dst->ne[0] != IC * KH * k->ne[0]) return false;
    return is2d ? dst->ne[3] == b->ne[3] : (dst->ne[2] == b->ne[2] && dst->ne[3] == 1);
}

bool conv_2d_supported(const ggml_tensor * dst, bool depthwise) {
    const ggml_tensor * k = dst->src[0], * b = dst->src[1];
    if (!k || !b || !ggml_cuda_is_float(k->type) || !ggml_cuda_is_float(b->type) || !ggml_cuda_is_float(dst->type)) return false;
    if (!aligned_all(dst, 2)) return false;
    if (depthwise) return k->ne[2] == 1 && k->ne[3] == b->ne[2] && dst->ne[2] == b->ne[2] && dst->ne[3] == b->ne[3];
    return k->ne[2] == b->ne[2] && dst->ne[2] == k->ne[3] && dst->ne[3] == b->ne[3];
}

conv_args conv_args_of(const ggml_tensor * dst) {
    conv_args g;
    g.s0 = ggml_get_op_params_i32(dst, 0);
    g.s1 = ggml_get_op_params_i32(dst, 1);
    g.p0 = ggml_get_op_params_i32(dst, 2);
    g.p1 = ggml_get_op_params_i32(dst, 3);
    g.d0 = ggml_get_op_params_i32(dst, 4);
    g.d1 = ggml_get_op_params_i32(dst, 5);
    return g;
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

void compute_get_rows(ggml_cuda_op_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * idx = dst->src[1];
    const int64_t       n = ggml_nelements(dst);
    if (ggml_cuda_is_word(a->type)) {
        k_get_rows<<<ggml_cuda_ew_blocks(n), GGML_CUDA_EW_THREADS, 0, ctx.stream>>>(ggml_cuda_desc(a), ggml_cuda_desc(idx),
                                                                                  ggml_cuda_desc(dst), n);
        return;
    }
    const int64_t row_bytes = (int64_t) ggml_row_size(a->type, a->ne[0]);
    const int64_t nrows     = ggml_nelements(idx);
    const int64_t total     = row_bytes * nrows;
    ggml_cuda_pool_alloc<char> packed(*ctx.pool, (size_t) total);
    k_gather_rows<<<ggml_cuda_ew_blocks(total), GGML_CUDA_EW_THREADS, 0, ctx.stream>>>(
        ggml_cuda_desc(a), ggml_cuda_desc(idx), packed.get(), row_bytes, total);
    ggml_cuda_convert_to_f32(packed.get(), a->type, (float *) dst->data, n, ctx.stream);
}

} // namespace

bool ggml_cuda_rows_supports(const ggml_tensor * op) {
    switch (op->op) {
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM:
        case GGML_OP_L2_NORM: return same_float_type(op);
        case GGML_OP_GROUP_NORM: return same_float_type(op) && ggml_get_op_params_i32(op, 0) > 0;
        case GGML_OP_SOFT_MAX: return soft_max_supported(op);
        case GGML_OP_ROPE: return rope_supported(op);
        case GGML_OP_GET_ROWS: return get_rows_supported(op);
        case GGML_OP_CONCAT: return concat_supported(op);
        case GGML_OP_PAD: return pad_supported(op);
        case GGML_OP_REPEAT:
            return op->src[0] && op->src[0]->type == op->type && movable(op->type) && ggml_can_repeat(op->src[0], op) &&
                   aligned_all(op, 1);
        case GGML_OP_ARANGE: return op->type == GGML_TYPE_F32 && ggml_cuda_elem_aligned(op);
        case GGML_OP_TIMESTEP_EMBEDDING: {
            const ggml_tensor * t = op->src[0];
            const int64_t half = ggml_get_op_params_i32(op, 0) / 2;
            return op->type == GGML_TYPE_F32 && t && t->type == GGML_TYPE_F32 && aligned_all(op, 1) &&
                   half >= 0 && op->ne[0] >= 2 * half && op->ne[1] == t->ne[0] && op->ne[2] == 1 && op->ne[3] == 1;
        }
        case GGML_OP_UPSCALE: return upscale_supported(op);
        case GGML_OP_IM2COL: return im2col_supported(op);
        case GGML_OP_CONV_2D: return conv_2d_supported(op, false);
        case GGML_OP_CONV_2D_DW: return conv_2d_supported(op, true);
        case GGML_OP_POOL_2D: {
            const ggml_tensor * a = op->src[0];
            const int           pop = ggml_get_op_params_i32(op, 0);
            return a && ggml_cuda_is_float(a->type) && op->type == GGML_TYPE_F32 && aligned_all(op, 1) &&
                   (pop == GGML_OP_POOL_MAX || pop == GGML_OP_POOL_AVG) && op->ne[2] == a->ne[2] && op->ne[3] == a->ne[3];
        }
        default: return false;
    }
}

void ggml_cuda_rows_compute(ggml_cuda_op_ctx & ctx, ggml_tensor * node) {
    const int64_t n     = ggml_nelements(node);
    const int64_t nrows = ggml_nrows(node);
    if (n == 0) return;
    const unsigned blocks = ggml_cuda_ew_blocks(n);
    const int      T      = GGML_CUDA_EW_THREADS;
    cudaStream_t   st     = ctx.stream;
    ggml_tensor *  a      = node->src[0];

    switch (node->op) {
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM:
        case GGML_OP_L2_NORM: {
            const int kind = node->op == GGML_OP_NORM ? 0 : node->op == GGML_OP_RMS_NORM ? 1 : 2;
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
            k_soft_max<<<row_blocks(nrows), ROW_THREADS, 0, st>>>(
                ggml_cuda_desc(a), ggml_cuda_desc(mask ? mask : a), mask != nullptr,
                sinks ? (const float *) sinks->data : nullptr, ggml_cuda_desc(node), ggml_get_op_params_f32(node, 0),
                make_alibi(ggml_get_op_params_f32(node, 1), a->ne[2]), nrows);
            break;
        }
        case GGML_OP_ROPE: compute_rope(ctx, node); break;
        case GGML_OP_GET_ROWS: compute_get_rows(ctx, node); break;
        case GGML_OP_CONCAT:
            k_concat<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node->src[1]), ggml_cuda_desc(node),
                                           ggml_get_op_params_i32(node, 0), (int) ggml_type_size(node->type), n);
            break;
        case GGML_OP_PAD: {
            pad_args pa;
            for (int d = 0; d < 4; ++d) pa.lp[d] = ggml_get_op_params_i32(node, 2 * d);
            pa.circular = ggml_get_op_params_i32(node, 8) != 0;
            k_pad<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node), pa, (int) ggml_type_size(node->type), n);
            break;
        }
        case GGML_OP_REPEAT:
            if (ggml_is_empty(a)) break;
            k_repeat<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node), (int) ggml_type_size(node->type), n);
            break;
        case GGML_OP_ARANGE:
            k_arange<<<ggml_cuda_ew_blocks(node->ne[0]), T, 0, st>>>((char *) node->data, (int64_t) node->nb[0],
                                                                     (double) ggml_get_op_params_f32(node, 0),
                                                                     (double) ggml_get_op_params_f32(node, 2), node->ne[0]);
            break;
        case GGML_OP_TIMESTEP_EMBEDDING: {
            const int dim        = ggml_get_op_params_i32(node, 0);
            const int max_period = ggml_get_op_params_i32(node, 1);
            k_timestep<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node), (int64_t) (dim / 2),
                                             std::log((double) max_period), node->ne[0] * node->ne[1]);
            break;
        }
        case GGML_OP_UPSCALE: {
            if (ggml_is_empty(a)) break;
            const uint32_t mode  = (uint32_t) ggml_get_op_params_i32(node, 0);
            upscale_args   u;
            u.base            = (int) (mode & 0xFF);
            const bool align  = (mode & GGML_SCALE_FLAG_ALIGN_CORNERS) != 0;
            for (int d = 0; d < 4; ++d) u.sf[d] = (float) node->ne[d] / (float) a->ne[d];
            u.off = 0.5f;
            if (u.base != GGML_SCALE_MODE_NEAREST && align) {
                u.off = 0.0f;
                for (int d = 0; d < 2; ++d) {
                    if (node->ne[d] > 1 && a->ne[d] > 1) u.sf[d] = (float) (node->ne[d] - 1) / (float) (a->ne[d] - 1);
                }
            }
            k_upscale<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node), u, n);
            break;
        }
        case GGML_OP_IM2COL: {
            const bool is2d = ggml_get_op_params_i32(node, 6) != 0;
            conv_args  g    = conv_args_of(node);
            if (!is2d) {
                g.s1 = 1;
                g.p1 = 0;
                g.d1 = 1;
            }
            k_im2col<<<blocks, T, 0, st>>>(ggml_cuda_desc(node->src[1]), ggml_cuda_desc(node), g, a->ne[0],
                                           is2d ? a->ne[1] : 1, is2d, n);
            break;
        }
        case GGML_OP_CONV_2D:
        case GGML_OP_CONV_2D_DW:
            k_conv_2d<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node->src[1]), ggml_cuda_desc(node),
                                            conv_args_of(node), node->op == GGML_OP_CONV_2D_DW, n);
            break;
        case GGML_OP_POOL_2D: {
            pool_args pa;
            pa.op = ggml_get_op_params_i32(node, 0);
            pa.k0 = ggml_get_op_params_i32(node, 1);
            pa.k1 = ggml_get_op_params_i32(node, 2);
            pa.s0 = ggml_get_op_params_i32(node, 3);
            pa.s1 = ggml_get_op_params_i32(node, 4);
            pa.p0 = ggml_get_op_params_i32(node, 5);
            pa.p1 = ggml_get_op_params_i32(node, 6);
            k_pool_2d<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node), pa, n);
            break;
        }
        default: GGML_ABORT("ggml-cuda: row op %s not handled", ggml_op_name(node->op));
    }
}
