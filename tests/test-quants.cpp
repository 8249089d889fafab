// test-quants.cpp — the block-quantized types' reference code (ggml/src/ggml-quants.cpp) and their
// traits: hand-computed blocks, round-trip error bounds, idempotence, the reference dot products
// against the dot of the dequantized rows, ggml_quantize_chunk, ggml_validate_row_data, and the
// cross-check with the Python `gguf` package (tests/quants_crosscheck.py).
//
// Built with -ffp-contract=off like the library file, so the expected values computed here round
// after every operation as the code under test does.

#include "ggml-quants.h"
#include "support/io-test-files.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

const ggml_type k_all_types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                                 GGML_TYPE_Q8_0, GGML_TYPE_Q8_1};

std::vector<uint8_t> quantize(ggml_type t, const std::vector<float> & x) {
    const ggml_type_traits * tr = ggml_get_type_traits(t);
    std::vector<uint8_t>     q(x.size() / tr->blck_size * tr->type_size);
    tr->from_float_ref(x.data(), q.data(), (int64_t) x.size());
    return q;
}

std::vector<float> dequantize(ggml_type t, const std::vector<uint8_t> & q) {
    const ggml_type_traits * tr = ggml_get_type_traits(t);
    std::vector<float>       y(q.size() / tr->type_size * tr->blck_size);
    tr->to_float(q.data(), y.data(), (int64_t) y.size());
    return y;
}

template <typename Block> std::vector<uint8_t> bytes_of_block(const Block & b) {
    std::vector<uint8_t> v(sizeof(Block));
    memcpy(v.data(), &b, sizeof(Block));
    return v;
}

// Expected block bytes in the file layout, fields appended little-endian in declaration order.
struct block_bytes {
    std::vector<uint8_t> v;
    block_bytes & half(uint16_t h) {
        v.push_back((uint8_t) (h & 0xFF));
        v.push_back((uint8_t) (h >> 8));
        return *this;
    }
    block_bytes & bytes(std::initializer_list<int> b) {
        for (int x : b) v.push_back((uint8_t) x);
        return *this;
    }
    block_bytes & byte_fn(int n, const std::function<int(int)> & f) {
        for (int i = 0; i < n; i++) v.push_back((uint8_t) f(i));
        return *this;
    }
};

// ---------------------------------------------------------------------------------------------
// Rows: random and adversarial

enum class row_kind { normal, uniform, tiny, zero, constant, outlier, huge_alternating, subnormal, mixed_scale };
const row_kind k_row_kinds[] = {row_kind::normal,   row_kind::uniform, row_kind::tiny,
                                row_kind::zero,     row_kind::constant, row_kind::outlier,
                                row_kind::huge_alternating, row_kind::subnormal, row_kind::mixed_scale};
const char * row_name(row_kind k) {
    switch (k) {
        case row_kind::normal: return "normal";
        case row_kind::uniform: return "uniform";
        case row_kind::tiny: return "tiny";
        case row_kind::zero: return "zero";
        case row_kind::constant: return "constant";
        case row_kind::outlier: return "outlier";
        case row_kind::huge_alternating: return "huge_alternating";
        case row_kind::subnormal: return "subnormal";
        case row_kind::mixed_scale: return "mixed_scale";
    }
    return "?";
}

std::vector<float> make_row(row_kind k, int n, uint32_t seed) {
    std::mt19937                          rng(seed);
    std::normal_distribution<float>       nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> ud(-3.0f, 5.0f);
    std::vector<float>                    x(n);
    for (int i = 0; i < n; i++) {
        switch (k) {
            case row_kind::normal: x[i] = nd(rng); break;
            case row_kind::uniform: x[i] = ud(rng); break;
            case row_kind::tiny: x[i] = nd(rng) * 1e-3f; break;
            case row_kind::zero: x[i] = 0.0f; break;
            case row_kind::constant: x[i] = 0.7f; break;
            case row_kind::outlier: x[i] = (i % 97 == 5) ? 250.0f : nd(rng) * 0.01f; break;
            // the largest magnitude every type's half-precision scale still holds (Q4_1: range / 15)
            case row_kind::huge_alternating: x[i] = (i % 2 ? -1.0e4f : 1.0e4f) * (1.0f - 0.001f * (float) (i % 7)); break;
            case row_kind::subnormal: x[i] = nd(rng) * 1e-39f; break;
            case row_kind::mixed_scale: x[i] = nd(rng) * std::ldexp(1.0f, (i / 32) % 9 - 4); break;
        }
    }
    return x;
}

// ---------------------------------------------------------------------------------------------
// Round-trip error bounds, per block of the type (stated in the report and here):
//   Q4_0: |x - x'| <= 1.01 * amax / 8  + 8 * 2^-25      (d = max / -8; the value of the sign opposite
//                                                        to the max and the same magnitude clamps to 7d)
//   Q5_0: |x - x'| <= 1.01 * amax / 16 + 16 * 2^-25
//   Q4_1: |x - x'| <= 1.01 * (max - min) / 30 + |min| * 2^-11 + 16 * 2^-25
//   Q5_1: |x - x'| <= 1.01 * (max - min) / 62 + |min| * 2^-11 + 32 * 2^-25
//   Q8_0, Q8_1: |x - x'| <= amax * (1/254 + 2^-11) * 1.01 + 128 * 2^-25
// where amax/min/max are the block's and the last term is half the spacing of subnormal halves times
// the largest quant (the scale is stored in binary16: relative error 2^-11, absolute 2^-25 below 2^-14).
double roundtrip_bound(ggml_type t, const float * x, int n) {
    double amax = 0, mn = INFINITY, mx = -INFINITY;
    for (int i = 0; i < n; i++) {
        amax = std::max(amax, (double) std::fabs(x[i]));
        mn   = std::min(mn, (double) x[i]);
        mx   = std::max(mx, (double) x[i]);
    }
    const double h = std::ldexp(1.0, -25);
    switch (t) {
        case GGML_TYPE_Q4_0: return 1.01 * amax / 8 + 8 * h;
        case GGML_TYPE_Q5_0: return 1.01 * amax / 16 + 16 * h;
        case GGML_TYPE_Q4_1: return 1.01 * (mx - mn) / 30 + std::fabs(mn) * std::ldexp(1.0, -11) + 16 * h;
        case GGML_TYPE_Q5_1: return 1.01 * (mx - mn) / 62 + std::fabs(mn) * std::ldexp(1.0, -11) + 32 * h;
        case GGML_TYPE_Q8_0:
        case GGML_TYPE_Q8_1: return amax * (1.0 / 254 + std::ldexp(1.0, -11)) * 1.01 + 128 * h;
        default: return -1;
    }
}

// ---------------------------------------------------------------------------------------------
// Traits

TEST(QuantsTraits, NamesSizesAndFunctions) {
    struct expect {
        ggml_type    t;
        const char * name;
        int64_t      blck;
        size_t       size;
    };
    const expect e[] = {
        {GGML_TYPE_Q4_0, "q4_0", 32, 18}, {GGML_TYPE_Q4_1, "q4_1", 32, 20}, {GGML_TYPE_Q5_0, "q5_0", 32, 22},
        {GGML_TYPE_Q5_1, "q5_1", 32, 24}, {GGML_TYPE_Q8_0, "q8_0", 32, 34}, {GGML_TYPE_Q8_1, "q8_1", 32, 36},
    };
    for (const expect & x : e) {
        SCOPED_TRACE(x.name);
        const ggml_type_traits * tr = ggml_get_type_traits(x.t);
        ASSERT_NE(tr->type_name, nullptr);
        EXPECT_STREQ(tr->type_name, x.name);
        EXPECT_STREQ(ggml_type_name(x.t), x.name);
        EXPECT_EQ(ggml_blck_size(x.t), x.blck);
        EXPECT_EQ(ggml_type_size(x.t), x.size);
        EXPECT_EQ(ggml_row_size(x.t, 4 * x.blck), 4 * x.size);
        EXPECT_TRUE(ggml_is_quantized(x.t));
        EXPECT_NE(tr->to_float, nullptr);
        EXPECT_NE(tr->from_float_ref, nullptr);
        EXPECT_FALSE(ggml_quantize_requires_imatrix(x.t));
    }
    EXPECT_FALSE(ggml_is_quantized(GGML_TYPE_F32));
    EXPECT_FALSE(ggml_is_quantized(GGML_TYPE_BF16));
}

TEST(QuantsTraits, DotTypesAsUpstream) {
    struct expect {
        ggml_type w, act;
        bool      has_dot;
    };
    const expect e[] = {
        {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, true}, {GGML_TYPE_Q5_0, GGML_TYPE_Q8_0, true},
        {GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, true}, {GGML_TYPE_Q4_1, GGML_TYPE_Q8_1, true},
        {GGML_TYPE_Q5_1, GGML_TYPE_Q8_1, true}, {GGML_TYPE_Q8_1, GGML_TYPE_Q8_1, false},
    };
    for (const expect & x : e) {
        SCOPED_TRACE(ggml_type_name(x.w));
        const ggml_quant_dot_traits * dt = ggml_get_quant_dot_traits(x.w);
        ASSERT_NE(dt, nullptr);
        EXPECT_EQ(dt->vec_dot_type, x.act);
        EXPECT_NE(dt->quantize_act, nullptr);
        EXPECT_EQ(dt->vec_dot_ref != nullptr, x.has_dot);
    }
    EXPECT_EQ(ggml_get_quant_dot_traits(GGML_TYPE_F32), nullptr);
    EXPECT_EQ(ggml_get_quant_dot_traits(GGML_TYPE_F16), nullptr);
    EXPECT_EQ(ggml_get_quant_dot_traits(GGML_TYPE_I32), nullptr);
}

// ---------------------------------------------------------------------------------------------
// Hand-computed blocks. The expected bytes were worked out by hand from the reference algorithm;
// each comment shows the arithmetic.

TEST(QuantsLayout, Q4_0NegativeMax) {
    // x[j] = j - 8 (j < 16), x[16 + j] = 7 - j: the first element of largest magnitude is x[0] = -8,
    // so d = -8 / -8 = 1 (half 0x3C00), id = 1, q = trunc(x + 8.5) = x + 8:
    // q[j] = j, q[16 + j] = 15 - j; qs[j] = q[j] | q[16 + j] << 4 = j | (15 - j) << 4.
    std::vector<float> x(32);
    for (int j = 0; j < 16; j++) {
        x[j]      = (float) (j - 8);
        x[16 + j] = (float) (7 - j);
    }
    const auto q = quantize(GGML_TYPE_Q4_0, x);
    const auto e = block_bytes().half(0x3C00).byte_fn(16, [](int j) { return j | (15 - j) << 4; }).v;
    EXPECT_EQ(q, e);
    EXPECT_EQ(dequantize(GGML_TYPE_Q4_0, q), x); // every x is d * (q - 8) exactly
}

TEST(QuantsLayout, Q4_0PositiveMaxAndClamp) {
    // x = [4, 0 x 30, -1]: max = 4, d = 4 / -8 = -0.5 (half 0xB800), id = -2.
    // q(4) = trunc(-8 + 8.5) = 0, q(0) = trunc(8.5) = 8, q(-1) = trunc(2 + 8.5) = 10.
    // qs[0] = 0 | 8 << 4 = 0x80, qs[1..14] = 0x88, qs[15] = q[15] | q[31] << 4 = 8 | 10 << 4 = 0xA8.
    std::vector<float> x(32, 0.0f);
    x[0]         = 4.0f;
    x[31]        = -1.0f;
    const auto q = quantize(GGML_TYPE_Q4_0, x);
    auto       e = block_bytes().half(0xB800).bytes({0x80}).byte_fn(14, [](int) { return 0x88; }).bytes({0xA8}).v;
    EXPECT_EQ(q, e);
    EXPECT_EQ(dequantize(GGML_TYPE_Q4_0, q), x);

    // x = [-4, 4, 0 ...]: d = -4 / -8 = 0.5, q(4) = trunc(8 + 8.5) = 16 -> clamped to 15 -> 3.5
    std::vector<float> c(32, 0.0f);
    c[0]          = -4.0f;
    c[1]          = 4.0f;
    const auto qc = quantize(GGML_TYPE_Q4_0, c);
    EXPECT_EQ(qc[0] | qc[1] << 8, 0x3800);
    EXPECT_EQ(qc[2], 0x80); // q[0] = 0, q[16] = 8
    EXPECT_EQ(qc[3], 0x8F); // q[1] = 15 (clamped), q[17] = 8
    EXPECT_EQ(dequantize(GGML_TYPE_Q4_0, qc)[1], 3.5f);
}

TEST(QuantsLayout, Q4_1) {
    // x[j] = 1 + 0.5 * (j % 16): min = 1, max = 8.5, d = 7.5 / 15 = 0.5 (0x3800), m = 1 (0x3C00),
    // id = 2, q = trunc((x - 1) * 2 + 0.5) = j % 16; elements j and j + 16 are equal: qs[j] = j * 0x11.
    std::vector<float> x(32);
    for (int j = 0; j < 32; j++) x[j] = 1.0f + 0.5f * (float) (j % 16);
    const auto q = quantize(GGML_TYPE_Q4_1, x);
    const auto e = block_bytes().half(0x3800).half(0x3C00).byte_fn(16, [](int j) { return j * 0x11; }).v;
    EXPECT_EQ(q, e);
    EXPECT_EQ(dequantize(GGML_TYPE_Q4_1, q), x);
}

TEST(QuantsLayout, Q5_0) {
    // x[j] = j - 16: max = x[0] = -16, d = 1 (0x3C00), id = 1, q = trunc(x + 16.5) = j.
    // qs[j] = (q[j] & 15) | (q[j + 16] & 15) << 4 = j * 0x11; bit 4 of q[j] is set for j >= 16:
    // qh = 0xFFFF0000, stored little-endian: 00 00 FF FF.
    std::vector<float> x(32);
    for (int j = 0; j < 32; j++) x[j] = (float) (j - 16);
    const auto q = quantize(GGML_TYPE_Q5_0, x);
    const auto e =
        block_bytes().half(0x3C00).bytes({0x00, 0x00, 0xFF, 0xFF}).byte_fn(16, [](int j) { return j * 0x11; }).v;
    EXPECT_EQ(q, e);
    EXPECT_EQ(dequantize(GGML_TYPE_Q5_0, q), x);
}

TEST(QuantsLayout, Q5_1) {
    // x[j] = -2 + 0.25 * j: min = -2 (0xC000), max = 5.75, d = 7.75 / 31 = 0.25 (0x3400), id = 4,
    // q = trunc((x + 2) * 4 + 0.5) = j: the same qs and qh as the Q5_0 case.
    std::vector<float> x(32);
    for (int j = 0; j < 32; j++) x[j] = -2.0f + 0.25f * (float) j;
    const auto q = quantize(GGML_TYPE_Q5_1, x);
    const auto e = block_bytes()
                       .half(0x3400)
                       .half(0xC000)
                       .bytes({0x00, 0x00, 0xFF, 0xFF})
                       .byte_fn(16, [](int j) { return j * 0x11; })
                       .v;
    EXPECT_EQ(q, e);
    EXPECT_EQ(dequantize(GGML_TYPE_Q5_1, q), x);
}

TEST(QuantsLayout, Q8_0AndQ8_1RoundHalfAwayFromZero) {
    // x = [127, 2.5, -2.5, 0.5, -0.5, 0 ...]: amax = 127, d = 1 (0x3C00), id = 1, q = roundf(x):
    // 127, 3, -3, 1, -1 (ties away from zero, not to even). Q8_1 adds s = half(sum(q) * d) =
    // half(127) = 0x57F0 (1.984375 * 2^6: exponent 21 -> 0x5400, mantissa 1008 = 0x3F0).
    std::vector<float> x(32, 0.0f);
    x[0] = 127.0f;
    x[1] = 2.5f;
    x[2] = -2.5f;
    x[3] = 0.5f;
    x[4] = -0.5f;
    const auto q8  = quantize(GGML_TYPE_Q8_0, x);
    const auto qs  = [](int j) { return j == 0 ? 127 : j == 1 ? 3 : j == 2 ? 0xFD : j == 3 ? 1 : j == 4 ? 0xFF : 0; };
    const auto e8  = block_bytes().half(0x3C00).byte_fn(32, qs).v;
    EXPECT_EQ(q8, e8);
    const auto q81 = quantize(GGML_TYPE_Q8_1, x);
    const auto e81 = block_bytes().half(0x3C00).half(0x57F0).byte_fn(32, qs).v;
    EXPECT_EQ(q81, e81);

    // d from a non-representable scale: amax = 16, d = 16 / 127 = 0.12598..., as a half:
    // 0.125 * (1 + 8.06 / 1024) -> mantissa 8 -> 0x3008; q(16) = round(16 * (1 / d)) = 127
    std::vector<float> y(32, 0.0f);
    y[7]          = -16.0f;
    const auto qy = quantize(GGML_TYPE_Q8_0, y);
    EXPECT_EQ(qy[0] | qy[1] << 8, 0x3008);
    EXPECT_EQ((int8_t) qy[2 + 7], -127);
}

TEST(QuantsLayout, AllZeroBlocksAreZero) {
    for (ggml_type t : k_all_types) {
        SCOPED_TRACE(ggml_type_name(t));
        const int64_t      n = ggml_blck_size(t);
        std::vector<float> x(n, 0.0f);
        const auto         q = quantize(t, x);
        for (float v : dequantize(t, q)) EXPECT_EQ(v, 0.0f);
    }
}

// ---------------------------------------------------------------------------------------------
// Round trips

TEST(QuantsRoundTrip, ErrorWithinStatedBound) {
    const int n = 512;
    for (ggml_type t : k_all_types) {
        const int64_t bs = ggml_blck_size(t);
        for (row_kind k : k_row_kinds) {
            SCOPED_TRACE(std::string(ggml_type_name(t)) + " " + row_name(k));
            const auto x  = make_row(k, n, 1234u + (uint32_t) k);
            const auto y  = dequantize(t, quantize(t, x));
            double     worst_ratio = 0;
            for (int64_t b = 0; b < n / bs; b++) {
                const double bound = roundtrip_bound(t, x.data() + b * bs, (int) bs);
                ASSERT_GE(bound, 0);
                for (int64_t j = 0; j < bs; j++) {
                    const double err = std::fabs((double) x[b * bs + j] - (double) y[b * bs + j]);
                    ASSERT_TRUE(std::isfinite(y[b * bs + j]));
                    ASSERT_LE(err, bound) << "block " << b << " element " << j << " x=" << x[b * bs + j]
                                          << " y=" << y[b * bs + j];
                    if (bound > 0) worst_ratio = std::max(worst_ratio, err / bound);
                }
            }
            if (k == row_kind::zero || k == row_kind::constant) {
                // a constant block is exact for the affine types (d = 0, m = x ... in half precision)
                for (int i = 0; i < n; i++) EXPECT_NEAR(y[i], x[i], std::fabs(x[i]) * std::ldexp(1.0, -11));
            }
        }
    }
}

// Symmetric types: the largest element maps to an extreme quant whose value, requantized, gives back
// exactly the same half scale, and every other value lands back on its own quant.
TEST(QuantsRoundTrip, IdempotentWhereTheFormatGuaranteesIt) {
    const ggml_type types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q5_0, GGML_TYPE_Q8_0, GGML_TYPE_Q8_1};
    for (ggml_type t : types) {
        for (row_kind k : {row_kind::normal, row_kind::uniform, row_kind::outlier, row_kind::huge_alternating,
                           row_kind::mixed_scale, row_kind::constant, row_kind::zero}) {
            SCOPED_TRACE(std::string(ggml_type_name(t)) + " " + row_name(k));
            const auto x  = make_row(k, 256, 99u + (uint32_t) k);
            const auto y1 = dequantize(t, quantize(t, x));
            const auto y2 = dequantize(t, quantize(t, y1));
            EXPECT_EQ(y1, y2);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Dot products

// The dot of the dequantized rows in double, and sum |w_i a_i| (the scale of the rounding error).
void dequantized_dot(ggml_type wt, const std::vector<uint8_t> & w, ggml_type at, const std::vector<uint8_t> & a,
                     double & dot, double & mag) {
    const auto wf = dequantize(wt, w);
    const auto af = dequantize(at, a);
    dot = mag = 0;
    for (size_t i = 0; i < wf.size(); i++) {
        dot += (double) wf[i] * af[i];
        mag += std::fabs((double) wf[i] * af[i]);
    }
}

// Extra error of the Q8_1 path: the activation's s = half(d * sum(q)) stands for dequantized
// d_half * sum(q); |s - d_half sum q| <= |d sum q| 2^-11 + |sum q| |d - d_half| <= 2^-10 |sum q| d_half (1 + 2^-11).
double q8_1_sum_error(ggml_type wt, const std::vector<uint8_t> & w, const std::vector<uint8_t> & a) {
    if (wt != GGML_TYPE_Q4_1 && wt != GGML_TYPE_Q5_1) return 0;
    const size_t       nb  = a.size() / sizeof(block_q8_1);
    const block_q8_1 * ab  = (const block_q8_1 *) a.data();
    double             err = 0;
    for (size_t b = 0; b < nb; b++) {
        const uint8_t * wb = w.data() + b * ggml_type_size(wt);
        ggml_fp16_t     m;
        memcpy(&m, wb + 2, 2); // m follows d in both layouts
        int sum = 0;
        for (int j = 0; j < 32; j++) sum += ab[b].qs[j];
        err += std::fabs(ggml_fp16_to_fp32(m)) * std::fabs((double) sum) * ggml_fp16_to_fp32(ab[b].d) *
               std::ldexp(1.0, -10) * 1.001;
    }
    return err;
}

TEST(QuantsDot, ReferenceEqualsDotOfDequantizedRows) {
    for (ggml_type t : k_all_types) {
        const ggml_quant_dot_traits * dt = ggml_get_quant_dot_traits(t);
        if (!dt || !dt->vec_dot_ref) continue; // activation-only types (checked in DotTypesAsUpstream)
        for (int n : {256, 4096}) {
            for (row_kind k : {row_kind::normal, row_kind::uniform, row_kind::outlier, row_kind::mixed_scale,
                               row_kind::huge_alternating, row_kind::zero}) {
                SCOPED_TRACE(std::string(ggml_type_name(t)) + " n=" + std::to_string(n) + " " + row_name(k));
                const auto                 wx = make_row(k, n, 7u + (uint32_t) k);
                const auto                 ax = make_row(row_kind::normal, n, 11u + (uint32_t) n);
                const auto                 w  = quantize(t, wx);
                const ggml_type_traits *   at = ggml_get_type_traits(dt->vec_dot_type);
                std::vector<uint8_t>       a(n / at->blck_size * at->type_size);
                dt->quantize_act(ax.data(), a.data(), n);
                EXPECT_EQ(a, quantize(dt->vec_dot_type, ax)) << "quantize_act is the dot type's reference";
                float s = NAN;
                dt->vec_dot_ref(n, &s, w.data(), a.data());
                double dot, mag;
                dequantized_dot(t, w, dt->vec_dot_type, a, dot, mag);
                // per block: sumi exact, two rounded products; then n/32 float additions
                const double tol = (n / 32.0 + 4) * std::ldexp(1.0, -24) * mag + q8_1_sum_error(t, w, a);
                EXPECT_NEAR(s, dot, tol);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// ggml_quantize_chunk and ggml_validate_row_data

TEST(QuantsChunk, RowsAtAnOffsetEqualTheRowQuantizer) {
    const int n_per_row = 256, nrows = 5;
    for (ggml_type t : k_all_types) {
        SCOPED_TRACE(ggml_type_name(t));
        const auto           x  = make_row(row_kind::normal, n_per_row * nrows, 5u);
        const size_t         rs = ggml_row_size(t, n_per_row);
        std::vector<uint8_t> out(rs * nrows, 0xAB);
        // rows 2..4 only: rows 0..1 of dst stay untouched
        const size_t written = ggml_quantize_chunk(t, x.data(), out.data(), 2 * n_per_row, 3, n_per_row, nullptr);
        EXPECT_EQ(written, 3 * rs);
        for (size_t i = 0; i < 2 * rs; i++) ASSERT_EQ(out[i], 0xAB);
        const std::vector<float> tail(x.begin() + 2 * n_per_row, x.end());
        const auto               ref = quantize(t, tail);
        EXPECT_EQ(std::vector<uint8_t>(out.begin() + 2 * rs, out.end()), ref);
        EXPECT_TRUE(ggml_validate_row_data(t, out.data() + 2 * rs, 3 * rs));
    }
}

TEST(QuantsValidate, RejectsNonFiniteScalesAndWrongSizes) {
    for (ggml_type t : k_all_types) {
        SCOPED_TRACE(ggml_type_name(t));
        const size_t ts = ggml_type_size(t);
        auto         q  = quantize(t, make_row(row_kind::normal, 256, 3u));
        ASSERT_TRUE(ggml_validate_row_data(t, q.data(), q.size()));
        EXPECT_FALSE(ggml_validate_row_data(t, q.data(), q.size() - 1));
        EXPECT_FALSE(ggml_validate_row_data(t, q.data(), ts + 1));
        EXPECT_TRUE(ggml_validate_row_data(t, q.data(), 0));
        // every half field of the first 2 or 4 bytes (d; m or s for the _1 types) of the last block
        const size_t nfields = (t == GGML_TYPE_Q4_1 || t == GGML_TYPE_Q5_1 || t == GGML_TYPE_Q8_1) ? 2 : 1;
        for (size_t f = 0; f < nfields; f++) {
            for (uint16_t bad : {(uint16_t) 0x7C00, (uint16_t) 0xFC00, (uint16_t) 0x7E00, (uint16_t) 0x7C01}) {
                auto c = q;
                memcpy(c.data() + c.size() - ts + 2 * f, &bad, 2);
                EXPECT_FALSE(ggml_validate_row_data(t, c.data(), c.size())) << "field " << f << " bits " << bad;
            }
        }
    }
}

TEST(QuantsValidate, FloatRowsAndOverflowingScales) {
    std::vector<float> f = {1.0f, -2.0f, 0.0f};
    EXPECT_TRUE(ggml_validate_row_data(GGML_TYPE_F32, f.data(), f.size() * 4));
    f[1] = NAN;
    EXPECT_FALSE(ggml_validate_row_data(GGML_TYPE_F32, f.data(), f.size() * 4));
    f[1] = -INFINITY;
    EXPECT_FALSE(ggml_validate_row_data(GGML_TYPE_F32, f.data(), f.size() * 4));
    EXPECT_FALSE(ggml_validate_row_data(GGML_TYPE_F32, f.data(), 5));
    const uint16_t h[] = {0x3C00, 0x7C00};
    EXPECT_TRUE(ggml_validate_row_data(GGML_TYPE_F16, h, 2));
    EXPECT_FALSE(ggml_validate_row_data(GGML_TYPE_F16, h, 4));
    const uint16_t b[] = {0x3F80, 0x7FC0};
    EXPECT_TRUE(ggml_validate_row_data(GGML_TYPE_BF16, b, 2));
    EXPECT_FALSE(ggml_validate_row_data(GGML_TYPE_BF16, b, 4));
    const int32_t i[] = {-1, 0x7F800000};
    EXPECT_TRUE(ggml_validate_row_data(GGML_TYPE_I32, i, sizeof(i)));
    EXPECT_FALSE(ggml_validate_row_data((ggml_type) 4, i, sizeof(i))); // a removed upstream type
    EXPECT_FALSE(ggml_validate_row_data((ggml_type) 1000, i, sizeof(i)));

    // Values beyond what a half scale holds (here 1e30: d = 1.25e29 > 65504) quantize to an
    // infinite scale, which validation reports: the formats cannot store them.
    std::vector<float> huge(32, 0.0f);
    huge[3] = 1e30f;
    for (ggml_type t : {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q8_0}) {
        const auto q = quantize(t, huge);
        EXPECT_FALSE(ggml_validate_row_data(t, q.data(), q.size())) << ggml_type_name(t);
    }
}

} // namespace
