// quant-dot-fast-avx2.cpp — AVX2 tiles for quantized MUL_MAT. None written yet: every type runs
// the portable reference at the avx2 level.

#include "quant-dot-fast.h"

const ggml_quant_dot_fast * ggml_cpu_quant_dot_avx2(enum ggml_type) { return nullptr; }
