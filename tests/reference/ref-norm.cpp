// Row normalisations and softmax (with mask broadcast by modulo and ALiBi slopes).

#include "ref.h"

#include <cmath>
#include <limits>

namespace ref {

template <class F> static dense per_row(const dense & a, F f) {
    dense               out = a;
    const int64_t       n   = a.ne[0];
    std::vector<double> row(n);
    for (int64_t r = 0; r < a.ne[1] * a.ne[2] * a.ne[3]; r++) {
        for (int64_t i = 0; i < n; i++) row[i] = a.v[r * n + i];
        f(row, r);
        for (int64_t i = 0; i < n; i++) out.v[r * n + i] = row[i];
    }
    return out;
}

dense norm(const dense & a, double eps) {
    return per_row(a, [&](std::vector<double> & x, int64_t) {
        double mean = 0;
        for (double y : x) mean += y;
        mean /= (double) x.size();
        double var = 0;
        for (double y : x) var += (y - mean) * (y - mean);
        var /= (double) x.size();
        const double s = 1.0 / std::sqrt(var + eps);
        for (double & y : x) y = (y - mean) * s;
    });
}

dense rms_norm(const dense & a, double eps) {
    return per_row(a, [&](std::vector<double> & x, int64_t) {
        double ms = 0;
        for (double y : x) ms += y * y;
        ms /= (double) x.size();
        const double s = 1.0 / std::sqrt(ms + eps);
        for (double & y : x) y *= s;
    });
}

double alibi_slope(int64_t head, int64_t n_head, double max_bias) {
    if (max_bias <= 0) return 1.0;
    int64_t n_log2 = 1;
    while (n_log2 * 2 <= n_head) n_log2 *= 2;
    const double m0 = std::pow(2.0, -max_bias / (double) n_log2);
    const double m1 = std::pow(2.0, -max_bias / 2.0 / (double) n_log2);
    return head < n_log2 ? std::pow(m0, (double) (head + 1)) : std::pow(m1, (double) (2 * (head - n_log2) + 1));
}

dense soft_max(const dense & a, const dense * mask, double scale, double max_bias) {
    dense         out = a;
    const int64_t n   = a.ne[0];
    for (int64_t i3 = 0; i3 < a.ne[3]; i3++)
    for (int64_t i2 = 0; i2 < a.ne[2]; i2++) {
        const double slope = alibi_slope(i2, a.ne[2], max_bias);
        for (int64_t i1 = 0; i1 < a.ne[1]; i1++) {
            std::vector<double> s(n);
            double              mx = -std::numeric_limits<double>::infinity();
            for (int64_t i0 = 0; i0 < n; i0++) {
                double x = a.at(i0, i1, i2, i3) * scale;
                if (mask) x += slope * mask->at(i0, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
                s[i0] = x;
                mx    = std::fmax(mx, x);
            }
            double sum = 0;
            for (int64_t i0 = 0; i0 < n; i0++) {
                s[i0] = std::exp(s[i0] - mx);
                sum += s[i0];
            }
            for (int64_t i0 = 0; i0 < n; i0++) out.at(i0, i1, i2, i3) = s[i0] / sum;
        }
    }
    return out;
}

} // namespace ref
