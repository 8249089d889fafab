// comfy_verify.cpp — a quantized int8_tensorwise module against its float original.

#include "io/comfy_verify.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <thread>
#include <cstring>
#include <random>
#include <vector>

namespace sdio {

namespace {

// Dot product in float with 16 independent partial sums (vectorizable without reassociation
// flags), summed in double: accurate far beyond the quantization errors measured here.
double dot(const float * a, const float * b, int64_t n) {
    float   acc[16] = {0};
    int64_t i       = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; ++j) acc[j] += a[i + j] * b[i + j];
    double s = 0;
    for (int j = 0; j < 16; ++j) s += acc[j];
    for (; i < n; ++i) s += (double) a[i] * b[i];
    return s;
}

// The activation side of the INT8 linear, as the kernels compute it (int8-convrot-facts.md).
void quantize_activation(std::vector<float> & row, int group, std::vector<int8_t> & q, float & s_x) {
    convrot_rotate_row(row.data(), (int64_t) row.size(), group);
    float amax = 0.0f;
    for (float v : row) amax = fmaxf(amax, fabsf(v));
    s_x             = amax / 127.0f;
    const float inv = s_x != 0.0f ? 1.0f / s_x : 0.0f;
    q.resize(row.size());
    for (size_t i = 0; i < row.size(); ++i) {
        const long r = lrintf(row[i] * inv);
        q[i]         = (int8_t) (r < -127 ? -127 : r > 127 ? 127 : r);
    }
}

// Runs fn(o0, o1) over [0, n) split into `threads` contiguous ranges. Each output row's
// results go to their own slots and are reduced afterwards in row order, so the numbers do not
// depend on the thread count.
void parallel_rows(int64_t n, int threads, const std::function<void(int64_t, int64_t)> & fn) {
    const int64_t t = std::max<int64_t>(1, std::min<int64_t>(threads, n));
    if (t == 1) { fn(0, n); return; }
    std::vector<std::thread> pool;
    for (int64_t k = 0; k < t; ++k) pool.emplace_back(fn, n * k / t, n * (k + 1) / t);
    for (auto & th : pool) th.join();
}

} // namespace

bool verify_module(const linear_module & q, const linear_module & f, int rows, uint64_t seed, module_check & out, std::string & err,
                   int threads) {
    out = module_check();
    if (!q.int8) { err = q.name + ": not an int8_tensorwise module"; return false; }
    if (f.int8) { err = f.name + ": the reference module is quantized too (FLOAT must hold float weights)"; return false; }
    if (q.in != f.in || q.out != f.out) {
        err = q.name + ": quantized [" + std::to_string(q.out) + ", " + std::to_string(q.in) + "] vs float [" + std::to_string(f.out) +
              ", " + std::to_string(f.in) + "]";
        return false;
    }
    if (q.bias.empty() != f.bias.empty()) { err = q.name + ": only one of the two modules has a bias"; return false; }
    if (rows < 1) { err = "rows must be >= 1"; return false; }
    const int64_t in = q.in, n_out = q.out;
    const int     group = q.convrot ? q.group : 0;

    // Weight: W'_o = (Q_o * s_o) R, row by row.
    std::vector<double> e2((size_t) n_out), w2((size_t) n_out), deq_norm((size_t) n_out);
    parallel_rows(n_out, threads, [&](int64_t o0, int64_t o1) {
        std::vector<float> d((size_t) in);
        for (int64_t o = o0; o < o1; ++o) {
            const int8_t * qo = q.weight_i8.data() + o * in;
            const float *  w  = f.weight_f32.data() + o * in;
            const float    s  = q.weight_scale[(size_t) o];
            for (int64_t i = 0; i < in; ++i) d[(size_t) i] = (float) qo[i] * s;
            convrot_rotate_row(d.data(), in, group); // R is symmetric and orthogonal: W = W_rot R
            double ee = 0, ww = 0, dd = 0;
            for (int64_t i = 0; i < in; ++i) {
                const double e = (double) d[(size_t) i] - (double) w[i];
                ee += e * e;
                ww += (double) w[i] * w[i];
                dd += (double) d[(size_t) i] * d[(size_t) i];
            }
            e2[(size_t) o]       = ee;
            w2[(size_t) o]       = ww;
            deq_norm[(size_t) o] = std::sqrt(dd);
        }
    });
    double e_sum = 0, w_sum = 0;
    for (int64_t o = 0; o < n_out; ++o) {
        e_sum += e2[(size_t) o];
        w_sum += w2[(size_t) o];
        const double ratio = std::sqrt(e2[(size_t) o]) / ((double) q.weight_scale[(size_t) o] * std::sqrt((double) in));
        if (!std::isnan(out.weight_ratio) && !(ratio <= out.weight_ratio)) out.weight_ratio = ratio; // a NaN stays: a failure
    }
    out.weight_rel_rms = w_sum > 0 ? std::sqrt(e_sum / w_sum) : std::sqrt(e_sum);

    // Linear: the quantized path against the float path on the same random inputs.
    std::mt19937_64                  rng(seed);
    std::normal_distribution<float>  normal(0.0f, 1.0f);
    std::vector<std::vector<float>>  x((size_t) rows, std::vector<float>((size_t) in));
    std::vector<std::vector<int8_t>> qx((size_t) rows);
    std::vector<double>              xx((size_t) rows);
    std::vector<float>               s_x((size_t) rows);
    for (int r = 0; r < rows; ++r) {
        for (float & v : x[(size_t) r]) v = normal(rng);
        for (float v : x[(size_t) r]) xx[(size_t) r] += (double) v * v;
        std::vector<float> xr = x[(size_t) r];
        quantize_activation(xr, group, qx[(size_t) r], s_x[(size_t) r]);
    }
    std::vector<double> d2((size_t) n_out), y2((size_t) n_out), sig2((size_t) n_out);
    parallel_rows(n_out, threads, [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) {
            const int8_t * qo  = q.weight_i8.data() + o * in;
            const double   s_o = q.weight_scale[(size_t) o];
            double         dd = 0, yy = 0, ss = 0;
            for (int r = 0; r < rows; ++r) {
                const int8_t * qr  = qx[(size_t) r].data();
                int64_t        acc = 0;
                for (int64_t i = 0; i < in; ++i) acc += (int32_t) qr[i] * (int32_t) qo[i];
                float y_q = ((float) acc * s_x[(size_t) r]) * q.weight_scale[(size_t) o];
                if (!q.bias.empty()) y_q = y_q + q.bias[(size_t) o];
                double y_f = dot(x[(size_t) r].data(), f.weight_f32.data() + o * in, in);
                if (!f.bias.empty()) y_f += f.bias[(size_t) o];
                const double dlt = (double) y_q - y_f;
                dd += dlt * dlt;
                yy += y_f * y_f;
                ss += xx[(size_t) r] * s_o * s_o +
                      deq_norm[(size_t) o] * deq_norm[(size_t) o] * (double) s_x[(size_t) r] * s_x[(size_t) r] / 12.0;
            }
            d2[(size_t) o]   = dd;
            y2[(size_t) o]   = yy;
            sig2[(size_t) o] = ss;
        }
    });
    double d_sum = 0, y_sum = 0, sig_sum = 0;
    for (int64_t o = 0; o < n_out; ++o) {
        d_sum += d2[(size_t) o];
        y_sum += y2[(size_t) o];
        sig_sum += sig2[(size_t) o];
    }
    out.linear_rel_rms = y_sum > 0 ? std::sqrt(d_sum / y_sum) : std::sqrt(d_sum);
    out.linear_ratio   = sig_sum > 0 ? std::sqrt(d_sum / sig_sum) : (d_sum > 0 ? INFINITY : 0.0);
    return true;
}

} // namespace sdio
