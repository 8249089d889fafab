#pragma once

// cpu-features.h — runtime CPU feature detection (internal). All flags are false on non-x86
// builds. A flag is true only if the CPU has the feature AND the OS saves the register state it
// needs (XCR0), so a kernel may use it when the compiler also targeted it.

struct ggml_cpu_features {
    bool sse3        = false;
    bool ssse3       = false;
    bool avx         = false;
    bool bmi2        = false;
    bool avx_vnni    = false; // the VEX-encoded VNNI (AVX-VNNI), not AVX512-VNNI
    bool avx2        = false;
    bool fma         = false;
    bool f16c        = false;
    bool avx512f     = false;
    bool avx512bw    = false;
    bool avx512vl    = false;
    bool avx512dq    = false;
    bool avx512_vnni = false;
    bool avx512_bf16 = false;
    bool avx512_vbmi = false;
    bool amx_tile    = false; // CPUID + XCR0 only; see ggml_cpu_amx_request_permission
    bool amx_int8    = false;
    bool amx_bf16    = false;
    // CPU identity (CPUID leaves 0 and 1), the key of the kernel-choice table (kernel-choice.cpp)
    char     vendor[13] = {0}; // "AuthenticAMD", "GenuineIntel", ... ("" off x86)
    unsigned family     = 0;   // display family (base + extended)
    unsigned model      = 0;   // display model (extended << 4 | base, as Intel and AMD define it)
};

// Detected once (thread-safe), then cached.
const ggml_cpu_features & ggml_cpu_get_features();

// Linux requires a process to request the AMX tile-data state (arch_prctl ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA) before executing AMX instructions. Requests once and caches the result;
// false if the CPU lacks AMX or the kernel refuses.
bool ggml_cpu_amx_request_permission(void);

// Processor brand string (CPUID 0x80000002..4, else /proc/cpuinfo "model name", else "CPU").
const char * ggml_cpu_brand_string(void);
