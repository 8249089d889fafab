// Cases: the image ops of diffusion clients — im2col, conv_1d/conv_2d (upstream's im2col +
// mul_mat compositions), conv_2d_direct, depthwise and transposed convolutions, pool_1d/2d,
// upscale/interpolate, group_norm, l2_norm, circular padding.
//
// Error bounds:
//   im2col, pools, nearest resize, circular pad: data movement or max: exact (F16 output: its rounding).
//   convolutions: |got - ref| <= scale * sum_k |w_k x_k| (the natural bound of a dot product):
//     1e-5 where every operand reaches the GEMM exactly (F32 im2col, direct kernels, F16
//     weights widened exactly), 2e-3 where upstream's composition rounds the im2col matrix to
//     F16 (conv_1d, conv_2d_dw and conv_2d with an F16 kernel: 2^-11 per product, plus F32 sums).
//   bilinear/bicubic: abs 1e-5 + rel 1e-5 (positions in float in both, weights in F32 vs double).
//   group_norm / l2_norm: abs 1e-5 + rel 1e-5.

#include "backend-ops-cases.h"

#include <cmath>

namespace bops {

namespace {

tolerance tol_scale(double scale) {
    tolerance t;
    t.scale = scale;
    t.abs   = 1e-30;
    return t;
}

tolerance tol_ar(double abs, double rel) {
    tolerance t;
    t.abs = abs;
    t.rel = rel;
    return t;
}

std::string pstr(const ref::conv2d_params & p) {
    return "s" + std::to_string(p.s0) + "," + std::to_string(p.s1) + " p" + std::to_string(p.p0) + "," +
           std::to_string(p.p1) + " d" + std::to_string(p.d0) + "," + std::to_string(p.d1);
}

const ref::conv2d_params k_params[] = {
    {1, 1, 1, 1, 1, 1}, // "same" 3x3
    {2, 2, 0, 0, 1, 1}, // strided
    {1, 1, 2, 2, 2, 2}, // dilated
    {2, 1, 1, 0, 1, 2}, // asymmetric
    {3, 2, 2, 1, 1, 1}, // stride larger than the kernel overlap
};

// ---------------------------------------------------------------------------------------------

void im2col_cases(case_list & cl) {
    for (ggml_type dt : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (const auto & p : k_params)
    for (layout l : {layout::cont, layout::perm12, layout::trans}) {
        const ne4 nk = {3, 3, 3, 4}, nx = {9, 7, 3, 2};
        cl.add(std::string("im2col 2d ") + tn(dt) + " data " + sh(nx) + " " + layout_name(l) + " kernel " + sh(nk) + " " + pstr(p),
               [=](builder & b) {
                   ggml_tensor * k = b.src(GGML_TYPE_F32, nk);
                   ggml_tensor * x = b.src(GGML_TYPE_F32, nx, l);
                   b.out = ggml_im2col(b.ctx, k, x, p.s0, p.s1, p.p0, p.p1, p.d0, p.d1, true, dt);
               },
               [=](const std::vector<dense> & s, dense *) { return ref::im2col(s[0], s[1], p, true); },
               for_type(dt, tolerance{}));
    }
    // real size: stable-diffusion.cpp's conv_2d im2col (F16 rows) of a 320-channel 32x32 latent
    for (ggml_type dt : {GGML_TYPE_F16, GGML_TYPE_F32}) {
        const ne4 nk = {3, 3, 320, 1}, nx = {32, 32, 320, 1};
        const ref::conv2d_params p = k_params[0];
        cl.add(std::string("im2col 2d ") + tn(dt) + " data " + sh(nx) + " kernel " + sh(nk) + " sd conv",
               [=](builder & b) {
                   ggml_tensor * k = b.src(GGML_TYPE_F16, nk);
                   ggml_tensor * x = b.src(GGML_TYPE_F32, nx);
                   b.out = ggml_im2col(b.ctx, k, x, p.s0, p.s1, p.p0, p.p1, p.d0, p.d1, true, dt);
               },
               [=](const std::vector<dense> & s, dense *) { return ref::im2col(s[0], s[1], p, true); },
               for_type(dt, tolerance{}));
    }
    for (ggml_type dt : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (int s0 : {1, 2})
    for (int p0 : {0, 2})
    for (int d0 : {1, 3}) {
        const ne4 nk = {3, 3, 5, 1}, nx = {13, 3, 2, 1};
        ref::conv2d_params p;
        p.s0 = s0; p.p0 = p0; p.d0 = d0;
        cl.add(std::string("im2col 1d ") + tn(dt) + " data " + sh(nx) + " kernel " + sh(nk) + " s" + std::to_string(s0) +
                   " p" + std::to_string(p0) + " d" + std::to_string(d0),
               [=](builder & b) {
                   ggml_tensor * k = b.src(GGML_TYPE_F32, nk);
                   ggml_tensor * x = b.src(GGML_TYPE_F32, nx);
                   b.out = ggml_im2col(b.ctx, k, x, s0, 0, p0, 0, d0, 0, false, dt);
               },
               [=](const std::vector<dense> & s, dense *) { return ref::im2col(s[0], s[1], p, false); },
               for_type(dt, tolerance{}));
    }
}

void conv_2d_cases(case_list & cl) {
    struct shape { ne4 k, x; };
    const shape shapes[] = {
        {{3, 3, 5, 7}, {10, 9, 5, 2}},
        {{1, 1, 6, 3}, {7, 5, 6, 1}},
        {{4, 2, 3, 5}, {11, 6, 3, 2}},
    };
    for (int direct = 0; direct < 2; direct++)
    for (ggml_type kt : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (const shape & sh_ : shapes)
    for (const auto & p : k_params)
    for (layout l : {layout::cont, layout::perm12}) {
        if (sh_.k[0] > 3 && l != layout::cont) continue;
        // upstream's composition rounds the im2col matrix to the kernel's type
        const double scale = (!direct && kt == GGML_TYPE_F16) ? 2e-3 : 1e-5;
        cl.add(std::string(direct ? "conv_2d_direct" : "conv_2d") + " kernel " + tn(kt) + " " + sh(sh_.k) +
                   " data f32 " + sh(sh_.x) + " " + layout_name(l) + " " + pstr(p),
               [=](builder & b) {
                   ggml_tensor * k = b.src(kt, sh_.k);
                   ggml_tensor * x = b.src(GGML_TYPE_F32, sh_.x, l);
                   b.out = direct ? ggml_conv_2d_direct(b.ctx, k, x, p.s0, p.s1, p.p0, p.p1, p.d0, p.d1)
                                  : ggml_conv_2d(b.ctx, k, x, p.s0, p.s1, p.p0, p.p1, p.d0, p.d1);
               },
               [=](const std::vector<dense> & s, dense * sc) { return ref::conv_2d(s[0], s[1], p, sc); },
               tol_scale(scale));
    }
    // direct: F16 data gives an F16 result; a kernel whose rows are not packed is copied first
    cl.add("conv_2d_direct kernel f16 3x3x5x7 data f16 10x9x5x2 s1 p1",
           [](builder & b) {
               ggml_tensor * k = b.src(GGML_TYPE_F16, {3, 3, 5, 7});
               ggml_tensor * x = b.src(GGML_TYPE_F16, {10, 9, 5, 2});
               b.out = ggml_conv_2d_direct(b.ctx, k, x, 1, 1, 1, 1, 1, 1);
           },
           [](const std::vector<dense> & s, dense * sc) { return ref::conv_2d(s[0], s[1], ref::conv2d_params{1, 1, 1, 1, 1, 1}, sc); },
           for_type(GGML_TYPE_F16, tol_scale(1e-5)));
    for (layout kl : {layout::perm12, layout::trans, layout::pad}) {
        cl.add(std::string("conv_2d_direct kernel f32 3x3x5x7 ") + layout_name(kl) + " data f32 10x9x5x2",
               [=](builder & b) {
                   ggml_tensor * k = b.src(GGML_TYPE_F32, {3, 3, 5, 7}, kl);
                   ggml_tensor * x = b.src(GGML_TYPE_F32, {10, 9, 5, 2});
                   b.out = ggml_conv_2d_direct(b.ctx, k, x, 1, 1, 1, 1, 1, 1);
               },
               [](const std::vector<dense> & s, dense * sc) { return ref::conv_2d(s[0], s[1], ref::conv2d_params{1, 1, 1, 1, 1, 1}, sc); },
               tol_scale(1e-5));
    }
    // several pixel tiles (K = 576 -> 3648-pixel tiles; 67x61 = 4087 pixels), odd channel counts
    for (int direct = 0; direct < 2; direct++) {
        cl.add(std::string(direct ? "conv_2d_direct" : "conv_2d") + " kernel f16 3x3x64x5 data f32 67x61x64x1 multi-tile",
               [=](builder & b) {
                   ggml_tensor * k = b.src(GGML_TYPE_F16, {3, 3, 64, 5});
                   ggml_tensor * x = b.src(GGML_TYPE_F32, {67, 61, 64, 1});
                   b.out = direct ? ggml_conv_2d_direct(b.ctx, k, x, 1, 1, 1, 1, 1, 1) : ggml_conv_2d(b.ctx, k, x, 1, 1, 1, 1, 1, 1);
               },
               [](const std::vector<dense> & s, dense * sc) { return ref::conv_2d(s[0], s[1], ref::conv2d_params{1, 1, 1, 1, 1, 1}, sc); },
               tol_scale(direct ? 1e-5 : 2e-3));
    }
    // helpers
    cl.add("conv_2d_sk_p0 kernel f32 4x4x3x6 data f32 16x12x3x1",
           [](builder & b) { ggml_tensor * k = b.src(GGML_TYPE_F32, {4, 4, 3, 6}); ggml_tensor * x = b.src(GGML_TYPE_F32, {16, 12, 3, 1}); b.out = ggml_conv_2d_sk_p0(b.ctx, k, x); },
           [](const std::vector<dense> & s, dense * sc) { return ref::conv_2d(s[0], s[1], ref::conv2d_params{4, 4, 0, 0, 1, 1}, sc); },
           tol_scale(1e-5));
    cl.add("conv_2d_s1_ph kernel f32 3x3x4x4 data f32 9x8x4x1",
           [](builder & b) { ggml_tensor * k = b.src(GGML_TYPE_F32, {3, 3, 4, 4}); ggml_tensor * x = b.src(GGML_TYPE_F32, {9, 8, 4, 1}); b.out = ggml_conv_2d_s1_ph(b.ctx, k, x); },
           [](const std::vector<dense> & s, dense * sc) { return ref::conv_2d(s[0], s[1], ref::conv2d_params{1, 1, 1, 1, 1, 1}, sc); },
           tol_scale(1e-5));
}

void conv_dw_1d_transpose_cases(case_list & cl) {
    for (int direct = 0; direct < 2; direct++)
    for (const auto & p : k_params)
    for (layout l : {layout::cont, layout::perm12}) {
        if (!direct && l != layout::cont) continue; // upstream's composition reshapes the data: contiguous only
        const ne4 nk = {3, 3, 1, 6}, nx = {11, 9, 6, 2};
        cl.add(std::string(direct ? "conv_2d_dw_direct" : "conv_2d_dw") + " kernel f32 " + sh(nk) + " data f32 " + sh(nx) +
                   " " + layout_name(l) + " " + pstr(p),
               [=](builder & b) {
                   ggml_tensor * k = b.src(GGML_TYPE_F32, nk);
                   ggml_tensor * x = b.src(GGML_TYPE_F32, nx, l);
                   b.out = direct ? ggml_conv_2d_dw_direct(b.ctx, k, x, p.s0, p.s1, p.p0, p.p1, p.d0, p.d1)
                                  : ggml_conv_2d_dw(b.ctx, k, x, p.s0, p.s1, p.p0, p.p1, p.d0, p.d1);
               },
               [=](const std::vector<dense> & s, dense * sc) { return ref::conv_2d_dw(s[0], s[1], p, sc); },
               tol_scale(direct ? 1e-5 : 2e-3));
    }
    // conv_1d: always an F16 im2col (as upstream)
    for (ggml_type kt : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (int s0 : {1, 2})
    for (int p0 : {0, 1, 3})
    for (int d0 : {1, 2}) {
        const ne4 nk = {3, 4, 6, 1}, nx = {13, 4, 2, 1};
        cl.add(std::string("conv_1d kernel ") + tn(kt) + " " + sh(nk) + " data f32 " + sh(nx) + " s" + std::to_string(s0) +
                   " p" + std::to_string(p0) + " d" + std::to_string(d0),
               [=](builder & b) {
                   ggml_tensor * k = b.src(kt, nk);
                   ggml_tensor * x = b.src(GGML_TYPE_F32, nx);
                   b.out = ggml_conv_1d(b.ctx, k, x, s0, p0, d0);
               },
               [=](const std::vector<dense> & s, dense * sc) { return ref::conv_1d(s[0], s[1], s0, p0, d0, sc); },
               tol_scale(2e-3));
    }
    cl.add("conv_1d_ph kernel f32 5x3x4 data f32 17x3x1",
           [](builder & b) { ggml_tensor * k = b.src(GGML_TYPE_F32, {5, 3, 4, 1}); ggml_tensor * x = b.src(GGML_TYPE_F32, {17, 3, 1, 1}); b.out = ggml_conv_1d_ph(b.ctx, k, x, 1, 1); },
           [](const std::vector<dense> & s, dense * sc) { return ref::conv_1d(s[0], s[1], 1, 2, 1, sc); }, tol_scale(2e-3));
    // depthwise 1-D: upstream's composition is valid for "same" output length and one batch
    for (int k : {3, 5}) {
        const ne4 nk = {k, 1, 7, 1}, nx = {19, 7, 1, 1};
        cl.add("conv_1d_dw kernel f32 " + sh(nk) + " data f32 " + sh(nx) + " s1 p" + std::to_string(k / 2),
               [=](builder & b) {
                   ggml_tensor * kk = b.src(GGML_TYPE_F32, nk);
                   ggml_tensor * x  = b.src(GGML_TYPE_F32, nx);
                   b.out = k == 3 ? ggml_conv_1d_dw(b.ctx, kk, x, 1, k / 2, 1) : ggml_conv_1d_dw_ph(b.ctx, kk, x, 1, 1);
               },
               [=](const std::vector<dense> & s, dense * sc) {
                   // kernel [K, 1, C] -> per channel c: out[o, c] = sum_k w[k, c] x[o + k - p, c]
                   dense kd(k, 1, 1, 7), xd(19, 1, 7, 1);
                   for (int c = 0; c < 7; c++) {
                       for (int i = 0; i < k; i++) kd.at(i, 0, 0, c) = s[0].at(i, 0, c);
                       for (int i = 0; i < 19; i++) xd.at(i, 0, c, 0) = s[1].at(i, c, 0);
                   }
                   ref::conv2d_params p; p.p0 = k / 2;
                   dense sc4;
                   dense r = ref::conv_2d_dw(kd, xd, p, &sc4);
                   dense out(r.ne[0], 7, 1), so(r.ne[0], 7, 1);
                   for (int c = 0; c < 7; c++)
                       for (int64_t i = 0; i < r.ne[0]; i++) { out.at(i, c) = r.at(i, 0, c, 0); so.at(i, c) = sc4.at(i, 0, c, 0); }
                   if (sc) *sc = so;
                   return out;
               },
               tol_scale(2e-3));
    }
    // transposed
    for (int s0 : {1, 2, 3})
    for (ggml_type kt : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        const ne4 nk = {3, 5, 4, 1}, nx = {9, 4, 1, 1};
        cl.add(std::string("conv_transpose_1d kernel ") + tn(kt) + " " + sh(nk) + " data f32 " + sh(nx) + " s" + std::to_string(s0),
               [=](builder & b) {
                   ggml_tensor * k = b.src(kt, nk);
                   ggml_tensor * x = b.src(GGML_TYPE_F32, nx);
                   b.out = ggml_conv_transpose_1d(b.ctx, k, x, s0, 0, 1);
               },
               [=](const std::vector<dense> & s, dense * sc) { return ref::conv_transpose_1d(s[0], s[1], s0, sc); },
               tol_scale(1e-5));
    }
    for (int st : {1, 2, 3})
    for (ggml_type kt : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (layout l : {layout::cont, layout::perm12}) {
        const ne4 nk = {3, 2, 5, 4}, nx = {6, 5, 4, 2};
        cl.add(std::string("conv_transpose_2d_p0 kernel ") + tn(kt) + " " + sh(nk) + " data f32 " + sh(nx) + " " +
                   layout_name(l) + " stride " + std::to_string(st),
               [=](builder & b) {
                   ggml_tensor * k = b.src(kt, nk);
                   ggml_tensor * x = b.src(GGML_TYPE_F32, nx, l);
                   b.out = ggml_conv_transpose_2d_p0(b.ctx, k, x, st);
               },
               [=](const std::vector<dense> & s, dense * sc) { return ref::conv_transpose_2d(s[0], s[1], st, sc); },
               tol_scale(1e-5));
    }
}

void pool_cases(case_list & cl) {
    for (ggml_op_pool op : {GGML_OP_POOL_MAX, GGML_OP_POOL_AVG})
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        const ref::pool_op rop = op == GGML_OP_POOL_MAX ? ref::pool_op::max : ref::pool_op::avg;
        const char *       on  = op == GGML_OP_POOL_MAX ? "max" : "avg";
        struct p1 { int k, s, p; };
        for (p1 c : {p1{2, 2, 0}, p1{3, 1, 1}, p1{3, 2, 1}, p1{5, 3, 2}}) {
            cl.add(std::string("pool_1d ") + on + " " + tn(t) + " 13x3x2x1 k" + std::to_string(c.k) + " s" + std::to_string(c.s) + " p" + std::to_string(c.p),
                   [=](builder & b) { b.out = ggml_pool_1d(b.ctx, b.src(t, {13, 3, 2, 1}), op, c.k, c.s, c.p); },
                   [=](const std::vector<dense> & s, dense *) { return ref::pool_1d(s[0], rop, c.k, c.s, c.p); },
                   tol_ar(1e-7, 1e-6));
        }
        struct p2 { int k0, k1, s0, s1, p0, p1; };
        for (p2 c : {p2{2, 2, 2, 2, 0, 0}, p2{3, 3, 1, 1, 1, 1}, p2{3, 2, 2, 1, 1, 0}, p2{3, 3, 2, 2, 1, 1}})
        for (layout l : {layout::cont, layout::perm12}) {
            cl.add(std::string("pool_2d ") + on + " " + tn(t) + " 11x9x3x2 " + layout_name(l) + " k" + std::to_string(c.k0) + "," + std::to_string(c.k1) +
                       " s" + std::to_string(c.s0) + "," + std::to_string(c.s1) + " p" + std::to_string(c.p0) + "," + std::to_string(c.p1),
                   [=](builder & b) { b.out = ggml_pool_2d(b.ctx, b.src(t, {11, 9, 3, 2}, l), op, c.k0, c.k1, c.s0, c.s1, (float) c.p0, (float) c.p1); },
                   [=](const std::vector<dense> & s, dense *) { return ref::pool_2d(s[0], rop, c.k0, c.k1, c.s0, c.s1, c.p0, c.p1); },
                   tol_ar(1e-7, 1e-6));
        }
    }
}

void upscale_cases(case_list & cl) {
    const char * mode_name[] = {"nearest", "bilinear", "bicubic"};
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (int sf : {2, 3})
    for (int mode = 0; mode < 3; mode++)
    for (layout l : {layout::cont, layout::perm12}) {
        const ne4 na = {5, 4, 3, 2};
        cl.add(std::string("upscale ") + mode_name[mode] + " " + tn(t) + " " + sh(na) + " " + layout_name(l) + " x" + std::to_string(sf),
               [=](builder & b) { b.out = ggml_upscale(b.ctx, b.src(t, na, l), sf, (ggml_scale_mode) mode); },
               [=](const std::vector<dense> & s, dense *) { const int64_t ne[4] = {na[0] * sf, na[1] * sf, na[2], na[3]}; return ref::upscale(s[0], ne, mode, false); },
               for_type(t, mode == 0 ? tolerance{} : tol_ar(1e-5, 1e-5)));
    }
    struct tgt { ne4 a, to; };
    const tgt tgts[] = {
        {{5, 4, 3, 2}, {13, 7, 3, 2}},  // non-integer up
        {{17, 13, 2, 1}, {6, 5, 2, 1}}, // down
        {{7, 6, 2, 2}, {7, 11, 4, 3}},  // one dim kept, outer dims resized (nearest there)
        {{1, 3, 1, 1}, {4, 5, 1, 1}},   // single column
    };
    for (const tgt & g : tgts)
    for (int mode = 0; mode < 3; mode++)
    for (int align = 0; align < 2; align++) {
        if (mode == 0 && align) continue;
        const uint32_t m = (uint32_t) mode | (align ? (uint32_t) GGML_SCALE_FLAG_ALIGN_CORNERS : 0u);
        cl.add(std::string("interpolate ") + mode_name[mode] + (align ? " align_corners" : "") + " f32 " + sh(g.a) + " -> " + sh(g.to),
               [=](builder & b) { b.out = ggml_interpolate(b.ctx, b.src(GGML_TYPE_F32, g.a), g.to[0], g.to[1], g.to[2], g.to[3], m); },
               [=](const std::vector<dense> & s, dense *) { const int64_t ne[4] = {g.to[0], g.to[1], g.to[2], g.to[3]}; return ref::upscale(s[0], ne, mode, align != 0); },
               mode == 0 ? tolerance{} : tol_ar(1e-5, 1e-5));
    }
}

void group_l2_norm_cases(case_list & cl) {
    struct gn { ne4 s; int groups; };
    // ... and a real size: SD 1.x's 32 groups of a 320-channel 32x32 latent (odd row tails above)
    for (gn c : {gn{{9, 7, 12, 2}, 4}, gn{{9, 7, 12, 2}, 5}, gn{{8, 8, 64, 1}, 32}, gn{{5, 3, 7, 2}, 3}, gn{{33, 1, 4, 1}, 1},
                 gn{{32, 32, 320, 1}, 32}})
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (layout l : {layout::cont, layout::perm12, layout::pad})
    for (int ip = 0; ip < 2; ip++) {
        if (ip && l == layout::perm12) continue;
        cl.add(std::string(ip ? "group_norm_inplace " : "group_norm ") + tn(t) + " " + sh(c.s) + " " + layout_name(l) + " groups " + std::to_string(c.groups),
               [=](builder & b) {
                   ggml_tensor * x = b.src(t, c.s, l, fill::range(2, 5));
                   b.out = ip ? ggml_group_norm_inplace(b.ctx, x, c.groups, 1e-6f) : ggml_group_norm(b.ctx, x, c.groups, 1e-6f);
               },
               [=](const std::vector<dense> & s, dense *) { return ref::group_norm(s[0], c.groups, 1e-6f); },
               for_type(t, tol_ar(1e-5, 1e-5)));
    }
    for (ne4 s : {ne4{1, 1, 1, 1}, ne4{7, 3, 1, 1}, ne4{64, 5, 3, 2}, ne4{300, 2, 1, 1}})
    for (layout l : {layout::cont, layout::pad})
    for (int ip = 0; ip < 2; ip++) {
        if (s[0] == 1 && l != layout::cont) continue;
        cl.add(std::string(ip ? "l2_norm_inplace" : "l2_norm") + " f32 " + sh(s) + " " + layout_name(l),
               [=](builder & b) { ggml_tensor * x = b.src(GGML_TYPE_F32, s, l); b.out = ip ? ggml_l2_norm_inplace(b.ctx, x, 1e-6f) : ggml_l2_norm(b.ctx, x, 1e-6f); },
               [](const std::vector<dense> & x, dense *) { return ref::l2_norm(x[0], 1e-6f); }, tol_ar(1e-6, 1e-5));
    }
    // eps dominates an all-zero row: result 0, not NaN
    cl.add("l2_norm f32 zero rows 8x2",
           [](builder & b) { b.out = ggml_l2_norm(b.ctx, b.src(GGML_TYPE_F32, {8, 2, 1, 1}, layout::cont, fill::range(0, 0)), 1e-3f); },
           [](const std::vector<dense> & x, dense *) { return ref::l2_norm(x[0], 1e-3f); }, tol_ar(0, 0));
}

void pad_circular_cases(case_list & cl) {
    for (ggml_type t : {GGML_TYPE_F32, GGML_TYPE_F16})
    for (layout l : {layout::cont, layout::perm12}) {
        const ne4 na = {5, 4, 3, 2};
        cl.add(std::string("pad_ext_circular ") + tn(t) + " " + sh(na) + " " + layout_name(l) + " 2 3 1 6 0 1 1 0",
               [=](builder & b) { b.out = ggml_pad_ext_circular(b.ctx, b.src(t, na, l), 2, 3, 1, 6, 0, 1, 1, 0); },
               [=](const std::vector<dense> & s, dense *) {
                   const int lp[4] = {2, 1, 0, 1}, rp[4] = {3, 6, 1, 0};
                   dense out(na[0] + 5, na[1] + 7, na[2] + 1, na[3] + 1);
                   auto wrap = [](int64_t i, int64_t n) { return ((i % n) + n) % n; };
                   for (int64_t i3 = 0; i3 < out.ne[3]; i3++)
                   for (int64_t i2 = 0; i2 < out.ne[2]; i2++)
                   for (int64_t i1 = 0; i1 < out.ne[1]; i1++)
                   for (int64_t i0 = 0; i0 < out.ne[0]; i0++)
                       out.at(i0, i1, i2, i3) = s[0].at(wrap(i0 - lp[0], na[0]), wrap(i1 - lp[1], na[1]), wrap(i2 - lp[2], na[2]), wrap(i3 - lp[3], na[3]));
                   (void) rp;
                   return out;
               },
               tolerance{});
    }
    cl.add("pad_circular f32 3x2x1x1 4 1 0 0",
           [](builder & b) { b.out = ggml_pad_circular(b.ctx, b.src(GGML_TYPE_F32, {3, 2, 1, 1}), 4, 1, 0, 0); },
           [](const std::vector<dense> & s, dense *) {
               dense out(7, 3);
               for (int64_t i1 = 0; i1 < 3; i1++)
                   for (int64_t i0 = 0; i0 < 7; i0++) out.at(i0, i1) = s[0].at(i0 % 3, i1 % 2);
               return out;
           },
           tolerance{});
}

// mul_mat with F16/BF16 activations (src1): the product upstream's conv compositions form
// (F16 im2col x F16 kernel). Shapes hit the packed GEMM (M > 16), the small-M path, dims 2/3
// broadcast and strided activations.
void mul_mat_half_activation_cases(case_list & cl) {
    struct mm { ne4 a, b; layout lb; };
    const mm shapes[] = {
        {{72, 40, 1, 1}, {72, 37, 1, 1}, layout::cont},   {{72, 40, 1, 1}, {72, 5, 1, 1}, layout::cont},
        {{33, 9, 2, 1}, {33, 20, 4, 3}, layout::cont},    {{64, 30, 1, 1}, {64, 19, 3, 1}, layout::perm12},
        {{300, 33, 1, 1}, {300, 70, 1, 1}, layout::pad},
        // src0 with fewer rows than src1 (the AVX2 GEMM swaps the operands and stores the output
        // transposed): small-M dot products (<= 24 src0 rows) and the packed GEMM, row and column
        // tails, several K blocks, several matrices
        {{600, 10, 1, 1}, {600, 50, 1, 1}, layout::cont},  {{520, 31, 1, 1}, {520, 77, 1, 1}, layout::cont},
        {{64, 30, 2, 3}, {64, 45, 2, 3}, layout::cont},    {{40, 25, 1, 1}, {40, 26, 1, 1}, layout::cont},
    };
    for (ggml_type ta : {GGML_TYPE_F16, GGML_TYPE_F32, GGML_TYPE_BF16})
    for (ggml_type tb : {GGML_TYPE_F16, GGML_TYPE_BF16})
    for (const mm & m : shapes) {
        // BF16 weights on AVX512_BF16 CPUs round activations to BF16 (ops-mul-mat-x86.cpp)
        const double scale = ta == GGML_TYPE_BF16 ? 0x1p-8 : 1e-5;
        cl.add(std::string("mul_mat a ") + tn(ta) + " " + sh(m.a) + " b " + tn(tb) + " " + sh(m.b) + " " + layout_name(m.lb),
               [=](builder & b) {
                   ggml_tensor * x = b.src(ta, m.a);
                   ggml_tensor * y = b.src(tb, m.b, m.lb);
                   b.out = ggml_mul_mat(b.ctx, x, y);
               },
               [](const std::vector<dense> & s, dense * sc) { return ref::mul_mat(s[0], s[1], sc); },
               tol_scale(scale));
    }
    // real sizes of stable-diffusion.cpp's SD 1.x 3x3 convolutions at small latents (F16 im2col
    // x F16 kernel): K = 2880 / 5760 (320 / 640 input channels), 64 / 16 pixels, 320 / 640 kernels
    const mm real[] = {{{2880, 64, 1, 1}, {2880, 320, 1, 1}, layout::cont}, {{5760, 16, 1, 1}, {5760, 640, 1, 1}, layout::cont}};
    for (const mm & m : real) {
        cl.add(std::string("mul_mat a f16 ") + sh(m.a) + " b f16 " + sh(m.b) + " sd conv",
               [=](builder & b) {
                   ggml_tensor * x = b.src(GGML_TYPE_F16, m.a);
                   ggml_tensor * y = b.src(GGML_TYPE_F16, m.b, m.lb);
                   b.out = ggml_mul_mat(b.ctx, x, y);
               },
               [](const std::vector<dense> & s, dense * sc) { return ref::mul_mat(s[0], s[1], sc); },
               tol_scale(1e-5));
    }
}

void conv_3d_cases(case_list & cl) {
    struct c3 { ref::conv3d_params p; int64_t IC, OC, N; ne4 k, x; };
    ref::conv3d_params same, strided, dil;
    same.p[0] = same.p[1] = same.p[2] = 1;
    strided.s[0] = 2; strided.s[1] = 1; strided.s[2] = 2; strided.p[0] = 1; strided.p[2] = 1;
    dil.d[0] = 2; dil.d[1] = 1; dil.d[2] = 2; dil.p[0] = 2; dil.p[1] = 1; dil.p[2] = 0;
    const c3 cfgs[] = {
        {same, 3, 4, 1, {3, 3, 3, 12}, {7, 6, 5, 3}},
        {strided, 2, 3, 2, {3, 2, 3, 6}, {9, 5, 6, 4}},
        {dil, 2, 2, 1, {3, 3, 2, 4}, {8, 7, 5, 2}},
    };
    for (const c3 & c : cfgs)
    for (ggml_type kt : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        const std::string tail = std::string(" kernel ") + tn(kt) + " " + sh(c.k) + " data f32 " + sh(c.x) + " IC " + std::to_string(c.IC) +
                                 " s" + std::to_string(c.p.s[0]) + std::to_string(c.p.s[1]) + std::to_string(c.p.s[2]) +
                                 " p" + std::to_string(c.p.p[0]) + std::to_string(c.p.p[1]) + std::to_string(c.p.p[2]) +
                                 " d" + std::to_string(c.p.d[0]) + std::to_string(c.p.d[1]) + std::to_string(c.p.d[2]);
        const ref::conv3d_params p = c.p;
        cl.add("conv_3d" + tail,
               [=](builder & b) {
                   ggml_tensor * k = b.src(kt, c.k);
                   ggml_tensor * x = b.src(GGML_TYPE_F32, c.x);
                   b.out = ggml_conv_3d(b.ctx, k, x, c.IC, p.s[0], p.s[1], p.s[2], p.p[0], p.p[1], p.p[2], p.d[0], p.d[1], p.d[2]);
               },
               [=](const std::vector<dense> & s_, dense * sc) { return ref::conv_3d(s_[0], s_[1], c.IC, p, sc); },
               tol_scale(kt == GGML_TYPE_F16 ? 2e-3 : 1e-5));
        cl.add("conv_3d_direct" + tail,
               [=](builder & b) {
                   ggml_tensor * k = b.src(kt, c.k);
                   ggml_tensor * x = b.src(GGML_TYPE_F32, c.x, layout::perm12);
                   b.out = ggml_conv_3d_direct(b.ctx, k, x, p.s[0], p.s[1], p.s[2], p.p[0], p.p[1], p.p[2], p.d[0], p.d[1], p.d[2],
                                               (int) c.IC, (int) c.N, (int) c.OC);
               },
               [=](const std::vector<dense> & s_, dense * sc) { return ref::conv_3d(s_[0], s_[1], c.IC, p, sc); },
               tol_scale(1e-5));
        for (ggml_type dt : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            if (kt != GGML_TYPE_F32) continue;
            cl.add(std::string("im2col_3d ") + tn(dt) + tail,
                   [=](builder & b) {
                       ggml_tensor * k = b.src(kt, c.k);
                       ggml_tensor * x = b.src(GGML_TYPE_F32, c.x, layout::perm12);
                       b.out = ggml_im2col_3d(b.ctx, k, x, c.IC, p.s[0], p.s[1], p.s[2], p.p[0], p.p[1], p.p[2], p.d[0], p.d[1], p.d[2], dt);
                   },
                   [=](const std::vector<dense> & s_, dense *) { return ref::im2col_3d(s_[0], s_[1], c.IC, p); },
                   for_type(dt, tolerance{}));
        }
    }
}

} // namespace

void add_conv_cases(case_list & cl) {
    conv_3d_cases(cl);
    mul_mat_half_activation_cases(cl);
    im2col_cases(cl);
    conv_2d_cases(cl);
    conv_dw_1d_transpose_cases(cl);
    pool_cases(cl);
    upscale_cases(cl);
    group_l2_norm_cases(cl);
    pad_circular_cases(cl);
}

} // namespace bops
