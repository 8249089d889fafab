// ops-conv.cpp — portable CPU kernels of the convolution family: IM2COL, IM2COL_3D, CONV_2D
// (direct), CONV_2D_DW, CONV_3D (direct, plain loops), CONV_TRANSPOSE_1D, CONV_TRANSPOSE_2D.
//
// CONV_2D is the hot op of VAE decoding. It never materialises the whole im2col matrix (at
// 512 channels x 3x3 x 128x128 that is 300 MB in F32): output pixels are processed in tiles; for
// each tile all threads build the im2col rows of the tile (F32) in the work buffer, then the
// tile is one MUL_MAT of the kernel ([IC*KH*KW, OC] rows, any float type) with those rows, run by
// the MUL_MAT kernel itself (so the AVX-512 packed GEMM is used where the CPU has it), and the
// [OC, pixels] result is scattered into dst. Every step ends in a barrier, and no thread leaves
// the tile loop early (an abort only makes the GEMM return sooner), so barriers always match.
//
// Precision: all arithmetic in F32 with F32 accumulation (F16/BF16 operands are widened
// exactly); results are rounded once to dst's type.

#include "ops-fast.h"
#include "ops-row.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace {

inline float load_f(ggml_type t, const char * p) {
    switch (t) {
        case GGML_TYPE_F32: {
            float v;
            memcpy(&v, p, sizeof(v));
            return v;
        }
        case GGML_TYPE_F16: {
            ggml_fp16_t h;
            memcpy(&h, p, sizeof(h));
            return ggml_fp16_to_fp32(h);
        }
        default: return ggml_load_f32(t, p);
    }
}

// Geometry of an image operand seen as [W, H, C, N] (1-D im2col data maps to H = 1).
struct image {
    const char * data;
    ggml_type    type;
    int64_t      W, H, C, N;
    size_t       nbw, nbh, nbc, nbn;
    float at(int64_t x, int64_t y, int64_t c, int64_t n) const {
        return load_f(type, data + x * nbw + y * nbh + c * nbc + n * nbn);
    }
};

image image_2d(const ggml_tensor * t) {
    return {(const char *) t->data, t->type, t->ne[0], t->ne[1], t->ne[2], t->ne[3], t->nb[0], t->nb[1], t->nb[2], t->nb[3]};
}

struct conv_geom {
    int64_t KW, KH, IC, OC, OW, OH;
    int     s0, s1, p0, p1, d0, d1;
};

// One im2col row (output pixel ow, oh of image n): out[(c*KH + ky)*KW + kx].
void im2col_row(const image & in, const conv_geom & g, int64_t ow, int64_t oh, int64_t n, float * out) {
    for (int64_t c = 0; c < g.IC; ++c) {
        for (int64_t ky = 0; ky < g.KH; ++ky) {
            const int64_t y   = oh * g.s1 + ky * g.d1 - g.p1;
            float *       row = out + (c * g.KH + ky) * g.KW;
            if (y < 0 || y >= in.H) {
                std::fill(row, row + g.KW, 0.0f);
                continue;
            }
            const int64_t x0 = ow * g.s0 - g.p0;
            if (in.type == GGML_TYPE_F32 && g.d0 == 1 && in.nbw == sizeof(float)) {
                // packed F32 rows: one copy of the taps inside the image, zeros around it
                const int64_t lo = std::max<int64_t>(0, -x0);
                const int64_t hi = std::min<int64_t>(g.KW, in.W - x0);
                if (lo >= hi) {
                    std::fill(row, row + g.KW, 0.0f);
                    continue;
                }
                // a 3x3 kernel copies 3 floats per (c, ky): a plain loop, not a memcpy call
                const float * src = (const float *) (in.data + x0 * in.nbw + y * in.nbh + c * in.nbc + n * in.nbn);
                for (int64_t kx = 0; kx < lo; ++kx) row[kx] = 0.0f;
                for (int64_t kx = lo; kx < hi; ++kx) row[kx] = src[kx];
                for (int64_t kx = hi; kx < g.KW; ++kx) row[kx] = 0.0f;
                continue;
            }
            for (int64_t kx = 0; kx < g.KW; ++kx) {
                const int64_t x = x0 + kx * g.d0;
                row[kx]         = (x < 0 || x >= in.W) ? 0.0f : in.at(x, y, c, n);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// CONV_2D tiling

constexpr size_t CONV_ALIGN = 64;

inline size_t align_up(size_t x) { return (x + CONV_ALIGN - 1) / CONV_ALIGN * CONV_ALIGN; }

struct conv2d_plan {
    conv_geom g;
    int64_t   N, K, pixels; // pixels = N*OH*OW
    int64_t   tile;         // pixels per tile
    bool      kernel_copy;  // kernel rows not packed as [K, OC]: copied to F32 first
    size_t    kernel_bytes, col_bytes, out_bytes, mm_bytes;
};

// Fake MUL_MAT node over the tile buffers: src0 = kernel [K, OC], src1 = im2col rows [K, P],
// dst = [OC, P]. Built on the stack; only the fields the MUL_MAT kernel reads are set.
struct tile_node {
    ggml_tensor a{}, b{}, d{};
    void init(ggml_type a_type, const void * a_data, int64_t K, int64_t OC, float * col, float * out, int64_t P) {
        const size_t ats = ggml_type_size(a_type);
        a.type  = a_type;
        a.data  = const_cast<void *>(a_data);
        a.ne[0] = K; a.ne[1] = OC; a.ne[2] = 1; a.ne[3] = 1;
        a.nb[0] = ats; a.nb[1] = ats * K; a.nb[2] = a.nb[1] * OC; a.nb[3] = a.nb[2];
        b.type  = GGML_TYPE_F32;
        b.data  = col;
        b.ne[0] = K; b.ne[1] = P; b.ne[2] = 1; b.ne[3] = 1;
        b.nb[0] = sizeof(float); b.nb[1] = sizeof(float) * K; b.nb[2] = b.nb[1] * P; b.nb[3] = b.nb[2];
        d.type  = GGML_TYPE_F32;
        d.op    = GGML_OP_MUL_MAT;
        d.data  = out;
        d.ne[0] = OC; d.ne[1] = P; d.ne[2] = 1; d.ne[3] = 1;
        d.nb[0] = sizeof(float); d.nb[1] = sizeof(float) * OC; d.nb[2] = d.nb[1] * P; d.nb[3] = d.nb[2];
        d.src[0] = &a;
        d.src[1] = &b;
    }
};

conv_geom geom_of(const ggml_tensor * dst) {
    const ggml_tensor * k = dst->src[0];
    conv_geom           g;
    g.KW = k->ne[0]; g.KH = k->ne[1]; g.IC = k->ne[2]; g.OC = k->ne[3];
    g.OW = dst->ne[0]; g.OH = dst->ne[1];
    g.s0 = ggml_get_op_params_i32(dst, 0); g.s1 = ggml_get_op_params_i32(dst, 1);
    g.p0 = ggml_get_op_params_i32(dst, 2); g.p1 = ggml_get_op_params_i32(dst, 3);
    g.d0 = ggml_get_op_params_i32(dst, 4); g.d1 = ggml_get_op_params_i32(dst, 5);
    return g;
}

bool kernel_rows_packed(const ggml_tensor * k) {
    // [KW, KH, IC, OC] must be [K, OC] rows with K = KW*KH*IC packed elements
    const size_t ts = ggml_type_size(k->type);
    return k->nb[0] == ts && k->nb[1] == ts * k->ne[0] && k->nb[2] == k->nb[1] * k->ne[1];
}

// Tile size: enough pixels that re-packing the kernel once per tile is cheap next to the GEMM
// (2*P flops per packed kernel element), but the F32 im2col tile stays around 8 MiB.
int64_t tile_pixels(int64_t K, int64_t pixels) {
    const int64_t target = (int64_t) ((8u << 20) / (sizeof(float) * (size_t) std::max<int64_t>(K, 1)));
    int64_t       p      = std::max<int64_t>(target, 64);
    p                    = (p + 31) / 32 * 32;
    return std::min(p, pixels);
}

conv2d_plan plan_conv2d(const ggml_tensor * dst, int n_threads) {
    conv2d_plan p;
    const ggml_tensor * k = dst->src[0];
    p.g           = geom_of(dst);
    p.N           = dst->ne[3];
    p.K           = p.g.KW * p.g.KH * p.g.IC;
    p.pixels      = p.N * p.g.OH * p.g.OW;
    p.tile        = tile_pixels(p.K, p.pixels);
    p.kernel_copy = !kernel_rows_packed(k);
    p.kernel_bytes = p.kernel_copy ? align_up((size_t) (p.K * p.g.OC) * sizeof(float)) : 0;
    p.col_bytes    = align_up((size_t) (p.K * p.tile) * sizeof(float));
    p.out_bytes    = align_up((size_t) (p.g.OC * p.tile) * sizeof(float));
    p.mm_bytes     = 0;
    if (p.tile > 0 && p.K > 0) {
        // the largest GEMM the tiles run is the full tile (the last one may be shorter)
        tile_node tn;
        tn.init(p.kernel_copy ? GGML_TYPE_F32 : k->type, nullptr, p.K, p.g.OC, nullptr, nullptr, p.tile);
        p.mm_bytes = ggml_cpu_mul_mat_work_size(&tn.d, n_threads);
        // a shorter last tile may pick a different path (small M): room for both
        tile_node tl;
        tl.init(tn.a.type, nullptr, p.K, p.g.OC, nullptr, nullptr, std::min<int64_t>(p.tile, 16));
        p.mm_bytes = std::max(p.mm_bytes, ggml_cpu_mul_mat_work_size(&tl.d, n_threads));
    }
    return p;
}

inline char * align_ptr(void * ptr) {
    return (char *) (((uintptr_t) ptr + CONV_ALIGN - 1) & ~(uintptr_t) (CONV_ALIGN - 1));
}

} // namespace

// ---------------------------------------------------------------------------------------------

void ggml_cpu_op_im2col(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * k    = dst->src[0];
    const ggml_tensor * b    = dst->src[1];
    const bool          is2d = ggml_get_op_params_i32(dst, 6) != 0;
    if (ggml_is_empty(dst)) return;

    conv_geom g;
    g.s0 = ggml_get_op_params_i32(dst, 0); g.s1 = ggml_get_op_params_i32(dst, 1);
    g.p0 = ggml_get_op_params_i32(dst, 2); g.p1 = ggml_get_op_params_i32(dst, 3);
    g.d0 = ggml_get_op_params_i32(dst, 4); g.d1 = ggml_get_op_params_i32(dst, 5);
    g.KW = k->ne[0];
    image in;
    int64_t N;
    if (is2d) {
        g.KH = k->ne[1]; g.IC = b->ne[2]; g.OW = dst->ne[1]; g.OH = dst->ne[2]; N = dst->ne[3];
        in = image_2d(b);
    } else {
        // 1-D: data [W, IC, N] is an image of height 1; the output's dim 2 is the batch
        g.KH = 1; g.IC = b->ne[1]; g.OW = dst->ne[1]; g.OH = 1; N = dst->ne[2];
        g.s1 = 1; g.p1 = 0; g.d1 = 1;
        in = {(const char *) b->data, b->type, b->ne[0], 1, b->ne[1], b->ne[2], b->nb[0], 0, b->nb[1], b->nb[2]};
    }
    g.OC = 1;
    const int64_t K = g.IC * g.KH * g.KW;
    GGML_ASSERT(dst->ne[0] == K && "im2col: row length mismatch");

    std::vector<float> row((size_t) K);
    const int64_t      rows = g.OW * g.OH * N;
    int64_t            r0, r1;
    ggml_cpu_split_range(rows, params->ith, params->nth, &r0, &r1);
    ggml_cpu_abort_poll poll(params);
    // packed F16 rows (stable-diffusion.cpp's conv_2d): the level's row conversion (bit-identical
    // to the scalar rounding) instead of one out-of-line conversion call per element
    const ggml_cpu_row_kernels * fast = ggml_cpu_rows(params);
    void (*to_f16)(const float *, uint16_t *, int64_t) =
        fast && dst->type == GGML_TYPE_F16 && dst->nb[0] == sizeof(ggml_fp16_t) ? fast->f32_to_f16 : nullptr;
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t ow = r % g.OW;
        const int64_t oh = (r / g.OW) % g.OH;
        const int64_t n  = r / (g.OW * g.OH);
        im2col_row(in, g, ow, oh, n, row.data());
        char * d = (char *) dst->data + ow * dst->nb[1] + (is2d ? oh * dst->nb[2] + n * dst->nb[3] : n * dst->nb[2]);
        if (to_f16) {
            to_f16(row.data(), (uint16_t *) d, K);
        } else {
            ggml_cpu_store_row(dst->type, d, dst->nb[0], K, row.data());
        }
        if (poll.tick(K)) return;
    }
}

size_t ggml_cpu_conv_2d_work_size(const struct ggml_tensor * dst, int n_threads) {
    const conv2d_plan p = plan_conv2d(dst, n_threads);
    return p.kernel_bytes + p.col_bytes + p.out_bytes + p.mm_bytes + CONV_ALIGN;
}

void ggml_cpu_op_conv_2d(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * k = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    if (ggml_is_empty(dst)) return;
    const int         ith = params->ith, nth = params->nth;
    const conv2d_plan p   = plan_conv2d(dst, nth);
    const conv_geom & g   = p.g;
    GGML_ASSERT(b->ne[2] == g.IC && dst->ne[2] == g.OC && dst->ne[3] == b->ne[3]);
    GGML_ASSERT(params->wsize >= ggml_cpu_conv_2d_work_size(dst, nth) && "conv_2d: work buffer too small");

    char *  base   = align_ptr(params->wdata);
    float * kcopy  = (float *) base;
    float * col    = (float *) (base + p.kernel_bytes);
    float * out    = (float *) (base + p.kernel_bytes + p.col_bytes);
    char *  mmwork = base + p.kernel_bytes + p.col_bytes + p.out_bytes;

    if (p.K == 0) { // no taps: the convolution of nothing is zero
        const int64_t nr = ggml_nrows(dst);
        int64_t       r0, r1;
        ggml_cpu_split_range(nr, ith, nth, &r0, &r1);
        std::vector<float> zero((size_t) dst->ne[0], 0.0f);
        for (int64_t r = r0; r < r1; ++r) {
            int64_t i1, i2, i3;
            ggml_cpu_row_coords(r, dst->ne, &i1, &i2, &i3);
            ggml_cpu_store_row(dst->type, (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3],
                               dst->nb[0], dst->ne[0], zero.data());
        }
        return;
    }

    const void * kdata = k->data;
    ggml_type    ktype = k->type;
    if (p.kernel_copy) {
        int64_t r0, r1;
        ggml_cpu_split_range(g.OC, ith, nth, &r0, &r1);
        for (int64_t oc = r0; oc < r1; ++oc) {
            float * row = kcopy + oc * p.K;
            for (int64_t c = 0; c < g.IC; ++c)
                for (int64_t ky = 0; ky < g.KH; ++ky)
                    for (int64_t kx = 0; kx < g.KW; ++kx)
                        row[(c * g.KH + ky) * g.KW + kx] =
                            load_f(k->type, (const char *) k->data + kx * k->nb[0] + ky * k->nb[1] + c * k->nb[2] +
                                                oc * k->nb[3]);
        }
        ggml_cpu_barrier(params);
        kdata = kcopy;
        ktype = GGML_TYPE_F32;
    }

    const image in = image_2d(b);
    ggml_compute_params mm = *params;
    mm.wdata               = mmwork;
    mm.wsize               = p.mm_bytes;

    const int64_t plane = g.OW * g.OH;
    for (int64_t t0 = 0; t0 < p.pixels; t0 += p.tile) {
        const int64_t P = std::min(p.tile, p.pixels - t0);

        // 1. im2col rows of this tile
        int64_t q0, q1;
        ggml_cpu_split_range(P, ith, nth, &q0, &q1);
        for (int64_t q = q0; q < q1; ++q) {
            const int64_t pix = t0 + q;
            const int64_t n   = pix / plane;
            const int64_t r   = pix % plane;
            im2col_row(in, g, r % g.OW, r / g.OW, n, col + q * p.K);
        }
        ggml_cpu_barrier(params);

        // 2. out[oc, q] = kernel row oc . im2col row q
        tile_node tn;
        tn.init(ktype, kdata, p.K, g.OC, col, out, P);
        GGML_ASSERT(ggml_cpu_mul_mat_work_size(&tn.d, nth) <= p.mm_bytes);
        ggml_cpu_op_mul_mat(&mm, &tn.d);
        ggml_cpu_barrier(params);

        // 3. scatter to dst [OW, OH, OC, N]: threads take output channels
        int64_t c0, c1;
        ggml_cpu_split_range(g.OC, ith, nth, &c0, &c1);
        float run[GGML_CPU_CHUNK];
        for (int64_t oc = c0; oc < c1; ++oc) {
            int64_t q = 0;
            while (q < P) {
                // a run of pixels inside one image row of dst
                const int64_t pix = t0 + q;
                const int64_t n   = pix / plane;
                const int64_t r   = pix % plane;
                const int64_t ow  = r % g.OW, oh = r / g.OW;
                const int64_t len = std::min<int64_t>({g.OW - ow, P - q, (int64_t) GGML_CPU_CHUNK});
                for (int64_t j = 0; j < len; ++j) run[j] = out[(q + j) * g.OC + oc];
                char * d = (char *) dst->data + ow * dst->nb[0] + oh * dst->nb[1] + oc * dst->nb[2] + n * dst->nb[3];
                ggml_cpu_store_row(dst->type, d, dst->nb[0], len, run);
                q += len;
            }
        }
        // the next tile overwrites col/out
        ggml_cpu_barrier(params);
    }
}

void ggml_cpu_op_conv_2d_dw(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * k = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    if (ggml_is_empty(dst)) return;
    conv_geom g   = geom_of(dst);
    g.IC          = 1;
    g.OC          = dst->ne[2];
    const image in = image_2d(b);
    GGML_ASSERT(k->ne[3] == b->ne[2] && dst->ne[2] == b->ne[2] && dst->ne[3] == b->ne[3]);

    // threads take (channel, image) planes
    const int64_t n_planes = dst->ne[2] * dst->ne[3];
    int64_t       u0, u1;
    ggml_cpu_split_range(n_planes, params->ith, params->nth, &u0, &u1);
    std::vector<float> w((size_t) (g.KW * g.KH));
    std::vector<float> row((size_t) g.OW);
    ggml_cpu_abort_poll poll(params);
    for (int64_t u = u0; u < u1; ++u) {
        const int64_t c = u % dst->ne[2];
        const int64_t n = u / dst->ne[2];
        for (int64_t ky = 0; ky < g.KH; ++ky)
            for (int64_t kx = 0; kx < g.KW; ++kx)
                w[ky * g.KW + kx] = load_f(k->type, (const char *) k->data + kx * k->nb[0] + ky * k->nb[1] + c * k->nb[3]);
        for (int64_t oh = 0; oh < g.OH; ++oh) {
            for (int64_t ow = 0; ow < g.OW; ++ow) {
                float acc = 0.0f;
                for (int64_t ky = 0; ky < g.KH; ++ky) {
                    const int64_t y = oh * g.s1 + ky * g.d1 - g.p1;
                    if (y < 0 || y >= in.H) continue;
                    for (int64_t kx = 0; kx < g.KW; ++kx) {
                        const int64_t x = ow * g.s0 + kx * g.d0 - g.p0;
                        if (x < 0 || x >= in.W) continue;
                        acc += w[ky * g.KW + kx] * in.at(x, y, c, n);
                    }
                }
                row[ow] = acc;
            }
            ggml_cpu_store_row(dst->type, (char *) dst->data + oh * dst->nb[1] + c * dst->nb[2] + n * dst->nb[3],
                               dst->nb[0], g.OW, row.data());
            if (poll.tick(g.OW * g.KW * g.KH)) return;
        }
    }
}

void ggml_cpu_op_conv_transpose_1d(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * k = dst->src[0]; // [K, OC, IC]
    const ggml_tensor * b = dst->src[1]; // [L, IC]
    if (ggml_is_empty(dst)) return;
    const int     s0 = ggml_get_op_params_i32(dst, 0);
    const int64_t K = k->ne[0], OC = k->ne[1], IC = k->ne[2], L = b->ne[0], OL = dst->ne[0];
    GGML_ASSERT(dst->ne[1] == OC && b->ne[1] == IC && dst->type == GGML_TYPE_F32);

    int64_t o0, o1;
    ggml_cpu_split_range(OC, params->ith, params->nth, &o0, &o1);
    std::vector<float> acc((size_t) OL);
    for (int64_t oc = o0; oc < o1; ++oc) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t ic = 0; ic < IC; ++ic) {
            for (int64_t i = 0; i < L; ++i) {
                const float x = load_f(b->type, (const char *) b->data + i * b->nb[0] + ic * b->nb[1]);
                for (int64_t kk = 0; kk < K; ++kk) {
                    acc[i * s0 + kk] +=
                        x * load_f(k->type, (const char *) k->data + kk * k->nb[0] + oc * k->nb[1] + ic * k->nb[2]);
                }
            }
        }
        ggml_cpu_store_row(GGML_TYPE_F32, (char *) dst->data + oc * dst->nb[1], dst->nb[0], OL, acc.data());
        if (ggml_cpu_should_abort(params)) return;
    }
}

void ggml_cpu_op_conv_transpose_2d(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * k = dst->src[0]; // [KW, KH, OC, IC]
    const ggml_tensor * b = dst->src[1]; // [W, H, IC, N]
    if (ggml_is_empty(dst)) return;
    const int     s  = ggml_get_op_params_i32(dst, 0);
    const int64_t KW = k->ne[0], KH = k->ne[1], OC = k->ne[2], IC = k->ne[3];
    const int64_t W = b->ne[0], H = b->ne[1], OW = dst->ne[0], OH = dst->ne[1];
    GGML_ASSERT(dst->type == GGML_TYPE_F32 && b->ne[2] == IC && dst->ne[2] == OC && dst->ne[3] == b->ne[3]);

    const image in       = image_2d(b);
    const int64_t planes = OC * dst->ne[3];
    int64_t       u0, u1;
    ggml_cpu_split_range(planes, params->ith, params->nth, &u0, &u1);
    std::vector<float> acc((size_t) (OW * OH));
    std::vector<float> w((size_t) (KW * KH));
    for (int64_t u = u0; u < u1; ++u) {
        const int64_t oc = u % OC;
        const int64_t n  = u / OC;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t ic = 0; ic < IC; ++ic) {
            for (int64_t ky = 0; ky < KH; ++ky)
                for (int64_t kx = 0; kx < KW; ++kx)
                    w[ky * KW + kx] = load_f(k->type, (const char *) k->data + kx * k->nb[0] + ky * k->nb[1] +
                                                          oc * k->nb[2] + ic * k->nb[3]);
            for (int64_t y = 0; y < H; ++y) {
                for (int64_t x = 0; x < W; ++x) {
                    const float v = in.at(x, y, ic, n);
                    for (int64_t ky = 0; ky < KH; ++ky) {
                        float * o = acc.data() + (y * s + ky) * OW + x * s;
                        for (int64_t kx = 0; kx < KW; ++kx) o[kx] += v * w[ky * KW + kx];
                    }
                }
            }
        }
        for (int64_t oy = 0; oy < OH; ++oy) {
            ggml_cpu_store_row(GGML_TYPE_F32, (char *) dst->data + oy * dst->nb[1] + oc * dst->nb[2] + n * dst->nb[3],
                               dst->nb[0], OW, acc.data() + oy * OW);
        }
        if (ggml_cpu_should_abort(params)) return;
    }
}

// ---------------------------------------------------------------------------------------------
// 3-D: kernel [KW, KH, KD, IC*OC], data [W, H, D, IC*N]

namespace {

struct conv3d_geom {
    int64_t KW, KH, KD, IC, W, H, D;
    int     s[3], p[3], d[3];
};

conv3d_geom geom3_of(const ggml_tensor * dst, int64_t IC) {
    const ggml_tensor * k = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    conv3d_geom         g;
    g.KW = k->ne[0]; g.KH = k->ne[1]; g.KD = k->ne[2]; g.IC = IC;
    g.W = b->ne[0]; g.H = b->ne[1]; g.D = b->ne[2];
    for (int i = 0; i < 3; ++i) {
        g.s[i] = ggml_get_op_params_i32(dst, i);
        g.p[i] = ggml_get_op_params_i32(dst, 3 + i);
        g.d[i] = ggml_get_op_params_i32(dst, 6 + i);
    }
    return g;
}

// one im2col_3d row: out[((c*KD + kz)*KH + ky)*KW + kx] for output voxel (ox, oy, oz) of image n
void im2col_3d_row(const ggml_tensor * b, const conv3d_geom & g, int64_t ox, int64_t oy, int64_t oz, int64_t n, float * out) {
    for (int64_t c = 0; c < g.IC; ++c)
        for (int64_t kz = 0; kz < g.KD; ++kz)
            for (int64_t ky = 0; ky < g.KH; ++ky)
                for (int64_t kx = 0; kx < g.KW; ++kx) {
                    const int64_t x = ox * g.s[0] + kx * g.d[0] - g.p[0];
                    const int64_t y = oy * g.s[1] + ky * g.d[1] - g.p[1];
                    const int64_t z = oz * g.s[2] + kz * g.d[2] - g.p[2];
                    float v = 0.0f;
                    if (x >= 0 && x < g.W && y >= 0 && y < g.H && z >= 0 && z < g.D) {
                        v = load_f(b->type, (const char *) b->data + x * b->nb[0] + y * b->nb[1] + z * b->nb[2] +
                                                (n * g.IC + c) * b->nb[3]);
                    }
                    out[((c * g.KD + kz) * g.KH + ky) * g.KW + kx] = v;
                }
}

} // namespace

void ggml_cpu_op_im2col_3d(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    if (ggml_is_empty(dst)) return;
    const ggml_tensor * b  = dst->src[1];
    const conv3d_geom   g  = geom3_of(dst, ggml_get_op_params_i32(dst, 9));
    const int64_t       K  = dst->ne[0];
    const int64_t       OW = dst->ne[1], OH = dst->ne[2];
    const int64_t       N  = b->ne[3] / g.IC;
    const int64_t       OD = dst->ne[3] / N;
    GGML_ASSERT(K == g.IC * g.KD * g.KH * g.KW);
    std::vector<float> row((size_t) K);
    int64_t r0, r1;
    ggml_cpu_split_range(OW * OH * dst->ne[3], params->ith, params->nth, &r0, &r1);
    ggml_cpu_abort_poll poll(params);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t ox = r % OW, oy = (r / OW) % OH, nz = r / (OW * OH);
        const int64_t oz = nz % OD, n = nz / OD;
        im2col_3d_row(b, g, ox, oy, oz, n, row.data());
        ggml_cpu_store_row(dst->type, (char *) dst->data + ox * dst->nb[1] + oy * dst->nb[2] + nz * dst->nb[3], dst->nb[0], K,
                           row.data());
        if (poll.tick(K)) return;
    }
}

void ggml_cpu_op_conv_3d(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    if (ggml_is_empty(dst)) return;
    const ggml_tensor * k  = dst->src[0];
    const ggml_tensor * b  = dst->src[1];
    const conv3d_geom   g  = geom3_of(dst, ggml_get_op_params_i32(dst, 9));
    const int64_t       OC = ggml_get_op_params_i32(dst, 11);
    const int64_t       K  = g.IC * g.KD * g.KH * g.KW;
    const int64_t       OW = dst->ne[0], OH = dst->ne[1], OD = dst->ne[2];
    // threads take output voxels (all channels of a voxel share its im2col row)
    std::vector<float> col((size_t) K), w((size_t) K);
    std::vector<float> kern((size_t) (K * OC));
    for (int64_t oc = 0; oc < OC; ++oc) {
        for (int64_t c = 0; c < g.IC; ++c)
            for (int64_t kz = 0; kz < g.KD; ++kz)
                for (int64_t ky = 0; ky < g.KH; ++ky)
                    for (int64_t kx = 0; kx < g.KW; ++kx)
                        kern[oc * K + ((c * g.KD + kz) * g.KH + ky) * g.KW + kx] =
                            load_f(k->type, (const char *) k->data + kx * k->nb[0] + ky * k->nb[1] + kz * k->nb[2] +
                                                (oc * g.IC + c) * k->nb[3]);
    }
    const int64_t N = dst->ne[3] / OC;
    int64_t       r0, r1;
    ggml_cpu_split_range(OW * OH * OD * N, params->ith, params->nth, &r0, &r1);
    ggml_cpu_abort_poll poll(params);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t ox = r % OW, oy = (r / OW) % OH, oz = (r / (OW * OH)) % OD, n = r / (OW * OH * OD);
        im2col_3d_row(b, g, ox, oy, oz, n, col.data());
        for (int64_t oc = 0; oc < OC; ++oc) {
            const float * kr = kern.data() + oc * K;
            float         s  = 0.0f;
            for (int64_t i = 0; i < K; ++i) s += kr[i] * col[i];
            memcpy((char *) dst->data + ox * dst->nb[0] + oy * dst->nb[1] + oz * dst->nb[2] + (n * OC + oc) * dst->nb[3], &s,
                   sizeof(float));
        }
        if (poll.tick(K * OC)) return;
    }
}
