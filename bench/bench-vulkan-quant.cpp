// bench-vulkan-quant: mul_mat with block-quantized weights on the Vulkan device (mul_mat_q.comp,
// weights dequantized in the shader) against the same shape with F32 weights on the same device
// (whatever kernel the backend picks for F32), measured in this run. The ratio is the quantized
// kernel's speed relative to F32 (> 1: faster). Shapes: M activation rows x K, weights N x K.
//
//   bench-vulkan-quant [--smoke] [--json] [--cpu-time] [--min-time S] [--shape M,N,K]...
//
// --cpu-time: the process's CPU seconds / 2 instead of wall time (lavapipe's worker threads are
// this process's threads), for a machine shared with other work.

#include "bench-util.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-vulkan.h"
#include "ggml.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

struct graph {
    ggml_context *        ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr;
    ggml_cgraph *         g   = nullptr;
    ~graph() {
        if (buf) ggml_backend_buffer_free(buf);
        if (ctx) ggml_free(ctx);
    }
};

// dst = W x: W [K, N] of type wt (quantized by the library's reference quantizer), x [K, M] F32
bool build(graph & gr, ggml_backend_t be, ggml_type wt, int64_t M, int64_t N, int64_t K) {
    gr.ctx          = ggml_init({8 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true});
    ggml_tensor * w = ggml_new_tensor_2d(gr.ctx, wt, K, N);
    ggml_tensor * x = ggml_new_tensor_2d(gr.ctx, GGML_TYPE_F32, K, M);
    ggml_tensor * y = ggml_mul_mat(gr.ctx, w, x);
    gr.g            = ggml_new_graph(gr.ctx);
    ggml_build_forward_expand(gr.g, y);
    if (!ggml_backend_supports_op(be, y)) return false;
    gr.buf = ggml_backend_alloc_ctx_tensors(gr.ctx, be);
    if (!gr.buf) return false;
    std::mt19937                          rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (ggml_tensor * t : {w, x}) {
        std::vector<float> f((size_t) ggml_nelements(t));
        for (float & v : f) v = u(rng);
        std::vector<uint8_t> bytes(ggml_nbytes(t));
        if (t->type == GGML_TYPE_F32) memcpy(bytes.data(), f.data(), bytes.size());
        else ggml_quantize_chunk(t->type, f.data(), bytes.data(), 0, t->ne[1], t->ne[0], nullptr);
        ggml_backend_tensor_set(t, bytes.data(), 0, bytes.size());
    }
    return true;
}

} // namespace

int main(int argc, char ** argv) {
    bool   smoke = false, json = false, cpu_time = false;
    double min_time = 2.0;
    std::vector<std::array<int64_t, 3>> shapes;
    bench::arg_reader r("bench-vulkan-quant", argc, argv);
    while (r.next()) {
        if (r.flag("--smoke", smoke) || r.flag("--json", json) || r.flag("--cpu-time", cpu_time)) continue;
        if (r.double_opt("--min-time", 0.0, 600.0, min_time)) continue;
        std::string s;
        if (r.string_opt("--shape", s)) {
            long long m = 0, n = 0, k = 0;
            if (sscanf(s.c_str(), "%lld,%lld,%lld", &m, &n, &k) != 3 || m < 1 || n < 1 || k < 32 || k % 256 != 0) {
                fprintf(stderr, "bench-vulkan-quant: --shape wants M,N,K with K a multiple of 256, got '%s'\n", s.c_str());
                return 2;
            }
            shapes.push_back({m, n, k});
            continue;
        }
        r.unknown();
        break;
    }
    if (!r.ok()) return 2;
    if (ggml_backend_vk_get_device_count() < 1) {
        fprintf(stderr, "bench-vulkan-quant: no Vulkan device\n");
        return 1;
    }
    if (shapes.empty()) shapes = smoke ? std::vector<std::array<int64_t, 3>>{{4, 64, 256}}
                                       : std::vector<std::array<int64_t, 3>>{{256, 3072, 3072}, {1, 6144, 16384}};
    if (cpu_time) bench::set_cpu_clock(2);
    if (!smoke && !bench::wait_idle()) printf("note: the machine did not become idle; timings are noisy\n");
    ggml_backend_t be = ggml_backend_vk_init(0);
    if (!be) {
        fprintf(stderr, "bench-vulkan-quant: cannot initialise Vulkan0\n");
        return 1;
    }
    bench::print_table_header();
    int rc = 0;
    for (const auto & sh : shapes) {
        const int64_t M = sh[0], N = sh[1], K = sh[2];
        const double  flops = 2.0 * (double) M * (double) N * (double) K;
        char          shape[96];
        snprintf(shape, sizeof shape, "M=%lld N=%lld K=%lld", (long long) M, (long long) N, (long long) K);
        auto time_type = [&](ggml_type t, bool * ok) {
            graph gr;
            *ok = build(gr, be, t, M, N, K);
            if (!*ok) return bench::timing{};
            return bench::time_it([&] { ggml_backend_graph_compute(be, gr.g); }, smoke ? 1 : 2, smoke ? 0.0 : min_time,
                                  smoke ? 1 : 20);
        };
        bool          ok  = false;
        bench::timing f32 = time_type(GGML_TYPE_F32, &ok);
        if (!ok) {
            fprintf(stderr, "bench-vulkan-quant: F32 mul_mat %s could not run\n", shape);
            rc = 1;
            continue;
        }
        for (ggml_type t : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q4_0, GGML_TYPE_Q6_K}) {
            const bench::timing q = time_type(t, &ok);
            if (!ok) {
                fprintf(stderr, "bench-vulkan-quant: %s mul_mat %s could not run on Vulkan\n", ggml_type_name(t), shape);
                rc = 1;
                continue;
            }
            bench::row row;
            row.op       = std::string("Vulkan0 mul_mat ") + ggml_type_name(t);
            row.shape    = shape;
            row.t        = q;
            row.work     = flops;
            row.baseline = "F32 weights on Vulkan0";
            row.base     = f32;
            bench::print_row(row);
            if (json) bench::print_json(row);
        }
    }
    ggml_backend_free(be);
    return rc;
}
