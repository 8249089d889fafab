// Install-test client, second graph: a UNet-like stage as stable-diffusion-class programs build it
// with upstream's API only — conv_2d with an F16 kernel (im2col to F16 + mul_mat), a per-channel
// bias, group_norm, silu, nearest upscale x2, then self-attention over the pixels (flash_attn_ext
// at F32 precision) with a residual add — computed on the CPU backend and checked against a
// double-precision loop written here. The reference rounds the kernel and the image to F16 as the
// im2col graph does; everything else is exact, so the bound is F32 rounding.

#include "unet-graph.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace {

// odd sizes on purpose: padding on every edge, a row length that is no multiple of a SIMD width
constexpr int W = 7, H = 5, IC = 3, OC = 8, GROUPS = 2, KS = 3, UP = 2;
constexpr int UW = W * UP, UH = H * UP, T = UW * UH; // upscaled image, tokens
constexpr float EPS = 1e-6f;

float value(int i, float scale) { return scale * std::sin(0.61f * (float) i + 0.23f); }

double f16(double v) { return ggml_fp16_to_fp32(ggml_fp32_to_fp16((float) v)); }

// The stage in double: returns [T][OC] (token-major), the graph's output layout [OC, T].
std::vector<double> reference(const std::vector<float> & img, const std::vector<float> & ker,
                              const std::vector<float> & bias) {
    // conv 3x3, stride 1, padding 1 (cross-correlation, as ggml), + bias
    std::vector<double> conv((size_t) OC * H * W);
    for (int oc = 0; oc < OC; ++oc)
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                double s = bias[oc];
                for (int ic = 0; ic < IC; ++ic)
                    for (int ky = 0; ky < KS; ++ky)
                        for (int kx = 0; kx < KS; ++kx) {
                            const int iy = y + ky - 1, ix = x + kx - 1;
                            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                            s += f16(ker[(size_t) (kx + KS * (ky + KS * (ic + IC * oc)))]) *
                                 f16(img[(size_t) (ix + W * (iy + H * ic))]);
                        }
                conv[(size_t) (x + W * (y + H * oc))] = s;
            }
    // group_norm over each group of OC / GROUPS channels (all pixels), then silu
    const int cpg = OC / GROUPS, n = W * H * cpg;
    for (int g = 0; g < GROUPS; ++g) {
        double * v    = conv.data() + (size_t) g * n;
        double   mean = 0, var = 0;
        for (int i = 0; i < n; ++i) mean += v[i];
        mean /= n;
        for (int i = 0; i < n; ++i) var += (v[i] - mean) * (v[i] - mean);
        var /= n;
        for (int i = 0; i < n; ++i) {
            const double z = (v[i] - mean) / std::sqrt(var + EPS);
            v[i]           = z / (1.0 + std::exp(-z));
        }
    }
    // nearest upscale, as tokens t = x + UW * y with OC channels each
    std::vector<double> tok((size_t) T * OC);
    for (int y = 0; y < UH; ++y)
        for (int x = 0; x < UW; ++x)
            for (int c = 0; c < OC; ++c) tok[(size_t) ((x + UW * y) * OC + c)] = conv[(size_t) (x / UP + W * (y / UP + H * c))];
    // one-head self-attention over the tokens + residual
    const double        scale = 1.0 / std::sqrt((double) OC);
    std::vector<double> out((size_t) T * OC), p((size_t) T);
    for (int i = 0; i < T; ++i) {
        double mx = -1e300, sum = 0;
        for (int j = 0; j < T; ++j) {
            double s = 0;
            for (int c = 0; c < OC; ++c) s += tok[(size_t) (i * OC + c)] * tok[(size_t) (j * OC + c)];
            p[(size_t) j] = s * scale;
            mx            = std::max(mx, p[(size_t) j]);
        }
        for (int j = 0; j < T; ++j) sum += (p[(size_t) j] = std::exp(p[(size_t) j] - mx));
        for (int c = 0; c < OC; ++c) {
            double acc = 0;
            for (int j = 0; j < T; ++j) acc += p[(size_t) j] * tok[(size_t) (j * OC + c)];
            out[(size_t) (i * OC + c)] = acc / sum + tok[(size_t) (i * OC + c)];
        }
    }
    return out;
}

} // namespace

int check_unet_graph(ggml_backend_t cpu, double & worst) {
    std::vector<float> img((size_t) W * H * IC), ker((size_t) KS * KS * IC * OC), bias(OC);
    for (size_t i = 0; i < img.size(); ++i) img[i] = value((int) i, 1.0f);
    for (size_t i = 0; i < ker.size(); ++i) ker[i] = value(5 * (int) i + 3, 0.3f);
    for (int i = 0; i < OC; ++i) bias[(size_t) i] = value(11 * i + 1, 0.5f);

    ggml_init_params wp = { 4 * ggml_tensor_overhead(), nullptr, true };
    ggml_context_ptr wctx(ggml_init(wp));
    ggml_tensor *    timg  = ggml_new_tensor_4d(wctx.get(), GGML_TYPE_F32, W, H, IC, 1);
    ggml_tensor *    tker  = ggml_new_tensor_4d(wctx.get(), GGML_TYPE_F16, KS, KS, IC, OC);
    ggml_tensor *    tbias = ggml_new_tensor_4d(wctx.get(), GGML_TYPE_F32, 1, 1, OC, 1);
    ggml_set_input(timg);

    ggml_init_params ip = { 64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
    ggml_context_ptr ctx(ggml_init(ip));
    ggml_context *   c = ctx.get();

    ggml_tensor * h = ggml_conv_2d(c, tker, timg, 1, 1, 1, 1, 1, 1); // [W, H, OC, 1]
    h               = ggml_add(c, h, tbias);                           // bias broadcast over pixels
    h               = ggml_silu(c, ggml_group_norm(c, h, GROUPS, EPS));
    h               = ggml_upscale(c, h, UP, GGML_SCALE_MODE_NEAREST); // [UW, UH, OC, 1]
    ggml_tensor * tok = ggml_cont(c, ggml_transpose(c, ggml_reshape_2d(c, h, T, OC))); // [OC, T]
    ggml_tensor * q   = ggml_reshape_3d(c, tok, OC, T, 1);                             // [D, T, heads]
    ggml_tensor * fa  = ggml_flash_attn_ext(c, q, q, q, nullptr, 1.0f / std::sqrt((float) OC), 0.0f, 0.0f);
    ggml_flash_attn_ext_set_prec(fa, GGML_PREC_F32);
    ggml_tensor * out = ggml_add(c, ggml_reshape_2d(c, fa, OC, T), tok); // [OC, T]
    ggml_set_output(out);
    ggml_cgraph * gf = ggml_new_graph(c);
    ggml_build_forward_expand(gf, out);

    ggml_backend_buffer_ptr wbuf(ggml_backend_alloc_ctx_tensors(wctx.get(), cpu));
    ggml_gallocr_ptr        galloc(ggml_gallocr_new(ggml_backend_get_default_buffer_type(cpu)));
    if (!wbuf || !ggml_gallocr_alloc_graph(galloc.get(), gf)) {
        std::fprintf(stderr, "install-client (unet): allocation failed\n");
        return 1;
    }
    std::vector<ggml_fp16_t> ker16(ker.size());
    ggml_fp32_to_fp16_row(ker.data(), ker16.data(), (int64_t) ker.size());
    ggml_backend_tensor_set(timg, img.data(), 0, img.size() * sizeof(float));
    ggml_backend_tensor_set(tker, ker16.data(), 0, ker16.size() * sizeof(ggml_fp16_t));
    ggml_backend_tensor_set(tbias, bias.data(), 0, bias.size() * sizeof(float));
    if (ggml_backend_graph_compute(cpu, gf) != GGML_STATUS_SUCCESS) {
        std::fprintf(stderr, "install-client (unet): compute failed\n");
        return 1;
    }

    const std::vector<double> ref = reference(img, ker, bias);
    std::vector<float>        got((size_t) T * OC);
    ggml_backend_tensor_get(out, got.data(), 0, got.size() * sizeof(float));
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const double err = std::fabs(got[i] - ref[i]);
        worst            = std::max(worst, err);
        if (!(err <= 1e-4 * (1.0 + std::fabs(ref[i])))) ++bad;
    }
    std::printf("install-client (unet): conv_2d + group_norm + silu + upscale + attention, %d nodes, max abs error %.3g, "
                "%d mismatches\n", ggml_graph_n_nodes(gf), worst, bad);
    return bad;
}
