// Data-movement references: get_rows, concat, pad_ext, repeat, arange, timestep embedding,
// reshape (logical order), permute (axisK = destination of source dim K), raw-memory views.

#include "ref.h"

#include <cmath>
#include <stdexcept>

namespace ref {

dense get_rows(const dense & a, const dense & idx) {
    dense out(a.ne[0], idx.ne[0], idx.ne[1], idx.ne[2]);
    for (int64_t k = 0; k < idx.ne[2]; k++)
    for (int64_t j = 0; j < idx.ne[1]; j++)
    for (int64_t i = 0; i < idx.ne[0]; i++) {
        const int64_t r = (int64_t) idx.at(i, j, k);
        if (r < 0 || r >= a.ne[1]) throw std::runtime_error("ref::get_rows index out of range");
        for (int64_t e = 0; e < a.ne[0]; e++) out.at(e, i, j, k) = a.at(e, r, j, k);
    }
    return out;
}

dense concat(const dense & a, const dense & b, int dim) {
    int64_t ne[4] = {a.ne[0], a.ne[1], a.ne[2], a.ne[3]};
    ne[dim] += b.ne[dim];
    dense out(ne[0], ne[1], ne[2], ne[3]);
    for (int64_t i3 = 0; i3 < ne[3]; i3++)
    for (int64_t i2 = 0; i2 < ne[2]; i2++)
    for (int64_t i1 = 0; i1 < ne[1]; i1++)
    for (int64_t i0 = 0; i0 < ne[0]; i0++) {
        int64_t i[4] = {i0, i1, i2, i3};
        if (i[dim] < a.ne[dim]) {
            out.at(i0, i1, i2, i3) = a.at(i0, i1, i2, i3);
        } else {
            i[dim] -= a.ne[dim];
            out.at(i0, i1, i2, i3) = b.at(i[0], i[1], i[2], i[3]);
        }
    }
    return out;
}

dense pad_ext(const dense & a, const int lp[4], const int rp[4]) {
    dense out(a.ne[0] + lp[0] + rp[0], a.ne[1] + lp[1] + rp[1], a.ne[2] + lp[2] + rp[2], a.ne[3] + lp[3] + rp[3]);
    for (int64_t i3 = 0; i3 < a.ne[3]; i3++)
    for (int64_t i2 = 0; i2 < a.ne[2]; i2++)
    for (int64_t i1 = 0; i1 < a.ne[1]; i1++)
    for (int64_t i0 = 0; i0 < a.ne[0]; i0++)
        out.at(i0 + lp[0], i1 + lp[1], i2 + lp[2], i3 + lp[3]) = a.at(i0, i1, i2, i3);
    return out;
}

dense repeat(const dense & a, const int64_t ne[4]) {
    dense out(ne[0], ne[1], ne[2], ne[3]);
    for (int64_t i3 = 0; i3 < ne[3]; i3++)
    for (int64_t i2 = 0; i2 < ne[2]; i2++)
    for (int64_t i1 = 0; i1 < ne[1]; i1++)
    for (int64_t i0 = 0; i0 < ne[0]; i0++)
        out.at(i0, i1, i2, i3) = a.at(i0 % a.ne[0], i1 % a.ne[1], i2 % a.ne[2], i3 % a.ne[3]);
    return out;
}

dense arange(double start, double stop, double step) {
    const int64_t n = (int64_t) std::ceil((float) (((float) stop - (float) start) / (float) step));
    dense         out(n);
    for (int64_t i = 0; i < n; i++) out.v[(size_t) i] = start + (double) i * step;
    return out;
}

dense timestep_embedding(const dense & t, int dim, int max_period) {
    const int half = dim / 2;
    dense     out(dim, t.ne[0]);
    for (int64_t n = 0; n < t.ne[0]; n++) {
        for (int j = 0; j < half; j++) {
            const double f = std::exp(-std::log((double) max_period) * j / half);
            out.at(j, n)        = std::cos(t.v[(size_t) n] * f);
            out.at(j + half, n) = std::sin(t.v[(size_t) n] * f);
        }
        if (dim % 2) out.at(dim - 1, n) = 0.0;
    }
    return out;
}

dense reshape(const dense & a, const int64_t ne[4]) {
    dense out = a;
    for (int i = 0; i < 4; i++) out.ne[i] = ne[i];
    if (out.nelements() != a.nelements()) throw std::runtime_error("ref::reshape count");
    return out;
}

dense permute(const dense & a, int ax0, int ax1, int ax2, int ax3) {
    const int ax[4] = {ax0, ax1, ax2, ax3};
    int64_t   ne[4];
    for (int k = 0; k < 4; k++) ne[ax[k]] = a.ne[k];
    dense out(ne[0], ne[1], ne[2], ne[3]);
    for (int64_t i3 = 0; i3 < a.ne[3]; i3++)
    for (int64_t i2 = 0; i2 < a.ne[2]; i2++)
    for (int64_t i1 = 0; i1 < a.ne[1]; i1++)
    for (int64_t i0 = 0; i0 < a.ne[0]; i0++) {
        const int64_t src[4] = {i0, i1, i2, i3};
        int64_t       d[4];
        for (int k = 0; k < 4; k++) d[ax[k]] = src[k];
        out.at(d[0], d[1], d[2], d[3]) = a.at(i0, i1, i2, i3);
    }
    return out;
}

dense view(const dense & a, size_t es, const int64_t ne[4], const size_t nb[4], size_t offset) {
    dense out(ne[0], ne[1], ne[2], ne[3]);
    for (int64_t i3 = 0; i3 < ne[3]; i3++)
    for (int64_t i2 = 0; i2 < ne[2]; i2++)
    for (int64_t i1 = 0; i1 < ne[1]; i1++)
    for (int64_t i0 = 0; i0 < ne[0]; i0++) {
        const size_t byte = offset + i0 * nb[0] + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
        if (byte % es || byte / es >= a.v.size()) throw std::runtime_error("ref::view out of range");
        out.at(i0, i1, i2, i3) = a.v[byte / es];
    }
    return out;
}

} // namespace ref
