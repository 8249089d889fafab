// ops-fast.cpp — the AVX-512 level's row-kernel table (ops-fast.h). The kernels themselves live in
// ops-elementwise-avx512.cpp and ops-rows-avx512.cpp.

#include "ops-fast.h"

const ggml_cpu_row_kernels * ggml_cpu_row_kernels_avx512(void) {
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
    static const ggml_cpu_row_kernels table = {
        "avx512",
        ggml_avx512_map_row,
        ggml_avx512_glu_row,
        ggml_avx512_binary_row,
        ggml_avx512_f32_to_f16,
        ggml_avx512_f16_to_f32,
        ggml_avx512_f32_to_bf16,
        ggml_avx512_bf16_to_f32,
        ggml_avx512_rms_norm_row,
        ggml_avx512_norm_row,
        ggml_avx512_soft_max_row,
        ggml_avx512_rope_cache,
        ggml_avx512_rope_row,
    };
    return &table;
#else
    return nullptr;
#endif
}
