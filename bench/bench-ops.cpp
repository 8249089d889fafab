// bench-ops: times single ops of the DiT workloads on the CPU backend and reports each against a
// baseline measured in the same process: memory-bound ops against a multi-threaded memcpy of the
// same number of bytes (read + write), GEMMs as GFLOP/s against OpenBLAS sgemm on the same thread
// count (when bench-ops was built with OpenBLAS), and F16/BF16 weights also against our own F32
// GEMM of the same shape.
//
// Shapes (../shared/reference/dit-workloads.md): hidden 3072 (Flux) / 6144 (Krea2), 1024 tokens,
// attention D=128 with 24 heads.

#include "bench-util.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#ifdef BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace {

struct options {
    bool        smoke   = false;
    bool        json    = false;
    int         threads = 0; // 0: backend default
    std::string filter;
    double      min_time_s = 1.0;
};

void usage(const char * argv0) {
    printf("usage: %s [--smoke] [--json] [--threads N] [--filter TEXT] [--min-time SECONDS]\n"
           "\n"
           "Times single ops on the CPU backend at DiT workload sizes and prints a table with best and\n"
           "median times and a ratio against a baseline measured in the same run (memcpy of the same\n"
           "bytes for memory-bound ops; our F32 GEMM for F16/BF16-weight GEMMs).\n"
           "\n"
           "  --smoke         tiny shapes, one timed repetition (a quick check that everything runs)\n"
           "  --json          also print one JSON object per result\n"
           "  --threads N     CPU threads (default: all online CPUs)\n"
           "  --filter TEXT   only ops whose name contains TEXT\n"
           "  --min-time S    time each op for at least S seconds (default 1)\n",
           argv0);
}

bool parse_args(int argc, char ** argv, options & o) {
    bench::arg_reader r("bench-ops", argc, argv);
    while (r.next()) {
        if (r.is("--help") || r.is("-h")) {
            usage(argv[0]);
            exit(0);
        }
        if (r.flag("--smoke", o.smoke) || r.flag("--json", o.json) ||
            r.int_opt("--threads", 1, GGML_MAX_N_THREADS, o.threads) || r.string_opt("--filter", o.filter) ||
            r.double_opt("--min-time", 0, 600, o.min_time_s)) {
            continue;
        }
        return r.unknown();
    }
    return r.ok();
}

// One benchmark case: a graph with a single op node whose inputs are filled with random data.
struct op_case {
    std::string name;
    std::string shape;
    // builds the op; every tensor created through `input` is filled with random values
    std::function<ggml_tensor *(ggml_context *, const std::function<ggml_tensor *(ggml_tensor *)> & input)> build;
    enum kind { MEMORY, GEMM } k = MEMORY;
    double      flops            = 0;
    std::string gemm_f32_key; // for F16/BF16 GEMMs: the F32 case to compare with
    std::string gemm_f32_label = "our mul_mat_f32"; // how that baseline is named in the table
    int64_t     blas_K = 0, blas_N = 0, blas_M = 0; // mul_mat cases: shape for the OpenBLAS baseline
};

void fill_random(ggml_tensor * t, std::mt19937 & rng) {
    const int64_t               n = ggml_nelements(t);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float>          f(n);
    for (auto & v : f) v = dist(rng);
    std::vector<uint8_t> bytes(ggml_nbytes(t));
    switch (t->type) {
        case GGML_TYPE_F32: memcpy(bytes.data(), f.data(), n * sizeof(float)); break;
        case GGML_TYPE_F16: ggml_fp32_to_fp16_row(f.data(), (ggml_fp16_t *) bytes.data(), n); break;
        case GGML_TYPE_BF16: ggml_fp32_to_bf16_row_ref(f.data(), (ggml_bf16_t *) bytes.data(), n); break;
        case GGML_TYPE_I32: {
            auto * p = (int32_t *) bytes.data();
            for (int64_t i = 0; i < n; ++i) p[i] = (int32_t) (i % 4096);
            break;
        }
        default: fprintf(stderr, "bench-ops: no random fill for type %s\n", ggml_type_name(t->type)); exit(1);
    }
    ggml_backend_tensor_set(t, bytes.data(), 0, bytes.size());
}

// Multi-threaded memcpy of `bytes` on the backend's thread count: the bandwidth baseline.
struct memcpy_baseline {
    std::vector<uint8_t> src, dst;
    ggml_threadpool_t    pool = nullptr;
    int                  nth  = 1;

    memcpy_baseline(size_t bytes, int n_threads) : src(bytes, 1), dst(bytes, 0), nth(n_threads) {
        ggml_threadpool_params p = ggml_threadpool_params_default(n_threads);
        pool                     = ggml_threadpool_new(&p);
    }
    ~memcpy_baseline() { ggml_threadpool_free(pool); }

    void run() {
        ggml_threadpool_run(
            pool, nth,
            [](int ith, int nth, void * data) {
                auto * self  = (memcpy_baseline *) data;
                size_t n     = self->src.size();
                size_t chunk = (n + nth - 1) / nth;
                size_t b     = std::min(n, chunk * ith), e = std::min(n, b + chunk);
                if (e > b) memcpy(self->dst.data() + b, self->src.data() + b, e - b);
            },
            this);
    }
};

// OpenBLAS sgemm of the same product as mul_mat: out (M x N, row-major) = x (M x K) * w^T, with w
// (N x K) row-major, i.e. exactly ggml's layouts.
struct blas_baseline {
    int64_t            K, N, M;
    std::vector<float> w, x, out;
    blas_baseline(int64_t K_, int64_t N_, int64_t M_, std::mt19937 & rng)
        : K(K_), N(N_), M(M_), w(K_ * N_), x(K_ * M_), out(N_ * M_) {
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (auto & v : w) v = dist(rng);
        for (auto & v : x) v = dist(rng);
    }
    void run() {
#ifdef BENCH_HAVE_OPENBLAS
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int) M, (int) N, (int) K, 1.0f, x.data(), (int) K,
                    w.data(), (int) K, 0.0f, out.data(), (int) N);
#endif
    }
};

std::vector<op_case> make_cases(bool smoke) {
    std::vector<op_case> cases;
    // DiT sizes, or tiny ones for --smoke
    const int64_t tokens = smoke ? 16 : 1024;
    const int64_t hidden = smoke ? 64 : 3072;
    const int64_t heads  = smoke ? 2 : 24;
    const int64_t hd     = smoke ? 32 : 128;

    auto shape_str = [](std::initializer_list<int64_t> ne) {
        std::string s = "[";
        for (auto it = ne.begin(); it != ne.end(); ++it) s += (it == ne.begin() ? "" : ",") + std::to_string(*it);
        return s + "]";
    };

    // GEMM shapes (K, N, M): the Flux linears and the square Krea2-like one
    struct gemm_shape { int64_t K, N, M; };
    // (issue 3 targets: >= 0.9x OpenBLAS sgemm on these with 2 threads)
    std::vector<gemm_shape> gemms = smoke ? std::vector<gemm_shape>{{64, 48, 16}}
                                          : std::vector<gemm_shape>{{3072, 3072, 1024},
                                                                    {3072, 12288, 1024},
                                                                    {12288, 3072, 1024},
                                                                    {6144, 6144, 1024}};
    for (auto g : gemms) {
        for (ggml_type wt : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
            op_case c;
            c.name  = std::string("mul_mat_") + ggml_type_name(wt);
            c.shape = "K,N,M=" + std::to_string(g.K) + "," + std::to_string(g.N) + "," + std::to_string(g.M);
            c.k     = op_case::GEMM;
            c.flops = 2.0 * g.K * g.N * g.M;
            c.blas_K = g.K;
            c.blas_N = g.N;
            c.blas_M = g.M;
            if (wt != GGML_TYPE_F32) c.gemm_f32_key = std::string("mul_mat_f32") + c.shape;
            c.build = [g, wt](ggml_context * ctx, const std::function<ggml_tensor *(ggml_tensor *)> & input) {
                ggml_tensor * w = input(ggml_new_tensor_2d(ctx, wt, g.K, g.N));
                ggml_tensor * x = input(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, g.K, g.M));
                return ggml_mul_mat(ctx, w, x);
            };
            cases.push_back(c);
        }
    }

    // conv_2d at the SD VAE decoder's widest shape (512 -> 512 channels, 3x3, 128x128): upstream's
    // composition (im2col + our mul_mat, the whole im2col matrix materialised) against
    // conv_2d_direct (im2col tiles fed to the same GEMM); OpenBLAS sgemm of the im2col matrix
    // (im2col time not included) is the GEMM baseline.
    {
        const int64_t W = smoke ? 16 : 128, C = smoke ? 8 : 512, OC = smoke ? 8 : 512;
        const int64_t K = 9 * C, P = W * W;
        const std::string shape = "K,OC,pixels=" + std::to_string(K) + "," + std::to_string(OC) + "," + std::to_string(P);
        const std::string f32_key = std::string("conv_2d_im2col_mm_f32") + shape;
        struct variant { const char * name; bool direct; ggml_type kt; };
        for (variant v : {variant{"conv_2d_im2col_mm_f32", false, GGML_TYPE_F32}, variant{"conv_2d_im2col_mm_f16", false, GGML_TYPE_F16},
                          variant{"conv_2d_direct_f32", true, GGML_TYPE_F32}, variant{"conv_2d_direct_f16", true, GGML_TYPE_F16}}) {
            op_case c;
            c.name   = v.name;
            c.shape  = shape;
            c.k      = op_case::GEMM;
            c.flops  = 2.0 * K * OC * P;
            c.blas_K = K;
            c.blas_N = OC;
            c.blas_M = P;
            if (c.name != "conv_2d_im2col_mm_f32") {
                c.gemm_f32_key   = f32_key;
                c.gemm_f32_label = "im2col+mul_mat f32";
            }
            c.build = [=](ggml_context * ctx, const std::function<ggml_tensor *(ggml_tensor *)> & input) {
                ggml_tensor * k = input(ggml_new_tensor_4d(ctx, v.kt, 3, 3, C, OC));
                ggml_tensor * x = input(ggml_new_tensor_4d(ctx, GGML_TYPE_F32, W, W, C, 1));
                return v.direct ? ggml_conv_2d_direct(ctx, k, x, 1, 1, 1, 1, 1, 1) : ggml_conv_2d(ctx, k, x, 1, 1, 1, 1, 1, 1);
            };
            cases.push_back(c);
        }
    }

    {
        op_case c;
        c.name  = "flash_attn_ext_f16kv";
        c.shape = "D,tokens,heads=" + std::to_string(hd) + "," + std::to_string(tokens) + "," + std::to_string(heads);
        c.k     = op_case::GEMM;
        c.flops = 4.0 * hd * tokens * tokens * heads;
        c.build = [=](ggml_context * ctx, const std::function<ggml_tensor *(ggml_tensor *)> & input) {
            ggml_tensor * q = input(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hd, tokens, heads));
            ggml_tensor * k = input(ggml_new_tensor_3d(ctx, GGML_TYPE_F16, hd, tokens, heads));
            ggml_tensor * v = input(ggml_new_tensor_3d(ctx, GGML_TYPE_F16, hd, tokens, heads));
            return ggml_flash_attn_ext(ctx, q, k, v, nullptr, 1.0f / std::sqrt((float) hd), 0.0f, 0.0f);
        };
        cases.push_back(c);
    }

    // Memory-bound ops over one [hidden, L] activation, at two token counts: L = 1024 (24 MiB in +
    // out, resident in this machine's L3, so memcpy runs at cache speed and the transcendental ops
    // are compute-bound) and L = 4352, the Flux single-block sequence of a 1024x1024 image
    // (dit-workloads.md §3.2; 107 MiB in + out, memory-bound like the real workload). soft_max
    // ([L, L, heads]) only at the first: at 4352 it would be 1.8 GB.
    auto add_mem = [&](const std::string & name, const std::string & shape,
                       std::function<ggml_tensor *(ggml_context *, const std::function<ggml_tensor *(ggml_tensor *)> &)> b) {
        op_case c;
        c.name  = name;
        c.shape = shape;
        c.build = std::move(b);
        cases.push_back(c);
    };
    const std::vector<int64_t> token_counts = smoke ? std::vector<int64_t>{tokens} : std::vector<int64_t>{tokens, 4352};
    for (const int64_t tokens : token_counts) {
        auto act = [=](ggml_context * ctx, const std::function<ggml_tensor *(ggml_tensor *)> & input) {
            return input(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, hidden, tokens));
        };
        const std::string act_shape = shape_str({hidden, tokens});
        add_mem("rms_norm", act_shape, [=](auto * ctx, auto & in) { return ggml_rms_norm(ctx, act(ctx, in), 1e-5f); });
        add_mem("norm", act_shape, [=](auto * ctx, auto & in) { return ggml_norm(ctx, act(ctx, in), 1e-6f); });
        add_mem("add", act_shape, [=](auto * ctx, auto & in) { return ggml_add(ctx, act(ctx, in), act(ctx, in)); });
        add_mem("mul_bcast_row", act_shape + "*[" + std::to_string(hidden) + "]", [=](auto * ctx, auto & in) {
            return ggml_mul(ctx, act(ctx, in), in(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, hidden)));
        });
        add_mem("scale", act_shape, [=](auto * ctx, auto & in) { return ggml_scale(ctx, act(ctx, in), 0.5f); });
        add_mem("silu", act_shape, [=](auto * ctx, auto & in) { return ggml_silu(ctx, act(ctx, in)); });
        add_mem("gelu", act_shape, [=](auto * ctx, auto & in) { return ggml_gelu(ctx, act(ctx, in)); });
        add_mem("sigmoid", act_shape, [=](auto * ctx, auto & in) { return ggml_sigmoid(ctx, act(ctx, in)); });
        add_mem("swiglu", shape_str({2 * hidden, tokens}), [=](auto * ctx, auto & in) {
            return ggml_swiglu(ctx, in(ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 2 * hidden, tokens)));
        });
        add_mem("cpy_f32_f16", act_shape, [=](auto * ctx, auto & in) { return ggml_cast(ctx, act(ctx, in), GGML_TYPE_F16); });
        add_mem("cpy_f32_bf16", act_shape, [=](auto * ctx, auto & in) { return ggml_cast(ctx, act(ctx, in), GGML_TYPE_BF16); });
        add_mem("cpy_f16_f32", act_shape, [=](auto * ctx, auto & in) {
            return ggml_cast(ctx, in(ggml_new_tensor_2d(ctx, GGML_TYPE_F16, hidden, tokens)), GGML_TYPE_F32);
        });
        if (tokens == token_counts.front()) {
            add_mem("soft_max", shape_str({tokens, tokens, heads}), [=](auto * ctx, auto & in) {
                return ggml_soft_max_ext(ctx, in(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, tokens, tokens, heads)), nullptr,
                                         0.125f, 0.0f);
            });
        }
        add_mem("rope_neox", shape_str({hd, heads, tokens}), [=](auto * ctx, auto & in) {
            ggml_tensor * x   = in(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hd, heads, tokens));
            ggml_tensor * pos = in(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, tokens));
            return ggml_rope_ext(ctx, x, pos, nullptr, (int) hd, GGML_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f,
                                 0.0f, 0.0f);
        });
    }
    return cases;
}

} // namespace

int main(int argc, char ** argv) {
    options o;
    if (!parse_args(argc, argv, o)) return 2;
    if (o.smoke) o.min_time_s = 0;

    ggml_backend_t backend = ggml_backend_cpu_init();
    if (!backend) {
        fprintf(stderr, "bench-ops: could not create the CPU backend\n");
        return 1;
    }
    if (o.threads > 0) ggml_backend_cpu_set_n_threads(backend, o.threads);
    const int n_threads = ggml_backend_cpu_get_n_threads(backend);

    printf("bench-ops: CPU backend, %d threads%s\n", n_threads, o.smoke ? ", smoke sizes" : "");
    if (!o.smoke && !bench::wait_idle()) {
        printf("bench-ops: note: the machine stayed busy for 60 s; timings below share the CPU with other work\n");
    }
#ifdef BENCH_HAVE_OPENBLAS
    openblas_set_num_threads(n_threads);
    printf("bench-ops: GEMM baseline: OpenBLAS sgemm (%s), %d threads\n", openblas_get_config(), n_threads);
#else
    printf("bench-ops: GEMM baseline: OpenBLAS not found at configure time; no sgemm baseline "
           "(install libopenblas-dev and reconfigure)\n");
#endif
    bench::print_table_header();

    std::mt19937                       rng(42);
    std::vector<std::pair<std::string, bench::timing>> blas_done; // shape -> OpenBLAS timing
    std::vector<std::pair<std::string, bench::timing>> gemm_f32;
    int                                 n_run = 0;

    for (const op_case & c : make_cases(o.smoke)) {
        if (!o.filter.empty() && c.name.find(o.filter) == std::string::npos) continue;

#ifdef BENCH_HAVE_OPENBLAS
        if (c.blas_K > 0) {
            bool have = false;
            for (auto & kv : blas_done) have = have || kv.first == c.shape;
            if (!have) {
                blas_baseline bb(c.blas_K, c.blas_N, c.blas_M, rng);
                bench::row    rb;
                rb.op    = "sgemm_openblas";
                rb.shape = c.shape;
                rb.work  = c.flops;
                rb.t     = bench::time_it([&] { bb.run(); }, o.smoke ? 1 : 3, o.min_time_s, o.smoke ? 1 : 1000);
                blas_done.push_back({c.shape, rb.t});
                bench::print_row(rb);
                if (o.json) bench::print_json(rb);
                // OpenBLAS workers spin for a while after a call; let them park before timing ours
                if (!o.smoke) std::this_thread::sleep_for(std::chrono::milliseconds(300));
            }
        }
#endif
        ggml_init_params ip = {ggml_tensor_overhead() * 16 + ggml_graph_overhead(), nullptr, true};
        ggml_context *   ctx = ggml_init(ip);
        std::vector<ggml_tensor *> inputs;
        auto          input = [&](ggml_tensor * t) { inputs.push_back(t); return t; };
        ggml_tensor * out   = c.build(ctx, input);
        ggml_cgraph * gf    = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);

        // inputs live in their own buffer (like weights), the graph in a compute buffer
        ggml_backend_buffer_t in_buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
        ggml_gallocr_t        galloc = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend));
        if (!in_buf || !ggml_gallocr_alloc_graph(galloc, gf)) {
            fprintf(stderr, "bench-ops: %s: out of memory allocating the graph\n", c.name.c_str());
            return 1;
        }
        for (ggml_tensor * t : inputs) fill_random(t, rng);

        bench::row r;
        r.op    = c.name;
        r.shape = c.shape;
        bool ok = true;
        auto run = [&] { ok = ok && ggml_backend_graph_compute(backend, gf) == GGML_STATUS_SUCCESS; };
        const int min_reps = o.smoke ? 1 : 3;
        r.t = bench::time_it(run, min_reps, o.min_time_s, o.smoke ? 1 : 1000);
        if (!ok) {
            fprintf(stderr, "bench-ops: %s: graph compute failed\n", c.name.c_str());
            return 1;
        }

        bench::row r_vs_f32; // F16/BF16 weights: a second row against our F32 GEMM
        if (c.k == op_case::GEMM) {
            r.work = c.flops;
            if (c.gemm_f32_key.empty()) {
                gemm_f32.push_back({c.name + c.shape, r.t});
            } else {
                for (auto & [key, t] : gemm_f32) {
                    if (key == c.gemm_f32_key) {
                        r_vs_f32          = r;
                        r_vs_f32.baseline = c.gemm_f32_label;
                        r_vs_f32.base     = t;
                    }
                }
            }
#ifdef BENCH_HAVE_OPENBLAS
            if (c.blas_K > 0) {
                r.baseline = "openblas sgemm";
                for (auto & [key, t] : blas_done) {
                    if (key == c.shape) r.base = t;
                }
            }
#endif
        } else {
            size_t bytes = ggml_nbytes(out);
            for (ggml_tensor * t : inputs) bytes += ggml_nbytes(t);
            r.work     = (double) bytes;
            r.is_bytes = true;
            // a memcpy of bytes/2 reads and writes the same total number of bytes
            memcpy_baseline mb(bytes / 2, n_threads);
            r.baseline = "memcpy";
            r.base     = bench::time_it([&] { mb.run(); }, min_reps, o.min_time_s * 0.5, o.smoke ? 1 : 1000);
        }
        bench::print_row(r);
        if (o.json) bench::print_json(r);
        if (!r_vs_f32.baseline.empty()) {
            bench::print_row(r_vs_f32);
            if (o.json) bench::print_json(r_vs_f32);
        }
        ++n_run;

        ggml_gallocr_free(galloc);
        ggml_backend_buffer_free(in_buf);
        ggml_free(ctx);
    }
    ggml_backend_free(backend);
    if (n_run == 0) {
        fprintf(stderr, "bench-ops: no op matches --filter '%s'\n", o.filter.c_str());
        return 2;
    }
    return 0;
}
