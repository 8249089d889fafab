// Rotary position embedding (NORMAL interleaved pairs / NEOX half-split pairs), partial
// rotation, frequency factors and YaRN ramp, per the facts sheet section 4.11.

#include "ref.h"

#include <algorithm>
#include <cmath>

namespace ref {

void rope_yarn_corr_dims(int n_dims, int n_ctx_orig, double freq_base, double beta_fast, double beta_slow,
                         double dims[2]) {
    auto corr = [&](double r) {
        return n_dims * std::log(n_ctx_orig / (2.0 * M_PI * r)) / (2.0 * std::log(freq_base));
    };
    dims[0] = std::max(0.0, std::floor(corr(beta_fast)));
    dims[1] = std::min((double) (n_dims - 1), std::ceil(corr(beta_slow)));
}

dense rope(const dense & a, const std::vector<int32_t> & pos, const dense * ff, int n_dims, int mode,
           int n_ctx_orig, double freq_base, double freq_scale, double ext_factor, double attn_factor,
           double beta_fast, double beta_slow) {
    dense  out = a;
    double corr[2];
    rope_yarn_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow, corr);
    const bool neox = (mode & 2) != 0;
    const int  half = n_dims / 2;
    for (int64_t i3 = 0; i3 < a.ne[3]; i3++)
    for (int64_t i2 = 0; i2 < a.ne[2]; i2++) {
        const double p = pos[(size_t) i2];
        for (int i = 0; i < half; i++) {
            const double c      = ff ? ff->v[(size_t) i] : 1.0;
            const double extrap = p * std::pow(freq_base, -2.0 * i / n_dims) / c;
            const double interp = freq_scale * extrap;
            double       theta = interp, mscale = attn_factor;
            if (ext_factor != 0.0) {
                const double y    = (i - corr[0]) / std::max(0.001, corr[1] - corr[0]);
                const double ramp = 1.0 - std::min(1.0, std::max(0.0, y));
                const double mix  = ramp * ext_factor;
                theta             = interp * (1.0 - mix) + extrap * mix;
                mscale *= 1.0 + 0.1 * std::log(1.0 / freq_scale);
            }
            const double cs = std::cos(theta) * mscale, sn = std::sin(theta) * mscale;
            const int64_t j0 = neox ? i : 2 * i;
            const int64_t j1 = neox ? i + half : 2 * i + 1;
            for (int64_t i1 = 0; i1 < a.ne[1]; i1++) {
                const double x0 = a.at(j0, i1, i2, i3), x1 = a.at(j1, i1, i2, i3);
                out.at(j0, i1, i2, i3) = x0 * cs - x1 * sn;
                out.at(j1, i1, i2, i3) = x0 * sn + x1 * cs;
            }
        }
    }
    return out;
}

dense rope_multi(const dense & a, const std::vector<int32_t> & pos, const dense * ff, int n_dims, const int sect[4],
                 int mode, int n_ctx_orig, double freq_base, double freq_scale, double ext_factor, double attn_factor,
                 double beta_fast, double beta_slow) {
    dense  out = a;
    double corr[2];
    rope_yarn_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow, corr);
    const bool    vision  = mode == 24;
    const int     n_pairs = vision ? n_dims : n_dims / 2;
    const int     sum     = sect[0] + sect[1] + sect[2] + sect[3];
    const int64_t ne2     = a.ne[2];
    for (int64_t i3 = 0; i3 < a.ne[3]; i3++)
    for (int64_t i2 = 0; i2 < ne2; i2++)
    for (int i = 0; i < n_pairs; i++) {
        // which component (t, h, w, e) drives pair i, and its frequency index
        const int s = i % sum;
        int comp, fidx = i;
        if (mode == 40) {
            comp = (s % 3 == 1 && s < 3 * sect[1]) ? 1 : (s % 3 == 2 && s < 3 * sect[2]) ? 2 : (s % 3 == 0 && s < 3 * sect[0]) ? 0 : 3;
        } else {
            int start = 0;
            comp      = 0;
            while (comp < 3 && s >= start + sect[comp]) start += sect[comp++];
            if (vision) fidx = s - start;
        }
        const double p      = pos[(size_t) (i2 + comp * ne2)];
        const double c      = ff ? ff->v[(size_t) i] : 1.0;
        const double extrap = p * std::pow(freq_base, -2.0 * fidx / n_dims) / c;
        const double interp = freq_scale * extrap;
        double       theta = interp, mscale = attn_factor;
        if (ext_factor != 0.0) {
            const double y    = (i - corr[0]) / std::max(0.001, corr[1] - corr[0]);
            const double ramp = 1.0 - std::min(1.0, std::max(0.0, y));
            theta             = interp * (1.0 - ramp * ext_factor) + extrap * ramp * ext_factor;
            mscale *= 1.0 + 0.1 * std::log(1.0 / freq_scale);
        }
        const double  cs = std::cos(theta) * mscale, sn = std::sin(theta) * mscale;
        const int64_t j0 = i, j1 = i + (vision ? n_dims : n_dims / 2);
        for (int64_t i1 = 0; i1 < a.ne[1]; i1++) {
            const double x0 = a.at(j0, i1, i2, i3), x1 = a.at(j1, i1, i2, i3);
            out.at(j0, i1, i2, i3) = x0 * cs - x1 * sn;
            out.at(j1, i1, i2, i3) = x0 * sn + x1 * cs;
        }
    }
    return out;
}

} // namespace ref
