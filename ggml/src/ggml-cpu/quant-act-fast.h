#pragma once

// quant-act-fast.h — AVX-512 / AVX2 / NEON versions of the activation quantizers a quantized MUL_MAT runs once per
// activation row (quantize_row_q8_0_ref, quantize_row_q8_1_ref, quantize_row_q8_K_ref in
// ggml-quants.cpp). They perform the same float operations in the same order per element (max of
// magnitudes, one division per block, the same products and rounding rules), so their bytes equal
// the reference's for every input, NaN and Inf included (tests/test-quant-dot.cpp checks it). The
// scalar references took ~8% of a 3072 x 3072 Q8_0 GEMM.

#include "../ggml-impl.h"

#include <cstdint>

typedef void (*ggml_quantize_act_fn)(const float * x, void * y, int64_t n);

// The fast quantizer to vec_dot_type (GGML_TYPE_Q8_0, Q8_1 or Q8_K) on this CPU, nullptr where there
// is none (other types, portable level): callers then use the reference.
// Chooses by the active instruction-set level (cpu-isa.h): the level's own quantizer, else a lower
// level's.
ggml_quantize_act_fn ggml_cpu_quantize_act_fast(enum ggml_type vec_dot_type);
// Per level (quant-act-avx512.cpp, quant-act-avx2.cpp): nullptr where the level has none.
ggml_quantize_act_fn ggml_cpu_quantize_act_avx512(enum ggml_type vec_dot_type);
ggml_quantize_act_fn ggml_cpu_quantize_act_avx2(enum ggml_type vec_dot_type);
// AArch64 (quant-act-neon.cpp; baseline NEON, serves the dotprod and i8mm levels too)
ggml_quantize_act_fn ggml_cpu_quantize_act_neon(enum ggml_type vec_dot_type);
