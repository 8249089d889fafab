// ops-softmax.cpp — SOFT_MAX kernel (facts 4.10): out = softmax(a*scale + slope*mask) over ne0.
//
// Each row is first written into a per-thread scratch row, so dst may alias src0 (the allocator
// runs SOFT_MAX in place) and src0 rows may be strided.
//
// Our choice for a row whose logits are all -inf (and no finite sink): the output row is zeros,
// not NaN (upstream leaves that case undefined).

#include "cpu-ops.h"
#include "ops-fast.h"

#include <cmath>

namespace {

constexpr int64_t SM_PAD = 16; // floats of padding between per-thread rows (keeps rows on separate lines)

float load_mask(enum ggml_type type, const char * row, int64_t i) {
    return type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(((const ggml_fp16_t *) row)[i]) : ((const float *) row)[i];
}

} // namespace

size_t ggml_cpu_soft_max_work_size(const struct ggml_tensor * dst, int n_threads) {
    return (size_t) n_threads * (size_t) (dst->ne[0] + SM_PAD) * sizeof(float);
}

void ggml_cpu_op_soft_max(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src0  = dst->src[0];
    const struct ggml_tensor * mask  = dst->src[1];
    const struct ggml_tensor * sinks = dst->src[2];

    const float scale    = ggml_get_op_params_f32(dst, 0);
    const float max_bias = ggml_get_op_params_f32(dst, 1);

    const int64_t ne00 = src0->ne[0];
    const int64_t ne01 = src0->ne[1];
    const int64_t ne02 = src0->ne[2];
    const int64_t ne03 = src0->ne[3];

    GGML_ASSERT(src0->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32);
    GGML_ASSERT((ne00 <= 1 || src0->nb[0] == sizeof(float)) && "soft_max: src0 rows must be packed");
    GGML_ASSERT((ne00 <= 1 || dst->nb[0] == sizeof(float)) && "soft_max: dst rows must be packed");
    GGML_ASSERT(dst->ne[0] == ne00 && dst->ne[1] == ne01 && dst->ne[2] == ne02 && dst->ne[3] == ne03);
    if (mask) {
        GGML_ASSERT(mask->type == GGML_TYPE_F32 || mask->type == GGML_TYPE_F16);
        GGML_ASSERT(mask->ne[0] == ne00 && mask->ne[1] >= ne01 && "soft_max: mask shape");
        GGML_ASSERT(mask->ne[2] > 0 && mask->ne[3] > 0 && ne02 % mask->ne[2] == 0 && ne03 % mask->ne[3] == 0);
    }
    if (sinks) {
        GGML_ASSERT(sinks->type == GGML_TYPE_F32 && sinks->ne[0] >= ne02);
    }
    GGML_ASSERT((max_bias <= 0.0f || mask) && "soft_max: ALiBi (max_bias > 0) needs a mask");

    const int64_t nrows = ne01 * ne02 * ne03;
    if (nrows == 0 || ne00 == 0) return;

    GGML_ASSERT(params->wsize >= ggml_cpu_soft_max_work_size(dst, params->nth));
    float * tmp = (float *) params->wdata + (size_t) params->ith * (size_t) (ne00 + SM_PAD);

    // ALiBi slopes (facts 4.10): head h = i2 of n_head = ne02 heads
    const uint32_t n_head  = (uint32_t) ne02;
    const uint32_t n_log2  = n_head > 0 ? 1u << (uint32_t) std::floor(std::log2((double) n_head)) : 1u;
    const float    m0      = std::pow(2.0f, -max_bias / (float) n_log2);
    const float    m1      = std::pow(2.0f, -(max_bias / 2.0f) / (float) n_log2);
    auto           slope_of = [&](int64_t h) -> float {
        if (max_bias <= 0.0f) return 1.0f;
        return (uint32_t) h < n_log2 ? std::pow(m0, (float) (h + 1)) : std::pow(m1, (float) (2 * (h - n_log2) + 1));
    };

    int64_t r0, r1;
    ggml_cpu_split_range(nrows, params->ith, params->nth, &r0, &r1);
    const ggml_cpu_row_kernels * rows = ggml_cpu_rows(params);
    const bool fast = rows && rows->soft_max_row;

    for (int64_t r = r0; r < r1; ++r) {
        if (((r - r0) & 255) == 0 && ggml_cpu_should_abort(params)) return;

        const int64_t i1 = r % ne01;
        const int64_t i2 = (r / ne01) % ne02;
        const int64_t i3 = r / (ne01 * ne02);

        const float * x = (const float *) ((const char *) src0->data + i1 * src0->nb[1] + i2 * src0->nb[2] +
                                           i3 * src0->nb[3]);
        float * y = (float *) ((char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);

        if (fast) {
            const void * mrow = mask ? (const char *) mask->data + i1 * mask->nb[1] + (i2 % mask->ne[2]) * mask->nb[2] +
                                           (i3 % mask->ne[3]) * mask->nb[3]
                                     : nullptr;
            rows->soft_max_row(x, y, tmp, ne00, scale, mrow, mask && mask->type == GGML_TYPE_F16,
                               mask ? slope_of(i2) : 1.0f, sinks ? ((const float *) sinks->data)[i2] : -INFINITY);
            continue;
        }

        float maxv = -INFINITY;
        if (mask) {
            const float  slope = slope_of(i2);
            const char * mrow  = (const char *) mask->data + i1 * mask->nb[1] + (i2 % mask->ne[2]) * mask->nb[2] +
                                (i3 % mask->ne[3]) * mask->nb[3];
            for (int64_t i = 0; i < ne00; ++i) {
                const float v = x[i] * scale + slope * load_mask(mask->type, mrow, i);
                tmp[i]        = v;
                maxv          = v > maxv ? v : maxv;
            }
        } else {
            for (int64_t i = 0; i < ne00; ++i) {
                const float v = x[i] * scale;
                tmp[i]        = v;
                maxv          = v > maxv ? v : maxv;
            }
        }

        const float sink = sinks ? ((const float *) sinks->data)[i2] : -INFINITY;
        if (sink > maxv) maxv = sink;

        if (maxv == -INFINITY) {
            for (int64_t i = 0; i < ne00; ++i) y[i] = 0.0f;
            continue;
        }

        double sum = 0.0; // exp terms span many magnitudes; a double sum keeps the normaliser exact to F32
        for (int64_t i = 0; i < ne00; ++i) {
            const float e = std::exp(tmp[i] - maxv);
            tmp[i]        = e;
            sum += e;
        }
        if (sinks) sum += std::exp(sink - maxv);

        const float inv = (float) (1.0 / sum);
        for (int64_t i = 0; i < ne00; ++i) y[i] = tmp[i] * inv;
    }
}
