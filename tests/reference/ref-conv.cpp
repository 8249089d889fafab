// Convolutions, pooling, resizing, group and L2 norms, straight from their definitions in double.

#include "ref.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ref {

static int64_t conv_out(int64_t in, int64_t k, int s, int p, int d) { return (in + 2 * p - d * (k - 1) - 1) / s + 1; }

dense conv_2d(const dense & k, const dense & x, conv2d_params p, dense * abs_sum) {
    const int64_t KW = k.ne[0], KH = k.ne[1], IC = k.ne[2], OC = k.ne[3];
    const int64_t OW = conv_out(x.ne[0], KW, p.s0, p.p0, p.d0), OH = conv_out(x.ne[1], KH, p.s1, p.p1, p.d1);
    dense out(OW, OH, OC, x.ne[3]);
    if (abs_sum) *abs_sum = dense(OW, OH, OC, x.ne[3]);
    for (int64_t n = 0; n < x.ne[3]; n++)
    for (int64_t oc = 0; oc < OC; oc++)
    for (int64_t oy = 0; oy < OH; oy++)
    for (int64_t ox = 0; ox < OW; ox++) {
        double s = 0, sa = 0;
        for (int64_t c = 0; c < IC; c++)
        for (int64_t ky = 0; ky < KH; ky++)
        for (int64_t kx = 0; kx < KW; kx++) {
            const int64_t xx = ox * p.s0 + kx * p.d0 - p.p0, yy = oy * p.s1 + ky * p.d1 - p.p1;
            if (xx < 0 || yy < 0 || xx >= x.ne[0] || yy >= x.ne[1]) continue;
            const double t = k.at(kx, ky, c, oc) * x.at(xx, yy, c, n);
            s += t;
            sa += std::fabs(t);
        }
        out.at(ox, oy, oc, n) = s;
        if (abs_sum) abs_sum->at(ox, oy, oc, n) = sa;
    }
    return out;
}

dense conv_2d_dw(const dense & k, const dense & x, conv2d_params p, dense * abs_sum) {
    const int64_t KW = k.ne[0], KH = k.ne[1], C = x.ne[2];
    const int64_t OW = conv_out(x.ne[0], KW, p.s0, p.p0, p.d0), OH = conv_out(x.ne[1], KH, p.s1, p.p1, p.d1);
    dense out(OW, OH, C, x.ne[3]);
    if (abs_sum) *abs_sum = dense(OW, OH, C, x.ne[3]);
    for (int64_t n = 0; n < x.ne[3]; n++)
    for (int64_t c = 0; c < C; c++)
    for (int64_t oy = 0; oy < OH; oy++)
    for (int64_t ox = 0; ox < OW; ox++) {
        double s = 0, sa = 0;
        for (int64_t ky = 0; ky < KH; ky++)
        for (int64_t kx = 0; kx < KW; kx++) {
            const int64_t xx = ox * p.s0 + kx * p.d0 - p.p0, yy = oy * p.s1 + ky * p.d1 - p.p1;
            if (xx < 0 || yy < 0 || xx >= x.ne[0] || yy >= x.ne[1]) continue;
            const double t = k.at(kx, ky, 0, c) * x.at(xx, yy, c, n);
            s += t;
            sa += std::fabs(t);
        }
        out.at(ox, oy, c, n) = s;
        if (abs_sum) abs_sum->at(ox, oy, c, n) = sa;
    }
    return out;
}

dense conv_1d(const dense & k, const dense & x, int s0, int p0, int d0, dense * abs_sum) {
    const int64_t K = k.ne[0], IC = k.ne[1], OC = k.ne[2], OL = conv_out(x.ne[0], K, s0, p0, d0);
    dense out(OL, OC, x.ne[2]);
    if (abs_sum) *abs_sum = dense(OL, OC, x.ne[2]);
    for (int64_t n = 0; n < x.ne[2]; n++)
    for (int64_t oc = 0; oc < OC; oc++)
    for (int64_t o = 0; o < OL; o++) {
        double s = 0, sa = 0;
        for (int64_t c = 0; c < IC; c++)
        for (int64_t kk = 0; kk < K; kk++) {
            const int64_t i = o * s0 + kk * d0 - p0;
            if (i < 0 || i >= x.ne[0]) continue;
            const double t = k.at(kk, c, oc) * x.at(i, c, n);
            s += t;
            sa += std::fabs(t);
        }
        out.at(o, oc, n) = s;
        if (abs_sum) abs_sum->at(o, oc, n) = sa;
    }
    return out;
}

dense im2col(const dense & k, const dense & x, conv2d_params p, bool is_2d) {
    const int64_t KW = k.ne[0], KH = is_2d ? k.ne[1] : 1;
    const int64_t C  = is_2d ? x.ne[2] : x.ne[1];
    const int64_t H  = is_2d ? x.ne[1] : 1;
    const int64_t N  = is_2d ? x.ne[3] : x.ne[2];
    const int64_t OW = conv_out(x.ne[0], KW, p.s0, p.p0, p.d0);
    const int64_t OH = is_2d ? conv_out(H, KH, p.s1, p.p1, p.d1) : 1;
    dense out = is_2d ? dense(C * KH * KW, OW, OH, N) : dense(C * KW, OW, N);
    for (int64_t n = 0; n < N; n++)
    for (int64_t oy = 0; oy < OH; oy++)
    for (int64_t ox = 0; ox < OW; ox++)
    for (int64_t c = 0; c < C; c++)
    for (int64_t ky = 0; ky < KH; ky++)
    for (int64_t kx = 0; kx < KW; kx++) {
        const int64_t xx = ox * p.s0 + kx * p.d0 - p.p0;
        const int64_t yy = is_2d ? oy * p.s1 + ky * p.d1 - p.p1 : 0;
        double v = 0;
        if (xx >= 0 && xx < x.ne[0] && yy >= 0 && yy < H) v = is_2d ? x.at(xx, yy, c, n) : x.at(xx, c, n);
        const int64_t i0 = (c * KH + ky) * KW + kx;
        if (is_2d) out.at(i0, ox, oy, n) = v;
        else       out.at(i0, ox, n) = v;
    }
    return out;
}

dense conv_transpose_1d(const dense & k, const dense & x, int s0, dense * abs_sum) {
    const int64_t K = k.ne[0], OC = k.ne[1], IC = k.ne[2], L = x.ne[0];
    const int64_t OL = (L - 1) * s0 + K;
    dense out(OL, OC);
    if (abs_sum) *abs_sum = dense(OL, OC);
    for (int64_t oc = 0; oc < OC; oc++)
    for (int64_t ic = 0; ic < IC; ic++)
    for (int64_t i = 0; i < L; i++)
    for (int64_t kk = 0; kk < K; kk++) {
        const double t = k.at(kk, oc, ic) * x.at(i, ic);
        out.at(i * s0 + kk, oc) += t;
        if (abs_sum) abs_sum->at(i * s0 + kk, oc) += std::fabs(t);
    }
    return out;
}

dense conv_transpose_2d(const dense & k, const dense & x, int s, dense * abs_sum) {
    const int64_t KW = k.ne[0], KH = k.ne[1], OC = k.ne[2], IC = k.ne[3];
    const int64_t W = x.ne[0], H = x.ne[1], N = x.ne[3];
    dense out((W - 1) * s + KW, (H - 1) * s + KH, OC, N);
    if (abs_sum) *abs_sum = dense(out.ne[0], out.ne[1], OC, N);
    for (int64_t n = 0; n < N; n++)
    for (int64_t oc = 0; oc < OC; oc++)
    for (int64_t ic = 0; ic < IC; ic++)
    for (int64_t y = 0; y < H; y++)
    for (int64_t xx = 0; xx < W; xx++)
    for (int64_t ky = 0; ky < KH; ky++)
    for (int64_t kx = 0; kx < KW; kx++) {
        const double t = k.at(kx, ky, oc, ic) * x.at(xx, y, ic, n);
        out.at(xx * s + kx, y * s + ky, oc, n) += t;
        if (abs_sum) abs_sum->at(xx * s + kx, y * s + ky, oc, n) += std::fabs(t);
    }
    return out;
}

dense pool_1d(const dense & a, pool_op op, int k0, int s0, int p0) {
    const int64_t OW = (a.ne[0] + 2 * p0 - k0) / s0 + 1;
    dense out(OW, a.ne[1], a.ne[2], a.ne[3]);
    for (int64_t i3 = 0; i3 < a.ne[3]; i3++)
    for (int64_t i2 = 0; i2 < a.ne[2]; i2++)
    for (int64_t i1 = 0; i1 < a.ne[1]; i1++)
    for (int64_t o = 0; o < OW; o++) {
        double acc = op == pool_op::max ? -std::numeric_limits<float>::max() : 0.0;
        for (int k = 0; k < k0; k++) {
            const int64_t x = o * s0 + k - p0;
            if (x < 0 || x >= a.ne[0]) continue;
            acc = op == pool_op::max ? std::max(acc, a.at(x, i1, i2, i3)) : acc + a.at(x, i1, i2, i3);
        }
        out.at(o, i1, i2, i3) = op == pool_op::avg ? acc / k0 : acc;
    }
    return out;
}

dense pool_2d(const dense & a, pool_op op, int k0, int k1, int s0, int s1, int p0, int p1) {
    const int64_t OW = (a.ne[0] + 2 * p0 - k0) / s0 + 1, OH = (a.ne[1] + 2 * p1 - k1) / s1 + 1;
    dense out(OW, OH, a.ne[2], a.ne[3]);
    for (int64_t i3 = 0; i3 < a.ne[3]; i3++)
    for (int64_t i2 = 0; i2 < a.ne[2]; i2++)
    for (int64_t oy = 0; oy < OH; oy++)
    for (int64_t ox = 0; ox < OW; ox++) {
        double acc = op == pool_op::max ? -std::numeric_limits<float>::max() : 0.0;
        for (int ky = 0; ky < k1; ky++)
        for (int kx = 0; kx < k0; kx++) {
            const int64_t x = ox * s0 + kx - p0, y = oy * s1 + ky - p1;
            if (x < 0 || y < 0 || x >= a.ne[0] || y >= a.ne[1]) continue;
            acc = op == pool_op::max ? std::max(acc, a.at(x, y, i2, i3)) : acc + a.at(x, y, i2, i3);
        }
        out.at(ox, oy, i2, i3) = op == pool_op::avg ? acc / (k0 * k1) : acc;
    }
    return out;
}

// Cubic convolution kernel, a = -0.75 (Keys).
static double cubic(double t) {
    const double a = -0.75;
    t              = std::fabs(t);
    if (t <= 1) return (a + 2) * t * t * t - (a + 3) * t * t + 1;
    if (t < 2) return a * t * t * t - 5 * a * t * t + 8 * a * t - 4 * a;
    return 0;
}

dense upscale(const dense & a, const int64_t ne[4], int mode, bool align_corners) {
    dense out(ne[0], ne[1], ne[2], ne[3]);
    float sf[4];
    for (int d = 0; d < 4; d++) sf[d] = (float) ne[d] / (float) a.ne[d];
    float off = 0.5f;
    if (mode != 0 && align_corners) {
        off = 0.0f;
        for (int d = 0; d < 2; d++)
            if (ne[d] > 1 && a.ne[d] > 1) sf[d] = (float) (ne[d] - 1) / (float) (a.ne[d] - 1);
    }
    auto clampi = [](int64_t v, int64_t n) { return std::min<int64_t>(std::max<int64_t>(v, 0), n - 1); };
    for (int64_t i3 = 0; i3 < ne[3]; i3++)
    for (int64_t i2 = 0; i2 < ne[2]; i2++)
    for (int64_t i1 = 0; i1 < ne[1]; i1++)
    for (int64_t i0 = 0; i0 < ne[0]; i0++) {
        const int64_t j2 = clampi((int64_t) ((float) i2 / sf[2]), a.ne[2]);
        const int64_t j3 = clampi((int64_t) ((float) i3 / sf[3]), a.ne[3]);
        double v;
        if (mode == 0) {
            v = a.at(clampi((int64_t) ((float) i0 / sf[0]), a.ne[0]), clampi((int64_t) ((float) i1 / sf[1]), a.ne[1]), j2, j3);
        } else {
            // source position in float (the op's definition), interpolation in double
            const double x = (double) (((float) i0 + off) / sf[0] - off);
            const double y = (double) (((float) i1 + off) / sf[1] - off);
            const int64_t xf = (int64_t) std::floor(x), yf = (int64_t) std::floor(y);
            v = 0;
            if (mode == 1) {
                const double dx = std::min(1.0, std::max(0.0, x - xf)), dy = std::min(1.0, std::max(0.0, y - yf));
                for (int j = 0; j < 2; j++)
                for (int i = 0; i < 2; i++) {
                    const double w = (i ? dx : 1 - dx) * (j ? dy : 1 - dy);
                    v += w * a.at(clampi(xf + i, a.ne[0]), clampi(yf + j, a.ne[1]), j2, j3);
                }
            } else {
                for (int j = -1; j <= 2; j++)
                for (int i = -1; i <= 2; i++) {
                    const double w = cubic(x - (double) (xf + i)) * cubic(y - (double) (yf + j));
                    v += w * a.at(clampi(xf + i, a.ne[0]), clampi(yf + j, a.ne[1]), j2, j3);
                }
            }
        }
        out.at(i0, i1, i2, i3) = v;
    }
    return out;
}

dense group_norm(const dense & a, int n_groups, double eps) {
    dense out = a;
    const int64_t cpg = (a.ne[2] + n_groups - 1) / n_groups;
    for (int64_t i3 = 0; i3 < a.ne[3]; i3++)
    for (int64_t c0 = 0; c0 < a.ne[2]; c0 += cpg) {
        const int64_t c1 = std::min(c0 + cpg, a.ne[2]);
        double sum = 0, n = 0;
        for (int64_t c = c0; c < c1; c++)
        for (int64_t i1 = 0; i1 < a.ne[1]; i1++)
        for (int64_t i0 = 0; i0 < a.ne[0]; i0++) { sum += a.at(i0, i1, c, i3); n += 1; }
        const double mean = sum / n;
        double var = 0;
        for (int64_t c = c0; c < c1; c++)
        for (int64_t i1 = 0; i1 < a.ne[1]; i1++)
        for (int64_t i0 = 0; i0 < a.ne[0]; i0++) var += (a.at(i0, i1, c, i3) - mean) * (a.at(i0, i1, c, i3) - mean);
        const double s = 1.0 / std::sqrt(var / n + eps);
        for (int64_t c = c0; c < c1; c++)
        for (int64_t i1 = 0; i1 < a.ne[1]; i1++)
        for (int64_t i0 = 0; i0 < a.ne[0]; i0++) out.at(i0, i1, c, i3) = (a.at(i0, i1, c, i3) - mean) * s;
    }
    return out;
}

dense l2_norm(const dense & a, double eps) {
    dense out = a;
    const int64_t n = a.ne[0];
    for (int64_t r = 0; r < a.ne[1] * a.ne[2] * a.ne[3]; r++) {
        double ss = 0;
        for (int64_t i = 0; i < n; i++) ss += a.v[r * n + i] * a.v[r * n + i];
        const double s = 1.0 / std::max(std::sqrt(ss), eps);
        for (int64_t i = 0; i < n; i++) out.v[r * n + i] = a.v[r * n + i] * s;
    }
    return out;
}

dense conv_3d(const dense & k, const dense & x, int64_t IC, conv3d_params p, dense * abs_sum) {
    const int64_t KW = k.ne[0], KH = k.ne[1], KD = k.ne[2], OC = k.ne[3] / IC, N = x.ne[3] / IC;
    const int64_t OW = conv_out(x.ne[0], KW, p.s[0], p.p[0], p.d[0]);
    const int64_t OH = conv_out(x.ne[1], KH, p.s[1], p.p[1], p.d[1]);
    const int64_t OD = conv_out(x.ne[2], KD, p.s[2], p.p[2], p.d[2]);
    dense out(OW, OH, OD, OC * N);
    if (abs_sum) *abs_sum = dense(OW, OH, OD, OC * N);
    for (int64_t n = 0; n < N; n++)
    for (int64_t oc = 0; oc < OC; oc++)
    for (int64_t oz = 0; oz < OD; oz++)
    for (int64_t oy = 0; oy < OH; oy++)
    for (int64_t ox = 0; ox < OW; ox++) {
        double s = 0, sa = 0;
        for (int64_t c = 0; c < IC; c++)
        for (int64_t kz = 0; kz < KD; kz++)
        for (int64_t ky = 0; ky < KH; ky++)
        for (int64_t kx = 0; kx < KW; kx++) {
            const int64_t xx = ox * p.s[0] + kx * p.d[0] - p.p[0], yy = oy * p.s[1] + ky * p.d[1] - p.p[1];
            const int64_t zz = oz * p.s[2] + kz * p.d[2] - p.p[2];
            if (xx < 0 || yy < 0 || zz < 0 || xx >= x.ne[0] || yy >= x.ne[1] || zz >= x.ne[2]) continue;
            const double t = k.at(kx, ky, kz, oc * IC + c) * x.at(xx, yy, zz, n * IC + c);
            s += t;
            sa += std::fabs(t);
        }
        out.at(ox, oy, oz, n * OC + oc) = s;
        if (abs_sum) abs_sum->at(ox, oy, oz, n * OC + oc) = sa;
    }
    return out;
}

dense im2col_3d(const dense & k, const dense & x, int64_t IC, conv3d_params p) {
    const int64_t KW = k.ne[0], KH = k.ne[1], KD = k.ne[2], N = x.ne[3] / IC;
    const int64_t OW = conv_out(x.ne[0], KW, p.s[0], p.p[0], p.d[0]);
    const int64_t OH = conv_out(x.ne[1], KH, p.s[1], p.p[1], p.d[1]);
    const int64_t OD = conv_out(x.ne[2], KD, p.s[2], p.p[2], p.d[2]);
    dense out(IC * KD * KH * KW, OW, OH, OD * N);
    for (int64_t n = 0; n < N; n++)
    for (int64_t oz = 0; oz < OD; oz++)
    for (int64_t oy = 0; oy < OH; oy++)
    for (int64_t ox = 0; ox < OW; ox++)
    for (int64_t c = 0; c < IC; c++)
    for (int64_t kz = 0; kz < KD; kz++)
    for (int64_t ky = 0; ky < KH; ky++)
    for (int64_t kx = 0; kx < KW; kx++) {
        const int64_t xx = ox * p.s[0] + kx * p.d[0] - p.p[0], yy = oy * p.s[1] + ky * p.d[1] - p.p[1];
        const int64_t zz = oz * p.s[2] + kz * p.d[2] - p.p[2];
        double v = 0;
        if (xx >= 0 && yy >= 0 && zz >= 0 && xx < x.ne[0] && yy < x.ne[1] && zz < x.ne[2]) v = x.at(xx, yy, zz, n * IC + c);
        out.at(((c * KD + kz) * KH + ky) * KW + kx, ox, oy, n * OD + oz) = v;
    }
    return out;
}

} // namespace ref
