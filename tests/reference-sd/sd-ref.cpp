// sd-ref.cpp — scalar references of sd-ref.h. Compiled with -ffp-contract=off: the rope
// reference must round every product.

#include "sd-ref.h"

#include <cmath>
#include <vector>

namespace sd_ref {

void rope_apply(const float * x, int64_t d, int64_t H, int64_t L, int64_t N, int64_t s1, int64_t s2, int64_t s3,
                const float * pe, int64_t n_freq, int mode, float * out) {
    const int64_t r = 2 * n_freq;
    for (int64_t n = 0; n < N; ++n) {
        for (int64_t h = 0; h < H; ++h) {
            for (int64_t l = 0; l < L; ++l) {
                const float * xr = x + h * s1 + l * s2 + n * s3;
                float *       o  = out + ((h + H * n) * L + l) * d;
                for (int64_t j = 0; j < n_freq; ++j) {
                    const int64_t i0 = mode == 0 ? 2 * j : j;
                    const int64_t i1 = mode == 0 ? 2 * j + 1 : j + n_freq;
                    const float * R  = pe + (l * n_freq + j) * 4; // R[row][col] at row*2 + col
                    for (int row = 0; row < 2; ++row) {
                        const float p0 = xr[i0] * R[row * 2 + 0];
                        const float p1 = xr[i1] * R[row * 2 + 1];
                        o[row == 0 ? i0 : i1] = p0 + p1;
                    }
                }
                for (int64_t i = r; i < d; ++i) o[i] = xr[i];
            }
        }
    }
}

void rms_norm_mul(const float * x, const float * w, float * y, int64_t n, float eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += (double) x[i] * x[i];
    const double scale = 1.0 / std::sqrt(ss / (double) n + (double) eps);
    for (int64_t i = 0; i < n; ++i) y[i] = (float) ((double) x[i] * scale * (double) w[i]);
}

void attention(const float * q, const float * k, const float * v, int64_t D, int64_t Lq, int64_t Lk, int64_t H,
               int64_t Hkv, int64_t N, float scale, float * out) {
    std::vector<double> s((size_t) Lk);
    const int64_t       group = H / Hkv;
    for (int64_t n = 0; n < N; ++n) {
        for (int64_t h = 0; h < H; ++h) {
            const int64_t hk = h / group;
            for (int64_t i = 0; i < Lq; ++i) {
                const float * qi = q + ((n * H + h) * Lq + i) * D;
                double        mx = -INFINITY;
                for (int64_t j = 0; j < Lk; ++j) {
                    const float * kj  = k + ((n * Hkv + hk) * Lk + j) * D;
                    double        dot = 0;
                    for (int64_t c = 0; c < D; ++c) dot += (double) qi[c] * kj[c];
                    s[(size_t) j] = dot * scale;
                    mx            = std::max(mx, s[(size_t) j]);
                }
                double sum = 0;
                for (int64_t j = 0; j < Lk; ++j) sum += (s[(size_t) j] = std::exp(s[(size_t) j] - mx));
                float * o = out + ((n * Lq + i) * H + h) * D;
                for (int64_t c = 0; c < D; ++c) {
                    double acc = 0;
                    for (int64_t j = 0; j < Lk; ++j) acc += s[(size_t) j] * v[((n * Hkv + hk) * Lk + j) * D + c];
                    o[c] = (float) (acc / sum);
                }
            }
        }
    }
}

void sage_attn(const float * q, const float * k, const float * v, int64_t D, int64_t Lq, int64_t Lk, int64_t H,
               int64_t Hkv, int64_t N, float scale, int mode, float * out) {
    (void) mode; // selects the kernel's quantization variant, not the result it approximates
    attention(q, k, v, D, Lq, Lk, H, Hkv, N, scale, out);
}

void sol_attn(const float * q, const float * k, const float * v, int64_t Lq, int64_t Lk, int64_t heads, int64_t batch,
              float scale, float tau, float * out) {
    (void) tau; // only licenses a sparse kernel to skip blocks; the dense result is the definition
    attention(q, k, v, 128, Lq, Lk, heads, heads, batch, scale, out);
}

} // namespace sd_ref
