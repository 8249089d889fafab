// ggml-types.cpp — element types: the traits table, FP16/BF16 conversion, the quantisation and
// row-validation entry points (the block-quantized types' code is in ggml-quants.cpp) and the
// typed scalar store used by portable kernels.
//
// Conversions are done with integer bit manipulation rather than hardware instructions so that
// results are identical on every machine (round-to-nearest-even, subnormals kept).

#include "ggml-impl.h"
#include "formats/ggml-quants.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {

inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// FP16

extern "C" float ggml_fp16_to_fp32(ggml_fp16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp  = (h >> 10) & 0x1Fu;
    const uint32_t mant = h & 0x3FFu;

    if (exp == 0) {
        // zero or subnormal: mant * 2^-24 is exact in binary32
        const float mag = std::ldexp((float) mant, -24);
        return sign ? -mag : mag;
    }
    if (exp == 31) {
        return bits_f32(sign | 0x7F800000u | (mant << 13)); // inf or NaN (payload kept)
    }
    return bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

extern "C" ggml_fp16_t ggml_fp32_to_fp16(float f) {
    const uint32_t x    = f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax   = x & 0x7FFFFFFFu;

    if (ax > 0x7F800000u) {
        return (ggml_fp16_t)(sign | 0x7E00u); // every NaN becomes the canonical quiet NaN
    }
    if (ax >= 0x477FF000u) {
        // 65520 is the midpoint between 65504 and 2^16; ties go to the even side, which is inf
        return (ggml_fp16_t)(sign | 0x7C00u);
    }
    if (ax >= 0x38800000u) {
        // normal result: rebias the exponent, round the 13 dropped mantissa bits to nearest even
        const uint32_t exp  = (ax >> 23) - 127 + 15;
        const uint32_t mant = ax & 0x7FFFFFu;
        uint32_t       h    = (exp << 10) | (mant >> 13);
        const uint32_t rem  = mant & 0x1FFFu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) {
            h++; // a carry out of the mantissa correctly bumps the exponent
        }
        return (ggml_fp16_t)(sign | h);
    }
    if (ax <= 0x33000000u) {
        // at most 2^-25 (half the smallest subnormal): rounds to zero (the tie goes to even 0)
        return sign;
    }
    // subnormal result: h = value / 2^-24, i.e. the full significand shifted right
    const uint32_t e     = ax >> 23;
    const uint32_t mant  = (ax & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - e; // 14..24
    uint32_t       h     = mant >> shift;
    const uint32_t rem   = mant & ((1u << shift) - 1u);
    const uint32_t half  = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) {
        h++; // may become 0x400, the smallest normal, which is the correct encoding
    }
    return (ggml_fp16_t)(sign | h);
}

extern "C" void ggml_fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ggml_fp16_to_fp32(x[i]);
}

extern "C" void ggml_fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ggml_fp32_to_fp16(x[i]);
}

// ---------------------------------------------------------------------------------------------
// BF16

extern "C" float ggml_bf16_to_fp32(ggml_bf16_t h) {
    return bits_f32((uint32_t) h.bits << 16);
}

extern "C" ggml_bf16_t ggml_fp32_to_bf16(float f) {
    const uint32_t x = f32_bits(f);
    ggml_bf16_t    r;
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) {
        r.bits = (uint16_t)((x >> 16) | 0x40u); // force quiet so truncation cannot turn NaN into inf
        return r;
    }
    // adding 0x7FFF plus the lowest kept bit rounds to nearest with ties to even
    r.bits = (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
    return r;
}

extern "C" void ggml_bf16_to_fp32_row(const ggml_bf16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ggml_bf16_to_fp32(x[i]);
}

extern "C" void ggml_fp32_to_bf16_row_ref(const float * x, ggml_bf16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ggml_fp32_to_bf16(x[i]);
}

// Deliberately identical to the reference: no hardware path that would flush subnormals.
extern "C" void ggml_fp32_to_bf16_row(const float * x, ggml_bf16_t * y, int64_t n) {
    ggml_fp32_to_bf16_row_ref(x, y, n);
}

// ---------------------------------------------------------------------------------------------
// FP8 (stable-diffusion.cpp's pinned ggml: GGML_TYPE_F8_E4M3 = 43, GGML_TYPE_F8_E5M2 = 44).
// Formats and rounding: ggml-impl.h.

namespace {

constexpr float pow2f(int e) {
    float r = 1.0f;
    for (; e > 0; --e) r *= 2.0f;
    for (; e < 0; ++e) r *= 0.5f;
    return r;
}

// value of byte b in a 1.E.M format with the given bias; ieee: the top exponent is inf/NaN,
// otherwise only the all-ones pattern (S.1111.111) is NaN
constexpr float f8_decode(unsigned b, int ebits, int mbits, int bias, bool ieee) {
    const bool     neg  = (b & 0x80u) != 0;
    const unsigned e    = (b >> mbits) & ((1u << ebits) - 1u);
    const unsigned m    = b & ((1u << mbits) - 1u);
    const unsigned emax = (1u << ebits) - 1u;
    float          v    = 0.0f;
    if (ieee && e == emax) {
        v = m == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    } else if (!ieee && e == emax && m == (1u << mbits) - 1u) {
        v = std::numeric_limits<float>::quiet_NaN();
    } else if (e == 0) {
        v = (float) m * pow2f(1 - bias - mbits);
    } else {
        v = (float) ((1u << mbits) + m) * pow2f((int) e - bias - mbits);
    }
    return neg ? -v : v;
}

struct f8_tables {
    float e4m3[256];
    float e5m2[256];
    constexpr f8_tables() : e4m3{}, e5m2{} {
        for (unsigned b = 0; b < 256; ++b) {
            e4m3[b] = f8_decode(b, 4, 3, 7, false);
            e5m2[b] = f8_decode(b, 5, 2, 15, true);
        }
    }
};
constexpr f8_tables k_f8_tables;

// round |v| to nearest even on the format's grid (exact: the quotient by a power of two is exact)
uint8_t f8_encode(float v, int mbits, int bias, double maxv, bool saturate, uint8_t max_code, uint8_t inf_code,
                  uint8_t nan_code) {
    const uint8_t sign = std::signbit(v) ? 0x80u : 0u;
    if (std::isnan(v)) return sign | nan_code;
    if (std::isinf(v)) return sign | (saturate ? max_code : inf_code);
    const double a = std::fabs((double) v);
    if (a == 0.0) return sign;
    const int emin = 1 - bias;
    int       e2   = 0;
    std::frexp(a, &e2); // a = f * 2^e2, f in [0.5, 1)
    const int    E = std::max(e2 - 1, emin);
    const double n = std::nearbyint(a / std::ldexp(1.0, E - mbits)); // default mode: ties to even
    const double r = n * std::ldexp(1.0, E - mbits);
    if (r > maxv) return sign | (saturate ? max_code : inf_code);
    if (r == 0.0) return sign;
    std::frexp(r, &e2);
    const int Er = e2 - 1;
    if (Er < emin) return sign | (uint8_t) (r / std::ldexp(1.0, emin - mbits)); // subnormal
    const unsigned m = (unsigned) (r / std::ldexp(1.0, Er - mbits)) - (1u << mbits);
    return sign | (uint8_t) ((unsigned) (Er + bias) << mbits) | (uint8_t) m;
}

} // namespace

const float ggml_f8_e4m3_to_f32_table[256] = {
#define F8_ROW(i) k_f8_tables.e4m3[i], k_f8_tables.e4m3[i + 1], k_f8_tables.e4m3[i + 2], k_f8_tables.e4m3[i + 3]
#define F8_16(i) F8_ROW(i), F8_ROW(i + 4), F8_ROW(i + 8), F8_ROW(i + 12)
    F8_16(0),   F8_16(16),  F8_16(32),  F8_16(48),  F8_16(64),  F8_16(80),  F8_16(96),  F8_16(112),
    F8_16(128), F8_16(144), F8_16(160), F8_16(176), F8_16(192), F8_16(208), F8_16(224), F8_16(240),
#undef F8_ROW
};
const float ggml_f8_e5m2_to_f32_table[256] = {
#define F8_ROW(i) k_f8_tables.e5m2[i], k_f8_tables.e5m2[i + 1], k_f8_tables.e5m2[i + 2], k_f8_tables.e5m2[i + 3]
    F8_16(0),   F8_16(16),  F8_16(32),  F8_16(48),  F8_16(64),  F8_16(80),  F8_16(96),  F8_16(112),
    F8_16(128), F8_16(144), F8_16(160), F8_16(176), F8_16(192), F8_16(208), F8_16(224), F8_16(240),
#undef F8_ROW
#undef F8_16
};

uint8_t ggml_fp32_to_f8_e4m3(float v) { return f8_encode(v, 3, 7, 448.0, true, 0x7E, 0x7E, 0x7F); }
uint8_t ggml_fp32_to_f8_e5m2(float v) { return f8_encode(v, 2, 15, 57344.0, false, 0x7B, 0x7C, 0x7E); }

void ggml_f8_e4m3_to_fp32_row(const uint8_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ggml_f8_e4m3_to_f32_table[x[i]];
}
void ggml_f8_e5m2_to_fp32_row(const uint8_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ggml_f8_e5m2_to_f32_table[x[i]];
}
void ggml_fp32_to_f8_e4m3_row(const float * x, uint8_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ggml_fp32_to_f8_e4m3(x[i]);
}
void ggml_fp32_to_f8_e5m2_row(const float * x, uint8_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = ggml_fp32_to_f8_e5m2(x[i]);
}

// ---------------------------------------------------------------------------------------------
// Traits table

namespace {

// Adapters to the untyped trait signatures.
void to_float_f16(const void * x, float * y, int64_t k) {
    ggml_fp16_to_fp32_row((const ggml_fp16_t *) x, y, k);
}
void from_float_f16(const float * x, void * y, int64_t k) {
    ggml_fp32_to_fp16_row(x, (ggml_fp16_t *) y, k);
}
void to_float_bf16(const void * x, float * y, int64_t k) {
    ggml_bf16_to_fp32_row((const ggml_bf16_t *) x, y, k);
}
void from_float_bf16(const float * x, void * y, int64_t k) {
    ggml_fp32_to_bf16_row_ref(x, (ggml_bf16_t *) y, k);
}
void to_float_f8_e4m3(const void * x, float * y, int64_t k) { ggml_f8_e4m3_to_fp32_row((const uint8_t *) x, y, k); }
void to_float_f8_e5m2(const void * x, float * y, int64_t k) { ggml_f8_e5m2_to_fp32_row((const uint8_t *) x, y, k); }
void from_float_f8_e4m3(const float * x, void * y, int64_t k) { ggml_fp32_to_f8_e4m3_row(x, (uint8_t *) y, k); }
void from_float_f8_e5m2(const float * x, void * y, int64_t k) { ggml_fp32_to_f8_e5m2_row(x, (uint8_t *) y, k); }
// the block-quantized types' reference code (ggml-quants.cpp) behind the untyped signatures
template <typename Block, void (*dequantize)(const Block *, float *, int64_t)>
void to_float_blocks(const void * x, float * y, int64_t k) {
    dequantize(static_cast<const Block *>(x), y, k);
}
template <typename Block, void (*quantize)(const float *, Block *, int64_t)>
void from_float_blocks(const float * x, void * y, int64_t k) {
    quantize(x, static_cast<Block *>(y), k);
}
template <typename Block, void (*dequantize)(const Block *, float *, int64_t),
          void (*quantize)(const float *, Block *, int64_t)>
ggml_type_traits quantized(const char * name, int64_t blck_size) {
    return {name, blck_size, 0, sizeof(Block), true, to_float_blocks<Block, dequantize>,
            from_float_blocks<Block, quantize>};
}

struct type_table {
    ggml_type_traits t[GGML_TYPE_COUNT];

    type_table() : t{} {
        t[GGML_TYPE_F32]  = {"f32", 1, 0, sizeof(float), false, nullptr, nullptr};
        t[GGML_TYPE_F16]  = {"f16", 1, 0, sizeof(ggml_fp16_t), false, to_float_f16, from_float_f16};
        // upstream's names and block sizes
        t[GGML_TYPE_Q4_0] = quantized<block_q4_0, dequantize_row_q4_0, quantize_row_q4_0_ref>("q4_0", QK4_0);
        t[GGML_TYPE_Q4_1] = quantized<block_q4_1, dequantize_row_q4_1, quantize_row_q4_1_ref>("q4_1", QK4_1);
        t[GGML_TYPE_Q5_0] = quantized<block_q5_0, dequantize_row_q5_0, quantize_row_q5_0_ref>("q5_0", QK5_0);
        t[GGML_TYPE_Q5_1] = quantized<block_q5_1, dequantize_row_q5_1, quantize_row_q5_1_ref>("q5_1", QK5_1);
        t[GGML_TYPE_Q8_0] = quantized<block_q8_0, dequantize_row_q8_0, quantize_row_q8_0_ref>("q8_0", QK8_0);
        t[GGML_TYPE_Q8_1] = quantized<block_q8_1, dequantize_row_q8_1, quantize_row_q8_1_ref>("q8_1", QK8_1);
        t[GGML_TYPE_Q2_K] = quantized<block_q2_K, dequantize_row_q2_K, quantize_row_q2_K_ref>("q2_K", QK_K);
        t[GGML_TYPE_Q3_K] = quantized<block_q3_K, dequantize_row_q3_K, quantize_row_q3_K_ref>("q3_K", QK_K);
        t[GGML_TYPE_Q4_K] = quantized<block_q4_K, dequantize_row_q4_K, quantize_row_q4_K_ref>("q4_K", QK_K);
        t[GGML_TYPE_Q5_K] = quantized<block_q5_K, dequantize_row_q5_K, quantize_row_q5_K_ref>("q5_K", QK_K);
        t[GGML_TYPE_Q6_K] = quantized<block_q6_K, dequantize_row_q6_K, quantize_row_q6_K_ref>("q6_K", QK_K);
        t[GGML_TYPE_Q8_K] = quantized<block_q8_K, dequantize_row_q8_K, quantize_row_q8_K_ref>("q8_K", QK_K);
        t[GGML_TYPE_I8]   = {"i8", 1, 0, sizeof(int8_t), false, nullptr, nullptr};
        t[GGML_TYPE_I16]  = {"i16", 1, 0, sizeof(int16_t), false, nullptr, nullptr};
        t[GGML_TYPE_I32]  = {"i32", 1, 0, sizeof(int32_t), false, nullptr, nullptr};
        t[GGML_TYPE_I64]  = {"i64", 1, 0, sizeof(int64_t), false, nullptr, nullptr};
        t[GGML_TYPE_F64]  = {"f64", 1, 0, sizeof(double), false, nullptr, nullptr};
        t[GGML_TYPE_BF16] = {"bf16", 1, 0, sizeof(ggml_bf16_t), false, to_float_bf16, from_float_bf16};
        // leejet/ggml's FP8 types (names as sd.cpp prints them); not block-quantized
        t[GGML_TYPE_F8_E4M3] = {"f8_e4m3", 1, 0, 1, false, to_float_f8_e4m3, from_float_f8_e4m3};
        t[GGML_TYPE_F8_E5M2] = {"f8_e5m2", 1, 0, 1, false, to_float_f8_e5m2, from_float_f8_e5m2};
    }
};

const type_table   g_types;
const ggml_type_traits g_no_type = {}; // for values outside the enum range

} // namespace

extern "C" const struct ggml_type_traits * ggml_get_type_traits(enum ggml_type type) {
    if ((int) type < 0 || (int) type >= GGML_TYPE_COUNT) {
        return &g_no_type;
    }
    return &g_types.t[type];
}

// ---------------------------------------------------------------------------------------------
// Quantisation entry point

extern "C" size_t ggml_quantize_chunk(enum ggml_type type, const float * src, void * dst, int64_t start,
                                     int64_t nrows, int64_t n_per_row, const float * imatrix) {
    (void) imatrix; // only importance-weighted formats (IQ*) need it; ours quantize with the reference
    const ggml_type_traits * tr = ggml_get_type_traits(type);
    GGML_ASSERT(tr->type_name != nullptr && "ggml_quantize_chunk: unsupported type");
    GGML_ASSERT(n_per_row > 0 && start % n_per_row == 0 && "ggml_quantize_chunk: start must be a row boundary");
    GGML_ASSERT(n_per_row % tr->blck_size == 0);

    const int64_t start_row = start / n_per_row;
    const size_t  row_size  = ggml_row_size(type, n_per_row);
    char *        out       = (char *) dst + start_row * row_size;
    const float * in        = src + start;
    const int64_t n         = nrows * n_per_row;

    switch (type) {
        case GGML_TYPE_F32: memcpy(out, in, (size_t) n * sizeof(float)); break;
        case GGML_TYPE_F16: ggml_fp32_to_fp16_row(in, (ggml_fp16_t *) out, n); break;
        case GGML_TYPE_BF16: ggml_fp32_to_bf16_row_ref(in, (ggml_bf16_t *) out, n); break;
        case GGML_TYPE_F8_E4M3: ggml_fp32_to_f8_e4m3_row(in, (uint8_t *) out, n); break;
        case GGML_TYPE_F8_E5M2: ggml_fp32_to_f8_e5m2_row(in, (uint8_t *) out, n); break;
        default:
            // block-quantized: rows are whole blocks and contiguous, so quantizing the n values at
            // once equals quantizing row by row
            if (!tr->is_quantized || !tr->from_float_ref) {
                GGML_ABORT("ggml_quantize_chunk: cannot quantize to type %s", tr->type_name);
            }
            tr->from_float_ref(in, out, n);
            break;
    }
    return (size_t) nrows * row_size;
}

extern "C" bool ggml_quantize_requires_imatrix(enum ggml_type type) {
    (void) type; // upstream: only the IQ2/IQ1 types, none of which this library implements
    return false;
}

extern "C" void ggml_quantize_init(enum ggml_type type) {
    (void) type; // the reference quantizers need no tables
}

extern "C" void ggml_quantize_free(void) {}

// ---------------------------------------------------------------------------------------------
// Row validation (upstream's ggml_validate_row_data): the float fields a decoder multiplies by must
// be finite, or one bad block turns whole output rows into NaN.

namespace {

bool half_is_finite(const uint8_t * p) {
    ggml_fp16_t h;
    memcpy(&h, p, sizeof(h));
    return (h & 0x7C00u) != 0x7C00u;
}

// Offsets of the binary16 scale fields (d, m, dmin, s) inside a block; Q8_K's d is binary32.
struct scale_fields {
    size_t        n;
    size_t        offset[2];
    const char *  name[2];
};

scale_fields block_scale_fields(ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q4_0: return {1, {offsetof(block_q4_0, d)}, {"d"}};
        case GGML_TYPE_Q4_1: return {2, {offsetof(block_q4_1, d), offsetof(block_q4_1, m)}, {"d", "m"}};
        case GGML_TYPE_Q5_0: return {1, {offsetof(block_q5_0, d)}, {"d"}};
        case GGML_TYPE_Q5_1: return {2, {offsetof(block_q5_1, d), offsetof(block_q5_1, m)}, {"d", "m"}};
        case GGML_TYPE_Q8_0: return {1, {offsetof(block_q8_0, d)}, {"d"}};
        case GGML_TYPE_Q8_1: return {2, {offsetof(block_q8_1, d), offsetof(block_q8_1, s)}, {"d", "s"}};
        case GGML_TYPE_Q2_K: return {2, {offsetof(block_q2_K, d), offsetof(block_q2_K, dmin)}, {"d", "dmin"}};
        case GGML_TYPE_Q3_K: return {1, {offsetof(block_q3_K, d)}, {"d"}};
        case GGML_TYPE_Q4_K: return {2, {offsetof(block_q4_K, d), offsetof(block_q4_K, dmin)}, {"d", "dmin"}};
        case GGML_TYPE_Q5_K: return {2, {offsetof(block_q5_K, d), offsetof(block_q5_K, dmin)}, {"d", "dmin"}};
        case GGML_TYPE_Q6_K: return {1, {offsetof(block_q6_K, d)}, {"d"}};
        default: return {0, {}, {}};
    }
}

} // namespace

extern "C" bool ggml_validate_row_data(enum ggml_type type, const void * data, size_t nbytes) {
    const ggml_type_traits * tr = ggml_get_type_traits(type);
    if (tr->type_name == nullptr) {
        GGML_LOG_ERROR("ggml_validate_row_data: invalid type %d\n", (int) type);
        return false;
    }
    if (nbytes % tr->type_size != 0) {
        GGML_LOG_ERROR("ggml_validate_row_data: invalid size %zu for type %s (type size = %zu)\n", nbytes,
                       tr->type_name, tr->type_size);
        return false;
    }
    if (nbytes > 0 && data == nullptr) {
        GGML_LOG_ERROR("ggml_validate_row_data: no data for %zu bytes of type %s\n", nbytes, tr->type_name);
        return false;
    }
    const uint8_t * p = static_cast<const uint8_t *>(data);
    const size_t    n = nbytes / tr->type_size; // elements (plain types) or blocks

    switch (type) {
        case GGML_TYPE_F32:
            for (size_t i = 0; i < n; i++) {
                float v;
                memcpy(&v, p + i * sizeof(float), sizeof(v));
                if (!std::isfinite(v)) {
                    GGML_LOG_ERROR("ggml_validate_row_data: found %s value at element %zu (f32)\n",
                                   std::isnan(v) ? "nan" : "inf", i);
                    return false;
                }
            }
            return true;
        case GGML_TYPE_F16:
            for (size_t i = 0; i < n; i++) {
                if (!half_is_finite(p + i * 2)) {
                    GGML_LOG_ERROR("ggml_validate_row_data: found nan/inf value at element %zu (f16)\n", i);
                    return false;
                }
            }
            return true;
        case GGML_TYPE_BF16:
            for (size_t i = 0; i < n; i++) {
                uint16_t b;
                memcpy(&b, p + i * 2, sizeof(b));
                if ((b & 0x7F80u) == 0x7F80u) {
                    GGML_LOG_ERROR("ggml_validate_row_data: found nan/inf value at element %zu (bf16)\n", i);
                    return false;
                }
            }
            return true;
        case GGML_TYPE_F8_E4M3:
        case GGML_TYPE_F8_E5M2:
            for (size_t i = 0; i < n; i++) {
                const float v = type == GGML_TYPE_F8_E4M3 ? ggml_f8_e4m3_to_fp32(p[i]) : ggml_f8_e5m2_to_fp32(p[i]);
                if (!std::isfinite(v)) {
                    GGML_LOG_ERROR("ggml_validate_row_data: found %s value at element %zu (%s)\n",
                                   std::isnan(v) ? "nan" : "inf", i, tr->type_name);
                    return false;
                }
            }
            return true;
        case GGML_TYPE_Q8_K:
            for (size_t i = 0; i < n; i++) {
                float d;
                memcpy(&d, p + i * tr->type_size + offsetof(block_q8_K, d), sizeof(d));
                if (!std::isfinite(d)) {
                    GGML_LOG_ERROR("ggml_validate_row_data: type q8_K: block %zu: d is %s\n", i,
                                   std::isnan(d) ? "nan" : "inf");
                    return false;
                }
            }
            return true;
        default: break;
    }

    const scale_fields f = block_scale_fields(type);
    for (size_t i = 0; i < n && f.n > 0; i++) {
        for (size_t j = 0; j < f.n; j++) {
            if (!half_is_finite(p + i * tr->type_size + f.offset[j])) {
                GGML_LOG_ERROR("ggml_validate_row_data: type %s: block %zu: %s is nan or inf\n", tr->type_name, i,
                               f.name[j]);
                return false;
            }
        }
    }
    return true; // integer types: every bit pattern is a value
}

// ---------------------------------------------------------------------------------------------
// Typed store

namespace {

// Truncate toward zero and clamp to [lo, hi]; NaN has no meaningful integer value, so 0.
template <typename T> T saturate_trunc(float v) {
    if (std::isnan(v)) return 0;
    const double t = std::trunc((double) v);
    // the bounds are powers of two (exact in double) so the comparisons are exact
    if (t <= (double) std::numeric_limits<T>::min()) return std::numeric_limits<T>::min();
    if (t >= -(double) std::numeric_limits<T>::min()) return std::numeric_limits<T>::max();
    return (T) t;
}

} // namespace

void ggml_store_f32(enum ggml_type type, void * p, float v) {
    switch (type) {
        case GGML_TYPE_F32: *(float *) p = v; break;
        case GGML_TYPE_F16: *(ggml_fp16_t *) p = ggml_fp32_to_fp16(v); break;
        case GGML_TYPE_BF16: *(ggml_bf16_t *) p = ggml_fp32_to_bf16(v); break;
        case GGML_TYPE_F8_E4M3: *(uint8_t *) p = ggml_fp32_to_f8_e4m3(v); break;
        case GGML_TYPE_F8_E5M2: *(uint8_t *) p = ggml_fp32_to_f8_e5m2(v); break;
        case GGML_TYPE_I8: *(int8_t *) p = saturate_trunc<int8_t>(v); break;
        case GGML_TYPE_I16: *(int16_t *) p = saturate_trunc<int16_t>(v); break;
        case GGML_TYPE_I32: *(int32_t *) p = saturate_trunc<int32_t>(v); break;
        case GGML_TYPE_I64: *(int64_t *) p = saturate_trunc<int64_t>(v); break;
        default: GGML_ABORT("ggml_store_f32: unsupported type %d", (int) type);
    }
}
