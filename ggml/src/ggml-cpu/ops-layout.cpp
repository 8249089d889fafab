// ops-layout.cpp — portable CPU kernels that move or generate data without arithmetic on it:
// GET_ROWS, CONCAT, PAD, REPEAT, ARANGE, TIMESTEP_EMBEDDING, and the CUSTOM callback bridge.
//
// Work is split over destination rows, so each thread writes a disjoint part of dst. Data
// movement is by element size (bytes) wherever no type conversion is involved, which makes the
// kernels type-agnostic for all non-block types.

#include "ops-row.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace {

// Copy n elements of ts bytes between strided runs.
void copy_elems(char * d, size_t dnb0, const char * s, size_t snb0, int64_t n, size_t ts) {
    if (n <= 0 || d == s) return;
    if (dnb0 == ts && snb0 == ts) {
        memcpy(d, s, (size_t) n * ts);
    } else {
        for (int64_t i = 0; i < n; ++i) memcpy(d + i * dnb0, s + i * snb0, ts);
    }
}

void zero_elems(char * d, size_t dnb0, int64_t n, size_t ts) {
    if (n <= 0) return;
    if (dnb0 == ts) {
        memset(d, 0, (size_t) n * ts);
    } else {
        for (int64_t i = 0; i < n; ++i) memset(d + i * dnb0, 0, ts);
    }
}

// One row of n elements from a source of type st into a destination of type dt.
void convert_row(ggml_type st, const char * s, size_t snb0, ggml_type dt, char * d, size_t dnb0, int64_t n) {
    if (st == dt && ggml_blck_size(st) == 1) {
        copy_elems(d, dnb0, s, snb0, n, ggml_type_size(st));
        return;
    }
    float buf[GGML_CPU_CHUNK];
    const ggml_type_traits * tr = ggml_get_type_traits(st);
    if (tr->blck_size > 1) {
        // block-quantized rows are packed: dequantise one block at a time
        const int64_t bs = tr->blck_size;
        GGML_ASSERT(tr->to_float && bs <= GGML_CPU_CHUNK && n % bs == 0);
        for (int64_t i0 = 0; i0 < n; i0 += bs) {
            tr->to_float(s + (i0 / bs) * tr->type_size, buf, bs);
            ggml_cpu_store_row(dt, d + i0 * dnb0, dnb0, bs, buf);
        }
        return;
    }
    for (int64_t i0 = 0; i0 < n; i0 += GGML_CPU_CHUNK) {
        const int64_t m = std::min<int64_t>(GGML_CPU_CHUNK, n - i0);
        ggml_cpu_load_row(st, s + i0 * snb0, snb0, m, buf);
        ggml_cpu_store_row(dt, d + i0 * dnb0, dnb0, m, buf);
    }
}

inline int64_t wrap_index(int64_t i, int64_t n) {
    const int64_t r = i % n;
    return r < 0 ? r + n : r;
}

} // namespace

// ---------------------------------------------------------------------------------------------

void ggml_cpu_op_get_rows(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    if (ggml_is_empty(dst)) return;
    GGML_ASSERT((b->type == GGML_TYPE_I32 || b->type == GGML_TYPE_I64) && "get_rows: indices must be I32");
    GGML_ASSERT(dst->ne[0] == a->ne[0] && dst->ne[1] == b->ne[0] && dst->ne[2] == b->ne[1] &&
                dst->ne[3] == b->ne[2] && "get_rows: shape mismatch");
    GGML_ASSERT(b->ne[1] == a->ne[2] && b->ne[2] == a->ne[3] && b->ne[3] == 1);

    const int64_t ne0 = a->ne[0];
    const int64_t nr  = ggml_nelements(b);
    int64_t       r0, r1;
    ggml_cpu_split_range(nr, params->ith, params->nth, &r0, &r1);

    ggml_cpu_abort_poll poll(params);
    for (int64_t ir = r0; ir < r1; ++ir) {
        const int64_t i10 = ir % b->ne[0];
        const int64_t i11 = (ir / b->ne[0]) % b->ne[1];
        const int64_t i12 = ir / (b->ne[0] * b->ne[1]);

        const char * ip  = (const char *) b->data + i10 * b->nb[0] + i11 * b->nb[1] + i12 * b->nb[2];
        int64_t      idx = 0;
        if (b->type == GGML_TYPE_I32) {
            int32_t v;
            memcpy(&v, ip, sizeof(v));
            idx = v;
        } else {
            memcpy(&idx, ip, sizeof(idx));
        }
        if (idx < 0 || idx >= a->ne[1]) {
            GGML_ABORT("get_rows: row index %lld out of range [0, %lld)", (long long) idx, (long long) a->ne[1]);
        }

        const char * s = (const char *) a->data + idx * a->nb[1] + i11 * a->nb[2] + i12 * a->nb[3];
        char *       d = (char *) dst->data + i10 * dst->nb[1] + i11 * dst->nb[2] + i12 * dst->nb[3];
        convert_row(a->type, s, a->nb[0], dst->type, d, dst->nb[0], ne0);

        if (poll.tick(ne0)) return;
    }
}

void ggml_cpu_op_concat(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a   = dst->src[0];
    const ggml_tensor * b   = dst->src[1];
    const int           dim = ggml_get_op_params_i32(dst, 0);
    if (ggml_is_empty(dst)) return;
    GGML_ASSERT(dim >= 0 && dim < GGML_MAX_DIMS);
    GGML_ASSERT(a->type == dst->type && b->type == dst->type && ggml_blck_size(dst->type) == 1 &&
                "concat: operands must share a non-block type");
    for (int d = 0; d < GGML_MAX_DIMS; ++d) {
        if (d == dim) {
            GGML_ASSERT(dst->ne[d] == a->ne[d] + b->ne[d]);
        } else {
            GGML_ASSERT(dst->ne[d] == a->ne[d] && dst->ne[d] == b->ne[d]);
        }
    }

    const size_t  ts  = ggml_type_size(dst->type);
    const int64_t ne0 = dst->ne[0];
    const int64_t nr  = ggml_nrows(dst);
    int64_t       r0, r1;
    ggml_cpu_split_range(nr, params->ith, params->nth, &r0, &r1);

    ggml_cpu_abort_poll poll(params);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i[4] = { 0, 0, 0, 0 };
        ggml_cpu_row_coords(ir, dst->ne, &i[1], &i[2], &i[3]);
        char * d = (char *) dst->data + i[1] * dst->nb[1] + i[2] * dst->nb[2] + i[3] * dst->nb[3];

        if (dim == 0) {
            // an operand with ne0 == 0 may have no data at all: never form pointers into it
            if (a->ne[0] > 0) {
                const char * sa = (const char *) a->data + i[1] * a->nb[1] + i[2] * a->nb[2] + i[3] * a->nb[3];
                copy_elems(d, dst->nb[0], sa, a->nb[0], a->ne[0], ts);
            }
            if (b->ne[0] > 0) {
                const char * sb = (const char *) b->data + i[1] * b->nb[1] + i[2] * b->nb[2] + i[3] * b->nb[3];
                copy_elems(d + a->ne[0] * dst->nb[0], dst->nb[0], sb, b->nb[0], b->ne[0], ts);
            }
        } else {
            const ggml_tensor * s = a;
            if (i[dim] >= a->ne[dim]) {
                s = b;
                i[dim] -= a->ne[dim];
            }
            const char * sp = (const char *) s->data + i[1] * s->nb[1] + i[2] * s->nb[2] + i[3] * s->nb[3];
            copy_elems(d, dst->nb[0], sp, s->nb[0], ne0, ts);
        }

        if (poll.tick(ne0)) return;
    }
}

void ggml_cpu_op_pad(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    if (ggml_is_empty(dst)) return;
    GGML_ASSERT(src->type == dst->type && ggml_blck_size(dst->type) == 1 && "pad: same non-block type expected");

    int64_t lp[4];
    for (int d = 0; d < 4; ++d) {
        lp[d]            = ggml_get_op_params_i32(dst, 2 * d);
        const int64_t rp = ggml_get_op_params_i32(dst, 2 * d + 1);
        GGML_ASSERT(dst->ne[d] == src->ne[d] + lp[d] + rp && "pad: result extent mismatch");
    }
    // slot 8: fill from the opposite side (torus wrap) instead of zeros
    const bool circular = ggml_get_op_params_i32(dst, 8) != 0;
    GGML_ASSERT(!circular || !ggml_is_empty(src));

    const size_t  ts   = ggml_type_size(dst->type);
    const int64_t ne0  = dst->ne[0];
    const int64_t ne00 = src->ne[0];
    const size_t  dnb0 = dst->nb[0];
    const size_t  snb0 = src->nb[0];
    const int64_t nr   = ggml_nrows(dst);
    int64_t       r0, r1;
    ggml_cpu_split_range(nr, params->ith, params->nth, &r0, &r1);

    ggml_cpu_abort_poll poll(params);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i[4] = { 0, 0, 0, 0 };
        ggml_cpu_row_coords(ir, dst->ne, &i[1], &i[2], &i[3]);
        char * d = (char *) dst->data + i[1] * dst->nb[1] + i[2] * dst->nb[2] + i[3] * dst->nb[3];

        bool    inside = !ggml_is_empty(src);
        int64_t j[4]   = { 0, 0, 0, 0 };
        for (int k = 1; k < 4; ++k) {
            j[k] = i[k] - lp[k];
            if (j[k] < 0 || j[k] >= src->ne[k]) {
                if (circular) {
                    j[k] = wrap_index(j[k], src->ne[k]);
                } else {
                    inside = false;
                }
            }
        }

        if (!inside) {
            zero_elems(d, dnb0, ne0, ts);
        } else {
            const char * s = (const char *) src->data + j[1] * src->nb[1] + j[2] * src->nb[2] + j[3] * src->nb[3];
            if (circular) {
                for (int64_t i0 = 0; i0 < ne0; ++i0) {
                    memcpy(d + i0 * dnb0, s + wrap_index(i0 - lp[0], ne00) * snb0, ts);
                }
            } else {
                zero_elems(d, dnb0, lp[0], ts);
                copy_elems(d + lp[0] * dnb0, dnb0, s, snb0, ne00, ts);
                zero_elems(d + (lp[0] + ne00) * dnb0, dnb0, ne0 - lp[0] - ne00, ts);
            }
        }

        if (poll.tick(ne0)) return;
    }
}

void ggml_cpu_op_repeat(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    if (ggml_is_empty(dst)) return;
    GGML_ASSERT(ggml_can_repeat(src, dst) && "repeat: dst extents must be multiples of src extents");
    GGML_ASSERT(src->type == dst->type && ggml_blck_size(dst->type) == 1);

    const size_t  ts   = ggml_type_size(dst->type);
    const int64_t ne0  = dst->ne[0];
    const int64_t ne00 = src->ne[0];
    const int64_t nr   = ggml_nrows(dst);
    int64_t       r0, r1;
    ggml_cpu_split_range(nr, params->ith, params->nth, &r0, &r1);

    ggml_cpu_abort_poll poll(params);
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        ggml_cpu_row_coords(ir, dst->ne, &i1, &i2, &i3);
        const char * s = (const char *) src->data + (i1 % src->ne[1]) * src->nb[1] + (i2 % src->ne[2]) * src->nb[2] +
                         (i3 % src->ne[3]) * src->nb[3];
        char * d = (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        for (int64_t t = 0; t < ne0; t += ne00) copy_elems(d + t * dst->nb[0], dst->nb[0], s, src->nb[0], ne00, ts);

        if (poll.tick(ne0)) return;
    }
}

void ggml_cpu_op_arange(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    if (ggml_is_empty(dst)) return;
    GGML_ASSERT(dst->type == GGML_TYPE_F32);
    const double start = ggml_get_op_params_f32(dst, 0);
    const double step  = ggml_get_op_params_f32(dst, 2);

    int64_t e0, e1;
    ggml_cpu_split_range(ggml_nelements(dst), params->ith, params->nth, &e0, &e1);
    char * d = (char *) dst->data;
    for (int64_t i = e0; i < e1; ++i) {
        const float v = (float) (start + (double) i * step);
        memcpy(d + i * dst->nb[0], &v, sizeof(v));
    }
}

void ggml_cpu_op_timestep_embedding(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * ts = dst->src[0];
    if (ggml_is_empty(dst)) return;
    GGML_ASSERT(dst->type == GGML_TYPE_F32);
    const int     dim        = ggml_get_op_params_i32(dst, 0);
    const int     max_period = ggml_get_op_params_i32(dst, 1);
    const int64_t half       = dim / 2;
    GGML_ASSERT(dst->ne[0] >= 2 * half && dst->ne[1] == ts->ne[0]);

    int64_t r0, r1;
    ggml_cpu_split_range(ts->ne[0], params->ith, params->nth, &r0, &r1);

    // double keeps the phase t*f_j accurate for large timesteps (t ~ 1000)
    const double        log_mp = std::log((double) max_period);
    const size_t        dnb0   = dst->nb[0];
    ggml_cpu_abort_poll poll(params);
    for (int64_t r = r0; r < r1; ++r) {
        const double t = ggml_load_f32(ts->type, (const char *) ts->data + r * ts->nb[0]);
        char *       d = (char *) dst->data + r * dst->nb[1];
        for (int64_t j = 0; j < half; ++j) {
            const double f   = std::exp(-log_mp * (double) j / (double) half);
            const double arg = t * f;
            const float  c   = (float) std::cos(arg);
            const float  s   = (float) std::sin(arg);
            memcpy(d + j * dnb0, &c, sizeof(c));
            memcpy(d + (j + half) * dnb0, &s, sizeof(s));
        }
        // odd dim: the trailing column(s) are zero
        zero_elems(d + 2 * half * dnb0, dnb0, dst->ne[0] - 2 * half, sizeof(float));

        if (poll.tick(dst->ne[0])) return;
    }
}

void ggml_cpu_op_custom(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    struct ggml_custom_op_params p;
    memcpy(&p, dst->op_params, sizeof(p));
    GGML_ASSERT(p.fun && "custom: no callback");
    p.fun(dst, params->ith, params->nth, p.userdata);
}
