// bench-sd-ops: the sd CPU operators against what they replace, measured in the same run.
//
//   rope_apply       sd.rope_apply.v1 (one custom node) vs the native op chain it replaces
//                    (dit-workloads.md §4.3, ~20 ordinary ops). Target: >= 4x.
//   rms_mul_rope     RMSNorm -> Mul(weight) -> RoPE fused by the scheduler vs the same three
//                    nodes unfused (native RMS_NORM and MUL, the rope kernel). Target: >= 1.5x.
//
// Shapes: q of Krea2 [128, 48 heads, 4096 tokens] and Flux [128, 24 heads, 4352 tokens],
// interleaved mode. Each pair is also checked for bit-identical results before timing.

#include "bench-util.h"

#include "reference-sd/native-rope-chain.h"

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
#include <thread>
#include <vector>

namespace {

struct options {
    bool   smoke      = false;
    bool   json       = false;
    int    threads    = 0; // 0: hardware threads
    double min_time_s = 1.0;
};

void usage(const char * argv0) {
    printf("usage: %s [--smoke] [--json] [--threads N] [--min-time SECONDS]\n"
           "\n"
           "Times sd.rope_apply.v1 against the native op chain it replaces, and the fused\n"
           "RMSNorm -> Mul -> RoPE against its three unfused ops, in the same run.\n"
           "\n"
           "  --smoke         tiny shapes, one timed repetition (a quick check that everything runs)\n"
           "  --json          also print one JSON object per result\n"
           "  --threads N     CPU threads (default: all hardware threads)\n"
           "  --min-time S    time each measurement for at least S seconds (default 1)\n",
           argv0);
}

bool parse_args(int argc, char ** argv, options & o) {
    bench::arg_reader r("bench-sd-ops", argc, argv);
    while (r.next()) {
        if (r.is("--help") || r.is("-h")) {
            usage(argv[0]);
            exit(0);
        }
        if (r.flag("--smoke", o.smoke) || r.flag("--json", o.json) ||
            r.int_opt("--threads", 1, GGML_MAX_N_THREADS, o.threads) ||
            r.double_opt("--min-time", 0, 600, o.min_time_s)) {
            continue;
        }
        return r.unknown();
    }
    return r.ok();
}

struct shape {
    int64_t d, H, L;
};

void fill(ggml_tensor * t, uint32_t seed) {
    std::mt19937                          rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float>                    v((size_t) ggml_nelements(t));
    for (float & x : v) x = dist(rng);
    ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
}

// One graph over x [d, H, L], w [d], pe [2, 2, d/2, L]; out is the only output.
struct graph {
    ggml_context * ctx = nullptr;
    ggml_cgraph *  gf  = nullptr;
    ggml_tensor *  x = nullptr, *w = nullptr, *pe = nullptr, *out = nullptr;

    enum kind { rope_op, rope_chain, norm_mul_rope };

    graph(const shape & s, kind k) {
        ggml_init_params p{ggml_tensor_overhead() * 128 + ggml_graph_overhead_custom(256, false), nullptr, true};
        ctx = ggml_init(p);
        x   = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, s.d, s.H, s.L);
        w   = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, s.d);
        pe  = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 2, 2, s.d / 2, s.L);
        for (ggml_tensor * t : {x, w, pe}) ggml_set_input(t);
        switch (k) {
            case rope_op: out = sd_rope_apply(ctx, x, pe, SD_ROPE_INTERLEAVED); break;
            case rope_chain: out = native_rope_chain(ctx, x, pe, SD_ROPE_INTERLEAVED); break;
            case norm_mul_rope:
                out = sd_rope_apply(ctx, ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-6f), w), pe, SD_ROPE_INTERLEAVED);
                break;
        }
        ggml_set_output(out);
        gf = ggml_new_graph_custom(ctx, 256, false);
        ggml_build_forward_expand(gf, out);
    }
    ~graph() { ggml_free(ctx); }
    void set_inputs() {
        // w is not part of the rope-only graphs (so never allocated there)
        if (x->buffer) fill(x, 1);
        if (w->buffer) fill(w, 2);
        if (pe->buffer) fill(pe, 3);
    }
    std::vector<float> result() const {
        std::vector<float> v((size_t) ggml_nelements(out));
        ggml_backend_tensor_get(out, v.data(), 0, ggml_nbytes(out));
        return v;
    }
};

bool same_bits(const std::vector<float> & a, const std::vector<float> & b) {
    return a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::string shape_str(const shape & s) {
    char b[64];
    snprintf(b, sizeof b, "[%lld, %lld heads, %lld tok]", (long long) s.d, (long long) s.H, (long long) s.L);
    return b;
}

struct result_line {
    bench::row row;
    double     target;
};

} // namespace

int main(int argc, char ** argv) {
    options o;
    if (!parse_args(argc, argv, o)) return 2;
    if (o.threads == 0) o.threads = (int) std::max(1u, std::thread::hardware_concurrency());

    if (!sd_ggml_register_extensions()) {
        fprintf(stderr, "bench-sd-ops: registering the sd extensions failed\n");
        return 1;
    }
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, o.threads);

    std::vector<shape> shapes = o.smoke ? std::vector<shape>{{128, 4, 64}, {128, 3, 40}}
                                        : std::vector<shape>{{128, 48, 4096}, {128, 24, 4352}};
    const int    min_reps = o.smoke ? 1 : 5;
    const int    max_reps = o.smoke ? 1 : 200;
    const double min_time = o.smoke ? 0.0 : o.min_time_s;

    printf("bench-sd-ops: %d thread(s)%s\n", o.threads, o.smoke ? ", smoke size" : "");
    if (!o.smoke && !bench::wait_idle()) printf("bench-sd-ops: warning: the machine did not become idle\n");

    std::vector<result_line> lines;
    bool                     ok = true;
    for (const shape & s : shapes) {
        const double elems = (double) (s.d * s.H * s.L);
        // ---- rope_apply vs the native chain (direct compute, single-node kernel)
        {
            graph          op(s, graph::rope_op), chain(s, graph::rope_chain);
            ggml_gallocr_t ga_op = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
            ggml_gallocr_t ga_ch = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
            if (!ggml_gallocr_alloc_graph(ga_op, op.gf) || !ggml_gallocr_alloc_graph(ga_ch, chain.gf)) {
                fprintf(stderr, "bench-sd-ops: allocation failed\n");
                return 1;
            }
            op.set_inputs();
            chain.set_inputs();
            ggml_backend_graph_compute(cpu, op.gf);
            ggml_backend_graph_compute(cpu, chain.gf);
            if (!same_bits(op.result(), chain.result())) {
                fprintf(stderr, "bench-sd-ops: rope_apply differs from the native chain on %s\n", shape_str(s).c_str());
                ok = false;
            }
            result_line l;
            l.row.op       = "rope_apply";
            l.row.shape    = shape_str(s);
            l.row.is_bytes = true;
            l.row.work     = 2 * elems * sizeof(float); // read x, write out
            l.row.baseline = "native chain";
            l.row.base = bench::time_it([&] { ggml_backend_graph_compute(cpu, chain.gf); }, min_reps, min_time, max_reps);
            l.row.t    = bench::time_it([&] { ggml_backend_graph_compute(cpu, op.gf); }, min_reps, min_time, max_reps);
            l.target   = 4.0;
            lines.push_back(l);
            ggml_gallocr_free(ga_op);
            ggml_gallocr_free(ga_ch);
        }
        // ---- fused RMSNorm -> Mul -> RoPE (scheduler) vs the three ops unfused (direct compute)
        {
            graph fused(s, graph::norm_mul_rope), unfused(s, graph::norm_mul_rope);

            ggml_backend_t             backends[1] = {cpu};
            ggml_backend_buffer_type_t bufts[1]    = {ggml_backend_cpu_buffer_type()};
            ggml_backend_sched_t       sched       = ggml_backend_sched_new(backends, bufts, 1, 256, false, false);
            ggml_gallocr_t             ga          = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
            if (!ggml_backend_sched_alloc_graph(sched, fused.gf) || !ggml_gallocr_alloc_graph(ga, unfused.gf)) {
                fprintf(stderr, "bench-sd-ops: allocation failed\n");
                return 1;
            }
            bool selected = false;
            for (int i = 0; i < ggml_ext_sched_n_steps(sched); ++i) {
                ggml_ext_step_info info;
                if (ggml_ext_sched_get_step(sched, i, &info) && info.fused) selected = true;
            }
            if (!selected) {
                fprintf(stderr, "bench-sd-ops: the scheduler did not select the fusion on %s\n", shape_str(s).c_str());
                ok = false;
            }
            fused.set_inputs();
            unfused.set_inputs();
            ggml_backend_sched_graph_compute(sched, fused.gf);
            ggml_backend_graph_compute(cpu, unfused.gf);
            if (!same_bits(fused.result(), unfused.result())) {
                fprintf(stderr, "bench-sd-ops: fused result differs from the unfused ops on %s\n", shape_str(s).c_str());
                ok = false;
            }
            result_line l;
            l.row.op       = "rms_mul_rope fused";
            l.row.shape    = shape_str(s);
            l.row.is_bytes = true;
            l.row.work     = 2 * elems * sizeof(float);
            l.row.baseline = "3 ops unfused";
            l.row.base = bench::time_it([&] { ggml_backend_graph_compute(cpu, unfused.gf); }, min_reps, min_time, max_reps);
            l.row.t    = bench::time_it([&] { ggml_backend_sched_graph_compute(sched, fused.gf); }, min_reps, min_time,
                                        max_reps);
            l.target   = 1.5;
            lines.push_back(l);
            ggml_gallocr_free(ga);
            ggml_backend_sched_free(sched);
        }
    }

    bench::print_table_header();
    for (const result_line & l : lines) bench::print_row(l.row);
    printf("\ntargets (ratio = baseline best / best):\n");
    for (const result_line & l : lines) {
        const double ratio = l.row.base.best_s / l.row.t.best_s;
        printf("  %-20s %-28s %8.3f / %8.3f ms vs %-14s %8.3f / %8.3f ms (best / median): %6.2fx, target >= %.1fx %s\n",
               l.row.op.c_str(), l.row.shape.c_str(), l.row.t.best_s * 1e3, l.row.t.median_s * 1e3,
               l.row.baseline.c_str(), l.row.base.best_s * 1e3, l.row.base.median_s * 1e3, ratio, l.target,
               o.smoke ? "(smoke: not judged)" : ratio >= l.target ? "met" : "NOT MET");
    }
    if (o.json) {
        for (const result_line & l : lines) bench::print_json(l.row);
    }
    ggml_backend_free(cpu);
    return ok ? 0 : 1;
}
