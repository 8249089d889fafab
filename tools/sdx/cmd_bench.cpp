// sdx bench — the block stack in every weight/extension configuration, timed in one process,
// with a JSON record and a self-contained HTML report (inline SVG, no scripts).

#include "cli.h"
#include "interrupt.h"
#include "memory_check.h"

#include "io/atomic_file.h"

#include "ggml_extensions.h" // sd_cpu_*: which CPU and kernels produced a timing

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unistd.h>

namespace sdx {

static const char * const BENCH_HELP =
    "usage: sdx bench [options]\n"
    "\n"
    "Runs the same Krea2 block stack (same synthetic weights from --seed, same input) in four\n"
    "configurations in one process and times each (best and median of --runs runs of the whole\n"
    "stack's compute; one graph per block, planning excluded):\n"
    "  f32-native   F32 weights, native ggml ops only (RoPE as the plain op chain)\n"
    "  bf16-native  BF16 weights (mul_mat), native ops only\n"
    "  int8-ext     INT8 ConvRot weights via the sd extension kernels, fusion off\n"
    "  int8-fused   INT8 ConvRot weights, extensions and the sd fusion rules on\n"
    "  q8_0-native  Q8_0 block-quantized weights (mul_mat, F32 activations), native ops\n"
    "  q4_k-native  Q4_K weights likewise; a block type this build cannot quantize or\n"
    "               multiply is listed as not run, with the reason (JSON \"not_run\")\n"
    "Prints time ratios and each output's relative RMS deviation from f32-native, and writes\n"
    "--json and --html (atomically). Defaults: 2 blocks x 1024 tokens at the real width; that\n"
    "takes about 80 s on an idle 2-core machine (F32 and BF16 dominate).\n"
    "\n"
    "The peak memory is checked before anything is allocated (as in sdx run). Ctrl-C or\n"
    "SIGTERM stops at the next abort poll: exit 130 / 143, no JSON or HTML written.\n"
    "\n"
    "Options:\n"
    "  --runs N      timed runs per configuration, 1..1000 (default 3)\n"
    "  --cpu-time    time by the process's CPU seconds / threads instead of wall-clock seconds\n"
    "                (for a machine shared with other work; a spinning pool thread counts)\n"
    "  --json FILE   JSON record (default sdx-bench.json)\n"
    "  --html FILE   HTML report (default sdx-bench.html)\n"
    "  --help        this text\n"
    "(--dtype and --no-fusion do not apply: bench runs every configuration.)\n";

namespace {

struct bench_cfg {
    const char * name;
    krea2::wtype type;
    bool         rope_ext, fusion;
};

struct bench_result {
    bench_cfg           c;
    std::vector<double> times;
    double              best = 0, median = 0, rel_rms = 0, rel_rms_update = 0;
    int                 fused_steps = 0, ext_steps = 0;
    std::string         kernels; // the CPU kernels of the native GEMM / attention nodes of a block
};

// "MUL_MAT avx512 f32fma x7, FLASH_ATTN_EXT avx512 f32fma x1": the native nodes of one block graph
// that have a CPU kernel name (runner::plan), counted by op and kernel in graph order
std::string kernel_summary(const krea2::runner::plan_info & p) {
    std::vector<std::pair<std::string, int>> counts;
    for (const auto & n : p.nodes) {
        if (n.mode != "native" || n.kernel.empty()) continue;
        const std::string key   = n.op + " " + n.kernel;
        bool              found = false;
        for (auto & kc : counts)
            if (kc.first == key) { kc.second++; found = true; }
        if (!found) counts.push_back({key, 1});
    }
    std::string s;
    for (const auto & kc : counts) s += (s.empty() ? "" : ", ") + kc.first + " x" + std::to_string(kc.second);
    // the sd INT8 kernels run as extension steps: name the instruction-set path they take
    bool int8 = false;
    for (const auto & n : p.nodes) int8 = int8 || (n.mode != "native" && n.kernel.find("i8") != std::string::npos);
    if (int8) s += std::string(s.empty() ? "" : ", ") + "sd INT8 ConvRot path " + sd_cpu_int8_path();
    return s.empty() ? "none" : s;
}

// Fails now rather than after minutes of benchmarking when an output cannot be created (the
// path is a symlink or not a regular file, or its directory is not writable). Creates nothing.
void check_writable(const std::string & path) {
    std::string err;
    if (!sdio::check_output_path(path, err)) fail(err);
    const size_t      slash = path.find_last_of('/');
    const std::string dir   = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    if (access(dir.c_str(), W_OK | X_OK) != 0) fail("cannot write " + path + ": directory '" + dir + "': " + strerror(errno));
}

std::string html_escape(const std::string & s) {
    std::string o;
    for (char c : s) {
        if (c == '<') o += "&lt;";
        else if (c == '>') o += "&gt;";
        else if (c == '&') o += "&amp;";
        else o += c;
    }
    return o;
}

std::string make_html(const krea2::config & c, const std::string & desc, const std::vector<bench_result> & rs) {
    double tmax = 0;
    for (const auto & r : rs) tmax = std::max(tmax, r.median);
    const int bar_w = 520, row_h = 34, left = 120, top = 20;
    const int h     = top + row_h * (int) rs.size() + 30;
    std::string svg = fmt("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
                          "font-size=\"13\">\n", left + bar_w + 170, h);
    static const char * colors[] = {"#8c8c8c", "#6a8fc7", "#e0a03c", "#3c9e5a", "#a05ab4", "#c75a5a"};
    for (size_t i = 0; i < rs.size(); ++i) {
        const auto & r  = rs[i];
        const int    y  = top + row_h * (int) i;
        const double wb = tmax > 0 ? bar_w * r.best / tmax : 0, wm = tmax > 0 ? bar_w * r.median / tmax : 0;
        svg += fmt("<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>\n", left - 8, y + 18, r.c.name);
        svg += fmt("<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"22\" fill=\"%s\"/>\n", left, y + 4, wb, colors[i % 6]);
        svg += fmt("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#000\" stroke-width=\"2\"/>\n", left + wm, y + 2,
                   left + wm, y + 28);
        svg += fmt("<text x=\"%.1f\" y=\"%d\">%.3f s (median %.3f s)</text>\n", left + std::max(wb, wm) + 6, y + 18, r.best,
                   r.median);
    }
    svg += fmt("<text x=\"%d\" y=\"%d\" fill=\"#555\">bar: best stack time; black tick: median</text>\n", left,
               h - 8);
    svg += "</svg>\n";

    std::string t = "<table>\n<tr><th>configuration</th><th>best (s)</th><th>median (s)</th><th>per block (s)</th>"
                    "<th>tokens/s</th><th>speed-up vs f32-native</th><th>rel. RMS vs f32-native (output)</th>"
                    "<th>rel. RMS vs f32-native (update out - x)</th>"
                    "<th>fused steps / block</th></tr>\n";
    for (const auto & r : rs) {
        t += fmt("<tr><td>%s</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%.1f</td><td>%.2fx</td><td>%.3e</td><td>%.3e</td><td>%d</td></tr>\n",
                 r.c.name, r.best, r.median, r.best / c.blocks, c.tokens / r.best, rs[0].best / r.best, r.rel_rms,
                 r.rel_rms_update, r.fused_steps);
    }
    t += "</table>\n";
    return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>sdx bench</title>\n"
           "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
           "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:first-child{text-align:left}</style>\n"
           "</head><body>\n<h1>sdx bench: Krea2 block stack on the CPU backend</h1>\n<p>" +
           html_escape(desc) + "</p>\n" + svg + t + "</body></html>\n";
}

} // namespace

int cmd_bench(int argc, char ** argv) {
    model_opts  o;
    int         runs = 3;
    bool        cpu_time = false;
    std::string json_path = "sdx-bench.json", html_path = "sdx-bench.html";
    args        a(argc, argv);
    while (a.next()) {
        const std::string s = a.cur();
        if (s == "--help" || s == "-h") {
            printf("%s%s", BENCH_HELP, MODEL_OPTS_HELP);
            return 0;
        }
        if (s == "--runs") runs = (int) a.int_value(1, 1000);
        else if (s == "--cpu-time") cpu_time = true;
        else if (s == "--json") json_path = a.value();
        else if (s == "--html") html_path = a.value();
        else if (s == "--dtype" || s == "--no-fusion") usage_error("bench: " + s + " does not apply (bench runs every configuration)");
        else if (!o.parse(a)) usage_error("bench: unknown option '" + s + "' (try 'sdx bench --help')");
    }
    o.finish();
    if (json_path.empty() || html_path.empty()) usage_error("bench: --json and --html need a file name");
    check_writable(json_path);
    check_writable(html_path);

    interrupt_scope stop_on_signal;
    krea2::runner   r;
    std::string     err;
    if (!r.init(o.threads, err, o.device)) fail(err);
    r.set_abort_callback(abort_poll, nullptr);

    std::vector<bench_cfg> cfgs = {
        {"f32-native", krea2::wtype::f32, false, true},
        {"bf16-native", krea2::wtype::bf16, false, true},
        {"int8-ext", krea2::wtype::int8, true, false},
        {"int8-fused", krea2::wtype::int8, true, true},
    };
    std::vector<std::pair<std::string, std::string>> not_run; // (configuration, why)
    {
        // every configuration in turn; each holds the F32 reference output and its own first output
        if (!o.weights.empty()) make_source(o); // the checkpoint fixes the width
        // the block-quantized stacks, where this build has the type and its mul_mat
        const bench_cfg quant[] = {{"q8_0-native", krea2::wtype::q8_0, false, true}, {"q4_k-native", krea2::wtype::q4_k, false, true}};
        for (const bench_cfg & q : quant) {
            const std::string why = krea2::check_quant_wtype(o.cfg, q.type);
            if (why.empty()) cfgs.push_back(q);
            else {
                not_run.push_back({q.name, why});
                printf("%-12s not run: %s\n", q.name, why.c_str());
            }
        }
        std::vector<run_phase> phases;
        for (const bench_cfg & bc : cfgs) {
            krea2::build_options bo;
            bo.rope_ext = bc.rope_ext;
            bo.fusion   = bc.fusion;
            phases.push_back({{bc.type, bo, phases.empty() ? 1 : 2}, std::string("the ") + bc.name + " stack"});
        }
        krea2::available_memory avail;
        check_memory(r, o, phases, -1, avail);
    }
    const char * forced = getenv("GGML_CPU_KERNEL");
    printf("sdx bench: CPU %s; instruction set %s (CPU: %s%s); kernel table row: %s; mul_mat_bf16=%s flash_attn=%s%s\n",
           sd_cpu_model_name(), sd_cpu_isa(), sd_cpu_isa_detected(),
           getenv("GGML_CPU_ISA") && *getenv("GGML_CPU_ISA") ? ", capped by GGML_CPU_ISA" : "", sd_cpu_kernel_table_row(), sd_cpu_get_kernel("mul_mat_bf16"), sd_cpu_get_kernel("flash_attn"),
           forced && *forced ? " (GGML_CPU_KERNEL set)" : "");
    const int n_threads = sd_cpu_backend_n_threads(r.backend());
    if (cpu_time) printf("sdx bench: times are process CPU seconds / %d threads (--cpu-time), not wall-clock time\n", n_threads);
    std::vector<bench_result> rs;
    std::vector<float>        ref, x, tvec;
    krea2::config             c;
    std::unique_ptr<krea2::model> mp;
    for (const bench_cfg & bc : cfgs) {
        // the two INT8 configurations share one quantized model
        if (!mp || mp->type() != bc.type) {
            mp.reset(); // free the previous weights first (F32 at full width: 1.7 GB per block)
            mp.reset(new krea2::model);
            load_model(o, bc.type, *mp, true);
            place_weights(r, *mp);
        }
        const krea2::model & m = *mp;
        c                      = m.cfg();
        if (x.empty()) {
            x    = krea2::synthetic_input(c, o.seed);
            tvec = krea2::synthetic_tvec(c, o.seed);
        }
        krea2::build_options bo;
        bo.rope_ext = bc.rope_ext;
        bo.fusion   = bc.fusion;
        bench_result br;
        br.c = bc;
        krea2::runner::plan_info p;
        if (!r.plan(m, bo, 0, p, err)) fail(err);
        br.fused_steps = p.n_fused;
        br.ext_steps   = p.n_ext;
        br.kernels     = kernel_summary(p);
        std::vector<float> out;
        for (int i = 0; i < runs; ++i) {
            krea2::runner::result res = run_stack(r, m, bo, x, tvec, fmt("%s %d/%d", bc.name, i + 1, runs));
            br.times.push_back(cpu_time ? res.cpu_s / n_threads : res.total_s);
            if (i == 0) out = std::move(res.out);
        }
        std::vector<double> t = br.times;
        std::sort(t.begin(), t.end());
        br.best   = t.front();
        br.median = t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
        if (ref.empty()) ref = out;
        br.rel_rms        = krea2::rel_rms(out, ref);
        br.rel_rms_update = krea2::rel_rms_update(out, ref, x);
        printf("%-12s best %8.3f s  median %8.3f s  per block %7.3f s  %9.1f tokens/s  rel RMS vs f32 %.3e (update %.3e)  fused steps %d\n",
               bc.name, br.best, br.median, br.best / c.blocks, c.tokens / br.best, br.rel_rms, br.rel_rms_update,
               br.fused_steps);
        printf("%-12s kernels per block: %s\n", "", br.kernels.c_str());
        fflush(stdout);
        rs.push_back(br);
    }
    const double f32 = rs[0].best, bf16 = rs[1].best, ext = rs[2].best, fused = rs[3].best;
    printf("int8-fused speed-up: %.2fx vs f32-native, %.2fx vs bf16-native, %.2fx vs int8-ext (best times)\n",
           f32 / fused, bf16 / fused, ext / fused);

    const std::string desc = fmt("%d block(s) x %lld tokens (%lld text), hidden %lld, %lld heads / %lld KV heads, "
                                 "MLP %lld, %d run(s) per configuration, seed %llu%s%s.",
                                 c.blocks, (long long) c.tokens, (long long) c.text_tokens, (long long) c.hidden,
                                 (long long) c.heads, (long long) c.kv_heads, (long long) c.mlp, runs,
                                 (unsigned long long) o.seed, o.weights.empty() ? ", synthetic weights" : ", weights ",
                                 o.weights.c_str());
    std::string j = "{\n  \"tool\": \"sdx bench\",\n";
    j += fmt("  \"cpu\": \"%s\", \"isa\": \"%s\", \"isa_detected\": \"%s\", \"kernel_table_row\": \"%s\", \"clock\": \"%s\",\n",
             json_escape(sd_cpu_model_name()).c_str(), sd_cpu_isa(), sd_cpu_isa_detected(),
             json_escape(sd_cpu_kernel_table_row()).c_str(), cpu_time ? "process cpu seconds / threads" : "wall");
    j += fmt("  \"config\": {\"blocks\": %d, \"tokens\": %lld, \"text_tokens\": %lld, \"hidden\": %lld, \"heads\": %lld, "
             "\"kv_heads\": %lld, \"mlp\": %lld, \"seed\": %llu, \"runs\": %d, \"threads\": %d, \"weights\": \"%s\"},\n",
             c.blocks, (long long) c.tokens, (long long) c.text_tokens, (long long) c.hidden, (long long) c.heads,
             (long long) c.kv_heads, (long long) c.mlp, (unsigned long long) o.seed, runs, o.threads,
             json_escape(o.weights).c_str());
    j += "  \"results\": [\n";
    for (size_t i = 0; i < rs.size(); ++i) {
        const auto & b = rs[i];
        std::string  ts;
        for (size_t k = 0; k < b.times.size(); ++k) ts += fmt("%s%.6f", k ? ", " : "", b.times[k]);
        j += fmt("    {\"name\": \"%s\", \"dtype\": \"%s\", \"rope\": \"%s\", \"fusion\": %s, \"times_s\": [%s], "
                 "\"best_s\": %.6f, \"median_s\": %.6f, \"per_block_best_s\": %.6f, \"tokens_per_s\": %.3f, "
                 "\"rel_rms_vs_f32\": %.6e, \"rel_rms_update_vs_f32\": %.6e, \"fused_steps_per_block\": %d, \"extension_steps_per_block\": %d, \"kernels\": \"%s\"}%s\n",
                 b.c.name, krea2::wtype_name(b.c.type), b.c.rope_ext ? "sd_rope_apply" : "chain",
                 b.c.fusion ? "true" : "false", ts.c_str(), b.best, b.median, b.best / c.blocks, c.tokens / b.best,
                 b.rel_rms, b.rel_rms_update, b.fused_steps, b.ext_steps, json_escape(b.kernels).c_str(),
                 i + 1 < rs.size() ? "," : "");
    }
    j += "  ],\n  \"not_run\": [";
    for (size_t i = 0; i < not_run.size(); ++i)
        j += fmt("%s{\"name\": \"%s\", \"why\": \"%s\"}", i ? ", " : "", not_run[i].first.c_str(), json_escape(not_run[i].second).c_str());
    j += "],\n";
    j += fmt("  \"speedup_int8_fused\": {\"vs_f32_native\": %.4f, \"vs_bf16_native\": %.4f, \"vs_int8_ext\": %.4f}\n}\n",
             f32 / fused, bf16 / fused, ext / fused);
    write_file_atomic(json_path, j);
    write_file_atomic(html_path, make_html(c, desc, rs));
    printf("wrote %s and %s\n", json_path.c_str(), html_path.c_str());
    return 0;
}

} // namespace sdx
