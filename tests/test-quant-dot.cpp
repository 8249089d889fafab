// The fast quantized dot-product tiles (ggml/src/ggml-cpu/quant-dot-fast.h: AVX2, AVX512-VNNI;
// AArch64 NEON, SDOT, SMMLA)
// against the reference vec_dot_ref (ggml/src/formats/ggml-quants.h), directly on blocks, for every type
// with a fast kernel: Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, Q4_K, Q5_K, Q6_K. Every check runs once per
// instruction-set level this CPU can run (tests/support/isa_levels.h); a level without a tile for
// the type (portable) is reported as skipped.
//
// Both compute the same integer sums per block; they differ only in the order of the F32 scaling
// and summation. Bounds:
//   - adversarial blocks whose scales are 1 (or small integers) and whose partial sums stay below
//     2^24: every F32 operation is exact, so fast == ref bit for bit. These blocks put the extreme
//     quants (15 / 31 / 63 / -128, activations -128 and 127) into every lane, where a kernel that
//     keeps int16 intermediates (vpdpwssd) would overflow if its bound were wrong.
//   - random blocks (random bits for quants and scales, random F16 scales, activations from the
//     reference quantizer): |fast - ref| <= (n_blocks + 16) * 2^-23 * S, where S = sum over elements
//     of (|w_k| + 2 |dmin m|) * |a_k| in double (w, a dequantized; dmin m the sub-block's min
//     offset, m the block's for Q4_1 / Q5_1, 0 for the symmetric types): each of the two results is an F32 sum of at most
//     n_blocks + 16 terms whose magnitudes add up to at most S, so each is within (n + 16) u S of
//     the exact value (u = 2^-24).
// Several row and column counts cover full and exact-size edge tiles (micro-tiles of 2 x 8 and 4 x 4
// with AVX-512; 2 x 4 and 1 x 8 with AVX2; 2 x 4 NEON, 4 x 4 SDOT, 4 x 4 SMMLA in row and column
// pairs whose odd member repeats, one column on SDOT), and rows as long as the DiT linears' (K up
// to 16384).
// The AVX2 Q8_0 tile multiplies |w| by sign(a, w) with vpmaddubsw, exact only without -128
// activations; the extreme blocks (activations -128, weights -128) check both that path and the
// exact one it switches to.
//
// The AVX2, AVX-512 and NEON activation quantizers (quant-act-fast.h) must write the reference quantizers' bytes for
// every input: random rows over many magnitudes and rows built to hit each rounding rule (ties at
// .5, products just below .5, the clamp, NaN / Inf, zeros, repeated maxima of both signs).

#include "formats/ggml-common.h"
#include "ggml-cpu/quant-act-fast.h"
#include "ggml-cpu/quant-dot-fast.h"
#include "formats/ggml-quants.h"
#include "support/isa_levels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

const ggml_type k_fast_types[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q5_0, GGML_TYPE_Q4_1,
                                  GGML_TYPE_Q5_1, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};

bool affine_32(ggml_type t) { return t == GGML_TYPE_Q4_1 || t == GGML_TYPE_Q5_1; }

uint16_t f16_bits(float f) { return ggml_fp32_to_fp16(f); }

struct operands {
    ggml_type            type;
    int64_t              K;
    int                  nr, nc;
    size_t               ws, xs;
    std::vector<uint8_t> w, x; // nr weight rows, nc activation rows (vec_dot_type blocks)
};

// Sets the F16 scales of every weight block to sane random values (random bits could be NaN/Inf,
// which no quantizer writes; the dot product of such a block is NaN either way).
void set_weight_scales(ggml_type t, uint8_t * row, int64_t nblk, std::mt19937 & rng, bool unit) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    auto                                  pick = [&] { return unit ? (uint16_t) 0x3C00 : f16_bits(u(rng)); };
    for (int64_t b = 0; b < nblk; ++b) {
        switch (t) {
            case GGML_TYPE_Q8_0: ((block_q8_0 *) row)[b].d = pick(); break;
            case GGML_TYPE_Q4_0: ((block_q4_0 *) row)[b].d = pick(); break;
            case GGML_TYPE_Q5_0: ((block_q5_0 *) row)[b].d = pick(); break;
            case GGML_TYPE_Q4_1: ((block_q4_1 *) row)[b].d = pick(); ((block_q4_1 *) row)[b].m = pick(); break;
            case GGML_TYPE_Q5_1: ((block_q5_1 *) row)[b].d = pick(); ((block_q5_1 *) row)[b].m = pick(); break;
            case GGML_TYPE_Q4_K: ((block_q4_K *) row)[b].d = pick(); ((block_q4_K *) row)[b].dmin = pick(); break;
            case GGML_TYPE_Q5_K: ((block_q5_K *) row)[b].d = pick(); ((block_q5_K *) row)[b].dmin = pick(); break;
            case GGML_TYPE_Q6_K: ((block_q6_K *) row)[b].d = pick(); break;
            default: FAIL() << "no fast kernel type";
        }
    }
}

operands make(ggml_type t, int64_t K, int nr, int nc) {
    const ggml_quant_dot_traits * tr = ggml_get_quant_dot_traits(t);
    operands                      o;
    o.type = t;
    o.K    = K;
    o.nr   = nr;
    o.nc   = nc;
    o.ws   = ggml_row_size(t, K);
    o.xs   = ggml_row_size(tr->vec_dot_type, K);
    o.w.assign(o.ws * nr, 0);
    o.x.assign(o.xs * nc, 0);
    return o;
}

// Random weights (random bits, sane scales) and activations quantized by the reference quantizer
// from floats with a per-row dynamic range between 1e-3 and 1e3.
operands random_operands(ggml_type t, int64_t K, int nr, int nc, std::mt19937 & rng) {
    operands o = make(t, K, nr, nc);
    for (uint8_t & b : o.w) b = (uint8_t) rng();
    const int64_t nblk = K / ggml_blck_size(t);
    for (int r = 0; r < nr; ++r) set_weight_scales(t, o.w.data() + r * o.ws, nblk, rng, false);
    const ggml_quant_dot_traits *         tr = ggml_get_quant_dot_traits(t);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f), e(-3.0f, 3.0f);
    std::vector<float>                    row(K);
    for (int c = 0; c < nc; ++c) {
        const float range = std::pow(10.0f, e(rng));
        for (float & v : row) v = u(rng) * range;
        tr->quantize_act(row.data(), o.x.data() + c * o.xs, K);
    }
    return o;
}

// Activation blocks built directly: every quant `q` (or alternating q / -q-1 when alt), scale 1.
void fill_activations(operands & o, int q, bool alt) {
    const ggml_quant_dot_traits * tr = ggml_get_quant_dot_traits(o.type);
    for (int c = 0; c < o.nc; ++c) {
        uint8_t * row = o.x.data() + c * o.xs;
        if (tr->vec_dot_type == GGML_TYPE_Q8_0) {
            block_q8_0 * b = (block_q8_0 *) row;
            for (int64_t i = 0; i < o.K / QK8_0; ++i) {
                b[i].d = 0x3C00;
                for (int j = 0; j < QK8_0; ++j) b[i].qs[j] = (int8_t) (alt && (j + c) % 2 ? -q - 1 : q);
            }
        } else if (tr->vec_dot_type == GGML_TYPE_Q8_1) {
            block_q8_1 * b = (block_q8_1 *) row;
            for (int64_t i = 0; i < o.K / QK8_1; ++i) {
                b[i].d = 0x3C00;
                int s  = 0;
                for (int j = 0; j < QK8_1; ++j) {
                    b[i].qs[j] = (int8_t) (alt && (j + c) % 2 ? -q - 1 : q);
                    s += b[i].qs[j];
                }
                b[i].s = f16_bits((float) s); // |s| <= 4096 and even or small: exact in F16
            }
        } else {
            ASSERT_EQ(tr->vec_dot_type, GGML_TYPE_Q8_K);
            block_q8_K * b = (block_q8_K *) row;
            for (int64_t i = 0; i < o.K / QK_K; ++i) {
                b[i].d = 1.0f;
                for (int j = 0; j < QK_K; ++j) b[i].qs[j] = (int8_t) (alt && (j + c) % 2 ? -q - 1 : q);
                for (int g = 0; g < QK_K / 16; ++g) {
                    int s = 0;
                    for (int j = 0; j < 16; ++j) s += b[i].qs[16 * g + j];
                    b[i].bsums[g] = (int16_t) s;
                }
            }
        }
    }
}

// Weight blocks with every quant at its maximum (or at pattern byte `fillb`), every sub-block scale
// (and min) at `sc`, F16 scales 1.
void fill_weights(operands & o, uint8_t fillb, int sc, int mn) {
    std::mt19937  rng(1);
    const int64_t nblk = o.K / ggml_blck_size(o.type);
    for (int r = 0; r < o.nr; ++r) {
        uint8_t * row = o.w.data() + r * o.ws;
        memset(row, fillb, o.ws);
        for (int64_t i = 0; i < nblk; ++i) {
            if (o.type == GGML_TYPE_Q4_K || o.type == GGML_TYPE_Q5_K) {
                uint8_t * s = o.type == GGML_TYPE_Q4_K ? ((block_q4_K *) row)[i].scales : ((block_q5_K *) row)[i].scales;
                // 6-bit sc / m for sub-blocks 0-3 in bytes 0-3 / 4-7; sub-blocks 4-7 split (ggml-common.h)
                for (int j = 0; j < 4; ++j) {
                    s[j]     = (uint8_t) ((sc & 63) | ((sc >> 4) << 6));
                    s[j + 4] = (uint8_t) ((mn & 63) | ((mn >> 4) << 6));
                    s[j + 8] = (uint8_t) ((sc & 15) | ((mn & 15) << 4));
                }
            } else if (o.type == GGML_TYPE_Q6_K) {
                // mixed signs that do not cancel over the super-block (the -32 offset term must show)
                for (int j = 0; j < QK_K / 16; ++j) ((block_q6_K *) row)[i].scales[j] = (int8_t) (j % 3 ? sc : -sc);
            }
        }
        set_weight_scales(o.type, row, nblk, rng, true);
    }
}

// The fast tile on the operands, activation rows repacked first when the kernel has its own
// layout (as ops-mul-mat-quant.cpp does).
std::vector<float> run_fast(const operands & o) {
    const ggml_quant_dot_fast * f = ggml_cpu_quant_dot_fast(o.type);
    std::vector<float>          out((size_t) o.nr * o.nc, NAN);
    const char *                x  = (const char *) o.x.data();
    size_t                      xs = o.xs;
    std::vector<uint8_t>        packed;
    if (f->act_repack) {
        xs = (f->act_row_bytes(o.K) + 63) / 64 * 64;
        packed.assign(xs * o.nc + 64, 0xA5); // poison: the tile must read only what the repack wrote
        char * base = (char *) (((uintptr_t) packed.data() + 63) & ~(uintptr_t) 63);
        for (int c = 0; c < o.nc; ++c) f->act_repack(o.x.data() + c * o.xs, base + c * xs, o.K);
        x = base;
    }
    f->tile(o.K, (const char *) o.w.data(), o.ws, o.nr, x, xs, o.nc, out.data(), (size_t) o.nr);
    return out;
}

float run_ref(const operands & o, int r, int c) {
    float s = NAN;
    ggml_get_quant_dot_traits(o.type)->vec_dot_ref(o.K, &s, o.w.data() + r * o.ws, o.x.data() + c * o.xs);
    return s;
}

// S of the bound (see the top of the file)
double magnitude(const operands & o, int r, int c) {
    const ggml_quant_dot_traits * tr = ggml_get_quant_dot_traits(o.type);
    std::vector<float>            w(o.K), a(o.K), off(o.K, 0.0f);
    ggml_get_type_traits(o.type)->to_float(o.w.data() + r * o.ws, w.data(), o.K);
    ggml_get_type_traits(tr->vec_dot_type)->to_float(o.x.data() + c * o.xs, a.data(), o.K);
    if (affine_32(o.type)) {
        // the same row with d = 0 dequantizes to each block's m
        std::vector<uint8_t> z(o.w.begin() + r * o.ws, o.w.begin() + (r + 1) * o.ws);
        for (int64_t i = 0; i < o.K / 32; ++i) {
            if (o.type == GGML_TYPE_Q4_1) ((block_q4_1 *) z.data())[i].d = 0; else ((block_q5_1 *) z.data())[i].d = 0;
        }
        ggml_get_type_traits(o.type)->to_float(z.data(), off.data(), o.K);
    }
    if (o.type == GGML_TYPE_Q4_K || o.type == GGML_TYPE_Q5_K) {
        // the same row with d = 0 dequantizes to -dmin * m of each element's sub-block
        std::vector<uint8_t> z(o.w.begin() + r * o.ws, o.w.begin() + (r + 1) * o.ws);
        for (int64_t i = 0; i < o.K / QK_K; ++i) {
            if (o.type == GGML_TYPE_Q4_K) ((block_q4_K *) z.data())[i].d = 0; else ((block_q5_K *) z.data())[i].d = 0;
        }
        ggml_get_type_traits(o.type)->to_float(z.data(), off.data(), o.K);
    }
    double s = 0;
    for (int64_t k = 0; k < o.K; ++k) s += (std::fabs((double) w[k]) + 2 * std::fabs((double) off[k])) * std::fabs((double) a[k]);
    return s;
}

class QuantDot : public ::testing::TestWithParam<ggml_type> {
protected:
    void SetUp() override {
        const ggml_quant_dot_traits * tr = ggml_get_quant_dot_traits(GetParam());
        ASSERT_TRUE(tr && tr->vec_dot_ref && tr->quantize_act) << "no reference dot product for " << ggml_type_name(GetParam());
    }
};

// Runs check() once per level this CPU can run that has a tile for `t` (capped at that level); the
// tile must be that level's (its name starts with the level's: "avx2 q8_0", "avx512 vnni q8_0"),
// except that an AVX-512 CPU without VNNI runs the AVX2 tiles. Returns the levels checked.
template <class F> int for_each_tile_level(ggml_type t, F check) {
    int n = 0;
    for (const std::string & lv : test_isa::runnable_levels()) {
        test_isa::scoped_cap        cap(lv.c_str());
        const ggml_quant_dot_fast * f = ggml_cpu_quant_dot_fast(t);
        if (!f) {
            printf("[ isa      ] %s: level %s has no tile (the portable path; test-backend-ops checks it)\n", ggml_type_name(t),
                   lv.c_str());
            EXPECT_TRUE(lv == "portable") << "level " << lv << " has no " << ggml_type_name(t) << " tile";
            continue;
        }
        const std::string name = f->name;
        EXPECT_TRUE(name.rfind(lv + " ", 0) == 0 || (lv != "portable" && name.rfind("avx2 ", 0) == 0))
            << "level " << lv << " runs '" << name << "'";
        SCOPED_TRACE("isa " + lv + ", kernel " + name);
        check();
        ++n;
    }
    test_isa::note_skipped_levels();
    return n;
}

// |fast - ref| within the bound for every output of o
void expect_within_bound(const operands & o, const std::vector<float> & got, int & checked) {
    const int64_t blk = ggml_blck_size(o.type);
    const int64_t nb  = o.K / blk;
    for (int c = 0; c < o.nc; ++c) {
        for (int r = 0; r < o.nr; ++r) {
            const double ref   = run_ref(o, r, c);
            const double bound = (double) (nb * (blk / 32) + 16) * 0x1p-23 * magnitude(o, r, c);
            ASSERT_LE(std::fabs(got[c * o.nr + r] - ref), bound)
                << ggml_type_name(o.type) << " K " << o.K << " rows " << o.nr << " cols " << o.nc << " at (" << r << ", " << c
                << "): fast " << got[c * o.nr + r] << " ref " << ref;
            ++checked;
        }
    }
}

TEST_P(QuantDot, random_blocks_within_the_summation_bound) {
    const ggml_type t = GetParam();
    for_each_tile_level(t, [&] {
        const int64_t blk = ggml_blck_size(t);
        std::mt19937  rng(1234 + (int) t);
        int           checked = 0;
        for (int64_t nb : {1, 2, 3, 5, 12, 16}) {
            for (int nr : {1, 3, 4, 6, 9}) {
                for (int nc : {1, 2, 4, 5, 8, 11, 17}) {
                    const operands o = random_operands(t, nb * blk, nr, nc, rng);
                    expect_within_bound(o, run_fast(o), checked);
                    if (::testing::Test::HasFatalFailure()) return;
                }
            }
        }
        EXPECT_GT(checked, 1000);
    });
}

// Rows as long as the DiT linears' (K 3072 / 12288 / 16384), a few rows and columns (edge tiles)
TEST_P(QuantDot, long_rows_within_the_summation_bound) {
    const ggml_type t = GetParam();
    for_each_tile_level(t, [&] {
        std::mt19937 rng(99 + (int) t);
        int          checked = 0;
        for (int64_t K : {3072, 12288, 16384}) {
            const operands o = random_operands(t, K, 3, 9, rng);
            expect_within_bound(o, run_fast(o), checked);
        }
        EXPECT_EQ(checked, 3 * 27);
    });
}

void extreme_quants(ggml_type t) {
    const int64_t   blk = ggml_blck_size(t);
    // quant byte patterns: all bits set (q = 15 / 31 / 63; Q8_0: -1), 0x7F / 0x80 (Q8_0 +127 / -128)
    for (uint8_t fillb : {(uint8_t) 0xFF, (uint8_t) 0x7F, (uint8_t) 0x80, (uint8_t) 0x00}) {
        for (int q : {-128, 127, 1}) {
            for (bool alt : {false, true}) {
                // scales 1 with extreme quants; extreme scales (63 / Q6_K +-127) with activations +-1
                const bool big_sc = q == 1;
                const int  sc     = big_sc ? (t == GGML_TYPE_Q6_K ? 127 : 63) : 1;
                operands   o      = make(t, (blk == 32 ? 16 : 2) * blk, 5, 9);
                fill_weights(o, fillb, sc, sc);
                fill_activations(o, q, alt);
                if (q == 127) {
                    // one -128 in column 4 only: tiles holding that column and tiles without it side by side
                    // (the AVX2 Q8_0 tile switches only the former to its exact path)
                    const ggml_type vt = ggml_get_quant_dot_traits(t)->vec_dot_type;
                    uint8_t *       c4 = o.x.data() + 4 * o.xs;
                    const size_t    at = vt == GGML_TYPE_Q8_K ? offsetof(block_q8_K, qs) + 7 : 2 + 7; // d precedes qs
                    ASSERT_EQ((int8_t) c4[at], alt ? (int8_t) -128 : (int8_t) 127);
                    c4[at] = 0x80;
                    // the reference may sum the quants itself: keep bsums true (Q8_1's s is read by both as stored)
                    if (vt == GGML_TYPE_Q8_K && !alt) ((block_q8_K *) c4)->bsums[0] = (int16_t) (((block_q8_K *) c4)->bsums[0] - 255);
                }
                const std::vector<float> got = run_fast(o);
                for (int c = 0; c < o.nc; ++c) {
                    for (int r = 0; r < o.nr; ++r) {
                        EXPECT_EQ(got[c * o.nr + r], run_ref(o, r, c))
                            << ggml_type_name(t) << " fill " << (int) fillb << " q " << q << " alt " << alt << " at (" << r
                            << ", " << c << ")";
                    }
                }
            }
        }
    }
}

TEST_P(QuantDot, extreme_quants_are_exact) {
    const ggml_type t = GetParam();
    for_each_tile_level(t, [&] { extreme_quants(t); });
}

// Rows that hit each rule of the quantizers, then random rows.
std::vector<std::vector<float>> quantizer_rows(int64_t K) {
    std::vector<std::vector<float>> rows;
    std::mt19937                    rng(77);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f), e(-30.0f, 30.0f);
    auto row = [&](auto f) {
        std::vector<float> r(K);
        for (int64_t i = 0; i < K; ++i) r[i] = f(i);
        rows.push_back(r);
    };
    row([](int64_t) { return 0.0f; });
    row([](int64_t i) { return i % 2 ? -0.0f : 0.0f; });
    // ties: with amax 127 the scale is 1, so products are the values: k + .5 exactly
    row([](int64_t i) { return i % 32 == 0 ? 127.0f : (float) (i % 17) - 8.5f; });
    row([](int64_t i) { return i % 32 == 0 ? -127.0f : std::nextafter((float) (i % 9) + 0.5f, 0.0f); });
    // repeated maxima of both signs (Q8_K takes the first, with its sign)
    row([](int64_t i) { return i % 5 == 0 ? (i % 2 ? 3.0f : -3.0f) : 0.25f * (float) (i % 7); });
    row([](int64_t i) { return i % 64 == 3 ? -1e30f : (float) i; });
    // non-finite values
    row([](int64_t i) { return i % 11 == 0 ? NAN : 0.1f * (float) (i % 13); });
    row([](int64_t i) { return i % 37 == 1 ? INFINITY : (i % 41 == 2 ? -INFINITY : 1.0f); });
    row([](int64_t) { return NAN; });
    // signalling NaNs (a NaN-ignoring max built on FMAXNM would return NaN for them) and an Inf maximum
    row([](int64_t i) { return i % 7 == 0 ? std::numeric_limits<float>::signaling_NaN() : 0.5f * (float) (i % 9) - 2.0f; });
    row([](int64_t i) { return i % 64 == 5 ? -INFINITY : 0.3f * (float) (i % 11); });
    // tiny and subnormal magnitudes (scales that underflow or whose inverse overflows)
    row([](int64_t i) { return 1e-40f * (float) ((i % 5) - 2); });
    row([](int64_t i) { return 1e-38f * (float) ((i % 3) - 1); });
    for (int n = 0; n < 40; ++n) {
        const float range = std::pow(10.0f, e(rng));
        row([&](int64_t) { return u(rng) * range; });
    }
    return rows;
}

TEST(QuantAct, fast_quantizers_write_the_reference_bytes) {
    int levels = 0;
    for (const std::string & lv : test_isa::runnable_levels()) {
        test_isa::scoped_cap cap(lv.c_str());
        SCOPED_TRACE("isa " + lv);
        int checked = 0;
        for (ggml_type t : {GGML_TYPE_Q8_0, GGML_TYPE_Q8_1, GGML_TYPE_Q8_K}) {
            const ggml_quantize_act_fn fast = ggml_cpu_quantize_act_fast(t);
            if (!fast) {
                printf("[ isa      ] level %s has no fast %s quantizer (the reference runs)\n", lv.c_str(), ggml_type_name(t));
                EXPECT_EQ(lv, "portable");
                continue;
            }
            const ggml_type_traits * tt = ggml_get_type_traits(t);
            for (int64_t K : {(int64_t) 256, (int64_t) 4 * 256}) {
                const size_t len = ggml_row_size(t, K);
                for (const std::vector<float> & r : quantizer_rows(K)) {
                    std::vector<uint8_t> want(len, 0xA5), got(len, 0x5A);
                    tt->from_float_ref(r.data(), want.data(), K);
                    fast(r.data(), got.data(), K);
                    ASSERT_EQ(want, got) << tt->type_name << " K " << K << " row " << checked;
                    ++checked;
                }
            }
        }
        if (checked > 0) {
            EXPECT_GT(checked, 100);
            ++levels;
        }
    }
    test_isa::note_skipped_levels();
    if (levels == 0) GTEST_SKIP() << "no level with fast quantizers on this CPU: the references are the only ones";
}

INSTANTIATE_TEST_SUITE_P(Fast, QuantDot, ::testing::ValuesIn(k_fast_types),
                         [](const ::testing::TestParamInfo<ggml_type> & i) {
                             // fixed names: a type whose reference is missing has no ggml_type_name
                             switch (i.param) {
                                 case GGML_TYPE_Q8_0: return std::string("q8_0");
                                 case GGML_TYPE_Q4_0: return std::string("q4_0");
                                 case GGML_TYPE_Q5_0: return std::string("q5_0");
                                 case GGML_TYPE_Q4_1: return std::string("q4_1");
                                 case GGML_TYPE_Q5_1: return std::string("q5_1");
                                 case GGML_TYPE_Q4_K: return std::string("q4_K");
                                 case GGML_TYPE_Q5_K: return std::string("q5_K");
                                 default: return std::string("q6_K");
                             }
                         });

} // namespace
