// quant-dot-fast-dotprod.cpp — ARMv8.2-A dotprod (SDOT) tiles for MUL_MAT with Q8_0, Q4_0, Q5_0,
// Q4_1, Q5_1, Q4_K, Q5_K and Q6_K weights (interface: quant-dot-fast.h; decoders and the row x
// column engine: quant-dot-neon-blocks.h). Built with -march=armv8.2-a+dotprod+fp16
// (cmake/arm-kernel-flags.cmake) and returned only when the active level allows dotprod.
//
// vdotq_s32 adds 4 int8 x int8 products into each int32 lane: exact for every byte pair, so all
// types share one formulation. Micro-tile: 4 weight rows x 4 activation rows (16 int32x4 sums,
// 8 decoded weight vectors, 2 activation vectors and 4 F32 accumulators: 30 of the 32 registers).

#include "quant-dot-fast.h"

#if defined(__aarch64__)

#include "quant-dot-neon-blocks.h"

namespace {

constexpr int SDOT_TILE_ROWS = 4;

template <class D> void entry(int64_t K, const char * w, size_t ws, int nr, const char * x, size_t xs, int nc, float * out, size_t ldo) {
    run_rc<D, prod_sdot, SDOT_TILE_ROWS>(K, w, ws, nr, x, xs, nc, out, ldo);
}

const ggml_quant_dot_fast k_dotprod_q8_0 = {"dotprod q8_0", entry<dec_q8_0>, nullptr, nullptr};
const ggml_quant_dot_fast k_dotprod_q4_0 = {"dotprod q4_0", entry<dec_q4_0>, nullptr, nullptr};
const ggml_quant_dot_fast k_dotprod_q5_0 = {"dotprod q5_0", entry<dec_q5_0>, nullptr, nullptr};
const ggml_quant_dot_fast k_dotprod_q4_1 = {"dotprod q4_1", entry<dec_q4_1>, nullptr, nullptr};
const ggml_quant_dot_fast k_dotprod_q5_1 = {"dotprod q5_1", entry<dec_q5_1>, nullptr, nullptr};
const ggml_quant_dot_fast k_dotprod_q4_K = {"dotprod q4_K", entry<dec_q4_K>, nullptr, nullptr};
const ggml_quant_dot_fast k_dotprod_q5_K = {"dotprod q5_K", entry<dec_q5_K>, nullptr, nullptr};
const ggml_quant_dot_fast k_dotprod_q6_K = {"dotprod q6_K", entry<dec_q6_K>, nullptr, nullptr};

} // namespace

const ggml_quant_dot_fast * ggml_cpu_quant_dot_dotprod(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q8_0: return &k_dotprod_q8_0;
        case GGML_TYPE_Q4_0: return &k_dotprod_q4_0;
        case GGML_TYPE_Q5_0: return &k_dotprod_q5_0;
        case GGML_TYPE_Q4_1: return &k_dotprod_q4_1;
        case GGML_TYPE_Q5_1: return &k_dotprod_q5_1;
        case GGML_TYPE_Q4_K: return &k_dotprod_q4_K;
        case GGML_TYPE_Q5_K: return &k_dotprod_q5_K;
        case GGML_TYPE_Q6_K: return &k_dotprod_q6_K;
        default: return nullptr;
    }
}

#else // not AArch64: no SDOT tiles

const ggml_quant_dot_fast * ggml_cpu_quant_dot_dotprod(enum ggml_type) { return nullptr; }

#endif
