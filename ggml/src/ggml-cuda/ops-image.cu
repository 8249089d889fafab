// ops-image.cu — CUDA kernels of the image ops: UPSCALE (nearest / bilinear / bicubic), IM2COL and
// IM2COL_3D, the direct convolutions CONV_2D, CONV_2D_DW and CONV_3D, CONV_TRANSPOSE_1D /
// CONV_TRANSPOSE_2D and the pools POOL_1D / POOL_2D.
//
// Semantics are the CPU backend's (ggml-cpu/ops-pool-upscale.cpp, ops-conv.cpp): the same
// op_params slots and index maps, float coordinate math for resampling (so nearest picks the same
// source element), taps outside the image read zero, F32 accumulation rounded once to the
// destination type. One thread per output element, gathering its inputs (no atomics, so results
// are deterministic). CONV_2D runs as tiles of im2col + a cuBLAS GEMM (F32 compute); the other
// convolutions are plain loops, correct rather than fast.

#include "ops-common.cuh"

#include <cfloat>
#include <cmath>

namespace {

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


// transposed 1-D: k [K, OC, IC], b [L, IC] -> dst [OL, OC]: out(o, oc) = sum over ic and taps kk
// with o = i*s0 + kk of b(i, ic) * k(kk, oc, ic)
__global__ void k_conv_transpose_1d(ggml_cuda_tdesc kt, ggml_cuda_tdesc b, ggml_cuda_tdesc d, int s0, int64_t n) {
    const int64_t K = kt.ne[0], IC = kt.ne[2], L = b.ne[0];
    GGML_CUDA_GRID_STRIDE(e, n) {
        const int64_t o = e % d.ne[0], oc = e / d.ne[0];
        float         acc = 0.0f;
        for (int64_t ic = 0; ic < IC; ++ic) {
            for (int64_t kk = 0; kk < K && kk <= o; ++kk) {
                if ((o - kk) % s0 != 0) continue;
                const int64_t i = (o - kk) / s0;
                if (i >= L) continue;
                acc += at(b, i, ic, 0, 0) * at(kt, kk, oc, ic, 0);
            }
        }
        *(float *) (d.data + o * d.nb[0] + oc * d.nb[1]) = acc;
    }
}

// transposed 2-D: k [KW, KH, OC, IC], b [W, H, IC, N] -> dst [OW, OH, OC, N] with stride s
__global__ void k_conv_transpose_2d(ggml_cuda_tdesc kt, ggml_cuda_tdesc b, ggml_cuda_tdesc d, int s, int64_t n) {
    const int64_t KW = kt.ne[0], KH = kt.ne[1], IC = kt.ne[3], W = b.ne[0], H = b.ne[1];
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t ox, oy, oc, nn;
        ggml_cuda_unravel(e, d.ne, ox, oy, oc, nn);
        float acc = 0.0f;
        for (int64_t ic = 0; ic < IC; ++ic) {
            for (int64_t ky = 0; ky < KH && ky <= oy; ++ky) {
                if ((oy - ky) % s != 0) continue;
                const int64_t y = (oy - ky) / s;
                if (y >= H) continue;
                for (int64_t kx = 0; kx < KW && kx <= ox; ++kx) {
                    if ((ox - kx) % s != 0) continue;
                    const int64_t x = (ox - kx) / s;
                    if (x >= W) continue;
                    acc += at(b, x, y, ic, nn) * at(kt, kx, ky, oc, ic);
                }
            }
        }
        *(float *) (d.data + ggml_cuda_offset(d, ox, oy, oc, nn)) = acc;
    }
}

__global__ void k_pool_1d(ggml_cuda_tdesc a, ggml_cuda_tdesc d, int op, int k0, int s0, int p0, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t o, i1, i2, i3;
        ggml_cuda_unravel(e, d.ne, o, i1, i2, i3);
        const bool is_max = op == GGML_OP_POOL_MAX;
        float      acc    = is_max ? -FLT_MAX : 0.0f;
        for (int k = 0; k < k0; ++k) {
            const int64_t x = o * s0 + k - p0;
            if (x < 0 || x >= a.ne[0]) continue;
            const float v = at(a, x, i1, i2, i3);
            acc           = is_max ? fmaxf(acc, v) : acc + v;
        }
        if (!is_max) acc /= (float) k0;
        *(float *) (d.data + ggml_cuda_offset(d, o, i1, i2, i3)) = acc;
    }
}

// CONV_2D as tiles of im2col + one cuBLAS GEMM each (F32 operands, F32 compute, never TF32):
// the kernel packed once as F32 [K, OC] (K = IC*KH*KW, element (c*KH + ky)*KW + kx), the im2col
// rows of a tile of output pixels as F32 [K, P], out [OC, P] = kernel^T . im2col, scattered into
// dst [OW, OH, OC, N]. Pixels are numbered q = ow + OW*(oh + OH*n).

__global__ void k_pack_conv_kernel(ggml_cuda_tdesc kt, float * w, int64_t n) {
    const int64_t KW = kt.ne[0], KH = kt.ne[1], K = KW * KH * kt.ne[2];
    GGML_CUDA_GRID_STRIDE(e, n) {
        const int64_t kk = e % K, oc = e / K;
        w[e] = at(kt, kk % KW, (kk / KW) % KH, kk / (KW * KH), oc);
    }
}

__global__ void k_im2col_tile(ggml_cuda_tdesc b, float * col, conv_args g, int64_t KW, int64_t KH, int64_t OW,
                              int64_t OH, int64_t q0, int64_t n) {
    const int64_t K = KW * KH * b.ne[2];
    GGML_CUDA_GRID_STRIDE(e, n) {
        const int64_t kk = e % K, q = q0 + e / K;
        const int64_t ow = q % OW, oh = (q / OW) % OH, nn = q / (OW * OH);
        const int64_t kx = kk % KW, ky = (kk / KW) % KH, c = kk / (KW * KH);
        const int64_t x = ow * g.s0 + kx * g.d0 - g.p0;
        const int64_t y = oh * g.s1 + ky * g.d1 - g.p1;
        col[e] = (x >= 0 && x < b.ne[0] && y >= 0 && y < b.ne[1]) ? at(b, x, y, c, nn) : 0.0f;
    }
}

__global__ void k_scatter_conv(const float * out, ggml_cuda_tdesc d, int64_t q0, int64_t n) {
    const int64_t OW = d.ne[0], OH = d.ne[1], OC = d.ne[2];
    GGML_CUDA_GRID_STRIDE(e, n) {
        const int64_t oc = e % OC, q = q0 + e / OC;
        const int64_t ow = q % OW, oh = (q / OW) % OH, nn = q / (OW * OH);
        ggml_cuda_store_f32(d.data + ggml_cuda_offset(d, ow, oh, oc, nn), d.type, out[e]);
    }
}

constexpr int64_t CONV_TILE_FLOATS = 32ll << 20; // im2col tile bound (128 MiB of F32)

void compute_conv_2d_gemm(ggml_cuda_op_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * k  = dst->src[0];
    const ggml_tensor * b  = dst->src[1];
    const int64_t       KW = k->ne[0], KH = k->ne[1], IC = k->ne[2], OC = k->ne[3];
    const int64_t       OW = dst->ne[0], OH = dst->ne[1], N = dst->ne[3];
    const int64_t       K = KW * KH * IC, pixels = OW * OH * N;
    const int           T = GGML_CUDA_EW_THREADS;

    ggml_cuda_pool_alloc<float> w(*ctx.pool, (size_t) (K * OC));
    k_pack_conv_kernel<<<ggml_cuda_ew_blocks(K * OC), T, 0, ctx.stream>>>(ggml_cuda_desc(k), w.get(), K * OC);

    int64_t tile = CONV_TILE_FLOATS / K;
    tile         = tile < 1 ? 1 : (tile > pixels ? pixels : tile);
    ggml_cuda_pool_alloc<float> col(*ctx.pool, (size_t) (K * tile));
    ggml_cuda_pool_alloc<float> out(*ctx.pool, (size_t) (OC * tile));
    const conv_args g   = conv_args_of(dst);
    const float     one = 1.0f, zero = 0.0f;
    for (int64_t q0 = 0; q0 < pixels; q0 += tile) {
        const int64_t P = pixels - q0 < tile ? pixels - q0 : tile;
        k_im2col_tile<<<ggml_cuda_ew_blocks(K * P), T, 0, ctx.stream>>>(ggml_cuda_desc(b), col.get(), g, KW, KH, OW, OH,
                                                                        q0, K * P);
        CUBLAS_CHECK(cublasGemmEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int) OC, (int) P, (int) K, &one, w.get(),
                                  CUDA_R_32F, (int) K, col.get(), CUDA_R_32F, (int) K, &zero, out.get(), CUDA_R_32F,
                                  (int) OC, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        k_scatter_conv<<<ggml_cuda_ew_blocks(OC * P), T, 0, ctx.stream>>>(out.get(), ggml_cuda_desc(dst), q0, OC * P);
    }
}

// the GEMM route's int arguments and pool buffers stay in range; otherwise the direct kernel
bool conv_2d_gemm_ok(const ggml_tensor * dst) {
    const ggml_tensor * k = dst->src[0];
    const int64_t       K = k->ne[0] * k->ne[1] * k->ne[2], OC = k->ne[3];
    return K > 0 && OC > 0 && K <= CONV_TILE_FLOATS && OC <= INT32_MAX / 2 && K * OC <= CONV_TILE_FLOATS;
}

// ---------------------------------------------------------------------------------------------
// 3-D: kernel [KW, KH, KD, IC*OC], data [W, H, D, IC*N] (channel c of image n at dim-3 index
// n*IC + c). IM2COL_3D: dst [IC*KD*KH*KW, OW, OH, OD*N], element k = ((c*KD + kz)*KH + ky)*KW + kx;
// CONV_3D: dst [OW, OH, OD, OC*N] (channel oc of image n at n*OC + oc).

struct conv3_args {
    int     s[3], p[3], d[3];
    int64_t IC;
};

__global__ void k_im2col_3d(ggml_cuda_tdesc kt, ggml_cuda_tdesc b, ggml_cuda_tdesc d, conv3_args g, int64_t OD, int64_t n) {
    const int64_t KW = kt.ne[0], KH = kt.ne[1], KD = kt.ne[2];
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t k, ox, oy, nz;
        ggml_cuda_unravel(e, d.ne, k, ox, oy, nz);
        const int64_t kx = k % KW, ky = (k / KW) % KH, kz = (k / (KW * KH)) % KD, c = k / (KW * KH * KD);
        const int64_t oz = nz % OD, nn = nz / OD;
        const int64_t x = ox * g.s[0] + kx * g.d[0] - g.p[0];
        const int64_t y = oy * g.s[1] + ky * g.d[1] - g.p[1];
        const int64_t z = oz * g.s[2] + kz * g.d[2] - g.p[2];
        float         v = 0.0f;
        if (x >= 0 && x < b.ne[0] && y >= 0 && y < b.ne[1] && z >= 0 && z < b.ne[2]) v = at(b, x, y, z, nn * g.IC + c);
        ggml_cuda_store_f32(d.data + ggml_cuda_offset(d, k, ox, oy, nz), d.type, v);
    }
}

__global__ void k_conv_3d(ggml_cuda_tdesc kt, ggml_cuda_tdesc b, ggml_cuda_tdesc d, conv3_args g, int64_t OC, int64_t n) {
    const int64_t KW = kt.ne[0], KH = kt.ne[1], KD = kt.ne[2];
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t ox, oy, oz, j;
        ggml_cuda_unravel(e, d.ne, ox, oy, oz, j);
        const int64_t oc = j % OC, nn = j / OC;
        float         acc = 0.0f;
        for (int64_t c = 0; c < g.IC; ++c) {
            for (int64_t kz = 0; kz < KD; ++kz) {
                const int64_t z = oz * g.s[2] + kz * g.d[2] - g.p[2];
                if (z < 0 || z >= b.ne[2]) continue;
                for (int64_t ky = 0; ky < KH; ++ky) {
                    const int64_t y = oy * g.s[1] + ky * g.d[1] - g.p[1];
                    if (y < 0 || y >= b.ne[1]) continue;
                    for (int64_t kx = 0; kx < KW; ++kx) {
                        const int64_t x = ox * g.s[0] + kx * g.d[0] - g.p[0];
                        if (x < 0 || x >= b.ne[0]) continue;
                        acc += at(kt, kx, ky, kz, oc * g.IC + c) * at(b, x, y, z, nn * g.IC + c);
                    }
                }
            }
        }
        ggml_cuda_store_f32(d.data + ggml_cuda_offset(d, ox, oy, oz, j), d.type, acc);
    }
}

// ---------------------------------------------------------------------------------------------
// Support checks

bool upscale_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    if (!a || !ggml_cuda_is_float(a->type) || dst->type != a->type || !ggml_cuda_aligned_all(dst, 1)) return false;
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
    if (!ggml_cuda_aligned_all(dst, 2)) return false;
    if (depthwise) return k->ne[2] == 1 && k->ne[3] == b->ne[2] && dst->ne[2] == b->ne[2] && dst->ne[3] == b->ne[3];
    return k->ne[2] == b->ne[2] && dst->ne[2] == k->ne[3] && dst->ne[3] == b->ne[3];
}



bool conv_transpose_supported(const ggml_tensor * dst) {
    const ggml_tensor * k = dst->src[0], * b = dst->src[1];
    if (!k || !b || !ggml_cuda_is_float(k->type) || !ggml_cuda_is_float(b->type) || dst->type != GGML_TYPE_F32) return false;
    if (!ggml_cuda_aligned_all(dst, 2) || ggml_get_op_params_i32(dst, 0) <= 0) return false;
    if (dst->op == GGML_OP_CONV_TRANSPOSE_1D) {
        return dst->ne[1] == k->ne[1] && b->ne[1] == k->ne[2] && b->ne[2] == 1 && b->ne[3] == 1 && k->ne[3] == 1 &&
               dst->ne[2] == 1 && dst->ne[3] == 1;
    }
    return b->ne[2] == k->ne[3] && dst->ne[2] == k->ne[2] && dst->ne[3] == b->ne[3];
}

bool pool_supported(const ggml_tensor * dst) {
    const ggml_tensor * a  = dst->src[0];
    const int           op = ggml_get_op_params_i32(dst, 0);
    if (!a || !ggml_cuda_is_float(a->type) || dst->type != GGML_TYPE_F32 || !ggml_cuda_aligned_all(dst, 1)) return false;
    if (op != GGML_OP_POOL_MAX && op != GGML_OP_POOL_AVG) return false;
    if (dst->op == GGML_OP_POOL_1D) {
        return ggml_get_op_params_i32(dst, 1) > 0 && ggml_get_op_params_i32(dst, 2) > 0 && dst->ne[1] == a->ne[1] &&
               dst->ne[2] == a->ne[2] && dst->ne[3] == a->ne[3];
    }
    return ggml_get_op_params_i32(dst, 1) > 0 && ggml_get_op_params_i32(dst, 2) > 0 && ggml_get_op_params_i32(dst, 3) > 0 &&
           ggml_get_op_params_i32(dst, 4) > 0 && dst->ne[2] == a->ne[2] && dst->ne[3] == a->ne[3];
}

conv3_args conv3_args_of(const ggml_tensor * dst) {
    conv3_args g;
    for (int i = 0; i < 3; ++i) {
        g.s[i] = ggml_get_op_params_i32(dst, i);
        g.p[i] = ggml_get_op_params_i32(dst, 3 + i);
        g.d[i] = ggml_get_op_params_i32(dst, 6 + i);
    }
    g.IC = ggml_get_op_params_i32(dst, 9);
    return g;
}

bool conv_3d_supported(const ggml_tensor * dst) {
    const ggml_tensor * k = dst->src[0], * b = dst->src[1];
    if (!k || !b || !ggml_cuda_is_float(b->type) || !ggml_cuda_is_float(dst->type)) return false;
    const int64_t IC = ggml_get_op_params_i32(dst, 9);
    if (IC <= 0 || b->ne[3] % IC != 0 || b->ne[3] == 0) return false;
    const int64_t N = b->ne[3] / IC;
    if (dst->op == GGML_OP_IM2COL_3D) {
        return ggml_cuda_elem_aligned(b) && ggml_cuda_elem_aligned(dst) &&
               dst->ne[0] == IC * k->ne[0] * k->ne[1] * k->ne[2] && dst->ne[3] % N == 0;
    }
    const int64_t OC = ggml_get_op_params_i32(dst, 11);
    return ggml_cuda_is_float(k->type) && ggml_cuda_aligned_all(dst, 2) && OC > 0 && k->ne[3] == IC * OC &&
           dst->ne[3] == OC * N;
}

} // namespace

bool ggml_cuda_image_supports(const ggml_tensor * op) {
    switch (op->op) {
        case GGML_OP_UPSCALE: return upscale_supported(op);
        case GGML_OP_IM2COL: return im2col_supported(op);
        case GGML_OP_IM2COL_3D:
        case GGML_OP_CONV_3D: return conv_3d_supported(op);
        case GGML_OP_CONV_2D: return conv_2d_supported(op, false);
        case GGML_OP_CONV_2D_DW: return conv_2d_supported(op, true);
        case GGML_OP_CONV_TRANSPOSE_1D:
        case GGML_OP_CONV_TRANSPOSE_2D: return conv_transpose_supported(op);
        case GGML_OP_POOL_1D:
        case GGML_OP_POOL_2D: return pool_supported(op);
        default: return false;
    }
}

void ggml_cuda_image_compute(ggml_cuda_op_ctx & ctx, ggml_tensor * node) {
    const int64_t n = ggml_nelements(node);
    if (n == 0) return;
    const unsigned blocks = ggml_cuda_ew_blocks(n);
    const int      T      = GGML_CUDA_EW_THREADS;
    cudaStream_t   st     = ctx.stream;
    ggml_tensor *  a      = node->src[0];

    switch (node->op) {
        case GGML_OP_UPSCALE: {
            if (ggml_is_empty(a)) break;
            const uint32_t mode  = (uint32_t) ggml_get_op_params_i32(node, 0);
            upscale_args   u;
            u.base           = (int) (mode & 0xFF);
            const bool align = (mode & GGML_SCALE_FLAG_ALIGN_CORNERS) != 0;
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
        case GGML_OP_IM2COL_3D: {
            const conv3_args g = conv3_args_of(node);
            const int64_t    N = node->src[1]->ne[3] / g.IC;
            k_im2col_3d<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node->src[1]), ggml_cuda_desc(node), g,
                                              node->ne[3] / N, n);
            break;
        }
        case GGML_OP_CONV_3D:
            k_conv_3d<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node->src[1]), ggml_cuda_desc(node),
                                            conv3_args_of(node), ggml_get_op_params_i32(node, 11), n);
            break;
        case GGML_OP_CONV_2D:
            if (conv_2d_gemm_ok(node)) {
                compute_conv_2d_gemm(ctx, node);
                break;
            }
            k_conv_2d<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node->src[1]), ggml_cuda_desc(node),
                                            conv_args_of(node), false, n);
            break;
        case GGML_OP_CONV_2D_DW:
            k_conv_2d<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node->src[1]), ggml_cuda_desc(node),
                                            conv_args_of(node), node->op == GGML_OP_CONV_2D_DW, n);
            break;
        case GGML_OP_CONV_TRANSPOSE_1D:
            k_conv_transpose_1d<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node->src[1]),
                                                      ggml_cuda_desc(node), ggml_get_op_params_i32(node, 0), n);
            break;
        case GGML_OP_CONV_TRANSPOSE_2D:
            k_conv_transpose_2d<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node->src[1]),
                                                      ggml_cuda_desc(node), ggml_get_op_params_i32(node, 0), n);
            break;
        case GGML_OP_POOL_1D:
            k_pool_1d<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node), ggml_get_op_params_i32(node, 0),
                                            ggml_get_op_params_i32(node, 1), ggml_get_op_params_i32(node, 2),
                                            ggml_get_op_params_i32(node, 3), n);
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
        default: GGML_ABORT("ggml-cuda: image op %s not handled", ggml_op_name(node->op));
    }
}
