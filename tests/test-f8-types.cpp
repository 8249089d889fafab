// test-f8-types.cpp — stable-diffusion.cpp's pinned-ggml FP8 types GGML_TYPE_F8_E4M3 (43) and
// GGML_TYPE_F8_E5M2 (44): enum values and traits, all 256 bit patterns of each format widened to F32
// against a reference written from the format definitions, F32 -> F8 rounding (ties to even,
// subnormals, max, overflow, NaN) against a brute-force nearest search over the 256 values, and the
// CPU ops sd.cpp runs on FP8 weights (mul_mat against a double reference, get_rows, cpy/cast),
// plus the Vulkan device declining them.

#include "ggml-impl.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

// --- reference decoders, straight from the definitions ---------------------------------------

// E4M3 (OCP "E4M3FN"): 1 sign, 4 exponent (bias 7), 3 mantissa; no infinities; S.1111.111 is NaN.
double ref_e4m3(unsigned b) {
    const int    s = (b >> 7) & 1, e = (b >> 3) & 15, m = b & 7;
    const double sign = s ? -1.0 : 1.0;
    if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
    if (e == 0) return sign * std::ldexp((double) m / 8.0, -6);
    return sign * std::ldexp(1.0 + (double) m / 8.0, e - 7);
}

// E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa; exponent 31 is inf (m = 0) or NaN.
double ref_e5m2(unsigned b) {
    const int    s = (b >> 7) & 1, e = (b >> 2) & 31, m = b & 3;
    const double sign = s ? -1.0 : 1.0;
    if (e == 31) return m == 0 ? sign * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    if (e == 0) return sign * std::ldexp((double) m / 4.0, -14);
    return sign * std::ldexp(1.0 + (double) m / 4.0, e - 15);
}

// Reference narrowing: nearest finite value of the format among all 256 codes, ties to the code
// with an even mantissa; beyond the largest finite value: E4M3 saturates, E5M2 goes to inf when
// |x| >= max + half an ulp (IEEE).
unsigned ref_encode(double x, bool e4m3) {
    auto dec          = e4m3 ? ref_e4m3 : ref_e5m2;
    const unsigned nan_code = e4m3 ? 0x7F : 0x7E;
    const double   maxv = e4m3 ? 448.0 : 57344.0;
    const unsigned sign = std::signbit(x) ? 0x80 : 0;
    if (std::isnan(x)) return sign | nan_code;
    const double a = std::fabs(x);
    if (!e4m3 && a >= 57344.0 + 4096.0) return sign | 0x7C; // ulp at the top binade is 8192
    if (a >= maxv) return sign | (e4m3 ? 0x7E : 0x7B);
    unsigned best = 0;
    double   bd   = INFINITY;
    for (unsigned c = 0; c < 128; ++c) {
        const double v = dec(c);
        if (!std::isfinite(v)) continue;
        const double d = std::fabs(v - a);
        if (d < bd || (d == bd && (c & 1) == 0)) {
            bd   = d;
            best = c;
        }
    }
    return sign | best;
}

TEST(F8, EnumAndTraits) {
    EXPECT_EQ((int) GGML_TYPE_F8_E4M3, 43);
    EXPECT_EQ((int) GGML_TYPE_F8_E5M2, 44);
    EXPECT_EQ((int) GGML_TYPE_COUNT, 45);
    EXPECT_STREQ(ggml_type_name(GGML_TYPE_F8_E4M3), "f8_e4m3");
    EXPECT_STREQ(ggml_type_name(GGML_TYPE_F8_E5M2), "f8_e5m2");
    for (ggml_type t : {GGML_TYPE_F8_E4M3, GGML_TYPE_F8_E5M2}) {
        EXPECT_EQ(ggml_blck_size(t), 1);
        EXPECT_EQ(ggml_type_size(t), 1u);
        EXPECT_EQ(ggml_row_size(t, 3072), 3072u);
        EXPECT_FALSE(ggml_is_quantized(t));
        EXPECT_NE(ggml_get_type_traits(t)->to_float, nullptr);
        EXPECT_NE(ggml_get_type_traits(t)->from_float_ref, nullptr);
    }
    // every other declared type keeps its name (no collision)
    EXPECT_STREQ(ggml_type_name(GGML_TYPE_BF16), "bf16");
    EXPECT_EQ(ggml_get_type_traits((ggml_type) 42)->type_name, nullptr); // upstream's Q2_0: not ours
}

TEST(F8, AllBitPatternsWiden) {
    for (unsigned b = 0; b < 256; ++b) {
        const double r4 = ref_e4m3(b), r5 = ref_e5m2(b);
        const float  g4 = ggml_f8_e4m3_to_fp32((uint8_t) b), g5 = ggml_f8_e5m2_to_fp32((uint8_t) b);
        if (std::isnan(r4)) {
            EXPECT_TRUE(std::isnan(g4)) << b;
        } else {
            EXPECT_EQ((double) g4, r4) << b;
            EXPECT_EQ(std::signbit(g4), std::signbit(r4)) << b; // -0 stays -0
        }
        if (std::isnan(r5)) {
            EXPECT_TRUE(std::isnan(g5)) << b;
        } else {
            EXPECT_EQ((double) g5, r5) << b;
            EXPECT_EQ(std::signbit(g5), std::signbit(r5)) << b;
        }
        // the traits' row conversion is the same table
        float y4 = 0, y5 = 0;
        const uint8_t x = (uint8_t) b;
        ggml_get_type_traits(GGML_TYPE_F8_E4M3)->to_float(&x, &y4, 1);
        ggml_get_type_traits(GGML_TYPE_F8_E5M2)->to_float(&x, &y5, 1);
        EXPECT_TRUE(std::memcmp(&y4, &g4, 4) == 0 && std::memcmp(&y5, &g5, 4) == 0) << b;
    }
    EXPECT_EQ(ggml_f8_e4m3_to_fp32(0x7E), 448.0f);
    EXPECT_EQ(ggml_f8_e4m3_to_fp32(0x01), std::ldexp(1.0f, -9));
    EXPECT_EQ(ggml_f8_e5m2_to_fp32(0x7B), 57344.0f);
    EXPECT_EQ(ggml_f8_e5m2_to_fp32(0x7C), INFINITY);
    EXPECT_EQ(ggml_f8_e5m2_to_fp32(0x01), std::ldexp(1.0f, -16));
}

TEST(F8, RoundTripEveryCode) {
    for (unsigned b = 0; b < 256; ++b) {
        const float v4 = ggml_f8_e4m3_to_fp32((uint8_t) b);
        const float v5 = ggml_f8_e5m2_to_fp32((uint8_t) b);
        if (!std::isnan(v4)) {
            EXPECT_EQ(ggml_fp32_to_f8_e4m3(v4), b) << b;
        }
        if (!std::isnan(v5)) {
            EXPECT_EQ(ggml_fp32_to_f8_e5m2(v5), b) << b;
        }
    }
}

TEST(F8, NarrowingBoundaries) {
    // every midpoint between neighbours (exact ties), and a float either side of it
    for (int fmt = 0; fmt < 2; ++fmt) {
        const bool e4 = fmt == 0;
        auto       dec = e4 ? ref_e4m3 : ref_e5m2;
        auto       enc = e4 ? ggml_fp32_to_f8_e4m3 : ggml_fp32_to_f8_e5m2;
        for (unsigned c = 0; c < 127; ++c) {
            const double lo = dec(c), hi = dec(c + 1);
            if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
            const float mid = (float) ((lo + hi) / 2); // exact: a few bits
            ASSERT_EQ((double) mid, (lo + hi) / 2);
            for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
                EXPECT_EQ(enc(x), ref_encode(x, e4)) << (e4 ? "e4m3 " : "e5m2 ") << x;
                EXPECT_EQ(enc(-x), ref_encode(-x, e4)) << (e4 ? "e4m3 " : "e5m2 ") << -x;
            }
            EXPECT_EQ(enc(mid), (c & 1) ? c + 1 : c) << "tie goes to the even code " << mid;
        }
    }
    // E4M3: subnormals, max, saturation, NaN
    EXPECT_EQ(ggml_fp32_to_f8_e4m3(std::ldexp(1.0f, -10)), 0x00);          // half the smallest: tie to 0
    EXPECT_EQ(ggml_fp32_to_f8_e4m3(std::ldexp(1.5f, -10)), 0x01);
    EXPECT_EQ(ggml_fp32_to_f8_e4m3(std::ldexp(3.0f, -10)), 0x02);          // 1.5 * 2^-9: tie to even (2)
    EXPECT_EQ(ggml_fp32_to_f8_e4m3(std::ldexp(15.0f, -10)), 0x08);         // 7.5 * 2^-9 -> min normal
    EXPECT_EQ(ggml_fp32_to_f8_e4m3(1e-30f), 0x00);
    EXPECT_EQ(ggml_fp32_to_f8_e4m3(-1e-30f), 0x80);
    EXPECT_EQ(ggml_fp32_to_f8_e4m3(-0.0f), 0x80);
    EXPECT_EQ(ggml_fp32_to_f8_e4m3(448.0f), 0x7E);
    EXPECT_EQ(ggml_fp32_to_f8_e4m3(464.0f), 0x7E);
    EXPECT_EQ(ggml_fp32_to_f8_e4m3(500.0f), 0x7E);
    EXPECT_EQ(ggml_fp32_to_f8_e4m3(1e30f), 0x7E);
    EXPECT_EQ(ggml_fp32_to_f8_e4m3(-1e30f), 0xFE);
    EXPECT_EQ(ggml_fp32_to_f8_e4m3(INFINITY), 0x7E);
    EXPECT_EQ(ggml_fp32_to_f8_e4m3(-INFINITY), 0xFE);
    EXPECT_EQ(ggml_fp32_to_f8_e4m3(NAN), 0x7F);
    EXPECT_EQ(ggml_fp32_to_f8_e4m3(-NAN), 0xFF);
    // E5M2: subnormals, max, overflow to inf, NaN
    EXPECT_EQ(ggml_fp32_to_f8_e5m2(std::ldexp(1.0f, -17)), 0x00);
    EXPECT_EQ(ggml_fp32_to_f8_e5m2(std::ldexp(3.0f, -17)), 0x02);
    EXPECT_EQ(ggml_fp32_to_f8_e5m2(57344.0f), 0x7B);
    EXPECT_EQ(ggml_fp32_to_f8_e5m2(61439.0f), 0x7B);
    EXPECT_EQ(ggml_fp32_to_f8_e5m2(61440.0f), 0x7C); // tie with 2^16 rounds to even: inf
    EXPECT_EQ(ggml_fp32_to_f8_e5m2(-1e30f), 0xFC);
    EXPECT_EQ(ggml_fp32_to_f8_e5m2(INFINITY), 0x7C);
    EXPECT_EQ(ggml_fp32_to_f8_e5m2(NAN), 0x7E);
    EXPECT_EQ(ggml_fp32_to_f8_e5m2(-NAN), 0xFE);

    // random floats over the whole range against the brute-force reference
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> ex(-24.0f, 18.0f);
    for (int i = 0; i < 200000; ++i) {
        const float x = (rng() & 1 ? -1.0f : 1.0f) * std::exp2(ex(rng));
        ASSERT_EQ(ggml_fp32_to_f8_e4m3(x), ref_encode(x, true)) << x;
        ASSERT_EQ(ggml_fp32_to_f8_e5m2(x), ref_encode(x, false)) << x;
    }
    // the traits' narrowing and ggml_quantize_chunk agree with the scalar one
    const float xs[5] = {0.1f, -3.3f, 1000.0f, 1e-5f, 300.0f};
    for (ggml_type t : {GGML_TYPE_F8_E4M3, GGML_TYPE_F8_E5M2}) {
        uint8_t a[5], q[5];
        ggml_get_type_traits(t)->from_float_ref(xs, a, 5);
        EXPECT_EQ(ggml_quantize_chunk(t, xs, q, 0, 1, 5, nullptr), 5u);
        for (int i = 0; i < 5; ++i) {
            const uint8_t want = t == GGML_TYPE_F8_E4M3 ? ggml_fp32_to_f8_e4m3(xs[i]) : ggml_fp32_to_f8_e5m2(xs[i]);
            EXPECT_EQ(a[i], want);
            EXPECT_EQ(q[i], want);
        }
    }
}

TEST(F8, ValidateRowData) {
    const uint8_t ok[3] = {0x00, 0x7E, 0x81};
    EXPECT_TRUE(ggml_validate_row_data(GGML_TYPE_F8_E4M3, ok, 3));
    const uint8_t nan4[2] = {0x10, 0xFF};
    EXPECT_FALSE(ggml_validate_row_data(GGML_TYPE_F8_E4M3, nan4, 2));
    const uint8_t inf5[2] = {0x10, 0x7C};
    EXPECT_FALSE(ggml_validate_row_data(GGML_TYPE_F8_E5M2, inf5, 2));
    const uint8_t ok5[3] = {0x00, 0x7B, 0x81}; // 0x7E is an E5M2 NaN
    EXPECT_TRUE(ggml_validate_row_data(GGML_TYPE_F8_E5M2, ok5, 3));
}

// --- CPU ops ------------------------------------------------------------------------------------

struct cpu_graph {
    ggml_context * ctx = nullptr;
    explicit cpu_graph(size_t mb = 256) {
        ggml_init_params p = {mb << 20, nullptr, false};
        ctx                = ggml_init(p);
    }
    ~cpu_graph() { ggml_free(ctx); }
    void run(ggml_tensor * out, int n_threads = 2) {
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
        ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, n_threads), GGML_STATUS_SUCCESS);
    }
};

// supports_op of the CPU device for a node (the scheduler's question)
bool ggml_cpu_supports_op_for_test_or_true(const ggml_tensor * node) {
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    return cpu == nullptr || ggml_backend_dev_supports_op(cpu, node);
}

std::vector<uint8_t> random_f8(int64_t n, std::mt19937 & rng, bool e4m3) {
    std::vector<uint8_t> v((size_t) n);
    for (auto & b : v) {
        for (;;) {
            b = (uint8_t) (rng() & 0xFF);
            const float f = e4m3 ? ggml_f8_e4m3_to_fp32(b) : ggml_f8_e5m2_to_fp32(b);
            if (std::isfinite(f) && std::fabs(f) <= 16.0f) break; // keep sums well scaled
        }
    }
    return v;
}

void check_mul_mat(ggml_type t, int64_t K, int64_t N, int64_t M, int64_t B2, int64_t A2) {
    SCOPED_TRACE(testing::Message() << ggml_type_name(t) << " K=" << K << " N=" << N << " M=" << M << " B2=" << B2
                                    << " A2=" << A2);
    std::mt19937 rng((unsigned) (K * 31 + N * 7 + M + t));
    cpu_graph    g;
    ggml_tensor * a = ggml_new_tensor_3d(g.ctx, t, K, N, A2);
    ggml_tensor * b = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, K, M, B2);
    const bool    e4 = t == GGML_TYPE_F8_E4M3;
    std::vector<uint8_t> wa = random_f8(K * N * A2, rng, e4);
    memcpy(a->data, wa.data(), wa.size());
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    float * bd = (float *) b->data;
    for (int64_t i = 0; i < K * M * B2; ++i) bd[i] = u(rng);
    ggml_tensor * c = ggml_mul_mat(g.ctx, a, b);
    ASSERT_TRUE(ggml_cpu_supports_op_for_test_or_true(c));
    g.run(c);
    const float * cd = (const float *) c->data;
    for (int64_t i2 = 0; i2 < B2; ++i2) {
        const int64_t ia2 = i2 / (B2 / A2);
        for (int64_t m = 0; m < M; ++m) {
            for (int64_t n = 0; n < N; ++n) {
                double ref = 0, mag = 0;
                for (int64_t k = 0; k < K; ++k) {
                    const uint8_t w = wa[(size_t) ((ia2 * N + n) * K + k)];
                    const double  wv = e4 ? ref_e4m3(w) : ref_e5m2(w);
                    const double  x  = bd[(i2 * M + m) * K + k];
                    ref += wv * x;
                    mag += std::fabs(wv * x);
                }
                const double got = cd[(i2 * M + m) * N + n];
                // F32 accumulation of K exact products: bound by K * eps * sum |products|
                ASSERT_NEAR(got, ref, 1e-6 + (double) K * 1.2e-7 * mag) << "n=" << n << " m=" << m << " i2=" << i2;
            }
        }
    }
}

TEST(F8, MulMatOddShapes) {
    for (ggml_type t : {GGML_TYPE_F8_E4M3, GGML_TYPE_F8_E5M2}) {
        check_mul_mat(t, 1, 1, 1, 1, 1);
        check_mul_mat(t, 7, 5, 3, 1, 1);
        check_mul_mat(t, 257, 19, 13, 2, 1); // K past one chunk, broadcast over dim 2
        check_mul_mat(t, 33, 17, 70, 3, 3);
        check_mul_mat(t, 3072, 9, 5, 1, 1);  // sd.cpp's hidden size
    }
}

TEST(F8, MulMatF16Activations) {
    // src1 F16 (sd.cpp casts activations at times): widened exactly, same result as F32 src1
    cpu_graph     g;
    std::mt19937  rng(3);
    const int64_t K = 40, N = 6, M = 4;
    ggml_tensor * a   = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F8_E4M3, K, N);
    ggml_tensor * b16 = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F16, K, M);
    ggml_tensor * b32 = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, K, M);
    std::vector<uint8_t> wa = random_f8(K * N, rng, true);
    memcpy(a->data, wa.data(), wa.size());
    for (int64_t i = 0; i < K * M; ++i) {
        const ggml_fp16_t h = ggml_fp32_to_fp16((float) (int) (rng() % 200) / 64.0f - 1.5f);
        ((ggml_fp16_t *) b16->data)[i] = h;
        ((float *) b32->data)[i]       = ggml_fp16_to_fp32(h);
    }
    ggml_tensor * c16 = ggml_mul_mat(g.ctx, a, b16);
    ggml_tensor * c32 = ggml_mul_mat(g.ctx, a, b32);
    g.run(c16);
    g.run(c32);
    EXPECT_EQ(memcmp(c16->data, c32->data, ggml_nbytes(c32)), 0);
}

TEST(F8, GetRowsAndCpy) {
    for (ggml_type t : {GGML_TYPE_F8_E4M3, GGML_TYPE_F8_E5M2}) {
        const bool e4 = t == GGML_TYPE_F8_E4M3;
        auto       dec = [&](uint8_t b) { return e4 ? ggml_f8_e4m3_to_fp32(b) : ggml_f8_e5m2_to_fp32(b); };
        cpu_graph  g;
        const int64_t ne0 = 37, nrows = 11;
        ggml_tensor * a = ggml_new_tensor_2d(g.ctx, t, ne0, nrows);
        for (int64_t i = 0; i < ne0 * nrows; ++i) ((uint8_t *) a->data)[i] = (uint8_t) (i * 7 + 3);
        // NaN patterns included: they must come through as NaN (get_rows/cpy do no arithmetic)
        ggml_tensor * idx = ggml_new_tensor_1d(g.ctx, GGML_TYPE_I32, 4);
        const int32_t rows[4] = {10, 0, 3, 3};
        memcpy(idx->data, rows, sizeof(rows));
        ggml_tensor * gr = ggml_get_rows(g.ctx, a, idx);
        ASSERT_EQ(gr->type, GGML_TYPE_F32);
        g.run(gr);
        for (int r = 0; r < 4; ++r) {
            for (int64_t i = 0; i < ne0; ++i) {
                const float want = dec(((uint8_t *) a->data)[rows[r] * ne0 + i]);
                const float got  = ((float *) gr->data)[r * ne0 + i];
                if (std::isnan(want)) {
                    EXPECT_TRUE(std::isnan(got));
                } else {
                    EXPECT_EQ(got, want) << r << "," << i;
                }
            }
        }
        // cpy / cast to F32, F16, BF16 (what sd.cpp does when the backend lacks an FP8 mul_mat)
        for (ggml_type dt : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16}) {
            ggml_tensor * c = ggml_cast(g.ctx, a, dt);
            ASSERT_TRUE(ggml_cpu_supports_op_for_test_or_true(c));
            g.run(c);
            for (int64_t i = 0; i < ne0 * nrows; ++i) {
                const float want = dec(((uint8_t *) a->data)[i]);
                float       got  = 0;
                if (dt == GGML_TYPE_F32) got = ((float *) c->data)[i];
                if (dt == GGML_TYPE_F16) got = ggml_fp16_to_fp32(((ggml_fp16_t *) c->data)[i]);
                if (dt == GGML_TYPE_BF16) got = ggml_bf16_to_fp32(((ggml_bf16_t *) c->data)[i]);
                if (std::isnan(want)) {
                    EXPECT_TRUE(std::isnan(got));
                } else {
                    EXPECT_EQ(got, want) << ggml_type_name(dt) << " " << i; // every F8 value is exact in F16/BF16
                }
            }
        }
        // F32 -> F8 cpy (non-contiguous source: a transposed view) rounds like the scalar conversion
        ggml_tensor * f = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 5, 3);
        for (int i = 0; i < 15; ++i) ((float *) f->data)[i] = (float) (i - 7) * 0.37f + 0.001f * i;
        ggml_tensor * ft  = ggml_transpose(g.ctx, f);
        ggml_tensor * dst = ggml_new_tensor_2d(g.ctx, t, 3, 5);
        ggml_tensor * cp  = ggml_cpy(g.ctx, ft, dst);
        ASSERT_TRUE(ggml_cpu_supports_op_for_test_or_true(cp));
        g.run(cp);
        for (int i0 = 0; i0 < 3; ++i0) {
            for (int i1 = 0; i1 < 5; ++i1) {
                const float   x    = ((float *) f->data)[i0 * 5 + i1];
                const uint8_t want = e4 ? ggml_fp32_to_f8_e4m3(x) : ggml_fp32_to_f8_e5m2(x);
                EXPECT_EQ(((uint8_t *) dst->data)[i1 * 3 + i0], want);
            }
        }
    }
}

TEST(F8, OtherBackendsDecline) {
    // every non-CPU device (Vulkan) must say no, so the scheduler keeps FP8 nodes on the CPU
    ggml_init_params p = {16 << 20, nullptr, true};
    ggml_context * c   = ggml_init(p);
    ggml_tensor * a    = ggml_new_tensor_2d(c, GGML_TYPE_F8_E4M3, 64, 8);
    ggml_tensor * b    = ggml_new_tensor_2d(c, GGML_TYPE_F32, 64, 4);
    ggml_tensor * idx  = ggml_new_tensor_1d(c, GGML_TYPE_I32, 2);
    ggml_tensor * nodes[3] = {ggml_mul_mat(c, a, b), ggml_get_rows(c, a, idx), ggml_cast(c, a, GGML_TYPE_F32)};
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t d = ggml_backend_dev_get(i);
        for (ggml_tensor * n : nodes) {
            const bool cpu = ggml_backend_dev_type(d) == GGML_BACKEND_DEVICE_TYPE_CPU;
            EXPECT_EQ(ggml_backend_dev_supports_op(d, n), cpu) << ggml_backend_dev_name(d) << " " << ggml_op_name(n->op);
        }
    }
    ggml_free(c);
}

} // namespace
