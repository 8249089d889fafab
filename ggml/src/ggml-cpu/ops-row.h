#pragma once

// ops-row.h — small helpers shared by the portable CPU kernels (elementwise, norm, layout):
// converting strided runs of F32/F16/BF16/integer elements to and from a float scratch buffer,
// walking a tensor in flattened logical order, and polling for abort at a bounded work cadence.
// Kept header-only (static inline) so each kernel file stays self-contained.

#include "cpu-ops.h"

#include <cstring>

// Scratch size (in floats) used by the chunked kernels; small enough for the stack.
#define GGML_CPU_CHUNK 256

// Load n elements of `type` spaced `stride` bytes apart into out[0..n).
static inline void ggml_cpu_load_row(enum ggml_type type, const char * p, size_t stride, int64_t n, float * out) {
    switch (type) {
        case GGML_TYPE_F32:
            if (stride == sizeof(float)) {
                memcpy(out, p, (size_t) n * sizeof(float));
            } else {
                for (int64_t i = 0; i < n; ++i) memcpy(&out[i], p + i * stride, sizeof(float));
            }
            break;
        case GGML_TYPE_F16:
            for (int64_t i = 0; i < n; ++i) {
                ggml_fp16_t h;
                memcpy(&h, p + i * stride, sizeof(h));
                out[i] = ggml_fp16_to_fp32(h);
            }
            break;
        case GGML_TYPE_BF16:
            for (int64_t i = 0; i < n; ++i) {
                ggml_bf16_t h;
                memcpy(&h, p + i * stride, sizeof(h));
                out[i] = ggml_bf16_to_fp32(h);
            }
            break;
        default:
            for (int64_t i = 0; i < n; ++i) out[i] = ggml_load_f32(type, p + i * stride);
            break;
    }
}

// Store in[0..n) as `type` (F16/BF16 round to nearest even; integers truncate) at p, stride bytes apart.
static inline void ggml_cpu_store_row(enum ggml_type type, char * p, size_t stride, int64_t n, const float * in) {
    switch (type) {
        case GGML_TYPE_F32:
            if (stride == sizeof(float)) {
                memcpy(p, in, (size_t) n * sizeof(float));
            } else {
                for (int64_t i = 0; i < n; ++i) memcpy(p + i * stride, &in[i], sizeof(float));
            }
            break;
        case GGML_TYPE_F16:
            for (int64_t i = 0; i < n; ++i) {
                const ggml_fp16_t h = ggml_fp32_to_fp16(in[i]);
                memcpy(p + i * stride, &h, sizeof(h));
            }
            break;
        case GGML_TYPE_BF16:
            for (int64_t i = 0; i < n; ++i) {
                const ggml_bf16_t h = ggml_fp32_to_bf16(in[i]);
                memcpy(p + i * stride, &h, sizeof(h));
            }
            break;
        default:
            for (int64_t i = 0; i < n; ++i) ggml_store_f32(type, p + i * stride, in[i]);
            break;
    }
}

// Walks a tensor's units in flattened logical order (dim 0 fastest). A unit is one element, or
// one block for block-quantized types (then ne0 counts blocks). Moving along dim 0 is cheap; the
// carry into higher dims happens only at row ends.
struct ggml_cpu_cursor {
    int64_t ne[4];
    size_t  nb[4];
    int64_t i[4];
    char *  base;

    void init(const struct ggml_tensor * t, int64_t blck) {
        for (int d = 0; d < 4; ++d) {
            ne[d] = t->ne[d];
            nb[d] = t->nb[d];
            i[d]  = 0;
        }
        ne[0] /= blck;
        base = (char *) t->data;
    }
    void seek(int64_t flat) {
        for (int d = 0; d < 4; ++d) {
            i[d] = flat % ne[d];
            flat /= ne[d];
        }
    }
    char * ptr() const { return base + i[0] * nb[0] + i[1] * nb[1] + i[2] * nb[2] + i[3] * nb[3]; }
    int64_t left_in_row() const { return ne[0] - i[0]; }
    // advance by k units, k <= left_in_row()
    void advance(int64_t k) {
        i[0] += k;
        if (i[0] < ne[0]) return;
        i[0] = 0;
        for (int d = 1; d < 4; ++d) {
            if (++i[d] < ne[d]) return;
            i[d] = 0;
        }
    }
};

// Calls ggml_cpu_should_abort about once per `period` units of work, so polling stays cheap.
struct ggml_cpu_abort_poll {
    const struct ggml_compute_params * params;
    int64_t budget;
    static constexpr int64_t period = 1 << 16;

    explicit ggml_cpu_abort_poll(const struct ggml_compute_params * p) : params(p), budget(period) {}

    // record `work` units done; true if the computation should stop
    bool tick(int64_t work) {
        budget -= work;
        if (budget > 0) return false;
        budget = period;
        return ggml_cpu_should_abort(params);
    }
};

// Row index -> (i1, i2, i3) for a tensor with extents ne1, ne2.
static inline void ggml_cpu_row_coords(int64_t ir, const int64_t * ne, int64_t * i1, int64_t * i2, int64_t * i3) {
    *i3 = ir / (ne[1] * ne[2]);
    const int64_t r = ir - *i3 * ne[1] * ne[2];
    *i2 = r / ne[1];
    *i1 = r - *i2 * ne[1];
}
