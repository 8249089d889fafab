// ggml-ops-client.cpp — constructors of the non-image ops diffusion clients and their text
// encoders use: clamp, leaky_relu, log/sin/cos, reductions (sum, sum_rows, mean, argmax),
// sorting (argsort, top_k), diag_mask_inf, acc/set, roll, add_id, mul_mat_id, set_rows,
// soft_max sinks and the custom maps. Upstream's names, argument order and op_params layouts;
// kernels are in ggml-cpu/ops-reduce.cpp and ggml-cpu/ops-index.cpp.

#include "ggml-impl.h"

#include <climits>
#include <initializer_list>

namespace {

struct ggml_tensor * unary_op(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_op op, bool inplace) {
    struct ggml_tensor * result = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    result->op                  = op;
    result->src[0]              = a;
    return result;
}

struct ggml_tensor * acc_or_set(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, size_t nb1,
                                size_t nb2, size_t nb3, size_t offset, bool inplace, enum ggml_op op) {
    GGML_ASSERT(ggml_nelements(b) <= ggml_nelements(a) && "acc/set: b has more elements than a");
    GGML_ASSERT(ggml_is_contiguous(a) && "acc/set: a must be contiguous (the view is given in a's bytes)");
    GGML_ASSERT(a->type == b->type && ggml_blck_size(a->type) == 1 && "acc/set: a and b must share a non-block type");
    // the view of dst that b lands in must lie inside a
    const size_t ts  = ggml_type_size(a->type);
    size_t       end = offset + ts;
    const size_t nb[4] = {ts, nb1, nb2, nb3};
    for (int d = 0; d < 4; ++d) end += (size_t) (b->ne[d] - 1) * nb[d];
    if (!ggml_is_empty(b) && end > ggml_nbytes(a)) {
        GGML_ABORT("%s: view [%lld,%lld,%lld,%lld] with strides %zu,%zu,%zu at offset %zu ends past a (%zu bytes)",
                   ggml_op_name(op), (long long) b->ne[0], (long long) b->ne[1], (long long) b->ne[2],
                   (long long) b->ne[3], nb1, nb2, nb3, offset, ggml_nbytes(a));
    }
    for (size_t v : {nb1, nb2, nb3, offset}) GGML_ASSERT(v <= (size_t) INT32_MAX && "acc/set: strides and offset must fit int32");
    struct ggml_tensor * result   = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    const int32_t        params[] = {(int32_t) nb1, (int32_t) nb2, (int32_t) nb3, (int32_t) offset, inplace ? 1 : 0};
    ggml_set_op_params(result, params, sizeof(params));
    result->op     = op;
    result->src[0] = a;
    result->src[1] = b;
    return result;
}

struct ggml_tensor * diag_mask_inf_impl(struct ggml_context * ctx, struct ggml_tensor * a, int n_past, bool inplace) {
    struct ggml_tensor * result = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    ggml_set_op_params_i32(result, 0, n_past);
    result->op     = GGML_OP_DIAG_MASK_INF;
    result->src[0] = a;
    return result;
}

void set_map_params(struct ggml_tensor * t, void * fun, int n_tasks, void * userdata) {
    GGML_ASSERT((n_tasks == GGML_N_TASKS_MAX || n_tasks > 0) && "map_custom: n_tasks must be positive or -1");
    GGML_ASSERT(fun && "map_custom: no callback");
    struct ggml_custom_op_params p;
    memset(&p, 0, sizeof(p));
    memcpy(&p.fun, &fun, sizeof(fun)); // same slot for every callback kind (upstream's layout)
    p.n_tasks  = n_tasks;
    p.userdata = userdata;
    ggml_set_op_params(t, &p, sizeof(p));
}

struct ggml_tensor * map_custom(struct ggml_context * ctx, enum ggml_op op, struct ggml_tensor * a,
                                struct ggml_tensor * b, struct ggml_tensor * c, void * fun, int n_tasks,
                                void * userdata, bool inplace) {
    struct ggml_tensor * result = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    set_map_params(result, fun, n_tasks, userdata);
    result->op     = op;
    result->src[0] = a;
    result->src[1] = b;
    result->src[2] = c;
    return result;
}

struct ggml_tensor * rope_multi_impl(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                     struct ggml_tensor * c, int n_dims, const int sections[4], int mode,
                                     int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                                     float attn_factor, float beta_fast, float beta_slow, bool inplace) {
    GGML_ASSERT((mode & GGML_ROPE_TYPE_MROPE) && "rope_multi: mode must be MROPE, IMROPE or VISION");
    GGML_ASSERT(mode == GGML_ROPE_TYPE_MROPE || mode == GGML_ROPE_TYPE_IMROPE || mode == GGML_ROPE_TYPE_VISION);
    GGML_ASSERT(ggml_is_vector(b) && b->type == GGML_TYPE_I32 && "rope_multi: positions must be an I32 vector");
    GGML_ASSERT(b->ne[0] >= 4 * a->ne[2] && "rope_multi: need 4 positions (t, h, w, e) per index of a's dim 2");
    GGML_ASSERT(n_dims > 0 && n_dims % 2 == 0 && "rope_multi: n_dims must be positive and even");
    const int64_t rotated = mode == GGML_ROPE_TYPE_VISION ? 2 * (int64_t) n_dims : n_dims;
    GGML_ASSERT(rotated <= a->ne[0] && "rope_multi: rotated dims exceed the head");
    int sect_sum = 0;
    for (int k = 0; k < 4; ++k) {
        GGML_ASSERT(sections[k] >= 0);
        sect_sum += sections[k];
    }
    GGML_ASSERT(sect_sum > 0 && "rope_multi: sections must not all be 0");
    if (c != nullptr) {
        GGML_ASSERT(c->type == GGML_TYPE_F32 && c->ne[0] >= rotated / 2 && "rope_multi: F32 frequency factor per pair");
    }
    struct ggml_tensor * result = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    int32_t params[16] = {0, n_dims, mode, 0, n_ctx_orig};
    memcpy(params + 5, &freq_base, sizeof(float));
    memcpy(params + 6, &freq_scale, sizeof(float));
    memcpy(params + 7, &ext_factor, sizeof(float));
    memcpy(params + 8, &attn_factor, sizeof(float));
    memcpy(params + 9, &beta_fast, sizeof(float));
    memcpy(params + 10, &beta_slow, sizeof(float));
    memcpy(params + 11, sections, 4 * sizeof(int32_t));
    ggml_set_op_params(result, params, sizeof(params));
    result->op     = GGML_OP_ROPE;
    result->src[0] = a;
    result->src[1] = b;
    result->src[2] = c;
    return result;
}

template <class F> void * fn_ptr(F f) {
    void * p;
    static_assert(sizeof(f) == sizeof(p), "function pointer size");
    memcpy(&p, &f, sizeof(p));
    return p;
}

} // namespace

extern "C" {

struct ggml_tensor * ggml_clamp(struct ggml_context * ctx, struct ggml_tensor * a, float min, float max) {
    // upstream: always in place
    struct ggml_tensor * result = ggml_view_tensor(ctx, a);
    ggml_set_op_params_f32(result, 0, min);
    ggml_set_op_params_f32(result, 1, max);
    result->op     = GGML_OP_CLAMP;
    result->src[0] = a;
    return result;
}

struct ggml_tensor * ggml_leaky_relu(struct ggml_context * ctx, struct ggml_tensor * a, float negative_slope,
                                     bool inplace) {
    struct ggml_tensor * result = unary_op(ctx, a, GGML_OP_LEAKY_RELU, inplace);
    ggml_set_op_params_f32(result, 0, negative_slope);
    return result;
}

struct ggml_tensor * ggml_log(struct ggml_context * ctx, struct ggml_tensor * a) { return unary_op(ctx, a, GGML_OP_LOG, false); }
struct ggml_tensor * ggml_log_inplace(struct ggml_context * ctx, struct ggml_tensor * a) { return unary_op(ctx, a, GGML_OP_LOG, true); }
struct ggml_tensor * ggml_sin(struct ggml_context * ctx, struct ggml_tensor * a) { return unary_op(ctx, a, GGML_OP_SIN, false); }
struct ggml_tensor * ggml_sin_inplace(struct ggml_context * ctx, struct ggml_tensor * a) { return unary_op(ctx, a, GGML_OP_SIN, true); }
struct ggml_tensor * ggml_cos(struct ggml_context * ctx, struct ggml_tensor * a) { return unary_op(ctx, a, GGML_OP_COS, false); }
struct ggml_tensor * ggml_cos_inplace(struct ggml_context * ctx, struct ggml_tensor * a) { return unary_op(ctx, a, GGML_OP_COS, true); }

struct ggml_tensor * ggml_sum(struct ggml_context * ctx, struct ggml_tensor * a) {
    struct ggml_tensor * result = ggml_new_tensor_1d(ctx, a->type, 1);
    result->op                  = GGML_OP_SUM;
    result->src[0]              = a;
    return result;
}

struct ggml_tensor * ggml_sum_rows(struct ggml_context * ctx, struct ggml_tensor * a) {
    struct ggml_tensor * result = ggml_new_tensor_4d(ctx, a->type, 1, a->ne[1], a->ne[2], a->ne[3]);
    result->op                  = GGML_OP_SUM_ROWS;
    result->src[0]              = a;
    return result;
}

struct ggml_tensor * ggml_mean(struct ggml_context * ctx, struct ggml_tensor * a) {
    struct ggml_tensor * result = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 1, a->ne[1], a->ne[2], a->ne[3]);
    result->op                  = GGML_OP_MEAN;
    result->src[0]              = a;
    return result;
}

struct ggml_tensor * ggml_argmax(struct ggml_context * ctx, struct ggml_tensor * a) {
    GGML_ASSERT(ggml_is_matrix(a) && "argmax: a must be a matrix");
    GGML_ASSERT(a->ne[0] <= INT32_MAX && a->ne[0] > 0);
    struct ggml_tensor * result = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, a->ne[1]);
    result->op                  = GGML_OP_ARGMAX;
    result->src[0]              = a;
    return result;
}

struct ggml_tensor * ggml_argsort(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_sort_order order) {
    GGML_ASSERT(a->ne[0] <= INT32_MAX && "argsort: rows too long for I32 indices");
    GGML_ASSERT(order == GGML_SORT_ORDER_ASC || order == GGML_SORT_ORDER_DESC);
    struct ggml_tensor * result = ggml_new_tensor(ctx, GGML_TYPE_I32, GGML_MAX_DIMS, a->ne);
    ggml_set_op_params_i32(result, 0, (int32_t) order);
    result->op     = GGML_OP_ARGSORT;
    result->src[0] = a;
    return result;
}

struct ggml_tensor * ggml_argsort_top_k(struct ggml_context * ctx, struct ggml_tensor * a, int k) {
    GGML_ASSERT(k > 0 && k <= a->ne[0] && "argsort_top_k: k must be in [1, ne0]");
    struct ggml_tensor * sorted = ggml_argsort(ctx, a, GGML_SORT_ORDER_DESC);
    return ggml_view_4d(ctx, sorted, k, sorted->ne[1], sorted->ne[2], sorted->ne[3], sorted->nb[1], sorted->nb[2],
                        sorted->nb[3], 0);
}

struct ggml_tensor * ggml_top_k(struct ggml_context * ctx, struct ggml_tensor * a, int k) {
    GGML_ASSERT(k > 0 && k <= a->ne[0] && "top_k: k must be in [1, ne0]");
    struct ggml_tensor * result = ggml_new_tensor_4d(ctx, GGML_TYPE_I32, k, a->ne[1], a->ne[2], a->ne[3]);
    result->op                  = GGML_OP_TOP_K;
    result->src[0]              = a;
    return result;
}

struct ggml_tensor * ggml_diag_mask_inf(struct ggml_context * ctx, struct ggml_tensor * a, int n_past) {
    return diag_mask_inf_impl(ctx, a, n_past, false);
}
struct ggml_tensor * ggml_diag_mask_inf_inplace(struct ggml_context * ctx, struct ggml_tensor * a, int n_past) {
    return diag_mask_inf_impl(ctx, a, n_past, true);
}

struct ggml_tensor * ggml_acc(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, size_t nb1,
                              size_t nb2, size_t nb3, size_t offset) {
    return acc_or_set(ctx, a, b, nb1, nb2, nb3, offset, false, GGML_OP_ACC);
}
struct ggml_tensor * ggml_acc_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                      size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return acc_or_set(ctx, a, b, nb1, nb2, nb3, offset, true, GGML_OP_ACC);
}
struct ggml_tensor * ggml_set(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, size_t nb1,
                              size_t nb2, size_t nb3, size_t offset) {
    return acc_or_set(ctx, a, b, nb1, nb2, nb3, offset, false, GGML_OP_SET);
}
struct ggml_tensor * ggml_set_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                      size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return acc_or_set(ctx, a, b, nb1, nb2, nb3, offset, true, GGML_OP_SET);
}
struct ggml_tensor * ggml_set_1d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                 size_t offset) {
    return acc_or_set(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], offset, false, GGML_OP_SET);
}
struct ggml_tensor * ggml_set_1d_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                         size_t offset) {
    return acc_or_set(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], offset, true, GGML_OP_SET);
}
struct ggml_tensor * ggml_set_2d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b, size_t nb1,
                                 size_t offset) {
    return acc_or_set(ctx, a, b, nb1, a->nb[2], a->nb[3], offset, false, GGML_OP_SET);
}
struct ggml_tensor * ggml_set_2d_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                         size_t nb1, size_t offset) {
    return acc_or_set(ctx, a, b, nb1, a->nb[2], a->nb[3], offset, true, GGML_OP_SET);
}

struct ggml_tensor * ggml_roll(struct ggml_context * ctx, struct ggml_tensor * a, int shift0, int shift1, int shift2,
                               int shift3) {
    GGML_ASSERT(a->nb[0] == ggml_type_size(a->type) && ggml_blck_size(a->type) == 1 && "roll: rows must be packed");
    const int shifts[4] = {shift0, shift1, shift2, shift3};
    for (int d = 0; d < 4; ++d) {
        if (shifts[d] <= -a->ne[d] || shifts[d] >= a->ne[d]) {
            GGML_ABORT("roll: shift %d of dim %d is not in (-%lld, %lld)", shifts[d], d, (long long) a->ne[d], (long long) a->ne[d]);
        }
    }
    struct ggml_tensor * result = ggml_dup_tensor(ctx, a);
    ggml_set_op_params(result, shifts, sizeof(shifts));
    result->op     = GGML_OP_ROLL;
    result->src[0] = a;
    return result;
}

struct ggml_tensor * ggml_add_id(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                 struct ggml_tensor * ids) {
    GGML_ASSERT(a->ne[0] == b->ne[0] && "add_id: a and b rows must have the same length");
    GGML_ASSERT(a->ne[1] == ids->ne[0] && a->ne[2] == ids->ne[1] && "add_id: ids must be [a.ne1, a.ne2]");
    GGML_ASSERT(ids->type == GGML_TYPE_I32 && "add_id: ids must be I32");
    struct ggml_tensor * result = ggml_dup_tensor(ctx, a);
    result->op                  = GGML_OP_ADD_ID;
    result->src[0]              = a;
    result->src[1]              = b;
    result->src[2]              = ids;
    return result;
}

struct ggml_tensor * ggml_mul_mat_id(struct ggml_context * ctx, struct ggml_tensor * as, struct ggml_tensor * b,
                                     struct ggml_tensor * ids) {
    GGML_ASSERT(!ggml_is_transposed(as) && "mul_mat_id: experts must not be transposed");
    GGML_ASSERT(ids->type == GGML_TYPE_I32 && "mul_mat_id: ids must be I32");
    GGML_ASSERT(as->ne[3] == 1 && "mul_mat_id: as must be 3-D [K, N, n_expert]");
    GGML_ASSERT(b->ne[3] == 1 && "mul_mat_id: b must be 3-D [K, n_b, n_tokens]");
    GGML_ASSERT(ids->ne[2] == 1 && ids->ne[3] == 1 && "mul_mat_id: ids must be [n_used, n_tokens]");
    GGML_ASSERT(ids->ne[1] == b->ne[2] && "mul_mat_id: ids and b disagree on the token count");
    GGML_ASSERT(as->ne[0] == b->ne[0] && "mul_mat_id: K mismatch");
    GGML_ASSERT(ids->ne[0] % b->ne[1] == 0 && "mul_mat_id: n_used must be a multiple of b.ne1");
    const int64_t        ne[4]  = {as->ne[1], ids->ne[0], b->ne[2], 1};
    struct ggml_tensor * result = ggml_new_tensor(ctx, GGML_TYPE_F32, 4, ne);
    result->op                  = GGML_OP_MUL_MAT_ID;
    result->src[0]              = as;
    result->src[1]              = b;
    result->src[2]              = ids;
    return result;
}

struct ggml_tensor * ggml_set_rows(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                   struct ggml_tensor * c) {
    GGML_ASSERT(a->ne[0] == b->ne[0] && "set_rows: row lengths differ");
    GGML_ASSERT(a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3] && "set_rows: a and b must agree on dims 2/3");
    GGML_ASSERT(c->ne[0] == b->ne[1] && "set_rows: one index per row of b");
    GGML_ASSERT(c->ne[3] == 1 && b->ne[2] % c->ne[1] == 0 && b->ne[3] % c->ne[2] == 0 &&
                "set_rows: indices broadcast over dims 2/3 by modulo");
    GGML_ASSERT((c->type == GGML_TYPE_I64 || c->type == GGML_TYPE_I32) && "set_rows: indices must be I64 or I32");
    GGML_ASSERT(b->nb[0] == ggml_type_size(b->type) && "set_rows: b rows must be packed");
    struct ggml_tensor * result = ggml_view_tensor(ctx, a);
    result->op                  = GGML_OP_SET_ROWS;
    result->src[0]              = b;
    result->src[1]              = c;
    result->src[2]              = a; // legacy order: the destination last
    return result;
}

void ggml_soft_max_add_sinks(struct ggml_tensor * a, struct ggml_tensor * sinks) {
    if (!sinks) {
        a->src[2] = nullptr;
        return;
    }
    GGML_ASSERT(a->op == GGML_OP_SOFT_MAX && "soft_max_add_sinks: not a soft_max node");
    GGML_ASSERT(a->src[2] == nullptr && "soft_max_add_sinks: sinks already set");
    GGML_ASSERT(a->src[0]->ne[2] == sinks->ne[0] && sinks->type == GGML_TYPE_F32 && "soft_max_add_sinks: F32 [n_head]");
    a->src[2] = sinks;
}

struct ggml_tensor * ggml_rope_multi(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                     struct ggml_tensor * c, int n_dims, int sections[GGML_MROPE_SECTIONS], int mode,
                                     int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                                     float attn_factor, float beta_fast, float beta_slow) {
    return rope_multi_impl(ctx, a, b, c, n_dims, sections, mode, n_ctx_orig, freq_base, freq_scale, ext_factor,
                           attn_factor, beta_fast, beta_slow, false);
}

struct ggml_tensor * ggml_rope_multi_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                             struct ggml_tensor * c, int n_dims, int sections[GGML_MROPE_SECTIONS],
                                             int mode, int n_ctx_orig, float freq_base, float freq_scale,
                                             float ext_factor, float attn_factor, float beta_fast, float beta_slow) {
    return rope_multi_impl(ctx, a, b, c, n_dims, sections, mode, n_ctx_orig, freq_base, freq_scale, ext_factor,
                           attn_factor, beta_fast, beta_slow, true);
}

struct ggml_tensor * ggml_win_part(struct ggml_context * ctx, struct ggml_tensor * a, int w) {
    GGML_ASSERT(a->ne[3] == 1 && a->type == GGML_TYPE_F32 && "win_part: a must be F32 [C, W, H, 1]");
    GGML_ASSERT(w > 0 && "win_part: window must be positive");
    const int px = (int) ((w - a->ne[1] % w) % w), py = (int) ((w - a->ne[2] % w) % w);
    const int npx = (int) ((px + a->ne[1]) / w), npy = (int) ((py + a->ne[2]) / w);
    struct ggml_tensor * result = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, a->ne[0], w, w, (int64_t) npx * npy);
    const int32_t        params[] = {npx, npy, w};
    ggml_set_op_params(result, params, sizeof(params));
    result->op     = GGML_OP_WIN_PART;
    result->src[0] = a;
    return result;
}

struct ggml_tensor * ggml_win_unpart(struct ggml_context * ctx, struct ggml_tensor * a, int w0, int h0, int w) {
    GGML_ASSERT(a->type == GGML_TYPE_F32 && w > 0 && w0 > 0 && h0 > 0);
    GGML_ASSERT(a->ne[1] == w && a->ne[2] == w && "win_unpart: a must be [C, w, w, n_windows]");
    const int64_t npx = (w0 + w - 1) / w, npy = (h0 + w - 1) / w;
    GGML_ASSERT(a->ne[3] >= npx * npy && "win_unpart: too few windows for w0 x h0");
    struct ggml_tensor * result = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, a->ne[0], w0, h0, 1);
    ggml_set_op_params_i32(result, 0, w);
    result->op     = GGML_OP_WIN_UNPART;
    result->src[0] = a;
    return result;
}

struct ggml_tensor * ggml_get_rel_pos(struct ggml_context * ctx, struct ggml_tensor * a, int qh, int kh) {
    GGML_ASSERT(qh == kh && "get_rel_pos: qh must equal kh");
    GGML_ASSERT(2 * (int64_t) (qh > kh ? qh : kh) - 1 == a->ne[1] && "get_rel_pos: a must be [C, 2*qh - 1]");
    struct ggml_tensor * result = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, a->ne[0], kh, qh);
    result->op                  = GGML_OP_GET_REL_POS;
    result->src[0]              = a;
    return result;
}

static struct ggml_tensor * add_rel_pos_impl(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * pw,
                                             struct ggml_tensor * ph, bool inplace) {
    GGML_ASSERT(ggml_are_same_shape(pw, ph) && "add_rel_pos: pw and ph must have the same shape");
    GGML_ASSERT(ggml_is_contiguous(a) && ggml_is_contiguous(pw) && ggml_is_contiguous(ph));
    GGML_ASSERT(a->type == GGML_TYPE_F32 && pw->type == GGML_TYPE_F32 && ph->type == GGML_TYPE_F32);
    GGML_ASSERT(pw->ne[3] == a->ne[2] && pw->ne[0] * pw->ne[0] == a->ne[0] && pw->ne[1] * pw->ne[2] == a->ne[1] &&
                "add_rel_pos: a must be [K*K, q, B] for pw/ph [K, q1, q2, B]");
    struct ggml_tensor * result = inplace ? ggml_view_tensor(ctx, a) : ggml_dup_tensor(ctx, a);
    ggml_set_op_params_i32(result, 0, inplace ? 1 : 0);
    result->op     = GGML_OP_ADD_REL_POS;
    result->src[0] = a;
    result->src[1] = pw;
    result->src[2] = ph;
    return result;
}

struct ggml_tensor * ggml_add_rel_pos(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * pw,
                                      struct ggml_tensor * ph) {
    return add_rel_pos_impl(ctx, a, pw, ph, false);
}
struct ggml_tensor * ggml_add_rel_pos_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * pw,
                                              struct ggml_tensor * ph) {
    return add_rel_pos_impl(ctx, a, pw, ph, true);
}

void ggml_flash_attn_ext_add_sinks(struct ggml_tensor * a, struct ggml_tensor * sinks) {
    if (!sinks) {
        a->src[4] = nullptr;
        return;
    }
    GGML_ASSERT(a->op == GGML_OP_FLASH_ATTN_EXT && "flash_attn_ext_add_sinks: not a flash_attn_ext node");
    GGML_ASSERT(a->src[4] == nullptr && "flash_attn_ext_add_sinks: sinks already set");
    GGML_ASSERT(sinks->type == GGML_TYPE_F32 && sinks->ne[0] == a->src[0]->ne[2] && "flash_attn_ext_add_sinks: F32 [n_head]");
    a->src[4] = sinks;
}

struct ggml_tensor * ggml_map_custom1(struct ggml_context * ctx, struct ggml_tensor * a, ggml_custom1_op_t fun,
                                      int n_tasks, void * userdata) {
    return map_custom(ctx, GGML_OP_MAP_CUSTOM1, a, nullptr, nullptr, fn_ptr(fun), n_tasks, userdata, false);
}
struct ggml_tensor * ggml_map_custom1_inplace(struct ggml_context * ctx, struct ggml_tensor * a, ggml_custom1_op_t fun,
                                              int n_tasks, void * userdata) {
    return map_custom(ctx, GGML_OP_MAP_CUSTOM1, a, nullptr, nullptr, fn_ptr(fun), n_tasks, userdata, true);
}
struct ggml_tensor * ggml_map_custom2(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                      ggml_custom2_op_t fun, int n_tasks, void * userdata) {
    return map_custom(ctx, GGML_OP_MAP_CUSTOM2, a, b, nullptr, fn_ptr(fun), n_tasks, userdata, false);
}
struct ggml_tensor * ggml_map_custom2_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                              ggml_custom2_op_t fun, int n_tasks, void * userdata) {
    return map_custom(ctx, GGML_OP_MAP_CUSTOM2, a, b, nullptr, fn_ptr(fun), n_tasks, userdata, true);
}
struct ggml_tensor * ggml_map_custom3(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                      struct ggml_tensor * c, ggml_custom3_op_t fun, int n_tasks, void * userdata) {
    return map_custom(ctx, GGML_OP_MAP_CUSTOM3, a, b, c, fn_ptr(fun), n_tasks, userdata, false);
}
struct ggml_tensor * ggml_map_custom3_inplace(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                              struct ggml_tensor * c, ggml_custom3_op_t fun, int n_tasks,
                                              void * userdata) {
    return map_custom(ctx, GGML_OP_MAP_CUSTOM3, a, b, c, fn_ptr(fun), n_tasks, userdata, true);
}

} // extern "C"
