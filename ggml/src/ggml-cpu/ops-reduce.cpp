// ops-reduce.cpp — portable CPU kernels that reduce or order rows: SUM, SUM_ROWS, MEAN, ARGMAX,
// ARGSORT, TOP_K.
//
// Sums accumulate in double (a 1M-element F32 sum keeps ~1e-12 relative error) and round once to
// the result type. Orderings are stable: equal values keep their index order (argmax returns the
// first maximum), so results do not depend on the thread count.

#include "ops-row.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace {

// Row r of t (any float type, any strides) into out[0..ne0).
void load_full_row(const ggml_tensor * t, int64_t r, float * out) {
    int64_t i1, i2, i3;
    ggml_cpu_row_coords(r, t->ne, &i1, &i2, &i3);
    const char * p = (const char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    ggml_cpu_load_row(t->type, p, t->nb[0], t->ne[0], out);
}

char * row_ptr(ggml_tensor * t, int64_t r) {
    int64_t i1, i2, i3;
    ggml_cpu_row_coords(r, t->ne, &i1, &i2, &i3);
    return (char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

double row_sum(const float * x, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; ++i) s += x[i];
    return s;
}

} // namespace

void ggml_cpu_op_sum(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    if (params->ith != 0) return; // one scalar: a single thread keeps the order of additions fixed
    std::vector<float> row((size_t) std::max<int64_t>(a->ne[0], 1));
    double             s  = 0.0;
    const int64_t      nr = ggml_is_empty(a) ? 0 : ggml_nrows(a);
    for (int64_t r = 0; r < nr; ++r) {
        load_full_row(a, r, row.data());
        s += row_sum(row.data(), a->ne[0]);
    }
    const float v = (float) s;
    ggml_cpu_store_row(dst->type, (char *) dst->data, dst->nb[0], 1, &v);
}

void ggml_cpu_op_sum_rows(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const bool          mean = dst->op == GGML_OP_MEAN;
    if (ggml_is_empty(dst)) return;
    std::vector<float> row((size_t) std::max<int64_t>(a->ne[0], 1));
    int64_t            r0, r1;
    ggml_cpu_split_range(ggml_nrows(a), params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        load_full_row(a, r, row.data());
        double s = row_sum(row.data(), a->ne[0]);
        if (mean) s /= (double) a->ne[0];
        const float v = (float) s;
        ggml_cpu_store_row(dst->type, row_ptr(dst, r), dst->nb[0], 1, &v);
    }
}

void ggml_cpu_op_argmax(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    std::vector<float>  row((size_t) a->ne[0]);
    int64_t             r0, r1;
    ggml_cpu_split_range(a->ne[1], params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        load_full_row(a, r, row.data());
        int32_t best = 0;
        for (int64_t i = 1; i < a->ne[0]; ++i) {
            if (row[i] > row[best]) best = (int32_t) i;
        }
        memcpy((char *) dst->data + r * dst->nb[0], &best, sizeof(best));
    }
}

// ARGSORT (all columns, either order) and TOP_K (the k largest, largest first).
void ggml_cpu_op_argsort(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a    = dst->src[0];
    const bool          desc = dst->op == GGML_OP_TOP_K || ggml_get_op_params_i32(dst, 0) == GGML_SORT_ORDER_DESC;
    const int64_t       n    = a->ne[0];
    const int64_t       k    = dst->ne[0];
    if (ggml_is_empty(dst)) return;
    std::vector<float>   row((size_t) n);
    std::vector<int32_t> idx((size_t) n);
    int64_t              r0, r1;
    ggml_cpu_split_range(ggml_nrows(a), params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        load_full_row(a, r, row.data());
        std::iota(idx.begin(), idx.end(), 0);
        if (desc) {
            std::stable_sort(idx.begin(), idx.end(), [&](int32_t x, int32_t y) { return row[x] > row[y]; });
        } else {
            std::stable_sort(idx.begin(), idx.end(), [&](int32_t x, int32_t y) { return row[x] < row[y]; });
        }
        char * d = row_ptr(dst, r);
        for (int64_t i = 0; i < k; ++i) memcpy(d + i * dst->nb[0], &idx[i], sizeof(int32_t));
        if (ggml_cpu_should_abort(params)) return;
    }
}
