// ggml-common.h — the block layouts of the block-quantized types (private to the library).
//
// Every layout is byte-for-byte upstream ggml's, because GGUF files store these blocks raw: a file
// written by upstream (or by the Python `gguf` package) must dequantize to the same floats here. The
// sizes are asserted below so that a layout change cannot go unnoticed. Half-precision fields are
// IEEE binary16 bit patterns (ggml_fp16_t). block_q8_0 stays declared in ggml.h (older code here uses
// it from the public header); its size is asserted here with the others.
#pragma once

#include "ggml.h"

#include <cstdint>

// 32-element blocks ------------------------------------------------------------------------------

#define QK4_0 32
// x = d * (q - 8), q in [0, 15]; element j in the low nibble of qs[j], element j + 16 in its high one
typedef struct {
    ggml_fp16_t d;
    uint8_t     qs[QK4_0 / 2];
} block_q4_0;

#define QK4_1 32
// x = d * q + m, q in [0, 15]; nibble order as Q4_0
typedef struct {
    ggml_fp16_t d;
    ggml_fp16_t m;
    uint8_t     qs[QK4_1 / 2];
} block_q4_1;

#define QK5_0 32
// x = d * (q - 16), q in [0, 31]: low 4 bits as Q4_0, bit 4 of element j is bit j of qh (little-endian)
typedef struct {
    ggml_fp16_t d;
    uint8_t     qh[4];
    uint8_t     qs[QK5_0 / 2];
} block_q5_0;

#define QK5_1 32
// x = d * q + m, q in [0, 31]; bits as Q5_0
typedef struct {
    ggml_fp16_t d;
    ggml_fp16_t m;
    uint8_t     qh[4];
    uint8_t     qs[QK5_1 / 2];
} block_q5_1;

#define QK8_1 32
// the activation type of Q4_1/Q5_1 dot products: x = d * q, s = d * sum(q)
typedef struct {
    ggml_fp16_t d;
    ggml_fp16_t s;
    int8_t      qs[QK8_1];
} block_q8_1;

// 256-element super-blocks (K-quants) ------------------------------------------------------------

#define QK_K         256
#define K_SCALE_SIZE 12

// 16 sub-blocks of 16; per sub-block a 4-bit scale (low nibble) and 4-bit min (high nibble) of
// d / dmin; x = d * sc * q - dmin * m, q in [0, 3]
typedef struct {
    uint8_t     scales[QK_K / 16];
    uint8_t     qs[QK_K / 4];
    ggml_fp16_t d;
    ggml_fp16_t dmin;
} block_q2_K;

// 16 sub-blocks of 16; 6-bit signed scales packed into 12 bytes; q = low 2 bits from qs, high bit
// from hmask (a set bit means no subtraction of 4); x = d * (sc - 32) * (q - 4)
typedef struct {
    uint8_t     hmask[QK_K / 8];
    uint8_t     qs[QK_K / 4];
    uint8_t     scales[12];
    ggml_fp16_t d;
} block_q3_K;

// 8 sub-blocks of 32; 6-bit scales and mins packed into 12 bytes; x = d * sc * q - dmin * m
typedef struct {
    ggml_fp16_t d;
    ggml_fp16_t dmin;
    uint8_t     scales[K_SCALE_SIZE];
    uint8_t     qs[QK_K / 2];
} block_q4_K;

// as Q4_K with a fifth bit per element in qh
typedef struct {
    ggml_fp16_t d;
    ggml_fp16_t dmin;
    uint8_t     scales[K_SCALE_SIZE];
    uint8_t     qh[QK_K / 8];
    uint8_t     qs[QK_K / 2];
} block_q5_K;

// 16 sub-blocks of 16; 6-bit q (low 4 in ql, high 2 in qh), int8 scales; x = d * sc * (q - 32)
typedef struct {
    uint8_t     ql[QK_K / 2];
    uint8_t     qh[QK_K / 4];
    int8_t      scales[QK_K / 16];
    ggml_fp16_t d;
} block_q6_K;

// the activation type of K-quant dot products: float scale, and the sums of each 16-element group
typedef struct {
    float   d;
    int8_t  qs[QK_K];
    int16_t bsums[QK_K / 16];
} block_q8_K;

static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");
static_assert(sizeof(block_q4_1) == 20, "block_q4_1 layout");
static_assert(sizeof(block_q5_0) == 22, "block_q5_0 layout");
static_assert(sizeof(block_q5_1) == 24, "block_q5_1 layout");
static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
static_assert(sizeof(block_q8_1) == 36, "block_q8_1 layout");
static_assert(sizeof(block_q2_K) == 84, "block_q2_K layout");
static_assert(sizeof(block_q3_K) == 110, "block_q3_K layout");
static_assert(sizeof(block_q4_K) == 144, "block_q4_K layout");
static_assert(sizeof(block_q5_K) == 176, "block_q5_K layout");
static_assert(sizeof(block_q6_K) == 210, "block_q6_K layout");
static_assert(sizeof(block_q8_K) == 292, "block_q8_K layout");
