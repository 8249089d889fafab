// test-quants.cpp — the block-quantized types' reference code (ggml/src/formats/ggml-quants.cpp) and their
// traits: hand-computed blocks, round-trip error bounds, idempotence, the reference dot products
// against the dot of the dequantized rows, ggml_quantize_chunk, ggml_validate_row_data, and the
// cross-check with the Python `gguf` package and, for the K-quant quantizers gguf lacks, with an
// independent numpy transcription (tests/quants_crosscheck.py, tests/quants_kquant_ref.py).
//
// Built with -ffp-contract=off like the library file, so the expected values computed here round
// after every operation as the code under test does.

#include "formats/ggml-quants.h"
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
#include <sys/wait.h>
#include <vector>

namespace {

struct tmp_dir_t : sd_test::tmp_dir {
    tmp_dir_t() : sd_test::tmp_dir(sd_test::env_tmpdir() + "/sd-test-quants.XXXXXX") {}
};

const ggml_type k_all_types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                                 GGML_TYPE_Q8_0, GGML_TYPE_Q8_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,
                                 GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_Q8_K};

// Byte offsets of a block's binary16 scale fields (d, then m / dmin / s), from the layouts in
// ggml-common.h: Q2_K's d and dmin follow scales[16] qs[64]; Q3_K's d follows hmask[32] qs[64]
// scales[12]; Q6_K's d follows ql[128] qh[64] scales[16]. Q8_K's d is a binary32 at 0.
std::vector<size_t> half_field_offsets(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q4_0:
        case GGML_TYPE_Q5_0:
        case GGML_TYPE_Q8_0: return {0};
        case GGML_TYPE_Q4_1:
        case GGML_TYPE_Q5_1:
        case GGML_TYPE_Q8_1:
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q5_K: return {0, 2};
        case GGML_TYPE_Q2_K: return {80, 82};
        case GGML_TYPE_Q3_K: return {108};
        case GGML_TYPE_Q6_K: return {208};
        default: return {};
    }
}

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
// K-quants, per 256-element super-block (their scales come from a search and are requantized to
// 6/8 bits, so no tight bound follows from the format alone; these are the worst errors measured over
// 1,200 random and structured super-blocks, 0.368 / 0.228 / 0.083 / 0.046 / 0.016 amax for Q2_K /
// Q3_K / Q4_K / Q5_K / Q6_K, with a margin of 1.5x or more):
//   Q2_K: 0.55 amax + 2 * 15 * 3 * 2^-25;  Q3_K: 0.34 amax + 32 * 4 * 2^-25;
//   Q4_K: amax / 8 + 2 * 63 * 32 * 2^-25;  Q5_K: amax / 16 + 2 * 63 * 32 * 2^-25;  Q6_K: amax / 40 + 128 * 32 * 2^-25
//   Q8_K (proven: d = max / -127 in binary32, quants rounded to nearest): amax / 254 * (1 + 2^-20),
//   except below ~3.7e-37 (amax): -127 / max overflows and such rows quantize to zero (error amax).
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
        case GGML_TYPE_Q2_K: return 0.55 * amax + 2 * 15 * 3 * h;
        case GGML_TYPE_Q3_K: return 0.34 * amax + 32 * 4 * h;
        case GGML_TYPE_Q4_K: return amax / 8 + 2 * 63 * 32 * h;
        case GGML_TYPE_Q5_K: return amax / 16 + 2 * 63 * 32 * h;
        case GGML_TYPE_Q6_K: return amax / 40 + 128 * 32 * h;
        case GGML_TYPE_Q8_K: return amax < 3.7e-37 ? amax : amax / 254 * (1 + std::ldexp(1.0, -20));
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
        {GGML_TYPE_Q2_K, "q2_K", 256, 84},  {GGML_TYPE_Q3_K, "q3_K", 256, 110},
        {GGML_TYPE_Q4_K, "q4_K", 256, 144}, {GGML_TYPE_Q5_K, "q5_K", 256, 176}, {GGML_TYPE_Q6_K, "q6_K", 256, 210},
        {GGML_TYPE_Q8_K, "q8_K", 256, 292},
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
        {GGML_TYPE_Q2_K, GGML_TYPE_Q8_K, true}, {GGML_TYPE_Q3_K, GGML_TYPE_Q8_K, true},
        {GGML_TYPE_Q4_K, GGML_TYPE_Q8_K, true}, {GGML_TYPE_Q5_K, GGML_TYPE_Q8_K, true},
        {GGML_TYPE_Q6_K, GGML_TYPE_Q8_K, true}, {GGML_TYPE_Q8_K, GGML_TYPE_Q8_K, false},
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

TEST(QuantsLayout, Q8_K) {
    // x[j] = (37 j mod 255) - 127: every integer in [-127, 127]; the first of largest magnitude is
    // x[0] = -127, so iscale = -127 / -127 = 1, q = x, d = 1 / 1 = 1 (binary32), bsums = sums of 16.
    std::vector<float> x(256);
    for (int j = 0; j < 256; j++) x[j] = (float) ((37 * j) % 255 - 127);
    const auto   q   = quantize(GGML_TYPE_Q8_K, x);
    block_q8_K   b;
    memcpy(&b, q.data(), sizeof(b));
    EXPECT_EQ(b.d, 1.0f);
    for (int j = 0; j < 256; j++) ASSERT_EQ(b.qs[j], (int8_t) x[j]) << j;
    // bsums[0] = sum over j < 16 of (37 j mod 255) - 127: 0 37 74 111 148 185 222 4 41 78 115 152 189
    // 226 8 45 (sum 1635) - 16 * 127 = -397
    EXPECT_EQ(b.bsums[0], -397);
    for (int g = 0; g < 16; g++) {
        int sum = 0;
        for (int j = 0; j < 16; j++) sum += b.qs[16 * g + j];
        EXPECT_EQ(b.bsums[g], sum);
    }
    EXPECT_EQ(dequantize(GGML_TYPE_Q8_K, q), x);

    // positive max: x[5] = 254 -> iscale = -127 / 254 = -0.5, d = -2; q = nearest_int(-x / 2) with
    // ties to even: 3 -> -1.5 -> -2, 1 -> -0.5 -> 0, -5 -> 2.5 -> 2, 254 -> -127
    std::vector<float> y(256, 0.0f);
    y[5]          = 254.0f;
    y[6]          = 3.0f;
    y[7]          = 1.0f;
    y[8]          = -5.0f;
    const auto qy = quantize(GGML_TYPE_Q8_K, y);
    memcpy(&b, qy.data(), sizeof(b));
    EXPECT_EQ(b.d, -2.0f);
    EXPECT_EQ(b.qs[5], -127);
    EXPECT_EQ(b.qs[6], -2);
    EXPECT_EQ(b.qs[7], 0);
    EXPECT_EQ(b.qs[8], 2);
    EXPECT_EQ(b.bsums[0], -127);
}

// The pattern p[i] = (7 i mod 64) - 32 = -32 -25 -18 -11 -4 3 10 17 24 31 6 13 20 27 -30 -23 in every
// 16-element sub-block ib, scaled by s = 1, 0.5, 0.25 for ib % 3 = 0, 1, 2.
TEST(QuantsLayout, Q6_K) {
    const int p[16] = {-32, -25, -18, -11, -4, 3, 10, 17, 24, 31, 6, 13, 20, 27, -30, -23};
    std::vector<float> x(256);
    for (int e = 0; e < 256; e++) x[e] = (float) p[e % 16] * std::ldexp(1.0f, -((e / 16) % 3));
    // Per sub-block the search starts at iscale = -32 / (-32 s) = 1 / s, which gives l = p exactly
    // and the weighted least-squares scale sumlx / suml2 = s exactly (both sums are the same sum of
    // p^4 scaled by powers of two); no other candidate beats zero error. max_scale = 1 (sub-block 0):
    // iscale = -128, d = half(-1/128) = 0xA000, scales = nearest(-128 s) = -128, -64, -32, ...
    // Requantized with d * sc = s: L = p + 32 =
    //   0 7 14 21 28 35 42 49 56 63 38 45 52 59 2 9,
    // low nibbles 0 7 14 5 12 3 10 1 8 15 6 13 4 11 2 9 and top two bits 0 0 0 1 1 2 2 3 3 3 2 2 3 3 0 0.
    // Every sub-block holds the same L, so ql[i] = low[i % 16] * 0x11 (both nibbles are elements 64
    // apart) and qh[i] = top[i % 16] * 0x55 (four elements 32 apart).
    const int lo[16]  = {0, 7, 14, 5, 12, 3, 10, 1, 8, 15, 6, 13, 4, 11, 2, 9};
    const int top[16] = {0, 0, 0, 1, 1, 2, 2, 3, 3, 3, 2, 2, 3, 3, 0, 0};
    const auto q      = quantize(GGML_TYPE_Q6_K, x);
    const auto e      = block_bytes()
                       .byte_fn(128, [&](int i) { return lo[i % 16] * 0x11; })
                       .byte_fn(64, [&](int i) { return top[i % 16] * 0x55; })
                       .byte_fn(16, [](int ib) { return (uint8_t) (int8_t) (ib % 3 == 0 ? -128 : ib % 3 == 1 ? -64 : -32); })
                       .half(0xA000)
                       .v;
    EXPECT_EQ(q, e);
    EXPECT_EQ(dequantize(GGML_TYPE_Q6_K, q), x); // (d * sc) * (L - 32) = s * p exactly
}

// Sub-block j of 32 elements: x = s l - m with s = 1, m = 2 (even j) or s = 0.5, m = 1 (odd j) and
// l[i] = 7 i mod (nmax + 1), which covers 0 and nmax.
std::vector<float> k_affine_input(int nmax) {
    std::vector<float> x(256);
    for (int e = 0; e < 256; e++) {
        const int   j = e / 32, i = e % 32;
        const float s = j % 2 ? 0.5f : 1.0f, m = j % 2 ? 1.0f : 2.0f;
        x[e]          = s * (float) ((7 * i) % (nmax + 1)) - m;
    }
    return x;
}

// The Q4_K/Q5_K scales of k_affine_input: the first search candidate iscale = nmax / (max - min) =
// 1 / s fits every sub-block with zero error (x = s l - m exactly), so scales = s and mins = m.
// max_scale = 1, max_min = 2: ls = nearest(63 s) = 63 or nearest(31.5) = 32 (ties to even), lm = 63
// or nearest(31.5 * 1) = 32. Packed: bytes 0..3 = ls[0..3] | top2(ls[4..7]) << 6 = 63|0xC0, 32|0x80
// -> FF A0 FF A0; bytes 4..7 the same from lm; bytes 8..11 = low4(ls[4..7]) | low4(lm[4..7]) << 4 =
// FF 00 FF 00. d = half(1/63) = 2^-6 (1 + 16/1024) = 0x2410 (1/63 = 2^-6 * 1.0159: mantissa 16.25 -> 16),
// dmin = half(2/63) = 0x2810. Requantized with the stored scales (d * 63 = 0.99976, dmin * 63 = 1.99951
// for even j; d * 32 = 0.50781, dmin * 32 = 1.01563 for odd j) every element gets its l back.
const std::vector<int> k_affine_scales = {0xFF, 0xA0, 0xFF, 0xA0, 0xFF, 0xA0, 0xFF, 0xA0, 0xFF, 0x00, 0xFF, 0x00};

TEST(QuantsLayout, Q4_K) {
    // L of element e = 7 (e % 32) mod 16 = 7 e mod 16; qs[32c + l] = L[64c + l] | L[64c + l + 32] << 4,
    // two equal nibbles: qs[i] = (7 i mod 16) * 0x11.
    const auto x = k_affine_input(15);
    const auto q = quantize(GGML_TYPE_Q4_K, x);
    block_bytes e;
    e.half(0x2410).half(0x2810);
    for (int v : k_affine_scales) e.bytes({v});
    e.byte_fn(128, [](int i) { return ((7 * i) % 16) * 0x11; });
    EXPECT_EQ(q, e.v);
    const auto y = dequantize(GGML_TYPE_Q4_K, q);
    // even j: 0.999755859375 l - 1.99951171875, odd j: 0.5078125 l - 1.015625 (both exact in binary32)
    EXPECT_EQ(y[1], 0.999755859375f * 7 - 1.99951171875f);
    EXPECT_EQ(y[32 + 9], 0.5078125f * 15 - 1.015625f);
}

TEST(QuantsLayout, Q5_K) {
    // L of element e = 7 (e % 32) mod 32 (a permutation of 0..31 in every sub-block): qs[i] =
    // low4(L) * 0x11, and qh[l] has bit e / 32 set for every element e = l (mod 32) whose L >= 16:
    // all eight or none, so qh[l] = 0xFF when 7 l mod 32 >= 16, else 0.
    const auto x = k_affine_input(31);
    const auto q = quantize(GGML_TYPE_Q5_K, x);
    block_bytes e;
    e.half(0x2410).half(0x2810);
    for (int v : k_affine_scales) e.bytes({v});
    e.byte_fn(32, [](int l) { return (7 * l) % 32 >= 16 ? 0xFF : 0x00; });
    e.byte_fn(128, [](int i) { return (((7 * i) % 32) & 15) * 0x11; });
    EXPECT_EQ(q, e.v);
    const auto y = dequantize(GGML_TYPE_Q5_K, q);
    EXPECT_EQ(y[3], 0.999755859375f * 21 - 1.99951171875f);
    EXPECT_EQ(y[32 + 9], 0.5078125f * 31 - 1.015625f);
}

TEST(QuantsLayout, Q2_K) {
    // Sub-block j (16 elements): x = s l - m with l = i mod 4, s = m = 1 (even j) or 0.5 (odd j). The
    // search's first candidate iscale = 3 / (3 s) fits exactly (error 0, so it is kept): scale s,
    // min m. max_scale = max_min = 1, so the 4-bit scale and min are nearest(15 s) = 15 (even) or
    // nearest(7.5) = 8 (ties to even): bytes 0xFF / 0x88. d = dmin = half(1/15) = 2^-4 (1 + 68/1024)
    // = 0x2C44 (1/15 = 2^-4 * 1.0667: mantissa 68.27 -> 68). Requantized with d * 15 = dmin * 15 =
    // 0.99976 (even) and d * 8 = dmin * 8 = 0.53320 (odd), every element gets l back; byte l of each
    // 128-element half holds elements l, l + 32, l + 64, l + 96 -> qs[i] = (i mod 4) * 0x55.
    std::vector<float> x(256);
    for (int e = 0; e < 256; e++) {
        const float s = (e / 16) % 2 ? 0.5f : 1.0f;
        x[e]          = s * (float) (e % 4) - s;
    }
    const auto q = quantize(GGML_TYPE_Q2_K, x);
    const auto e = block_bytes()
                       .byte_fn(16, [](int j) { return j % 2 ? 0x88 : 0xFF; })
                       .byte_fn(64, [](int i) { return (i % 4) * 0x55; })
                       .half(0x2C44)
                       .half(0x2C44)
                       .v;
    EXPECT_EQ(q, e);
    const auto y = dequantize(GGML_TYPE_Q2_K, q);
    // (d sc) q - dmin mn: 0.999755859375 * 3 - 0.999755859375 and 0.533203125 * 3 - 0.533203125
    EXPECT_EQ(y[3], 0.999755859375f * 3 - 0.999755859375f);
    EXPECT_EQ(y[16 + 3], 0.533203125f * 3 - 0.533203125f);
}

TEST(QuantsLayout, Q3_K) {
    // Sub-block j: x = s p[i] with p[i] = (3 i mod 8) - 4 = -4 -1 2 -3 0 3 -2 1 (twice) and s = 1 (even
    // j) or 0.5 (odd j). make_q3_quants starts at iscale = -4 / (-4 s) = 1 / s, which gives l = p and the
    // exact fit s; no single-element move improves an exact fit. max_scale = 1 (sub-block 0):
    // iscale = -32, stored scale nearest(-32 s) + 32 = 0 or 16: low nibbles all 0, top bits 1 for the
    // odd j at bits 2 (j / 4) of byte 8 + j % 4 -> bytes 9 and 11 = 0x55. d = half(-1/32) = 0xA800.
    // Requantized with d * (stored - 32) = s: L = p + 4; the high bit (L > 3, i.e. p >= 0) of element e
    // goes to bit e / 32 of hmask[e % 32]: all eight bits equal, 0xFF where p[l % 16] >= 0.
    // Crumbs (L mod 4) = 0 3 2 1 ... -> qs[i] = ((4 - i mod 4) mod 4) * 0x55.
    const int          p[8] = {-4, -1, 2, -3, 0, 3, -2, 1};
    std::vector<float> x(256);
    for (int e = 0; e < 256; e++) x[e] = (float) p[e % 8] * ((e / 16) % 2 ? 0.5f : 1.0f);
    const auto q = quantize(GGML_TYPE_Q3_K, x);
    const auto e = block_bytes()
                       .byte_fn(32, [&](int m) { return p[m % 8] >= 0 ? 0xFF : 0x00; })
                       .byte_fn(64, [](int i) { return ((4 - i % 4) % 4) * 0x55; })
                       .bytes({0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x55, 0x00, 0x55})
                       .half(0xA800)
                       .v;
    EXPECT_EQ(q, e);
    EXPECT_EQ(dequantize(GGML_TYPE_Q3_K, q), x); // (d * sc) * q = s * p exactly
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

// NaN and infinities from outside quantize without undefined behaviour (the sanitizer build runs
// this) and stay in their own block: every other block still meets its bound.
TEST(QuantsRoundTrip, NonFiniteInputsStayInTheirBlock) {
    for (ggml_type t : k_all_types) {
        const int64_t bs = ggml_blck_size(t);
        for (float bad : {NAN, INFINITY, -INFINITY}) {
            SCOPED_TRACE(std::string(ggml_type_name(t)) + " " + std::to_string(bad));
            auto x = make_row(row_kind::normal, 512, 21u);
            x[3]   = bad;
            x[bs + 5] = bad; // blocks 0 and 1 hold a non-finite value
            const auto y = dequantize(t, quantize(t, x));
            for (int64_t b = 2; b < 512 / bs; b++) {
                const double bound = roundtrip_bound(t, x.data() + b * bs, (int) bs);
                for (int64_t j = 0; j < bs; j++) {
                    ASSERT_LE(std::fabs((double) x[b * bs + j] - y[b * bs + j]), bound) << "block " << b;
                }
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

// The largest min term dmin * mn of element i's super-block (types with mins; 6-bit mins).
double k_min_term(ggml_type wt, const std::vector<uint8_t> & w, size_t i) {
    if (wt != GGML_TYPE_Q2_K && wt != GGML_TYPE_Q4_K && wt != GGML_TYPE_Q5_K) return 0;
    ggml_fp16_t dmin;
    memcpy(&dmin, w.data() + (i / 256) * ggml_type_size(wt) + (wt == GGML_TYPE_Q2_K ? 82 : 2), 2);
    return std::fabs(ggml_fp16_to_fp32(dmin)) * (wt == GGML_TYPE_Q2_K ? 15 : 63); // 4- or 6-bit mins
}

// The dot of the dequantized rows in double, and sum (|w_i| + 2 |min term_i|) |a_i|: the scale of
// the rounding error (a weight's two terms d sc q and dmin mn are rounded separately).
void dequantized_dot(ggml_type wt, const std::vector<uint8_t> & w, ggml_type at, const std::vector<uint8_t> & a,
                     double & dot, double & mag) {
    const auto wf = dequantize(wt, w);
    const auto af = dequantize(at, a);
    dot = mag = 0;
    for (size_t i = 0; i < wf.size(); i++) {
        dot += (double) wf[i] * af[i];
        mag += (std::fabs((double) wf[i]) + 2 * k_min_term(wt, w, i)) * std::fabs((double) af[i]);
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
                if (dt->vec_dot_type == GGML_TYPE_Q8_K) {
                    const block_q8_K * ab = (const block_q8_K *) a.data();
                    for (int b = 0; b < n / 256; b++) {
                        for (int g = 0; g < 16; g++) {
                            int sum = 0;
                            for (int j = 0; j < 16; j++) sum += ab[b].qs[16 * g + j];
                            ASSERT_EQ(ab[b].bsums[g], sum);
                        }
                    }
                }
                float s = NAN;
                dt->vec_dot_ref(n, &s, w.data(), a.data());
                double dot, mag;
                dequantized_dot(t, w, dt->vec_dot_type, a, dot, mag);
                // per block: integer sums exact, a few rounded products; then one float addition per
                // block; the dequantized values themselves are rounded once or twice
                const double tol = (n / 32.0 + 6) * std::ldexp(1.0, -24) * mag + q8_1_sum_error(t, w, a);
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
        // every scale field of the last block: +inf, -inf, NaN, signalling NaN
        for (size_t off : half_field_offsets(t)) {
            for (uint16_t bad : {(uint16_t) 0x7C00, (uint16_t) 0xFC00, (uint16_t) 0x7E00, (uint16_t) 0x7C01}) {
                auto c = q;
                memcpy(c.data() + c.size() - ts + off, &bad, 2);
                EXPECT_FALSE(ggml_validate_row_data(t, c.data(), c.size())) << "offset " << off << " bits " << bad;
            }
        }
        if (t == GGML_TYPE_Q8_K) {
            for (float bad : {INFINITY, -INFINITY, NAN}) {
                auto c = q;
                memcpy(c.data() + c.size() - ts, &bad, 4);
                EXPECT_FALSE(ggml_validate_row_data(t, c.data(), c.size()));
            }
        } else {
            ASSERT_FALSE(half_field_offsets(t).empty());
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

// ---------------------------------------------------------------------------------------------
// Cross-check with the Python `gguf` package

std::string python() {
    const char * p = std::getenv("SD_PYTHON");
    return p && *p ? p : "python3";
}

std::string sh_quote(const std::string & s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// Runs a shell command; its exit status and everything it printed (stdout and stderr).
int run_capture(const std::string & cmd, std::string & out) {
    FILE * f = popen((cmd + " 2>&1").c_str(), "r");
    if (!f) return -1;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    const int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void write_file(const std::string & path, const void * data, size_t n) {
    FILE * f = fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    ASSERT_EQ(fwrite(data, 1, n, f), n);
    ASSERT_EQ(fclose(f), 0);
}

TEST(QuantsPython, CrossCheckWithGguf) {
    // Without the reference implementation nothing is checked: that is a failure, not a skip
    // (scripts/install-deps.sh installs gguf; SD_PYTHON picks another interpreter).
    const std::string probe = python() + " -c 'import numpy, gguf.quants' >/dev/null 2>&1";
    ASSERT_EQ(std::system(probe.c_str()), 0)
        << python() << " lacks numpy and/or the gguf package: run scripts/install-deps.sh (or set SD_PYTHON)";

    // Every row kind, plus rows with rounding ties (Q8_0 with d = 1 sees x.5) and with values beyond
    // what a half scale holds (both sides then store infinite scales, bit for bit).
    const int          ncols = 512;
    std::vector<float> rows;
    int                nrows = 0;
    for (row_kind k : k_row_kinds) {
        for (uint32_t seed : {1u, 2u}) {
            const auto r = make_row(k, ncols, 1000u * seed + (uint32_t) k);
            rows.insert(rows.end(), r.begin(), r.end());
            nrows++;
        }
    }
    {
        std::vector<float> ties(ncols);
        for (int i = 0; i < ncols; i++) ties[i] = i % 32 == 0 ? 127.0f : (float) ((i * 13) % 255 - 127) * 0.5f;
        rows.insert(rows.end(), ties.begin(), ties.end());
        std::vector<float> over = make_row(row_kind::normal, ncols, 77u);
        for (int i = 0; i < ncols; i += 37) over[i] = (i % 2 ? -1e30f : 1e30f);
        rows.insert(rows.end(), over.begin(), over.end());
        nrows += 2;
    }

    tmp_dir_t d;
    write_file(d.file("rows.f32"), rows.data(), rows.size() * sizeof(float));
    std::string manifest = std::to_string(nrows) + " " + std::to_string(ncols) + "\n";
    for (ggml_type t : k_all_types) {
        const auto q = quantize(t, rows);
        const auto y = dequantize(t, q);
        write_file(d.file(std::string(ggml_type_name(t)) + ".bin"), q.data(), q.size());
        write_file(d.file(std::string(ggml_type_name(t)) + ".deq.f32"), y.data(), y.size() * sizeof(float));
        manifest += std::string(ggml_type_name(t)) + "\n";
    }
    write_file(d.file("manifest.txt"), manifest.data(), manifest.size());

    std::string out;
    const int   rc = run_capture(python() + " " + sh_quote(SD_QUANTS_CROSSCHECK_PY) + " " + sh_quote(d.path()), out);
    EXPECT_EQ(rc, 0) << out;
    // the summary proves the checks ran: 5 types quantized identically by gguf, 10 dequantized
    // identically by gguf, 6 K-quant types quantized identically by the numpy transcription
    EXPECT_NE(out.find("quantize-identical 5 types (q4_0 q4_1 q5_0 q5_1 q8_0)"), std::string::npos) << out;
    EXPECT_NE(out.find("dequantize-identical 10 types (q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K)"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("kquant-ref-identical 6 types (q2_K q3_K q4_K q5_K q6_K q8_K)"), std::string::npos) << out;
    std::printf("%s", out.c_str());
}

} // namespace
