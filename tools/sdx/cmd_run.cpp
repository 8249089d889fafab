// sdx run — the block stack on INT8 ConvRot (or --dtype) weights, timed per block, checked
// against the same stack in native F32.

#include "cli.h"
#include "interrupt.h"
#include "memory_check.h"

#include "ggml_extensions.h" // sd_cpu_*: the CPU and instruction-set level that run the stack

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

namespace sdx {

static const char * const RUN_HELP =
    "usage: sdx run [options]\n"
    "\n"
    "Runs --blocks Krea2 single-stream blocks over --tokens tokens through ggml_backend_sched on\n"
    "the CPU backend, with sd_ggml_register_extensions() (extension kernels and fusion on).\n"
    "Weights are deterministic synthetic values from --seed (F32, converted to BF16 or quantized\n"
    "to INT8 ConvRot G=256 so every dtype computes the same model), or --weights FILE.\n"
    "Each block is its own graph; the time printed per block is its graph compute (planning and\n"
    "allocation excluded), tokens/s = tokens / the whole stack's compute time.\n"
    "--check (on by default) also runs the stack in F32 with native ops only (the RoPE as the\n"
    "plain op chain) and prints the relative RMS deviation of the output from it.\n"
    "Defaults: 2 blocks x 1024 tokens at the real width (about 30 s on a 2-core machine, two\n"
    "thirds of it the F32 weights and check; --no-check skips them). --weights reads only\n"
    "the first --blocks blocks of the file.\n"
    "\n"
    "Before allocating, the peak memory (weights, compute buffer with the extension workspaces,\n"
    "the CPU work buffer, host copies, and the F32 weights of the check) is measured and\n"
    "compared with the memory available (MemAvailable and the cgroup limit); a run that does\n"
    "not fit stops with the sizes and what would fit (exit 1).\n"
    "Ctrl-C (SIGINT) or SIGTERM stops the computation at its next abort poll and exits with\n"
    "128 + the signal (130, 143); a second one kills at once.\n"
    "\n"
    "Options:\n"
    "  --check / --no-check   compare with native F32 (default on; give one of them at most)\n"
    "  --profile              time every node (the graph runs node by node, fusion off) and\n"
    "                         print the time per op, largest first\n"
    "  --help                 this text\n";

int cmd_run(int argc, char ** argv) {
    model_opts o;
    bool       check = true;
    bool       profile = false;
    bool       check_given = false;
    args       a(argc, argv);
    while (a.next()) {
        const std::string s = a.cur();
        if (s == "--help" || s == "-h") {
            printf("%s%s", RUN_HELP, MODEL_OPTS_HELP);
            return 0;
        }
        if (s == "--check" || s == "--no-check") {
            if (check_given) usage_error("options --check and --no-check conflict");
            check_given = true;
            check       = s == "--check";
        }
        else if (s == "--profile") profile = true;
        else if (!o.parse(a)) usage_error("run: unknown option '" + s + "' (try 'sdx run --help')");
    }
    o.finish();

    interrupt_scope stop_on_signal;
    krea2::runner   r;
    std::string     err;
    if (!r.init(o.threads, err, o.device)) fail(err);
    r.set_abort_callback(abort_poll, nullptr);

    krea2::build_options bo;
    bo.rope_ext = true;
    bo.fusion   = o.fusion;
    krea2::build_options nb; // the check: F32, native ops only
    nb.rope_ext = false;

    // opening a checkpoint fixes the width; then the peak is known before anything big exists
    std::unique_ptr<krea2::weight_source> src = make_source(o);
    std::vector<run_phase> phases = {{{o.dtype, bo, 0}, std::string("the ") + krea2::wtype_name(o.dtype) + " stack"}};
    if (check) phases.push_back({{krea2::wtype::f32, nb, 1}, "the F32 check"});
    krea2::available_memory      avail;
    const krea2::memory_estimate need = check_memory(r, o, phases, check ? 1 : -1, avail);

    auto m = std::make_unique<krea2::model>();
    load_model(o, o.dtype, *m, *src);
    place_weights(r, *m);
    src.reset();
    const krea2::config c = m->cfg();
    printf("sdx run: %d block(s), %lld tokens (%lld text), hidden %lld, %lld heads / %lld kv heads, mlp %lld, %s weights%s, fusion %s\n",
           c.blocks, (long long) c.tokens, (long long) c.text_tokens, (long long) c.hidden, (long long) c.heads,
           (long long) c.kv_heads, (long long) c.mlp, krea2::wtype_name(o.dtype), o.weights.empty() ? " (synthetic)" : "",
           o.fusion ? "on" : "off");
    if (avail.bytes == SIZE_MAX) printf("  memory: estimated peak %s (available memory unknown)\n", human_bytes(need.total).c_str());
    else printf("  memory: estimated peak %s, %s available (%s)\n", human_bytes(need.total).c_str(),
                human_bytes(avail.bytes).c_str(), avail.source.c_str());
    printf("  cpu: %s, instruction set %s (CPU: %s%s)\n", sd_cpu_model_name(), sd_cpu_isa(), sd_cpu_isa_detected(),
           getenv("GGML_CPU_ISA") && *getenv("GGML_CPU_ISA") ? ", capped by GGML_CPU_ISA" : "");
    if (r.device_backend()) {
        printf("  device: %s = %s (CPU fallback for what it declines)\n", o.device.c_str(),
               ggml_backend_name(r.device_backend()));
    }
    fflush(stdout);

    const std::vector<float> x    = krea2::synthetic_input(c, o.seed);
    const std::vector<float> tvec = krea2::synthetic_tvec(c, o.seed);
    r.set_profile(profile);
    krea2::runner::result res = run_stack(r, *m, bo, x, tvec, std::string("run ") + krea2::wtype_name(o.dtype));
    if (profile) {
        std::vector<krea2::runner::profile_row> rows = r.profile();
        r.set_profile(false);
        std::sort(rows.begin(), rows.end(), [](const auto & a, const auto & b) { return a.seconds > b.seconds; });
        double sum = 0;
        for (const auto & row : rows) sum += row.seconds;
        printf("  profile (node by node, fusion off): %-24s %6s %10s %7s\n", "op", "nodes", "seconds", "share");
        for (const auto & row : rows) {
            printf("  %36s%-24s %6d %10.4f %6.1f%%\n", "", row.op.c_str(), row.count, row.seconds,
                   sum > 0 ? 100.0 * row.seconds / sum : 0.0);
        }
    }
    for (size_t i = 0; i < res.block_s.size(); ++i) printf("  block %zu: %.3f s\n", i, res.block_s[i]);
    printf("  per block (mean): %.3f s\n", res.total_s / c.blocks);
    printf("  stack: %.3f s, %.1f tokens/s\n", res.total_s, c.tokens / res.total_s);
    fflush(stdout);

    if (check) {
        const std::vector<float> out = std::move(res.out);
        m.reset(); // free first: at full width the F32 weights alone are 1.7 GB per block
        krea2::model f;
        load_model(o, krea2::wtype::f32, f, true);
        // the reference is always native F32 on the CPU
        krea2::runner cpu_r;
        if (r.device_backend()) {
            if (!cpu_r.init(o.threads, err)) fail(err);
            cpu_r.set_abort_callback(abort_poll, nullptr);
        }
        krea2::runner & ref_r = r.device_backend() ? cpu_r : r;
        const krea2::runner::result ref = run_stack(ref_r, f, nb, x, tvec, "check f32");
        printf("  check: relative RMS deviation from native F32: %.3e of the output, %.3e of the stack's update (out - x);"
               " native F32 stack %.3f s\n",
               krea2::rel_rms(out, ref.out), krea2::rel_rms_update(out, ref.out, x), ref.total_s);
    }
    return 0;
}

} // namespace sdx
