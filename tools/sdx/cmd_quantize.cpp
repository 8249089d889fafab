// sdx quantize — a safetensors checkpoint to ComfyUI int8_tensorwise + ConvRot (sdio), or
// (--to TYPE) a safetensors/GGUF checkpoint to GGUF with block-quantized linear weights.

#include "cli.h"
#include "interrupt.h"

#include "io/comfy_int8.h"
#include "io/atomic_file.h"
#include "model/quantize_gguf.h"

#include <cstdio>

namespace sdx {

static const char * const QUANTIZE_HELP =
    "usage: sdx quantize IN.safetensors OUT.safetensors [--group G]\n"
    "       sdx quantize IN OUT.gguf --to TYPE\n"
    "\n"
    "Quantizes every 2-D F32/F16/BF16 '<m>.weight' whose input size is a multiple of G to\n"
    "ComfyUI int8_tensorwise with ConvRot (I8 weight, F32 weight_scale [out, 1], comfy_quant\n"
    "JSON); other tensors and the metadata are copied. OUT is written atomically (nothing is\n"
    "left behind on failure).\n"
    "\n"
    "Options:\n"
    "  --group G   ConvRot group, a power of 4: 4, 16, 64, 256 (default), 1024, ...; modules whose\n"
    "              input width it does not divide stay float; 0 or 1 quantize without rotation\n"
    "              (no ConvRot keys are written then). sdx run takes groups up to what this\n"
    "              build's INT8 kernels support and says so at load otherwise\n"
    "  --to TYPE   write GGUF instead: IN is safetensors or GGUF (recognised by content); every\n"
    "              2-D F32/F16/BF16 '<m>.weight' whose row length is a multiple of TYPE's block\n"
    "              becomes TYPE (q8_0, q4_0, q4_k, q5_k, q6_k, ... as this build implements\n"
    "              them; f16/bf16/f32 too); already block-quantized and all other tensors and the\n"
    "              metadata are copied. Written atomically like the safetensors output\n"
    "  --help      this text\n";

int cmd_quantize(int argc, char ** argv) {
    std::vector<std::string> files;
    int                      group = 256;
    bool                     group_set = false;
    std::string              to;
    bool                     to_set = false;
    args                     a(argc, argv);
    while (a.next()) {
        const std::string s = a.cur();
        if (s == "--help" || s == "-h") {
            fputs(QUANTIZE_HELP, stdout);
            return 0;
        }
        if (s == "--group") {
            group     = (int) a.int_value(0, 1 << 30);
            group_set = true;
            if (group != 0 && !sdio::is_power_of_4(group)) usage_error("option --group: must be 0 or a power of 4 (1, 4, 16, ..., 1024, ...)");
        } else if (s == "--to") {
            to     = a.value();
            to_set = true;
        } else if (!s.empty() && s[0] == '-' && s != "-") {
            usage_error("quantize: unknown option '" + s + "' (try 'sdx quantize --help')");
        } else {
            files.push_back(s);
        }
    }
    if (files.size() != 2) usage_error("quantize needs IN.safetensors and OUT.safetensors (try 'sdx quantize --help')");
    if (files[0].empty() || files[1].empty()) usage_error("quantize: a file name is empty");
    // Compared as files (device + inode), not strings: "in.st" and "./in.st" or a hard link are
    // the same file, and replacing the float original with its quantized copy loses it.
    if (files[0] == files[1] || sdio::same_file(files[0], files[1])) usage_error("quantize: IN and OUT are the same file");
    std::string perr;
    if (!sdio::check_output_path(files[1], perr)) usage_error("quantize: " + perr);
    if (to_set) {
        if (group_set) usage_error("quantize: --group is for the ComfyUI int8 output, --to for GGUF; not both");
        ggml_type   type;
        std::string avail;
        if (!krea2::parse_quant_type(to, type, avail)) usage_error("option --to: '" + to + "' is not a type this build quantizes to (" + avail + ")");
        // Ctrl-C / SIGTERM: stop after the current tensor (exit 130 / 143); the temporary file
        // goes with the unwinding, an existing OUT stays as it was
        interrupt_scope stop_on_signal;
        progress        p("quantize");
        std::string     err;
        const bool      ok = krea2::quantize_to_gguf(files[0], files[1], type, err, [&](size_t done, size_t total) {
            abort_poll(nullptr); // one poll per tensor (the SDX_TEST_*_AT_POLL hooks count these)
            stop_if_interrupted();
            p.update((double) done, (double) total, fmt("%zu/%zu tensors", done, total));
        });
        p.finish();
        if (!ok) fail(err);
        printf("sdx quantize: wrote %s (GGUF, linear weights %s)\n", files[1].c_str(), ggml_type_name(type));
        return 0;
    }
    progress    p("quantize");
    std::string err;
    const bool  ok = krea2::quantize_checkpoint(files[0], files[1], group, err, [&](size_t done, size_t total) {
        p.update((double) done, (double) total, fmt("%zu/%zu tensors", done, total));
    });
    p.finish();
    if (!ok) fail(err);
    if (group > 1) printf("sdx quantize: wrote %s (ConvRot group %d)\n", files[1].c_str(), group);
    else printf("sdx quantize: wrote %s (no rotation)\n", files[1].c_str());
    return 0;
}

} // namespace sdx
