// ggml-quants.h — reference (portable) code of the block-quantized types: quantize, dequantize and
// the dot products the CPU backend's fast paths are checked against. Private to the library.
//
// The reference quantizers follow upstream ggml's reference algorithms (quantize_row_*_ref), so that
// blocks are bit-identical to upstream's and to the Python `gguf` package's for the types both
// implement. The dot products are the semantic definition of mul_mat with quantized weights: the
// activation row is first quantized to the weight type's dot type (Q8_0, Q8_1 or Q8_K, as upstream),
// then integer sums per block are scaled in F32.
#pragma once

#include "formats/ggml-common.h"

#include <cstddef>
#include <cstdint>

// Reference quantizers: k must be a multiple of the block size.
void quantize_row_q4_0_ref(const float * x, block_q4_0 * y, int64_t k);
void quantize_row_q4_1_ref(const float * x, block_q4_1 * y, int64_t k);
void quantize_row_q5_0_ref(const float * x, block_q5_0 * y, int64_t k);
void quantize_row_q5_1_ref(const float * x, block_q5_1 * y, int64_t k);
void quantize_row_q8_0_ref(const float * x, block_q8_0 * y, int64_t k);
void quantize_row_q8_1_ref(const float * x, block_q8_1 * y, int64_t k);
void quantize_row_q2_K_ref(const float * x, block_q2_K * y, int64_t k);
void quantize_row_q3_K_ref(const float * x, block_q3_K * y, int64_t k);
void quantize_row_q4_K_ref(const float * x, block_q4_K * y, int64_t k);
void quantize_row_q5_K_ref(const float * x, block_q5_K * y, int64_t k);
void quantize_row_q6_K_ref(const float * x, block_q6_K * y, int64_t k);
void quantize_row_q8_K_ref(const float * x, block_q8_K * y, int64_t k);

// Dequantizers (x = what the block stores, in F32).
void dequantize_row_q4_0(const block_q4_0 * x, float * y, int64_t k);
void dequantize_row_q4_1(const block_q4_1 * x, float * y, int64_t k);
void dequantize_row_q5_0(const block_q5_0 * x, float * y, int64_t k);
void dequantize_row_q5_1(const block_q5_1 * x, float * y, int64_t k);
void dequantize_row_q8_0(const block_q8_0 * x, float * y, int64_t k);
void dequantize_row_q8_1(const block_q8_1 * x, float * y, int64_t k);
void dequantize_row_q2_K(const block_q2_K * x, float * y, int64_t k);
void dequantize_row_q3_K(const block_q3_K * x, float * y, int64_t k);
void dequantize_row_q4_K(const block_q4_K * x, float * y, int64_t k);
void dequantize_row_q5_K(const block_q5_K * x, float * y, int64_t k);
void dequantize_row_q6_K(const block_q6_K * x, float * y, int64_t k);
void dequantize_row_q8_K(const block_q8_K * x, float * y, int64_t k);

// How mul_mat computes with a quantized weight type: the activation row (n F32 values) is quantized
// with quantize_act into vec_dot_type blocks, and vec_dot_ref(n, &s, weight_row, act_row) sets
// s = the dot product. NULL members for types that are not weight types of mul_mat.
typedef void (*ggml_quantize_act_t)(const float * x, void * y, int64_t n);
typedef void (*ggml_vec_dot_ref_t)(int64_t n, float * s, const void * weight_row, const void * act_row);
struct ggml_quant_dot_traits {
    enum ggml_type      vec_dot_type;
    ggml_quantize_act_t quantize_act;
    ggml_vec_dot_ref_t  vec_dot_ref;
};
// For a block-quantized weight type; NULL for any other type. Q8_1 and Q8_K, activation-only types
// (upstream has no dot product with them as weights), get their own type and quantizer as dot type
// and quantize_act, and a NULL vec_dot_ref.
const struct ggml_quant_dot_traits * ggml_get_quant_dot_traits(enum ggml_type type);
