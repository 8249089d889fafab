// bench-vulkan-krea2.cpp — see bench-vulkan-krea2.h. Every comparison is timed in interleaved
// rounds (each round runs every variant once) after a warm-up run of each variant (lavapipe
// compiles a pipeline on first use), so a loaded machine's swings hit all variants alike; best
// and median per variant over the rounds, by bench::cpu_clock()'s clock.

#include "bench-vulkan-krea2.h"

#include "model/krea2.h"
#include "model/runner.h"

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-vulkan.h"
#include "ggml.h"
#include "ggml_extensions.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace bench_vk_sd {

namespace {

double now_s() {
    timespec ts{};
    clock_gettime(bench::cpu_clock() ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

// The divisor of process CPU seconds under the CPU clock: lavapipe's and the CPU backend's
// worker threads are this process's threads, one per core.
double cpu_clock_div() {
    const unsigned n = std::thread::hardware_concurrency();
    return bench::cpu_clock() ? (double) (n ? n : 1) : 1.0;
}

bench::timing summary(std::vector<double> v) {
    bench::timing t{};
    if (v.empty()) return t;
    std::sort(v.begin(), v.end());
    t.best_s   = v.front();
    t.median_s = v[v.size() / 2];
    t.reps     = (int) v.size();
    return t;
}

// Sets SD_VK_LINEAR_I8 (read per dispatch by the sd Vulkan INT8 GEMM) for a scope: "tile4" is
// the previous kernel (one 4x4 tile per invocation).
struct linear_kernel_scope {
    explicit linear_kernel_scope(const char * v) {
        if (v) setenv("SD_VK_LINEAR_I8", v, 1);
        else unsetenv("SD_VK_LINEAR_I8");
    }
    ~linear_kernel_scope() { unsetenv("SD_VK_LINEAR_I8"); }
};

// ---------------------------------------------------------------------------------------------
// The INT8 ConvRot linear: one graph per variant, scheduled over {backend, CPU}.

struct sched_graph {
    ggml_context *        ctx = nullptr, *ctx_in = nullptr;
    ggml_backend_buffer_t buf   = nullptr;
    ggml_backend_sched_t  sched = nullptr;
    ggml_cgraph *         gf    = nullptr;
    ~sched_graph() {
        if (sched) ggml_backend_sched_free(sched);
        if (buf) ggml_backend_buffer_free(buf);
        if (ctx) ggml_free(ctx);
        if (ctx_in) ggml_free(ctx_in);
    }
    bool compute() { return ggml_backend_sched_graph_compute(sched, gf) == GGML_STATUS_SUCCESS; }
};

// y = linear_i8(W [K, N] INT8 + per-row scale, x [K, T] F32 quantized with ConvRot G = 256)
bool prepare_linear(sched_graph & g, ggml_backend_t be, ggml_backend_t cpu, int64_t K, int64_t N, int64_t T) {
    ggml_init_params ip{16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
    g.ctx            = ggml_init(ip);
    g.ctx_in         = ggml_init(ip);
    ggml_tensor * w  = ggml_new_tensor_2d(g.ctx_in, GGML_TYPE_I8, K, N);
    ggml_tensor * sw = ggml_new_tensor_1d(g.ctx_in, GGML_TYPE_F32, N);
    ggml_tensor * x  = ggml_new_tensor_2d(g.ctx_in, GGML_TYPE_F32, K, T);
    ggml_tensor * y  = ggml_mul_mat_i8_tensorwise(g.ctx, w, x, sw, nullptr, 256);
    if (!y) return false;
    g.gf = ggml_new_graph(g.ctx);
    ggml_build_forward_expand(g.gf, y);
    g.buf = ggml_backend_alloc_ctx_tensors(g.ctx_in, be);
    if (!g.buf) return false;
    std::mt19937                    rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<int8_t>             wb((size_t) (K * N));
    for (int8_t & v : wb) v = (int8_t) ((int) (rng() % 255) - 127);
    ggml_backend_tensor_set(w, wb.data(), 0, wb.size());
    std::vector<float> f((size_t) (K * T));
    for (float & v : f) v = nd(rng);
    ggml_backend_tensor_set(x, f.data(), 0, ggml_nbytes(x));
    std::vector<float> s((size_t) N, 1.0f / 127.0f);
    ggml_backend_tensor_set(sw, s.data(), 0, ggml_nbytes(sw));
    ggml_backend_t list[2] = {be, cpu};
    g.sched                = ggml_backend_sched_new(list, nullptr, be == cpu ? 1 : 2, 64, false, true);
    return ggml_backend_sched_alloc_graph(g.sched, g.gf) && g.compute(); // the warm-up run
}

// ---------------------------------------------------------------------------------------------
// The Krea2 block

krea2::config block_config(const options & o) {
    krea2::config c;
    c.hidden      = o.smoke ? 256 : o.hidden;
    c.heads       = c.hidden / krea2::HEAD_DIM;
    c.kv_heads    = c.heads % 4 == 0 ? c.heads / 4 : 1;
    // the model's SwiGLU width rule, ceil128((2 hidden / 3) * 4): 16384 at hidden 6144
    c.mlp         = ((2 * c.hidden / 3) * 4 + 127) / 128 * 128;
    c.blocks      = 1;
    c.tokens      = o.smoke ? 24 : o.tokens;
    c.text_tokens = c.tokens / 4;
    return c;
}

// Multiply-adds x 2 of the block's eight linears (the rate column; attention not counted).
double block_linear_flops(const krea2::config & c) {
    const double h = (double) c.hidden, kv = (double) (c.kv_heads * krea2::HEAD_DIM), m = (double) c.mlp;
    return 2.0 * (double) c.tokens * (h * (3 * h + 2 * kv) + 3 * h * m);
}

// One block variant: a runner (CPU or Vulkan), a model in the runner's memory, and the SD_VK_LINEAR_I8
// value it runs with (NULL: the default kernel).
struct block_variant {
    std::string                    label;
    krea2::runner *                run    = nullptr;
    std::shared_ptr<krea2::model>  model;
    const char *                   kernel = nullptr;
    std::vector<double>            times;
    block_variant(std::string l, krea2::runner * r, const char * k = nullptr) : label(std::move(l)), run(r), kernel(k) {}
};

bool forward_once(block_variant & v, const std::vector<float> & x, const std::vector<float> & tvec, double * t) {
    linear_kernel_scope          k(v.kernel);
    const krea2::build_options   bo;
    krea2::runner::result        r;
    std::string                  err;
    if (!v.run->forward(*v.model, bo, x, tvec, r, err)) {
        fprintf(stderr, "bench-vulkan: Krea2 block (%s): %s\n", v.label.c_str(), err.c_str());
        return false;
    }
    if (t) *t = bench::cpu_clock() ? r.cpu_s / cpu_clock_div() : r.total_s;
    return true;
}

// Warm-up, then `rounds` interleaved timed runs of every variant.
bool time_variants(std::vector<block_variant *> vs, int rounds, const std::vector<float> & x,
                   const std::vector<float> & tvec) {
    for (block_variant * v : vs)
        if (!forward_once(*v, x, tvec, nullptr)) return false;
    for (int r = 0; r < rounds; ++r) {
        for (block_variant * v : vs) {
            double t = 0;
            if (!forward_once(*v, x, tvec, &t)) return false;
            v->times.push_back(t);
        }
    }
    return true;
}

std::shared_ptr<krea2::model> load_model(const krea2::config & c, krea2::wtype type, ggml_backend_buffer_type_t buft) {
    auto                    m = std::make_shared<krea2::model>();
    krea2::synthetic_source src(42);
    std::string             err;
    if (!m->load(c, type, &src, err) || (buft && !m->move_to(buft, err))) {
        fprintf(stderr, "bench-vulkan: Krea2 block (%s weights): %s\n", krea2::wtype_name(type), err.c_str());
        return nullptr;
    }
    return m;
}

} // namespace

bool int8_linear_rows(const options & o, std::vector<bench::row> & out) {
    const int64_t K = o.smoke ? 256 : 3072, N = K, T = o.smoke ? 32 : 256;
    if (!sd_ggml_register_extensions()) {
        fprintf(stderr, "bench-vulkan: registering the sd extensions failed\n");
        return false;
    }
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_t vk  = ggml_backend_vk_init(o.device);
    if (!cpu || !vk) {
        if (cpu) ggml_backend_free(cpu);
        if (vk) ggml_backend_free(vk);
        return false;
    }
    if (o.threads > 0) ggml_backend_cpu_set_n_threads(cpu, o.threads);
    bool ok = true;
    {
        sched_graph on_vk, on_prev, on_cpu;
        ok = prepare_linear(on_vk, vk, cpu, K, N, T) && prepare_linear(on_cpu, cpu, cpu, K, N, T);
        {
            linear_kernel_scope prev("tile4");
            ok = ok && prepare_linear(on_prev, vk, cpu, K, N, T);
        }
        std::vector<double> tv, tp, tc;
        const double        div = cpu_clock_div();
        for (int r = 0; ok && r < (o.smoke ? 1 : o.rounds); ++r) {
            double t0 = now_s();
            ok        = on_vk.compute();
            tv.push_back((now_s() - t0) / div);
            {
                linear_kernel_scope prev("tile4");
                t0 = now_s();
                ok = ok && on_prev.compute();
                tp.push_back((now_s() - t0) / div);
            }
            t0 = now_s();
            ok = ok && on_cpu.compute();
            tc.push_back((now_s() - t0) / div);
        }
        if (ok) {
            const std::string shape = "K" + std::to_string(K) + " N" + std::to_string(N) + " x" + std::to_string(T) + " G256";
            const std::string dn    = ggml_backend_name(vk);
            const double      flops = 2.0 * (double) K * (double) N * (double) T;
            out.push_back({dn + " i8 ConvRot", shape, summary(tv), flops, false, "CPU backend", summary(tc), ""});
            out.push_back({dn + " i8 ConvRot", shape, summary(tv), flops, false, "previous kernel", summary(tp), ""});
        } else {
            fprintf(stderr, "bench-vulkan: the INT8 ConvRot linear could not run\n");
        }
    }
    ggml_backend_free(vk);
    ggml_backend_free(cpu);
    return ok;
}

bool krea2_block_rows(const options & o, std::vector<bench::row> & out) {
    const krea2::config c = block_config(o);
    const std::string   why = c.validate();
    if (!why.empty()) {
        fprintf(stderr, "bench-vulkan: Krea2 block: %s\n", why.c_str());
        return false;
    }
    krea2::runner cpu, vk;
    std::string   err;
    if (!cpu.init(o.threads, err, "cpu") || !vk.init(o.threads, err, "vulkan:" + std::to_string(o.device))) {
        fprintf(stderr, "bench-vulkan: Krea2 block: %s\n", err.c_str());
        return false;
    }
    const std::vector<float> x = krea2::synthetic_input(c, 42), tvec = krea2::synthetic_tvec(c, 42);
    const int                rounds = o.smoke ? 1 : o.rounds;

    // The CPU blocks first (their host weights are freed before the device copies are made, so
    // at most one F32 copy of the weights exists at a time), then the Vulkan variants together.
    block_variant cpu_f32{"CPU F32", &cpu}, cpu_i8{"CPU INT8", &cpu};
    block_variant vk_f32{"Vulkan F32", &vk}, vk_i8{"Vulkan INT8", &vk}, vk_prev{"Vulkan INT8 tile4", &vk, "tile4"};
    if (!(cpu_f32.model = load_model(c, krea2::wtype::f32, nullptr))) return false;
    if (!time_variants({&cpu_f32}, rounds, x, tvec)) return false;
    cpu_f32.model.reset();
    if (!(cpu_i8.model = load_model(c, krea2::wtype::int8, nullptr))) return false;
    if (!time_variants({&cpu_i8}, rounds, x, tvec)) return false;
    cpu_i8.model.reset();
    if (!(vk_f32.model = load_model(c, krea2::wtype::f32, vk.weight_buffer_type()))) return false;
    if (!(vk_i8.model = load_model(c, krea2::wtype::int8, vk.weight_buffer_type()))) return false;
    vk_prev.model = vk_i8.model;
    if (!time_variants({&vk_f32, &vk_i8, &vk_prev}, rounds, x, tvec)) return false;

    const std::string shape = "Krea2 h" + std::to_string(c.hidden) + " mlp" + std::to_string(c.mlp) + " L" +
                              std::to_string(c.tokens) + " G" + std::to_string(c.group);
    const std::string dn    = "Vulkan" + std::to_string(o.device);
    const double      flops = block_linear_flops(c);
    const bench::timing t_i8 = summary(vk_i8.times), t_f32 = summary(vk_f32.times);
    out.push_back({dn + " block INT8", shape, t_i8, flops, false, "Vulkan F32 block", t_f32, ""});
    out.push_back({dn + " block INT8", shape, t_i8, flops, false, "CPU backend", summary(cpu_i8.times), ""});
    out.push_back({dn + " block INT8", shape, t_i8, flops, false, "previous kernel", summary(vk_prev.times), ""});
    out.push_back({dn + " block F32", shape, t_f32, flops, false, "CPU backend", summary(cpu_f32.times), ""});
    return true;
}

} // namespace bench_vk_sd
