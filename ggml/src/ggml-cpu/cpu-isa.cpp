// cpu-isa.cpp — the active instruction-set level (cpu-isa.h), its cap (GGML_CPU_ISA,
// ggml_cpu_set_isa) and the public queries over it (ggml-cpu.h).

#include "cpu-isa.h"

#include "ggml-cpu.h"
#include "ggml-impl.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int N_LEVELS = (int) ggml_cpu_isa::count;

const char * const k_names[N_LEVELS] = {"portable", "avx2", "avx_vnni", "avx512", "amx", "neon", "dotprod", "i8mm"};

bool level_supported(const ggml_cpu_features & f, ggml_cpu_isa l) {
    switch (l) {
        case ggml_cpu_isa::portable: return true;
        case ggml_cpu_isa::avx2: return f.avx2 && f.fma && f.f16c;
        case ggml_cpu_isa::avx_vnni: return level_supported(f, ggml_cpu_isa::avx2) && f.avx_vnni;
        // an AVX-512 CPU without AVX-VNNI (Zen 4, Ice Lake) still has the avx512 level
        case ggml_cpu_isa::avx512:
            return level_supported(f, ggml_cpu_isa::avx2) && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
        case ggml_cpu_isa::amx:
            return level_supported(f, ggml_cpu_isa::avx512) && (f.amx_int8 || f.amx_bf16) &&
                   ggml_cpu_amx_request_permission();
        case ggml_cpu_isa::neon: return f.neon;
        case ggml_cpu_isa::dotprod: return f.neon && f.dotprod;
        case ggml_cpu_isa::i8mm: return f.neon && f.dotprod && f.i8mm;
        default: return false;
    }
}

// A CPU has levels of one family only (the other family's flags are never set), so the highest
// supported rank is the highest level of its own family.
ggml_cpu_isa detect_level() {
    const ggml_cpu_features & f = ggml_cpu_get_features();
    ggml_cpu_isa              best = ggml_cpu_isa::portable;
    for (int l = 1; l < N_LEVELS; ++l) {
        if (level_supported(f, (ggml_cpu_isa) l)) best = (ggml_cpu_isa) l;
    }
    return best;
}

bool same_family(ggml_cpu_isa a, ggml_cpu_isa b) {
    return a == ggml_cpu_isa::portable || b == ggml_cpu_isa::portable || ggml_cpu_isa_is_arm(a) == ggml_cpu_isa_is_arm(b);
}

// The features visible at each level: a flag survives only if its tier is at or below the level.
ggml_cpu_features mask(ggml_cpu_features f, ggml_cpu_isa level) {
    const int l = (int) level;
    if (l < (int) ggml_cpu_isa::avx2) f.avx2 = f.fma = f.f16c = false;
    if (l < (int) ggml_cpu_isa::avx_vnni) f.avx_vnni = false;
    if (l < (int) ggml_cpu_isa::avx512) {
        f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = false;
        f.avx512_vnni = f.avx512_bf16 = f.avx512_vbmi = false;
    }
    if (l < (int) ggml_cpu_isa::amx) f.amx_tile = f.amx_int8 = f.amx_bf16 = false;
    // AArch64: ranks above amx; an x86 level (< neon) clears them all, which is harmless since
    // an x86 level is never active on an AArch64 CPU
    if (l < (int) ggml_cpu_isa::neon) {
        f.neon = f.fp16_va = f.sve = f.sve2 = f.sme = false;
        f.sve_bytes = 0;
    }
    if (l < (int) ggml_cpu_isa::dotprod) f.dotprod = false;
    if (l < (int) ggml_cpu_isa::i8mm) f.i8mm = f.arm_bf16 = false;
    return f;
}

struct level_state {
    ggml_cpu_isa      detected;
    ggml_cpu_features masked[N_LEVELS];
    int               env_cap; // GGML_CPU_ISA (or the default): what "no explicit cap" restores
    std::atomic<int>  active;
};

int default_cap(ggml_cpu_isa detected) {
    if (ggml_cpu_isa_is_arm(detected)) return (int) ggml_cpu_isa::i8mm;
    // AMX is opt-in (cpu-isa.h); GGML_CPU_AMX=1 is the older name for GGML_CPU_ISA=amx
    const char * amx = getenv("GGML_CPU_AMX");
    return (amx && strcmp(amx, "1") == 0) ? (int) ggml_cpu_isa::amx : (int) ggml_cpu_isa::avx512;
}

// callers pass only caps of the detected level's family (or portable)
int clamp_to_cpu(int cap, ggml_cpu_isa detected) { return cap < (int) detected ? cap : (int) detected; }

const char * family_levels(ggml_cpu_isa detected) {
    return ggml_cpu_isa_is_arm(detected) ? "portable, neon, dotprod, i8mm or native"
                                         : "portable, avx2, avx_vnni, avx512, amx or native";
}

level_state & state() {
    static level_state * s = [] {
        level_state * st = new level_state;
        st->detected     = detect_level();
        for (int l = 0; l < N_LEVELS; ++l) st->masked[l] = mask(ggml_cpu_get_features(), (ggml_cpu_isa) l);
        int          cap = default_cap(st->detected);
        const char * env = getenv("GGML_CPU_ISA");
        if (env && *env) {
            ggml_cpu_isa lv;
            if (ggml_cpu_isa_parse(env, &lv) && (lv == ggml_cpu_isa::count || same_family(lv, st->detected))) {
                if (lv != ggml_cpu_isa::count) cap = (int) lv;
            } else {
                GGML_LOG_ERROR("GGML_CPU_ISA='%s' ignored: this CPU's levels are %s\n", env,
                               family_levels(st->detected));
            }
        }
        st->env_cap = cap;
        st->active.store(clamp_to_cpu(cap, st->detected));
        return st;
    }();
    return *s;
}

} // namespace

ggml_cpu_isa ggml_cpu_isa_detected(void) { return state().detected; }

ggml_cpu_isa ggml_cpu_isa_active(void) { return (ggml_cpu_isa) state().active.load(std::memory_order_relaxed); }

const ggml_cpu_features & ggml_cpu_active_features(void) {
    level_state & s = state();
    return s.masked[s.active.load(std::memory_order_relaxed)];
}

const char * ggml_cpu_isa_name(ggml_cpu_isa level) {
    const int l = (int) level;
    return l >= 0 && l < N_LEVELS ? k_names[l] : "?";
}

bool ggml_cpu_isa_parse(const char * name, ggml_cpu_isa * level) {
    if (!name || !*name || !strcmp(name, "native") || !strcmp(name, "auto")) {
        *level = ggml_cpu_isa::count;
        return true;
    }
    for (int l = 0; l < N_LEVELS; ++l) {
        if (!strcmp(name, k_names[l])) {
            *level = (ggml_cpu_isa) l;
            return true;
        }
    }
    return false;
}

bool ggml_cpu_isa_set_cap(ggml_cpu_isa cap) {
    level_state & s = state();
    if (cap != ggml_cpu_isa::count && !same_family(cap, s.detected)) return false;
    const int c = cap == ggml_cpu_isa::count ? s.env_cap : (int) cap;
    s.active.store(clamp_to_cpu(c, s.detected));
    return true;
}

// ---- public (ggml-cpu.h) ----------------------------------------------------------------------

extern "C" {

bool ggml_cpu_set_isa(const char * level) {
    ggml_cpu_isa l;
    if (!ggml_cpu_isa_parse(level, &l) || !ggml_cpu_isa_set_cap(l)) {
        GGML_LOG_ERROR("ggml_cpu_set_isa('%s'): not a level of this CPU (%s)\n", level ? level : "(null)",
                       family_levels(ggml_cpu_isa_detected()));
        return false;
    }
    return true;
}

const char * ggml_cpu_get_isa(void) { return ggml_cpu_isa_name(ggml_cpu_isa_active()); }

const char * ggml_cpu_get_isa_detected(void) { return ggml_cpu_isa_name(ggml_cpu_isa_detected()); }

int ggml_cpu_isa_count(void) {
    const level_state & s = state();
    int                 n = 0;
    for (int l = 0; l <= (int) s.detected; ++l) n += level_supported(ggml_cpu_get_features(), (ggml_cpu_isa) l);
    return n;
}

const char * ggml_cpu_isa_level(int i) {
    const level_state & s = state();
    int                 n = 0;
    for (int l = 0; l <= (int) s.detected; ++l) {
        if (!level_supported(ggml_cpu_get_features(), (ggml_cpu_isa) l)) continue;
        if (n++ == i) return k_names[l];
    }
    return nullptr;
}

bool ggml_cpu_isa_can_use(const char * feature) {
    if (!feature) return false;
    const ggml_cpu_features & f = ggml_cpu_active_features();
    struct item {
        const char * name;
        bool         on;
    };
    const item items[] = {
        {"avx2", f.avx2},
        {"fma", f.fma},
        {"f16c", f.f16c},
        {"avx_vnni", f.avx_vnni},
        {"avx512f", f.avx512f},
        {"avx512bw", f.avx512bw},
        {"avx512vl", f.avx512vl},
        {"avx512dq", f.avx512dq},
        {"avx512_vnni", f.avx512_vnni},
        {"avx512_bf16", f.avx512_bf16},
        {"avx512_vbmi", f.avx512_vbmi},
        {"amx_int8", f.amx_int8},
        {"amx_bf16", f.amx_bf16},
        {"neon", f.neon},
        {"fp16_va", f.fp16_va},
        {"dotprod", f.dotprod},
        {"i8mm", f.i8mm},
        {"arm_bf16", f.arm_bf16},
        {"sve", f.sve},
    };
    for (const item & it : items) {
        if (!strcmp(feature, it.name)) return it.on;
    }
    // a level name: whether that whole level may run
    ggml_cpu_isa l;
    if (ggml_cpu_isa_parse(feature, &l) && l != ggml_cpu_isa::count) return ggml_cpu_isa_allows(l);
    return false;
}

} // extern "C"
