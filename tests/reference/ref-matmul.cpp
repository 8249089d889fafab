// mul_mat: dims 2/3 of the weight are broadcast by division (block repeat), not modulo.

#include "ref.h"

#include <cmath>
#include <stdexcept>

namespace ref {

dense mul_mat(const dense & a, const dense & b, dense * abs_sum) {
    if (a.ne[0] != b.ne[0] || b.ne[2] % a.ne[2] || b.ne[3] % a.ne[3]) throw std::runtime_error("ref::mul_mat shapes");
    const int64_t K = a.ne[0], N = a.ne[1], M = b.ne[1];
    const int64_t r2 = b.ne[2] / a.ne[2], r3 = b.ne[3] / a.ne[3];
    dense         out(N, M, b.ne[2], b.ne[3]);
    if (abs_sum) *abs_sum = dense(N, M, b.ne[2], b.ne[3]);
    for (int64_t i3 = 0; i3 < b.ne[3]; i3++)
    for (int64_t i2 = 0; i2 < b.ne[2]; i2++)
    for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
        const double * pa = &a.v[a.index(0, n, i2 / r2, i3 / r3)];
        const double * pb = &b.v[b.index(0, m, i2, i3)];
        double         s = 0, sa = 0;
        for (int64_t k = 0; k < K; k++) {
            s += pa[k] * pb[k];
            sa += std::fabs(pa[k] * pb[k]);
        }
        out.at(n, m, i2, i3) = s;
        if (abs_sum) abs_sum->at(n, m, i2, i3) = sa;
    }
    return out;
}

} // namespace ref
