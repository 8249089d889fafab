#pragma once

// cpu-features.h — runtime CPU feature detection (internal). x86: CPUID, and a flag is true only
// if the OS also saves the register state it needs (XCR0). AArch64: the kernel's HWCAP bits
// (Linux getauxval), sysctl on Apple. Flags of the other architecture are always false.

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
    // AArch64 (Linux HWCAP names in comments)
    bool neon    = false; // Advanced SIMD with FMA (asimd): every ARMv8-A CPU with an FPU
    bool fp16_va = false; // FP16 vector arithmetic (asimdhp), ARMv8.2-A
    bool dotprod = false; // SDOT/UDOT (asimddp), ARMv8.2-A
    bool i8mm    = false; // SMMLA/UMMLA/USDOT (hwcap2 i8mm), ARMv8.6-A
    bool arm_bf16 = false; // BFDOT/BFMMLA (hwcap2 bf16)
    bool sve     = false; // SVE (Graviton 3/4); sve_bytes = vector length
    bool sve2    = false;
    bool sme     = false;
    int  sve_bytes = 0;
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
