// bench-int8: the sd INT8 linear (sd.linear_i8.v1) on the CPU backend at DiT shapes, from F32
// activations (ConvRot rotation + quantization included) and from pre-packed activations, each
// against our own F32 mul_mat of the same shape measured in the same run (ratio > 1: INT8 is
// faster). Rates are in G(int)OP/s counting 2*K*N*rows; the summary repeats them as TOPS.
//
// Everything runs through ggml_backend_sched, so plans and the extension workspace are built once
// and reused as in an application.

#include "bench-util.h"

#include "cpu/int8-impl.h"
#include "cpu/int8.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext.h"
#include "ggml.h"
#include "ggml_extensions.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct options {
    bool        smoke   = false;
    bool        json    = false;
    int         threads = 0;
    int         group   = 256;
    std::string path;
    double      min_time_s = 1.0;
};

void usage(const char * argv0) {
    printf("usage: %s [--smoke] [--json] [--threads N] [--group G] [--path portable|vnni|amx] [--min-time S]\n"
           "\n"
           "Times the INT8 linear from F32 activations (rotation + quantization included) and from packed\n"
           "activations against our F32 mul_mat of the same shape, in the same run.\n"
           "\n"
           "  --smoke       tiny shapes, one repetition (checks that everything runs)\n"
           "  --json        also print one JSON object per result\n"
           "  --threads N   CPU threads (default: all online CPUs)\n"
           "  --group G     ConvRot group for the F32-activation case (default 256)\n"
           "  --path P      force a kernel path (default: best available)\n"
           "  --min-time S  time each case for at least S seconds (default 1)\n",
           argv0);
}

bool parse_args(int argc, char ** argv, options & o) {
    bench::arg_reader r("bench-int8", argc, argv);
    while (r.next()) {
        if (r.is("--help") || r.is("-h")) {
            usage(argv[0]);
            exit(0);
        }
        if (r.flag("--smoke", o.smoke) || r.flag("--json", o.json) ||
            r.int_opt("--threads", 1, GGML_MAX_N_THREADS, o.threads) || r.int_opt("--group", 1, 256, o.group) ||
            r.string_opt("--path", o.path) || r.double_opt("--min-time", 0, 600, o.min_time_s)) {
            continue;
        }
        return r.unknown();
    }
    return r.ok();
}

template <class T> void upload(ggml_tensor * t, const std::vector<T> & v) {
    ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
}

// One scheduled single-output graph, reused across repetitions.
struct sched_run {
    ggml_backend_sched_t sched = nullptr;
    ggml_cgraph *        gf    = nullptr;
    bool                 ok    = false;
    sched_run(ggml_backend_t be, ggml_cgraph * g) : gf(g) {
        sched = ggml_backend_sched_new(&be, nullptr, 1, 64, false, false);
        ok    = sched && ggml_backend_sched_alloc_graph(sched, gf);
    }
    ~sched_run() {
        if (sched) ggml_backend_sched_free(sched);
    }
    bool run() { return ggml_backend_sched_graph_compute(sched, gf) == GGML_STATUS_SUCCESS; }
};

struct shape {
    int64_t K, N, rows;
};

} // namespace

int main(int argc, char ** argv) {
    options o;
    if (!parse_args(argc, argv, o)) return 1;
    if (o.smoke) o.min_time_s = 0;
    if (!o.path.empty()) setenv("SD_INT8_PATH", o.path.c_str(), 1);

    sd_ggml_register_extensions();
    ggml_backend_t be = ggml_backend_cpu_init();
    sd_cpu_register_int8(ggml_backend_get_device(be));
    if (o.threads > 0) ggml_backend_cpu_set_n_threads(be, o.threads);
    const int n_threads = ggml_backend_cpu_get_n_threads(be);

    printf("bench-int8: CPU backend, %d threads, INT8 path %s, ConvRot group %d%s\n", n_threads,
           sd_int8::path_name(sd_int8::resolve_path()), o.group, o.smoke ? ", smoke sizes" : "");
    printf("oneDNN baseline: not built (optional; the F32 baseline is our own mul_mat)\n");
    if (!o.smoke && !bench::wait_idle()) printf("warning: the machine stayed busy; timings are noisy\n");
    bench::print_table_header();

    const std::vector<shape> shapes = o.smoke ? std::vector<shape>{{64, 48, 16}, {100, 37, 9}}
                                              : std::vector<shape>{{3072, 3072, 1024},
                                                                   {3072, 12288, 1024},
                                                                   {12288, 3072, 1024},
                                                                   {6144, 16384, 1024}};
    const int min_reps = o.smoke ? 1 : 3;
    const int max_reps = o.smoke ? 1 : 1000;
    int       failures = 0;
    struct summary {
        std::string    shape;
        bench::timing  f32_act, packed, f32;
        double         ops;
    };
    std::vector<summary> sums;

    for (const shape & s : shapes) {
        const int group = (s.K % o.group == 0) ? o.group : 1;
        char      shape_s[64];
        snprintf(shape_s, sizeof shape_s, "K%lld N%lld rows%lld", (long long) s.K, (long long) s.N, (long long) s.rows);
        const double ops = 2.0 * (double) s.K * (double) s.N * (double) s.rows;

        // inputs (allocated once): F32 x, I8 weight + scales + bias, packed activation, F32 weight
        ggml_init_params ip  = {32 * ggml_tensor_overhead(), nullptr, true};
        ggml_context *   cin = ggml_init(ip);
        ggml_tensor *    x   = ggml_new_tensor_2d(cin, GGML_TYPE_F32, s.K, s.rows);
        ggml_tensor *    w   = ggml_new_tensor_2d(cin, GGML_TYPE_I8, s.K, s.N);
        ggml_tensor *    ws  = ggml_new_tensor_1d(cin, GGML_TYPE_F32, s.N);
        ggml_tensor *    b   = ggml_new_tensor_1d(cin, GGML_TYPE_F32, s.N);
        ggml_tensor *    wf  = ggml_new_tensor_2d(cin, GGML_TYPE_F32, s.K, s.N);
        ggml_tensor *    q   = ggml_quantize_i8_convrot(cin, x, group);
        ggml_backend_buffer_t bin = ggml_backend_alloc_ctx_tensors(cin, be);
        if (!q || !bin) {
            fprintf(stderr, "bench-int8: setup failed for %s\n", shape_s);
            return 1;
        }
        {
            std::mt19937                          rng(42);
            std::normal_distribution<float>       nd(0.0f, 1.0f);
            std::uniform_int_distribution<int>    wi(-127, 127);
            std::vector<float>                    xv((size_t) (s.K * s.rows)), wfv((size_t) (s.K * s.N)), wsv((size_t) s.N),
                bv((size_t) s.N);
            std::vector<int8_t> wv((size_t) (s.K * s.N));
            for (auto & v : xv) v = nd(rng);
            for (size_t i = 0; i < wv.size(); ++i) {
                wv[i]  = (int8_t) wi(rng);
                wfv[i] = wv[i] * 0.01f;
            }
            for (auto & v : wsv) v = 0.01f;
            for (auto & v : bv) v = nd(rng);
            upload(x, xv);
            upload(w, wv);
            upload(wf, wfv);
            upload(ws, wsv);
            upload(b, bv);
        }

        ggml_init_params gp = {16 * ggml_tensor_overhead() + 4 * ggml_graph_overhead(), nullptr, true};
        ggml_context *   cg = ggml_init(gp);

        // fill the packed activation once (a one-node graph computing q in place)
        {
            ggml_cgraph * g0 = ggml_new_graph(cg);
            ggml_build_forward_expand(g0, q);
            if (ggml_backend_graph_compute(be, g0) != GGML_STATUS_SUCCESS) {
                fprintf(stderr, "bench-int8: quantize failed\n");
                return 1;
            }
        }
        ggml_tensor * y0 = ggml_mul_mat_i8_tensorwise(cg, w, x, ws, b, group);
        ggml_tensor * y1 = ggml_mul_mat_i8_tensorwise(cg, w, q, ws, b, group);
        ggml_tensor * yf = ggml_mul_mat(cg, wf, x);
        if (!y0 || !y1 || !yf) {
            fprintf(stderr, "bench-int8: %s\n", ggml_ext_last_error());
            return 1;
        }
        // the packed case times the linear alone: q already holds its data, so it becomes a leaf
        // of that graph (its operator was only needed to build y1)
        q->op = GGML_OP_NONE;

        summary sm{shape_s, {}, {}, {}, ops};
        auto    time_graph = [&](ggml_tensor * out, bench::timing & t) {
            ggml_cgraph * g = ggml_new_graph(cg);
            ggml_build_forward_expand(g, out);
            sched_run sr(be, g);
            if (!sr.ok || !sr.run()) {
                fprintf(stderr, "bench-int8: graph failed (%s)\n", shape_s);
                ++failures;
                return;
            }
            t = bench::time_it([&] { sr.run(); }, min_reps, o.min_time_s, max_reps);
        };
        time_graph(yf, sm.f32);
        time_graph(y0, sm.f32_act);
        time_graph(y1, sm.packed);

        bench::row r;
        r.shape    = shape_s;
        r.work     = ops;
        r.baseline = "f32 mul_mat";
        r.base     = sm.f32;
        r.op       = "linear_i8 f32-act";
        r.t        = sm.f32_act;
        bench::print_row(r);
        if (o.json) bench::print_json(r);
        r.op = "linear_i8 packed";
        r.t  = sm.packed;
        bench::print_row(r);
        if (o.json) bench::print_json(r);
        bench::row rf;
        rf.op    = "mul_mat f32";
        rf.shape = shape_s;
        rf.work  = ops;
        rf.t     = sm.f32;
        bench::print_row(rf);
        if (o.json) bench::print_json(rf);
        sums.push_back(sm);

        ggml_free(cg);
        ggml_backend_buffer_free(bin);
        ggml_free(cin);
    }

    printf("\nsummary (TOPS best / median; ratio = F32 time / INT8 time, best)\n");
    for (const summary & s : sums) {
        auto tops = [&](const bench::timing & t, bool med) { return s.ops / (med ? t.median_s : t.best_s) / 1e12; };
        printf("%-28s f32-act %.3f / %.3f  packed %.3f / %.3f  f32 %.3f / %.3f  ratio f32-act %.2fx packed %.2fx\n",
               s.shape.c_str(), tops(s.f32_act, false), tops(s.f32_act, true), tops(s.packed, false),
               tops(s.packed, true), tops(s.f32, false), tops(s.f32, true), s.f32.best_s / s.f32_act.best_s,
               s.f32.best_s / s.packed.best_s);
    }
    ggml_backend_free(be);
    return failures ? 1 : 0;
}
