// Cases: rope, flash_attn_ext, concat/pad/repeat/arange/timestep_embedding, custom ops, and
// chains where an op's output is consumed through a view.
//
// Error bounds:
//   rope: F32 abs 1e-4 (angles up to ~100 rad are formed in float), F16 abs 2e-3 + rel 1e-3.
//   flash_attn_ext: GGML_PREC_F32 abs 1e-6 + rel 1e-6 (F32 products; measured worst 1.75e-7);
//     GGML_PREC_DEFAULT abs 5e-3 for every K/V type (Q, K, V and the probabilities may be rounded
//     to bf16: measured worst 2.3e-3).
//   concat/pad/repeat: exact. arange: rel 1e-6. timestep_embedding: abs 1e-3 (t up to 1000).

#include "backend-ops-cases.h"

#include <cmath>
#include <limits>

namespace bops {

static const double k_ninf = -std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------------------------------------
// rope

struct rope_cfg {
    ggml_type type;
    int64_t   hd, n_head, n_tok, n_seq;
    int       n_dims, mode;
    bool      ff;
    bool      yarn;
    float     freq_base   = 10000.0f;
    float     attn_factor = 1.0f;
    bool      inplace     = false;
    bool      plain_api   = false; // ggml_rope instead of ggml_rope_ext
    layout    l           = layout::cont;
};

static void add_rope(case_list & cl, const rope_cfg & c) {
    const ne4         na   = {c.hd, c.n_head, c.n_tok, c.n_seq};
    const std::string desc = std::string(c.plain_api ? "rope" : c.inplace ? "rope_ext_inplace" : "rope_ext") + " " +
                             tn(c.type) + " " + sh(na) + " " + layout_name(c.l) + " n_dims " + std::to_string(c.n_dims) +
                             (c.mode == GGML_ROPE_TYPE_NEOX ? " neox" : " normal") + (c.ff ? " ff" : "") +
                             (c.yarn ? " yarn" : "") + " base " + std::to_string((int) c.freq_base) + " attn " +
                             std::to_string(c.attn_factor);
    const int   n_ctx_orig = c.yarn ? 4096 : 0;
    const float freq_scale = c.yarn ? 0.25f : 1.0f, ext_factor = c.yarn ? 1.0f : 0.0f;
    const float beta_fast = 32.0f, beta_slow = 1.0f;
    tolerance   tol;
    tol.abs = c.type == GGML_TYPE_F32 ? 1e-4 : 2e-3;
    tol.rel = c.type == GGML_TYPE_F32 ? 0.0 : 1e-3;
    cl.add(
        desc,
        [=](builder & b) {
            ggml_tensor * a   = b.src(c.type, na, c.l);
            ggml_tensor * pos = b.src(GGML_TYPE_I32, {c.n_tok, 1, 1, 1}, layout::cont, fill::ints(0, 100));
            ggml_tensor * ff  = c.ff ? b.src(GGML_TYPE_F32, {c.n_dims / 2, 1, 1, 1}, layout::cont, fill::range(0.5, 2.0)) : nullptr;
            if (c.plain_api) {
                b.out = ggml_rope(b.ctx, a, pos, c.n_dims, c.mode);
            } else if (c.inplace) {
                b.out = ggml_rope_ext_inplace(b.ctx, a, pos, ff, c.n_dims, c.mode, n_ctx_orig, c.freq_base, freq_scale,
                                              ext_factor, c.attn_factor, beta_fast, beta_slow);
            } else {
                b.out = ggml_rope_ext(b.ctx, a, pos, ff, c.n_dims, c.mode, n_ctx_orig, c.freq_base, freq_scale,
                                      ext_factor, c.attn_factor, beta_fast, beta_slow);
            }
        },
        [=](const std::vector<dense> & s, dense *) {
            std::vector<int32_t> pos;
            for (double p : s[1].v) pos.push_back((int32_t) p);
            return ref::rope(s[0], pos, c.ff ? &s[2] : nullptr, c.n_dims, c.mode, n_ctx_orig, c.freq_base, freq_scale,
                             ext_factor, c.attn_factor, beta_fast, beta_slow);
        },
        tol);
}

void add_rope_cases(case_list & cl) {
    const std::pair<int64_t, int> dims[] = {{64, 64}, {128, 128}, {64, 32}, {8, 4}, {10, 6}};
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (int mode : {GGML_ROPE_TYPE_NORMAL, GGML_ROPE_TYPE_NEOX})
    for (auto d : dims)
    for (int ff = 0; ff < 2; ff++)
    for (int yarn = 0; yarn < 2; yarn++) {
        rope_cfg c{t, d.first, 3, 5, d.first == 64 ? 2 : 1, d.second, mode, ff != 0, yarn != 0};
        add_rope(cl, c);
    }
    for (int mode : {GGML_ROPE_TYPE_NORMAL, GGML_ROPE_TYPE_NEOX}) {
        rope_cfg c{GGML_TYPE_F32, 64, 4, 7, 1, 64, mode, false, false};
        c.plain_api = true;
        add_rope(cl, c);
        c.plain_api = false; c.inplace = true;
        add_rope(cl, c);
        c.inplace = false; c.freq_base = 500000.0f; c.attn_factor = 0.75f;
        add_rope(cl, c);
        c.freq_base = 10000.0f; c.attn_factor = 1.0f;
        c.l = layout::pad; // a view into a fused projection: padded rows
        add_rope(cl, c);
        c.l = layout::perm12;
        add_rope(cl, c);
        c.l = layout::pad; c.inplace = true; c.yarn = true; c.ff = true;
        add_rope(cl, c);
        rope_cfg big{GGML_TYPE_F32, 128, 8, 64, 1, 128, mode, false, false};
        add_rope(cl, big);
    }
}

// ---------------------------------------------------------------------------------------------
// flash_attn_ext

struct fa_cfg {
    int64_t   D, Dv, n_q, n_kv, H, Hkv, S;
    ggml_type kv = GGML_TYPE_F16;
    int       mask_kind = 1; // 0 none, 1 random -inf, 2 some fully masked queries, 3 causal
    int64_t   mh = 1, ms = 1, mask_pad = 0;
    float     max_bias = 0.0f, softcap = 0.0f;
    layout    ql = layout::cont, kvl = layout::cont;
    float     scale = 0.0f; // 0: 1/sqrt(D)
    ggml_prec prec  = GGML_PREC_DEFAULT; // GGML_PREC_F32: ggml_flash_attn_ext_set_prec, F32 arithmetic
};

static fill mask_fill(int kind) {
    return fill::with([kind](std::mt19937 & r, const int64_t * i) {
        std::uniform_real_distribution<double> u(-1, 1);
        switch (kind) {
            case 2: if (i[1] % 3 == 1) return k_ninf; break;
            case 3: if (i[0] > i[1] + 2) return k_ninf; break;
            default: break;
        }
        if (kind != 3 && r() % 5 == 0) return k_ninf;
        return u(r);
    });
}

static constexpr double k_fa_f32_abs = 1e-6, k_fa_f32_rel = 1e-6;

static void add_fa(case_list & cl, const fa_cfg & c) {
    const ne4 nq = {c.D, c.n_q, c.H, c.S}, nk = {c.D, c.n_kv, c.Hkv, c.S}, nv = {c.Dv, c.n_kv, c.Hkv, c.S};
    const ne4 nm = {c.n_kv, c.n_q + c.mask_pad, c.mh, c.ms};
    const float scale = c.scale != 0.0f ? c.scale : 1.0f / std::sqrt((float) c.D);
    static const char * mk[] = {"nomask", "mask", "mask_fullrows", "mask_causal"};
    const std::string desc = std::string("flash_attn_ext q ") + sh(nq) + " " + layout_name(c.ql) + " k " + tn(c.kv) +
                             " " + sh(nk) + " v " + sh(nv) + " " + layout_name(c.kvl) + " " + mk[c.mask_kind] +
                             (c.mask_kind ? " " + sh(nm) : "") + " max_bias " + std::to_string(c.max_bias) +
                             " softcap " + std::to_string(c.softcap) + (c.prec == GGML_PREC_F32 ? " prec f32" : "");
    // F32 precision requested: products of the stored values are exact in F32 and sums are F32,
    // so the bound is the F32 one whatever the K/V type (measured worst 1.75e-7). The default
    // precision allows bf16 products (Q, K, V and P rounded to bf16) for every K/V type, F32 too.
    const bool precise = c.prec == GGML_PREC_F32;
    tolerance  tol;
    tol.abs = precise ? k_fa_f32_abs : 5e-3;
    tol.rel = precise ? k_fa_f32_rel : 0.0;
    cl.add(
        desc,
        [=](builder & b) {
            ggml_tensor * q = b.src(GGML_TYPE_F32, nq, c.ql);
            ggml_tensor * k = b.src(c.kv, nk, c.kvl);
            ggml_tensor * v = b.src(c.kv, nv, c.kvl);
            ggml_tensor * m = c.mask_kind ? b.src(GGML_TYPE_F16, nm, layout::cont, mask_fill(c.mask_kind)) : nullptr;
            b.out           = ggml_flash_attn_ext(b.ctx, q, k, v, m, scale, c.max_bias, c.softcap);
            if (c.prec != GGML_PREC_DEFAULT) ggml_flash_attn_ext_set_prec(b.out, c.prec);
        },
        [=](const std::vector<dense> & s, dense *) {
            return ref::flash_attn_ext(s[0], s[1], s[2], c.mask_kind ? &s[3] : nullptr, scale, c.max_bias, c.softcap);
        },
        tol);
}

void add_attention_cases(case_list & cl) {
    // every configuration with the default precision and with GGML_PREC_F32 requested
    for (ggml_prec prec : {GGML_PREC_DEFAULT, GGML_PREC_F32})
    for (ggml_type kv : {GGML_TYPE_F16, GGML_TYPE_F32, GGML_TYPE_BF16}) {
        auto add_fa = [&](case_list & l, fa_cfg c) { c.prec = prec; bops::add_fa(l, c); };
        for (int64_t D : {64, 128, 40, 33}) {
            fa_cfg c{D, D, 7, 13, 4, 4, 1};
            c.kv = kv;
            add_fa(cl, c);
        }
        fa_cfg c{64, 64, 1, 64, 8, 2, 1}; // decode-like, GQA 4:1
        c.kv = kv;
        add_fa(cl, c);
        c = fa_cfg{64, 64, 5, 33, 6, 1, 2}; // MQA, two sequences, per-seq mask
        c.kv = kv; c.ms = 2;
        add_fa(cl, c);
        c = fa_cfg{64, 64, 9, 20, 4, 2, 1};
        c.kv = kv; c.mask_kind = 2; // fully masked queries -> zeros
        add_fa(cl, c);
        c.mask_kind = 3; c.mask_pad = 5; // causal, extra mask rows ignored
        add_fa(cl, c);
        c.mask_kind = 0; c.mask_pad = 0;
        add_fa(cl, c);
        c = fa_cfg{64, 64, 6, 17, 4, 4, 2};
        c.kv = kv; c.mh = 4; c.ms = 2; // mask per head and per sequence
        add_fa(cl, c);
        c.mh = 2; c.ms = 1; c.max_bias = 8.0f; // ALiBi, mask broadcast over heads by modulo
        add_fa(cl, c);
        c = fa_cfg{64, 64, 6, 17, 5, 5, 1};
        c.kv = kv; c.max_bias = 4.0f; // ALiBi with a non power-of-two head count
        add_fa(cl, c);
        c = fa_cfg{32, 32, 6, 17, 2, 2, 1};
        c.kv = kv; c.softcap = 1.5f; c.scale = 0.5f;
        add_fa(cl, c);
        c = fa_cfg{64, 32, 6, 17, 2, 2, 1}; // Dv != D
        c.kv = kv;
        add_fa(cl, c);
        c = fa_cfg{64, 64, 6, 17, 4, 2, 1}; // q and k/v as permuted views ([D, H, T] storage)
        c.kv = kv; c.ql = layout::perm12; c.kvl = layout::perm12;
        add_fa(cl, c);
        c = fa_cfg{64, 64, 3, 1, 2, 2, 1}; // a single kv position
        c.kv = kv;
        add_fa(cl, c);
    }
    for (ggml_prec prec : {GGML_PREC_DEFAULT, GGML_PREC_F32}) {
        fa_cfg big{128, 128, 64, 256, 4, 4, 1};
        big.prec = prec;
        add_fa(cl, big);
        big.mask_kind = 0; big.D = 64; big.Dv = 64; big.n_q = 256;
        add_fa(cl, big);
    }
    // The AVX2 kernel's edges (ops-flash-attn-avx2.cpp: query tiles of 8, 16 or 24, kv blocks of
    // 128 rows, K rows widened or read in place, value dims 4 at a time): head sizes that are not
    // multiples of 8 or 16, Dv not a multiple of 4 (F32 V then goes through the widened copy), kv
    // counts around the block size, one query, fully masked query rows, softcap with a causal mask
    // across several blocks; then the real size (D 128, n_kv past 4096) with a few queries so it
    // stays fast. F32 and F16 K/V (BF16 shares the F16 path after the widening).
    for (ggml_prec prec : {GGML_PREC_DEFAULT, GGML_PREC_F32}) {
        for (ggml_type kv : {GGML_TYPE_F16, GGML_TYPE_F32}) {
            auto add = [&](fa_cfg c) {
                c.kv   = kv;
                c.prec = prec;
                add_fa(cl, c);
            };
            for (int64_t D : {72, 80, 256}) add(fa_cfg{D, D, 25, 131, 2, 2, 1});
            fa_cfg c{40, 40, 1, 300, 4, 2, 1}; // one query, GQA 2:1
            add(c);
            c           = fa_cfg{64, 36, 17, 129, 3, 1, 1}; // Dv 36, MQA, two query tiles
            c.mask_kind = 0;
            add(c);
            c           = fa_cfg{64, 42, 49, 257, 2, 2, 1}; // Dv 42, rows with no visible position
            c.mask_kind = 2;
            add(c);
            c           = fa_cfg{128, 128, 9, 200, 2, 2, 1}; // softcap, causal mask over two blocks
            c.mask_kind = 3;
            c.softcap   = 20.0f;
            add(c);
            for (int mask : {0, 1}) {
                c           = fa_cfg{128, 128, 3, 4100, 4, 2, 1}; // the real size
                c.mask_kind = mask;
                add(c);
            }
        }
    }
    // a short last query tile grouped with full tiles over shared K/V blocks, GQA 4:1 (the AVX-512
    // kernel converts each K/V block once per group of tiles), with and without a mask, F16 and BF16
    for (ggml_prec prec : {GGML_PREC_DEFAULT, GGML_PREC_F32}) {
        for (ggml_type kv : {GGML_TYPE_F16, GGML_TYPE_BF16}) {
            for (int mask : {0, 1}) {
                fa_cfg g{128, 128, 100, 200, 12, 3, 1};
                g.kv        = kv;
                g.mask_kind = mask;
                g.prec      = prec;
                add_fa(cl, g);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// concat / pad / repeat / arange / timestep_embedding

static void custom_scale_add(ggml_tensor * dst, int ith, int nth, void *) {
    // dst = 2*src0 + src1, rows split over threads
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const int64_t       n = ggml_nrows(dst);
    for (int64_t r = ith; r < n; r += nth) {
        const float * pa = (const float *) ((const char *) a->data + r * a->nb[1]);
        const float * pb = (const float *) ((const char *) b->data + r * b->nb[1]);
        float *       pd = (float *) ((char *) dst->data + r * dst->nb[1]);
        for (int64_t i = 0; i < dst->ne[0]; i++) pd[i] = 2.0f * pa[i] + pb[i];
    }
}

static void custom_accumulate(ggml_tensor * dst, int ith, int nth, void * ud) {
    // dst (aliasing src0) += k * src1
    const float         k = *(const float *) ud;
    const ggml_tensor * b = dst->src[1];
    const int64_t       n = ggml_nrows(dst);
    for (int64_t r = ith; r < n; r += nth) {
        const float * pb = (const float *) ((const char *) b->data + r * b->nb[1]);
        float *       pd = (float *) ((char *) dst->data + r * dst->nb[1]);
        for (int64_t i = 0; i < dst->ne[0]; i++) pd[i] += k * pb[i];
    }
}

void add_layout_cases(case_list & cl) {
    const ggml_type F32 = GGML_TYPE_F32, F16 = GGML_TYPE_F16;
    for (ggml_type t : {F32, F16, GGML_TYPE_BF16, GGML_TYPE_I32})
    for (int dim = 0; dim < 4; dim++)
    for (int lay = 0; lay < 2; lay++) {
        const ne4 na = {7, 3, 2, 2};
        ne4       nb = na;
        nb[dim]      = 4;
        const layout la = lay ? layout::perm12 : layout::cont, lb = lay ? layout::trans : layout::cont;
        cl.add(std::string("concat ") + tn(t) + " dim " + std::to_string(dim) + " a " + sh(na) + " " + layout_name(la) +
                   " b " + sh(nb) + " " + layout_name(lb),
               [=](builder & b) {
                   fill f = t == GGML_TYPE_I32 ? fill::ints(-50, 50) : fill{};
                   ggml_tensor * x = b.src(t, na, la, f); // separate statements: operand order matters
                   ggml_tensor * y = b.src(t, nb, lb, f);
                   b.out           = ggml_concat(b.ctx, x, y, dim);
               },
               [=](const std::vector<dense> & s, dense *) { return ref::concat(s[0], s[1], dim); }, tolerance{});
    }
    // pad / pad_ext
    for (ggml_type t : {F32, F16})
    for (layout l : {layout::cont, layout::perm12, layout::trans}) {
        const ne4 na = {7, 3, 2, 2};
        cl.add(std::string("pad ") + tn(t) + " " + sh(na) + " " + layout_name(l) + " 1 2 0 1",
               [=](builder & b) { b.out = ggml_pad(b.ctx, b.src(t, na, l), 1, 2, 0, 1); },
               [](const std::vector<dense> & s, dense *) { const int lp[4] = {0, 0, 0, 0}, rp[4] = {1, 2, 0, 1}; return ref::pad_ext(s[0], lp, rp); },
               tolerance{});
        cl.add(std::string("pad_ext ") + tn(t) + " " + sh(na) + " " + layout_name(l) + " 2 1 1 0 0 2 1 1",
               [=](builder & b) { b.out = ggml_pad_ext(b.ctx, b.src(t, na, l), 2, 1, 1, 0, 0, 2, 1, 1); },
               [](const std::vector<dense> & s, dense *) { const int lp[4] = {2, 1, 0, 1}, rp[4] = {1, 0, 2, 1}; return ref::pad_ext(s[0], lp, rp); },
               tolerance{});
    }
    // repeat / repeat_4d
    struct rp { ne4 a, to; };
    const rp reps[] = {{{3, 1, 2, 1}, {6, 4, 4, 2}}, {{1, 1, 1, 1}, {7, 5, 1, 1}}, {{7, 3, 1, 1}, {7, 3, 2, 2}},
                       {{5, 3, 2, 1}, {5, 3, 2, 1}}, {{33, 1, 3, 1}, {66, 2, 3, 3}}};
    for (ggml_type t : {F32, F16, GGML_TYPE_I32})
    for (const rp & r : reps)
    for (int api = 0; api < 2; api++) {
        cl.add(std::string(api ? "repeat_4d " : "repeat ") + tn(t) + " " + sh(r.a) + " -> " + sh(r.to),
               [=](builder & b) {
                   ggml_tensor * a = b.src(t, r.a, layout::cont, t == GGML_TYPE_I32 ? fill::ints(-9, 9) : fill{});
                   b.out = api ? ggml_repeat_4d(b.ctx, a, r.to[0], r.to[1], r.to[2], r.to[3])
                               : ggml_repeat(b.ctx, a, b.in(t, r.to));
               },
               [=](const std::vector<dense> & s, dense *) { const int64_t ne[4] = {r.to[0], r.to[1], r.to[2], r.to[3]}; return ref::repeat(s[0], ne); },
               tolerance{});
    }
    cl.add("repeat f32 3x1x2x1 perm12 -> 6x4x4x2",
           [](builder & b) { b.out = ggml_repeat_4d(b.ctx, b.src(F32, {3, 2, 2, 1}, layout::perm12), 6, 4, 4, 2); },
           [](const std::vector<dense> & s, dense *) { const int64_t ne[4] = {6, 4, 4, 2}; return ref::repeat(s[0], ne); }, tolerance{});
    // arange
    struct ar { float start, stop, step; };
    for (const ar & a : {ar{0, 10, 1}, ar{-3.5f, 7, 0.75f}, ar{0, 1, 0.1f}, ar{5, 6, 2}}) {
        tolerance t;
        t.rel = 1e-6; t.abs = 1e-6;
        cl.add("arange " + std::to_string(a.start) + " " + std::to_string(a.stop) + " " + std::to_string(a.step),
               [=](builder & b) { b.out = ggml_arange(b.ctx, a.start, a.stop, a.step); },
               [=](const std::vector<dense> &, dense *) { return ref::arange(a.start, a.stop, a.step); }, t);
    }
    // timestep_embedding
    for (int dim : {64, 7, 256, 2})
    for (int max_period : {10000, 100}) {
        tolerance t;
        t.abs = 1e-3;
        cl.add("timestep_embedding dim " + std::to_string(dim) + " max_period " + std::to_string(max_period),
               [=](builder & b) { b.out = ggml_timestep_embedding(b.ctx, b.src(F32, {3, 1, 1, 1}, layout::cont, fill::range(0, 1000)), dim, max_period); },
               [=](const std::vector<dense> & s, dense *) { return ref::timestep_embedding(s[0], dim, max_period); }, t);
    }
    // custom ops (CPU only: other backends report them unsupported)
    for (ne4 s : {ne4{7, 3, 1, 1}, ne4{33, 17, 2, 1}}) {
        cl.add("custom_4d 2a+b f32 " + sh(s),
               [=](builder & b) {
                   ggml_tensor * args[2] = {b.src(F32, s), b.src(F32, s)};
                   b.out = ggml_custom_4d(b.ctx, F32, s[0], s[1], s[2], s[3], args, 2, custom_scale_add, GGML_N_TASKS_MAX, nullptr);
               },
               [](const std::vector<dense> & x, dense *) { return ref::binary(ref::binop::add, ref::scale(x[0], 2.0, 0.0), x[1]); },
               tolerance{1e-6, 1e-6, 0, -1});
        static float k = 3.0f;
        cl.add("custom_inplace a+=3b f32 " + sh(s),
               [=](builder & b) {
                   ggml_tensor * a       = b.src(F32, s);
                   ggml_tensor * args[1] = {b.src(F32, s)};
                   b.out = ggml_custom_inplace(b.ctx, a, args, 1, custom_accumulate, 2, &k);
               },
               [](const std::vector<dense> & x, dense *) { return ref::binary(ref::binop::add, x[0], ref::scale(x[1], 3.0, 0.0)); },
               tolerance{1e-6, 1e-6, 0, -1});
    }

    // ---- an op's output consumed through views ----
    cl.add("view_2d of add output f32 9x6",
           [](builder & b) {
               ggml_tensor * x = b.src(F32, {9, 6, 1, 1});
               ggml_tensor * s = ggml_add(b.ctx, x, b.src(F32, {9, 6, 1, 1}));
               b.out           = ggml_view_2d(b.ctx, s, 5, 4, s->nb[1], 2 * s->nb[0] + s->nb[1]);
           },
           [](const std::vector<dense> & x, dense *) {
               const int64_t ne[4] = {5, 4, 1, 1};
               const size_t  nb[4] = {4, 36, 144, 144};
               return ref::view(ref::binary(ref::binop::add, x[0], x[1]), 4, ne, nb, 8 + 36);
           },
           tolerance{0, 1e-6, 0, -1});
    cl.add("cont of transposed silu output f32 7x5x3",
           [](builder & b) { b.out = ggml_cont(b.ctx, ggml_transpose(b.ctx, ggml_silu(b.ctx, b.src(F32, {7, 5, 3, 1}, layout::cont, fill::range(-4, 4))))); },
           [](const std::vector<dense> & x, dense *) { return ref::permute(ref::unary(ref::unop::silu, x[0]), 1, 0, 2, 3); },
           tolerance{1e-6, 1e-5, 0, -1});
    cl.add("add of view_1d of mul output f32 11x4",
           [](builder & b) {
               ggml_tensor * x = b.src(F32, {11, 4, 1, 1});
               ggml_tensor * y = b.src(F32, {11, 4, 1, 1});
               ggml_tensor * m = ggml_mul(b.ctx, x, y);
               ggml_tensor * z = b.src(F32, {20, 1, 1, 1});
               b.out           = ggml_add(b.ctx, ggml_view_1d(b.ctx, m, 20, 3 * 4), z);
           },
           [](const std::vector<dense> & x, dense *) {
               const int64_t ne[4] = {20, 1, 1, 1};
               const size_t  nb[4] = {4, 80, 80, 80};
               return ref::binary(ref::binop::add, ref::view(ref::binary(ref::binop::mul, x[0], x[1]), 4, ne, nb, 12), x[2]);
           },
           tolerance{1e-6, 1e-6, 0, -1});
    // fused-qkv pattern: project, split the heads through strided views, rope one of them,
    // attend (output permuted), reshape to tokens
    for (ggml_type wt : {F32, F16}) {
        cl.add(std::string("qkv split rope attention chain w ") + tn(wt),
               [=](builder & b) {
                   const int64_t K = 48, D = 16, H = 2, T = 5;
                   ggml_tensor * w   = b.src(wt, {K, 3 * D * H, 1, 1}, layout::cont, fill::range(-0.25, 0.25));
                   ggml_tensor * x   = b.src(F32, {K, T, 1, 1});
                   ggml_tensor * pos = b.src(GGML_TYPE_I32, {T, 1, 1, 1}, layout::cont, fill::ints(0, 50));
                   ggml_tensor * qkv = ggml_mul_mat(b.ctx, w, x); // [3DH, T]
                   const size_t  es  = sizeof(float);
                   ggml_tensor * q = ggml_view_3d(b.ctx, qkv, D, H, T, D * es, qkv->nb[1], 0);
                   ggml_tensor * k = ggml_view_3d(b.ctx, qkv, D, H, T, D * es, qkv->nb[1], D * H * es);
                   ggml_tensor * v = ggml_view_3d(b.ctx, qkv, D, H, T, D * es, qkv->nb[1], 2 * D * H * es);
                   q = ggml_rope_ext(b.ctx, q, pos, nullptr, D, GGML_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
                   q = ggml_permute(b.ctx, q, 0, 2, 1, 3); // [D, T, H]
                   k = ggml_cast(b.ctx, ggml_permute(b.ctx, k, 0, 2, 1, 3), F16);
                   v = ggml_cast(b.ctx, ggml_permute(b.ctx, v, 0, 2, 1, 3), F16);
                   ggml_tensor * o = ggml_flash_attn_ext(b.ctx, q, k, v, nullptr, 0.25f, 0.0f, 0.0f); // [D, H, T]
                   b.out = ggml_reshape_2d(b.ctx, o, D * H, T);
               },
               [=](const std::vector<dense> & s, dense *) {
                   const int64_t D = 16, H = 2, T = 5;
                   const dense qkv = ref::mul_mat(s[0], s[1]);
                   auto split = [&](int part) {
                       const int64_t ne[4] = {D, H, T, 1};
                       const size_t  nb[4] = {4, D * 4, (size_t) qkv.ne[0] * 4, (size_t) qkv.ne[0] * 4 * T};
                       return ref::view(qkv, 4, ne, nb, (size_t) part * D * H * 4);
                   };
                   std::vector<int32_t> pos;
                   for (double p : s[2].v) pos.push_back((int32_t) p);
                   dense q = ref::rope(split(0), pos, nullptr, D, GGML_ROPE_TYPE_NEOX, 0, 10000.0, 1.0, 0.0, 1.0, 0.0, 0.0);
                   q       = ref::permute(q, 0, 2, 1, 3);
                   dense k = ref::permute(split(1), 0, 2, 1, 3), v = ref::permute(split(2), 0, 2, 1, 3);
                   for (double & e : k.v) e = ref::round_f16(e);
                   for (double & e : v.v) e = ref::round_f16(e);
                   const int64_t ne[4] = {D * H, T, 1, 1};
                   return ref::reshape(ref::flash_attn_ext(q, k, v, nullptr, 0.25, 0.0, 0.0), ne);
               },
               tolerance{5e-3, 0, 0, -1});
    }
}

} // namespace bops
