// ops-index.cpp — portable CPU kernels for the client ops that are elementwise maps with an
// index-dependent rule or that move data by index: CLAMP, LEAKY_RELU, LOG, SIN, COS,
// DIAG_MASK_INF, ACC, SET, ROLL, ADD_ID, MUL_MAT_ID, SET_ROWS, WIN_PART/WIN_UNPART,
// GET_REL_POS/ADD_REL_POS and the MAP_CUSTOM1..3 bridge.
//
// The elementwise maps read a chunk of a row, transform it and write it to the same position of
// dst, so they are safe in place (dst aliasing src). Work is split over rows.

#include "ops-row.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

// dst = f(src) elementwise, f(x, i0, i1) sees the element's column and row index.
template <class F> void map_rows(const struct ggml_compute_params * params, struct ggml_tensor * dst, F f) {
    const ggml_tensor * a = dst->src[0];
    if (ggml_is_empty(dst)) return;
    GGML_ASSERT(ggml_are_same_shape(a, dst));
    float         buf[GGML_CPU_CHUNK];
    const int64_t ne0 = a->ne[0];
    int64_t       r0, r1;
    ggml_cpu_split_range(ggml_nrows(a), params->ith, params->nth, &r0, &r1);
    ggml_cpu_abort_poll poll(params);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        ggml_cpu_row_coords(r, a->ne, &i1, &i2, &i3);
        const char * s = (const char *) a->data + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        char *       d = (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        for (int64_t k = 0; k < ne0; k += GGML_CPU_CHUNK) {
            const int64_t m = std::min<int64_t>(GGML_CPU_CHUNK, ne0 - k);
            ggml_cpu_load_row(a->type, s + k * a->nb[0], a->nb[0], m, buf);
            for (int64_t j = 0; j < m; ++j) buf[j] = f(buf[j], k + j, i1);
            ggml_cpu_store_row(dst->type, d + k * dst->nb[0], dst->nb[0], m, buf);
        }
        if (poll.tick(ne0)) return;
    }
}

int64_t read_index(const ggml_tensor * t, int64_t i0, int64_t i1, int64_t i2) {
    const char * p = (const char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2];
    if (t->type == GGML_TYPE_I32) {
        int32_t v;
        memcpy(&v, p, sizeof(v));
        return v;
    }
    int64_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

} // namespace

void ggml_cpu_op_elementwise_client(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    switch (dst->op) {
        case GGML_OP_CLAMP: {
            const float lo = ggml_get_op_params_f32(dst, 0), hi = ggml_get_op_params_f32(dst, 1);
            map_rows(params, dst, [=](float x, int64_t, int64_t) { return std::max(lo, std::min(hi, x)); });
            break;
        }
        case GGML_OP_LEAKY_RELU: {
            const float slope = ggml_get_op_params_f32(dst, 0);
            map_rows(params, dst, [=](float x, int64_t, int64_t) { return x > 0.0f ? x : slope * x; });
            break;
        }
        case GGML_OP_LOG: map_rows(params, dst, [](float x, int64_t, int64_t) { return std::log(x); }); break;
        case GGML_OP_SIN: map_rows(params, dst, [](float x, int64_t, int64_t) { return std::sin(x); }); break;
        case GGML_OP_COS: map_rows(params, dst, [](float x, int64_t, int64_t) { return std::cos(x); }); break;
        case GGML_OP_DIAG_MASK_INF: {
            const int64_t n_past = ggml_get_op_params_i32(dst, 0);
            map_rows(params, dst, [=](float x, int64_t i0, int64_t i1) { return i0 > n_past + i1 ? -INFINITY : x; });
            break;
        }
        default: GGML_ABORT("elementwise_client: unexpected op %s", ggml_op_name(dst->op));
    }
}

// ACC and SET: dst = a, then the view (nb1, nb2, nb3, offset) of dst += b / = b.
void ggml_cpu_op_acc_set(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a       = dst->src[0];
    const ggml_tensor * b       = dst->src[1];
    const size_t        nb1     = (size_t) ggml_get_op_params_i32(dst, 0);
    const size_t        nb2     = (size_t) ggml_get_op_params_i32(dst, 1);
    const size_t        nb3     = (size_t) ggml_get_op_params_i32(dst, 2);
    const size_t        offset  = (size_t) ggml_get_op_params_i32(dst, 3);
    const bool          is_acc  = dst->op == GGML_OP_ACC;
    const size_t        ts      = ggml_type_size(dst->type);

    if (dst->data != a->data) {
        // a is contiguous (constructor) and dst a fresh contiguous tensor: one copy, split in bytes
        const size_t n = ggml_nbytes(dst);
        int64_t      c0, c1;
        ggml_cpu_split_range((int64_t) n, params->ith, params->nth, &c0, &c1);
        if (c1 > c0) memcpy((char *) dst->data + c0, (const char *) a->data + c0, (size_t) (c1 - c0));
        ggml_cpu_barrier(params);
    }
    if (ggml_is_empty(b)) return;

    std::vector<float> xb((size_t) b->ne[0]), xd((size_t) b->ne[0]);
    int64_t            r0, r1;
    ggml_cpu_split_range(ggml_nrows(b), params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        ggml_cpu_row_coords(r, b->ne, &i1, &i2, &i3);
        const char * s = (const char *) b->data + i1 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3];
        char *       d = (char *) dst->data + offset + i1 * nb1 + i2 * nb2 + i3 * nb3;
        if (!is_acc && b->type == dst->type) {
            for (int64_t i = 0; i < b->ne[0]; ++i) memcpy(d + i * ts, s + i * b->nb[0], ts);
            continue;
        }
        ggml_cpu_load_row(b->type, s, b->nb[0], b->ne[0], xb.data());
        if (is_acc) {
            ggml_cpu_load_row(dst->type, d, ts, b->ne[0], xd.data());
            for (int64_t i = 0; i < b->ne[0]; ++i) xb[i] += xd[i];
        }
        ggml_cpu_store_row(dst->type, d, ts, b->ne[0], xb.data());
    }
}

void ggml_cpu_op_roll(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    if (ggml_is_empty(dst)) return;
    int64_t sh[4];
    for (int d = 0; d < 4; ++d) sh[d] = ggml_get_op_params_i32(dst, d);
    const size_t  ts  = ggml_type_size(a->type);
    const int64_t ne0 = a->ne[0];
    auto wrap = [](int64_t i, int64_t n) { return ((i % n) + n) % n; };
    int64_t r0, r1;
    ggml_cpu_split_range(ggml_nrows(dst), params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        ggml_cpu_row_coords(r, dst->ne, &i1, &i2, &i3);
        const char * s = (const char *) a->data + wrap(i1 - sh[1], a->ne[1]) * a->nb[1] +
                         wrap(i2 - sh[2], a->ne[2]) * a->nb[2] + wrap(i3 - sh[3], a->ne[3]) * a->nb[3];
        char * d = (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        // row rotated right by sh0: dst[i0] = src[i0 - sh0]; rows are packed (constructor)
        const int64_t k = wrap(sh[0], ne0);
        if (dst->nb[0] == ts) {
            memcpy(d + k * ts, s, (size_t) (ne0 - k) * ts);
            memcpy(d, s + (ne0 - k) * ts, (size_t) k * ts);
        } else {
            for (int64_t i = 0; i < ne0; ++i) memcpy(d + i * dst->nb[0], s + wrap(i - k, ne0) * ts, ts);
        }
    }
}

void ggml_cpu_op_add_id(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a   = dst->src[0];
    const ggml_tensor * b   = dst->src[1];
    const ggml_tensor * ids = dst->src[2];
    if (ggml_is_empty(dst)) return;
    const int64_t ne0 = a->ne[0];
    int64_t       r0, r1;
    ggml_cpu_split_range(ggml_nrows(a), params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        ggml_cpu_row_coords(r, a->ne, &i1, &i2, &i3);
        const int64_t e = read_index(ids, i1, i2, 0);
        if (e < 0 || e >= b->ne[1]) GGML_ABORT("add_id: id %lld out of range [0, %lld)", (long long) e, (long long) b->ne[1]);
        const char * pa = (const char *) a->data + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        const char * pb = (const char *) b->data + e * b->nb[1];
        char *       pd = (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        for (int64_t i = 0; i < ne0; ++i) {
            float x, y;
            memcpy(&x, pa + i * a->nb[0], sizeof(float));
            memcpy(&y, pb + i * b->nb[0], sizeof(float));
            const float v = x + y;
            memcpy(pd + i * dst->nb[0], &v, sizeof(float));
        }
    }
}

// Portable expert-routed matmul: per (expert slot, token) one activation row against every row
// of the chosen expert. Work items are (slot, token, block of 16 output rows).
void ggml_cpu_op_mul_mat_id(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * as  = dst->src[0];
    const ggml_tensor * b   = dst->src[1];
    const ggml_tensor * ids = dst->src[2];
    if (ggml_is_empty(dst)) return;
    const int64_t K = as->ne[0], N = as->ne[1], n_exp = as->ne[2];
    const int64_t n_used = ids->ne[0], n_tok = ids->ne[1], n_b = b->ne[1];
    constexpr int64_t NB = 16;
    const int64_t     nblk  = (N + NB - 1) / NB;
    const int64_t     items = n_used * n_tok * nblk;
    std::vector<float> x((size_t) K), w((size_t) K);
    int64_t u0, u1;
    ggml_cpu_split_range(items, params->ith, params->nth, &u0, &u1);
    int64_t cached = -1; // (slot, token) whose activation row is in x
    for (int64_t u = u0; u < u1; ++u) {
        const int64_t blk = u % nblk;
        const int64_t et  = u / nblk;
        const int64_t e   = et % n_used, t = et / n_used;
        const int64_t ex  = read_index(ids, e, t, 0);
        if (ex < 0 || ex >= n_exp) GGML_ABORT("mul_mat_id: expert id %lld out of range [0, %lld)", (long long) ex, (long long) n_exp);
        if (cached != et) {
            ggml_cpu_load_row(b->type, (const char *) b->data + (e % n_b) * b->nb[1] + t * b->nb[2], b->nb[0], K, x.data());
            cached = et;
        }
        char * d = (char *) dst->data + e * dst->nb[1] + t * dst->nb[2];
        for (int64_t n = blk * NB; n < std::min(N, (blk + 1) * NB); ++n) {
            ggml_cpu_load_row(as->type, (const char *) as->data + n * as->nb[1] + ex * as->nb[2], as->nb[0], K, w.data());
            float s = 0.0f;
            for (int64_t k = 0; k < K; ++k) s += w[k] * x[k];
            memcpy(d + n * dst->nb[0], &s, sizeof(float));
        }
        if (ggml_cpu_should_abort(params)) return;
    }
}

void ggml_cpu_op_set_rows(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * b = dst->src[0];
    const ggml_tensor * c = dst->src[1];
    if (ggml_is_empty(b)) return;
    std::vector<float> row((size_t) b->ne[0]);
    int64_t            r0, r1;
    ggml_cpu_split_range(ggml_nrows(b), params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        ggml_cpu_row_coords(r, b->ne, &i1, &i2, &i3);
        const int64_t idx = read_index(c, i1, i2 % c->ne[1], i3 % c->ne[2]);
        if (idx < 0 || idx >= dst->ne[1]) {
            GGML_ABORT("set_rows: row index %lld out of range [0, %lld)", (long long) idx, (long long) dst->ne[1]);
        }
        ggml_cpu_load_row(b->type, (const char *) b->data + i1 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3], b->nb[0],
                          b->ne[0], row.data());
        ggml_cpu_store_row(dst->type, (char *) dst->data + idx * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3],
                           dst->nb[0], b->ne[0], row.data());
    }
}

void ggml_cpu_op_map_custom(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    struct ggml_custom_op_params p;
    memcpy(&p, dst->op_params, sizeof(p));
    void * fn;
    memcpy(&fn, &p.fun, sizeof(fn));
    GGML_ASSERT(fn && "map_custom: no callback");
    switch (dst->op) {
        case GGML_OP_MAP_CUSTOM1: {
            ggml_custom1_op_t f;
            memcpy(&f, &fn, sizeof(f));
            f(dst, dst->src[0], params->ith, params->nth, p.userdata);
            break;
        }
        case GGML_OP_MAP_CUSTOM2: {
            ggml_custom2_op_t f;
            memcpy(&f, &fn, sizeof(f));
            f(dst, dst->src[0], dst->src[1], params->ith, params->nth, p.userdata);
            break;
        }
        default: {
            ggml_custom3_op_t f;
            memcpy(&f, &fn, sizeof(f));
            f(dst, dst->src[0], dst->src[1], dst->src[2], params->ith, params->nth, p.userdata);
            break;
        }
    }
}

// WIN_PART / WIN_UNPART: rows of C floats move between the image [C, W, H] and the windows
// [C, w, w, n]; positions outside the image are zeros (part) or dropped (unpart).
void ggml_cpu_op_win(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a    = dst->src[0];
    const bool          part = dst->op == GGML_OP_WIN_PART;
    const int64_t       C    = a->ne[0];
    const int           w    = part ? ggml_get_op_params_i32(dst, 2) : ggml_get_op_params_i32(dst, 0);
    int64_t             r0, r1;
    ggml_cpu_split_range(ggml_nrows(dst), params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        int64_t i1, i2, i3;
        ggml_cpu_row_coords(r, dst->ne, &i1, &i2, &i3);
        char *       d = (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        const char * s = nullptr;
        if (part) {
            const int64_t npx = ggml_get_op_params_i32(dst, 0);
            const int64_t x = (i3 % npx) * w + i1, y = (i3 / npx) * w + i2;
            if (x < a->ne[1] && y < a->ne[2]) s = (const char *) a->data + x * a->nb[1] + y * a->nb[2];
        } else {
            const int64_t npx = (dst->ne[1] + w - 1) / w;
            s = (const char *) a->data + (i1 % w) * a->nb[1] + (i2 % w) * a->nb[2] + ((i2 / w) * npx + i1 / w) * a->nb[3];
        }
        for (int64_t c = 0; c < C; ++c) {
            float v = 0.0f;
            if (s) memcpy(&v, s + c * a->nb[0], sizeof(float));
            memcpy(d + c * dst->nb[0], &v, sizeof(float));
        }
    }
}

void ggml_cpu_op_get_rel_pos(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a  = dst->src[0];
    const int64_t       kh = dst->ne[1];
    std::vector<float>  row((size_t) a->ne[0]);
    int64_t             r0, r1;
    ggml_cpu_split_range(ggml_nrows(dst), params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t k = r % kh, q = r / kh;
        ggml_cpu_load_row(a->type, (const char *) a->data + ((kh - 1 - k) + q) * a->nb[1], a->nb[0], a->ne[0], row.data());
        ggml_cpu_store_row(dst->type, (char *) dst->data + k * dst->nb[1] + q * dst->nb[2], dst->nb[0], a->ne[0], row.data());
    }
}

void ggml_cpu_op_add_rel_pos(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a  = dst->src[0];
    const ggml_tensor * pw = dst->src[1];
    const ggml_tensor * ph = dst->src[2];
    const int64_t       K  = pw->ne[0];
    const int64_t       nq = a->ne[1];
    // rows of dst (one per query and batch) are independent: copy-then-add per row, alias-safe
    int64_t r0, r1;
    ggml_cpu_split_range(nq * a->ne[2], params->ith, params->nth, &r0, &r1);
    const float * pwd = (const float *) pw->data;
    const float * phd = (const float *) ph->data;
    for (int64_t r = r0; r < r1; ++r) {
        const float * s = (const float *) ((const char *) a->data + r * a->nb[1]);
        float *       d = (float *) ((char *) dst->data + r * dst->nb[1]);
        // pw/ph are contiguous [K, q1, q2, B]: row r of a is (q, b) = their row r
        for (int64_t kh = 0; kh < K; ++kh)
            for (int64_t kw = 0; kw < K; ++kw) d[kh * K + kw] = s[kh * K + kw] + phd[r * K + kh] + pwd[r * K + kw];
    }
}
