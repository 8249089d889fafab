// ops-norm.cpp — portable CPU kernels for row normalisations over ne0 (NORM, RMS_NORM).
//
// Row statistics are accumulated in double so long rows (tens of thousands of elements) keep
// full float accuracy; norm uses two passes (mean, then squared deviations) rather than
// E[x^2] - E[x]^2, which cancels badly when |mean| >> std. dst may alias src: every element is
// read before (or at the same time as) it is overwritten.

#include "ops-fast.h"
#include "ops-row.h"

#include <algorithm>
#include <cmath>

namespace {

enum class norm_kind { norm, rms };

template <norm_kind K>
void norm_impl(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    if (ggml_is_empty(dst)) return;
    GGML_ASSERT(ggml_are_same_shape(src, dst));

    const float   eps = ggml_get_op_params_f32(dst, 0);
    const int64_t ne0 = dst->ne[0];
    const int64_t nr  = ggml_nrows(dst);
    int64_t       r0, r1;
    ggml_cpu_split_range(nr, params->ith, params->nth, &r0, &r1);

    const bool f32 = src->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32 && src->nb[0] == sizeof(float) &&
                     dst->nb[0] == sizeof(float);
    const ggml_cpu_row_kernels * rows = ggml_cpu_rows(params);
    void (*const fast_row)(const float *, float *, int64_t, float) =
        !f32 || !rows ? nullptr : K == norm_kind::norm ? rows->norm_row : rows->rms_norm_row;
    const bool   fast = fast_row != nullptr;
    const size_t snb0 = src->nb[0];
    const size_t dnb0 = dst->nb[0];

    ggml_cpu_abort_poll poll(params);
    float               buf[GGML_CPU_CHUNK];
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        ggml_cpu_row_coords(ir, dst->ne, &i1, &i2, &i3);
        const char * s = (const char *) src->data + i1 * src->nb[1] + i2 * src->nb[2] + i3 * src->nb[3];
        char *       d = (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];

        if (fast) {
            fast_row((const float *) s, (float *) d, ne0, eps);
            if (poll.tick(ne0)) return;
            continue;
        }

        // pass 1 (norm: mean; rms: mean of squares)
        double acc = 0.0;
        if (f32) {
            const float * sf = (const float *) s;
            for (int64_t i = 0; i < ne0; ++i) {
                const double x = sf[i];
                acc += K == norm_kind::norm ? x : x * x;
            }
        } else {
            for (int64_t i0 = 0; i0 < ne0; i0 += GGML_CPU_CHUNK) {
                const int64_t m = std::min<int64_t>(GGML_CPU_CHUNK, ne0 - i0);
                ggml_cpu_load_row(src->type, s + i0 * snb0, snb0, m, buf);
                for (int64_t e = 0; e < m; ++e) {
                    const double x = buf[e];
                    acc += K == norm_kind::norm ? x : x * x;
                }
            }
        }

        double mean = 0.0;
        double scale;
        if (K == norm_kind::norm) {
            mean       = acc / (double) ne0;
            double var = 0.0;
            if (f32) {
                const float * sf = (const float *) s;
                for (int64_t i = 0; i < ne0; ++i) {
                    const double dx = (double) sf[i] - mean;
                    var += dx * dx;
                }
            } else {
                for (int64_t i0 = 0; i0 < ne0; i0 += GGML_CPU_CHUNK) {
                    const int64_t m = std::min<int64_t>(GGML_CPU_CHUNK, ne0 - i0);
                    ggml_cpu_load_row(src->type, s + i0 * snb0, snb0, m, buf);
                    for (int64_t e = 0; e < m; ++e) {
                        const double dx = (double) buf[e] - mean;
                        var += dx * dx;
                    }
                }
            }
            var /= (double) ne0;
            scale = 1.0 / std::sqrt(var + (double) eps);
        } else {
            scale = 1.0 / std::sqrt(acc / (double) ne0 + (double) eps);
        }

        // output pass
        if (f32) {
            const float * sf = (const float *) s;
            float *       df = (float *) d;
            for (int64_t i = 0; i < ne0; ++i) df[i] = (float) (((double) sf[i] - mean) * scale);
        } else {
            for (int64_t i0 = 0; i0 < ne0; i0 += GGML_CPU_CHUNK) {
                const int64_t m = std::min<int64_t>(GGML_CPU_CHUNK, ne0 - i0);
                ggml_cpu_load_row(src->type, s + i0 * snb0, snb0, m, buf);
                for (int64_t e = 0; e < m; ++e) buf[e] = (float) (((double) buf[e] - mean) * scale);
                ggml_cpu_store_row(dst->type, d + i0 * dnb0, dnb0, m, buf);
            }
        }

        if (poll.tick(ne0)) return;
    }
}

} // namespace

void ggml_cpu_op_norm(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    norm_impl<norm_kind::norm>(params, dst);
}

void ggml_cpu_op_rms_norm(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    norm_impl<norm_kind::rms>(params, dst);
}
