// Install-test client: a small transformer-block graph (projection, layer norm, attention twice —
// flash_attn_ext and the mul_mat + soft_max chain — and a residual add) built with upstream's API
// only, computed on the CPU backend and checked against a double-precision loop; then the
// UNet-like graph of unet-graph.cpp (conv_2d, group_norm, upscale, attention). Exit 0 = pass.
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"
#include "gguf.h"
#include "ggml/src/ggml-impl.h" // upstream clients include the private header by this path
#include "unet-graph.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

// like stable-diffusion.cpp: checkpoints carry tensor names longer than upstream's default 64
static_assert(GGML_MAX_NAME >= 128, "install-client expects ggml installed with GGML_MAX_NAME >= 128");

namespace {

constexpr int C = 16, N = 11, D = 8, H = 2; // channels, tokens, head dim, heads (C = D * H)

float value(int i, float scale) { return scale * std::sin(0.37f * (float) i + 0.11f); }

} // namespace

int main() {
    std::vector<float> x(C * N), w(C * C), b(C);
    for (int i = 0; i < C * N; ++i) x[i] = value(i, 1.0f);
    for (int i = 0; i < C * C; ++i) w[i] = value(3 * i + 1, 0.25f);
    for (int i = 0; i < C; ++i) b[i] = value(7 * i + 2, 0.5f);

    // weights and input in their own context and buffer, the graph's tensors planned by gallocr
    ggml_init_params wp = { 4 * ggml_tensor_overhead(), nullptr, true };
    ggml_context_ptr wctx(ggml_init(wp));
    ggml_tensor * tx = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F32, C, N);
    ggml_tensor * tw = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F32, C, C); // row o = weights of output o
    ggml_tensor * tb = ggml_new_tensor_1d(wctx.get(), GGML_TYPE_F32, C);
    const std::string long_name(100, 'w'); // fits only with GGML_MAX_NAME > 100
    ggml_set_name(tw, long_name.c_str());
    ggml_set_input(tx);

    ggml_init_params ip = { 64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true };
    ggml_context_ptr ctx(ggml_init(ip));
    ggml_context * c = ctx.get();

    ggml_tensor * h  = ggml_add(c, ggml_mul_mat(c, tw, tx), tb);     // [C, N]
    ggml_tensor * hn = ggml_norm(c, h, 1e-5f);                         // layer norm over C
    ggml_tensor * q  = ggml_reshape_3d(c, hn, D, H, N);                // [D, H, N]
    q = ggml_cont(c, ggml_permute(c, q, 0, 2, 1, 3));                 // [D, N, H]
    const float scale = 1.0f / std::sqrt((float) D);
    // flash attention twice: F32 precision requested (checked tightly), and the default precision,
    // which may round products to BF16 (sdx on AVX512-BF16 CPUs; documented bound 5e-3)
    ggml_tensor * fa = ggml_flash_attn_ext(c, q, q, q, nullptr, scale, 0.0f, 0.0f); // [D, H, N]
    ggml_flash_attn_ext_set_prec(fa, GGML_PREC_F32);
    ggml_tensor * out_fa = ggml_add(c, ggml_reshape_2d(c, fa, C, N), h);
    ggml_tensor * fa_def = ggml_flash_attn_ext(c, q, q, q, nullptr, scale, 0.0f, 0.0f);
    ggml_tensor * out_fa_def = ggml_add(c, ggml_reshape_2d(c, fa_def, C, N), h);

    // the same attention as mul_mat + soft_max: kq[j, i] = k_j . q_i, softmax over j
    ggml_tensor * kq  = ggml_soft_max_ext(c, ggml_mul_mat(c, q, q), nullptr, scale, 0.0f); // [N, N, H]
    ggml_tensor * vt  = ggml_cont(c, ggml_transpose(c, q));                                // [N, D, H]
    ggml_tensor * kqv = ggml_mul_mat(c, vt, kq);                                           // [D, N, H]
    ggml_tensor * out_mm = ggml_add(c, ggml_cont_2d(c, ggml_permute(c, kqv, 0, 2, 1, 3), C, N), h);
    ggml_set_output(out_fa);
    ggml_set_output(out_mm);
    ggml_set_output(out_fa_def);

    ggml_cgraph * gf = ggml_new_graph(c);
    ggml_build_forward_expand(gf, out_fa);
    ggml_build_forward_expand(gf, out_mm);
    ggml_build_forward_expand(gf, out_fa_def);

    ggml_backend_ptr cpu(ggml_backend_cpu_init());
    ggml_backend_cpu_set_n_threads(cpu.get(), 2);
    ggml_backend_buffer_ptr wbuf(ggml_backend_alloc_ctx_tensors(wctx.get(), cpu.get()));
    ggml_gallocr_ptr galloc(ggml_gallocr_new(ggml_backend_get_default_buffer_type(cpu.get())));
    if (!wbuf || !ggml_gallocr_alloc_graph(galloc.get(), gf)) {
        std::fprintf(stderr, "install-client: allocation failed\n");
        return 1;
    }
    ggml_backend_tensor_set(tx, x.data(), 0, x.size() * sizeof(float));
    ggml_backend_tensor_set(tw, w.data(), 0, w.size() * sizeof(float));
    ggml_backend_tensor_set(tb, b.data(), 0, b.size() * sizeof(float));
    if (ggml_backend_graph_compute(cpu.get(), gf) != GGML_STATUS_SUCCESS) {
        std::fprintf(stderr, "install-client: compute failed\n");
        return 1;
    }

    // double-precision reference
    std::vector<double> hr(C * N), hnr(C * N), ref(C * N);
    for (int t = 0; t < N; ++t) {
        for (int o = 0; o < C; ++o) {
            double s = b[o];
            for (int i = 0; i < C; ++i) s += (double) w[o * C + i] * x[t * C + i];
            hr[t * C + o] = s;
        }
        double mean = 0, var = 0;
        for (int o = 0; o < C; ++o) mean += hr[t * C + o];
        mean /= C;
        for (int o = 0; o < C; ++o) var += (hr[t * C + o] - mean) * (hr[t * C + o] - mean);
        var /= C;
        for (int o = 0; o < C; ++o) hnr[t * C + o] = (hr[t * C + o] - mean) / std::sqrt(var + 1e-5);
    }
    for (int hd = 0; hd < H; ++hd) {
        for (int i = 0; i < N; ++i) {
            std::vector<double> p(N);
            double mx = -1e300, sum = 0;
            for (int j = 0; j < N; ++j) {
                double s = 0;
                for (int d = 0; d < D; ++d) s += hnr[i * C + hd * D + d] * hnr[j * C + hd * D + d];
                p[j] = s * scale;
                mx   = std::max(mx, p[j]);
            }
            for (int j = 0; j < N; ++j) sum += (p[j] = std::exp(p[j] - mx));
            for (int d = 0; d < D; ++d) {
                double acc = 0;
                for (int j = 0; j < N; ++j) acc += p[j] / sum * hnr[j * C + hd * D + d];
                ref[i * C + hd * D + d] = acc + hr[i * C + hd * D + d];
            }
        }
    }

    int bad = 0;
    double worst = 0;
    for (ggml_tensor * t : { out_fa, out_mm, out_fa_def }) {
        const double bound = t == out_fa_def ? 5e-3 : 1e-4;
        std::vector<float> got(C * N);
        ggml_backend_tensor_get(t, got.data(), 0, got.size() * sizeof(float));
        for (int i = 0; i < C * N; ++i) {
            const double err = std::fabs(got[i] - ref[i]);
            if (t != out_fa_def) worst = std::max(worst, err);
            if (!(err <= bound * (1.0 + std::fabs(ref[i])))) ++bad;
        }
    }
    if (long_name != ggml_get_name(tw)) {
        std::fprintf(stderr, "install-client: a %zu-byte tensor name was truncated\n", long_name.size());
        ++bad;
    }
    if (ggml_graph_get_tensor(gf, long_name.c_str()) != tw) ++bad;
    // the installed gguf.h: write the long-named weight to a GGUF file and read it back
    {
        const std::string path = "install-client-gguf.gguf";
        gguf_context *    g    = gguf_init_empty();
        gguf_set_val_str(g, "general.name", "install-client");
        gguf_add_tensor(g, tw);
        const bool     wrote = gguf_write_to_file(g, path.c_str(), false);
        ggml_context * gc    = nullptr;
        gguf_context * r     = wrote ? gguf_init_from_file(path.c_str(), {false, &gc}) : nullptr;
        ggml_tensor *  back  = gc ? ggml_get_tensor(gc, long_name.c_str()) : nullptr;
        if (!back || ggml_nbytes(back) != ggml_nbytes(tw) || std::memcmp(back->data, tw->data, ggml_nbytes(tw)) != 0) {
            std::fprintf(stderr, "install-client: GGUF round trip of %s failed\n", long_name.c_str());
            ++bad;
        }
        if (r) gguf_free(r);
        if (gc) ggml_free(gc);
        gguf_free(g);
        std::remove(path.c_str());
    }
    double worst_unet = 0;
    bad += check_unet_graph(cpu.get(), worst_unet);
    std::printf("install-client: ggml %s, GGML_MAX_NAME %d, %d nodes, max abs error %.3g (F32 paths), %d mismatches\n",
                ggml_version(), GGML_MAX_NAME, gf->n_nodes, worst, bad);
    return bad == 0 ? 0 : 1;
}
