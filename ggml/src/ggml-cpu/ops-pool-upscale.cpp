// ops-pool-upscale.cpp — portable CPU kernels that resample images: POOL_1D, POOL_2D and
// UPSCALE (nearest / bilinear / bicubic, optional align-corners).
//
// Semantics (upstream's): pools skip padded taps for MAX and count them as zeros for AVG (the
// divisor is the full kernel size). UPSCALE maps output index i to source position
// (i + 0.5) / sf - 0.5 with sf = ne_out / ne_in (align corners: i * (ne_in - 1) / (ne_out - 1)),
// computed in float like upstream so that nearest picks the same source element; taps outside
// the source are clamped to its border. Bicubic uses the cubic convolution kernel with a = -0.75.

#include "ops-row.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

namespace {

inline float load_at(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return ggml_load_f32(t->type, (const char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

// Cubic convolution weights (a = -0.75) of the 4 taps around a fractional offset t in [0, 1).
void cubic_weights(float t, float w[4]) {
    const float a  = -0.75f;
    auto        c1 = [a](float x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };       // |x| <= 1
    auto        c2 = [a](float x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }; // 1 < |x| < 2
    w[0] = c2(t + 1);
    w[1] = c1(t);
    w[2] = c1(1 - t);
    w[3] = c2(2 - t);
}

inline int64_t clamp_i(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

} // namespace

void ggml_cpu_op_pool_1d(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a  = dst->src[0];
    const int           op = ggml_get_op_params_i32(dst, 0);
    const int           k0 = ggml_get_op_params_i32(dst, 1);
    const int           s0 = ggml_get_op_params_i32(dst, 2);
    const int           p0 = ggml_get_op_params_i32(dst, 3);
    if (ggml_is_empty(dst)) return;
    GGML_ASSERT(dst->type == GGML_TYPE_F32);

    const int64_t nr = ggml_nrows(dst);
    int64_t       r0, r1;
    ggml_cpu_split_range(nr, params->ith, params->nth, &r0, &r1);
    ggml_cpu_abort_poll poll(params);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        ggml_cpu_row_coords(r, dst->ne, &i1, &i2, &i3);
        char * d = (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        for (int64_t o = 0; o < dst->ne[0]; ++o) {
            float acc = op == GGML_OP_POOL_MAX ? -FLT_MAX : 0.0f;
            for (int k = 0; k < k0; ++k) {
                const int64_t x = o * s0 + k - p0;
                if (x < 0 || x >= a->ne[0]) continue;
                const float v = load_at(a, x, i1, i2, i3);
                acc           = op == GGML_OP_POOL_MAX ? std::max(acc, v) : acc + v;
            }
            if (op == GGML_OP_POOL_AVG) acc /= (float) k0;
            memcpy(d + o * dst->nb[0], &acc, sizeof(float));
        }
        if (poll.tick(dst->ne[0] * k0)) return;
    }
}

void ggml_cpu_op_pool_2d(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a  = dst->src[0];
    const int           op = ggml_get_op_params_i32(dst, 0);
    const int           k0 = ggml_get_op_params_i32(dst, 1);
    const int           k1 = ggml_get_op_params_i32(dst, 2);
    const int           s0 = ggml_get_op_params_i32(dst, 3);
    const int           s1 = ggml_get_op_params_i32(dst, 4);
    const int           p0 = ggml_get_op_params_i32(dst, 5);
    const int           p1 = ggml_get_op_params_i32(dst, 6);
    if (ggml_is_empty(dst)) return;
    GGML_ASSERT(dst->type == GGML_TYPE_F32);

    const int64_t nr = ggml_nrows(dst);
    int64_t       r0, r1;
    ggml_cpu_split_range(nr, params->ith, params->nth, &r0, &r1);
    ggml_cpu_abort_poll poll(params);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t oy, i2, i3;
        ggml_cpu_row_coords(r, dst->ne, &oy, &i2, &i3);
        char * d = (char *) dst->data + oy * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        for (int64_t ox = 0; ox < dst->ne[0]; ++ox) {
            float acc = op == GGML_OP_POOL_MAX ? -FLT_MAX : 0.0f;
            for (int ky = 0; ky < k1; ++ky) {
                const int64_t y = oy * s1 + ky - p1;
                if (y < 0 || y >= a->ne[1]) continue;
                for (int kx = 0; kx < k0; ++kx) {
                    const int64_t x = ox * s0 + kx - p0;
                    if (x < 0 || x >= a->ne[0]) continue;
                    const float v = load_at(a, x, y, i2, i3);
                    acc           = op == GGML_OP_POOL_MAX ? std::max(acc, v) : acc + v;
                }
            }
            if (op == GGML_OP_POOL_AVG) acc /= (float) (k0 * k1);
            memcpy(d + ox * dst->nb[0], &acc, sizeof(float));
        }
        if (poll.tick(dst->ne[0] * k0 * k1)) return;
    }
}

void ggml_cpu_op_upscale(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a     = dst->src[0];
    const uint32_t      mode  = (uint32_t) ggml_get_op_params_i32(dst, 0);
    const uint32_t      base  = mode & 0xFF;
    const bool          align = (mode & GGML_SCALE_FLAG_ALIGN_CORNERS) != 0;
    if (ggml_is_empty(dst) || ggml_is_empty(a)) return;

    float sf[4];
    for (int d = 0; d < 4; ++d) sf[d] = (float) dst->ne[d] / (float) a->ne[d];
    float off = 0.5f;
    if (base != GGML_SCALE_MODE_NEAREST && align) {
        off = 0.0f;
        for (int d = 0; d < 2; ++d) {
            if (dst->ne[d] > 1 && a->ne[d] > 1) sf[d] = (float) (dst->ne[d] - 1) / (float) (a->ne[d] - 1);
        }
    }

    const int64_t ne0 = dst->ne[0];
    std::vector<float> row((size_t) ne0);
    // nearest: the source column of each output column, the same for every row (computed once)
    std::vector<int64_t> col0;
    if (base == GGML_SCALE_MODE_NEAREST) {
        col0.resize((size_t) ne0);
        for (int64_t i0 = 0; i0 < ne0; ++i0) col0[i0] = std::min<int64_t>((int64_t) ((float) i0 / sf[0]), a->ne[0] - 1);
    }
    const bool a_f32_rows = a->type == GGML_TYPE_F32 && a->nb[0] == sizeof(float);
    const int64_t nr = ggml_nrows(dst);
    int64_t       r0, r1;
    ggml_cpu_split_range(nr, params->ith, params->nth, &r0, &r1);
    ggml_cpu_abort_poll poll(params);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        ggml_cpu_row_coords(r, dst->ne, &i1, &i2, &i3);
        const int64_t j2 = std::min<int64_t>((int64_t) ((float) i2 / sf[2]), a->ne[2] - 1);
        const int64_t j3 = std::min<int64_t>((int64_t) ((float) i3 / sf[3]), a->ne[3] - 1);
        if (base == GGML_SCALE_MODE_NEAREST) {
            const int64_t j1 = std::min<int64_t>((int64_t) ((float) i1 / sf[1]), a->ne[1] - 1);
            if (a_f32_rows) {
                const float * src = (const float *) ((const char *) a->data + j1 * a->nb[1] + j2 * a->nb[2] + j3 * a->nb[3]);
                for (int64_t i0 = 0; i0 < ne0; ++i0) row[i0] = src[col0[i0]];
            } else {
                for (int64_t i0 = 0; i0 < ne0; ++i0) row[i0] = load_at(a, col0[i0], j1, j2, j3);
            }
        } else if (base == GGML_SCALE_MODE_BILINEAR) {
            const float   y  = ((float) i1 + off) / sf[1] - off;
            const int64_t yf = (int64_t) std::floor(y);
            const float   dy = std::max(0.0f, std::min(1.0f, y - (float) yf));
            const int64_t y0 = clamp_i(yf, 0, a->ne[1] - 1), y1 = clamp_i(yf + 1, 0, a->ne[1] - 1);
            for (int64_t i0 = 0; i0 < ne0; ++i0) {
                const float   x  = ((float) i0 + off) / sf[0] - off;
                const int64_t xf = (int64_t) std::floor(x);
                const float   dx = std::max(0.0f, std::min(1.0f, x - (float) xf));
                const int64_t x0 = clamp_i(xf, 0, a->ne[0] - 1), x1 = clamp_i(xf + 1, 0, a->ne[0] - 1);
                row[i0] = load_at(a, x0, y0, j2, j3) * (1 - dx) * (1 - dy) + load_at(a, x1, y0, j2, j3) * dx * (1 - dy) +
                          load_at(a, x0, y1, j2, j3) * (1 - dx) * dy + load_at(a, x1, y1, j2, j3) * dx * dy;
            }
        } else { // bicubic
            const float   y  = ((float) i1 + off) / sf[1] - off;
            const int64_t yf = (int64_t) std::floor(y);
            float         wy[4];
            cubic_weights(y - (float) yf, wy);
            for (int64_t i0 = 0; i0 < ne0; ++i0) {
                const float   x  = ((float) i0 + off) / sf[0] - off;
                const int64_t xf = (int64_t) std::floor(x);
                float         wx[4];
                cubic_weights(x - (float) xf, wx);
                float acc = 0.0f;
                for (int j = 0; j < 4; ++j) {
                    const int64_t yy = clamp_i(yf - 1 + j, 0, a->ne[1] - 1);
                    float         rs = 0.0f;
                    for (int i = 0; i < 4; ++i) rs += wx[i] * load_at(a, clamp_i(xf - 1 + i, 0, a->ne[0] - 1), yy, j2, j3);
                    acc += wy[j] * rs;
                }
                row[i0] = acc;
            }
        }
        ggml_cpu_store_row(dst->type, (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3],
                           dst->nb[0], ne0, row.data());
        if (poll.tick(ne0 * 4)) return;
    }
}
