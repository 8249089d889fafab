#pragma once

// Double-precision reference implementations of every op in ggml.h.
//
// Independent of the library's kernels on purpose: they work on a small host-side dense tensor
// (logical shape, values as double, ne0 fastest) and follow the facts sheet
// (/work/shared/reference/ggml-api-facts.md, section 4) directly, so a wrong kernel and a wrong
// reference are unlikely to agree. Nothing here includes ggml headers.

#include <cstdint>
#include <string>
#include <vector>

namespace ref {

struct dense {
    int64_t             ne[4] = {1, 1, 1, 1};
    std::vector<double> v;

    dense() = default;
    dense(int64_t n0, int64_t n1 = 1, int64_t n2 = 1, int64_t n3 = 1, double fill = 0.0);

    int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t index(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
        return ((i3 * ne[2] + i2) * ne[1] + i1) * ne[0] + i0;
    }
    double & at(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) { return v[index(i0, i1, i2, i3)]; }
    double   at(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const {
        return v[index(i0, i1, i2, i3)];
    }
    std::string shape_str() const;
};

// ---- scalar type helpers (ref-types.cpp) -----------------------------------------------------
// Own IEEE conversions (round-to-nearest-even), so the reference does not trust the library's.
uint16_t f32_to_f16_bits(float f);
float    f16_bits_to_f32(uint16_t h);
uint16_t f32_to_bf16_bits(float f);
float    bf16_bits_to_f32(uint16_t h);
double   round_f16(double x);  // value after storing as F16
double   round_bf16(double x); // value after storing as BF16
double   round_f32(double x);  // value after storing as F32
// Q8_0 round trip of a row (n % 32 == 0): quantise per the facts sheet, dequantise.
std::vector<double> q8_0_roundtrip(const std::vector<double> & x);

// ---- elementwise (ref-elementwise.cpp) --------------------------------------------------------
enum class binop { add, sub, mul, div };
dense binary(binop op, const dense & a, const dense & b); // b tiled over a by modulo
dense sqr(const dense & a);
dense sqrt(const dense & a);
dense scale(const dense & a, double s, double b);

// unary op ids are the ggml_unary_op values (kept numerically equal in the test harness)
enum class unop {
    abs, sgn, neg, step, tanh, elu, relu, sigmoid, gelu, gelu_quick, silu, hardswish, hardsigmoid, exp, expm1,
    softplus, gelu_erf, xielu, floor, ceil, round, trunc
};
double unary_scalar(unop op, double x);
dense  unary(unop op, const dense & a);

enum class gluop { reglu, geglu, swiglu, swiglu_oai, geglu_erf, geglu_quick };
// packed form (b == nullptr): a has 2n columns; split form: act(a) * b
dense glu(gluop op, const dense & a, const dense * b, bool swapped, double alpha = 0.0, double limit = 0.0);

// ---- normalisation / softmax (ref-norm.cpp) ---------------------------------------------------
dense norm(const dense & a, double eps);
dense rms_norm(const dense & a, double eps);
// mask may be null; ALiBi slope by head index i2
dense soft_max(const dense & a, const dense * mask, double scale, double max_bias);
double alibi_slope(int64_t head, int64_t n_head, double max_bias);

// ---- matmul (ref-matmul.cpp) -------------------------------------------------------------------
// out[n, m, i2, i3] = sum_k a[k, n, i2 / r2, i3 / r3] * b[k, m, i2, i3]; abs_sum receives
// sum_k |a*b| per output element (the natural scale for rounding-error bounds).
dense mul_mat(const dense & a, const dense & b, dense * abs_sum = nullptr);

// ---- attention (ref-attention.cpp) -------------------------------------------------------------
// q [D, n_q, H, S], k [D, n_kv, Hkv, S], v [Dv, n_kv, Hkv, S], mask [n_kv, >=n_q, mh, ms] or null.
// Result [Dv, H, n_q, S]. Fully masked queries give 0.
dense flash_attn_ext(const dense & q, const dense & k, const dense & v, const dense * mask, double scale,
                     double max_bias, double logit_softcap);

// ---- rope (ref-rope.cpp) -----------------------------------------------------------------------
void  rope_yarn_corr_dims(int n_dims, int n_ctx_orig, double freq_base, double beta_fast, double beta_slow,
                          double dims[2]);
dense rope(const dense & a, const std::vector<int32_t> & pos, const dense * freq_factors, int n_dims, int mode,
           int n_ctx_orig, double freq_base, double freq_scale, double ext_factor, double attn_factor,
           double beta_fast, double beta_slow);

// ---- layout (ref-layout.cpp) -------------------------------------------------------------------
dense get_rows(const dense & a, const dense & idx);         // idx [n, A2, A3]
dense concat(const dense & a, const dense & b, int dim);
dense pad_ext(const dense & a, const int lp[4], const int rp[4]);
dense repeat(const dense & a, const int64_t ne[4]);
dense arange(double start, double stop, double step);       // length computed in float as ggml does
dense timestep_embedding(const dense & t, int dim, int max_period);
dense reshape(const dense & a, const int64_t ne[4]);        // logical order kept
dense permute(const dense & a, int ax0, int ax1, int ax2, int ax3);
// Element view of a contiguous tensor seen as raw memory with element size es: strides and
// offset in bytes (what ggml_view_4d does to a contiguous op result).
dense view(const dense & a, size_t es, const int64_t ne[4], const size_t nb[4], size_t offset);

// ---- convolution family, pooling, resizing, group/l2 norm (ref-conv.cpp) ----------------------
// Direct definitions (sums over taps), not im2col + matmul, so they check the compositions too.
// Image tensors are [W, H, C, N]; out-of-range taps contribute 0.
struct conv2d_params { int s0 = 1, s1 = 1, p0 = 0, p1 = 0, d0 = 1, d1 = 1; };
// kernel [KW, KH, IC, OC], data [W, H, IC, N] -> [OW, OH, OC, N]; abs_sum: sum |k*x| per output
dense conv_2d(const dense & kernel, const dense & data, conv2d_params p, dense * abs_sum = nullptr);
// depthwise: kernel [KW, KH, 1, C], data [W, H, C, N] -> [OW, OH, C, N]
dense conv_2d_dw(const dense & kernel, const dense & data, conv2d_params p, dense * abs_sum = nullptr);
// 1-D: kernel [K, IC, OC], data [L, IC, N] -> [OL, OC, N]
dense conv_1d(const dense & kernel, const dense & data, int s0, int p0, int d0, dense * abs_sum = nullptr);
// im2col (2-D: kernel [KW, KH, C, *], data [W, H, C, N] -> [C*KH*KW, OW, OH, N];
// 1-D: kernel [KW, C, *], data [W, C, N] -> [C*KW, OW, N])
dense im2col(const dense & kernel, const dense & data, conv2d_params p, bool is_2d);
// transposed: 1-D kernel [K, OC, IC], data [L, IC] -> [(L-1)*s + K, OC];
// 2-D kernel [KW, KH, OC, IC], data [W, H, IC, N] -> [(W-1)*s + KW, (H-1)*s + KH, OC, N]
dense conv_transpose_1d(const dense & kernel, const dense & data, int s0, dense * abs_sum = nullptr);
dense conv_transpose_2d(const dense & kernel, const dense & data, int stride, dense * abs_sum = nullptr);
enum class pool_op { max, avg };
dense pool_1d(const dense & a, pool_op op, int k0, int s0, int p0);
dense pool_2d(const dense & a, pool_op op, int k0, int k1, int s0, int s1, int p0, int p1);
// mode: 0 nearest, 1 bilinear, 2 bicubic; source positions computed in float (as the op defines)
dense upscale(const dense & a, const int64_t ne[4], int mode, bool align_corners);
dense group_norm(const dense & a, int n_groups, double eps);
dense l2_norm(const dense & a, double eps);

// ---- client ops: reductions, ordering, indexed updates (ref-client.cpp) -------------------------
dense sum(const dense & a);                       // [1]
dense sum_rows(const dense & a, bool mean);       // [1, ne1, ne2, ne3]
dense argmax(const dense & a);                    // [ne1], first maximum
dense argsort(const dense & a, bool desc, int64_t k = -1); // stable; k >= 0 keeps the first k columns
dense diag_mask_inf(const dense & a, int n_past);
// view of dst (a's shape, contiguous) in elements: strides s1, s2, s3 and offset off
dense acc_set(const dense & a, const dense & b, int64_t s1, int64_t s2, int64_t s3, int64_t off, bool acc);
dense roll(const dense & a, const int shift[4]);
dense add_id(const dense & a, const dense & b, const dense & ids);
dense mul_mat_id(const dense & as, const dense & b, const dense & ids, dense * abs_sum = nullptr);
dense set_rows(const dense & dst, const dense & src, const dense & idx);

// soft_max / flash_attn_ext with per-head sinks: an extra logit sinks[h] in the normaliser only
dense soft_max_sinks(const dense & a, double scale, const dense & sinks);
dense flash_attn_ext_sinks(const dense & q, const dense & k, const dense & v, double scale, const dense & sinks);

// multi-section rope (mode 8 MROPE, 40 IMROPE, 24 VISION); pos holds 4*ne2 entries (t, h, w, e)
dense rope_multi(const dense & a, const std::vector<int32_t> & pos, const dense * ff, int n_dims, const int sections[4],
                 int mode, int n_ctx_orig, double freq_base, double freq_scale, double ext_factor, double attn_factor,
                 double beta_fast, double beta_slow);

// 3-D: kernel [KW, KH, KD, IC*OC], data [W, H, D, IC*N] -> [OW, OH, OD, OC*N] (channel oc + OC*n);
// im2col_3d -> [IC*KD*KH*KW, OW, OH, OD*N]
struct conv3d_params { int s[3] = {1, 1, 1}, p[3] = {0, 0, 0}, d[3] = {1, 1, 1}; };
dense conv_3d(const dense & kernel, const dense & data, int64_t IC, conv3d_params p, dense * abs_sum = nullptr);
dense im2col_3d(const dense & kernel, const dense & data, int64_t IC, conv3d_params p);

dense win_part(const dense & a, int w);                         // [C, w, w, npx*npy]
dense win_unpart(const dense & a, int w0, int h0, int w);       // [C, w0, h0]
dense get_rel_pos(const dense & a, int qh, int kh);             // [C, kh, qh]
dense add_rel_pos(const dense & a, const dense & pw, const dense & ph);

} // namespace ref
