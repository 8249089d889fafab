// ops-elementwise.cpp — portable CPU kernels for copies/conversions (DUP, CONT, CPY), binary
// arithmetic with modulo broadcasting, and elementwise maps (sqr, sqrt, scale, unary, glu).
//
// Everything computes in float and rounds once to the destination type. Every kernel honours
// arbitrary byte strides on all operands, so views (transposes, permutes, _inplace results)
// need no special casing; the all-F32 packed-row case gets a direct loop, or on AVX-512 CPUs the
// row kernels of ops-elementwise-avx512.cpp (as do packed F32 <-> F16/BF16 conversions).

#include "ops-fast.h"
#include "ops-row.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace {

// ---------------------------------------------------------------------------------------------
// DUP / CONT / CPY

// Same type (incl. quantized blocks): raw bytes, so integer payloads and NaN bits survive.
void dup_same_type(const ggml_compute_params * params, const ggml_tensor * src, ggml_tensor * dst) {
    const int64_t bs = ggml_blck_size(src->type);
    const size_t  ts = ggml_type_size(src->type);
    GGML_ASSERT(src->ne[0] % bs == 0 && dst->ne[0] % bs == 0 && "dup: rows must hold whole blocks");

    const int64_t nunits = ggml_nelements(src) / bs;
    int64_t       u0, u1;
    ggml_cpu_split_range(nunits, params->ith, params->nth, &u0, &u1);
    if (u0 >= u1) return;

    ggml_cpu_abort_poll poll(params);

    if (ggml_is_contiguous(src) && ggml_is_contiguous(dst)) {
        const char * s = (const char *) src->data;
        char *       d = (char *) dst->data;
        if (s == d) return; // dup_inplace of a packed tensor: nothing moves
        const int64_t step = ggml_cpu_abort_poll::period;
        for (int64_t u = u0; u < u1; u += step) {
            const int64_t n = std::min(step, u1 - u);
            memcpy(d + u * ts, s + u * ts, (size_t) n * ts);
            if (poll.tick(n)) return;
        }
        return;
    }

    ggml_cpu_cursor cs, cd;
    cs.init(src, bs);
    cd.init(dst, bs);
    cs.seek(u0);
    cd.seek(u0);
    for (int64_t u = u0; u < u1;) {
        const int64_t k  = std::min({ u1 - u, cs.left_in_row(), cd.left_in_row() });
        const char *  sp = cs.ptr();
        char *        dp = cd.ptr();
        if (sp != dp) {
            if (cs.nb[0] == ts && cd.nb[0] == ts) {
                memcpy(dp, sp, (size_t) k * ts);
            } else {
                for (int64_t j = 0; j < k; ++j) memcpy(dp + j * cd.nb[0], sp + j * cs.nb[0], ts);
            }
        }
        cs.advance(k);
        cd.advance(k);
        u += k;
        if (poll.tick(k)) return;
    }
}

// One of the active level's packed conversions (ops-fast.h), chosen by the type pair.
struct fast_cvt {
    void (*narrow)(const float * x, uint16_t * y, int64_t n)  = nullptr; // F32 -> F16 / BF16
    void (*widen)(const uint16_t * x, float * y, int64_t n)   = nullptr; // F16 / BF16 -> F32
    explicit operator bool() const { return narrow || widen; }
    void operator()(const void * s, void * d, int64_t n) const {
        if (narrow) narrow((const float *) s, (uint16_t *) d, n);
        else        widen((const uint16_t *) s, (float *) d, n);
    }
};

fast_cvt fast_converter(const ggml_cpu_row_kernels * rows, ggml_type ts, ggml_type td) {
    fast_cvt c;
    if (!rows) return c;
    if (ts == GGML_TYPE_F32 && td == GGML_TYPE_F16) c.narrow = rows->f32_to_f16;
    if (ts == GGML_TYPE_F32 && td == GGML_TYPE_BF16) c.narrow = rows->f32_to_bf16;
    if (ts == GGML_TYPE_F16 && td == GGML_TYPE_F32) c.widen = rows->f16_to_f32;
    if (ts == GGML_TYPE_BF16 && td == GGML_TYPE_F32) c.widen = rows->bf16_to_f32;
    return c;
}

// Non-quantized type change, through float.
void dup_convert(const ggml_compute_params * params, const ggml_tensor * src, ggml_tensor * dst) {
    const int64_t n = ggml_nelements(src);
    int64_t       e0, e1;
    ggml_cpu_split_range(n, params->ith, params->nth, &e0, &e1);
    if (e0 >= e1) return;

    ggml_cpu_abort_poll poll(params);

    // packed F32 <-> F16/BF16: converted straight from source to destination (bit-identical to the
    // scalar conversions); fully contiguous tensors as one flat run
    const fast_cvt fast = fast_converter(ggml_cpu_rows(params), src->type, dst->type);
    if (fast && ggml_is_contiguous(src) && ggml_is_contiguous(dst)) {
        const size_t  ss   = ggml_type_size(src->type), ds = ggml_type_size(dst->type);
        const int64_t step = ggml_cpu_abort_poll::period;
        for (int64_t e = e0; e < e1; e += step) {
            const int64_t k = std::min(step, e1 - e);
            fast((const char *) src->data + e * ss, (char *) dst->data + e * ds, k);
            if (poll.tick(k)) return;
        }
        return;
    }

    ggml_cpu_cursor cs, cd;
    cs.init(src, 1);
    cd.init(dst, 1);
    cs.seek(e0);
    cd.seek(e0);

    if (fast && cs.nb[0] == ggml_type_size(src->type) && cd.nb[0] == ggml_type_size(dst->type)) {
        for (int64_t e = e0; e < e1;) {
            const int64_t k = std::min({ e1 - e, cs.left_in_row(), cd.left_in_row() });
            fast(cs.ptr(), cd.ptr(), k);
            cs.advance(k);
            cd.advance(k);
            e += k;
            if (poll.tick(k)) return;
        }
        return;
    }

    float buf[GGML_CPU_CHUNK];
    for (int64_t e = e0; e < e1;) {
        const int64_t k  = std::min({ e1 - e, cs.left_in_row(), cd.left_in_row(), (int64_t) GGML_CPU_CHUNK });
        ggml_cpu_load_row(src->type, cs.ptr(), cs.nb[0], k, buf);
        ggml_cpu_store_row(dst->type, cd.ptr(), cd.nb[0], k, buf);
        cs.advance(k);
        cd.advance(k);
        e += k;
        if (poll.tick(k)) return;
    }
}

// Float-like source -> block-quantized destination, one destination block at a time (the Q8_0
// reference quantiser works per block, so this equals quantising whole rows).
void dup_quantize(const ggml_compute_params * params, const ggml_tensor * src, ggml_tensor * dst) {
    const ggml_type_traits * tr = ggml_get_type_traits(dst->type);
    const int64_t            bs = tr->blck_size;
    GGML_ASSERT(tr->from_float_ref && "dup: no quantiser for destination type");
    GGML_ASSERT(bs <= GGML_CPU_CHUNK);
    GGML_ASSERT(dst->ne[0] % bs == 0 && "dup: destination rows must hold whole blocks");

    const int64_t nblk = ggml_nelements(dst) / bs;
    int64_t       b0, b1;
    ggml_cpu_split_range(nblk, params->ith, params->nth, &b0, &b1);
    if (b0 >= b1) return;

    ggml_cpu_abort_poll poll(params);
    ggml_cpu_cursor     cs, cd;
    cs.init(src, 1);
    cd.init(dst, bs);
    cs.seek(b0 * bs);
    cd.seek(b0);

    float buf[GGML_CPU_CHUNK];
    for (int64_t b = b0; b < b1; ++b) {
        for (int64_t filled = 0; filled < bs;) {
            const int64_t k = std::min(bs - filled, cs.left_in_row());
            ggml_cpu_load_row(src->type, cs.ptr(), cs.nb[0], k, buf + filled);
            cs.advance(k);
            filled += k;
        }
        tr->from_float_ref(buf, cd.ptr(), bs);
        cd.advance(1);
        if (poll.tick(bs)) return;
    }
}

// Block-quantized source -> float-like destination, one source block at a time.
void dup_dequantize(const ggml_compute_params * params, const ggml_tensor * src, ggml_tensor * dst) {
    const ggml_type_traits * tr = ggml_get_type_traits(src->type);
    const int64_t            bs = tr->blck_size;
    GGML_ASSERT(tr->to_float && "dup: no dequantiser for source type");
    GGML_ASSERT(bs <= GGML_CPU_CHUNK);
    GGML_ASSERT(src->ne[0] % bs == 0 && "dup: source rows must hold whole blocks");

    const int64_t nblk = ggml_nelements(src) / bs;
    int64_t       b0, b1;
    ggml_cpu_split_range(nblk, params->ith, params->nth, &b0, &b1);
    if (b0 >= b1) return;

    ggml_cpu_abort_poll poll(params);
    ggml_cpu_cursor     cs, cd;
    cs.init(src, bs);
    cd.init(dst, 1);
    cs.seek(b0);
    cd.seek(b0 * bs);

    float buf[GGML_CPU_CHUNK];
    for (int64_t b = b0; b < b1; ++b) {
        tr->to_float(cs.ptr(), buf, bs);
        cs.advance(1);
        for (int64_t done = 0; done < bs;) {
            const int64_t k = std::min(bs - done, cd.left_in_row());
            ggml_cpu_store_row(dst->type, cd.ptr(), cd.nb[0], k, buf + done);
            cd.advance(k);
            done += k;
        }
        if (poll.tick(bs)) return;
    }
}

// ---------------------------------------------------------------------------------------------
// Row-wise elementwise map: dst[i] = f(src[i]) over same-shaped tensors with any strides.

// no_fast: no AVX-512 row kernel for this map
constexpr int no_fast = -1;

template <typename F>
void map_rows(const ggml_compute_params * params, ggml_tensor * dst, F f, int fast_op = no_fast, float fa = 0.0f,
              float fb = 0.0f) {
    const ggml_tensor * src = dst->src[0];
    if (ggml_is_empty(dst)) return;
    GGML_ASSERT(ggml_are_same_shape(src, dst));

    const int64_t ne0 = dst->ne[0];
    const int64_t nr  = ggml_nrows(dst);
    int64_t       r0, r1;
    ggml_cpu_split_range(nr, params->ith, params->nth, &r0, &r1);

    const bool f32 = src->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32 && src->nb[0] == sizeof(float) &&
                     dst->nb[0] == sizeof(float);
    const ggml_cpu_row_kernels * rows = ggml_cpu_rows(params);
    const bool fast = f32 && fast_op != no_fast && rows && rows->map_row;

    ggml_cpu_abort_poll poll(params);
    float               buf[GGML_CPU_CHUNK];
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        ggml_cpu_row_coords(ir, dst->ne, &i1, &i2, &i3);
        const char * s = (const char *) src->data + i1 * src->nb[1] + i2 * src->nb[2] + i3 * src->nb[3];
        char *       d = (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        if (fast) {
            rows->map_row((ggml_fast_map) fast_op, (const float *) s, (float *) d, ne0, fa, fb);
        } else if (f32) {
            const float * sf = (const float *) s;
            float *       df = (float *) d;
            for (int64_t i = 0; i < ne0; ++i) df[i] = f(sf[i]);
        } else {
            for (int64_t i0 = 0; i0 < ne0; i0 += GGML_CPU_CHUNK) {
                const int64_t m = std::min<int64_t>(GGML_CPU_CHUNK, ne0 - i0);
                ggml_cpu_load_row(src->type, s + i0 * src->nb[0], src->nb[0], m, buf);
                for (int64_t e = 0; e < m; ++e) buf[e] = f(buf[e]);
                ggml_cpu_store_row(dst->type, d + i0 * dst->nb[0], dst->nb[0], m, buf);
            }
        }
        if (poll.tick(ne0)) return;
    }
}

// ---------------------------------------------------------------------------------------------
// Activation functions, written so that large |x| saturates instead of producing inf/inf or
// inf*0 (NaN inputs still propagate).

inline float sigmoid_f(float x) {
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    const float e = expf(x);
    return e / (1.0f + e);
}

// x * s where s -> 0 for x -> -inf: the limit is -0, not (-inf)*0.
inline float times_gate(float x, float s) { return s == 0.0f ? -0.0f : x * s; }

inline float silu_f(float x) { return times_gate(x, sigmoid_f(x)); }

// 0.5x(1 + tanh(z)) == x * sigmoid(2z): same value without the cancellation of 1 + tanh(z) for
// negative x.
inline float gelu_f(float x) {
    const float c = 0.7978845608028654f; // sqrt(2/pi)
    const float z = c * x * (1.0f + 0.044715f * x * x);
    return times_gate(x, sigmoid_f(2.0f * z));
}

inline float gelu_quick_f(float x) { return times_gate(x, sigmoid_f(1.702f * x)); }

// 0.5x(1 + erf(x/sqrt2)) == 0.5x * erfc(-x/sqrt2): accurate in the negative tail.
inline float gelu_erf_f(float x) { return times_gate(x, 0.5f * erfcf(-x * 0.70710678118654752f)); }

inline float relu_f(float x) { return x > 0.0f ? x : 0.0f; }

// ---------------------------------------------------------------------------------------------
// Binary ops

enum class bin_op { add, sub, mul, div };

template <bin_op O>
inline float bin_apply(float a, float b) {
    switch (O) {
        case bin_op::add: return a + b;
        case bin_op::sub: return a - b;
        case bin_op::mul: return a * b;
        case bin_op::div: return a / b;
    }
    return 0.0f;
}

template <bin_op O>
void binary_impl(const ggml_compute_params * params, ggml_tensor * dst) {
    const ggml_tensor * src0 = dst->src[0];
    const ggml_tensor * src1 = dst->src[1];
    if (ggml_is_empty(dst)) return;
    GGML_ASSERT(ggml_are_same_shape(src0, dst));
    GGML_ASSERT(ggml_can_repeat(src1, src0) && "binary op: src1 must tile src0");

    const int64_t ne0  = dst->ne[0];
    const int64_t ne10 = src1->ne[0];
    const int64_t nr   = ggml_nrows(dst);
    int64_t       r0, r1;
    ggml_cpu_split_range(nr, params->ith, params->nth, &r0, &r1);

    const bool f32 = src0->type == GGML_TYPE_F32 && src1->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32 &&
                     src0->nb[0] == sizeof(float) && src1->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float);
    const ggml_cpu_row_kernels * rows = ggml_cpu_rows(params);
    const bool fast = f32 && rows && rows->binary_row;
    const ggml_fast_bin fop = O == bin_op::add ? ggml_fast_bin::add
                            : O == bin_op::sub ? ggml_fast_bin::sub
                            : O == bin_op::mul ? ggml_fast_bin::mul
                                               : ggml_fast_bin::div;

    ggml_cpu_abort_poll poll(params);
    float               ba[GGML_CPU_CHUNK];
    float               bb[GGML_CPU_CHUNK];
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        ggml_cpu_row_coords(ir, dst->ne, &i1, &i2, &i3);
        const char * a = (const char *) src0->data + i1 * src0->nb[1] + i2 * src0->nb[2] + i3 * src0->nb[3];
        const char * b = (const char *) src1->data + (i1 % src1->ne[1]) * src1->nb[1] +
                         (i2 % src1->ne[2]) * src1->nb[2] + (i3 % src1->ne[3]) * src1->nb[3];
        char * d = (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];

        if (fast) {
            const float * af = (const float *) a;
            const float * bf = (const float *) b;
            float *       df = (float *) d;
            if (ne10 == ne0 || ne10 == 1) {
                rows->binary_row(fop, af, bf, df, ne0, ne10 == 1);
            } else {
                for (int64_t t = 0; t < ne0; t += ne10) rows->binary_row(fop, af + t, bf, df + t, ne10, false);
            }
        } else if (f32) {
            const float * af = (const float *) a;
            const float * bf = (const float *) b;
            float *       df = (float *) d;
            if (ne10 == ne0) {
                for (int64_t i = 0; i < ne0; ++i) df[i] = bin_apply<O>(af[i], bf[i]);
            } else if (ne10 == 1) {
                const float bv = bf[0];
                for (int64_t i = 0; i < ne0; ++i) df[i] = bin_apply<O>(af[i], bv);
            } else {
                for (int64_t t = 0; t < ne0; t += ne10) {
                    for (int64_t j = 0; j < ne10; ++j) df[t + j] = bin_apply<O>(af[t + j], bf[j]);
                }
            }
        } else {
            int64_t jb = 0; // position inside src1's row (tiles repeat every ne10)
            for (int64_t i0 = 0; i0 < ne0; i0 += GGML_CPU_CHUNK) {
                const int64_t m = std::min<int64_t>(GGML_CPU_CHUNK, ne0 - i0);
                ggml_cpu_load_row(src0->type, a + i0 * src0->nb[0], src0->nb[0], m, ba);
                for (int64_t filled = 0; filled < m;) {
                    const int64_t k = std::min(m - filled, ne10 - jb);
                    ggml_cpu_load_row(src1->type, b + jb * src1->nb[0], src1->nb[0], k, bb + filled);
                    filled += k;
                    jb += k;
                    if (jb == ne10) jb = 0;
                }
                for (int64_t e = 0; e < m; ++e) ba[e] = bin_apply<O>(ba[e], bb[e]);
                ggml_cpu_store_row(dst->type, d + i0 * dst->nb[0], dst->nb[0], m, ba);
            }
        }
        if (poll.tick(ne0)) return;
    }
}

// ---------------------------------------------------------------------------------------------
// GLU

template <typename F>
void glu_impl(const ggml_compute_params * params, ggml_tensor * dst, F f, int fast_op = no_fast) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    if (ggml_is_empty(dst)) return;

    const int64_t n       = dst->ne[0];
    const bool    swapped = ggml_get_op_params_i32(dst, 1) != 0;
    if (b) {
        GGML_ASSERT(ggml_are_same_shape(a, b) && a->type == b->type && "glu: a and b must match");
        GGML_ASSERT(a->ne[0] == n);
    } else {
        GGML_ASSERT(a->ne[0] == 2 * n && "glu: packed input must have 2*n columns");
    }
    for (int d = 1; d < 4; ++d) GGML_ASSERT(a->ne[d] == dst->ne[d]);

    const int64_t nr = ggml_nrows(dst);
    int64_t       r0, r1;
    ggml_cpu_split_range(nr, params->ith, params->nth, &r0, &r1);

    const ggml_cpu_row_kernels * rows = ggml_cpu_rows(params);
    const bool fast = fast_op != no_fast && rows && rows->glu_row && a->type == GGML_TYPE_F32 &&
                      dst->type == GGML_TYPE_F32 && a->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float) &&
                      (!b || b->nb[0] == sizeof(float));

    ggml_cpu_abort_poll poll(params);
    float               bx[GGML_CPU_CHUNK];
    float               bg[GGML_CPU_CHUNK];
    for (int64_t ir = r0; ir < r1; ++ir) {
        int64_t i1, i2, i3;
        ggml_cpu_row_coords(ir, dst->ne, &i1, &i2, &i3);
        const char * ar = (const char *) a->data + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        const char * gr;
        size_t       gstride;
        ggml_type    gtype;
        if (b) {
            gr      = (const char *) b->data + i1 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3];
            gstride = b->nb[0];
            gtype   = b->type;
        } else {
            gr      = ar + n * a->nb[0];
            gstride = a->nb[0];
            gtype   = a->type;
        }
        const char * xr      = ar;
        size_t       xstride = a->nb[0];
        ggml_type    xtype   = a->type;
        if (swapped) {
            std::swap(xr, gr);
            std::swap(xstride, gstride);
            std::swap(xtype, gtype);
        }
        char * d = (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        if (fast) {
            rows->glu_row((ggml_fast_glu) fast_op, (const float *) xr, (const float *) gr, (float *) d, n);
            if (poll.tick(n)) return;
            continue;
        }
        for (int64_t i0 = 0; i0 < n; i0 += GGML_CPU_CHUNK) {
            const int64_t m = std::min<int64_t>(GGML_CPU_CHUNK, n - i0);
            ggml_cpu_load_row(xtype, xr + i0 * xstride, xstride, m, bx);
            ggml_cpu_load_row(gtype, gr + i0 * gstride, gstride, m, bg);
            for (int64_t e = 0; e < m; ++e) bx[e] = f(bx[e], bg[e]);
            ggml_cpu_store_row(dst->type, d + i0 * dst->nb[0], dst->nb[0], m, bx);
        }
        if (poll.tick(n)) return;
    }
}

} // namespace

// ---------------------------------------------------------------------------------------------

void ggml_cpu_op_dup(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    if (ggml_is_empty(dst) || ggml_is_empty(src)) return;
    GGML_ASSERT(ggml_nelements(src) == ggml_nelements(dst) && "dup/cpy: element counts differ");

    const bool sq = ggml_blck_size(src->type) > 1;
    const bool dq = ggml_blck_size(dst->type) > 1;

    if (src->type == dst->type) {
        dup_same_type(params, src, dst);
    } else if (dq && sq) {
        GGML_ABORT("dup/cpy: conversion between two quantized types (%s -> %s) is not supported",
                   ggml_type_name(src->type), ggml_type_name(dst->type));
    } else if (dq) {
        dup_quantize(params, src, dst);
    } else if (sq) {
        dup_dequantize(params, src, dst);
    } else {
        dup_convert(params, src, dst);
    }
}

void ggml_cpu_op_binary(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    switch (dst->op) {
        case GGML_OP_ADD: binary_impl<bin_op::add>(params, dst); break;
        case GGML_OP_SUB: binary_impl<bin_op::sub>(params, dst); break;
        case GGML_OP_MUL: binary_impl<bin_op::mul>(params, dst); break;
        case GGML_OP_DIV: binary_impl<bin_op::div>(params, dst); break;
        default: GGML_ABORT("ggml_cpu_op_binary: unexpected op %s", ggml_op_name(dst->op));
    }
}

void ggml_cpu_op_sqr(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    map_rows(params, dst, [](float x) { return x * x; }, (int) ggml_fast_map::sqr);
}

void ggml_cpu_op_sqrt(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    map_rows(params, dst, [](float x) { return sqrtf(x); }, (int) ggml_fast_map::sqrt);
}

void ggml_cpu_op_scale(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const float s = ggml_get_op_params_f32(dst, 0);
    const float b = ggml_get_op_params_f32(dst, 1);
    if (b == 0.0f) {
        // plain ggml_scale: keep s*x exactly (adding +0 would turn -0 into +0)
        map_rows(params, dst, [s](float x) { return s * x; }, (int) ggml_fast_map::scale, s);
    } else {
        map_rows(params, dst, [s, b](float x) { return s * x + b; }, (int) ggml_fast_map::scale_bias, s, b);
    }
}

void ggml_cpu_op_unary(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const enum ggml_unary_op op = (enum ggml_unary_op) ggml_get_op_params_i32(dst, 0);
    switch (op) {
        case GGML_UNARY_OP_ABS: map_rows(params, dst, [](float x) { return fabsf(x); }, (int) ggml_fast_map::abs); break;
        case GGML_UNARY_OP_SGN:
            map_rows(params, dst, [](float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f); });
            break;
        case GGML_UNARY_OP_NEG: map_rows(params, dst, [](float x) { return -x; }, (int) ggml_fast_map::neg); break;
        case GGML_UNARY_OP_STEP: map_rows(params, dst, [](float x) { return x > 0.0f ? 1.0f : 0.0f; }); break;
        case GGML_UNARY_OP_TANH: map_rows(params, dst, [](float x) { return tanhf(x); }, (int) ggml_fast_map::tanh); break;
        case GGML_UNARY_OP_ELU: map_rows(params, dst, [](float x) { return x > 0.0f ? x : expm1f(x); }); break;
        case GGML_UNARY_OP_RELU: map_rows(params, dst, [](float x) { return relu_f(x); }, (int) ggml_fast_map::relu); break;
        case GGML_UNARY_OP_SIGMOID: map_rows(params, dst, [](float x) { return sigmoid_f(x); }, (int) ggml_fast_map::sigmoid); break;
        case GGML_UNARY_OP_GELU: map_rows(params, dst, [](float x) { return gelu_f(x); }, (int) ggml_fast_map::gelu); break;
        case GGML_UNARY_OP_GELU_QUICK: map_rows(params, dst, [](float x) { return gelu_quick_f(x); }, (int) ggml_fast_map::gelu_quick); break;
        case GGML_UNARY_OP_SILU: map_rows(params, dst, [](float x) { return silu_f(x); }, (int) ggml_fast_map::silu); break;
        case GGML_UNARY_OP_HARDSWISH:
            map_rows(params, dst, [](float x) { return x * fminf(1.0f, fmaxf(0.0f, (x + 3.0f) / 6.0f)); });
            break;
        case GGML_UNARY_OP_HARDSIGMOID:
            map_rows(params, dst, [](float x) { return fminf(1.0f, fmaxf(0.0f, (x + 3.0f) / 6.0f)); });
            break;
        case GGML_UNARY_OP_EXP: map_rows(params, dst, [](float x) { return expf(x); }, (int) ggml_fast_map::exp); break;
        case GGML_UNARY_OP_EXPM1: map_rows(params, dst, [](float x) { return expm1f(x); }); break;
        case GGML_UNARY_OP_SOFTPLUS:
            // beyond 20, log1p(exp(x)) == x to float precision and exp would eventually overflow
            map_rows(params, dst, [](float x) { return x > 20.0f ? x : log1pf(expf(x)); });
            break;
        case GGML_UNARY_OP_GELU_ERF: map_rows(params, dst, [](float x) { return gelu_erf_f(x); }, (int) ggml_fast_map::gelu_erf); break;
        case GGML_UNARY_OP_FLOOR: map_rows(params, dst, [](float x) { return floorf(x); }); break;
        case GGML_UNARY_OP_CEIL: map_rows(params, dst, [](float x) { return ceilf(x); }); break;
        case GGML_UNARY_OP_ROUND: map_rows(params, dst, [](float x) { return roundf(x); }); break;
        case GGML_UNARY_OP_TRUNC: map_rows(params, dst, [](float x) { return truncf(x); }); break;
        default: GGML_ABORT("ggml_cpu_op_unary: unsupported unary op %s", ggml_unary_op_name(op));
    }
}

void ggml_cpu_op_glu(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const enum ggml_glu_op op = (enum ggml_glu_op) ggml_get_op_params_i32(dst, 0);
    switch (op) {
        case GGML_GLU_OP_REGLU: glu_impl(params, dst, [](float x, float g) { return relu_f(x) * g; }, (int) ggml_fast_glu::reglu); break;
        case GGML_GLU_OP_GEGLU: glu_impl(params, dst, [](float x, float g) { return gelu_f(x) * g; }, (int) ggml_fast_glu::geglu); break;
        case GGML_GLU_OP_SWIGLU: glu_impl(params, dst, [](float x, float g) { return silu_f(x) * g; }, (int) ggml_fast_glu::swiglu); break;
        case GGML_GLU_OP_GEGLU_ERF:
            glu_impl(params, dst, [](float x, float g) { return gelu_erf_f(x) * g; }, (int) ggml_fast_glu::geglu_erf);
            break;
        case GGML_GLU_OP_GEGLU_QUICK:
            glu_impl(params, dst, [](float x, float g) { return gelu_quick_f(x) * g; }, (int) ggml_fast_glu::geglu_quick);
            break;
        case GGML_GLU_OP_SWIGLU_OAI: {
            const float alpha = ggml_get_op_params_f32(dst, 2);
            const float limit = ggml_get_op_params_f32(dst, 3);
            glu_impl(params, dst, [alpha, limit](float x, float g) {
                const float xc = fminf(x, limit);
                const float yc = fminf(fmaxf(g, -limit), limit);
                return times_gate(xc, sigmoid_f(alpha * xc)) * (yc + 1.0f);
            });
            break;
        }
        default: GGML_ABORT("ggml_cpu_op_glu: unsupported glu op %d", (int) op);
    }
}
