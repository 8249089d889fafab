// Reductions, row orderings and indexed updates, from their definitions in double.

#include "ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace ref {

dense sum(const dense & a) {
    dense out(1);
    for (double v : a.v) out.v[0] += v;
    return out;
}

dense sum_rows(const dense & a, bool mean) {
    dense out(1, a.ne[1], a.ne[2], a.ne[3]);
    const int64_t n = a.ne[0];
    for (int64_t r = 0; r < a.ne[1] * a.ne[2] * a.ne[3]; r++) {
        double s = 0;
        for (int64_t i = 0; i < n; i++) s += a.v[r * n + i];
        out.v[r] = mean ? s / (double) n : s;
    }
    return out;
}

dense argmax(const dense & a) {
    dense out(a.ne[1]);
    for (int64_t r = 0; r < a.ne[1]; r++) {
        int64_t best = 0;
        for (int64_t i = 1; i < a.ne[0]; i++)
            if (a.at(i, r) > a.at(best, r)) best = i;
        out.v[r] = (double) best;
    }
    return out;
}

dense argsort(const dense & a, bool desc, int64_t k) {
    const int64_t n  = a.ne[0];
    const int64_t kk = k < 0 ? n : k;
    dense out(kk, a.ne[1], a.ne[2], a.ne[3]);
    std::vector<int64_t> idx(n);
    for (int64_t r = 0; r < a.ne[1] * a.ne[2] * a.ne[3]; r++) {
        std::iota(idx.begin(), idx.end(), 0);
        const double * row = &a.v[r * n];
        std::stable_sort(idx.begin(), idx.end(), [&](int64_t x, int64_t y) { return desc ? row[x] > row[y] : row[x] < row[y]; });
        for (int64_t i = 0; i < kk; i++) out.v[r * kk + i] = (double) idx[i];
    }
    return out;
}

dense diag_mask_inf(const dense & a, int n_past) {
    dense out = a;
    for (int64_t i3 = 0; i3 < a.ne[3]; i3++)
    for (int64_t i2 = 0; i2 < a.ne[2]; i2++)
    for (int64_t i1 = 0; i1 < a.ne[1]; i1++)
    for (int64_t i0 = 0; i0 < a.ne[0]; i0++)
        if (i0 > n_past + i1) out.at(i0, i1, i2, i3) = -std::numeric_limits<double>::infinity();
    return out;
}

dense acc_set(const dense & a, const dense & b, int64_t s1, int64_t s2, int64_t s3, int64_t off, bool acc) {
    dense out = a;
    for (int64_t i3 = 0; i3 < b.ne[3]; i3++)
    for (int64_t i2 = 0; i2 < b.ne[2]; i2++)
    for (int64_t i1 = 0; i1 < b.ne[1]; i1++)
    for (int64_t i0 = 0; i0 < b.ne[0]; i0++) {
        double & d = out.v[off + i0 + i1 * s1 + i2 * s2 + i3 * s3];
        d          = acc ? d + b.at(i0, i1, i2, i3) : b.at(i0, i1, i2, i3);
    }
    return out;
}

dense roll(const dense & a, const int shift[4]) {
    dense out = a;
    auto wrap = [](int64_t i, int64_t n) { return ((i % n) + n) % n; };
    for (int64_t i3 = 0; i3 < a.ne[3]; i3++)
    for (int64_t i2 = 0; i2 < a.ne[2]; i2++)
    for (int64_t i1 = 0; i1 < a.ne[1]; i1++)
    for (int64_t i0 = 0; i0 < a.ne[0]; i0++)
        out.at(i0, i1, i2, i3) = a.at(wrap(i0 - shift[0], a.ne[0]), wrap(i1 - shift[1], a.ne[1]),
                                      wrap(i2 - shift[2], a.ne[2]), wrap(i3 - shift[3], a.ne[3]));
    return out;
}

dense add_id(const dense & a, const dense & b, const dense & ids) {
    dense out = a;
    for (int64_t i3 = 0; i3 < a.ne[3]; i3++)
    for (int64_t i2 = 0; i2 < a.ne[2]; i2++)
    for (int64_t i1 = 0; i1 < a.ne[1]; i1++)
    for (int64_t i0 = 0; i0 < a.ne[0]; i0++)
        out.at(i0, i1, i2, i3) += b.at(i0, (int64_t) ids.at(i1, i2));
    return out;
}

dense mul_mat_id(const dense & as, const dense & b, const dense & ids, dense * abs_sum) {
    const int64_t K = as.ne[0], N = as.ne[1], n_used = ids.ne[0], n_tok = ids.ne[1], n_b = b.ne[1];
    dense out(N, n_used, n_tok);
    if (abs_sum) *abs_sum = dense(N, n_used, n_tok);
    for (int64_t t = 0; t < n_tok; t++)
    for (int64_t e = 0; e < n_used; e++) {
        const int64_t ex = (int64_t) ids.at(e, t);
        for (int64_t n = 0; n < N; n++) {
            double s = 0, sa = 0;
            for (int64_t k = 0; k < K; k++) {
                const double p = as.at(k, n, ex) * b.at(k, e % n_b, t);
                s += p;
                sa += std::fabs(p);
            }
            out.at(n, e, t) = s;
            if (abs_sum) abs_sum->at(n, e, t) = sa;
        }
    }
    return out;
}

dense set_rows(const dense & dst, const dense & src, const dense & idx) {
    dense out = dst;
    for (int64_t i3 = 0; i3 < src.ne[3]; i3++)
    for (int64_t i2 = 0; i2 < src.ne[2]; i2++)
    for (int64_t i1 = 0; i1 < src.ne[1]; i1++) {
        const int64_t r = (int64_t) idx.at(i1, i2 % idx.ne[1], i3 % idx.ne[2]);
        for (int64_t i0 = 0; i0 < src.ne[0]; i0++) out.at(i0, r, i2, i3) = src.at(i0, i1, i2, i3);
    }
    return out;
}

dense soft_max_sinks(const dense & a, double scale, const dense & sinks) {
    dense         out = a;
    const int64_t n   = a.ne[0];
    for (int64_t i3 = 0; i3 < a.ne[3]; i3++)
    for (int64_t i2 = 0; i2 < a.ne[2]; i2++)
    for (int64_t i1 = 0; i1 < a.ne[1]; i1++) {
        const double sk = sinks.v[i2];
        double       mx = sk;
        for (int64_t i0 = 0; i0 < n; i0++) mx = std::fmax(mx, a.at(i0, i1, i2, i3) * scale);
        double sum = std::exp(sk - mx);
        for (int64_t i0 = 0; i0 < n; i0++) sum += std::exp(a.at(i0, i1, i2, i3) * scale - mx);
        for (int64_t i0 = 0; i0 < n; i0++) out.at(i0, i1, i2, i3) = std::exp(a.at(i0, i1, i2, i3) * scale - mx) / sum;
    }
    return out;
}

dense flash_attn_ext_sinks(const dense & q, const dense & k, const dense & v, double scale, const dense & sinks) {
    const int64_t D = q.ne[0], n_q = q.ne[1], H = q.ne[2], S = q.ne[3];
    const int64_t n_kv = k.ne[1], Hkv = k.ne[2], Dv = v.ne[0], rep = H / Hkv;
    dense out(Dv, H, n_q, S);
    std::vector<double> s(n_kv);
    for (int64_t is = 0; is < S; is++)
    for (int64_t h = 0; h < H; h++)
    for (int64_t iq = 0; iq < n_q; iq++) {
        double mx = sinks.v[h];
        for (int64_t j = 0; j < n_kv; j++) {
            double dot = 0;
            for (int64_t d = 0; d < D; d++) dot += q.at(d, iq, h, is) * k.at(d, j, h / rep, is);
            s[j] = dot * scale;
            mx   = std::fmax(mx, s[j]);
        }
        double sum = std::exp(sinks.v[h] - mx);
        for (int64_t j = 0; j < n_kv; j++) sum += (s[j] = std::exp(s[j] - mx));
        for (int64_t d = 0; d < Dv; d++) {
            double acc = 0;
            for (int64_t j = 0; j < n_kv; j++) acc += s[j] * v.at(d, j, h / rep, is);
            out.at(d, h, iq, is) = acc / sum;
        }
    }
    return out;
}

dense win_part(const dense & a, int w) {
    const int64_t npx = (a.ne[1] + w - 1) / w, npy = (a.ne[2] + w - 1) / w;
    dense out(a.ne[0], w, w, npx * npy);
    for (int64_t wy = 0; wy < npy; wy++)
    for (int64_t wx = 0; wx < npx; wx++)
    for (int64_t y = 0; y < w; y++)
    for (int64_t x = 0; x < w; x++)
    for (int64_t c = 0; c < a.ne[0]; c++) {
        const int64_t sx = wx * w + x, sy = wy * w + y;
        out.at(c, x, y, wy * npx + wx) = (sx < a.ne[1] && sy < a.ne[2]) ? a.at(c, sx, sy) : 0.0;
    }
    return out;
}

dense win_unpart(const dense & a, int w0, int h0, int w) {
    const int64_t npx = (w0 + w - 1) / w;
    dense out(a.ne[0], w0, h0);
    for (int64_t y = 0; y < h0; y++)
    for (int64_t x = 0; x < w0; x++)
    for (int64_t c = 0; c < a.ne[0]; c++) out.at(c, x, y) = a.at(c, x % w, y % w, (y / w) * npx + x / w);
    return out;
}

dense get_rel_pos(const dense & a, int qh, int kh) {
    dense out(a.ne[0], kh, qh);
    for (int64_t q = 0; q < qh; q++)
    for (int64_t k = 0; k < kh; k++)
    for (int64_t c = 0; c < a.ne[0]; c++) out.at(c, k, q) = a.at(c, (kh - 1 - k) + q);
    return out;
}

dense add_rel_pos(const dense & a, const dense & pw, const dense & ph) {
    const int64_t K = pw.ne[0], q1 = pw.ne[1];
    dense out = a;
    for (int64_t b = 0; b < a.ne[2]; b++)
    for (int64_t q = 0; q < a.ne[1]; q++)
    for (int64_t kh = 0; kh < K; kh++)
    for (int64_t kw = 0; kw < K; kw++)
        out.at(kh * K + kw, q, b) += ph.at(kh, q % q1, q / q1, b) + pw.at(kw, q % q1, q / q1, b);
    return out;
}

} // namespace ref
