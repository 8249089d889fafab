// ops-layout.cu — CUDA kernels of the ops that move or generate data without arithmetic on it
// (beyond a type conversion): GET_ROWS, SET_ROWS, CONCAT, PAD, REPEAT, ROLL, ACC, SET, ARANGE,
// TIMESTEP_EMBEDDING.
//
// Semantics are the CPU backend's (ggml-cpu/ops-layout.cpp, ops-index.cpp). One thread per
// output element (or per source element for SET_ROWS / ACC / SET), arbitrary byte strides;
// elements of the same type move as raw bytes (integer payloads and NaN bits survive). Indices
// out of range, which abort on the CPU, give zero rows (GET_ROWS) or are skipped (SET_ROWS): a
// kernel cannot abort.

#include "ops-common.cuh"

#include <cmath>

namespace {

// ---------------------------------------------------------------------------------------------
// GET_ROWS: dst (i0, i10, i11, i12) = a (i0, b[i10, i11, i12], i11, i12). An index out of
// range gives a zero row (the CPU aborts; a kernel cannot).

__device__ __forceinline__ int64_t load_index(const ggml_cuda_tdesc & b, int64_t i10, int64_t i11, int64_t i12) {
    const char * p = b.data + ggml_cuda_offset(b, i10, i11, i12, 0);
    return b.type == GGML_TYPE_I32 ? (int64_t) * (const int32_t *) p : *(const int64_t *) p;
}

__global__ void k_get_rows(ggml_cuda_tdesc a, ggml_cuda_tdesc b, ggml_cuda_tdesc d, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t i0, i10, i11, i12;
        ggml_cuda_unravel(e, d.ne, i0, i10, i11, i12);
        const int64_t idx = load_index(b, i10, i11, i12);
        char *        dp  = d.data + ggml_cuda_offset(d, i0, i10, i11, i12);
        if (idx < 0 || idx >= a.ne[1]) {
            ggml_cuda_store_f32(dp, d.type, 0.0f);
            continue;
        }
        const char * sp = a.data + ggml_cuda_offset(a, i0, idx, i11, i12);
        if (a.type == d.type) {
            ggml_cuda_copy_elem(dp, sp, a.type == GGML_TYPE_F16 || a.type == GGML_TYPE_BF16 ? 2 : 4);
        } else {
            ggml_cuda_store_f32(dp, d.type, ggml_cuda_load_f32(sp, a.type));
        }
    }
}

// Block-quantized rows: the selected rows' raw bytes gathered into a packed buffer (then
// dequantized by the shared converter). Out-of-range indices give zero bytes.
__global__ void k_gather_rows(ggml_cuda_tdesc a, ggml_cuda_tdesc b, char * out, int64_t row_bytes, int64_t n) {
    const int64_t nb10 = b.ne[0], nb11 = b.ne[1];
    GGML_CUDA_GRID_STRIDE(e, n) {
        const int64_t r   = e / row_bytes, off = e % row_bytes;
        const int64_t i10 = r % nb10, i11 = (r / nb10) % nb11, i12 = r / (nb10 * nb11);
        const int64_t idx = load_index(b, i10, i11, i12);
        out[e] = (idx < 0 || idx >= a.ne[1]) ? 0 : a.data[idx * a.nb[1] + i11 * a.nb[2] + i12 * a.nb[3] + off];
    }
}

// ---------------------------------------------------------------------------------------------
// CONCAT / PAD / REPEAT: raw element moves (es bytes), one thread per output element.

__device__ __forceinline__ void zero_elem(char * p, int es) {
    for (int k = 0; k < es; ++k) p[k] = 0;
}

__global__ void k_concat(ggml_cuda_tdesc a, ggml_cuda_tdesc b, ggml_cuda_tdesc d, int dim, int es, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t i[4];
        ggml_cuda_unravel(e, d.ne, i[0], i[1], i[2], i[3]);
        char * dp = d.data + ggml_cuda_offset(d, i[0], i[1], i[2], i[3]);
        const ggml_cuda_tdesc * s = &a;
        if (i[dim] >= a.ne[dim]) {
            s = &b;
            i[dim] -= a.ne[dim];
        }
        ggml_cuda_copy_elem(dp, s->data + ggml_cuda_offset(*s, i[0], i[1], i[2], i[3]), es);
    }
}

struct pad_args {
    int64_t lp[4];
    bool    circular;
};

__global__ void k_pad(ggml_cuda_tdesc a, ggml_cuda_tdesc d, pad_args pa, int es, int64_t n) {
    const bool src_empty = a.ne[0] * a.ne[1] * a.ne[2] * a.ne[3] == 0;
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t i[4], j[4];
        ggml_cuda_unravel(e, d.ne, i[0], i[1], i[2], i[3]);
        char * dp     = d.data + ggml_cuda_offset(d, i[0], i[1], i[2], i[3]);
        bool   inside = !src_empty;
        for (int k = 0; k < 4 && inside; ++k) {
            j[k] = i[k] - pa.lp[k];
            if (j[k] < 0 || j[k] >= a.ne[k]) {
                if (pa.circular) {
                    const int64_t rr = j[k] % a.ne[k];
                    j[k]             = rr < 0 ? rr + a.ne[k] : rr;
                } else {
                    inside = false;
                }
            }
        }
        if (inside) {
            ggml_cuda_copy_elem(dp, a.data + ggml_cuda_offset(a, j[0], j[1], j[2], j[3]), es);
        } else {
            zero_elem(dp, es);
        }
    }
}

__global__ void k_repeat(ggml_cuda_tdesc a, ggml_cuda_tdesc d, int es, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t i0, i1, i2, i3;
        ggml_cuda_unravel(e, d.ne, i0, i1, i2, i3);
        ggml_cuda_copy_elem(d.data + ggml_cuda_offset(d, i0, i1, i2, i3),
                            a.data + ggml_cuda_offset(a, i0 % a.ne[0], i1 % a.ne[1], i2 % a.ne[2], i3 % a.ne[3]), es);
    }
}

// ---------------------------------------------------------------------------------------------
// ARANGE and TIMESTEP_EMBEDDING (double phase, as the CPU)

__global__ void k_arange(char * d, int64_t nb0, double start, double step, int64_t n) {
    GGML_CUDA_GRID_STRIDE(i, n) { *(float *) (d + i * nb0) = (float) (start + (double) i * step); }
}

__global__ void k_timestep(ggml_cuda_tdesc t, ggml_cuda_tdesc d, int64_t half, double log_mp, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        const int64_t j = e % d.ne[0], r = e / d.ne[0];
        float         v = 0.0f;
        if (j < 2 * half) {
            const double ts  = ggml_cuda_load_f32(t.data + r * t.nb[0], t.type);
            const int64_t jj = j < half ? j : j - half;
            const double  f  = exp(-log_mp * (double) jj / (double) half);
            v                = j < half ? (float) cos(ts * f) : (float) sin(ts * f);
        }
        *(float *) (d.data + r * d.nb[1] + j * d.nb[0]) = v;
    }
}


// ---------------------------------------------------------------------------------------------
// SET_ROWS: dst row c[i1, i2 % c.ne1, i3 % c.ne2] of plane (i2, i3) = row (i1, i2, i3) of b.

__global__ void k_set_rows(ggml_cuda_tdesc b, ggml_cuda_tdesc c, ggml_cuda_tdesc d, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t i0, i1, i2, i3;
        ggml_cuda_unravel(e, b.ne, i0, i1, i2, i3);
        const int64_t idx = load_index(c, i1, i2 % c.ne[1], i3 % c.ne[2]);
        if (idx < 0 || idx >= d.ne[1]) continue;
        const char * sp = b.data + ggml_cuda_offset(b, i0, i1, i2, i3);
        char *       dp = d.data + ggml_cuda_offset(d, i0, idx, i2, i3);
        if (b.type == d.type) {
            ggml_cuda_copy_elem(dp, sp, b.type == GGML_TYPE_F32 ? 4 : 2);
        } else {
            ggml_cuda_store_f32(dp, d.type, ggml_cuda_load_f32(sp, b.type));
        }
    }
}

// ROLL: dst[i] = a[(i - shift) mod ne] in every dimension.
struct roll_args {
    int64_t shift[4];
};

__device__ __forceinline__ int64_t wrap(int64_t i, int64_t n) { return ((i % n) + n) % n; }

__global__ void k_roll(ggml_cuda_tdesc a, ggml_cuda_tdesc d, roll_args ra, int es, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t i0, i1, i2, i3;
        ggml_cuda_unravel(e, d.ne, i0, i1, i2, i3);
        const char * sp = a.data + ggml_cuda_offset(a, wrap(i0 - ra.shift[0], a.ne[0]), wrap(i1 - ra.shift[1], a.ne[1]),
                                                   wrap(i2 - ra.shift[2], a.ne[2]), wrap(i3 - ra.shift[3], a.ne[3]));
        ggml_cuda_copy_elem(d.data + ggml_cuda_offset(d, i0, i1, i2, i3), sp, es);
    }
}

// ACC / SET, second step (dst already holds a): element (i0..i3) of b lands at byte
// offset + i0*ts + i1*nb1 + i2*nb2 + i3*nb3 of dst; ACC adds, SET overwrites.
struct view_args {
    int64_t offset, nb1, nb2, nb3;
};

__global__ void k_acc_set(ggml_cuda_tdesc b, char * d, int dtype, int64_t ts, view_args va, bool acc, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t i0, i1, i2, i3;
        ggml_cuda_unravel(e, b.ne, i0, i1, i2, i3);
        const char * sp = b.data + ggml_cuda_offset(b, i0, i1, i2, i3);
        char *       dp = d + va.offset + i0 * ts + i1 * va.nb1 + i2 * va.nb2 + i3 * va.nb3;
        if (acc) {
            ggml_cuda_store_f32(dp, dtype, ggml_cuda_load_f32(dp, dtype) + ggml_cuda_load_f32(sp, b.type));
        } else {
            ggml_cuda_copy_elem(dp, sp, (int) ts);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Support checks

bool get_rows_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * idx = dst->src[1];
    if (!a || !idx || (idx->type != GGML_TYPE_I32 && idx->type != GGML_TYPE_I64)) return false;
    if (!ggml_cuda_elem_aligned(idx) || !ggml_cuda_elem_aligned(dst)) return false;
    if (dst->ne[0] != a->ne[0] || dst->ne[1] != idx->ne[0] || dst->ne[2] != idx->ne[1] || dst->ne[3] != idx->ne[2]) return false;
    if (idx->ne[1] != a->ne[2] || idx->ne[2] != a->ne[3] || idx->ne[3] != 1) return false;
    if (ggml_cuda_is_word(a->type)) {
        return ggml_cuda_elem_aligned(a) && (dst->type == GGML_TYPE_F32 || dst->type == GGML_TYPE_I32);
    }
    // block-quantized rows: gathered, then dequantized straight into a packed F32 dst
    return ggml_blck_size(a->type) > 1 && ggml_cuda_can_convert(a->type) && dst->type == GGML_TYPE_F32 &&
           ggml_is_contiguous(dst) && a->ne[0] % ggml_blck_size(a->type) == 0 &&
           a->nb[0] == ggml_type_size(a->type);
}

bool concat_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * b = dst->src[1];
    const int           dim = ggml_get_op_params_i32(dst, 0);
    if (!a || !b || a->type != dst->type || b->type != dst->type || !ggml_cuda_movable(dst->type)) return false;
    if (dim < 0 || dim >= GGML_MAX_DIMS || !ggml_cuda_aligned_all(dst, 2)) return false;
    for (int d = 0; d < GGML_MAX_DIMS; ++d) {
        if (d == dim ? dst->ne[d] != a->ne[d] + b->ne[d] : (dst->ne[d] != a->ne[d] || dst->ne[d] != b->ne[d])) return false;
    }
    return true;
}

bool pad_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    if (!a || a->type != dst->type || !ggml_cuda_movable(dst->type) || !ggml_cuda_aligned_all(dst, 1)) return false;
    for (int d = 0; d < 4; ++d) {
        const int64_t lp = ggml_get_op_params_i32(dst, 2 * d), rp = ggml_get_op_params_i32(dst, 2 * d + 1);
        if (lp < 0 || rp < 0 || dst->ne[d] != a->ne[d] + lp + rp) return false;
    }
    return ggml_get_op_params_i32(dst, 8) == 0 || !ggml_is_empty(a);
}


bool set_rows_supported(const ggml_tensor * dst) {
    const ggml_tensor * b = dst->src[0], * c = dst->src[1];
    if (!b || !c || (c->type != GGML_TYPE_I32 && c->type != GGML_TYPE_I64)) return false;
    if (!ggml_cuda_is_float(b->type) || !ggml_cuda_is_float(dst->type) || !ggml_cuda_aligned_all(dst, 2)) return false;
    if (b->ne[0] != dst->ne[0] || b->ne[2] != dst->ne[2] || b->ne[3] != dst->ne[3] || c->ne[0] != b->ne[1]) return false;
    return c->ne[1] > 0 && c->ne[2] > 0 && c->ne[3] == 1 && b->ne[2] % c->ne[1] == 0 && b->ne[3] % c->ne[2] == 0;
}

// ACC (float, same type) and SET (any movable type): a and dst packed, b's view inside dst
bool acc_set_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * b = dst->src[1];
    if (!a || !b || a->type != dst->type || b->type != dst->type || !ggml_are_same_shape(a, dst)) return false;
    if (dst->op == GGML_OP_ACC ? !ggml_cuda_is_float(dst->type) : !ggml_cuda_movable(dst->type)) return false;
    if (!ggml_is_contiguous(a) || !ggml_is_contiguous(dst) || !ggml_cuda_aligned_all(dst, 2)) return false;
    const int64_t ts = (int64_t) ggml_type_size(dst->type);
    for (int k = 0; k < 4; ++k) {
        if (ggml_get_op_params_i32(dst, k) < 0 || ggml_get_op_params_i32(dst, k) % ts != 0) return false;
    }
    if (ggml_is_empty(b)) return true;
    // the last element of b's view must lie inside dst
    const int64_t last = ggml_get_op_params_i32(dst, 3) + (b->ne[0] - 1) * ts + (b->ne[1] - 1) * ggml_get_op_params_i32(dst, 0) +
                         (b->ne[2] - 1) * ggml_get_op_params_i32(dst, 1) + (b->ne[3] - 1) * ggml_get_op_params_i32(dst, 2);
    return last + ts <= (int64_t) ggml_nbytes(dst);
}

void compute_get_rows(ggml_cuda_op_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0], * idx = dst->src[1];
    const int64_t       n = ggml_nelements(dst);
    if (ggml_cuda_is_word(a->type)) {
        k_get_rows<<<ggml_cuda_ew_blocks(n), GGML_CUDA_EW_THREADS, 0, ctx.stream>>>(ggml_cuda_desc(a), ggml_cuda_desc(idx),
                                                                                  ggml_cuda_desc(dst), n);
        return;
    }
    const int64_t row_bytes = (int64_t) ggml_row_size(a->type, a->ne[0]);
    const int64_t nrows     = ggml_nelements(idx);
    const int64_t total     = row_bytes * nrows;
    ggml_cuda_pool_alloc<char> packed(*ctx.pool, (size_t) total);
    k_gather_rows<<<ggml_cuda_ew_blocks(total), GGML_CUDA_EW_THREADS, 0, ctx.stream>>>(
        ggml_cuda_desc(a), ggml_cuda_desc(idx), packed.get(), row_bytes, total);
    ggml_cuda_convert_to_f32(packed.get(), a->type, (float *) dst->data, n, ctx.stream);
}


} // namespace

bool ggml_cuda_layout_supports(const ggml_tensor * op) {
    switch (op->op) {
        case GGML_OP_GET_ROWS: return get_rows_supported(op);
        case GGML_OP_SET_ROWS: return set_rows_supported(op);
        case GGML_OP_CONCAT: return concat_supported(op);
        case GGML_OP_PAD: return pad_supported(op);
        case GGML_OP_REPEAT:
            return op->src[0] && op->src[0]->type == op->type && ggml_cuda_movable(op->type) &&
                   ggml_can_repeat(op->src[0], op) && ggml_cuda_aligned_all(op, 1);
        case GGML_OP_ROLL:
            return op->src[0] && op->src[0]->type == op->type && ggml_cuda_movable(op->type) &&
                   ggml_are_same_shape(op->src[0], op) && ggml_cuda_aligned_all(op, 1);
        case GGML_OP_ACC:
        case GGML_OP_SET: return acc_set_supported(op);
        case GGML_OP_ARANGE: return op->type == GGML_TYPE_F32 && ggml_cuda_elem_aligned(op);
        case GGML_OP_TIMESTEP_EMBEDDING: {
            const ggml_tensor * t    = op->src[0];
            const int64_t       half = ggml_get_op_params_i32(op, 0) / 2;
            return op->type == GGML_TYPE_F32 && t && t->type == GGML_TYPE_F32 && ggml_cuda_aligned_all(op, 1) &&
                   half >= 0 && op->ne[0] >= 2 * half && op->ne[1] == t->ne[0] && op->ne[2] == 1 && op->ne[3] == 1;
        }
        default: return false;
    }
}

void ggml_cuda_layout_compute(ggml_cuda_op_ctx & ctx, ggml_tensor * node) {
    const int64_t n = ggml_nelements(node);
    if (n == 0) return;
    const unsigned blocks = ggml_cuda_ew_blocks(n);
    const int      T      = GGML_CUDA_EW_THREADS;
    cudaStream_t   st     = ctx.stream;
    ggml_tensor *  a      = node->src[0];
    const int      es     = (int) ggml_type_size(node->type);

    switch (node->op) {
        case GGML_OP_GET_ROWS: compute_get_rows(ctx, node); break;
        case GGML_OP_SET_ROWS: {
            const int64_t nb = ggml_nelements(a);
            if (nb == 0) break;
            k_set_rows<<<ggml_cuda_ew_blocks(nb), T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node->src[1]),
                                                              ggml_cuda_desc(node), nb);
            break;
        }
        case GGML_OP_CONCAT:
            k_concat<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node->src[1]), ggml_cuda_desc(node),
                                           ggml_get_op_params_i32(node, 0), es, n);
            break;
        case GGML_OP_PAD: {
            pad_args pa;
            for (int d = 0; d < 4; ++d) pa.lp[d] = ggml_get_op_params_i32(node, 2 * d);
            pa.circular = ggml_get_op_params_i32(node, 8) != 0;
            k_pad<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node), pa, es, n);
            break;
        }
        case GGML_OP_REPEAT:
            if (ggml_is_empty(a)) break;
            k_repeat<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node), es, n);
            break;
        case GGML_OP_ROLL: {
            roll_args ra;
            for (int d = 0; d < 4; ++d) ra.shift[d] = ggml_get_op_params_i32(node, d);
            k_roll<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node), ra, es, n);
            break;
        }
        case GGML_OP_ACC:
        case GGML_OP_SET: {
            const ggml_tensor * b = node->src[1];
            if (node->data != a->data) {
                CUDA_CHECK(cudaMemcpyAsync(node->data, a->data, ggml_nbytes(node), cudaMemcpyDeviceToDevice, st));
            }
            const int64_t nb = ggml_nelements(b);
            if (nb == 0) break;
            view_args va;
            va.nb1    = ggml_get_op_params_i32(node, 0);
            va.nb2    = ggml_get_op_params_i32(node, 1);
            va.nb3    = ggml_get_op_params_i32(node, 2);
            va.offset = ggml_get_op_params_i32(node, 3);
            k_acc_set<<<ggml_cuda_ew_blocks(nb), T, 0, st>>>(ggml_cuda_desc(b), (char *) node->data, (int) node->type,
                                                             es, va, node->op == GGML_OP_ACC, nb);
            break;
        }
        case GGML_OP_ARANGE:
            k_arange<<<ggml_cuda_ew_blocks(node->ne[0]), T, 0, st>>>((char *) node->data, (int64_t) node->nb[0],
                                                                     (double) ggml_get_op_params_f32(node, 0),
                                                                     (double) ggml_get_op_params_f32(node, 2), node->ne[0]);
            break;
        case GGML_OP_TIMESTEP_EMBEDDING: {
            const int dim        = ggml_get_op_params_i32(node, 0);
            const int max_period = ggml_get_op_params_i32(node, 1);
            k_timestep<<<blocks, T, 0, st>>>(ggml_cuda_desc(a), ggml_cuda_desc(node), (int64_t) (dim / 2),
                                             std::log((double) max_period), node->ne[0] * node->ne[1]);
            break;
        }
        default: GGML_ABORT("ggml-cuda: layout op %s not handled", ggml_op_name(node->op));
    }
}
