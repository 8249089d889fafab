// Cases: mul_mat; cpy/cast/cont/dup, reshapes/views/permutes; get_rows.
//
// Error bounds:
//   mul_mat with F32/F16 weights: |err| <= 1e-5 * sum_k |a_k b_k| (F32 activations and F32
//     accumulation by design, so only summation-order rounding remains; weights are exact).
//   mul_mat with BF16 weights: 2^-8 * sum_k |a_k b_k|. The fast x86 paths (AVX512_BF16, AMX) round
//     the activations to BF16 (like upstream's CPU backend): each product then carries a relative
//     error of at most 2^-9 (BF16 round-to-nearest unit roundoff), so |err| <= 2^-9 * sum_k |a_k b_k|
//     plus F32 summation error; 2^-8 leaves a factor 2 of margin. (Relative to |result| this is the
//     familiar ~2^-9 * sqrt(K) random-walk error for random signs; the bound here needs no K factor
//     because it scales with sum |a_k b_k|.)
//   mul_mat with block-quantized weights (Q8_0 included): backend-ops-cases-quant.cpp (the CPU
//     backend quantizes the activations to the weight type's dot type, as upstream does).
//   copies/conversions: exact (F16/BF16 round-to-nearest-even, F32->I32 truncates); F32->Q8_0
//     within one quantisation step of the reference quantiser.
//   get_rows: exact.

#include "backend-ops-cases.h"

#include <cmath>

namespace bops {

// ---------------------------------------------------------------------------------------------
// mul_mat

struct mm_cfg {
    int64_t K, N, M;
    ne4     a_batch; // a.ne2, a.ne3 in [0], [1]
    ne4     b_batch;
};

static void add_mul_mat(case_list & cl, ggml_type ta, int64_t K, int64_t N, int64_t M, int64_t a2, int64_t a3,
                        int64_t b2, int64_t b3, layout la, layout lb, bool out_view = false) {
    const ne4         na = {K, N, a2, a3}, nb = {K, M, b2, b3};
    const std::string desc = std::string("mul_mat a ") + tn(ta) + " " + sh(na) + " " + layout_name(la) + " b f32 " +
                             sh(nb) + " " + layout_name(lb) + (out_view ? " out transposed view" : "");
    tolerance tol;
    tol.scale = ta == GGML_TYPE_BF16 ? 0x1p-8 : 1e-5; // see the top of the file
    tol.abs   = 1e-30;
    cl.add(
        desc,
        [=](builder & b) {
            ggml_tensor * a = b.src(ta, na, la);
            ggml_tensor * x = b.src(GGML_TYPE_F32, nb, lb);
            b.out           = ggml_mul_mat(b.ctx, a, x);
            if (out_view) b.out = ggml_transpose(b.ctx, b.out); // the op's output consumed by a view
        },
        [=](const std::vector<dense> & s, dense * scale) {
            dense r = ref::mul_mat(s[0], s[1], scale);
            if (out_view) {
                r      = ref::permute(r, 1, 0, 2, 3);
                *scale = ref::permute(*scale, 1, 0, 2, 3);
            }
            return r;
        },
        tol);
}

void add_matmul_cases(case_list & cl) {
    struct kmn { int64_t K, N, M; };
    const kmn sizes[] = {
        {1, 1, 1}, {7, 3, 1}, {8, 8, 8}, {33, 17, 1}, {33, 17, 5}, {65, 33, 9}, {37, 5, 1},
        {127, 3, 127}, {256, 64, 16}, {64, 65, 33}, {4096, 16, 4}, {96, 7, 2},
    };
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16})
    for (const kmn & s : sizes) {
        add_mul_mat(cl, t, s.K, s.N, s.M, 1, 1, 1, 1, layout::cont, layout::cont);
    }
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
        const int64_t K = 64;
        // broadcast of a over b's batch dims (block repeat), GQA-like, both dims
        add_mul_mat(cl, t, K, 9, 5, 1, 1, 3, 2, layout::cont, layout::cont);
        add_mul_mat(cl, t, K, 9, 5, 2, 1, 6, 1, layout::cont, layout::cont);
        add_mul_mat(cl, t, K, 9, 5, 2, 3, 4, 3, layout::cont, layout::cont);
        add_mul_mat(cl, t, K, 9, 5, 2, 1, 4, 2, layout::cont, layout::cont);
        add_mul_mat(cl, t, K, 9, 1, 2, 2, 4, 4, layout::cont, layout::cont);
        // non-contiguous operands: padded rows, permuted weight, transposed/permuted activations
        add_mul_mat(cl, t, 33, 9, 5, 2, 1, 2, 1, layout::pad, layout::cont);
        add_mul_mat(cl, t, 33, 9, 5, 2, 1, 4, 1, layout::perm12, layout::cont);
        // activations keep packed rows (upstream asserts nb10 == type size), other dims are free
        add_mul_mat(cl, t, 40, 9, 5, 1, 1, 1, 1, layout::cont, layout::pad);
        add_mul_mat(cl, t, 40, 9, 5, 2, 1, 2, 1, layout::cont, layout::perm12);
        add_mul_mat(cl, t, 40, 9, 5, 1, 1, 3, 1, layout::cont, layout::perm12);
        add_mul_mat(cl, t, 40, 9, 5, 2, 1, 2, 1, layout::perm12, layout::pad);
        add_mul_mat(cl, t, 47, 13, 1, 1, 1, 1, 1, layout::pad, layout::pad);
    }
    add_mul_mat(cl, GGML_TYPE_F32, 33, 9, 5, 1, 1, 2, 1, layout::cont, layout::cont, true);
    add_mul_mat(cl, GGML_TYPE_F16, 64, 16, 3, 1, 1, 1, 1, layout::cont, layout::cont, true);
    // bigger shapes (a few): DiT-like projection and a long K
    add_mul_mat(cl, GGML_TYPE_F32, 512, 256, 64, 1, 1, 1, 1, layout::cont, layout::cont);
    add_mul_mat(cl, GGML_TYPE_F16, 512, 256, 64, 1, 1, 1, 1, layout::cont, layout::cont);
    add_mul_mat(cl, GGML_TYPE_BF16, 1152, 128, 17, 1, 1, 1, 1, layout::cont, layout::cont);
    add_mul_mat(cl, GGML_TYPE_F32, 8192, 8, 3, 1, 1, 1, 1, layout::cont, layout::cont);

    // Edges of the fast x86 paths (ops-mul-mat-x86.cpp): micro-tiles of 14 rows (M) x 32 columns
    // (N), K blocks of 256 (F32) / 512 (BF16) elements, weight blocks of 512 columns, small-M
    // (M <= 4) dot-product path, M cut into chunks when N has few panels.
    const kmn fast[] = {
        {1, 15, 17},   {15, 17, 33},  {17, 33, 100}, {33, 100, 15}, {100, 1, 33},  {300, 40, 29},
        {600, 33, 5},  {1100, 70, 20}, {64, 600, 15}, {40, 32, 200}, {16, 1, 1},    {17, 100, 4},
        {513, 31, 14}, {257, 1, 1},   {33, 17, 2},
    };
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
        for (const kmn & s : fast) add_mul_mat(cl, t, s.K, s.N, s.M, 1, 1, 1, 1, layout::cont, layout::cont);
        // broadcast over dims 2/3 and non-contiguous operands, with several K blocks and M/N tails
        add_mul_mat(cl, t, 300, 37, 20, 2, 1, 4, 3, layout::cont, layout::cont);
        add_mul_mat(cl, t, 300, 37, 3, 1, 2, 2, 4, layout::cont, layout::cont);
        add_mul_mat(cl, t, 300, 37, 20, 2, 1, 2, 1, layout::cont, layout::perm12);
        add_mul_mat(cl, t, 300, 37, 20, 1, 1, 1, 1, layout::pad, layout::pad);
        add_mul_mat(cl, t, 300, 37, 2, 2, 1, 2, 1, layout::perm12, layout::perm12);
    }

    // Edges of the AVX2 level (ops-mul-mat-avx2.cpp; test-backend-ops runs these at every level the
    // CPU has): 6-row x 16-column micro-tiles, K blocks of 256, weight blocks of 24 panels (384
    // columns), sweeps of 144 activation rows, small-M dot products up to M = 24 (4 weight rows x
    // 3 activation rows), so M = 24 / 25 straddle the switch.
    const kmn avx2[] = {
        {1, 16, 25}, {24, 7, 25}, {300, 23, 24}, {257, 385, 31}, {512, 400, 145}, {770, 50, 37}, {9, 3, 23},
    };
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
        for (const kmn & s : avx2) add_mul_mat(cl, t, s.K, s.N, s.M, 1, 1, 1, 1, layout::cont, layout::cont);
        // broadcast and strided activations through the packed path (M > 24)
        add_mul_mat(cl, t, 260, 40, 27, 2, 1, 4, 3, layout::cont, layout::perm12);
    }
    // Edges of the AArch64 level (ops-mul-mat-neon.cpp): 8-row x 12-column micro-tiles, K blocks of
    // 256 with 4-element packing steps (K % 4 tails), weight blocks of 16 panels (192 columns),
    // sweeps of 128 activation rows, small-M dot products up to M = 16 (4 x 4 per pass), so
    // M = 16 / 17 straddle the switch.
    const kmn neon[] = {
        {3, 12, 17}, {13, 25, 16}, {259, 193, 137}, {30, 11, 9}, {514, 24, 40},
    };
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
        for (const kmn & s : neon) add_mul_mat(cl, t, s.K, s.N, s.M, 1, 1, 1, 1, layout::cont, layout::cont);
    }
    // Real sizes, a handful of rows: DiT-long K (many K blocks) and DiT-wide N (several weight
    // blocks per thread), each through the small-M dot products and the packed GEMM. Not both at
    // once: the harness holds every weight in double and fills it from a seeded generator, ~0.1 s
    // per million weights, so K x N stays at a few million.
    add_mul_mat(cl, GGML_TYPE_F32, 16448, 96, 2, 1, 1, 1, 1, layout::cont, layout::cont);
    add_mul_mat(cl, GGML_TYPE_BF16, 16400, 40, 26, 1, 1, 1, 1, layout::cont, layout::cont);
    add_mul_mat(cl, GGML_TYPE_F16, 16384, 33, 29, 1, 1, 1, 1, layout::cont, layout::cont);
    add_mul_mat(cl, GGML_TYPE_F16, 512, 6144, 3, 1, 1, 1, 1, layout::cont, layout::cont);
    add_mul_mat(cl, GGML_TYPE_F32, 257, 3072, 25, 1, 1, 1, 1, layout::cont, layout::cont);
    add_mul_mat(cl, GGML_TYPE_BF16, 640, 3072, 2, 1, 1, 1, 1, layout::cont, layout::cont);
    // DiT-wide N (6144) through the packed GEMMs too (M above every level's small-M switch)
    add_mul_mat(cl, GGML_TYPE_BF16, 96, 6144, 26, 1, 1, 1, 1, layout::cont, layout::cont);
}

// ---------------------------------------------------------------------------------------------
// copies

static double convert_to(ggml_type t, double x) {
    switch (t) {
        case GGML_TYPE_F16:  return ref::round_f16(x);
        case GGML_TYPE_BF16: return ref::round_bf16(x);
        case GGML_TYPE_F32:  return ref::round_f32(x);
        case GGML_TYPE_I32:  return std::trunc(x);
        default:             return x;
    }
}

static dense convert_dense(ggml_type t, dense d) {
    if (t == GGML_TYPE_Q8_0) {
        d.v = ref::q8_0_roundtrip(d.v); // rows are contiguous runs of ne0 (a multiple of 32)
        return d;
    }
    for (double & x : d.v) x = convert_to(t, x);
    return d;
}

static fill fill_for(ggml_type src, ggml_type dst) {
    if (src == GGML_TYPE_I32) return fill::ints(-1000, 1000);
    if (dst == GGML_TYPE_I32) return fill::range(-1000, 1000);
    return fill::range(-2, 2);
}

static tolerance copy_tol(ggml_type dst) {
    tolerance t;
    if (dst == GGML_TYPE_Q8_0) t.abs = 2.0 / 127.0 * 1.01; // one step for |x| <= 2
    return t;
}

static void add_cpy(case_list & cl, ggml_type ta, ggml_type tb, ne4 na, ne4 nd, layout la, layout ld) {
    const std::string desc = std::string("cpy ") + tn(ta) + " " + sh(na) + " " + layout_name(la) + " -> " + tn(tb) +
                             " " + sh(nd) + " " + layout_name(ld);
    cl.add(
        desc,
        [=](builder & b) {
            ggml_tensor * a   = b.src(ta, na, la, fill_for(ta, tb));
            ggml_tensor * dst = b.in(tb, nd, ld, fill::range(-9, 9));
            b.out             = ggml_cpy(b.ctx, a, dst);
        },
        [=](const std::vector<dense> & s, dense *) {
            const int64_t ne[4] = {nd[0], nd[1], nd[2], nd[3]};
            return convert_dense(tb, ref::reshape(s[0], ne));
        },
        copy_tol(tb));
}

static void copy_cases(case_list & cl) {
    const ggml_type F32 = GGML_TYPE_F32, F16 = GGML_TYPE_F16, BF16 = GGML_TYPE_BF16, I32 = GGML_TYPE_I32,
                    Q8 = GGML_TYPE_Q8_0;
    struct pair { ggml_type a, b; };
    const pair pairs[] = {
        {F32, F32}, {F32, F16}, {F32, BF16}, {F16, F32}, {BF16, F32}, {F16, F16}, {BF16, BF16},
        {F16, BF16}, {BF16, F16}, {F32, I32}, {I32, F32}, {I32, I32}, {F32, Q8}, {Q8, F32},
        {F16, Q8}, {BF16, Q8}, {Q8, F16}, {I32, F16}, {F16, I32},
    };
    for (const pair & p : pairs) {
        const bool q = p.a == Q8 || p.b == Q8;
        add_cpy(cl, p.a, p.b, {64, 3, 2, 1}, {64, 3, 2, 1}, layout::cont, layout::cont);
        add_cpy(cl, p.a, p.b, {32, 1, 1, 1}, {32, 1, 1, 1}, layout::cont, layout::cont);
        if (q) {
            add_cpy(cl, p.a, p.b, {96, 4, 3, 2}, {96, 4, 3, 2}, layout::cont, layout::cont);
            add_cpy(cl, p.a, p.b, {64, 6, 1, 1}, {128, 3, 1, 1}, layout::cont, layout::cont);
            if (p.a != Q8) add_cpy(cl, p.a, p.b, {64, 5, 2, 1}, {64, 5, 2, 1}, layout::perm12, layout::cont);
            continue;
        }
        add_cpy(cl, p.a, p.b, {7, 3, 1, 1}, {7, 3, 1, 1}, layout::cont, layout::cont);
        add_cpy(cl, p.a, p.b, {7, 5, 3, 2}, {7, 5, 3, 2}, layout::trans, layout::cont);
        add_cpy(cl, p.a, p.b, {7, 5, 3, 2}, {7, 5, 3, 2}, layout::perm, layout::pad);
        add_cpy(cl, p.a, p.b, {33, 5, 3, 1}, {33, 5, 3, 1}, layout::cont, layout::perm12);
        add_cpy(cl, p.a, p.b, {6, 4, 1, 1}, {8, 3, 1, 1}, layout::cont, layout::cont);
        add_cpy(cl, p.a, p.b, {6, 4, 5, 1}, {5, 4, 3, 2}, layout::perm12, layout::trans);
    }
    // rounding edge values for F32 -> F16 / BF16 (ties, overflow, subnormals, NaN)
    for (ggml_type t : {F16, BF16}) {
        cl.add(std::string("cpy f32 -> ") + tn(t) + " edge values",
               [=](builder & b) {
                   static const double vals[] = {1.0 / 3, 65504, 65519, 65520, 6e-8, 1e-8, -0.0, 1.0 + 1.0 / 256,
                                                 1.0 + 3.0 / 256, 1e30, -1e-40, 2049, 2051, 0.1, -7.25, 3.0e-5};
                   ggml_tensor * a = b.src(F32, {16, 1, 1, 1}, layout::cont, fill::with([](std::mt19937 &, const int64_t * i) { return vals[i[0]]; }));
                   b.out           = ggml_cpy(b.ctx, a, b.in(t, {16, 1, 1, 1}));
               },
               // AVX512-BF16 conversions may flush subnormals (facts sheet 9)
               [=](const std::vector<dense> & s, dense *) { return convert_dense(t, s[0]); },
               t == BF16 ? tolerance{1e-38, 0, 0, -1} : tolerance{});
    }
    // cast (src[1] is the result itself)
    const pair casts[] = {{F32, F16}, {F16, F32}, {F32, BF16}, {BF16, F32}, {F32, I32}, {F32, Q8}};
    for (const pair & p : casts) {
        for (layout l : {layout::cont, layout::perm12}) {
            const ne4 s = {64, 3, 2, 1};
            cl.add(std::string("cast ") + tn(p.a) + " -> " + tn(p.b) + " " + sh(s) + " " + layout_name(l),
                   [=](builder & b) { b.out = ggml_cast(b.ctx, b.src(p.a, s, l, fill_for(p.a, p.b)), p.b); },
                   [=](const std::vector<dense> & x, dense *) { return convert_dense(p.b, x[0]); }, copy_tol(p.b));
        }
    }
    // cont / cont_Nd / dup / dup_inplace
    for (ggml_type t : {F32, F16, BF16, I32}) {
        for (layout l : {layout::cont, layout::pad, layout::perm12, layout::trans, layout::perm}) {
            const ne4 s = {7, 5, 3, 2};
            cl.add(std::string("cont ") + tn(t) + " " + sh(s) + " " + layout_name(l),
                   [=](builder & b) { b.out = ggml_cont(b.ctx, b.src(t, s, l, fill_for(t, t))); },
                   [](const std::vector<dense> & x, dense *) { return x[0]; }, tolerance{});
            cl.add(std::string("dup ") + tn(t) + " " + sh(s) + " " + layout_name(l),
                   [=](builder & b) { b.out = ggml_dup(b.ctx, b.src(t, s, l, fill_for(t, t))); },
                   [](const std::vector<dense> & x, dense *) { return x[0]; }, tolerance{});
        }
    }
    cl.add("dup_inplace f32 7x5x3x2",
           [](builder & b) { b.out = ggml_dup_inplace(b.ctx, b.src(F32, {7, 5, 3, 2})); },
           [](const std::vector<dense> & x, dense *) { return x[0]; }, tolerance{});
    for (int nd = 1; nd <= 4; nd++) {
        for (ggml_type t : {F32, F16}) {
            const ne4 s = {6, 5, 4, 1};
            cl.add(std::string("cont_") + std::to_string(nd) + "d " + tn(t) + " " + sh(s) + " perm",
                   [=](builder & b) {
                       ggml_tensor * a = b.src(t, s, layout::perm);
                       switch (nd) {
                           case 1: b.out = ggml_cont_1d(b.ctx, a, 120); break;
                           case 2: b.out = ggml_cont_2d(b.ctx, a, 10, 12); break;
                           case 3: b.out = ggml_cont_3d(b.ctx, a, 4, 5, 6); break;
                           default: b.out = ggml_cont_4d(b.ctx, a, 3, 4, 5, 2); break;
                       }
                   },
                   [=](const std::vector<dense> & x, dense *) {
                       static const int64_t shapes[4][4] = {{120, 1, 1, 1}, {10, 12, 1, 1}, {4, 5, 6, 1}, {3, 4, 5, 2}};
                       return ref::reshape(x[0], shapes[nd - 1]);
                   },
                   tolerance{});
        }
    }
}

// ---------------------------------------------------------------------------------------------
// reshape / view / permute / transpose (no data movement: checked by reading the view, and by
// feeding it to a contiguous copy)

static void view_cases(case_list & cl) {
    const ggml_type F32 = GGML_TYPE_F32;
    for (int consume = 0; consume < 2; consume++) {
        const char * sfx = consume ? " cont" : " read";
        auto fin = [consume](builder & b, ggml_tensor * v) { b.out = consume ? ggml_cont(b.ctx, v) : v; };
        cl.add(std::string("reshape_1d 6x5x4x1") + sfx, [=](builder & b) { fin(b, ggml_reshape_1d(b.ctx, b.src(F32, {6, 5, 4, 1}), 120)); },
               [](const std::vector<dense> & x, dense *) { const int64_t n[4] = {120, 1, 1, 1}; return ref::reshape(x[0], n); }, tolerance{});
        cl.add(std::string("reshape_2d 6x5x4x1") + sfx, [=](builder & b) { fin(b, ggml_reshape_2d(b.ctx, b.src(F32, {6, 5, 4, 1}), 12, 10)); },
               [](const std::vector<dense> & x, dense *) { const int64_t n[4] = {12, 10, 1, 1}; return ref::reshape(x[0], n); }, tolerance{});
        cl.add(std::string("reshape_3d 6x5x4x1") + sfx, [=](builder & b) { fin(b, ggml_reshape_3d(b.ctx, b.src(F32, {6, 5, 4, 1}), 3, 8, 5)); },
               [](const std::vector<dense> & x, dense *) { const int64_t n[4] = {3, 8, 5, 1}; return ref::reshape(x[0], n); }, tolerance{});
        cl.add(std::string("reshape_4d 6x5x4x1") + sfx, [=](builder & b) { fin(b, ggml_reshape_4d(b.ctx, b.src(F32, {6, 5, 4, 1}), 2, 3, 4, 5)); },
               [](const std::vector<dense> & x, dense *) { const int64_t n[4] = {2, 3, 4, 5}; return ref::reshape(x[0], n); }, tolerance{});
        cl.add(std::string("reshape_like 6x5x4x1") + sfx,
               [=](builder & b) {
                   ggml_tensor * shape = b.in(F32, {10, 12, 1, 1});
                   fin(b, ggml_reshape(b.ctx, b.src(F32, {6, 5, 4, 1}), ggml_transpose(b.ctx, shape)));
               },
               [](const std::vector<dense> & x, dense *) { const int64_t n[4] = {12, 10, 1, 1}; return ref::reshape(x[0], n); }, tolerance{});
        const int perms[][4] = {{0, 1, 2, 3}, {1, 0, 2, 3}, {0, 2, 1, 3}, {2, 0, 1, 3}, {1, 2, 0, 3}, {3, 2, 1, 0}, {0, 3, 1, 2}};
        for (auto & p : perms) {
            const int p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3];
            cl.add(std::string("permute ") + std::to_string(p0) + std::to_string(p1) + std::to_string(p2) + std::to_string(p3) + " 2x3x4x5" + sfx,
                   [=](builder & b) { fin(b, ggml_permute(b.ctx, b.src(F32, {2, 3, 4, 5}), p0, p1, p2, p3)); },
                   [=](const std::vector<dense> & x, dense *) { return ref::permute(x[0], p0, p1, p2, p3); }, tolerance{});
        }
        cl.add(std::string("transpose 7x5x2x1") + sfx, [=](builder & b) { fin(b, ggml_transpose(b.ctx, b.src(F32, {7, 5, 2, 1}))); },
               [](const std::vector<dense> & x, dense *) { return ref::permute(x[0], 1, 0, 2, 3); }, tolerance{});
        // views with offsets; a view of a view (offsets accumulate)
        cl.add(std::string("view_1d 7x5x2x1 off 3") + sfx, [=](builder & b) { fin(b, ggml_view_1d(b.ctx, b.src(F32, {7, 5, 2, 1}), 20, 3 * 4)); },
               [](const std::vector<dense> & x, dense *) { const int64_t n[4] = {20, 1, 1, 1}; const size_t nb[4] = {4, 80, 80, 80}; return ref::view(x[0], 4, n, nb, 12); }, tolerance{});
        cl.add(std::string("view_2d 7x5x2x1") + sfx, [=](builder & b) { fin(b, ggml_view_2d(b.ctx, b.src(F32, {7, 5, 2, 1}), 4, 6, 7 * 4, 2 * 4)); },
               [](const std::vector<dense> & x, dense *) { const int64_t n[4] = {4, 6, 1, 1}; const size_t nb[4] = {4, 28, 168, 168}; return ref::view(x[0], 4, n, nb, 8); }, tolerance{});
        cl.add(std::string("view_3d 7x5x2x1") + sfx, [=](builder & b) { fin(b, ggml_view_3d(b.ctx, b.src(F32, {7, 5, 2, 1}), 3, 2, 2, 14 * 4, 35 * 4, 4)); },
               [](const std::vector<dense> & x, dense *) { const int64_t n[4] = {3, 2, 2, 1}; const size_t nb[4] = {4, 56, 140, 280}; return ref::view(x[0], 4, n, nb, 4); }, tolerance{});
        cl.add(std::string("view_4d 7x5x2x3") + sfx, [=](builder & b) { fin(b, ggml_view_4d(b.ctx, b.src(F32, {7, 5, 2, 3}), 2, 2, 2, 2, 7 * 4, 35 * 4, 70 * 4, 4 * 4)); },
               [](const std::vector<dense> & x, dense *) { const int64_t n[4] = {2, 2, 2, 2}; const size_t nb[4] = {4, 28, 140, 280}; return ref::view(x[0], 4, n, nb, 16); }, tolerance{});
        cl.add(std::string("view of view 9x8x1x1") + sfx,
               [=](builder & b) {
                   ggml_tensor * v1 = ggml_view_2d(b.ctx, b.src(F32, {9, 8, 1, 1}), 6, 6, 9 * 4, 9 * 4 + 4);
                   fin(b, ggml_view_2d(b.ctx, v1, 3, 4, 9 * 4, 9 * 4 + 8));
               },
               [](const std::vector<dense> & x, dense *) { const int64_t n[4] = {3, 4, 1, 1}; const size_t nb[4] = {4, 36, 144, 144}; return ref::view(x[0], 4, n, nb, 36 + 4 + 36 + 8); }, tolerance{});
    }
}

// ---------------------------------------------------------------------------------------------
// get_rows

static void get_rows_cases(case_list & cl) {
    struct gr { ne4 a; ne4 idx; };
    const gr shapes[] = {
        {{64, 10, 1, 1}, {5, 1, 1, 1}}, {{64, 17, 2, 3}, {4, 2, 3, 1}}, {{32, 7, 1, 1}, {1, 1, 1, 1}},
        {{128, 100, 1, 1}, {100, 1, 1, 1}}, {{96, 3, 4, 1}, {7, 4, 1, 1}},
    };
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_I32, GGML_TYPE_Q8_0})
    for (const gr & g : shapes) {
        const std::string desc = std::string("get_rows a ") + tn(t) + " " + sh(g.a) + " idx " + sh(g.idx);
        const int64_t     R = g.a[1];
        cl.add(
            desc,
            [=](builder & b) {
                ggml_tensor * a = b.src(t, g.a, layout::cont, t == GGML_TYPE_I32 ? fill::ints(-100000, 100000) : fill::range(-3, 3));
                ggml_tensor * i = b.src(GGML_TYPE_I32, g.idx, layout::cont, fill::ints(0, R - 1));
                b.out           = ggml_get_rows(b.ctx, a, i);
            },
            [](const std::vector<dense> & s, dense *) { return ref::get_rows(s[0], s[1]); }, tolerance{});
    }
    // padded-row source (a view of a bigger table)
    cl.add("get_rows a f32 33x9x1x1 pad idx 6",
           [](builder & b) {
               ggml_tensor * a = b.src(GGML_TYPE_F32, {33, 9, 1, 1}, layout::pad);
               b.out           = ggml_get_rows(b.ctx, a, b.src(GGML_TYPE_I32, {6, 1, 1, 1}, layout::cont, fill::ints(0, 8)));
           },
           [](const std::vector<dense> & s, dense *) { return ref::get_rows(s[0], s[1]); }, tolerance{});
}

void add_copy_cases(case_list & cl) {
    copy_cases(cl);
    view_cases(cl);
    get_rows_cases(cl);
}

} // namespace bops
