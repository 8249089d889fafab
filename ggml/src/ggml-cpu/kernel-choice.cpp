// kernel-choice.cpp — the per-CPU kernel table, the GGML_CPU_KERNEL override and the public
// queries that say which kernel a node runs (so every benchmark number names what produced it).

#include "kernel-choice.h"

#include "cpu-isa.h"
#include "ggml-cpu.h"
#include "ggml-impl.h"
#include "ops-fast.h"
#include "ops-mul-mat-quant.h"
#include "ops-mul-mat-x86.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

constexpr int N_FAMILIES = (int) ggml_cpu_kernel_family::count;

// One row per kind of CPU, matched in order: vendor, display family (0: any), feature conditions.
// Each row states what it was measured on; `bench-ops --calibrate` prints the row for a new CPU.
struct table_row {
    const char *    name;
    const char *    vendor;     // CPUID vendor string; nullptr: any
    unsigned        family;     // display family; 0: any
    bool            needs_bf16; // the row applies only to CPUs with AVX512_BF16
    int             amx;        // -1: any, 0: only without AMX-BF16, 1: only with it
    ggml_cpu_kernel kernel[N_FAMILIES]; // indexed by ggml_cpu_kernel_family
};

const table_row k_table[] = {
    // AMD EPYC (Zen 4, family 0x19 model 0x11), 2 threads, this project's machine (`bench-ops
    // --calibrate`, a heavily loaded machine, same-run ratios): BF16 mul_mat with bf16dot 1.87-2.30x
    // (best) / 1.87-2.27x (median) the f32fma kernel at the four DiT shapes; flash attention D 128,
    // 1024 tokens, 24 heads: bf16dot 2.18x / 1.98x (F16 / BF16 K/V, best); on the idle machine
    // bf16dot 34.6 ms = 372 GFLOP/s, f32fma 74.0 ms = 174 GFLOP/s (F16 K/V, best). After the f32fma
    // flash-attention kernel kept its operands in registers (loaded machine, CPU time / 2 threads,
    // best): bf16dot 35.2 ms = 366 GFLOP/s, f32fma 63.8 ms = 202 GFLOP/s, 86% of this CPU's FMA
    // peak (234): bf16dot stays 1.8x faster. Zen 4 is the only family 0x19 part with AVX512_BF16.
    // mul_mat_quant: vnni, see the numbers in bench-ops (quantized weights, same-run ratio vs F32).
    {"AMD Zen 4", "AuthenticAMD", 0x19, true, -1, {ggml_cpu_kernel::bf16dot, ggml_cpu_kernel::bf16dot, ggml_cpu_kernel::vnni}},
    // Intel Xeon with AVX512_BF16 and no AMX (issue 16, 2 threads): BF16 mul_mat with bf16dot
    // 164-168 GFLOP/s where F32 weights get 283-298 and F16 weights (widened to F32 while packing,
    // the f32fma kernel) 276-292; flash attention with bf16dot 156 GFLOP/s, slower than the unfused
    // chain. f32fma for flash attention follows from the same FMA-vs-vdpbf16ps rates (not timed there).
    // mul_mat_quant: vnni assumed (not measured there): vpdpbusd is Intel's own VNNI instruction.
    {"Intel AVX512_BF16 without AMX", "GenuineIntel", 0, true, 0, {ggml_cpu_kernel::f32fma, ggml_cpu_kernel::f32fma, ggml_cpu_kernel::vnni}},
};

// CPUs no row matches (other Intel parts, Zen 5, unknown vendors): f32fma, the kernel whose speed
// is our F32 GEMM's by construction, until a measured row says otherwise; quantized weights: vnni
// wherever the CPU has AVX512-VNNI (else the portable vecdot, see ggml_cpu_kernel_for).
const table_row k_default = {"default (no measured row)", nullptr, 0, false, -1,
                             {ggml_cpu_kernel::f32fma, ggml_cpu_kernel::f32fma, ggml_cpu_kernel::vnni}};

const table_row & matching_row() {
    static const table_row & row = []() -> const table_row & {
        const ggml_cpu_features & f = ggml_cpu_get_features();
        for (const table_row & r : k_table) {
            if (r.vendor && strcmp(r.vendor, f.vendor) != 0) continue;
            if (r.family && r.family != f.family) continue;
            if (r.needs_bf16 && !f.avx512_bf16) continue;
            if (r.amx >= 0 && (int) f.amx_bf16 != r.amx) continue;
            return r;
        }
        return k_default;
    }();
    return row;
}

// -1: the table decides; else a forced ggml_cpu_kernel. Atomic: kernels read it on pool threads.
std::atomic<int> g_forced[N_FAMILIES] = {{-1}, {-1}, {-1}};

const ggml_cpu_kernel k_all_kernels[] = {ggml_cpu_kernel::f32fma, ggml_cpu_kernel::bf16dot, ggml_cpu_kernel::vnni,
                                         ggml_cpu_kernel::vecdot};

bool parse_kernel(const std::string & s, int & out) {
    if (s == "auto") { out = -1; return true; }
    // "vnni": the integer tiles' name from when only the AVX512-VNNI ones existed, still accepted
    const std::string name = s == "vnni" ? ggml_cpu_kernel_name(ggml_cpu_kernel::vnni) : s;
    for (ggml_cpu_kernel k : k_all_kernels) {
        if (name == ggml_cpu_kernel_name(k)) {
            if (!ggml_cpu_kernel_runnable(k)) return false;
            out = (int) k;
            return true;
        }
    }
    return false;
}

// Parses spec into forced[]; false (and forced untouched) on anything it does not understand.
bool parse_spec(const char * spec, int (&forced)[N_FAMILIES], std::string & err) {
    for (int & v : forced) v = -1;
    if (!spec || !*spec) return true;
    std::string s(spec);
    size_t      pos = 0;
    while (pos <= s.size()) {
        size_t            end  = s.find(',', pos);
        if (end == std::string::npos) end = s.size();
        const std::string item = s.substr(pos, end - pos);
        const size_t      eq   = item.find('=');
        if (eq == std::string::npos) {
            // a bare kernel name applies to every family it is a kernel of ("auto": to all)
            int k;
            if (!parse_kernel(item, k)) { err = "unknown or unrunnable kernel '" + item + "'"; return false; }
            for (int i = 0; i < N_FAMILIES; ++i)
                if (k < 0 || ggml_cpu_kernel_in_family((ggml_cpu_kernel) k, (ggml_cpu_kernel_family) i)) forced[i] = k;
        } else {
            const std::string fam = item.substr(0, eq);
            int               fi  = -1;
            for (int i = 0; i < N_FAMILIES; ++i)
                if (fam == ggml_cpu_kernel_family_name((ggml_cpu_kernel_family) i)) fi = i;
            if (fi < 0) { err = "unknown op family '" + fam + "' (mul_mat_bf16, flash_attn, mul_mat_quant)"; return false; }
            int k;
            if (!parse_kernel(item.substr(eq + 1), k) ||
                (k >= 0 && !ggml_cpu_kernel_in_family((ggml_cpu_kernel) k, (ggml_cpu_kernel_family) fi))) {
                err = "unknown or unrunnable kernel '" + item.substr(eq + 1) +
                      "' (f32fma, bf16dot for mul_mat_bf16 and flash_attn; tiles (alias vnni), vecdot for mul_mat_quant; auto)";
                return false;
            }
            forced[fi] = k;
        }
        pos = end + 1;
    }
    return true;
}

void apply(const int (&forced)[N_FAMILIES]) {
    for (int i = 0; i < N_FAMILIES; ++i) g_forced[i].store(forced[i], std::memory_order_relaxed);
}

// GGML_CPU_KERNEL, read once before the first choice is made. A bad value is reported and ignored
// (the table decides): a library cannot exit, and a typo must not silently force a kernel.
void read_env_once() {
    static const bool done = [] {
        const char * env = getenv("GGML_CPU_KERNEL");
        if (env && *env) {
            int         forced[N_FAMILIES];
            std::string err;
            if (parse_spec(env, forced, err)) {
                apply(forced);
            } else {
                GGML_LOG_ERROR("GGML_CPU_KERNEL='%s' ignored: %s\n", env, err.c_str());
            }
        }
        return true;
    }();
    (void) done;
}

} // namespace

// Runnable = the active instruction-set level (cpu-isa.h: detected, capped) has the kernel.
bool ggml_cpu_kernel_runnable(ggml_cpu_kernel kernel) {
    const ggml_cpu_features & f = ggml_cpu_active_features();
    switch (kernel) {
        case ggml_cpu_kernel::bf16dot: return ggml_cpu_isa_allows(ggml_cpu_isa::avx512) && f.avx512_bf16;
        // the integer tiles of the active level (quant-dot-fast.cpp): AVX512-VNNI or AVX2, or on
        // AArch64 SMMLA, SDOT or NEON
        case ggml_cpu_kernel::vnni: return ggml_cpu_isa_allows(ggml_cpu_isa::avx2) || ggml_cpu_isa_allows(ggml_cpu_isa::neon);
        case ggml_cpu_kernel::vecdot:
        case ggml_cpu_kernel::portable: return true; // portable C++
        default: return ggml_cpu_isa_allows(ggml_cpu_isa::avx2);
    }
}

bool ggml_cpu_kernel_in_family(ggml_cpu_kernel kernel, ggml_cpu_kernel_family family) {
    const bool quant_kernel = kernel == ggml_cpu_kernel::vnni || kernel == ggml_cpu_kernel::vecdot;
    return quant_kernel == (family == ggml_cpu_kernel_family::mul_mat_quant);
}

ggml_cpu_kernel ggml_cpu_kernel_for(ggml_cpu_kernel_family family) {
    read_env_once();
    const int       forced = g_forced[(int) family].load(std::memory_order_relaxed);
    ggml_cpu_kernel k      = forced >= 0 ? (ggml_cpu_kernel) forced : matching_row().kernel[(int) family];
    if (k == ggml_cpu_kernel::bf16dot && !ggml_cpu_kernel_runnable(k)) k = ggml_cpu_kernel::f32fma;
    if (k == ggml_cpu_kernel::f32fma && !ggml_cpu_kernel_runnable(k)) k = ggml_cpu_kernel::portable;
    if (k == ggml_cpu_kernel::vnni && !ggml_cpu_kernel_runnable(k)) k = ggml_cpu_kernel::vecdot;
    return k;
}

const char * ggml_cpu_kernel_name(ggml_cpu_kernel kernel) {
    switch (kernel) {
        case ggml_cpu_kernel::bf16dot: return "bf16dot";
        // the active level's integer tiles (AVX2 or AVX512-VNNI): the node's label names which
        case ggml_cpu_kernel::vnni: return "tiles";
        case ggml_cpu_kernel::vecdot: return "vecdot";
        case ggml_cpu_kernel::portable: return "portable";
        default: return "f32fma";
    }
}

const char * ggml_cpu_kernel_family_name(ggml_cpu_kernel_family f) {
    switch (f) {
        case ggml_cpu_kernel_family::mul_mat_bf16: return "mul_mat_bf16";
        case ggml_cpu_kernel_family::flash_attn: return "flash_attn";
        case ggml_cpu_kernel_family::mul_mat_quant: return "mul_mat_quant";
        default: return "?";
    }
}

// ---- public (ggml-cpu.h) ----------------------------------------------------------------------

extern "C" {

const char * ggml_cpu_kernel_table_row(void) { return matching_row().name; }

bool ggml_cpu_set_kernel_override(const char * spec) {
    read_env_once(); // so a later first use cannot replace this call's setting with the env's
    int         forced[N_FAMILIES];
    std::string err;
    if (!parse_spec(spec, forced, err)) {
        GGML_LOG_ERROR("ggml_cpu_set_kernel_override('%s'): %s\n", spec, err.c_str());
        return false;
    }
    apply(forced);
    return true;
}

const char * ggml_cpu_get_kernel(const char * family) {
    if (!family) return nullptr;
    for (int i = 0; i < N_FAMILIES; ++i) {
        if (strcmp(family, ggml_cpu_kernel_family_name((ggml_cpu_kernel_family) i)) == 0)
            return ggml_cpu_kernel_name(ggml_cpu_kernel_for((ggml_cpu_kernel_family) i));
    }
    return nullptr;
}

const char * ggml_cpu_model_name(void) { return ggml_cpu_brand_string(); }

void ggml_cpu_get_identity(char vendor[13], unsigned * family, unsigned * model, bool * avx512_bf16, bool * amx_bf16) {
    const ggml_cpu_features & f = ggml_cpu_get_features();
    if (vendor) memcpy(vendor, f.vendor, sizeof(f.vendor));
    if (family) *family = f.family;
    if (model) *model = f.model;
    if (avx512_bf16) *avx512_bf16 = f.avx512_bf16;
    if (amx_bf16) *amx_bf16 = f.amx_bf16;
}

} // extern "C"

namespace {
// Whether the level's table has the row kernel this op's F32 rows use (ops-fast.h).
bool row_kernel_for(const ggml_cpu_row_kernels & r, const struct ggml_tensor * node) {
    switch (node->op) {
        case GGML_OP_UNARY: case GGML_OP_SCALE: case GGML_OP_SQR: case GGML_OP_SQRT: return r.map_row != nullptr;
        case GGML_OP_GLU: return r.glu_row != nullptr;
        case GGML_OP_ADD: case GGML_OP_SUB: case GGML_OP_MUL: case GGML_OP_DIV: return r.binary_row != nullptr;
        case GGML_OP_CPY: case GGML_OP_DUP: return r.f32_to_f16 || r.f16_to_f32 || r.f32_to_bf16 || r.bf16_to_f32;
        case GGML_OP_RMS_NORM: return r.rms_norm_row != nullptr;
        case GGML_OP_NORM: return r.norm_row != nullptr;
        case GGML_OP_SOFT_MAX: return r.soft_max_row != nullptr;
        case GGML_OP_ROPE: return r.rope_cache && r.rope_row;
        default: return false;
    }
}
} // namespace

extern "C" const char * ggml_backend_cpu_node_kernel(ggml_backend_t backend_cpu, const struct ggml_tensor * node) {
    if (!node) return "none";
    const bool use_ref = backend_cpu && ggml_backend_cpu_get_use_ref(backend_cpu);
    const bool fast    = !use_ref && ggml_cpu_isa_allows(ggml_cpu_isa::avx2);
    switch (node->op) {
        case GGML_OP_MUL_MAT: {
            if (ggml_cpu_mul_mat_quant_applies(node)) {
                return ggml_cpu_mul_mat_quant_kernel(node, backend_cpu && ggml_backend_cpu_get_use_ref(backend_cpu));
            }
            // x86 (avx2 and up) or AArch64 (neon and up: ops-mul-mat-neon.cpp) float GEMMs
            const bool   arm_fast = !use_ref && ggml_cpu_isa_allows(ggml_cpu_isa::neon);
            const char * k        = fast || arm_fast ? ggml_cpu_mul_mat_float_kernel(node) : nullptr;
            return k ? k : "portable";
        }
        case GGML_OP_FLASH_ATTN_EXT:
            if (!use_ref && ggml_cpu_isa_allows(ggml_cpu_isa::avx512))
                return ggml_avx512_flash_attn_uses_bf16(node) ? "avx512 bf16dot" : "avx512 f32fma";
            // ops-flash-attn-avx2.cpp: F32 products at the avx2 and avx_vnni levels, every node
            if (!use_ref && ggml_cpu_isa_allows(ggml_cpu_isa::avx2)) return "avx2 f32fma";
            // ops-flash-attn-neon.cpp: F32 products at every AArch64 level
            if (!use_ref && ggml_cpu_isa_allows(ggml_cpu_isa::neon)) return "neon f32fma";
            return "portable";
        default: {
            // row ops: the active level's name where it has a row kernel for this op (used for its
            // F32 rows; other types and strides run portable code)
            const ggml_cpu_row_kernels * rows = use_ref ? nullptr : ggml_cpu_rows_for_level();
            return rows && row_kernel_for(*rows, node) ? rows->isa : "portable";
        }
    }
}
