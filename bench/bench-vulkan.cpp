// bench-vulkan: the Vulkan backend on each Vulkan device, against our CPU backend on the same
// shapes and, for mul_mat, against the previous kernel (the 8x8-per-thread direct / shared-tile
// shader, GGML_VK_MUL_MAT_DIRECT on CPU drivers, SHARED elsewhere) and the plain-loop shader (one
// invocation per output, no tiling) on the same device, all measured in this run:
//
//   mul_mat F32 / F16 / BF16 weights   GFLOP/s (2*M*N*K)
//   mul_mat Q8_0 / Q4_K weights        vs the CPU backend and the Vulkan F32 mul_mat of the shape
//   flash_attn_ext F16 K/V, head 128   GFLOP/s (4*D*n_q*n_kv*heads)
//   add F32, cpy F32 -> F16            GB/s (bytes read + written)
//
// With sd-core in the build (bench-vulkan-krea2.cpp): the INT8 ConvRot linear (vs the CPU
// backend and the previous Vulkan INT8 kernel) and one Krea2 DiT block in F32 and INT8 (the
// Vulkan INT8 block vs the Vulkan F32 block, vs the CPU backend and vs the previous INT8 kernel;
// real hidden width 6144 with few tokens by default, --smoke: width 256).
//
// Data stays on the device between repetitions; each repetition is one graph compute (one
// submission, waited for). On lavapipe the shader quality shows in the ratio to the plain shader.

#include "bench-util.h"
#ifdef BENCH_VK_HAVE_SD
#include "bench-vulkan-krea2.h"
#endif

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-vulkan.h"
#include "ggml.h"

#include <cstdio>
#include <cstdlib>
#include <array>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

struct options {
    bool   smoke      = false;
    bool   json       = false;
    bool   large      = false;
    bool   plain      = true; // also time the plain-loop shader (slow at real sizes)
    std::vector<std::array<int64_t, 3>> shapes; // --shape M,N,K (replaces the default GEMM shapes)
    int    threads    = 0;
    double min_time_s = 1.0;
    bool   block      = true; // the sd rows: INT8 ConvRot linear and the Krea2 block (sd-core builds)
    int    block_hidden = 6144, block_tokens = 64;
};

void usage(const char * argv0) {
    printf("usage: %s [--smoke] [--large] [--json] [--threads N] [--min-time SECONDS] [--cpu-clock]\n"
           "          [--block-hidden N] [--block-tokens N] [--no-block]\n"
           "\n"
           "  --smoke        tiny shapes, one repetition (checks that everything runs; timings meaningless)\n"
           "  --large        also GEMM m=3072 n=512 k=3072 and the issue's m=4096 n=512 k=14336 (slow on lavapipe)\n"
           "  --shape M,N,K  GEMM shape (repeatable; replaces the default shapes): M weight rows, N tokens\n"
           "  --no-plain     skip the plain-loop shader baseline\n"
           "  --json         also print one JSON object per result\n"
           "  --threads N    CPU backend threads (default: its default)\n"
           "  --min-time S   time each measurement for at least S seconds (default 1)\n"
           "  --cpu-clock    time by the process's CPU seconds / cores instead of wall time (a machine\n"
           "                 shared with other work; lavapipe's workers are this process's threads)\n"
           "  --block-hidden N  the Krea2 block's hidden width, a multiple of 128 (default 6144, the model's)\n"
           "  --block-tokens N  the Krea2 block's tokens (default 64)\n"
           "  --no-block     skip the INT8 ConvRot linear and the Krea2 block\n",
           argv0);
}

// One op on fresh inputs, allocated on `backend`, computed by `run` repeatedly.
struct op_graph {
    ggml_context *        ctx = nullptr;
    ggml_cgraph *         g   = nullptr;
    ggml_backend_buffer_t buf = nullptr;
    ~op_graph() {
        if (buf) ggml_backend_buffer_free(buf);
        if (ctx) ggml_free(ctx);
    }
};

using build_fn = std::function<ggml_tensor *(ggml_context *)>;

bool make_graph(op_graph & og, ggml_backend_t backend, const build_fn & build) {
    og.ctx = ggml_init({64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true});
    ggml_tensor * out = build(og.ctx);
    og.g              = ggml_new_graph(og.ctx);
    ggml_build_forward_expand(og.g, out);
    for (int i = 0; i < ggml_graph_n_nodes(og.g); i++) {
        if (!ggml_backend_supports_op(backend, ggml_graph_node(og.g, i))) return false;
    }
    og.buf = ggml_backend_alloc_ctx_tensors(og.ctx, backend);
    if (!og.buf) return false;
    // inputs: small uniform values (no NaN/inf that would change the speed of any path)
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    for (ggml_tensor * t = ggml_get_first_tensor(og.ctx); t; t = ggml_get_next_tensor(og.ctx, t)) {
        if (t->op != GGML_OP_NONE) continue;
        const int64_t n = ggml_nelements(t);
        std::vector<float> f((size_t) n);
        for (float & x : f) x = u(rng);
        std::vector<uint8_t> bytes(ggml_nbytes(t));
        if (t->type == GGML_TYPE_F32) memcpy(bytes.data(), f.data(), bytes.size());
        else if (t->type == GGML_TYPE_F16) ggml_fp32_to_fp16_row(f.data(), (ggml_fp16_t *) bytes.data(), n);
        else if (t->type == GGML_TYPE_BF16) ggml_fp32_to_bf16_row(f.data(), (ggml_bf16_t *) bytes.data(), n);
        else if (ggml_is_quantized(t->type)) ggml_quantize_chunk(t->type, f.data(), bytes.data(), 0, n / t->ne[0], t->ne[0], nullptr);
        ggml_backend_tensor_set(t, bytes.data(), 0, bytes.size());
    }
    return true;
}

bench::timing time_graph(ggml_backend_t backend, const build_fn & build, const options & o, bool * ok) {
    op_graph og;
    *ok = make_graph(og, backend, build);
    if (!*ok) return {};
    return bench::time_it([&] { ggml_backend_graph_compute(backend, og.g); }, o.smoke ? 1 : 3, o.smoke ? 0.0 : o.min_time_s,
                          o.smoke ? 1 : 50);
}

void report(const options & o, const bench::row & r) {
    bench::print_row(r);
    if (o.json) bench::print_json(r);
}

} // namespace

int main(int argc, char ** argv) {
    options o;
    bench::arg_reader r("bench-vulkan", argc, argv);
    while (r.next()) {
        if (r.is("--help") || r.is("-h")) {
            usage(argv[0]);
            return 0;
        }
        if (r.flag("--smoke", o.smoke)) continue;
        if (r.flag("--json", o.json)) continue;
        if (r.flag("--large", o.large)) continue;
        bool no_plain = false;
        if (r.flag("--no-plain", no_plain)) {
            o.plain = false;
            continue;
        }
        std::string shape_arg;
        if (r.string_opt("--shape", shape_arg)) {
            const char * v = shape_arg.c_str();
            long long    m = 0, n = 0, k = 0;
            if (sscanf(v, "%lld,%lld,%lld", &m, &n, &k) != 3 || m <= 0 || n <= 0 || k <= 0 || m > (1 << 20) ||
                n > (1 << 20) || k > (1 << 20)) {
                fprintf(stderr, "bench-vulkan: --shape wants M,N,K (positive, at most 1048576 each)\n");
                return 2;
            }
            o.shapes.push_back({m, n, k});
            continue;
        }
        if (r.int_opt("--threads", 1, 512, o.threads)) continue;
        if (r.double_opt("--min-time", 0.0, 600.0, o.min_time_s)) continue;
        bool flag = false;
        if (r.flag("--cpu-clock", flag)) {
            const unsigned n = std::thread::hardware_concurrency();
            bench::set_cpu_clock(n ? (int) n : 1);
            continue;
        }
        if (r.flag("--no-block", flag)) {
            o.block = false;
            continue;
        }
        if (r.int_opt("--block-hidden", 128, 65536, o.block_hidden)) continue;
        if (r.int_opt("--block-tokens", 2, 65536, o.block_tokens)) continue;
        r.unknown();
    }
    if (!r.ok()) return 2;
    if (o.block_hidden % 128 != 0) {
        fprintf(stderr, "bench-vulkan: --block-hidden must be a multiple of 128 (the head dim)\n");
        return 2;
    }

    const int n_dev = ggml_backend_vk_get_device_count();
    if (n_dev == 0) {
        fprintf(stderr, "bench-vulkan: no Vulkan device found\n");
        return 1;
    }
    if (!o.smoke && !bench::wait_idle()) printf("note: the machine did not become idle; timings are noisy\n");

    ggml_backend_t cpu = ggml_backend_cpu_init();
    if (o.threads > 0) ggml_backend_cpu_set_n_threads(cpu, o.threads);

    struct mm_shape { int64_t m, n, k; };
    // K a multiple of 256: whole Q4_K blocks
    std::vector<mm_shape> mm = o.smoke ? std::vector<mm_shape>{{64, 16, 256}}
                                       : std::vector<mm_shape>{{1024, 512, 1024}};
    if (o.large && !o.smoke) {
        mm.push_back({3072, 512, 3072});
        mm.push_back({4096, 512, 14336});
    }
    if (!o.shapes.empty()) {
        mm.clear();
        for (const auto & s : o.shapes) mm.push_back({s[0], s[1], s[2]});
    }
    const int64_t fa_tokens = o.smoke ? 16 : 512, fa_heads = o.smoke ? 1 : 4;
    const int64_t ew_n      = o.smoke ? 4096 : 16 * 1024 * 1024;

    int rc = 0;
    for (int d = 0; d < n_dev; d++) {
        ggml_backend_t vk = ggml_backend_vk_init(d);
        if (!vk) {
            fprintf(stderr, "bench-vulkan: cannot initialise Vulkan device %d\n", d);
            return 1;
        }
        char desc[256];
        ggml_backend_vk_get_device_description(d, desc, sizeof(desc));
        printf("device %s: %s; CPU backend: %d threads\n", ggml_backend_name(vk), desc, ggml_backend_cpu_get_n_threads(cpu));
        bench::print_table_header();
        const std::string dn = ggml_backend_name(vk);

        std::vector<bench::timing> f32_vk(mm.size()); // the Vulkan F32 mul_mat per shape (the quantized types' baseline)
        for (ggml_type wt : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K}) {
            for (size_t si = 0; si < mm.size(); ++si) {
                const mm_shape & s = mm[si];
                if (ggml_is_quantized(wt)) {
                    // vs the CPU backend and the Vulkan F32 mul_mat of the same shape (the previous
                    // quantized kernel is chosen once per process: GGML_VK_MMQ=generic)
                    if (s.k % ggml_blck_size(wt) != 0) continue;
                    const build_fn b = [&](ggml_context * c) {
                        return ggml_mul_mat(c, ggml_new_tensor_2d(c, wt, s.k, s.m), ggml_new_tensor_2d(c, GGML_TYPE_F32, s.k, s.n));
                    };
                    bool                ok_vk, ok_cpu;
                    const bench::timing t_vk  = time_graph(vk, b, o, &ok_vk);
                    const bench::timing t_cpu = time_graph(cpu, b, o, &ok_cpu);
                    if (!ok_vk || !ok_cpu) {
                        fprintf(stderr, "bench-vulkan: mul_mat %s could not run\n", ggml_type_name(wt));
                        rc = 1;
                        continue;
                    }
                    const std::string shape = std::string(ggml_type_name(wt)) + " m" + std::to_string(s.m) + " n" +
                                              std::to_string(s.n) + " k" + std::to_string(s.k);
                    const double flops = 2.0 * (double) s.m * (double) s.n * (double) s.k;
                    report(o, {dn + " mul_mat", shape, t_vk, flops, false, "CPU backend", t_cpu, ""});
                    if (f32_vk[si].best_s > 0)
                        report(o, {dn + " mul_mat", shape, t_vk, flops, false, "Vulkan F32 mul_mat", f32_vk[si], ""});
                    continue;
                }
                const build_fn b = [&](ggml_context * c) {
                    ggml_tensor * w = ggml_new_tensor_2d(c, wt, s.k, s.m);
                    ggml_tensor * x = ggml_new_tensor_2d(c, GGML_TYPE_F32, s.k, s.n);
                    return ggml_mul_mat(c, w, x);
                };
                bool ok_vk, ok_cpu, ok_prev, ok_plain = true;
                const bench::timing t_vk  = time_graph(vk, b, o, &ok_vk);
                const bench::timing t_cpu = time_graph(cpu, b, o, &ok_cpu);
                // the previous kernel: the direct 8x8 shader on CPU drivers, the shared-tile one elsewhere
                const bool cpu_driver = strstr(desc, "llvmpipe") != nullptr;
                ggml_backend_vk_set_mul_mat_kernel(vk, cpu_driver ? GGML_VK_MUL_MAT_DIRECT : GGML_VK_MUL_MAT_SHARED);
                const bench::timing t_prev = time_graph(vk, b, o, &ok_prev);
                ggml_backend_vk_set_mul_mat_kernel(vk, GGML_VK_MUL_MAT_AUTO);
                bench::timing t_plain{};
                if (o.plain) {
                    ggml_backend_vk_set_plain_mul_mat(vk, true);
                    // the plain shader is slow: one repetition is enough to show the ratio
                    options po = o;
                    po.min_time_s = 0;
                    t_plain = time_graph(vk, b, po, &ok_plain);
                    ggml_backend_vk_set_plain_mul_mat(vk, false);
                }
                if (!ok_vk || !ok_cpu || !ok_prev || !ok_plain) {
                    fprintf(stderr, "bench-vulkan: mul_mat %s could not run\n", ggml_type_name(wt));
                    rc = 1;
                    continue;
                }
                const std::string shape = std::string(ggml_type_name(wt)) + " m" + std::to_string(s.m) + " n" +
                                          std::to_string(s.n) + " k" + std::to_string(s.k);
                const double flops = 2.0 * (double) s.m * (double) s.n * (double) s.k;
                if (wt == GGML_TYPE_F32) f32_vk[si] = t_vk;
                report(o, {dn + " mul_mat", shape, t_vk, flops, false, "CPU backend", t_cpu, ""});
                report(o, {dn + " mul_mat", shape, t_vk, flops, false, "previous kernel", t_prev, ""});
                if (o.plain) report(o, {dn + " mul_mat", shape, t_vk, flops, false, "plain shader", t_plain, ""});
            }
        }

        for (ggml_type kvt : {GGML_TYPE_F16, GGML_TYPE_BF16}) {
            const int64_t  D = 128;
            const build_fn b = [&](ggml_context * c) {
                ggml_tensor * q = ggml_new_tensor_4d(c, GGML_TYPE_F32, D, fa_tokens, fa_heads, 1);
                ggml_tensor * k = ggml_new_tensor_4d(c, kvt, D, fa_tokens, fa_heads, 1);
                ggml_tensor * v = ggml_new_tensor_4d(c, kvt, D, fa_tokens, fa_heads, 1);
                return ggml_flash_attn_ext(c, q, k, v, nullptr, 1.0f / 11.3137f, 0.0f, 0.0f);
            };
            bool ok_vk, ok_cpu;
            const bench::timing t_vk  = time_graph(vk, b, o, &ok_vk);
            const bench::timing t_cpu = time_graph(cpu, b, o, &ok_cpu);
            if (!ok_vk || !ok_cpu) {
                fprintf(stderr, "bench-vulkan: flash_attn_ext could not run\n");
                rc = 1;
                continue;
            }
            const double flops = 4.0 * (double) D * (double) fa_tokens * (double) fa_tokens * (double) fa_heads;
            report(o, {dn + " flash_attn_ext", std::string(ggml_type_name(kvt)) + " d128 q=kv=" + std::to_string(fa_tokens) +
                                                   " h" + std::to_string(fa_heads),
                       t_vk, flops, false, "CPU backend", t_cpu, ""});
        }

        struct mem_case {
            const char * name;
            build_fn     b;
            double       bytes;
        };
        const mem_case mem[] = {
            {"add", [&](ggml_context * c) {
                 return ggml_add(c, ggml_new_tensor_1d(c, GGML_TYPE_F32, ew_n), ggml_new_tensor_1d(c, GGML_TYPE_F32, ew_n));
             }, 12.0 * (double) ew_n},
            {"cpy f32->f16", [&](ggml_context * c) {
                 return ggml_cpy(c, ggml_new_tensor_1d(c, GGML_TYPE_F32, ew_n), ggml_new_tensor_1d(c, GGML_TYPE_F16, ew_n));
             }, 6.0 * (double) ew_n},
        };
        for (const mem_case & m : mem) {
            bool ok_vk, ok_cpu;
            const bench::timing t_vk  = time_graph(vk, m.b, o, &ok_vk);
            const bench::timing t_cpu = time_graph(cpu, m.b, o, &ok_cpu);
            if (!ok_vk || !ok_cpu) {
                fprintf(stderr, "bench-vulkan: %s could not run\n", m.name);
                rc = 1;
                continue;
            }
            report(o, {dn + " " + m.name, "f32 n" + std::to_string(ew_n), t_vk, m.bytes, true, "CPU backend", t_cpu, ""});
        }
#ifdef BENCH_VK_HAVE_SD
        if (o.block) {
            bench_vk_sd::options so;
            so.smoke   = o.smoke;
            so.threads = o.threads;
            so.device  = d;
            so.hidden  = o.block_hidden;
            so.tokens  = o.block_tokens;
            std::vector<bench::row> sd_rows;
            if (!bench_vk_sd::int8_linear_rows(so, sd_rows)) rc = 1;
            if (!bench_vk_sd::krea2_block_rows(so, sd_rows)) rc = 1;
            for (const bench::row & row : sd_rows) report(o, row);
        }
#endif
        ggml_backend_free(vk);
    }
    ggml_backend_free(cpu);
    return rc;
}
