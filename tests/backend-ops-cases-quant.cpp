// Cases: block-quantized types (issue 14): mul_mat with quantized weights, get_rows and cpy from and
// to each type. Q8_0 keeps its own copy/get_rows cases in backend-ops-cases-matmul-copy.cpp.
//
// mul_mat reference: the weights as stored (dequantized by the library's reference dequantizer,
// which test-quants checks) times the activations quantized exactly as the op does (the type's
// quantize_act to its vec_dot_type, then dequantized), in double. What remains is F32 rounding of
// the block products and sums, so the bound is |err| <= 1e-5 * s with
//   s = sum_k (|a_k| + c * max_block|a|) * |x'_k|       (a weights, x' quantized activations)
// c = 0 for the symmetric types (Q4_0, Q5_0, Q8_0, Q3_K, Q6_K): only the integer block sums times
//   F32 scales are summed, each term within a few ulps;
// c = 100 for Q4_1 / Q5_1: their Q8_1 activations carry s = F16(d * sum q), which the dot product
//   uses for the min term instead of the stored d_F16 * sum q: a relative difference of up to 2^-10
//   on |m| * sum|x'| (100 * 1e-5 > 2^-10), |m| <= max_block|a| because the min element is stored
//   with q = 0;
// c = 4 for Q2_K / Q4_K / Q5_K: their result is d*(...) - dmin*(...), two F32 terms each as large as
//   sum (|a_k| + |dmin m|) |x'_k|; |dmin m| (the sub-block's offset) stays below 2 max|a| for blocks
//   of the reference quantizer, so 4 max|a| covers both terms.
// Compared with the quantization error itself (~1e-2 relative), this bound is 1000x tighter: a
// kernel that mis-scales one block, drops a min term or mixes up nibbles fails it.
// get_rows: exact (the library's dequantizer, as the reference decodes). cpy quantized -> F32/F16:
// exact after the destination's rounding; F32/F16 -> quantized: exactly the blocks of the reference
// quantizer (ggml_quantize_chunk) for each destination row: these cases check the copy kernel's
// walk over blocks and strides; the quantizers' accuracy is test-quants' subject.

#include "backend-ops-cases.h"
#include "formats/ggml-quants.h"

#include <cmath>

namespace bops {

namespace {

const ggml_type k_quant_types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0,
                                   GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};

// types whose reference code has landed (ggml-quants.cpp is filled in groups); the case counts
// printed by test-backend-ops show which are in
bool implemented(ggml_type t) {
    return ggml_get_type_traits(t)->type_name != nullptr && ggml_get_quant_dot_traits(t) != nullptr;
}

double min_term_factor(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q4_1:
        case GGML_TYPE_Q5_1: return 100.0;
        case GGML_TYPE_Q2_K:
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q5_K: return 4.0;
        default: return 0.0;
    }
}

// Rows of x (ne0 = K) quantized with the weight type's quantize_act and dequantized back: the
// activations the op multiplies.
dense quantized_activations(ggml_type wt, const dense & x) {
    const ggml_quant_dot_traits * tr = ggml_get_quant_dot_traits(wt);
    GGML_ASSERT(tr && "no dot traits for a quantized weight type");
    const int64_t        K = x.ne[0];
    std::vector<float>   row((size_t) K), back((size_t) K);
    std::vector<uint8_t> q(ggml_row_size(tr->vec_dot_type, K));
    dense                out = x;
    for (int64_t r = 0; r < x.nelements() / K; ++r) {
        for (int64_t i = 0; i < K; ++i) row[i] = (float) x.v[r * K + i];
        tr->quantize_act(row.data(), q.data(), K);
        ggml_get_type_traits(tr->vec_dot_type)->to_float(q.data(), back.data(), K);
        for (int64_t i = 0; i < K; ++i) out.v[r * K + i] = back[i];
    }
    return out;
}

// |a_k| + c * max over a_k's block of |a|
dense weight_magnitude(ggml_type wt, const dense & a) {
    const int64_t bs = ggml_blck_size(wt);
    const double  c  = min_term_factor(wt);
    dense         m  = a;
    for (int64_t b = 0; b < a.nelements() / bs; ++b) {
        double mx = 0;
        for (int64_t i = 0; i < bs; ++i) mx = std::max(mx, std::fabs(a.v[b * bs + i]));
        for (int64_t i = 0; i < bs; ++i) m.v[b * bs + i] = std::fabs(a.v[b * bs + i]) + c * mx;
    }
    return m;
}

void add_quant_mul_mat(case_list & cl, ggml_type ta, int64_t K, int64_t N, int64_t M, int64_t a2, int64_t a3, int64_t b2,
                       int64_t b3, layout la, layout lb) {
    const ne4         na = {K, N, a2, a3}, nb = {K, M, b2, b3};
    const std::string desc = std::string("mul_mat a ") + tn(ta) + " " + sh(na) + " " + layout_name(la) + " b f32 " +
                             sh(nb) + " " + layout_name(lb);
    tolerance tol;
    tol.scale = 1e-5; // see the top of the file
    tol.abs   = 1e-30;
    cl.add(
        desc,
        [=](builder & b) {
            ggml_tensor * a = b.src(ta, na, la, fill::range(-1, 1));
            // activations over a wide dynamic range per row, as hidden states have
            ggml_tensor * x = b.src(GGML_TYPE_F32, nb, lb, fill::with([](std::mt19937 & rng, const int64_t * idx) {
                std::uniform_real_distribution<double> u(-1.0, 1.0);
                return u(rng) * (1 + (idx[1] % 4) * 10.0);
            }));
            b.out = ggml_mul_mat(b.ctx, a, x);
        },
        [=](const std::vector<dense> & s, dense * scale) {
            const dense xq = quantized_activations(ta, s[1]);
            dense       ax = xq;
            for (double & v : ax.v) v = std::fabs(v);
            *scale = ref::mul_mat(weight_magnitude(ta, s[0]), ax);
            return ref::mul_mat(s[0], xq);
        },
        tol);
    // A backend that multiplies the stored weights with the activations as given (Vulkan): the
    // exact product under the same bound form (F32 rounding of the dequantized weights, their
    // products and sums: the per-weight rounding of d * sc * q - dmin * m is what c covers).
    cl.v.back().f32_act_ref = [=](const std::vector<dense> & s, dense * scale) {
        dense ax = s[1];
        for (double & v : ax.v) v = std::fabs(v);
        *scale = ref::mul_mat(weight_magnitude(ta, s[0]), ax);
        return ref::mul_mat(s[0], s[1]);
    };
    // ... and such a backend against the CPU: both rounding bounds plus the activation
    // quantization the CPU adds, sum_k |a_k| |x_k - x'_k|
    cl.v.back().cpu_gap = [=](const std::vector<dense> & s) {
        const dense xq = quantized_activations(ta, s[1]);
        dense       ax = s[1], axq = xq, dx = xq, aa = s[0];
        for (double & v : ax.v) v = std::fabs(v);
        for (double & v : axq.v) v = std::fabs(v);
        for (size_t i = 0; i < dx.v.size(); ++i) dx.v[i] = std::fabs(s[1].v[i] - xq.v[i]);
        for (double & v : aa.v) v = std::fabs(v);
        const dense wm = weight_magnitude(ta, s[0]);
        const dense s1 = ref::mul_mat(wm, ax), s2 = ref::mul_mat(wm, axq), g = ref::mul_mat(aa, dx);
        dense       out = g;
        for (size_t i = 0; i < out.v.size(); ++i) out.v[i] = 2e-5 * (s1.v[i] + s2.v[i]) + g.v[i] * (1 + 1e-6);
        return out;
    };
}

void mul_mat_cases(case_list & cl) {
    struct kmn { int64_t blocks, N, M; };
    // blocks of K; N, M odd and around the 4x4 micro-tile and 16 x 64 block edges of the fast path
    const kmn sizes[] = {{1, 1, 1}, {1, 3, 5}, {2, 17, 5}, {3, 33, 9}, {5, 7, 20}, {4, 65, 33}, {2, 1, 70}, {7, 20, 3}};
    for (ggml_type t : k_quant_types) {
        if (!implemented(t)) continue;
        const int64_t bs = ggml_blck_size(t);
        for (const kmn & s : sizes) add_quant_mul_mat(cl, t, s.blocks * bs, s.N, s.M, 1, 1, 1, 1, layout::cont, layout::cont);
        // a long K (many blocks) on a wider block of the output
        add_quant_mul_mat(cl, t, bs == 32 ? 1024 : 2048, 37, 19, 1, 1, 1, 1, layout::cont, layout::cont);
        // broadcast of the weights over the activations' batch dims (both dims, GQA-like)
        add_quant_mul_mat(cl, t, 2 * bs, 9, 5, 1, 1, 3, 2, layout::cont, layout::cont);
        add_quant_mul_mat(cl, t, 2 * bs, 9, 5, 2, 3, 4, 3, layout::cont, layout::cont);
        add_quant_mul_mat(cl, t, bs, 9, 1, 2, 2, 4, 4, layout::cont, layout::cont);
        // strided operands: permuted weights (rows stay packed: a block cannot be split), padded
        // and permuted activations
        add_quant_mul_mat(cl, t, 2 * bs, 9, 5, 2, 1, 4, 1, layout::perm12, layout::cont);
        add_quant_mul_mat(cl, t, 3 * bs, 9, 5, 1, 1, 3, 1, layout::cont, layout::pad);
        add_quant_mul_mat(cl, t, 2 * bs, 9, 5, 2, 1, 2, 1, layout::perm12, layout::perm12);
    }
}

// ---------------------------------------------------------------------------------------------
// get_rows and cpy

void get_rows_quant_cases(case_list & cl) {
    struct gr { int64_t blocks; ne4 rows; ne4 idx; };
    const gr shapes[] = {
        {1, {0, 10, 1, 1}, {5, 1, 1, 1}}, {2, {0, 17, 2, 3}, {4, 2, 3, 1}}, {3, {0, 7, 1, 1}, {1, 1, 1, 1}},
    };
    for (ggml_type t : k_quant_types) {
        if (t == GGML_TYPE_Q8_0 || !implemented(t)) continue; // Q8_0: backend-ops-cases-matmul-copy.cpp
        for (const gr & g : shapes) {
            const ne4         na   = {g.blocks * ggml_blck_size(t), g.rows[1], g.rows[2], g.rows[3]};
            const std::string desc = std::string("get_rows a ") + tn(t) + " " + sh(na) + " idx " + sh(g.idx);
            const int64_t     R    = na[1];
            cl.add(
                desc,
                [=](builder & b) {
                    ggml_tensor * a = b.src(t, na, layout::cont, fill::range(-3, 3));
                    ggml_tensor * i = b.src(GGML_TYPE_I32, g.idx, layout::cont, fill::ints(0, R - 1));
                    b.out           = ggml_get_rows(b.ctx, a, i);
                },
                [](const std::vector<dense> & s, dense *) { return ref::get_rows(s[0], s[1]); }, tolerance{});
        }
    }
}

void add_quant_cpy(case_list & cl, ggml_type ta, ggml_type tb, ne4 na, ne4 nd, layout la) {
    const std::string desc = std::string("cpy ") + tn(ta) + " " + sh(na) + " " + layout_name(la) + " -> " + tn(tb) + " " + sh(nd);
    const bool        to_q = ggml_blck_size(tb) > 1;
    cl.add(
        desc,
        [=](builder & b) {
            ggml_tensor * a   = b.src(ta, na, la, fill::range(-2, 2));
            ggml_tensor * dst = b.in(tb, nd, layout::cont, fill::range(-1, 1));
            b.out             = ggml_cpy(b.ctx, a, dst);
        },
        [=](const std::vector<dense> & s, dense *) {
            const int64_t ne[4] = {nd[0], nd[1], nd[2], nd[3]};
            dense         d     = ref::reshape(s[0], ne);
            if (tb == GGML_TYPE_F16) for (double & v : d.v) v = ref::round_f16(v);
            if (to_q) {
                // each destination row quantized by the reference quantizer and decoded: the copy
                // kernel must store exactly those blocks, in order
                std::vector<float>   row((size_t) nd[0]);
                std::vector<uint8_t> q(ggml_row_size(tb, nd[0]));
                for (int64_t r = 0; r < d.nelements() / nd[0]; ++r) {
                    for (int64_t i = 0; i < nd[0]; ++i) row[i] = (float) d.v[r * nd[0] + i];
                    ggml_quantize_chunk(tb, row.data(), q.data(), 0, 1, nd[0], nullptr);
                    ggml_get_type_traits(tb)->to_float(q.data(), row.data(), nd[0]);
                    for (int64_t i = 0; i < nd[0]; ++i) d.v[r * nd[0] + i] = row[i];
                }
            }
            return d;
        },
        tolerance{});
}

void cpy_quant_cases(case_list & cl) {
    for (ggml_type t : k_quant_types) {
        if (t == GGML_TYPE_Q8_0 || !implemented(t)) continue; // Q8_0: backend-ops-cases-matmul-copy.cpp
        const int64_t bs = ggml_blck_size(t);
        for (ggml_type f : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            add_quant_cpy(cl, t, f, {2 * bs, 3, 2, 1}, {2 * bs, 3, 2, 1}, layout::cont);
            add_quant_cpy(cl, t, f, {bs, 4, 1, 1}, {2 * bs, 2, 1, 1}, layout::cont); // reshaped destination
            add_quant_cpy(cl, f, t, {2 * bs, 3, 2, 1}, {2 * bs, 3, 2, 1}, layout::cont);
            add_quant_cpy(cl, f, t, {bs, 5, 2, 1}, {bs, 5, 2, 1}, layout::perm12); // strided source
        }
    }
}

} // namespace

// Real model sizes (dit-workloads.md: K up to 16384, N 3072/6144) with few activation rows, for
// backends that run them in one process (test-vulkan): not in all_cases(), so the CPU suite's
// many runs per case do not pay for them.
std::vector<op_case> quant_mul_mat_large_cases() {
    case_list cl;
    add_quant_mul_mat(cl, GGML_TYPE_Q8_0, 16384, 3072, 2, 1, 1, 1, 1, layout::cont, layout::cont);
    add_quant_mul_mat(cl, GGML_TYPE_Q4_K, 4096, 6144, 8, 1, 1, 1, 1, layout::cont, layout::cont);
    // K = 16384 for Q4_K too, on fewer weight rows: the reference K-quant quantizer that writes
    // the inputs is slow (a scale search per sub-block), and the row length is what is under test
    add_quant_mul_mat(cl, GGML_TYPE_Q4_K, 16384, 512, 3, 1, 1, 1, 1, layout::cont, layout::cont);
    return cl.v;
}

void add_quant_cases(case_list & cl) {
    mul_mat_cases(cl);
    get_rows_quant_cases(cl);
    cpy_quant_cases(cl);
}

} // namespace bops
