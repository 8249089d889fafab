// bench-vulkan-sd: the sd Vulkan kernels (src/core/vulkan) at the Krea2 small-width shapes the
// lavapipe CI runs (hidden 512, 4 heads of 128, MLP 1024, 128 tokens), measured in one run:
//
//   single kernels   each sd Vulkan kernel vs the same node on the CPU backend (sd CPU kernels)
//   fusions          each Vulkan fusion vs the same nodes unfused on Vulkan (fusion off)
//   real-width GEMM  the INT8 linear at Krea2's real width (K = N = 3072, 256 tokens; --smoke:
//                    K = N = 256, 32 tokens) side by side with, all on the same device in this
//                    run: the CPU backend, the previous Vulkan INT8 kernel (SD_VK_LINEAR_I8=tile4),
//                    and the Vulkan F32 / F16 mul_mat of the same shape (the F32-weight block's
//                    GEMM) with its previous kernel (GGML_VK_MUL_MAT_DIRECT on lavapipe)
//
// Every measurement is a scheduler graph compute (submission and wait included) after a warm-up
// run (lavapipe compiles each pipeline on first use). Best and median of the repetitions.

#include "bench-util.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-vulkan.h"
#include "ggml.h"
#include "ggml_extensions.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

struct options {
    bool   smoke      = false;
    bool   json       = false;
    bool   real_only  = false; // only the real-width GEMM comparison
    bool   cpu_time   = false; // --cpu-clock: process CPU seconds / 2 instead of wall time
    double min_time_s = 1.0;
};

// A graph whose inputs live on one backend's buffer, scheduled over {that backend [, CPU]}.
struct graph_run {
    ggml_context *        ctx = nullptr, *ctx_in = nullptr;
    ggml_backend_buffer_t buf   = nullptr;
    ggml_backend_sched_t  sched = nullptr;
    ggml_cgraph *         gf    = nullptr;
    int                   fused = 0;
    ~graph_run() {
        if (sched) ggml_backend_sched_free(sched);
        if (buf) ggml_backend_buffer_free(buf);
        if (ctx) ggml_free(ctx);
        if (ctx_in) ggml_free(ctx_in);
    }
};

using builder = std::function<ggml_tensor *(ggml_context * ctx, ggml_context * in)>;

ggml_tensor * input(ggml_context * in, ggml_type t, std::vector<int64_t> ne) {
    ggml_tensor * x = ggml_new_tensor(in, t, (int) ne.size(), ne.data());
    ggml_set_input(x);
    return x;
}

bool prepare(graph_run & g, ggml_backend_t be, ggml_backend_t cpu, const builder & b) {
    ggml_init_params ip{128 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    g.ctx    = ggml_init(ip);
    g.ctx_in = ggml_init(ip);
    ggml_tensor * out = b(g.ctx, g.ctx_in);
    if (!out) return false;
    g.gf = ggml_new_graph(g.ctx);
    ggml_build_forward_expand(g.gf, out);
    g.buf = ggml_backend_alloc_ctx_tensors(g.ctx_in, be);
    std::mt19937 rng(1);
    for (ggml_tensor * t = ggml_get_first_tensor(g.ctx_in); t; t = ggml_get_next_tensor(g.ctx_in, t)) {
        std::vector<uint8_t> bytes(ggml_nbytes(t));
        if (t->type == GGML_TYPE_I8) {
            for (uint8_t & v : bytes) v = (uint8_t) (int8_t) ((int) (rng() % 255) - 127);
        } else {
            std::normal_distribution<float> nd(0.0f, 1.0f);
            for (size_t i = 0; i < bytes.size() / 4; ++i) ((float *) bytes.data())[i] = nd(rng) * 0.1f + 0.05f;
        }
        ggml_backend_tensor_set(t, bytes.data(), 0, bytes.size());
    }
    ggml_backend_t list[2] = {be, cpu};
    g.sched = ggml_backend_sched_new(list, nullptr, be == cpu ? 1 : 2, 256, false, true);
    if (!ggml_backend_sched_alloc_graph(g.sched, g.gf)) return false;
    for (int i = 0; i < ggml_ext_sched_n_steps(g.sched); ++i) {
        ggml_ext_step_info s{};
        if (ggml_ext_sched_get_step(g.sched, i, &s) && s.fused) ++g.fused;
    }
    return ggml_backend_sched_graph_compute(g.sched, g.gf) == GGML_STATUS_SUCCESS; // warm-up
}

// ---------------------------------------------------------------------------------------------
// The graphs (Krea2 small width)

constexpr int64_t H = 512, L = 128, MLP = 1024, D = 128, HEADS = 4;

ggml_tensor * quant_in(ggml_context * c, ggml_context * in, int64_t K) {
    return ggml_quantize_i8_convrot(c, input(in, GGML_TYPE_F32, {K, L}), 256);
}

// I8 activations [K, L] with their row scales (the GEMM alone, no quantizer in the graph)
struct act_i8 {
    ggml_tensor *x, *sx;
};
act_i8 activations(ggml_context * in, int64_t K) {
    return {input(in, GGML_TYPE_I8, {K, L}), input(in, GGML_TYPE_F32, {L})};
}

ggml_tensor * linear(ggml_context * c, ggml_context * in, const act_i8 & a, int64_t K, int64_t N) {
    return ggml_mul_mat_i8_tensorwise(c, input(in, GGML_TYPE_I8, {K, N}), a.x, input(in, GGML_TYPE_F32, {N}), nullptr, 0,
                                      a.sx);
}

struct bench_case {
    const char * name;
    const char * shape;
    bool         fusion; // true: fused vs unfused on Vulkan; false: Vulkan vs CPU
    builder      build;
    double       ops = 0; // integer multiply-adds x 2 (GEMMs), for the rate column
};

// One run of fn (already warmed up), in seconds: process CPU seconds / 2 with --cpu-clock (on a
// loaded machine the work's own CPU time, lavapipe's worker threads included), else wall time.
double once_s(const std::function<void()> & fn) {
    const auto now = [] {
        timespec ts{};
        clock_gettime(bench::cpu_clock() ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
    };
    const double t0 = now();
    fn();
    return (now() - t0) / (bench::cpu_clock() ? 2.0 : 1.0);
}

// The real-width comparison: one GEMM shape, each variant timed in this run.
struct gemm_variant {
    std::string label;
    bool        on_cpu;
    std::function<void(ggml_backend_t vk, bool on)> set; // switches the variant on / off (may be null)
    builder     build;
};

std::vector<bench_case> cases() {
    std::vector<bench_case> v;
    v.push_back({"quantize_i8_convrot", "[512, 128] G256", false,
                 [](ggml_context * c, ggml_context * in) { return quant_in(c, in, H); }});
    // the MLP-width row with the model's group and with the large groups of convert-to-quant's
    // dynamic mode (scratch rows in device memory: convrot_large.glsl)
    for (const int g : {256, 1024, 16384}) {
        static const std::string shapes[] = {"[16384, 128] G256", "[16384, 128] G1024", "[16384, 128] G16384"};
        v.push_back({"quantize_i8_convrot", shapes[g == 256 ? 0 : g == 1024 ? 1 : 2].c_str(), false,
                     [g](ggml_context * c, ggml_context * in) {
                         return ggml_quantize_i8_convrot(c, input(in, GGML_TYPE_F32, {16384, L}), g);
                     }});
    }
    v.push_back({"linear_i8 (I8 + scales)", "K512 N512 x128", false, [](ggml_context * c, ggml_context * in) {
                     return linear(c, in, activations(in, H), H, H);
                 }, 2.0 * H * H * L});
    v.push_back({"linear_i8 (I8 + scales)", "K1024 N512 x128", false, [](ggml_context * c, ggml_context * in) {
                     return linear(c, in, activations(in, MLP), MLP, H);
                 }, 2.0 * MLP * H * L});
    v.push_back({"rope_apply", "[128, 4, 128]", false, [](ggml_context * c, ggml_context * in) {
                     return sd_rope_apply(c, input(in, GGML_TYPE_F32, {D, HEADS, L}), input(in, GGML_TYPE_F32, {2, 2, 64, L}),
                                          SD_ROPE_INTERLEAVED);
                 }});
    v.push_back({"modulation -> ConvRot", "[512, 128]", true, [](ggml_context * c, ggml_context * in) {
                     ggml_tensor * h = ggml_mul(c, ggml_rms_norm(c, input(in, GGML_TYPE_F32, {H, L}), 1e-6f),
                                                input(in, GGML_TYPE_F32, {H}));
                     ggml_tensor * t = ggml_mul(c, h, input(in, GGML_TYPE_F32, {H, 1, 1}));
                     ggml_tensor * y = ggml_add(c, ggml_add(c, h, t), input(in, GGML_TYPE_F32, {H, 1, 1}));
                     return ggml_quantize_i8_convrot(c, y, 256);
                 }});
    v.push_back({"rms_norm -> mul -> rope -> f16", "[128, 4, 128]", true, [](ggml_context * c, ggml_context * in) {
                     ggml_tensor * x = input(in, GGML_TYPE_F32, {D, HEADS, L});
                     ggml_tensor * m = ggml_mul(c, ggml_rms_norm(c, x, 1e-6f), input(in, GGML_TYPE_F32, {D}));
                     ggml_tensor * r = sd_rope_apply(c, m, input(in, GGML_TYPE_F32, {2, 2, 64, L}), SD_ROPE_INTERLEAVED);
                     return ggml_cast(c, r, GGML_TYPE_F16);
                 }});
    v.push_back({"linear -> mul(gate) -> add(res)", "K512 N512 x128", true, [](ggml_context * c, ggml_context * in) {
                     ggml_tensor * y = linear(c, in, activations(in, H), H, H);
                     y               = ggml_mul(c, y, input(in, GGML_TYPE_F32, {H, 1, 1}));
                     return ggml_add(c, input(in, GGML_TYPE_F32, {H, L}), y);
                 }, 2.0 * H * H * L});
    v.push_back({"gemm -> swiglu -> ConvRot", "K512 N1024 x128", true, [](ggml_context * c, ggml_context * in) {
                     const act_i8  q = activations(in, H);
                     ggml_tensor * g = linear(c, in, q, H, MLP);
                     ggml_tensor * s = ggml_silu(c, g); // graph order: gate, SILU, up, MUL
                     ggml_tensor * u = linear(c, in, q, H, MLP);
                     ggml_tensor * y = ggml_mul(c, s, u);
                     return ggml_quantize_i8_convrot(c, y, 256);
                 }, 2.0 * 2.0 * H * MLP * L});
    return v;
}

} // namespace

int main(int argc, char ** argv) {
    options            o;
    bench::arg_reader  r("bench-vulkan-sd", argc, argv);
    while (r.next()) {
        if (r.is("--help") || r.is("-h")) {
            printf("usage: %s [--smoke] [--json] [--real-only] [--cpu-clock] [--min-time SECONDS]\n", argv[0]);
            return 0;
        }
        if (r.flag("--smoke", o.smoke) || r.flag("--json", o.json) || r.flag("--real-only", o.real_only) || r.flag("--cpu-clock", o.cpu_time) || r.double_opt("--min-time", 0.0, 600.0, o.min_time_s))
            continue;
        return r.unknown() ? 0 : 2;
    }
    if (!r.ok()) return 2;
    if (o.cpu_time) bench::set_cpu_clock(2);
    if (ggml_backend_vk_get_device_count() == 0) {
        fprintf(stderr, "bench-vulkan-sd: no Vulkan device\n");
        return 1;
    }
    if (!sd_ggml_register_extensions()) {
        fprintf(stderr, "bench-vulkan-sd: registering the sd extensions failed\n");
        return 1;
    }
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t vk  = ggml_backend_vk_init(0);
    if (!o.smoke && !bench::wait_idle()) printf("bench-vulkan-sd: warning: the machine did not become idle\n");
    const int    min_reps = o.smoke ? 1 : 5, max_reps = o.smoke ? 1 : 200;
    const double min_time = o.smoke ? 0.0 : o.min_time_s;

    std::vector<bench::row> rows;
    int                     failures = 0;
    for (const bench_case & bc : cases()) {
        if (o.real_only) break;
        graph_run a, base;
        bool      ok = prepare(a, vk, cpu, bc.build);
        if (bc.fusion) {
            sd_ggml_set_fusion_enabled(false);
            ok = ok && prepare(base, vk, cpu, bc.build);
            sd_ggml_set_fusion_enabled(true);
            ok = ok && a.fused > 0 && base.fused == 0;
        } else {
            ok = ok && prepare(base, cpu, cpu, bc.build);
        }
        if (!ok) {
            fprintf(stderr, "bench-vulkan-sd: %s: preparation failed (or the fusion did not apply)\n", bc.name);
            ++failures;
            continue;
        }
        bench::row row;
        row.op       = bc.name;
        row.shape    = bc.shape;
        row.baseline = bc.fusion ? "unfused (Vulkan)" : "CPU kernel";
        row.kernel   = "Vulkan (lavapipe)";
        row.work     = bc.ops;
        row.base     = bench::time_it([&] { ggml_backend_sched_graph_compute(base.sched, base.gf); }, min_reps, min_time, max_reps);
        row.t        = bench::time_it([&] { ggml_backend_sched_graph_compute(a.sched, a.gf); }, min_reps, min_time, max_reps);
        rows.push_back(row);
    }
    // Real-width GEMMs: the INT8 linear vs everything else at one shape. Fewer repetitions (the
    // previous kernels take seconds per call at this size on lavapipe).
    {
        const int64_t K = o.smoke ? 256 : 3072, N = K, T = o.smoke ? 32 : 256;
        const std::string shape = "K" + std::to_string(K) + " N" + std::to_string(N) + " x" + std::to_string(T);
        const builder i8 = [=](ggml_context * c, ggml_context * in) {
            return ggml_mul_mat_i8_tensorwise(c, input(in, GGML_TYPE_I8, {K, N}), input(in, GGML_TYPE_I8, {K, T}),
                                              input(in, GGML_TYPE_F32, {N}), nullptr, 0, input(in, GGML_TYPE_F32, {T}));
        };
        const auto fgemm = [=](ggml_type wt) {
            return builder([=](ggml_context * c, ggml_context * in) {
                return ggml_mul_mat(c, input(in, wt, {K, N}), input(in, GGML_TYPE_F32, {K, T}));
            });
        };
        const auto env = [](const char * v) {
            return [v](ggml_backend_t, bool on) {
                if (on) setenv("SD_VK_LINEAR_I8", v, 1);
                else unsetenv("SD_VK_LINEAR_I8");
            };
        };
        const auto prev_mm = [](ggml_backend_t b, bool on) {
            ggml_backend_vk_set_mul_mat_kernel(b, on ? GGML_VK_MUL_MAT_DIRECT : GGML_VK_MUL_MAT_AUTO);
        };
        const std::vector<gemm_variant> vs = {
            {"INT8 linear, Vulkan (default kernel)", false, nullptr, i8},
            {"INT8 linear, CPU backend", true, nullptr, i8},
            {"INT8 linear, previous Vulkan kernel", false, env("tile4"), i8},
            {"INT8 linear, F32-chunk multiply-add", false, env("sg-f32"), i8},
            {"F32 mul_mat, Vulkan", false, nullptr, fgemm(GGML_TYPE_F32)},
            {"F32 mul_mat, previous Vulkan kernel", false, prev_mm, fgemm(GGML_TYPE_F32)},
            {"F16 mul_mat, Vulkan", false, nullptr, fgemm(GGML_TYPE_F16)},
            {"F32 mul_mat, CPU backend", true, nullptr, fgemm(GGML_TYPE_F32)},
        };
        // Interleaved rounds (each round runs every variant once) so that a loaded machine's
        // swings hit all variants alike; best and median per variant over the rounds.
        std::vector<std::unique_ptr<graph_run>> gs;
        bool ok_all = true;
        for (const gemm_variant & v : vs) {
            gs.push_back(std::make_unique<graph_run>());
            if (v.set) v.set(vk, true);
            const bool ok = prepare(*gs.back(), v.on_cpu ? cpu : vk, cpu, v.build);
            if (v.set) v.set(vk, false);
            if (!ok) {
                fprintf(stderr, "bench-vulkan-sd: %s: preparation failed\n", v.label.c_str());
                ok_all = false;
            }
        }
        if (!ok_all) {
            ++failures;
        } else {
            const int rounds = o.smoke ? 1 : 3;
            std::vector<std::vector<double>> ms(vs.size());
            for (int round = 0; round < rounds; ++round) {
                for (size_t i = 0; i < vs.size(); ++i) {
                    if (vs[i].set) vs[i].set(vk, true);
                    graph_run & g = *gs[i];
                    ms[i].push_back(once_s([&] { ggml_backend_sched_graph_compute(g.sched, g.gf); }));
                    if (vs[i].set) vs[i].set(vk, false);
                }
            }
            const auto summary = [](std::vector<double> v) {
                std::sort(v.begin(), v.end());
                bench::timing t{};
                t.best_s   = v.front();
                t.median_s = v[v.size() / 2];
                t.reps     = (int) v.size();
                return t;
            };
            const bench::timing t_i8 = summary(ms[0]);
            for (size_t i = 1; i < vs.size(); ++i) {
                bench::row row;
                row.op       = "linear_i8 real width";
                row.shape    = shape;
                row.baseline = vs[i].label;
                row.kernel   = "Vulkan INT8 (default kernel)";
                row.work     = 2.0 * (double) K * (double) N * (double) T;
                row.t        = t_i8;
                row.base     = summary(ms[i]);
                rows.push_back(row);
            }
        }
    }

    bench::print_table_header();
    for (const bench::row & row : rows) bench::print_row(row);
    if (o.json)
        for (const bench::row & row : rows) bench::print_json(row);
    ggml_backend_free(vk);
    ggml_backend_free(cpu);
    return failures == 0 ? 0 : 1;
}
