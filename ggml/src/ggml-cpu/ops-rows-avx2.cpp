// ops-rows-avx2.cpp — the AVX2 level's row-kernel table (ops-fast.h). No AVX2 row kernel is
// written yet: every entry is nullptr, so those ops run the portable code at this level.

#include "ops-fast.h"

const ggml_cpu_row_kernels * ggml_cpu_row_kernels_avx2(void) { return nullptr; }
