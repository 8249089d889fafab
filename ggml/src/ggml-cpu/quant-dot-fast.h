#pragma once

// quant-dot-fast.h — fast (x86: AVX2, AVX-512 + VNNI; AArch64: NEON, SDOT, SMMLA) block-quantized dot products for MUL_MAT with quantized
// weights (internal to the CPU backend). ops-mul-mat-quant.cpp quantizes the activations with the
// type's reference quantize_act (ggml-quants.h) into rows of vec_dot_type blocks, then calls a tile
// function for runs of weight rows x activation rows. The integer block sums are exactly those of
// vec_dot_ref; only the order of the F32 scaling and summation differs (bound stated in
// tests/test-quant-dot.cpp). Where the active level has no tile for the type (portable, or a build
// for another architecture), ggml_cpu_quant_dot_fast returns nullptr and the portable vec_dot_ref
// path runs.

#include "../ggml-impl.h"

#include <cstddef>
#include <cstdint>

// out[c * ldo + r] = dot(weight row r, activation row c) over K elements (K a multiple of the
// weight type's block size), for r < nr, c < nc. Weight row r starts at w + r * w_stride, activation
// row c (vec_dot_type blocks, or the kernel's repacked layout, see below; 64-byte aligned) at
// x + c * x_stride.
typedef void (*ggml_quant_dot_tile_fn)(int64_t K, const char * w, size_t w_stride, int nr, const char * x,
                                       size_t x_stride, int nc, float * out, size_t ldo);

struct ggml_quant_dot_fast {
    const char *           name; // "avx512 vnni q8_0", ... (what bench-ops prints)
    ggml_quant_dot_tile_fn tile;
    // Optional: the tile's own activation row layout (nullptr: rows of vec_dot_type blocks as the
    // reference quantizer writes them). act_repack rewrites one such row (K elements) into that
    // layout, values unchanged (e.g. 64-byte aligned quants with their scales pre-broadcast), so the
    // tile's inner loop loads instead of unpacking; act_row_bytes(K) is the size of a repacked row.
    size_t (*act_row_bytes)(int64_t K);
    void (*act_repack)(const void * blocks, void * row, int64_t K);
};

// The fast kernel for weights of `type` on this CPU, nullptr if there is none (type not covered,
// portable level).
// Chooses by the active instruction-set level (cpu-isa.h): the highest level at or below it that
// has a tile for `type` (quant-dot-fast.cpp).
const ggml_quant_dot_fast * ggml_cpu_quant_dot_fast(enum ggml_type type);
// Per level: nullptr where the level has no tile for `type` or the active features lack what it
// needs (AVX512-VNNI for the avx512 tiles).
const ggml_quant_dot_fast * ggml_cpu_quant_dot_avx512(enum ggml_type type); // quant-dot-fast-avx512.cpp
const ggml_quant_dot_fast * ggml_cpu_quant_dot_avx2(enum ggml_type type);   // quant-dot-fast-avx2.cpp
// AArch64 levels (nullptr on other builds): "neon q8_0" (vmull_s8 + vpadalq_s16), "dotprod q8_0"
// (SDOT), "i8mm q8_0" (SMMLA), ... for Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, Q4_K, Q5_K, Q6_K.
const ggml_quant_dot_fast * ggml_cpu_quant_dot_i8mm(enum ggml_type type);    // quant-dot-fast-i8mm.cpp
const ggml_quant_dot_fast * ggml_cpu_quant_dot_dotprod(enum ggml_type type); // quant-dot-fast-dotprod.cpp
const ggml_quant_dot_fast * ggml_cpu_quant_dot_neon(enum ggml_type type);    // quant-dot-fast-neon.cpp
