// cpu-features.cpp — runtime CPUID detection behind ggml_cpu_has_* and the fast-kernel selection.

#include "cpu-features.h"

#include "ggml-cpu.h"

#include <cstdio>
#include <cstring>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#define GGML_CPU_X86 1
#include <cpuid.h>
#endif

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#include <sys/prctl.h>
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

#if defined(__aarch64__)
namespace {

#if defined(__linux__)
// Linux's AT_HWCAP / AT_HWCAP2 bit numbers (arch/arm64/include/uapi/asm/hwcap.h); spelled out so
// an older libc's headers are enough
constexpr unsigned long HWCAP_ASIMD_BIT   = 1ul << 1;
constexpr unsigned long HWCAP_ASIMDHP_BIT = 1ul << 10;
constexpr unsigned long HWCAP_ASIMDDP_BIT = 1ul << 20;
constexpr unsigned long HWCAP_SVE_BIT     = 1ul << 22;
constexpr unsigned long HWCAP2_SVE2_BIT   = 1ul << 1;
constexpr unsigned long HWCAP2_I8MM_BIT   = 1ul << 13;
constexpr unsigned long HWCAP2_BF16_BIT   = 1ul << 14;
constexpr unsigned long HWCAP2_SME_BIT    = 1ul << 23;

ggml_cpu_features detect() {
    ggml_cpu_features f;
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    f.neon     = (hw & HWCAP_ASIMD_BIT) != 0;
    f.fp16_va  = (hw & HWCAP_ASIMDHP_BIT) != 0;
    f.dotprod  = (hw & HWCAP_ASIMDDP_BIT) != 0;
    f.sve      = (hw & HWCAP_SVE_BIT) != 0;
    f.sve2     = (hw2 & HWCAP2_SVE2_BIT) != 0;
    f.i8mm     = (hw2 & HWCAP2_I8MM_BIT) != 0;
    f.arm_bf16 = (hw2 & HWCAP2_BF16_BIT) != 0;
    f.sme      = (hw2 & HWCAP2_SME_BIT) != 0;
#if defined(PR_SVE_GET_VL) && defined(PR_SVE_VL_LEN_MASK)
    if (f.sve) f.sve_bytes = (int) (prctl(PR_SVE_GET_VL) & PR_SVE_VL_LEN_MASK);
#endif
    return f;
}
#elif defined(__APPLE__)
bool sysctl_flag(const char * name) {
    int    v  = 0;
    size_t sz = sizeof(v);
    return sysctlbyname(name, &v, &sz, nullptr, 0) == 0 && v != 0;
}

ggml_cpu_features detect() {
    ggml_cpu_features f;
    f.neon     = true; // every Apple Silicon core
    f.fp16_va  = sysctl_flag("hw.optional.arm.FEAT_FP16");
    f.dotprod  = sysctl_flag("hw.optional.arm.FEAT_DotProd");
    f.i8mm     = sysctl_flag("hw.optional.arm.FEAT_I8MM");
    f.arm_bf16 = sysctl_flag("hw.optional.arm.FEAT_BF16");
    f.sme      = sysctl_flag("hw.optional.arm.FEAT_SME");
    return f;
}
#else
// no run-time query known here: what the compiler was told the target has
ggml_cpu_features detect() {
    ggml_cpu_features f;
    f.neon = true;
#ifdef __ARM_FEATURE_DOTPROD
    f.dotprod = true;
#endif
#ifdef __ARM_FEATURE_MATMUL_INT8
    f.i8mm = true;
#endif
#ifdef __ARM_FEATURE_FP16_VECTOR_ARITHMETIC
    f.fp16_va = true;
#endif
    return f;
}
#endif

} // namespace
#endif // __aarch64__

#ifdef GGML_CPU_X86
namespace {

struct cpuid_regs {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

cpuid_regs cpuid(unsigned leaf, unsigned subleaf) {
    cpuid_regs r;
    if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) {
        r = cpuid_regs();
    }
    return r;
}

// XCR0: which register states the OS saves on context switch. Reading it with xgetbv is only
// legal when CPUID reports OSXSAVE.
unsigned long long read_xcr0() {
    unsigned eax = 0, edx = 0;
    __asm__ __volatile__("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long) edx << 32) | eax;
}

inline bool bit(unsigned v, int b) { return (v >> b) & 1u; }

ggml_cpu_features detect() {
    ggml_cpu_features f;

    const unsigned max_leaf = __get_cpuid_max(0, nullptr);
    if (max_leaf < 1) return f;

    const cpuid_regs l0 = cpuid(0, 0);
    memcpy(f.vendor + 0, &l0.ebx, 4);
    memcpy(f.vendor + 4, &l0.edx, 4);
    memcpy(f.vendor + 8, &l0.ecx, 4);
    f.vendor[12] = '\0';

    const cpuid_regs l1 = cpuid(1, 0);
    const unsigned base_family = (l1.eax >> 8) & 0xF, base_model = (l1.eax >> 4) & 0xF;
    f.family = base_family == 0xF ? base_family + ((l1.eax >> 20) & 0xFF) : base_family;
    f.model  = (base_family == 0x6 || base_family == 0xF) ? (((l1.eax >> 16) & 0xF) << 4) | base_model : base_model;
    const bool osxsave = bit(l1.ecx, 27);
    const unsigned long long xcr0 = osxsave ? read_xcr0() : 0;

    const bool os_ymm  = (xcr0 & 0x6) == 0x6;           // SSE + AVX state
    const bool os_zmm  = os_ymm && (xcr0 & 0xE0) == 0xE0; // opmask + ZMM_Hi256 + Hi16_ZMM
    const bool os_tile = (xcr0 & (3ull << 17)) == (3ull << 17); // XTILECFG + XTILEDATA

    const bool avx = bit(l1.ecx, 28) && os_ymm;
    f.sse3         = bit(l1.ecx, 0);
    f.ssse3        = bit(l1.ecx, 9);
    f.avx          = avx;
    f.fma          = avx && bit(l1.ecx, 12);
    f.f16c         = avx && bit(l1.ecx, 29);

    if (max_leaf >= 7) {
        const cpuid_regs l7 = cpuid(7, 0);
        f.avx2        = avx && bit(l7.ebx, 5);
        f.avx512f     = os_zmm && bit(l7.ebx, 16);
        f.avx512bw    = f.avx512f && bit(l7.ebx, 30);
        f.avx512vl    = f.avx512f && bit(l7.ebx, 31);
        f.avx512dq    = f.avx512f && bit(l7.ebx, 17);
        f.avx512_vnni = f.avx512f && bit(l7.ecx, 11);
        f.avx512_vbmi = f.avx512f && bit(l7.ecx, 1);
        f.bmi2        = bit(l7.ebx, 8);
        if (l7.eax >= 1) {
            const cpuid_regs l71 = cpuid(7, 1);
            f.avx_vnni    = avx && bit(l71.eax, 4);
            f.avx512_bf16 = f.avx512f && bit(l71.eax, 5);
        }
        f.amx_tile = os_tile && bit(l7.edx, 24);
        f.amx_int8 = f.amx_tile && bit(l7.edx, 25);
        f.amx_bf16 = f.amx_tile && bit(l7.edx, 22);
    }
    return f;
}

std::string cpuid_brand() {
    if (__get_cpuid_max(0x80000000u, nullptr) < 0x80000004u) return std::string();
    char buf[49];
    for (unsigned i = 0; i < 3; ++i) {
        const cpuid_regs r = cpuid(0x80000002u + i, 0);
        memcpy(buf + 16 * i + 0, &r.eax, 4);
        memcpy(buf + 16 * i + 4, &r.ebx, 4);
        memcpy(buf + 16 * i + 8, &r.ecx, 4);
        memcpy(buf + 16 * i + 12, &r.edx, 4);
    }
    buf[48] = '\0';
    return std::string(buf);
}

} // namespace
#endif // GGML_CPU_X86

static std::string trim(const std::string & s) {
    const char * ws = " \t\r\n";
    const size_t b  = s.find_first_not_of(ws);
    if (b == std::string::npos) return std::string();
    const size_t e = s.find_last_not_of(ws);
    return s.substr(b, e - b + 1);
}

static std::string proc_cpuinfo_model_name() {
    FILE * f = fopen("/proc/cpuinfo", "r");
    if (!f) return std::string();
    std::string result;
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "model name", 10) == 0) {
            const char * colon = strchr(line, ':');
            if (colon) result = trim(colon + 1);
            break;
        }
    }
    fclose(f);
    return result;
}

const ggml_cpu_features & ggml_cpu_get_features() {
#if defined(GGML_CPU_X86) || defined(__aarch64__)
    static const ggml_cpu_features features = detect();
#else
    static const ggml_cpu_features features;
#endif
    return features;
}

bool ggml_cpu_amx_request_permission(void) {
    static const bool granted = [] {
        if (!ggml_cpu_get_features().amx_tile) return false;
#if defined(__linux__) && defined(GGML_CPU_X86) && defined(SYS_arch_prctl)
        const int ARCH_REQ_XCOMP_PERM = 0x1023;
        const int XFEATURE_XTILEDATA  = 18;
        return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
        return false;
#endif
    }();
    return granted;
}

const char * ggml_cpu_brand_string(void) {
    static const std::string brand = [] {
        std::string s;
#ifdef GGML_CPU_X86
        s = trim(cpuid_brand());
#endif
        if (s.empty()) s = proc_cpuinfo_model_name();
        if (s.empty()) s = "CPU";
        return s;
    }();
    return brand.c_str();
}

extern "C" {

int ggml_cpu_has_avx2(void) { return ggml_cpu_get_features().avx2 ? 1 : 0; }
int ggml_cpu_has_avx512(void) { return ggml_cpu_get_features().avx512f ? 1 : 0; }
int ggml_cpu_has_avx512_vnni(void) { return ggml_cpu_get_features().avx512_vnni ? 1 : 0; }
int ggml_cpu_has_avx512_bf16(void) { return ggml_cpu_get_features().avx512_bf16 ? 1 : 0; }
int ggml_cpu_has_amx_int8(void) {
    return (ggml_cpu_get_features().amx_int8 && ggml_cpu_amx_request_permission()) ? 1 : 0;
}
int ggml_cpu_has_amx_bf16(void) {
    return (ggml_cpu_get_features().amx_bf16 && ggml_cpu_amx_request_permission()) ? 1 : 0;
}

} // extern "C"
