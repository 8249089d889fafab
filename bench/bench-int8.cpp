// bench-int8: the sd INT8 linear (sd.linear_i8.v1) on the CPU backend at DiT shapes, from F32
// activations (ConvRot rotation + quantization included) and from pre-packed activations, each
// against our own F32 mul_mat of the same shape measured in the same run (ratio > 1: INT8 is
// faster). Rates are in G(int)OP/s counting 2*K*N*rows; the summary repeats them as TOPS.
//
// When built with oneDNN (libdnnl-dev), each case is also timed against oneDNN's s8 matmul on the
// same int8 data (ratio > 1: ours is faster):
//  - F32 activations vs oneDNN with scales and bias fused and the weight in its given [N,K] layout
//    (a plain strided view that oneDNN's kernels read and block themselves on every call, as ours
//    packs the weight on every call). oneDNN gets the activations already quantized (our packed
//    tensor), so its time excludes the rotation + quantization ours does, and it applies one
//    common activation scale instead of ours per row (2.x cannot fuse a per-row scale);
//  - packed activations vs oneDNN's s8*s8->s32 matmul with the weight reordered once, outside the
//    timed loop, into oneDNN's preferred blocked layout (no scales or bias: the raw GEMM).
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

#ifdef BENCH_HAVE_ONEDNN
#    include "onednn-baseline.h"
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
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
    bool        quant_only = false;
};

void usage(const char * argv0) {
    printf("usage: %s [--smoke] [--json] [--threads N] [--group G] [--path portable|avx2|vnni|amx] [--min-time S]\n"
           "          [--quantize-only]\n"
           "\n"
           "Times the INT8 linear from F32 activations (rotation + quantization included) and from packed\n"
           "activations against our F32 mul_mat of the same shape, in the same run.\n"
           "\n"
           "  --smoke       tiny shapes, one repetition (checks that everything runs)\n"
           "  --json        also print one JSON object per result\n"
           "  --threads N   CPU threads (default: all online CPUs)\n"
           "  --group G     ConvRot group for the F32-activation case (default 256; a power of 4)\n"
           "  --path P      force a kernel path (default: best available; one this CPU or the\n"
           "                GGML_CPU_ISA cap excludes falls back to the best available, with a warning)\n"
           "  --min-time S  time each case for at least S seconds (default 1)\n"
           "  --quantize-only  only the ConvRot quantizer section: each power-of-4 group dividing K\n"
           "                against group 256 on the same shape, in the same run\n",
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
            r.int_opt("--threads", 1, GGML_MAX_N_THREADS, o.threads) || r.int_opt("--group", 1, 1 << 30, o.group) ||
            r.string_opt("--path", o.path) || r.double_opt("--min-time", 0, 600, o.min_time_s) ||
            r.flag("--quantize-only", o.quant_only)) {
            continue;
        }
        return r.unknown();
    }
    if (r.ok() && ((o.group & (o.group - 1)) != 0 || (o.group & 0x55555555) == 0)) {
        fprintf(stderr, "bench-int8: --group must be a power of 4 (1, 4, 16, ..., 4^15), got %d\n", o.group);
        return false;
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

// Our row plus the oneDNN comparison on the same JSON line (bench::print_json's fields first).
void print_json_vs_onednn(const bench::row & r, const char * od_name, const bench::timing & od) {
    printf("{\"op\":\"%s\",\"shape\":\"%s\",\"best_ms\":%.4f,\"median_ms\":%.4f,\"reps\":%d,\"gflops\":%.3f",
           r.op.c_str(), r.shape.c_str(), r.t.best_s * 1e3, r.t.median_s * 1e3, r.t.reps, r.work / r.t.best_s / 1e9);
    if (r.base.best_s > 0) {
        printf(",\"baseline\":\"%s\",\"baseline_best_ms\":%.4f,\"ratio\":%.4f", r.baseline.c_str(),
               r.base.best_s * 1e3, r.base.best_s / r.t.best_s);
    }
    if (od.best_s > 0) {
        printf(",\"onednn\":\"%s\",\"onednn_best_ms\":%.4f,\"onednn_median_ms\":%.4f,\"onednn_tops\":%.4f,"
               "\"ratio_onednn\":%.4f",
               od_name, od.best_s * 1e3, od.median_s * 1e3, r.work / od.best_s / 1e12, od.best_s / r.t.best_s);
    }
    printf("}\n");
    fflush(stdout);
}

// The ConvRot quantizer alone (sd.quantize_i8_convrot.v1, rotation + per-row quantization): per
// shape, every power-of-4 group from 256 up to K that divides K, each against group 256 on the
// same shape in the same run (ratio < 1: that group is slower than 256). Work is counted as the
// bytes read and written (4 + 1 per value). The row kernel alone is also timed on this thread
// over 64 rows per repetition: short repetitions whose best is little disturbed by other
// processes on a shared machine. Returns the number of failed cases.
int bench_quantize(ggml_backend_t be, const options & o, int min_reps, int max_reps) {
    struct qshape {
        int64_t K, rows;
    };
    // 3072 and 16384: widths of real Krea2 linears (groups 1024 and 16384 in converted files)
    const std::vector<qshape> shapes = o.smoke ? std::vector<qshape>{{1024, 5}, {4096, 3}}
                                               : std::vector<qshape>{{3072, 1024}, {12288, 1024}, {16384, 1024}};
    int failures = 0;
    for (const qshape & s : shapes) {
        char shape_s[64];
        snprintf(shape_s, sizeof shape_s, "K%lld rows%lld", (long long) s.K, (long long) s.rows);
        ggml_init_params ip  = {2 * ggml_tensor_overhead(), nullptr, true};
        ggml_context *   cin = ggml_init(ip);
        ggml_tensor *    x   = ggml_new_tensor_2d(cin, GGML_TYPE_F32, s.K, s.rows);
        ggml_backend_buffer_t bin = ggml_backend_alloc_ctx_tensors(cin, be);
        if (!bin) {
            fprintf(stderr, "bench-int8: cannot allocate %s\n", shape_s);
            return failures + 1;
        }
        {
            std::mt19937                    rng(7);
            std::normal_distribution<float> nd(0.0f, 1.0f);
            std::vector<float>              xv((size_t) (s.K * s.rows));
            for (auto & v : xv) v = nd(rng);
            upload(x, xv);
        }
        bench::timing       base, base_row;
        const int64_t       krows = std::min<int64_t>(64, s.rows);
        std::vector<float>  xr((size_t) (s.K * krows));
        std::vector<int8_t> qr(xr.size());
        ggml_backend_tensor_get(x, xr.data(), 0, xr.size() * sizeof(float));
        const sd_int8::path qpath = sd_int8::resolve_path();
        for (int64_t G = 256; G <= s.K; G *= 4) {
            if (s.K % G != 0) continue;
            ggml_init_params gp = {4 * ggml_tensor_overhead() + 2 * ggml_graph_overhead(), nullptr, true};
            ggml_context *   cg = ggml_init(gp);
            ggml_tensor *    q  = ggml_quantize_i8_convrot(cg, x, (int) G);
            bench::row       r;
            r.op       = "quantize_i8 G" + std::to_string(G);
            r.shape    = shape_s;
            r.work     = 5.0 * (double) s.K * (double) s.rows;
            r.is_bytes = true;
            if (!q) {
                printf("%-22s %-30s rejected: %s\n", r.op.c_str(), shape_s, ggml_ext_last_error());
                ++failures;
                ggml_free(cg);
                continue;
            }
            ggml_cgraph * g = ggml_new_graph(cg);
            ggml_build_forward_expand(g, q);
            {
                sched_run sr(be, g);
                if (!sr.ok || !sr.run()) {
                    printf("%-22s %-30s graph failed\n", r.op.c_str(), shape_s);
                    ++failures;
                } else {
                    r.t = bench::time_it([&] { sr.run(); }, min_reps, o.min_time_s, max_reps);
                    if (G == 256) base = r.t;
                    r.baseline = "quantize_i8 G256";
                    r.base     = base;
                    bench::print_row(r);
                    if (o.json) bench::print_json(r);
                }
            }
            {
                bench::row rr;
                rr.op       = "quantize_row G" + std::to_string(G);
                rr.shape    = "K" + std::to_string(s.K) + " rows" + std::to_string(krows) + " 1 thread";
                rr.work     = 5.0 * (double) s.K * (double) krows;
                rr.is_bytes = true;
                if (!sd_int8::reserve_quantize_scratch(s.K, (int) G)) {
                    printf("%-22s out of memory\n", rr.op.c_str());
                    ++failures;
                } else {
                    rr.t = bench::time_it(
                        [&] {
                            for (int64_t r = 0; r < krows; ++r) {
                                int32_t rs;
                                const float * xs = xr.data() + r * s.K;
                                int8_t *      qs = qr.data() + r * s.K;
                                sd_int8::quantize_row(qpath, xs, s.K, (int) G, qs, &rs);
                            }
                        },
                        min_reps, o.min_time_s, o.smoke ? 1 : 100000);
                    if (G == 256) base_row = rr.t;
                    rr.baseline = "quantize_row G256";
                    rr.base     = base_row;
                    bench::print_row(rr);
                    if (o.json) bench::print_json(rr);
                }
            }
            ggml_free(cg);
        }
        ggml_backend_buffer_free(bin);
        ggml_free(cin);
    }
    return failures;
}

} // namespace

int main(int argc, char ** argv) {
    options o;
    if (!parse_args(argc, argv, o)) return 1;
    if (o.smoke) o.min_time_s = 0;
    if (!o.path.empty()) setenv("SD_INT8_PATH", o.path.c_str(), 1);

    ggml_backend_t be = ggml_backend_cpu_init();
    if (!sd_ggml_register_extensions() || !sd_cpu_register_int8(ggml_backend_get_device(be))) {
        fprintf(stderr, "bench-int8: the sd INT8 kernels could not be registered\n");
        ggml_backend_free(be);
        return 1;
    }
    if (o.threads > 0) ggml_backend_cpu_set_n_threads(be, o.threads);
    const int n_threads = ggml_backend_cpu_get_n_threads(be);

    printf("bench-int8: CPU backend, %d threads, INT8 path %s, ConvRot group %d%s\n", n_threads,
           sd_int8::path_name(sd_int8::resolve_path()), o.group, o.smoke ? ", smoke sizes" : "");
#ifdef BENCH_HAVE_ONEDNN
    printf("oneDNN baseline: %s\n", onednn_baseline::setup(n_threads).c_str());
#else
    printf("oneDNN baseline: unavailable (not built: needs libdnnl-dev; the F32 baseline is our own mul_mat)\n");
#endif
    if (!o.smoke && !bench::wait_idle()) printf("warning: the machine stayed busy; timings are noisy\n");
    bench::print_table_header();
    const int min_reps = o.smoke ? 1 : 3;
    const int max_reps = o.smoke ? 1 : 1000;
    int       failures = bench_quantize(be, o, min_reps, max_reps);
    if (o.quant_only) {
        ggml_backend_free(be);
        return failures ? 1 : 0;
    }

    const std::vector<shape> shapes = o.smoke ? std::vector<shape>{{64, 48, 16}, {100, 37, 9}}
                                              : std::vector<shape>{{3072, 3072, 1024},
                                                                   {3072, 12288, 1024},
                                                                   {12288, 3072, 1024},
                                                                   {6144, 16384, 1024}};
    struct summary {
        std::string    shape;
        bench::timing  f32_act, packed, f32;
        bench::timing  od_fused, od_packed; // zero when oneDNN is unavailable
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
        std::vector<int8_t> wv((size_t) (s.K * s.N));
        std::vector<float>  wsv((size_t) s.N), bv((size_t) s.N);
        {
            std::mt19937                          rng(42);
            std::normal_distribution<float>       nd(0.0f, 1.0f);
            std::uniform_int_distribution<int>    wi(-127, 127);
            std::vector<float>                    xv((size_t) (s.K * s.rows)), wfv((size_t) (s.K * s.N));
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

        summary sm{shape_s, {}, {}, {}, {}, {}, ops};
        // out_copy (optional) receives the output of the first run
        auto    time_graph = [&](ggml_tensor * out, bench::timing & t, std::vector<float> * out_copy) {
            ggml_cgraph * g = ggml_new_graph(cg);
            ggml_build_forward_expand(g, out);
            sched_run sr(be, g);
            if (!sr.ok || !sr.run()) {
                fprintf(stderr, "bench-int8: graph failed (%s)\n", shape_s);
                ++failures;
                return;
            }
            if (out_copy) {
                out_copy->resize((size_t) ggml_nelements(out));
                ggml_backend_tensor_get(out, out_copy->data(), 0, ggml_nbytes(out));
            }
            t = bench::time_it([&] { sr.run(); }, min_reps, o.min_time_s, max_reps);
        };
        std::vector<float> y_packed;
        time_graph(yf, sm.f32, nullptr);
        time_graph(y0, sm.f32_act, nullptr);
        time_graph(y1, sm.packed, &y_packed);

#ifdef BENCH_HAVE_ONEDNN
        {
            // oneDNN reads the same int8 activations and row scales as our packed case: the first
            // rows*K bytes of q, then the scales at byte offset K*pad4(rows)
            const int64_t        rows4 = (s.rows + 3) / 4 * 4;
            std::vector<int8_t>  xq((size_t) (s.K * s.rows));
            std::vector<float>   xs((size_t) s.rows);
            ggml_backend_tensor_get(q, xq.data(), 0, xq.size());
            ggml_backend_tensor_get(q, xs.data(), (size_t) (s.K * rows4), xs.size() * sizeof(float));
            onednn_baseline::problem pr;
            pr.K = s.K, pr.N = s.N, pr.rows = s.rows;
            pr.x = xq.data(), pr.w = wv.data(), pr.w_scale = wsv.data(), pr.bias = bv.data();
            pr.x_scale = xs[0]; // oneDNN 2.x cannot fuse a per-row scale (onednn-baseline.h)
            std::string err;
            auto        od = onednn_baseline::linear::create(pr, err);
            if (!od) {
                printf("oneDNN baseline failed for %s: %s\n", shape_s, err.c_str());
            } else {
                printf("oneDNN %s: fused %s, packed %s\n", shape_s, od->impl_fused().c_str(), od->impl_packed().c_str());
                od->run_fused();
                od->run_packed();
                // On a slice (first and last rows and columns) our output must equal the epilogue
                // applied to the exact integer sum (a failure of this run). oneDNN's s32 sums are
                // compared with the exact sum and its fused output with its own (common-scale)
                // epilogue up to rounding: a mismatch there is the peer's, reported as a finding
                // without failing the run (oneDNN's AVX2 s8 GEMM sums pairs in saturating int16,
                // cpu-isa-facts.md), though a count near the whole sample would rather point at a
                // mis-specified layout here.
                int64_t bad_acc = 0, bad_ours = 0, bad_fused = 0;
                auto    check   = [&](int64_t r, int64_t n) {
                    int32_t acc = 0;
                    for (int64_t k = 0; k < s.K; ++k) acc += (int32_t) xq[(size_t) (r * s.K + k)] * wv[(size_t) (n * s.K + k)];
                    if (od->packed_out()[r * s.N + n] != acc) ++bad_acc;
                    const float ours = ((float) acc * xs[(size_t) r]) * wsv[(size_t) n] + bv[(size_t) n];
                    if (y_packed.empty() || y_packed[(size_t) (r * s.N + n)] != ours) ++bad_ours;
                    const float  want = (float) acc * (wsv[(size_t) n] * pr.x_scale) + bv[(size_t) n];
                    const double d    = std::fabs((double) od->fused_out()[r * s.N + n] - want);
                    if (!(d <= 1e-5 * std::fabs((double) want) + 1e-5)) ++bad_fused;
                };
                const int64_t sr = std::min<int64_t>(s.rows, 4), sn = std::min<int64_t>(s.N, 16);
                for (int64_t r = 0; r < sr; ++r) {
                    for (int64_t n = 0; n < sn; ++n) {
                        check(r, n);
                        check(s.rows - 1 - r, s.N - 1 - n);
                    }
                }
                if (bad_ours) {
                    printf("CHECK FAILED %s: %lld of %lld sampled outputs of ours differ from the epilogue of the exact "
                           "sum\n",
                           shape_s, (long long) bad_ours, (long long) (2 * sr * sn));
                    ++failures;
                }
                if (bad_acc || bad_fused) {
                    printf("peer finding %s: of %lld sampled outputs, %lld oneDNN s32 sums differ from the exact sum "
                           "and %lld of oneDNN's fused outputs from its epilogue (not exact on this CPU; not a failure "
                           "of this run)\n",
                           shape_s, (long long) (2 * sr * sn), (long long) bad_acc, (long long) bad_fused);
                }
                sm.od_fused  = bench::time_it([&] { od->run_fused(); }, min_reps, o.min_time_s, max_reps);
                sm.od_packed = bench::time_it([&] { od->run_packed(); }, min_reps, o.min_time_s, max_reps);
            }
        }
#endif

        bench::row r;
        r.shape    = shape_s;
        r.work     = ops;
        r.baseline = "f32 mul_mat";
        r.base     = sm.f32;
        // our rows against each baseline; the JSON line carries both ratios
        auto our_row = [&](const char * op, const bench::timing & t, const char * od_name, const bench::timing & od) {
            r.op       = op;
            r.t        = t;
            r.baseline = "f32 mul_mat";
            r.base     = sm.f32;
            bench::print_row(r);
            if (od.best_s > 0) {
                bench::row ro = r;
                ro.baseline   = od_name;
                ro.base       = od;
                bench::print_row(ro);
            }
            if (o.json) print_json_vs_onednn(r, od_name, od);
        };
        our_row("linear_i8 f32-act", sm.f32_act, "onednn fused", sm.od_fused);
        our_row("linear_i8 packed", sm.packed, "onednn s32 pk", sm.od_packed);
        auto od_row = [&](const char * op, const bench::timing & t) {
            if (t.best_s <= 0) return;
            bench::row ro;
            ro.op    = op;
            ro.shape = shape_s;
            ro.work  = ops;
            ro.t     = t;
            bench::print_row(ro);
            if (o.json) bench::print_json(ro);
        };
        od_row("onednn fused plain-w", sm.od_fused);
        od_row("onednn s32 packed-w", sm.od_packed);
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

    printf("\nsummary (TOPS best / median; ratio = F32 time / INT8 time, best; ratio vs oneDNN = oneDNN time / ours, best)\n");
    for (const summary & s : sums) {
        auto tops = [&](const bench::timing & t, bool med) { return s.ops / (med ? t.median_s : t.best_s) / 1e12; };
        printf("%-28s f32-act %.3f / %.3f  packed %.3f / %.3f  f32 %.3f / %.3f  ratio f32-act %.2fx packed %.2fx\n",
               s.shape.c_str(), tops(s.f32_act, false), tops(s.f32_act, true), tops(s.packed, false),
               tops(s.packed, true), tops(s.f32, false), tops(s.f32, true), s.f32.best_s / s.f32_act.best_s,
               s.f32.best_s / s.packed.best_s);
        if (s.od_fused.best_s > 0 && s.od_packed.best_s > 0) {
            printf("%-28s oneDNN fused %.3f / %.3f  s32 packed %.3f / %.3f  ratio vs oneDNN f32-act %.2fx packed %.2fx\n",
                   "", tops(s.od_fused, false), tops(s.od_fused, true), tops(s.od_packed, false),
                   tops(s.od_packed, true), s.od_fused.best_s / s.f32_act.best_s, s.od_packed.best_s / s.packed.best_s);
        }
    }
    ggml_backend_free(be);
    return failures ? 1 : 0;
}
