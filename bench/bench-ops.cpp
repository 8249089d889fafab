// bench-ops: times single ops of the DiT workloads on the CPU backend and reports each against a
// baseline measured in the same process: memory-bound ops against a multi-threaded memcpy of the
// same number of bytes (read + write), GEMMs as GFLOP/s against OpenBLAS sgemm on the same thread
// count (when bench-ops was built with OpenBLAS), and F16/BF16 and block-quantized weights (Q8_0 ...
// Q6_K, activations quantized inside the op as upstream does) also against our own F32 GEMM of the
// same shape.
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
    bool        smoke     = false;
    bool        calibrate = false;
    bool        cpu_time  = false;
    bool        json    = false;
    int         threads = 0; // 0: backend default
    std::string filter;
    double      min_time_s = 1.0;
};

void usage(const char * argv0) {
    printf("usage: %s [--smoke] [--json] [--threads N] [--filter TEXT] [--min-time SECONDS] [--calibrate]\n"
           "       [--cpu-time]\n"
           "\n"
           "Times single ops on the CPU backend at DiT workload sizes and prints a table with best and\n"
           "median times and a ratio against a baseline measured in the same run (memcpy of the same\n"
           "bytes for memory-bound ops; our F32 GEMM for F16/BF16-weight GEMMs).\n"
           "\n"
           "  --smoke         tiny shapes, one timed repetition (a quick check that everything runs)\n"
           "  --json          also print one JSON object per result\n"
           "  --threads N     CPU threads (default: all online CPUs)\n"
           "  --filter TEXT   only ops whose name contains TEXT\n"
           "  --min-time S    time each op for at least S seconds (default 1)\n"
           "  --calibrate     time each op family with interchangeable kernels (BF16 mul_mat, flash\n"
           "                  attention) with every kernel this CPU can run, and print the kernel-table\n"
           "                  row for this CPU (ggml/src/ggml-cpu/kernel-choice.cpp)\n"
           "  --cpu-time      time by the process's CPU seconds / threads instead of wall-clock time\n"
           "                  (for a machine shared with other work; idle spinning of the thread\n"
           "                  pools counts, OpenBLAS's more than ours)\n"
           "\n"
           "Every row names the kernel that produced it (last column); GGML_CPU_KERNEL=... overrides\n"
           "the table's choice (see ggml-cpu.h, ggml_cpu_set_kernel_override).\n",
           argv0);
}

bool parse_args(int argc, char ** argv, options & o) {
    bench::arg_reader r("bench-ops", argc, argv);
    while (r.next()) {
        if (r.is("--help") || r.is("-h")) {
            usage(argv[0]);
            exit(0);
        }
        if (r.flag("--smoke", o.smoke) || r.flag("--json", o.json) || r.flag("--calibrate", o.calibrate) ||
            r.flag("--cpu-time", o.cpu_time) ||
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
    std::string compare_key;   // name + shape of an earlier case to compare with (a second row)
    std::string compare_label; // what that comparison is, e.g. "our mul_mat_f32"
    int64_t     blas_K = 0, blas_N = 0, blas_M = 0; // mul_mat cases: shape for the OpenBLAS baseline
    bool        once = false; // timed once (the portable quantized kernels: minutes per run at DiT sizes)
};

// Whether the CPU backend runs MUL_MAT with `wt` weights on a portable kernel here (what
// ggml_backend_cpu_node_kernel says for such a node; no data needed).
bool portable_mul_mat(ggml_type wt, int64_t K) {
    ggml_init_params ip  = {ggml_tensor_overhead() * 4, nullptr, true};
    ggml_context *   ctx = ggml_init(ip);
    ggml_tensor *    mm  = ggml_mul_mat(ctx, ggml_new_tensor_2d(ctx, wt, K, 8), ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, 8));
    const bool       p   = strncmp(ggml_backend_cpu_node_kernel(nullptr, mm), "portable", 8) == 0;
    ggml_free(ctx);
    return p;
}

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
        default:
            if (ggml_is_quantized(t->type) && t->ne[0] % ggml_blck_size(t->type) == 0) {
                // the reference quantizer, rows of ne0 (weights are contiguous)
                ggml_quantize_chunk(t->type, f.data(), bytes.data(), 0, n / t->ne[0], t->ne[0], nullptr);
                break;
            }
            fprintf(stderr, "bench-ops: no random fill for type %s\n", ggml_type_name(t->type));
            exit(1);
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

    // GEMM shapes (K, N, M): the Flux linears (the fused QKV projection of 256 text tokens too) and
    // the square Krea2-like one
    struct gemm_shape { int64_t K, N, M; };
    // (issue 3 targets: >= 0.9x OpenBLAS sgemm on these with 2 threads)
    std::vector<gemm_shape> gemms = smoke ? std::vector<gemm_shape>{{64, 48, 16}}
                                          : std::vector<gemm_shape>{{3072, 3072, 1024},
                                                                    {3072, 12288, 1024},
                                                                    {12288, 3072, 1024},
                                                                    {3072, 9216, 256},
                                                                    {6144, 6144, 1024}};
    for (auto g : gemms) {
        // block-quantized weights (issue 14): activations quantized to the dot type inside the op
        for (ggml_type wt : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0,
                             GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,
                             GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K}) {
            // quantized weights at the square DiT shapes (3072 and 6144 wide, 1024 rows): the types
            // without a fast kernel run the portable reference dot product at ~1-10 GFLOP/s
            if (ggml_is_quantized(wt) && ((g.K != g.N && !smoke) || g.K % ggml_blck_size(wt) != 0)) continue;
            // types without a fast kernel: once, at the first (3072-wide) shape only
            const bool slow = ggml_is_quantized(wt) && portable_mul_mat(wt, g.K);
            if (slow && !smoke && g.K != gemms[0].K) continue;
            if (ggml_get_type_traits(wt)->type_name == nullptr) {
                if (g.K == gemms[0].K && g.N == gemms[0].N) {
                    fprintf(stderr, "bench-ops: weight type %d not implemented in this build: no mul_mat row\n", (int) wt);
                }
                continue;
            }
            op_case c;
            c.once  = slow;
            c.name  = std::string("mul_mat_") + ggml_type_name(wt);
            c.shape = "K,N,M=" + std::to_string(g.K) + "," + std::to_string(g.N) + "," + std::to_string(g.M);
            c.k     = op_case::GEMM;
            c.flops = 2.0 * g.K * g.N * g.M;
            c.blas_K = g.K;
            c.blas_N = g.N;
            c.blas_M = g.M;
            if (wt != GGML_TYPE_F32) {
                c.compare_key   = std::string("mul_mat_f32") + c.shape;
                c.compare_label = "our mul_mat_f32";
            }
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
                c.compare_key   = f32_key;
                c.compare_label = "im2col+mul_mat f32";
            }
            c.build = [=](ggml_context * ctx, const std::function<ggml_tensor *(ggml_tensor *)> & input) {
                ggml_tensor * k = input(ggml_new_tensor_4d(ctx, v.kt, 3, 3, C, OC));
                ggml_tensor * x = input(ggml_new_tensor_4d(ctx, GGML_TYPE_F32, W, W, C, 1));
                return v.direct ? ggml_conv_2d_direct(ctx, k, x, 1, 1, 1, 1, 1, 1) : ggml_conv_2d(ctx, k, x, 1, 1, 1, 1, 1, 1);
            };
            cases.push_back(c);
        }
    }

    // Attention at the DiT shape: the unfused chain (the model's fallback: mul_mat, soft_max,
    // mul_mat on the transposed V, as in src/core/attention.cpp) first, then flash attention
    // compared with it, for F16, BF16 and F32 K/V, each at the default precision and with
    // GGML_PREC_F32 (what the Krea2 model and stable-diffusion.cpp request)
    const std::string attn_shape =
        "D,tokens,heads=" + std::to_string(hd) + "," + std::to_string(tokens) + "," + std::to_string(heads);
    for (ggml_type kv : {GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_F32}) {
        const std::string kvs = std::string(ggml_type_name(kv)) + "kv";
        op_case chain;
        chain.name  = "attn_unfused_" + kvs;
        chain.shape = attn_shape;
        chain.k     = op_case::GEMM;
        chain.flops = 4.0 * hd * tokens * tokens * heads;
        chain.build = [=](ggml_context * ctx, const std::function<ggml_tensor *(ggml_tensor *)> & input) {
            ggml_tensor * q  = input(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hd, tokens, heads));
            ggml_tensor * k  = input(ggml_new_tensor_3d(ctx, kv, hd, tokens, heads));
            ggml_tensor * v  = input(ggml_new_tensor_3d(ctx, kv, hd, tokens, heads));
            ggml_tensor * kq = ggml_soft_max_ext(ctx, ggml_mul_mat(ctx, k, q), nullptr, 1.0f / std::sqrt((float) hd), 0.0f);
            ggml_tensor * vt = ggml_cont(ctx, ggml_permute(ctx, v, 1, 0, 2, 3));
            return ggml_cont(ctx, ggml_permute(ctx, ggml_mul_mat(ctx, vt, kq), 0, 2, 1, 3));
        };
        cases.push_back(chain);
        for (ggml_prec prec : {GGML_PREC_DEFAULT, GGML_PREC_F32}) {
            op_case c;
            c.name          = "flash_attn_ext_" + kvs + (prec == GGML_PREC_F32 ? "_precf32" : "");
            c.shape         = attn_shape;
            c.k             = op_case::GEMM;
            c.flops         = chain.flops;
            c.compare_key   = chain.name + chain.shape;
            c.compare_label = "unfused chain";
            c.build = [=](ggml_context * ctx, const std::function<ggml_tensor *(ggml_tensor *)> & input) {
                ggml_tensor * q = input(ggml_new_tensor_3d(ctx, GGML_TYPE_F32, hd, tokens, heads));
                ggml_tensor * k = input(ggml_new_tensor_3d(ctx, kv, hd, tokens, heads));
                ggml_tensor * v = input(ggml_new_tensor_3d(ctx, kv, hd, tokens, heads));
                ggml_tensor * o = ggml_flash_attn_ext(ctx, q, k, v, nullptr, 1.0f / std::sqrt((float) hd), 0.0f, 0.0f);
                ggml_flash_attn_ext_set_prec(o, prec);
                return o;
            };
            cases.push_back(c);
        }
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


// Which kernels ran the node's MUL_MAT / FLASH_ATTN_EXT nodes ("+"-joined, in graph order).
std::string kernels_of(ggml_backend_t backend, ggml_cgraph * gf) {
    std::string s;
    for (int i = 0; i < ggml_graph_n_nodes(gf); ++i) {
        ggml_tensor * n = ggml_graph_node(gf, i);
        if (n->op != GGML_OP_MUL_MAT && n->op != GGML_OP_FLASH_ATTN_EXT) continue;
        const std::string k = std::string(ggml_op_name(n->op)) + ": " + ggml_backend_cpu_node_kernel(backend, n);
        if (s.find(k) == std::string::npos) s += (s.empty() ? "" : " + ") + k;
    }
    return s;
}

// Builds a case's graph, fills its inputs and times it; r gets op, shape, timing and kernel.
bool time_case(ggml_backend_t backend, const op_case & c, const options & o, std::mt19937 & rng, bench::row & r) {
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
    bool                  ok     = in_buf && ggml_gallocr_alloc_graph(galloc, gf);
    if (!ok) {
        fprintf(stderr, "bench-ops: %s: out of memory allocating the graph\n", c.name.c_str());
    } else {
        for (ggml_tensor * t : inputs) fill_random(t, rng);
        r.op     = c.name;
        r.shape  = c.shape;
        r.kernel = kernels_of(backend, gf);
        auto run = [&] { ok = ok && ggml_backend_graph_compute(backend, gf) == GGML_STATUS_SUCCESS; };
        r.t      = c.once ? bench::time_it(run, 1, 0.0, 1) : bench::time_it(run, o.smoke ? 1 : 3, o.min_time_s, o.smoke ? 1 : 1000);
        if (!ok) fprintf(stderr, "bench-ops: %s: graph compute failed\n", c.name.c_str());
        if (c.k == op_case::GEMM) {
            r.work = c.flops;
        } else {
            size_t bytes = ggml_nbytes(out);
            for (ggml_tensor * t : inputs) bytes += ggml_nbytes(t);
            r.work     = (double) bytes;
            r.is_bytes = true;
        }
    }
    ggml_gallocr_free(galloc);
    if (in_buf) ggml_backend_buffer_free(in_buf);
    ggml_free(ctx);
    return ok;
}

// --calibrate: every op family with interchangeable kernels, timed with each kernel this CPU can
// run at the DiT shapes; prints the comparison and the kernel-table row for this CPU. A kernel
// other than f32fma is chosen only where it is at least 5% faster (median) on EVERY shape of its
// family, so a row never makes an op slower than the exact F32 path anywhere it was measured.
int calibrate(ggml_backend_t backend, const options & o) {
    std::vector<std::string> kernels = {"f32fma"};
    if (ggml_cpu_has_avx512_bf16()) kernels.push_back("bf16dot");
    if (!ggml_cpu_has_avx512()) {
        printf("bench-ops --calibrate: no AVX-512 on this CPU: the portable kernels run every op, nothing to choose\n");
        return 0;
    }
    struct family {
        const char *             name;
        std::vector<std::string> cases; // case names timed for this family
        std::string              chosen = "f32fma";
    };
    std::vector<family> fams = {{"mul_mat_bf16", {"mul_mat_bf16"}}, {"flash_attn", {"flash_attn_ext_f16kv", "flash_attn_ext_bf16kv"}}};
    const std::vector<op_case> cases = make_cases(o.smoke);
    std::mt19937               rng(42);
    for (family & f : fams) {
        bool all_faster = kernels.size() > 1;
        for (const op_case & c : cases) {
            bool mine = false;
            for (const std::string & n : f.cases) mine = mine || c.name == n;
            if (!mine) continue;
            std::vector<bench::row> rows;
            for (const std::string & k : kernels) {
                if (!ggml_cpu_set_kernel_override((std::string(f.name) + "=" + k).c_str())) return 1;
                bench::row r;
                if (!time_case(backend, c, o, rng, r)) return 1;
                if (!rows.empty()) {
                    r.baseline = "f32fma";
                    r.base     = rows.front().t;
                }
                bench::print_row(r);
                if (o.json) bench::print_json(r);
                rows.push_back(r);
            }
            for (size_t i = 1; i < rows.size(); ++i) {
                const double med = rows[0].t.median_s / rows[i].t.median_s, best = rows[0].t.best_s / rows[i].t.best_s;
                printf("calibrate: %s %s: %s vs f32fma: %.2fx median, %.2fx best\n", f.name, c.shape.c_str(),
                       kernels[i].c_str(), med, best);
                all_faster = all_faster && med >= 1.05;
            }
        }
        if (all_faster) f.chosen = kernels[1];
        ggml_cpu_set_kernel_override(nullptr);
    }
    char     vendor[13];
    unsigned family_id = 0, model = 0;
    bool     bf16 = false, amx = false;
    ggml_cpu_get_identity(vendor, &family_id, &model, &bf16, &amx);
    printf("calibrate: CPU %s (%s family 0x%x model 0x%x, AVX512_BF16 %d, AMX-BF16 %d), %d threads; table row now: %s\n",
           ggml_cpu_model_name(), vendor, family_id, model, (int) bf16, (int) amx, ggml_backend_cpu_get_n_threads(backend),
           ggml_cpu_kernel_table_row());
    printf("calibrate: kernel-table row for this CPU (ggml/src/ggml-cpu/kernel-choice.cpp, k_table):\n");
    // mul_mat_quant is not timed here: the integer tiles (enum `vnni`, reported "tiles") wherever a
    // level has them (avx2 and up); the
    // plain rows of bench-ops show its rate against our F32 GEMM
    printf("    {\"%s\", \"%s\", 0x%x, %s, %d, {ggml_cpu_kernel::%s, ggml_cpu_kernel::%s, ggml_cpu_kernel::%s}},\n",
           ggml_cpu_model_name(), vendor, family_id, bf16 ? "true" : "false", (int) amx, fams[0].chosen.c_str(),
           fams[1].chosen.c_str(), ggml_cpu_isa_can_use("avx2") ? "vnni" : "vecdot");
    return 0;
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
    printf("bench-ops: CPU %s; instruction set %s (CPU: %s%s); kernel table row: %s; mul_mat_bf16=%s flash_attn=%s "
           "mul_mat_quant=%s%s\n",
           ggml_cpu_model_name(), ggml_cpu_get_isa(), ggml_cpu_get_isa_detected(),
           getenv("GGML_CPU_ISA") && *getenv("GGML_CPU_ISA") ? ", capped by GGML_CPU_ISA" : "", ggml_cpu_kernel_table_row(), ggml_cpu_get_kernel("mul_mat_bf16"), ggml_cpu_get_kernel("flash_attn"),
           ggml_cpu_get_kernel("mul_mat_quant"),
           getenv("GGML_CPU_KERNEL") && *getenv("GGML_CPU_KERNEL") ? " (GGML_CPU_KERNEL set)" : "");
    if (o.cpu_time) {
        bench::set_cpu_clock(n_threads);
        printf("bench-ops: times are process CPU seconds / %d threads (--cpu-time), not wall-clock time\n", n_threads);
    } else if (!o.smoke && !bench::wait_idle()) {
        printf("bench-ops: note: the machine stayed busy for 60 s; timings below share the CPU with other work\n");
    }
    if (o.calibrate) {
        bench::print_table_header();
        const int rc = calibrate(backend, o);
        ggml_backend_free(backend);
        return rc;
    }
#ifdef BENCH_HAVE_OPENBLAS
    openblas_set_num_threads(n_threads);
    printf("bench-ops: GEMM baseline: OpenBLAS sgemm (%s), %d threads\n", openblas_get_config(), n_threads);
#else
    printf("bench-ops: GEMM baseline: OpenBLAS not found at configure time; no sgemm baseline "
           "(install libopenblas-dev and reconfigure)\n");
#endif
    printf("bench-ops: the last column names the kernel of each MUL_MAT / FLASH_ATTN_EXT node\n");
    bench::print_table_header();

    std::mt19937                                       rng(42);
    std::vector<std::pair<std::string, bench::timing>> blas_done; // shape -> OpenBLAS timing
    std::vector<std::pair<std::string, bench::timing>> done;      // name + shape -> our timing
    int                                                n_run = 0;

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
        bench::row r;
        if (!time_case(backend, c, o, rng, r)) return 1;
        done.push_back({c.name + c.shape, r.t});

        bench::row r_cmp; // a second row against an earlier case of this run (F32 GEMM, unfused chain)
        if (!c.compare_key.empty()) {
            for (auto & [key, t] : done) {
                if (key == c.compare_key) {
                    r_cmp          = r;
                    r_cmp.baseline = c.compare_label;
                    r_cmp.base     = t;
                }
            }
        }
        if (c.k == op_case::GEMM) {
#ifdef BENCH_HAVE_OPENBLAS
            if (c.blas_K > 0) {
                r.baseline = "openblas sgemm";
                for (auto & [key, t] : blas_done) {
                    if (key == c.shape) r.base = t;
                }
            }
#endif
        } else {
            // a memcpy of bytes/2 reads and writes the same total number of bytes
            memcpy_baseline mb((size_t) r.work / 2, n_threads);
            r.baseline = "memcpy";
            r.base     = bench::time_it([&] { mb.run(); }, o.smoke ? 1 : 3, o.min_time_s * 0.5, o.smoke ? 1 : 1000);
        }
        bench::print_row(r);
        if (o.json) bench::print_json(r);
        if (!r_cmp.baseline.empty()) {
            bench::print_row(r_cmp);
            if (o.json) bench::print_json(r_cmp);
        }
        ++n_run;
    }
    ggml_backend_free(backend);
    if (n_run == 0) {
        fprintf(stderr, "bench-ops: no op matches --filter '%s'\n", o.filter.c_str());
        return 2;
    }
    return 0;
}
