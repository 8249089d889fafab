// quant-dot-fast.cpp — picks the quantized-MUL_MAT tiles and the activation quantizers of the
// active instruction-set level (cpu-isa.h), falling back level by level (an AVX-512 CPU without
// VNNI runs the AVX2 tiles; on AArch64 i8mm > dotprod > neon, each level's file returning nullptr
// for what it lacks). A level of the other architecture family is never allowed, and its
// functions return nullptr in this build anyway.

#include "cpu-isa.h"
#include "quant-act-fast.h"
#include "quant-dot-fast.h"

const ggml_quant_dot_fast * ggml_cpu_quant_dot_fast(enum ggml_type type) {
    if (ggml_cpu_isa_allows(ggml_cpu_isa::avx512)) {
        if (const ggml_quant_dot_fast * k = ggml_cpu_quant_dot_avx512(type)) return k;
    }
    if (ggml_cpu_isa_allows(ggml_cpu_isa::avx2)) return ggml_cpu_quant_dot_avx2(type);
    if (ggml_cpu_isa_allows(ggml_cpu_isa::i8mm)) {
        if (const ggml_quant_dot_fast * k = ggml_cpu_quant_dot_i8mm(type)) return k;
    }
    if (ggml_cpu_isa_allows(ggml_cpu_isa::dotprod)) {
        if (const ggml_quant_dot_fast * k = ggml_cpu_quant_dot_dotprod(type)) return k;
    }
    if (ggml_cpu_isa_allows(ggml_cpu_isa::neon)) return ggml_cpu_quant_dot_neon(type);
    return nullptr;
}

ggml_quantize_act_fn ggml_cpu_quantize_act_fast(enum ggml_type vec_dot_type) {
    if (ggml_cpu_isa_allows(ggml_cpu_isa::avx512)) {
        if (ggml_quantize_act_fn f = ggml_cpu_quantize_act_avx512(vec_dot_type)) return f;
    }
    if (ggml_cpu_isa_allows(ggml_cpu_isa::avx2)) return ggml_cpu_quantize_act_avx2(vec_dot_type);
    // one NEON quantizer for every AArch64 level (SDOT / SMMLA have nothing to add to it)
    if (ggml_cpu_isa_allows(ggml_cpu_isa::neon)) return ggml_cpu_quantize_act_neon(vec_dot_type);
    return nullptr;
}
