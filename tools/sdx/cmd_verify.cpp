// sdx verify — every int8_tensorwise module of a quantized checkpoint against the float
// checkpoint it was made from (sdio::verify_module states the two checks and their bounds).

#include "cli.h"

#include "io/comfy_int8.h"
#include "io/comfy_verify.h"
#include "io/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <thread>

namespace sdx {

static const char * const VERIFY_HELP =
    "usage: sdx verify QUANT.safetensors FLOAT.safetensors [--rows N] [--seed S] [--only TEXT] [--threads N]\n"
    "\n"
    "For every ComfyUI int8_tensorwise module <m> of QUANT (configured by <m>.comfy_quant or the\n"
    "header's _quantization_metadata, read as ComfyUI reads them), compares with <m> of FLOAT:\n"
    "  weight  the dequantized weight with the ConvRot rotation undone against the float weight;\n"
    "          bound per output row: ||error|| <= scale * sqrt(in) (one quantization step per\n"
    "          value); round to nearest gives about 0.29 of it\n"
    "  linear  N random inputs through the INT8 arithmetic (rotation, per-row activation\n"
    "          quantization, integer GEMM, scales, bias) against the float linear; bound: the RMS\n"
    "          error that weights at the bound above and round-to-nearest activations allow;\n"
    "          a correct file gives about 0.4 of it\n"
    "Each module prints both ratios to their bounds and PASS (both <= 1) or FAIL. A misread\n"
    "layout (a dropped rotation, a changed group) is tens of times over the bounds.\n"
    "Modules that are float in QUANT are not checked (counted in the summary).\n"
    "\n"
    "Exit status: 0 every module passes, 1 some module fails, 2 bad input (unreadable or invalid\n"
    "file or module, no float counterpart, shapes that differ, no int8 module at all).\n"
    "\n"
    "Options:\n"
    "  --rows N     random input rows for the linear check (default 4)\n"
    "  --seed S     seed of the random inputs (default 1)\n"
    "  --only TEXT  check only the modules whose name contains TEXT\n"
    "  --threads N  threads (default: all cores; the results do not depend on it)\n"
    "  --help       this text\n";

namespace {

// A module of QUANT is checked when its weight is 2-D I8 or it has a configuration.
bool looks_quantized(const sdio::reader & r, const sdio::header_quant & h, const std::string & m) {
    const sdio::tensor_view * w = r.find(m + ".weight");
    return (w && w->dtype == "I8") || r.find(m + ".comfy_quant") || h.layers.count(m);
}

} // namespace

int cmd_verify(int argc, char ** argv) {
    std::vector<std::string> files;
    int                      rows = 4;
    uint64_t                 seed = 1;
    std::string              only;
    int                      threads = (int) std::max(1u, std::thread::hardware_concurrency());
    args                     a(argc, argv);
    while (a.next()) {
        const std::string s = a.cur();
        if (s == "--help" || s == "-h") {
            fputs(VERIFY_HELP, stdout);
            return 0;
        }
        if (s == "--rows") rows = (int) a.int_value(1, 4096);
        else if (s == "--seed") seed = (uint64_t) a.int_value(0, INT64_MAX);
        else if (s == "--only") only = a.value();
        else if (s == "--threads") threads = (int) a.int_value(1, 512);
        else if (!s.empty() && s[0] == '-' && s != "-") usage_error("verify: unknown option '" + s + "' (try 'sdx verify --help')");
        else files.push_back(s);
    }
    if (files.size() != 2) usage_error("verify needs QUANT.safetensors and FLOAT.safetensors (try 'sdx verify --help')");

    std::string err;
    auto        qr = sdio::reader::open(files[0], err);
    if (!qr) usage_error(err);
    auto fr = sdio::reader::open(files[1], err);
    if (!fr) usage_error(err);
    sdio::header_quant qh, fh;
    if (!sdio::read_header_quant(*qr, qh, err) || !sdio::read_header_quant(*fr, fh, err)) usage_error(err);

    std::vector<std::string> modules;
    size_t                   float_modules = 0;
    const std::string        suffix        = ".weight";
    for (const auto & t : qr->tensors()) {
        if (t.name.size() <= suffix.size() || t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
        const std::string m = t.name.substr(0, t.name.size() - suffix.size());
        if (!only.empty() && m.find(only) == std::string::npos) continue;
        if (looks_quantized(*qr, qh, m)) modules.push_back(m);
        else if (t.shape.size() == 2) ++float_modules;
    }
    if (modules.empty()) usage_error(files[0] + ": no int8_tensorwise module" + (only.empty() ? "" : " matching '" + only + "'"));

    printf("sdx verify: %zu int8 module(s) of %s against %s; linear check on %d random row(s), seed %llu\n", modules.size(),
           files[0].c_str(), files[1].c_str(), rows, (unsigned long long) seed);
    printf("  bounds: weight ||error_row|| <= scale * sqrt(in); linear RMS error <= the RMS those weights and\n"
           "  round-to-nearest activations allow (see 'sdx verify --help'); ratios <= 1 pass\n");
    size_t n_pass = 0, n_fail = 0, n_bad = 0;
    for (const std::string & m : modules) {
        sdio::linear_module q, f;
        sdio::module_check  c;
        std::string         why;
        const bool          ok = sdio::read_linear(*qr, m, q, why, &qh) && sdio::read_linear(*fr, m, f, why, &fh) &&
                        sdio::verify_module(q, f, rows, seed, c, why, threads);
        if (!ok) {
            ++n_bad;
            printf("  %-40s ERROR %s\n", m.c_str(), why.c_str());
            fflush(stdout);
            continue;
        }
        const bool pass = c.pass();
        (pass ? n_pass : n_fail)++;
        const std::string layout = q.convrot && q.group > 1 ? fmt("ConvRot %d", q.group) : std::string("no rotation");
        printf("  %-40s [%lld -> %lld] %-12s %s  weight: rel RMS %.2e, %.3f of bound  linear: rel RMS %.2e, %.3f of bound  %s\n",
               m.c_str(), (long long) q.in, (long long) q.out, layout.c_str(), q.per_tensor_scale ? "tensor scale" : "row scales",
               c.weight_rel_rms, c.weight_ratio, c.linear_rel_rms, c.linear_ratio, pass ? "PASS" : "FAIL");
        fflush(stdout);
    }
    printf("sdx verify: %zu pass, %zu fail, %zu could not be compared; %zu float module(s) not checked\n", n_pass, n_fail, n_bad,
           float_modules);
    if (n_bad) {
        fflush(stdout);
        fprintf(stderr, "sdx: error: %zu module(s) could not be compared (see above)\n", n_bad);
        return 2;
    }
    if (n_fail) {
        fflush(stdout);
        fprintf(stderr, "sdx: error: %zu module(s) over their bounds (see above)\n", n_fail);
        return 1;
    }
    return 0;
}

} // namespace sdx
