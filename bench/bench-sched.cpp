// bench-sched: the scheduler's planning cost and the extension dispatch overhead, on a graph of
// many tiny ops (chains of add/mul/scale on [64] vectors, 2,000 nodes by default).
//
//   reserve          ggml_backend_sched_reserve (assignment, splitting, plans, allocation plan)
//   alloc+plan       reset + ggml_backend_sched_alloc_graph (what every new graph pays)
//   dispatch         graph computed through the scheduler with a toy single-node extension
//                    kernel on every other node (the ADDs), against direct native
//                    ggml_backend_graph_compute of the same graph with no kernel registered,
//                    both measured in this run: (t_sched_ext - t_native) / n_nodes.
//
// Targets: plan build under 5 ms; extension dispatch under 1 us per node. Dispatch is measured
// with one CPU thread by default, so that waking a thread pool for each tiny native range does
// not hide the dispatch cost (--threads changes it).

#include "bench-util.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext.h"
#include "ggml.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct options {
    bool   smoke      = false;
    bool   json       = false;
    int    threads    = 1;
    int    nodes      = 2000;
    double min_time_s = 0.5;
};

void usage(const char * argv0) {
    printf("usage: %s [--smoke] [--json] [--threads N] [--nodes N] [--min-time SECONDS]\n"
           "\n"
           "Times the scheduler's reserve and alloc+plan on a graph of N tiny ops, and the per-node\n"
           "overhead of extension dispatch through the scheduler against direct native compute of the\n"
           "same graph, measured in the same run.\n"
           "\n"
           "  --smoke         200 nodes, one timed repetition (a quick check that everything runs)\n"
           "  --json          also print one JSON object per result\n"
           "  --threads N     CPU threads (default 1)\n"
           "  --nodes N       graph nodes (default 2000)\n"
           "  --min-time S    time each measurement for at least S seconds (default 0.5)\n",
           argv0);
}

bool parse_args(int argc, char ** argv, options & o) {
    bench::arg_reader r("bench-sched", argc, argv);
    while (r.next()) {
        if (r.is("--help") || r.is("-h")) {
            usage(argv[0]);
            exit(0);
        }
        if (r.flag("--smoke", o.smoke) || r.flag("--json", o.json) ||
            r.int_opt("--threads", 1, GGML_MAX_N_THREADS, o.threads) || r.int_opt("--nodes", 3, 1000000, o.nodes) ||
            r.double_opt("--min-time", 0, 600, o.min_time_s)) {
            continue;
        }
        return r.unknown();
    }
    return r.ok();
}

constexpr int64_t N = 64;

struct graph {
    ggml_context *             ctx = nullptr;
    ggml_cgraph *              gf  = nullptr;
    std::vector<ggml_tensor *> inputs;

    explicit graph(int n_nodes) {
        const size_t mem = ggml_tensor_overhead() * (size_t) (n_nodes + 8) +
                           ggml_graph_overhead_custom((size_t) n_nodes + 8, false);
        ctx              = ggml_init({ mem, nullptr, true });
        ggml_tensor * x  = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, N);
        ggml_tensor * y  = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, N);
        ggml_set_input(x);
        ggml_set_input(y);
        inputs = { x, y };
        // add on every other node: those are the ones the extension kernel takes
        ggml_tensor * t = x;
        for (int i = 0; i < n_nodes; i++) {
            if (i % 2 == 0) {
                t = ggml_add(ctx, t, y);
            } else if (i % 4 == 1) {
                t = ggml_mul(ctx, t, y);
            } else {
                t = ggml_scale(ctx, t, 0.999f);
            }
        }
        ggml_set_output(t);
        gf = ggml_new_graph_custom(ctx, (size_t) n_nodes + 8, false);
        ggml_build_forward_expand(gf, t);
    }
    ~graph() { ggml_free(ctx); }

    void fill() {
        std::vector<float> v((size_t) N, 0.5f);
        for (ggml_tensor * t : inputs) ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
    }
};

// The toy single-node kernel: ADD, computed in place of the native one.
bool add_supports(ggml_backend_dev_t, const ggml_tensor * n, void *) {
    return n->type == GGML_TYPE_F32 && ggml_is_contiguous(n) && ggml_are_same_shape(n, n->src[0]) &&
           ggml_are_same_shape(n, n->src[1]);
}

ggml_status add_execute(ggml_backend_t, const ggml_ext_nodes * nodes, void *, void *, size_t, void *) {
    const ggml_tensor * n = nodes->nodes[0];
    const float *       a = (const float *) n->src[0]->data;
    const float *       b = (const float *) n->src[1]->data;
    float *             y = (float *) n->data;
    for (int64_t i = 0; i < ggml_nelements(n); i++) y[i] = a[i] + b[i];
    return GGML_STATUS_SUCCESS;
}

void print_header() {
    printf("%-14s %-28s %10s %10s %14s %-10s %s\n", "measure", "graph", "best ms", "median ms", "per node us",
           "target", "");
}

void print_line(const char * what, const std::string & shape, const bench::timing & t, double per_node_us,
                const char * target, bool met) {
    char per[32] = "-";
    if (per_node_us == per_node_us) snprintf(per, sizeof per, "%.3f", per_node_us);
    printf("%-14s %-28s %10.3f %10.3f %14s %-10s %s\n", what, shape.c_str(), t.best_s * 1e3, t.median_s * 1e3, per,
           target, met ? "met" : "MISSED");
    fflush(stdout);
}

void print_json(const char * what, int n_nodes, int threads, const bench::timing & t, double per_node_us,
                double target_value, const char * target_unit, bool met) {
    printf("{\"bench\":\"sched\",\"measure\":\"%s\",\"nodes\":%d,\"threads\":%d,\"best_ms\":%.4f,\"median_ms\":%.4f,"
           "\"reps\":%d",
           what, n_nodes, threads, t.best_s * 1e3, t.median_s * 1e3, t.reps);
    if (per_node_us == per_node_us) printf(",\"per_node_us\":%.4f", per_node_us);
    printf(",\"target\":%.3f,\"target_unit\":\"%s\",\"met\":%s}\n", target_value, target_unit, met ? "true" : "false");
    fflush(stdout);
}

} // namespace

int main(int argc, char ** argv) {
    options o;
    if (!parse_args(argc, argv, o)) {
        usage(argv[0]);
        return 1;
    }
    if (o.smoke) {
        o.nodes      = 200;
        o.min_time_s = 0;
    }
    const int min_reps = o.smoke ? 1 : 5;
    const int max_reps = o.smoke ? 1 : 2000;

    printf("bench-sched: %d nodes of [%lld] F32 add/mul/scale, CPU backend, %d thread(s)%s\n", o.nodes, (long long) N,
           o.threads, o.smoke ? ", smoke size" : "");
    if (!o.smoke && !bench::wait_idle()) printf("bench-sched: warning: the machine did not become idle\n");

    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, o.threads);
    ggml_backend_dev_t dev = ggml_backend_get_device(cpu);

    // 1. native baseline: direct compute, no kernel registered on the device yet
    graph          g_native(o.nodes);
    ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    if (!ggml_gallocr_alloc_graph(ga, g_native.gf)) {
        fprintf(stderr, "bench-sched: allocation failed\n");
        return 1;
    }
    g_native.fill();
    const bench::timing t_native = bench::time_it([&] { ggml_backend_graph_compute(cpu, g_native.gf); }, min_reps,
                                                  o.min_time_s, max_reps);

    // 2. the toy extension on every ADD
    ggml_ext_kernel_desc d = {};
    d.name                 = "bench.add";
    d.op                   = GGML_OP_ADD;
    d.supports             = add_supports;
    d.execute              = add_execute;
    if (!ggml_ext_register_kernel(dev, &d)) {
        fprintf(stderr, "bench-sched: %s\n", ggml_ext_last_error());
        return 1;
    }

    graph                g_sched(o.nodes);
    ggml_backend_sched_t sched = ggml_backend_sched_new(&cpu, nullptr, 1, (size_t) o.nodes + 16, false, false);

    // 3. planning cost
    const bench::timing t_reserve = bench::time_it([&] { ggml_backend_sched_reserve(sched, g_sched.gf); }, min_reps,
                                                   o.min_time_s, max_reps);
    const bench::timing t_alloc = bench::time_it(
        [&] {
            ggml_backend_sched_reset(sched);
            ggml_backend_sched_alloc_graph(sched, g_sched.gf);
        },
        min_reps, o.min_time_s, max_reps);

    // 4. dispatch through the plans (allocated once, computed repeatedly)
    ggml_backend_sched_reset(sched);
    if (!ggml_backend_sched_alloc_graph(sched, g_sched.gf)) {
        fprintf(stderr, "bench-sched: scheduler allocation failed\n");
        return 1;
    }
    g_sched.fill();
    int n_ext = 0;
    for (int i = 0; i < ggml_ext_sched_n_steps(sched); i++) {
        ggml_ext_step_info info;
        if (ggml_ext_sched_get_step(sched, i, &info) && info.kernel) n_ext += info.n_nodes;
    }
    const bench::timing t_sched = bench::time_it([&] { ggml_backend_sched_graph_compute(sched, g_sched.gf); },
                                                 min_reps, o.min_time_s, max_reps);

    // both graphs computed the same thing
    std::vector<float> a((size_t) N), b((size_t) N);
    ggml_backend_tensor_get(ggml_graph_node(g_native.gf, -1), a.data(), 0, sizeof(float) * N);
    ggml_backend_tensor_get(ggml_graph_node(g_sched.gf, -1), b.data(), 0, sizeof(float) * N);
    const bool same = memcmp(a.data(), b.data(), sizeof(float) * N) == 0;

    const double nan_v       = 0.0 / 0.0;
    const double overhead_us = (t_sched.best_s - t_native.best_s) / o.nodes * 1e6;
    const std::string shape  = std::to_string(o.nodes) + " nodes, " + std::to_string(n_ext) + " ext";

    print_header();
    print_line("reserve", shape, t_reserve, nan_v, "< 5 ms", t_reserve.best_s < 5e-3);
    print_line("alloc+plan", shape, t_alloc, nan_v, "< 5 ms", t_alloc.best_s < 5e-3);
    print_line("native", shape, t_native, t_native.best_s / o.nodes * 1e6, "baseline", true);
    print_line("sched+ext", shape, t_sched, t_sched.best_s / o.nodes * 1e6, "-", true);
    print_line("dispatch", "(sched+ext - native) / nodes", t_sched, overhead_us, "< 1 us", overhead_us < 1.0);
    if (!same) printf("bench-sched: WARNING: scheduler and native results differ\n");
    if (o.json) {
        print_json("reserve", o.nodes, o.threads, t_reserve, nan_v, 5, "ms", t_reserve.best_s < 5e-3);
        print_json("alloc_plan", o.nodes, o.threads, t_alloc, nan_v, 5, "ms", t_alloc.best_s < 5e-3);
        print_json("native", o.nodes, o.threads, t_native, t_native.best_s / o.nodes * 1e6, 0, "-", true);
        print_json("sched_ext", o.nodes, o.threads, t_sched, t_sched.best_s / o.nodes * 1e6, 0, "-", true);
        print_json("dispatch_overhead", o.nodes, o.threads, t_sched, overhead_us, 1, "us_per_node", overhead_us < 1.0);
    }

    ggml_backend_sched_free(sched);
    ggml_gallocr_free(ga);
    ggml_backend_free(cpu);
    return same ? 0 : 1;
}
