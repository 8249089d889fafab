// Cases: the non-image client ops — clamp, leaky_relu, log/sin/cos, sum/sum_rows/mean, argmax,
// argsort/argsort_top_k/top_k, diag_mask_inf, acc/set(_1d/_2d), roll, add_id, mul_mat_id,
// set_rows, map_custom1/2/3.
//
// Error bounds: clamp, leaky_relu (one product), masks, orderings, moves: exact or one rounding
// (rel 1e-7); log/sin/cos: abs 1e-6 + rel 1e-6 (libm float vs double); sums: rel 1e-6 of
// sum |x| (accumulated in double, one rounding to F32) — expressed as abs 1e-5 on inputs in
// [-1, 1]; mul_mat_id: 1e-5 * sum |w x| (F32 accumulation). F16 outputs add their rounding.

#include "backend-ops-cases.h"

#include <cmath>
#include <cstring>

namespace bops {

namespace {

tolerance tol_ar(double abs, double rel) {
    tolerance t;
    t.abs = abs;
    t.rel = rel;
    return t;
}

dense map(const dense & a, double (*f)(double, double), double p) {
    dense out = a;
    for (double & v : out.v) v = f(v, p);
    return out;
}

// distinct values per row so that orderings are unambiguous even in F16
fill distinct_values() {
    return fill::with([](std::mt19937 & r, const int64_t * i) {
        std::uniform_int_distribution<int> u(0, 7);
        return (double) ((i[0] * 37 + i[1] * 11 + i[2] * 5) % 101) * 0.125 - 6.0 + 0.0 * u(r);
    });
}

void elementwise_cases(case_list & cl) {
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (ne4 s : {ne4{1, 1, 1, 1}, ne4{7, 3, 1, 1}, ne4{33, 5, 3, 2}})
    for (layout l : {layout::cont, layout::pad, layout::perm12}) {
        if (s[0] == 1 && l != layout::cont) continue;
        const std::string tail = std::string(" ") + tn(t) + " " + sh(s) + " " + layout_name(l);
        cl.add("clamp -0.3 0.6" + tail,
               [=](builder & b) { b.out = ggml_clamp(b.ctx, b.src(t, s, l), -0.3f, 0.6f); },
               [](const std::vector<dense> & x, dense *) { return map(x[0], [](double v, double) { return std::min(std::max(v, (double) -0.3f), (double) 0.6f); }, 0); },
               for_type(t, tolerance{}));
        for (int ip = 0; ip < 2; ip++)
            cl.add(std::string("leaky_relu 0.1") + (ip ? " inplace" : "") + tail,
                   [=](builder & b) { b.out = ggml_leaky_relu(b.ctx, b.src(t, s, l), 0.1f, ip != 0); },
                   [](const std::vector<dense> & x, dense *) { return map(x[0], [](double v, double) { return v > 0 ? v : (double) 0.1f * v; }, 0); },
                   for_type(t, tol_ar(0, 1e-7)));
        struct fn { const char * name; ggml_tensor * (*make)(ggml_context *, ggml_tensor *); ggml_tensor * (*make_ip)(ggml_context *, ggml_tensor *); double (*f)(double, double); fill in; };
        const fn fns[] = {
            {"log", ggml_log, ggml_log_inplace, [](double v, double) { return std::log(v); }, fill::range(0.05, 9)},
            {"sin", ggml_sin, ggml_sin_inplace, [](double v, double) { return std::sin(v); }, fill::range(-10, 10)},
            {"cos", ggml_cos, ggml_cos_inplace, [](double v, double) { return std::cos(v); }, fill::range(-10, 10)},
        };
        for (const fn & f : fns)
        for (int ip = 0; ip < 2; ip++) {
            if (ip && l == layout::perm12) continue;
            cl.add(std::string(f.name) + (ip ? "_inplace" : "") + tail,
                   [=](builder & b) { ggml_tensor * x = b.src(t, s, l, f.in); b.out = ip ? f.make_ip(b.ctx, x) : f.make(b.ctx, x); },
                   [=](const std::vector<dense> & x, dense *) { return map(x[0], f.f, 0); },
                   for_type(t, tol_ar(1e-6, 1e-6)));
        }
        for (int n_past : {0, 2})
        for (int ip = 0; ip < 2; ip++) {
            if (ip && l == layout::perm12) continue;
            cl.add(std::string("diag_mask_inf") + (ip ? "_inplace" : "") + " n_past " + std::to_string(n_past) + tail,
                   [=](builder & b) { ggml_tensor * x = b.src(t, s, l); b.out = ip ? ggml_diag_mask_inf_inplace(b.ctx, x, n_past) : ggml_diag_mask_inf(b.ctx, x, n_past); },
                   [=](const std::vector<dense> & x, dense *) { return ref::diag_mask_inf(x[0], n_past); },
                   for_type(t, tolerance{}));
        }
    }
}

void reduce_sort_cases(case_list & cl) {
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (ne4 s : {ne4{1, 1, 1, 1}, ne4{7, 3, 1, 1}, ne4{33, 5, 3, 2}, ne4{1000, 3, 1, 1}})
    for (layout l : {layout::cont, layout::pad, layout::perm12}) {
        if (s[0] == 1 && l != layout::cont) continue;
        const std::string tail = std::string(" ") + tn(t) + " " + sh(s) + " " + layout_name(l);
        const double      n    = (double) (s[0] * s[1] * s[2] * s[3]);
        cl.add("sum" + tail, [=](builder & b) { b.out = ggml_sum(b.ctx, b.src(t, s, l)); },
               [](const std::vector<dense> & x, dense *) { return ref::sum(x[0]); }, for_type(t, tol_ar(1e-7 * n, 1e-6)));
        cl.add("sum_rows" + tail, [=](builder & b) { b.out = ggml_sum_rows(b.ctx, b.src(t, s, l)); },
               [](const std::vector<dense> & x, dense *) { return ref::sum_rows(x[0], false); }, for_type(t, tol_ar(1e-7 * s[0], 1e-6)));
        cl.add("mean" + tail, [=](builder & b) { b.out = ggml_mean(b.ctx, b.src(t, s, l)); },
               [](const std::vector<dense> & x, dense *) { return ref::sum_rows(x[0], true); }, tol_ar(1e-7, 1e-6));
        if (s[2] == 1 && s[3] == 1)
            cl.add("argmax" + tail, [=](builder & b) { b.out = ggml_argmax(b.ctx, b.src(t, s, l)); },
                   [](const std::vector<dense> & x, dense *) { return ref::argmax(x[0]); }, tolerance{});
        for (int desc = 0; desc < 2; desc++)
            cl.add(std::string("argsort ") + (desc ? "desc" : "asc") + tail,
                   [=](builder & b) { b.out = ggml_argsort(b.ctx, b.src(t, s, l, s[0] > 100 ? fill{} : distinct_values()), desc ? GGML_SORT_ORDER_DESC : GGML_SORT_ORDER_ASC); },
                   [=](const std::vector<dense> & x, dense *) { return ref::argsort(x[0], desc != 0); }, tolerance{});
        for (int64_t k : {int64_t(1), std::min<int64_t>(3, s[0]), s[0]})
        for (int api = 0; api < 2; api++)
            cl.add(std::string(api ? "top_k " : "argsort_top_k ") + std::to_string(k) + tail,
                   [=](builder & b) { ggml_tensor * x = b.src(t, s, l, distinct_values()); b.out = api ? ggml_top_k(b.ctx, x, (int) k) : ggml_argsort_top_k(b.ctx, x, (int) k); },
                   [=](const std::vector<dense> & x, dense *) { return ref::argsort(x[0], true, k); }, tolerance{});
    }
    // ties: equal values keep their index order in either direction
    cl.add("argsort asc ties f32 9x2",
           [](builder & b) { b.out = ggml_argsort(b.ctx, b.src(GGML_TYPE_F32, {9, 2, 1, 1}, layout::cont, fill::with([](std::mt19937 &, const int64_t * i) { return (double) ((i[0] * 5 + i[1]) % 3); })), GGML_SORT_ORDER_ASC); },
           [](const std::vector<dense> & x, dense *) { return ref::argsort(x[0], false); }, tolerance{});
    cl.add("argmax ties f32 9x2",
           [](builder & b) { b.out = ggml_argmax(b.ctx, b.src(GGML_TYPE_F32, {9, 2, 1, 1}, layout::cont, fill::with([](std::mt19937 &, const int64_t * i) { return (double) ((i[0] * 5 + i[1]) % 3); }))); },
           [](const std::vector<dense> & x, dense *) { return ref::argmax(x[0]); }, tolerance{});
}

void index_cases(case_list & cl) {
    // acc / set: b lands in a view of a (strides in bytes of a)
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (int is_acc = 0; is_acc < 2; is_acc++)
    for (int ip = 0; ip < 2; ip++) {
        const ne4    na = {10, 6, 3, 2}, nb = {4, 3, 2, 1};
        const size_t ts = ggml_type_size(t);
        const int64_t s1 = 10, s2 = 60, s3 = 180, off = 13;
        cl.add(std::string(is_acc ? "acc" : "set") + (ip ? "_inplace " : " ") + tn(t) + " a " + sh(na) + " b " + sh(nb),
               [=](builder & b) {
                   ggml_tensor * a = b.src(t, na);
                   ggml_tensor * y = b.src(t, nb, layout::perm12);
                   const size_t  n1 = s1 * ts, n2 = s2 * ts, n3 = s3 * ts, o = off * ts;
                   if (is_acc) b.out = ip ? ggml_acc_inplace(b.ctx, a, y, n1, n2, n3, o) : ggml_acc(b.ctx, a, y, n1, n2, n3, o);
                   else        b.out = ip ? ggml_set_inplace(b.ctx, a, y, n1, n2, n3, o) : ggml_set(b.ctx, a, y, n1, n2, n3, o);
               },
               [=](const std::vector<dense> & x, dense *) { return ref::acc_set(x[0], x[1], s1, s2, s3, off, is_acc != 0); },
               for_type(t, tol_ar(0, 1e-7)));
    }
    for (int ip = 0; ip < 2; ip++) {
        cl.add(std::string("set_1d") + (ip ? "_inplace" : "") + " f32 a 20x3 b 7 offset 11",
               [=](builder & b) { ggml_tensor * a = b.src(GGML_TYPE_F32, {20, 3, 1, 1}); ggml_tensor * y = b.src(GGML_TYPE_F32, {7, 1, 1, 1});
                                  b.out = ip ? ggml_set_1d_inplace(b.ctx, a, y, 11 * 4) : ggml_set_1d(b.ctx, a, y, 11 * 4); },
               [](const std::vector<dense> & x, dense *) { return ref::acc_set(x[0], x[1], 20, 60, 60, 11, false); }, tolerance{});
        cl.add(std::string("set_2d") + (ip ? "_inplace" : "") + " i32 a 9x8 b 4x3 nb1 18 offset 5",
               [=](builder & b) { ggml_tensor * a = b.src(GGML_TYPE_I32, {9, 8, 1, 1}, layout::cont, fill::ints(-99, 99)); ggml_tensor * y = b.src(GGML_TYPE_I32, {4, 3, 1, 1}, layout::cont, fill::ints(-99, 99));
                                  b.out = ip ? ggml_set_2d_inplace(b.ctx, a, y, 18 * 4, 5 * 4) : ggml_set_2d(b.ctx, a, y, 18 * 4, 5 * 4); },
               [](const std::vector<dense> & x, dense *) { return ref::acc_set(x[0], x[1], 18, 72, 72, 5, false); }, tolerance{});
    }
    // roll
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_I32})
    for (layout l : {layout::cont, layout::perm12}) {
        const ne4 s = {7, 5, 3, 2};
        const int sh4[4] = {3, -2, 1, 0};
        cl.add(std::string("roll 3 -2 1 0 ") + tn(t) + " " + sh(s) + " " + layout_name(l),
               [=](builder & b) { b.out = ggml_roll(b.ctx, b.src(t, s, l, t == GGML_TYPE_I32 ? fill::ints(-50, 50) : fill{}), sh4[0], sh4[1], sh4[2], sh4[3]); },
               [=](const std::vector<dense> & x, dense *) { return ref::roll(x[0], sh4); }, tolerance{});
    }
    // add_id
    for (ne4 s : {ne4{16, 4, 5, 1}, ne4{7, 2, 3, 1}}) {
        const int64_t n_exp = 6;
        cl.add("add_id f32 a " + sh(s) + " b " + std::to_string(s[0]) + "x" + std::to_string(n_exp),
               [=](builder & b) {
                   ggml_tensor * a   = b.src(GGML_TYPE_F32, s);
                   ggml_tensor * y   = b.src(GGML_TYPE_F32, {s[0], n_exp, 1, 1});
                   ggml_tensor * ids = b.src(GGML_TYPE_I32, {s[1], s[2], 1, 1}, layout::cont, fill::ints(0, n_exp - 1));
                   b.out = ggml_add_id(b.ctx, a, y, ids);
               },
               [](const std::vector<dense> & x, dense *) { return ref::add_id(x[0], x[1], x[2]); }, tol_ar(0, 1e-7));
    }
    // mul_mat_id
    struct mmid { int64_t K, N, n_exp, n_used, n_tok, n_b; ggml_type t; };
    for (mmid m : {mmid{32, 9, 4, 2, 5, 1, GGML_TYPE_F32}, mmid{32, 9, 4, 2, 5, 2, GGML_TYPE_F32},
                   mmid{65, 33, 8, 3, 4, 3, GGML_TYPE_F16}, mmid{64, 17, 3, 1, 7, 1, GGML_TYPE_BF16}}) {
        cl.add(std::string("mul_mat_id as ") + tn(m.t) + " " + std::to_string(m.K) + "x" + std::to_string(m.N) + "x" + std::to_string(m.n_exp) +
                   " used " + std::to_string(m.n_used) + " tokens " + std::to_string(m.n_tok) + " n_b " + std::to_string(m.n_b),
               [=](builder & b) {
                   ggml_tensor * as  = b.src(m.t, {m.K, m.N, m.n_exp, 1});
                   ggml_tensor * x   = b.src(GGML_TYPE_F32, {m.K, m.n_b, m.n_tok, 1});
                   ggml_tensor * ids = b.src(GGML_TYPE_I32, {m.n_used, m.n_tok, 1, 1}, layout::cont, fill::ints(0, m.n_exp - 1));
                   b.out = ggml_mul_mat_id(b.ctx, as, x, ids);
               },
               [](const std::vector<dense> & x, dense * sc) { return ref::mul_mat_id(x[0], x[1], x[2], sc); },
               [] { tolerance t; t.scale = 1e-5; t.abs = 1e-30; return t; }());
    }
    // set_rows: distinct destination rows per (i2, i3)
    for (ggml_type dt : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16})
    for (ggml_type st : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (ggml_type it : {GGML_TYPE_I64, GGML_TYPE_I32})
    for (ne4 nc : {ne4{5, 2, 1, 1}, ne4{5, 4, 2, 1}}) { // indices broadcast over dims 2/3, or one set per matrix
        const ne4 na = {12, 9, 4, 2}, nb = {12, 5, 4, 2};
        cl.add(std::string("set_rows dst ") + tn(dt) + " " + sh(na) + " src " + tn(st) + " " + sh(nb) + " idx " + tn(it) + " " + sh(nc),
               [=](builder & b) {
                   ggml_tensor * a = b.src(dt, na);
                   ggml_tensor * y = b.src(st, nb);
                   ggml_tensor * c = b.src(it, nc, layout::cont, fill::with([](std::mt19937 &, const int64_t * i) { return (double) ((i[0] * 7 + 3 * i[1] + 5 * i[2] + 1) % 9); }));
                   b.out = ggml_set_rows(b.ctx, a, y, c);
               },
               [](const std::vector<dense> & x, dense *) { return ref::set_rows(x[0], x[1], x[2]); },
               for_type(dt, tolerance{}));
    }
}

// custom maps: each thread takes a share of rows
void split_rows(const ggml_tensor * dst, int ith, int nth, int64_t * r0, int64_t * r1) {
    const int64_t n = ggml_nrows(dst), per = (n + nth - 1) / nth;
    *r0 = std::min(n, per * ith);
    *r1 = std::min(n, *r0 + per);
}
float at(const ggml_tensor * t, int64_t i, int64_t r) {
    float v;
    memcpy(&v, (const char *) t->data + i * t->nb[0] + (r % t->ne[1]) * t->nb[1] + (r / t->ne[1]) * t->nb[2], sizeof(v));
    return v;
}
void put(ggml_tensor * t, int64_t i, int64_t r, float v) {
    memcpy((char *) t->data + i * t->nb[0] + (r % t->ne[1]) * t->nb[1] + (r / t->ne[1]) * t->nb[2], &v, sizeof(v));
}
void custom1_scale(ggml_tensor * dst, const ggml_tensor * a, int ith, int nth, void * ud) {
    const float k = *(const float *) ud;
    int64_t r0, r1;
    split_rows(dst, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        for (int64_t i = 0; i < dst->ne[0]; i++) put(dst, i, r, k * at(a, i, r));
}
void custom2_add(ggml_tensor * dst, const ggml_tensor * a, const ggml_tensor * b, int ith, int nth, void *) {
    int64_t r0, r1;
    split_rows(dst, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        for (int64_t i = 0; i < dst->ne[0]; i++) put(dst, i, r, at(a, i, r) + at(b, i, r));
}
void custom3_fma(ggml_tensor * dst, const ggml_tensor * a, const ggml_tensor * b, const ggml_tensor * c, int ith, int nth, void *) {
    int64_t r0, r1;
    split_rows(dst, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++)
        for (int64_t i = 0; i < dst->ne[0]; i++) put(dst, i, r, at(a, i, r) * at(b, i, r) + at(c, i, r));
}

void map_custom_cases(case_list & cl) {
    static float k = 2.5f;
    for (ne4 s : {ne4{7, 3, 1, 1}, ne4{33, 17, 2, 1}})
    for (int ip = 0; ip < 2; ip++)
    for (int n_tasks : {GGML_N_TASKS_MAX, 1}) {
        const std::string tail = std::string(ip ? "_inplace" : "") + " f32 " + sh(s) + " n_tasks " + std::to_string(n_tasks);
        cl.add("map_custom1 2.5a" + tail,
               [=](builder & b) { ggml_tensor * a = b.src(GGML_TYPE_F32, s); b.out = ip ? ggml_map_custom1_inplace(b.ctx, a, custom1_scale, n_tasks, &k) : ggml_map_custom1(b.ctx, a, custom1_scale, n_tasks, &k); },
               [](const std::vector<dense> & x, dense *) { return ref::scale(x[0], 2.5, 0.0); }, tol_ar(0, 1e-7));
        cl.add("map_custom2 a+b" + tail,
               [=](builder & b) { ggml_tensor * a = b.src(GGML_TYPE_F32, s); ggml_tensor * y = b.src(GGML_TYPE_F32, s);
                                  b.out = ip ? ggml_map_custom2_inplace(b.ctx, a, y, custom2_add, n_tasks, nullptr) : ggml_map_custom2(b.ctx, a, y, custom2_add, n_tasks, nullptr); },
               [](const std::vector<dense> & x, dense *) { return ref::binary(ref::binop::add, x[0], x[1]); }, tol_ar(0, 1e-7));
        cl.add("map_custom3 a*b+c" + tail,
               [=](builder & b) { ggml_tensor * a = b.src(GGML_TYPE_F32, s); ggml_tensor * y = b.src(GGML_TYPE_F32, s); ggml_tensor * z = b.src(GGML_TYPE_F32, s);
                                  b.out = ip ? ggml_map_custom3_inplace(b.ctx, a, y, z, custom3_fma, n_tasks, nullptr) : ggml_map_custom3(b.ctx, a, y, z, custom3_fma, n_tasks, nullptr); },
               [](const std::vector<dense> & x, dense *) { return ref::binary(ref::binop::add, ref::binary(ref::binop::mul, x[0], x[1]), x[2]); },
               tol_ar(1e-7, 1e-6));
    }
}

} // namespace

void sinks_cases(case_list & cl) {
    for (ne4 s : {ne4{7, 3, 4, 1}, ne4{65, 5, 2, 2}}) {
        cl.add("soft_max_ext + add_sinks f32 " + sh(s),
               [=](builder & b) {
                   ggml_tensor * x  = b.src(GGML_TYPE_F32, s, layout::cont, fill::range(-4, 4));
                   ggml_tensor * sk = b.src(GGML_TYPE_F32, {s[2], 1, 1, 1}, layout::cont, fill::range(-2, 3));
                   b.out = ggml_soft_max_ext(b.ctx, x, nullptr, 0.5f, 0.0f);
                   ggml_soft_max_add_sinks(b.out, sk);
               },
               [](const std::vector<dense> & x, dense *) { return ref::soft_max_sinks(x[0], 0.5, x[1]); }, tol_ar(1e-7, 1e-5));
    }
    // both precisions, as the other flash-attention cases: the default lets the CPU round Q, K, V
    // and the probabilities to BF16/F16 (bound 5e-3); GGML_PREC_F32 keeps F32 products
    for (ggml_prec prec : {GGML_PREC_DEFAULT, GGML_PREC_F32})
    for (ggml_type kv : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        const int64_t D = 64, n_q = 5, n_kv = 37, H = 4, Hkv = 2;
        cl.add(std::string("flash_attn_ext + add_sinks kv ") + tn(kv) + " D 64 n_q 5 n_kv 37 heads 4/2" +
                   (prec == GGML_PREC_F32 ? " prec f32" : ""),
               [=](builder & b) {
                   ggml_tensor * q  = b.src(GGML_TYPE_F32, {D, n_q, H, 1});
                   ggml_tensor * k  = b.src(kv, {D, n_kv, Hkv, 1});
                   ggml_tensor * v  = b.src(kv, {D, n_kv, Hkv, 1});
                   ggml_tensor * sk = b.src(GGML_TYPE_F32, {H, 1, 1, 1}, layout::cont, fill::range(-1, 2));
                   b.out = ggml_flash_attn_ext(b.ctx, q, k, v, nullptr, 0.125f, 0.0f, 0.0f);
                   if (prec != GGML_PREC_DEFAULT) ggml_flash_attn_ext_set_prec(b.out, prec);
                   ggml_flash_attn_ext_add_sinks(b.out, sk);
               },
               [](const std::vector<dense> & x, dense *) { return ref::flash_attn_ext_sinks(x[0], x[1], x[2], 0.125, x[3]); },
               prec == GGML_PREC_F32 ? tol_ar(1e-5, 1e-4) : tol_ar(5e-3, 1e-2));
    }
}

void rope_multi_cases(case_list & cl) {
    struct rm { int mode; int n_dims; int sect[4]; ne4 a; bool ff; float ext; };
    const rm cfgs[] = {
        {GGML_ROPE_TYPE_MROPE, 32, {6, 5, 5, 0}, {32, 3, 7, 1}, false, 0.0f},   // Qwen2-VL text: t/h/w
        {GGML_ROPE_TYPE_MROPE, 24, {4, 4, 2, 2}, {40, 2, 5, 2}, true, 0.0f},    // partial rotation, e section, freq factors
        {GGML_ROPE_TYPE_IMROPE, 32, {6, 5, 5, 0}, {32, 3, 7, 1}, false, 0.0f},  // interleaved
        {GGML_ROPE_TYPE_IMROPE, 48, {8, 8, 8, 0}, {64, 2, 4, 1}, false, 1.0f},  // + YaRN
        {GGML_ROPE_TYPE_VISION, 16, {8, 8, 0, 0}, {32, 4, 6, 1}, false, 0.0f},  // vision: n_dims = head_dim / 2
    };
    for (const rm & c : cfgs)
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (int ip = 0; ip < 2; ip++) {
        const char * mn = c.mode == GGML_ROPE_TYPE_MROPE ? "mrope" : c.mode == GGML_ROPE_TYPE_IMROPE ? "imrope" : "vision";
        cl.add(std::string(ip ? "rope_multi_inplace " : "rope_multi ") + mn + " " + tn(t) + " " + sh(c.a) + " n_dims " +
                   std::to_string(c.n_dims) + " sections " + std::to_string(c.sect[0]) + "," + std::to_string(c.sect[1]) + "," +
                   std::to_string(c.sect[2]) + "," + std::to_string(c.sect[3]) + (c.ff ? " ff" : "") + (c.ext != 0 ? " yarn" : ""),
               [=](builder & b) {
                   ggml_tensor * x   = b.src(t, c.a);
                   ggml_tensor * pos = b.src(GGML_TYPE_I32, {4 * c.a[2], 1, 1, 1}, layout::cont, fill::ints(0, 300));
                   const int64_t npairs = c.mode == GGML_ROPE_TYPE_VISION ? c.n_dims : c.n_dims / 2;
                   ggml_tensor * ff  = c.ff ? b.src(GGML_TYPE_F32, {npairs, 1, 1, 1}, layout::cont, fill::range(0.5, 2)) : nullptr;
                   int sect[4] = {c.sect[0], c.sect[1], c.sect[2], c.sect[3]};
                   b.out = ip ? ggml_rope_multi_inplace(b.ctx, x, pos, ff, c.n_dims, sect, c.mode, 4096, 10000.0f, 0.5f, c.ext, 1.0f, 32.0f, 1.0f)
                              : ggml_rope_multi(b.ctx, x, pos, ff, c.n_dims, sect, c.mode, 4096, 10000.0f, 0.5f, c.ext, 1.0f, 32.0f, 1.0f);
               },
               [=](const std::vector<dense> & x, dense *) {
                   std::vector<int32_t> pos(x[1].v.size());
                   for (size_t i = 0; i < pos.size(); i++) pos[i] = (int32_t) x[1].v[i];
                   return ref::rope_multi(x[0], pos, c.ff ? &x[2] : nullptr, c.n_dims, c.sect, c.mode, 4096, 10000.0, 0.5, c.ext, 1.0, 32.0, 1.0);
               },
               for_type(t, tol_ar(1e-5, 1e-5)));
    }
}

void sam_cases(case_list & cl) {
    for (ne4 s : {ne4{5, 14, 14, 1}, ne4{3, 10, 7, 1}}) // exact multiple of the window, and padded
    for (int w : {7, 4}) {
        cl.add("win_part f32 " + sh(s) + " w " + std::to_string(w),
               [=](builder & b) { b.out = ggml_win_part(b.ctx, b.src(GGML_TYPE_F32, s), w); },
               [=](const std::vector<dense> & x, dense *) { return ref::win_part(x[0], w); }, tolerance{});
        const int64_t npx = (s[1] + w - 1) / w, npy = (s[2] + w - 1) / w;
        cl.add("win_unpart f32 " + sh(s) + " w " + std::to_string(w),
               [=](builder & b) { b.out = ggml_win_unpart(b.ctx, b.src(GGML_TYPE_F32, {s[0], w, w, npx * npy}), (int) s[1], (int) s[2], w); },
               [=](const std::vector<dense> & x, dense *) { return ref::win_unpart(x[0], (int) s[1], (int) s[2], w); }, tolerance{});
    }
    for (ggml_type t : {GGML_TYPE_F16, GGML_TYPE_F32})
    for (int q : {1, 5, 8}) {
        cl.add(std::string("get_rel_pos ") + tn(t) + " C 6 q " + std::to_string(q),
               [=](builder & b) { b.out = ggml_get_rel_pos(b.ctx, b.src(t, {6, 2 * q - 1, 1, 1}), q, q); },
               [=](const std::vector<dense> & x, dense *) { return ref::get_rel_pos(x[0], q, q); },
               for_type(GGML_TYPE_F16, tolerance{}));
    }
    for (int ip = 0; ip < 2; ip++)
    for (ne4 pws : {ne4{4, 3, 5, 2}, ne4{7, 7, 7, 1}}) {
        cl.add(std::string(ip ? "add_rel_pos_inplace" : "add_rel_pos") + " f32 pw " + sh(pws),
               [=](builder & b) {
                   ggml_tensor * a  = b.src(GGML_TYPE_F32, {pws[0] * pws[0], pws[1] * pws[2], pws[3], 1});
                   ggml_tensor * pw = b.src(GGML_TYPE_F32, pws);
                   ggml_tensor * ph = b.src(GGML_TYPE_F32, pws);
                   b.out = ip ? ggml_add_rel_pos_inplace(b.ctx, a, pw, ph) : ggml_add_rel_pos(b.ctx, a, pw, ph);
               },
               [](const std::vector<dense> & x, dense *) { return ref::add_rel_pos(x[0], x[1], x[2]); }, tol_ar(1e-7, 1e-6));
    }
}

void add_client_cases(case_list & cl) {
    sam_cases(cl);
    rope_multi_cases(cl);
    sinks_cases(cl);
    elementwise_cases(cl);
    reduce_sort_cases(cl);
    index_cases(cl);
    map_custom_cases(cl);
}

} // namespace bops
