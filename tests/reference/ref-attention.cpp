// flash_attn_ext: softmax(scale*q.k [softcapped] + slope*mask) . v per (query, head); K/V heads
// by division (GQA), mask by modulo; result permuted to [Dv, n_head, n_q, S].

#include "ref.h"

#include <cmath>
#include <limits>
#include <stdexcept>

namespace ref {

dense flash_attn_ext(const dense & q, const dense & k, const dense & v, const dense * mask, double scale,
                     double max_bias, double logit_softcap) {
    const int64_t D = q.ne[0], n_q = q.ne[1], H = q.ne[2], S = q.ne[3];
    const int64_t n_kv = k.ne[1], Hkv = k.ne[2], Dv = v.ne[0];
    if (k.ne[0] != D || H % Hkv || v.ne[1] != n_kv || v.ne[2] != Hkv) throw std::runtime_error("ref::fa shapes");
    const int64_t rep = H / Hkv;
    dense         out(Dv, H, n_q, S);
    std::vector<double> s(n_kv);
    for (int64_t is = 0; is < S; is++)
    for (int64_t h = 0; h < H; h++) {
        const double  slope = alibi_slope(h, H, max_bias);
        const int64_t hk    = h / rep;
        for (int64_t iq = 0; iq < n_q; iq++) {
            double mx = -std::numeric_limits<double>::infinity();
            for (int64_t j = 0; j < n_kv; j++) {
                double dot = 0;
                for (int64_t d = 0; d < D; d++) dot += q.at(d, iq, h, is) * k.at(d, j, hk, is);
                dot *= scale;
                if (logit_softcap != 0) dot = logit_softcap * std::tanh(dot / logit_softcap);
                if (mask) {
                    const double m = mask->at(j, iq, h % mask->ne[2], is % mask->ne[3]);
                    dot = std::isinf(m) && m < 0 ? -std::numeric_limits<double>::infinity() : dot + slope * m;
                }
                s[j] = dot;
                mx   = std::fmax(mx, dot);
            }
            for (int64_t d = 0; d < Dv; d++) out.at(d, h, iq, is) = 0.0;
            if (std::isinf(mx)) continue; // every position masked: zeros, not NaN
            double sum = 0;
            for (int64_t j = 0; j < n_kv; j++) {
                s[j] = std::isinf(s[j]) ? 0.0 : std::exp(s[j] - mx);
                sum += s[j];
            }
            for (int64_t j = 0; j < n_kv; j++) {
                if (s[j] == 0) continue;
                const double w = s[j] / sum;
                for (int64_t d = 0; d < Dv; d++) out.at(d, h, iq, is) += w * v.at(d, j, hk, is);
            }
        }
    }
    return out;
}

} // namespace ref
