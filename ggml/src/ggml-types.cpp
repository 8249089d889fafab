// ggml-types.cpp — element types: the traits table, FP16/BF16 conversion, Q8_0 reference
// quantisation and the typed scalar store used by portable kernels.
//
// Conversions are done with integer bit manipulation rather than hardware instructions so that
// results are identical on every machine (round-to-nearest-even, subnormals kept).

#include "ggml-impl.h"

#include <cmath>
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
// Q8_0

static_assert(sizeof(block_q8_0) == sizeof(ggml_fp16_t) + QK8_0, "block_q8_0 must be 34 bytes");

namespace {

void quantize_row_q8_0_ref(const float * x, block_q8_0 * y, int64_t k) {
    GGML_ASSERT(k % QK8_0 == 0);
    const int64_t nb = k / QK8_0;
    for (int64_t b = 0; b < nb; b++) {
        const float * xb   = x + b * QK8_0;
        float         amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) {
            amax = std::fmax(amax, std::fabs(xb[j]));
        }
        const float d  = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f; // from the float d, before it is rounded to half
        y[b].d         = ggml_fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++) {
            y[b].qs[j] = (int8_t) roundf(xb[j] * id);
        }
    }
}

void dequantize_row_q8_0(const block_q8_0 * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK8_0 == 0);
    const int64_t nb = k / QK8_0;
    for (int64_t b = 0; b < nb; b++) {
        const float d = ggml_fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK8_0; j++) {
            y[b * QK8_0 + j] = x[b].qs[j] * d;
        }
    }
}

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
void to_float_q8_0(const void * x, float * y, int64_t k) {
    dequantize_row_q8_0((const block_q8_0 *) x, y, k);
}
void from_float_q8_0(const float * x, void * y, int64_t k) {
    quantize_row_q8_0_ref(x, (block_q8_0 *) y, k);
}

struct type_table {
    ggml_type_traits t[GGML_TYPE_COUNT];

    type_table() : t{} {
        t[GGML_TYPE_F32]  = {"f32", 1, 0, sizeof(float), false, nullptr, nullptr};
        t[GGML_TYPE_F16]  = {"f16", 1, 0, sizeof(ggml_fp16_t), false, to_float_f16, from_float_f16};
        t[GGML_TYPE_Q8_0] = {"q8_0", QK8_0, 0, sizeof(block_q8_0), true, to_float_q8_0, from_float_q8_0};
        t[GGML_TYPE_I8]   = {"i8", 1, 0, sizeof(int8_t), false, nullptr, nullptr};
        t[GGML_TYPE_I16]  = {"i16", 1, 0, sizeof(int16_t), false, nullptr, nullptr};
        t[GGML_TYPE_I32]  = {"i32", 1, 0, sizeof(int32_t), false, nullptr, nullptr};
        t[GGML_TYPE_I64]  = {"i64", 1, 0, sizeof(int64_t), false, nullptr, nullptr};
        t[GGML_TYPE_F64]  = {"f64", 1, 0, sizeof(double), false, nullptr, nullptr};
        t[GGML_TYPE_BF16] = {"bf16", 1, 0, sizeof(ggml_bf16_t), false, to_float_bf16, from_float_bf16};
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
    (void) imatrix; // only importance-weighted formats use it; none of ours do
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
        case GGML_TYPE_Q8_0: quantize_row_q8_0_ref(in, (block_q8_0 *) out, n); break;
        default: GGML_ABORT("ggml_quantize_chunk: cannot quantize to type %s", tr->type_name);
    }
    return (size_t) nrows * row_size;
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
        case GGML_TYPE_I8: *(int8_t *) p = saturate_trunc<int8_t>(v); break;
        case GGML_TYPE_I16: *(int16_t *) p = saturate_trunc<int16_t>(v); break;
        case GGML_TYPE_I32: *(int32_t *) p = saturate_trunc<int32_t>(v); break;
        case GGML_TYPE_I64: *(int64_t *) p = saturate_trunc<int64_t>(v); break;
        default: GGML_ABORT("ggml_store_f32: unsupported type %d", (int) type);
    }
}
