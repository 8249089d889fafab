// krea2-ref.cpp — plain double-precision reference forward of the Krea2 block stack (krea2-ref.h).

#include "krea2-ref.h"

#include "ggml.h" // fp16 rounding of K and V, as the graph casts them

#include <algorithm>
#include <cmath>

namespace krea2_ref {
namespace {

using vec = std::vector<double>;

double f16_round(double v) { return ggml_fp16_to_fp32(ggml_fp32_to_fp16((float) v)); }

// y[t][o] = sum_i x[t][i] * W[o][i]
vec matmul(const vec & x, int64_t T, const krea2::host_linear & w) {
    vec y((size_t) (T * w.out));
    for (int64_t t = 0; t < T; ++t)
        for (int64_t o = 0; o < w.out; ++o) {
            double s = 0;
            for (int64_t i = 0; i < w.in; ++i) s += x[(size_t) (t * w.in + i)] * w.f32[(size_t) (o * w.in + i)];
            y[(size_t) (t * w.out + o)] = s;
        }
    return y;
}

// RMSNorm over each row of n values, times (1 + scale)
void rms_norm_rows(double * x, int64_t rows, int64_t n, const std::vector<float> & scale, double eps) {
    for (int64_t r = 0; r < rows; ++r) {
        double * v  = x + r * n;
        double   ss = 0;
        for (int64_t i = 0; i < n; ++i) ss += v[i] * v[i];
        const double inv = 1.0 / std::sqrt(ss / (double) n + eps);
        for (int64_t i = 0; i < n; ++i) v[i] = v[i] * inv * (1.0 + scale[(size_t) i]);
    }
}

// interleaved pairs with the §4.2 pe of token p
void rope_rows(double * x, int64_t heads, int64_t p, const std::vector<float> & pe) {
    for (int64_t h = 0; h < heads; ++h) {
        double * v = x + h * 128;
        for (int j = 0; j < 64; ++j) {
            const double c = pe[(size_t) (p * 256 + j * 4 + 0)], s = pe[(size_t) (p * 256 + j * 4 + 2)];
            const double a = v[2 * j], b = v[2 * j + 1];
            v[2 * j]       = a * c - b * s;
            v[2 * j + 1]   = a * s + b * c;
        }
    }
}

void ref_block(const krea2::config & c, const krea2::host_block & b, vec & x, const std::vector<float> & tvec,
               const std::vector<float> & pe) {
    const int64_t L = c.tokens, Hd = c.hidden, H = c.heads, Hkv = c.kv_heads, D = 128;
    vec           mods((size_t) (6 * Hd));
    for (size_t i = 0; i < mods.size(); ++i) mods[i] = (double) tvec[i] + (double) b.mod_lin[i];
    auto m = [&](int k, int64_t i) { return mods[(size_t) (k * Hd + i)]; };

    auto modulated = [&](const std::vector<float> & scale, int ks, int kh) {
        vec h = x;
        rms_norm_rows(h.data(), L, Hd, scale, c.eps);
        for (int64_t t = 0; t < L; ++t)
            for (int64_t i = 0; i < Hd; ++i) {
                double & v = h[(size_t) (t * Hd + i)];
                v          = v + v * m(ks, i) + m(kh, i);
            }
        return h;
    };

    const vec attn_in = modulated(b.prenorm, 0, 1);
    vec       q = matmul(attn_in, L, b.wq), k = matmul(attn_in, L, b.wk), v = matmul(attn_in, L, b.wv);
    rms_norm_rows(q.data(), L * H, D, b.qnorm, c.eps);
    rms_norm_rows(k.data(), L * Hkv, D, b.knorm, c.eps);
    for (int64_t t = 0; t < L; ++t) {
        rope_rows(&q[(size_t) (t * H * D)], H, t, pe);
        rope_rows(&k[(size_t) (t * Hkv * D)], Hkv, t, pe);
    }
    for (double & e : k) e = f16_round(e);
    for (double & e : v) e = f16_round(e);

    vec          att((size_t) (L * H * D));
    const double scale = 1.0 / std::sqrt(128.0);
    vec          p((size_t) L);
    for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / (H / Hkv);
        for (int64_t t = 0; t < L; ++t) {
            double mx = -1e300;
            for (int64_t s = 0; s < L; ++s) {
                double d = 0;
                for (int64_t e = 0; e < D; ++e) d += q[(size_t) ((t * H + h) * D + e)] * k[(size_t) ((s * Hkv + g) * D + e)];
                p[(size_t) s] = d * scale;
                mx            = std::max(mx, p[(size_t) s]);
            }
            double sum = 0;
            for (int64_t s = 0; s < L; ++s) sum += (p[(size_t) s] = std::exp(p[(size_t) s] - mx));
            for (int64_t e = 0; e < D; ++e) {
                double o = 0;
                for (int64_t s = 0; s < L; ++s) o += p[(size_t) s] * v[(size_t) ((s * Hkv + g) * D + e)];
                att[(size_t) ((t * H + h) * D + e)] = o / sum;
            }
        }
    }
    const vec gate = matmul(attn_in, L, b.gate);
    for (size_t i = 0; i < att.size(); ++i) att[i] *= 1.0 / (1.0 + std::exp(-gate[i]));
    const vec wo = matmul(att, L, b.wo);
    for (int64_t t = 0; t < L; ++t)
        for (int64_t i = 0; i < Hd; ++i) x[(size_t) (t * Hd + i)] += wo[(size_t) (t * Hd + i)] * m(2, i);

    const vec mlp_in = modulated(b.postnorm, 3, 4);
    vec       mg = matmul(mlp_in, L, b.mgate);
    const vec up = matmul(mlp_in, L, b.up);
    for (size_t i = 0; i < mg.size(); ++i) mg[i] = mg[i] / (1.0 + std::exp(-mg[i])) * up[i];
    const vec down = matmul(mg, L, b.down);
    for (int64_t t = 0; t < L; ++t)
        for (int64_t i = 0; i < Hd; ++i) x[(size_t) (t * Hd + i)] += down[(size_t) (t * Hd + i)] * m(5, i);
}

} // namespace

bool forward(const krea2::config & c, uint64_t seed, std::vector<float> & out, std::string & err) {
    krea2::synthetic_source  src(seed);
    const std::vector<float> xin = krea2::synthetic_input(c, seed), tvec = krea2::synthetic_tvec(c, seed);
    const std::vector<float> pe  = krea2::build_pe(c);
    vec                      x(xin.begin(), xin.end());
    for (int i = 0; i < c.blocks; ++i) {
        krea2::host_block hb;
        if (!src.get_block(c, i, hb, err)) return false;
        ref_block(c, hb, x, tvec, pe);
    }
    out.assign(x.begin(), x.end());
    return true;
}

} // namespace krea2_ref
