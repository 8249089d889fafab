#pragma once

// cpu-isa.h — the instruction-set level every CPU kernel choice goes through (internal).
//
// A level is a tier of instruction sets a kernel may be written for. The CPU's level is the
// highest tier whose base requirements it meets; the active level is that, capped by
// GGML_CPU_ISA (read once) or ggml_cpu_set_isa() (tests, benchmarks). Kernel choice asks only
// ggml_cpu_isa_allows() / ggml_cpu_active_features(), never the raw CPUID flags, so nothing above
// the cap runs: a test or a benchmark can run the AVX2 kernels on an AVX-512 machine.
//
//   x86-64   portable < avx2 (AVX2 + FMA + F16C) < avx_vnni (+ VEX-encoded VNNI)
//                     < avx512 (F + BW + VL + DQ, with VNNI / BF16 where the CPU has them) < amx
//   AArch64  portable < neon (ARMv8-A Advanced SIMD) < dotprod (+ SDOT/UDOT)
//                     < i8mm (+ SMMLA; BF16 where the CPU has it)
//
// The two families share one enum so every name parses everywhere, but a level orders only
// against its own family and portable: on an AArch64 CPU ggml_cpu_isa_allows(avx2) is false and
// GGML_CPU_ISA=avx2 is refused with a message. Within a level, optional features (AVX512-VNNI,
// AVX512-BF16; FP16 arithmetic and SVE from neon up) are used where present; a level the CPU
// lacks is never active. AMX is opt-in (GGML_CPU_ISA=amx, or the older GGML_CPU_AMX=1):
// its kernels are untested on the machines this project runs on, so the default cap is avx512.
//
// Note: in a GGML_NATIVE=ON build the compiler may use the build machine's instructions in the
// portable code too; the cap governs the hand-written kernels. A GGML_NATIVE=OFF build (baseline
// x86-64) is what runs on any CPU and what the emulated AVX2 test pass uses.

#include "cpu-features.h"

enum class ggml_cpu_isa : int {
    portable = 0,
    avx2     = 1,
    avx_vnni = 2,
    avx512   = 3,
    amx      = 4,
    neon     = 5,
    dotprod  = 6,
    i8mm     = 7,
    count
};

// Levels of the AArch64 family are neon..i8mm; portable belongs to both families.
inline bool ggml_cpu_isa_is_arm(ggml_cpu_isa level) {
    return (int) level >= (int) ggml_cpu_isa::neon && (int) level < (int) ggml_cpu_isa::count;
}

// The highest level this CPU (and OS) supports.
ggml_cpu_isa ggml_cpu_isa_detected(void);
// The level kernels may use now: min(detected, cap). Cheap (an atomic load).
ggml_cpu_isa ggml_cpu_isa_active(void);
// Whether kernels of `level` may run now: level is portable, or of the active level's family and
// not above it.
inline bool ggml_cpu_isa_allows(ggml_cpu_isa level) {
    const ggml_cpu_isa active = ggml_cpu_isa_active();
    return level == ggml_cpu_isa::portable ||
           (ggml_cpu_isa_is_arm(level) == ggml_cpu_isa_is_arm(active) && (int) level <= (int) active);
}
// The detected features with everything above the active level cleared (so `f.avx512f` is
// false under GGML_CPU_ISA=avx2 even on an AVX-512 CPU).
const ggml_cpu_features & ggml_cpu_active_features(void);

const char * ggml_cpu_isa_name(ggml_cpu_isa level); // "portable", "avx2", ..., "amx", "neon", "dotprod", "i8mm"
// Parses a level name (also "native"/"auto"/"" = no cap, returned as ggml_cpu_isa::count).
bool         ggml_cpu_isa_parse(const char * name, ggml_cpu_isa * level);
// Sets the cap (ggml_cpu_isa::count: back to the process's default, GGML_CPU_ISA's cap if set, else
// everything the CPU has up to avx512 / i8mm). False (cap unchanged) for a level of the other
// architecture family.
bool         ggml_cpu_isa_set_cap(ggml_cpu_isa cap);
