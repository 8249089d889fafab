// quant-act-avx2.cpp — AVX2 activation quantizers. None written yet: the references run at the
// avx2 level.

#include "quant-act-fast.h"

ggml_quantize_act_fn ggml_cpu_quantize_act_avx2(enum ggml_type) { return nullptr; }
