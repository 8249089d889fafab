// ops-norm-group.cpp — portable CPU kernels of the normalisations beyond a single row's
// mean/variance: GROUP_NORM (statistics over groups of channels of an image) and L2_NORM (row
// divided by its Euclidean norm).
//
// GROUP_NORM: for each dim-3 index, channels (dim 2) are grouped ceil(ne2 / n_groups) at a time
// (the last group may be smaller); mean and variance over every element of the group are
// accumulated in double (a 128x128x16 group has 262144 elements; packed F32 rows: 4 partial sums),
// then
// y = (x - mean) / sqrt(var + eps). Threads take (image, group) units.

#include "ops-row.h"

#include <algorithm>
#include <cmath>

void ggml_cpu_op_group_norm(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a        = dst->src[0];
    const int           n_groups = ggml_get_op_params_i32(dst, 0);
    const float         eps      = ggml_get_op_params_f32(dst, 1);
    if (ggml_is_empty(dst)) return;
    GGML_ASSERT(n_groups > 0 && ggml_are_same_shape(a, dst));

    const int64_t ne0 = a->ne[0], ne1 = a->ne[1], ne2 = a->ne[2], ne3 = a->ne[3];
    const int64_t cpg = (ne2 + n_groups - 1) / n_groups;
    const int64_t units = ne3 * (int64_t) n_groups;
    int64_t       u0, u1;
    ggml_cpu_split_range(units, params->ith, params->nth, &u0, &u1);

    float buf[GGML_CPU_CHUNK];
    for (int64_t u = u0; u < u1; ++u) {
        if (ggml_cpu_should_abort(params)) return;
        const int64_t i3 = u / n_groups;
        const int64_t g  = u % n_groups;
        const int64_t c0 = g * cpg;
        const int64_t c1 = std::min(c0 + cpg, ne2);
        if (c0 >= c1) continue;
        const double n = (double) ne0 * (double) ne1 * (double) (c1 - c0);

        auto for_rows = [&](auto && fn) {
            for (int64_t c = c0; c < c1; ++c)
                for (int64_t i1 = 0; i1 < ne1; ++i1)
                    for (int64_t k = 0; k < ne0; k += GGML_CPU_CHUNK) fn(c, i1, k, std::min<int64_t>(GGML_CPU_CHUNK, ne0 - k));
        };
        // packed F32 rows (every diffusion client's case): read in place, 4 independent double
        // accumulators (the dependent chain of one accumulator was the op's whole cost)
        const bool f32_rows = a->type == GGML_TYPE_F32 && a->nb[0] == sizeof(float);
        if (f32_rows) {
            double s4[4] = {0, 0, 0, 0};
            for (int64_t c = c0; c < c1; ++c)
                for (int64_t i1 = 0; i1 < ne1; ++i1) {
                    const float * x = (const float *) ((const char *) a->data + i1 * a->nb[1] + c * a->nb[2] + i3 * a->nb[3]);
                    int64_t       j = 0;
                    for (; j + 4 <= ne0; j += 4)
                        for (int l = 0; l < 4; ++l) s4[l] += (double) x[j + l];
                    for (; j < ne0; ++j) s4[0] += (double) x[j];
                }
            const double mean = ((s4[0] + s4[1]) + (s4[2] + s4[3])) / n;
            double       v4[4] = {0, 0, 0, 0};
            for (int64_t c = c0; c < c1; ++c)
                for (int64_t i1 = 0; i1 < ne1; ++i1) {
                    const float * x = (const float *) ((const char *) a->data + i1 * a->nb[1] + c * a->nb[2] + i3 * a->nb[3]);
                    int64_t       j = 0;
                    for (; j + 4 <= ne0; j += 4)
                        for (int l = 0; l < 4; ++l) v4[l] += ((double) x[j + l] - mean) * ((double) x[j + l] - mean);
                    for (; j < ne0; ++j) v4[0] += ((double) x[j] - mean) * ((double) x[j] - mean);
                }
            const double var   = (v4[0] + v4[1]) + (v4[2] + v4[3]);
            const float  scale = (float) (1.0 / std::sqrt(var / n + (double) eps));
            const float  fmean = (float) mean;
            for_rows([&](int64_t c, int64_t i1, int64_t k, int64_t m) {
                const float * x = (const float *) ((const char *) a->data + k * a->nb[0] + i1 * a->nb[1] + c * a->nb[2] + i3 * a->nb[3]);
                for (int64_t j = 0; j < m; ++j) buf[j] = (x[j] - fmean) * scale;
                ggml_cpu_store_row(dst->type,
                                   (char *) dst->data + k * dst->nb[0] + i1 * dst->nb[1] + c * dst->nb[2] + i3 * dst->nb[3],
                                   dst->nb[0], m, buf);
            });
            continue;
        }
        double sum = 0.0;
        for_rows([&](int64_t c, int64_t i1, int64_t k, int64_t m) {
            ggml_cpu_load_row(a->type, (const char *) a->data + k * a->nb[0] + i1 * a->nb[1] + c * a->nb[2] + i3 * a->nb[3],
                              a->nb[0], m, buf);
            for (int64_t j = 0; j < m; ++j) sum += buf[j];
        });
        const double mean = sum / n;
        double       var  = 0.0;
        for_rows([&](int64_t c, int64_t i1, int64_t k, int64_t m) {
            ggml_cpu_load_row(a->type, (const char *) a->data + k * a->nb[0] + i1 * a->nb[1] + c * a->nb[2] + i3 * a->nb[3],
                              a->nb[0], m, buf);
            for (int64_t j = 0; j < m; ++j) var += ((double) buf[j] - mean) * ((double) buf[j] - mean);
        });
        const float scale = (float) (1.0 / std::sqrt(var / n + (double) eps));
        const float fmean = (float) mean;
        // a and dst may alias (inplace): every element is read before it is written
        for_rows([&](int64_t c, int64_t i1, int64_t k, int64_t m) {
            ggml_cpu_load_row(a->type, (const char *) a->data + k * a->nb[0] + i1 * a->nb[1] + c * a->nb[2] + i3 * a->nb[3],
                              a->nb[0], m, buf);
            for (int64_t j = 0; j < m; ++j) buf[j] = (buf[j] - fmean) * scale;
            ggml_cpu_store_row(dst->type,
                               (char *) dst->data + k * dst->nb[0] + i1 * dst->nb[1] + c * dst->nb[2] + i3 * dst->nb[3],
                               dst->nb[0], m, buf);
        });
    }
}

void ggml_cpu_op_l2_norm(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a   = dst->src[0];
    const float         eps = ggml_get_op_params_f32(dst, 0);
    if (ggml_is_empty(dst)) return;
    GGML_ASSERT(ggml_are_same_shape(a, dst));
    const int64_t ne0 = a->ne[0];
    const int64_t nr  = ggml_nrows(a);
    int64_t       r0, r1;
    ggml_cpu_split_range(nr, params->ith, params->nth, &r0, &r1);
    float buf[GGML_CPU_CHUNK];
    ggml_cpu_abort_poll poll(params);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        ggml_cpu_row_coords(r, a->ne, &i1, &i2, &i3);
        const char * s = (const char *) a->data + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        char *       d = (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        double       ss = 0.0;
        for (int64_t k = 0; k < ne0; k += GGML_CPU_CHUNK) {
            const int64_t m = std::min<int64_t>(GGML_CPU_CHUNK, ne0 - k);
            ggml_cpu_load_row(a->type, s + k * a->nb[0], a->nb[0], m, buf);
            for (int64_t j = 0; j < m; ++j) ss += (double) buf[j] * buf[j];
        }
        const float scale = 1.0f / std::max((float) std::sqrt(ss), eps);
        for (int64_t k = 0; k < ne0; k += GGML_CPU_CHUNK) {
            const int64_t m = std::min<int64_t>(GGML_CPU_CHUNK, ne0 - k);
            ggml_cpu_load_row(a->type, s + k * a->nb[0], a->nb[0], m, buf);
            for (int64_t j = 0; j < m; ++j) buf[j] *= scale;
            ggml_cpu_store_row(dst->type, d + k * dst->nb[0], dst->nb[0], m, buf);
        }
        if (poll.tick(2 * ne0)) return;
    }
}
