// sdx — drives the Krea2 block stack on the CPU backend with the sd extensions: run, inspect
// the scheduled plan, benchmark the weight/extension configurations, quantize checkpoints.

#include "cli.h"

#include <cstdio>
#include <cstring>
#include <new>
#include <string>

static const char * const TOP_HELP =
    "usage: sdx <command> [options]\n"
    "\n"
    "Runs stacks of Krea2 single-stream DiT blocks (hidden 6144, 48 heads of 128, 12 KV heads,\n"
    "SwiGLU 16384 by default) through ggml_backend_sched on the CPU backend with the sd operator\n"
    "extensions (INT8 ConvRot linears, RoPE apply, RMSNorm->Mul->RoPE fusion).\n"
    "\n"
    "commands:\n"
    "  run       run the block stack, print timings and the deviation from native F32\n"
    "  inspect   print the scheduled plan of one block graph (--json for machines)\n"
    "  bench     time F32, BF16, INT8 and INT8+fusion; write JSON and an HTML report\n"
    "  quantize  convert a safetensors checkpoint to ComfyUI int8_tensorwise + ConvRot\n"
    "  verify    check a quantized checkpoint module by module against its float original\n"
    "\n"
    "environment:\n"
    "  GGML_CPU_ISA=portable|avx2|avx_vnni|avx512|amx   cap the CPU kernels' instruction set (default:\n"
    "            everything this CPU has up to avx512; amx is opt-in); bench/run print the level used\n"
    "  GGML_CPU_KERNEL=...   force one of two equivalent kernels of a family (docs/architecture.md)\n"
    "  SD_INT8_PATH=portable|avx2|vnni   force an INT8 ConvRot path the level allows\n"
    "\n"
    "'sdx <command> --help' describes each command. Exit status: 0 success, 1 failure (files,\n"
    "memory, computation), 2 bad arguments (nothing was done), 130 / 143 stopped by SIGINT\n"
    "(Ctrl-C) / SIGTERM. Errors are one line on stderr: 'sdx: error: ...'.\n";

// One line whatever the message holds: control bytes (a newline inside an argument or a name
// read from a file) are shown as \xNN.
static void print_error(const char * what) {
    std::string m;
    for (const char * p = what; *p; ++p) {
        const unsigned char c = (unsigned char) *p;
        if (c < 0x20 || c == 0x7f) {
            char b[8];
            snprintf(b, sizeof b, "\\x%02x", c);
            m += b;
        } else {
            m += (char) c;
        }
    }
    fflush(stdout);
    fprintf(stderr, "sdx: error: %s\n", m.c_str());
}

int main(int argc, char ** argv) {
    try {
        if (argc < 2) {
            fputs(TOP_HELP, stdout);
            return 0;
        }
        const std::string cmd = argv[1];
        if (cmd == "--help" || cmd == "-h" || cmd == "help") {
            fputs(TOP_HELP, stdout);
            return 0;
        }
        if (cmd == "run") return sdx::cmd_run(argc - 1, argv + 1);
        if (cmd == "inspect") return sdx::cmd_inspect(argc - 1, argv + 1);
        if (cmd == "bench") return sdx::cmd_bench(argc - 1, argv + 1);
        if (cmd == "quantize") return sdx::cmd_quantize(argc - 1, argv + 1);
        if (cmd == "verify") return sdx::cmd_verify(argc - 1, argv + 1);
        sdx::usage_error("unknown command '" + cmd + "' (try 'sdx --help')");
    } catch (const sdx::failure & f) {
        print_error(f.what());
        return f.code;
    } catch (const std::bad_alloc &) {
        print_error("out of memory");
        return 1;
    } catch (const std::exception & e) {
        print_error(e.what());
        return 1;
    }
}
