// quant-dot-fast-neon.cpp — baseline ARMv8-A NEON tiles for MUL_MAT with Q8_0, Q4_0, Q5_0, Q4_1,
// Q5_1, Q4_K, Q5_K and Q6_K weights (interface: quant-dot-fast.h; decoders and the row x column
// engine: quant-dot-neon-blocks.h). Activations are the reference quantizer's blocks as they are.
//
// The int8 products: vmull_s8 (8 int16 products) and vmlal_s8, then vpadalq_s16 widens pairs into
// the int32 accumulator. An int16 lane may hold several products only while their sum cannot wrap:
//  - 4- to 6-bit weights (|v| <= 32): 4 products per lane, <= 4 * 32 * 128 = 16384;
//  - Q8_0 (|v| up to 128, any stored byte, activations down to -128): one product per lane
//    (128 * 128 = 16384 fits; two could reach 32768), so each vmull is widened at once.
// Micro-tile: 2 weight rows x 4 activation rows (vmull needs temporaries, so fewer accumulators
// than the SDOT tile).

#include "quant-dot-fast.h"

#if defined(__aarch64__)

#include "quant-dot-neon-blocks.h"

namespace {

struct prod_neon {
    template <bool WIDE> static int32x4_t dot16(int32x4_t acc, int8x16_t w, int8x16_t a) {
        if constexpr (WIDE) {
            acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(w), vget_low_s8(a)));
            return vpadalq_s16(acc, vmull_high_s8(w, a));
        } else {
            return vpadalq_s16(acc, vmlal_high_s8(vmull_s8(vget_low_s8(w), vget_low_s8(a)), w, a));
        }
    }
    template <bool WIDE> static int32x4_t dot32(int32x4_t acc, int8x16_t wlo, int8x16_t whi, int8x16_t alo, int8x16_t ahi) {
        if constexpr (WIDE) {
            return dot16<true>(dot16<true>(acc, wlo, alo), whi, ahi);
        } else {
            int16x8_t p = vmull_s8(vget_low_s8(wlo), vget_low_s8(alo));
            p           = vmlal_high_s8(p, wlo, alo);
            p           = vmlal_s8(p, vget_low_s8(whi), vget_low_s8(ahi));
            p           = vmlal_high_s8(p, whi, ahi);
            return vpadalq_s16(acc, p);
        }
    }
};

constexpr int NEON_TILE_ROWS = 2;

template <class D> void entry(int64_t K, const char * w, size_t ws, int nr, const char * x, size_t xs, int nc, float * out, size_t ldo) {
    run_rc<D, prod_neon, NEON_TILE_ROWS>(K, w, ws, nr, x, xs, nc, out, ldo);
}

const ggml_quant_dot_fast k_neon_q8_0 = {"neon q8_0", entry<dec_q8_0>, nullptr, nullptr};
const ggml_quant_dot_fast k_neon_q4_0 = {"neon q4_0", entry<dec_q4_0>, nullptr, nullptr};
const ggml_quant_dot_fast k_neon_q5_0 = {"neon q5_0", entry<dec_q5_0>, nullptr, nullptr};
const ggml_quant_dot_fast k_neon_q4_1 = {"neon q4_1", entry<dec_q4_1>, nullptr, nullptr};
const ggml_quant_dot_fast k_neon_q5_1 = {"neon q5_1", entry<dec_q5_1>, nullptr, nullptr};
const ggml_quant_dot_fast k_neon_q4_K = {"neon q4_K", entry<dec_q4_K>, nullptr, nullptr};
const ggml_quant_dot_fast k_neon_q5_K = {"neon q5_K", entry<dec_q5_K>, nullptr, nullptr};
const ggml_quant_dot_fast k_neon_q6_K = {"neon q6_K", entry<dec_q6_K>, nullptr, nullptr};

} // namespace

const ggml_quant_dot_fast * ggml_cpu_quant_dot_neon(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q8_0: return &k_neon_q8_0;
        case GGML_TYPE_Q4_0: return &k_neon_q4_0;
        case GGML_TYPE_Q5_0: return &k_neon_q5_0;
        case GGML_TYPE_Q4_1: return &k_neon_q4_1;
        case GGML_TYPE_Q5_1: return &k_neon_q5_1;
        case GGML_TYPE_Q4_K: return &k_neon_q4_K;
        case GGML_TYPE_Q5_K: return &k_neon_q5_K;
        case GGML_TYPE_Q6_K: return &k_neon_q6_K;
        default: return nullptr;
    }
}

#else // not AArch64: no NEON tiles

const ggml_quant_dot_fast * ggml_cpu_quant_dot_neon(enum ggml_type) { return nullptr; }

#endif
