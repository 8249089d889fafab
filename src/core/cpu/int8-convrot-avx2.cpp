// ConvRot rotation + per-row INT8 quantization for AVX2 CPUs (8-float vectors), bit-identical to
// quantize_row_portable (int8-convrot.cpp) and so to the AVX-512 path.
//
// Why the bits are the same: every rotated value goes through the same float operations, in the
// same order, as the scalar definition (int8-convrot-facts.md). The 1/sqrt(G) scaling comes first;
// each butterfly output is ((±a ± b) ± c) ± d, formed as ((a' + b') + c') + d' where x' is x with
// its sign bit flipped or not (x + (-y) is x - y exactly, sign of zero included); this file is
// compiled with -ffp-contract=off and uses explicit mul/add intrinsics, never FMA. The amax is a
// max (exact in any order), the quantization v * inv, clamped, converted with the default MXCSR
// rounding (nearest, ties to even, as lrintf).
//
// Layout of the stages on 8-lane vectors: stride 1 is inside each 128-bit half (vpermilps),
// stride 4 pairs the halves of two vectors (vperm2f128), strides 16 and 64 are whole vectors at a
// distance of 2 and 8 vectors. Groups above 256 are rotated in 256-value blocks in registers, then
// the cross-block stages (256, 1024, ...) run over the per-thread scratch, two stages per pass
// where possible, as in the AVX-512 path. Compiled for the avx2/fma/f16c target by attribute only
// (the library may be built for baseline x86-64), and reached only through quantize_row(path::avx2)
// after sd_cpu::isa_can_use("avx2").

#include "int8-impl.h"
#include "int8-x86.h"

#include <cfloat>
#include <cmath>
#include <cstring>

namespace sd_int8 {

#ifdef SD_INT8_X86

#define SD_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))

namespace {

using namespace convrot_detail;

// Sign masks (0 or the sign bit per lane) for the four terms of each output slot:
// slot 0 (+,+,+,-), slot 1 (+,+,-,+), slot 2 (+,-,+,+), slot 3 (-,+,+,+).
struct signs8 {
    __m256 a, b, c, d;
};

// slot_of(lane) chooses the slot of each of the 8 lanes.
template <class F> SD_AVX2_TARGET inline signs8 make_signs(F slot_of) {
    alignas(32) uint32_t sa[8], sb[8], sc[8], sd[8];
    const uint32_t       m = 0x80000000u;
    for (int i = 0; i < 8; ++i) {
        const int k = slot_of(i);
        sa[i]       = k == 3 ? m : 0;
        sb[i]       = k == 2 ? m : 0;
        sc[i]       = k == 1 ? m : 0;
        sd[i]       = k == 0 ? m : 0;
    }
    return {_mm256_load_ps((const float *) sa), _mm256_load_ps((const float *) sb), _mm256_load_ps((const float *) sc),
            _mm256_load_ps((const float *) sd)};
}

SD_AVX2_TARGET inline __m256 flip(__m256 v, __m256 sign) { return _mm256_xor_ps(v, sign); }

// ((a' + b') + c') + d', the scalar's left-to-right order
SD_AVX2_TARGET inline __m256 combine(__m256 A, __m256 B, __m256 C, __m256 D, const signs8 & s) {
    __m256 r = _mm256_add_ps(flip(A, s.a), flip(B, s.b));
    r        = _mm256_add_ps(r, flip(C, s.c));
    return _mm256_add_ps(r, flip(D, s.d));
}

struct rot8 {
    int    group;
    __m256 scale;
    signs8 s1;     // stride 1: slot = lane % 4
    signs8 s4_lo;  // stride 4, first vector of a pair: slots 0 (low half) and 1 (high half)
    signs8 s4_hi;  // second vector: slots 2 and 3
};

SD_AVX2_TARGET inline rot8 make_rot8(int group) {
    rot8 rc;
    rc.group = group;
    rc.scale = _mm256_set1_ps(group_scale(group));
    rc.s1    = make_signs([](int i) { return i % 4; });
    rc.s4_lo = make_signs([](int i) { return i / 4; });
    rc.s4_hi = make_signs([](int i) { return 2 + i / 4; });
    return rc;
}

// Stage 1 on one vector: two quartets, one per 128-bit half.
SD_AVX2_TARGET inline __m256 stage_s1(__m256 v, const signs8 & s) {
    return combine(_mm256_permute_ps(v, 0x00), _mm256_permute_ps(v, 0x55), _mm256_permute_ps(v, 0xAA),
                   _mm256_permute_ps(v, 0xFF), s);
}

// Stage 4 on 16 consecutive values v0 = [0..8), v1 = [8..16): the quartet j is (j, j+4, j+8,
// j+12), i.e. (v0 low half, v0 high half, v1 low half, v1 high half) lane by lane.
SD_AVX2_TARGET inline void stage_s4(__m256 & v0, __m256 & v1, const rot8 & rc) {
    const __m256 A = _mm256_permute2f128_ps(v0, v0, 0x00), B = _mm256_permute2f128_ps(v0, v0, 0x11);
    const __m256 C = _mm256_permute2f128_ps(v1, v1, 0x00), D = _mm256_permute2f128_ps(v1, v1, 0x11);
    v0             = combine(A, B, C, D, rc.s4_lo);
    v1             = combine(A, B, C, D, rc.s4_hi);
}

// A quartet of whole vectors (strides of 16 values and more).
SD_AVX2_TARGET inline void stage_vec(__m256 & a, __m256 & b, __m256 & c, __m256 & d) {
    const __m256 ab = _mm256_add_ps(a, b);
    const __m256 o0 = _mm256_sub_ps(_mm256_add_ps(ab, c), d);
    const __m256 o1 = _mm256_add_ps(_mm256_sub_ps(ab, c), d);
    const __m256 o2 = _mm256_add_ps(_mm256_add_ps(_mm256_sub_ps(a, b), c), d);
    // (-a + b) is b - a exactly
    const __m256 o3 = _mm256_add_ps(_mm256_add_ps(_mm256_sub_ps(b, a), c), d);
    a               = o0;
    b               = o1;
    c               = o2;
    d               = o3;
}

// The scaling and the in-register stages (1, 4, 16, 64 while below the group) of nv vectors:
// one vector holding two groups of 4 or one of 1 value per lane (nv = 1), or the nv = G / 8
// vectors of one group of 16..256, or (G > 256, nv = 32) one 256-value block of a larger group.
SD_AVX2_TARGET inline void rotate_vectors(__m256 * v, int nv, const rot8 & rc) {
    if (rc.group == 1) return;
    for (int i = 0; i < nv; ++i) {
        v[i] = _mm256_mul_ps(v[i], rc.scale);
        v[i] = stage_s1(v[i], rc.s1);
    }
    if (rc.group >= 16) {
        for (int i = 0; i < nv; i += 2) stage_s4(v[i], v[i + 1], rc);
    }
    if (rc.group >= 64) { // stride 16 = 2 vectors, blocks of 8 vectors
        for (int b = 0; b < nv; b += 8)
            for (int j = 0; j < 2; ++j) stage_vec(v[b + j], v[b + j + 2], v[b + j + 4], v[b + j + 6]);
    }
    if (rc.group >= 256) { // stride 64 = 8 vectors, blocks of 32 vectors
        for (int j = 0; j < 8; ++j) stage_vec(v[j], v[j + 8], v[j + 16], v[j + 24]);
    }
}

// Running max of |v| and a lane flag for NaN or |v| > FLT_MAX.
struct amax8 {
    __m256 vmax;
    __m256 bad;
};

SD_AVX2_TARGET inline void amax_add(amax8 & m, __m256 v) {
    const __m256 a = _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
    m.bad          = _mm256_or_ps(m.bad, _mm256_cmp_ps(a, _mm256_set1_ps(FLT_MAX), _CMP_NLE_UQ));
    m.vmax         = _mm256_max_ps(m.vmax, a);
}

SD_AVX2_TARGET inline float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m        = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m        = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

SD_AVX2_TARGET inline int32_t hsum(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s         = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s         = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

SD_AVX2_TARGET inline bool any(__m256 flags) { return _mm256_movemask_ps(flags) != 0; }

// Lanes [0, n) set, for the ragged end of a row (n < 8).
SD_AVX2_TARGET inline __m256i lanes_below(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int) n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// q = clamp(v * inv, -127, 127) rounded half to even, on 8 lanes
SD_AVX2_TARGET inline __m256i quantize8(__m256 v, __m256 vinv) {
    __m256 f = _mm256_mul_ps(v, vinv);
    f        = _mm256_min_ps(_mm256_max_ps(f, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
    return _mm256_cvtps_epi32(f);
}

// Stores n (<= 8) quantized values as bytes (the values are in [-127, 127]: no saturation).
SD_AVX2_TARGET inline void store8(int8_t * q, __m256i qi, int64_t n) {
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(qi), _mm256_extracti128_si256(qi, 1));
    const __m128i b = _mm_packs_epi16(w, w);
    if (n >= 8) {
        _mm_storel_epi64((__m128i *) q, b);
    } else {
        alignas(16) int8_t tmp[16];
        _mm_store_si128((__m128i *) tmp, b);
        memcpy(q, tmp, (size_t) n);
    }
}

// Stages s = 256, 1024, ... (< group) over one group already through the in-register stages, in
// place in 32-byte aligned memory; the last pass also takes the amax.
SD_AVX2_TARGET void cross_block_stages(float * g, int group, amax8 & acc) {
    amax8   m = acc; // a local copy: stores through g could otherwise alias it (floats)
    int64_t s = 256;
    while (s < group) {
        const bool two  = s * 16 <= group;
        const bool last = (two ? s * 16 : s * 4) == group;
        if (two) { // stages s and 4s in one pass: 16 vectors at stride s
            for (int64_t blk = 0; blk < group; blk += 16 * s) {
                for (int64_t j = 0; j < s; j += 8) {
                    float * p = g + blk + j;
                    __m256  v[16];
                    for (int i = 0; i < 16; ++i) v[i] = _mm256_load_ps(p + i * s);
                    for (int b = 0; b < 16; b += 4) stage_vec(v[b], v[b + 1], v[b + 2], v[b + 3]);
                    for (int b = 0; b < 4; ++b) stage_vec(v[b], v[b + 4], v[b + 8], v[b + 12]);
                    for (int i = 0; i < 16; ++i) {
                        _mm256_store_ps(p + i * s, v[i]);
                        if (last) amax_add(m, v[i]);
                    }
                }
            }
            s *= 16;
        } else { // the last stage alone
            for (int64_t blk = 0; blk < group; blk += 4 * s) {
                for (int64_t j = 0; j < s; j += 8) {
                    float * p = g + blk + j;
                    __m256  a = _mm256_load_ps(p), b = _mm256_load_ps(p + s), c = _mm256_load_ps(p + 2 * s),
                           d = _mm256_load_ps(p + 3 * s);
                    stage_vec(a, b, c, d);
                    _mm256_store_ps(p, a);
                    _mm256_store_ps(p + s, b);
                    _mm256_store_ps(p + 2 * s, c);
                    _mm256_store_ps(p + 3 * s, d);
                    if (last) {
                        amax_add(m, a);
                        amax_add(m, b);
                        amax_add(m, c);
                        amax_add(m, d);
                    }
                }
            }
            s *= 4;
        }
    }
    acc = m;
}

// One group > 256 of x rotated into out (32-byte aligned); its amax accumulated into m.
SD_AVX2_TARGET void rotate_group_large(const float * x, float * out, const rot8 & rc, amax8 & m) {
    for (int b = 0; b < rc.group; b += 256) {
        __m256 v[32];
        for (int i = 0; i < 32; ++i) v[i] = _mm256_loadu_ps(x + b + 8 * i);
        rotate_vectors(v, 32, rc);
        for (int i = 0; i < 32; ++i) _mm256_store_ps(out + b + 8 * i, v[i]);
    }
    cross_block_stages(out, rc.group, m);
}

// Groups above 256 (K is a multiple of the group, so of 1024: no ragged end).
SD_AVX2_TARGET float quantize_row_large(const float * x, int64_t K, int group, int8_t * q, int32_t * rowsum) {
    const rot8 rc   = make_rot8(group);
    const bool keep = keeps_row(K, group);
    float *    buf  = scratch_for(K, group);
    amax8      m{_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t g0 = 0; g0 < K; g0 += group) rotate_group_large(x + g0, keep ? buf + g0 : buf, rc, m);
    if (any(m.bad)) return nonfinite_row(K, q, rowsum);
    const float s = hmax(m.vmax) / 127.0f;
    if (s == 0.0f) {
        memset(q, 0, (size_t) K);
        *rowsum = 0;
        return s;
    }
    const float inv = 1.0f / s;
    if (!(inv <= FLT_MAX)) return quantize_row_portable(x, K, group, q, rowsum); // subnormal scale
    const __m256 vinv = _mm256_set1_ps(inv);
    __m256i      vsum = _mm256_setzero_si256();
    for (int64_t g0 = 0; g0 < K; g0 += group) {
        float * r = keep ? buf + g0 : buf;
        if (!keep) {
            amax8 unused{_mm256_setzero_ps(), _mm256_setzero_ps()};
            rotate_group_large(x + g0, r, rc, unused);
        }
        for (int i = 0; i < group; i += 8) {
            const __m256i qi = quantize8(_mm256_load_ps(r + i), vinv);
            vsum             = _mm256_add_epi32(vsum, qi);
            store8(q + g0 + i, qi, 8);
        }
    }
    *rowsum = hsum(vsum);
    return s;
}

} // namespace

SD_AVX2_TARGET float quantize_row_avx2(const float * x, int64_t K, int group, int8_t * q, int32_t * rowsum) {
    if (group < 1) group = 1;
    if (group > 256) return quantize_row_large(x, K, group, q, rowsum);
    const rot8    rc   = make_rot8(group);
    const int     nv   = group >= 16 ? group / 8 : 1; // vectors per step (whole groups)
    const int64_t step = (int64_t) nv * 8;
    __m256        v[32];

    // One step of the row, rotated. Groups of 1 and 4 take one vector per step and may end in a
    // ragged step (K a multiple of the group only), loaded with zeros past K: zeros rotate to
    // zeros and do not change the amax.
    auto load_step = [&](int64_t k0) SD_AVX2_TARGET {
        const int64_t left = K - k0;
        if (nv == 1) {
            v[0] = left >= 8 ? _mm256_loadu_ps(x + k0) : _mm256_maskload_ps(x + k0, lanes_below(left));
        } else {
            for (int i = 0; i < nv; ++i) v[i] = _mm256_loadu_ps(x + k0 + 8 * i);
        }
        rotate_vectors(v, nv, rc);
    };

    // the rotated row is kept for pass 2 when it fits (keeps_row), as on the AVX-512 path
    const bool keep    = keeps_row(K, group);
    float *    rotated = keep ? scratch_for(K, group) : nullptr;

    amax8 m{_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t k0 = 0; k0 < K; k0 += step) {
        load_step(k0);
        for (int i = 0; i < nv; ++i) {
            amax_add(m, v[i]);
            // the scratch is padded to whole 16-float vectors, so a ragged step stores 8 lanes
            if (keep) _mm256_store_ps(rotated + k0 + 8 * i, v[i]);
        }
    }
    if (any(m.bad)) return nonfinite_row(K, q, rowsum);
    const float s = hmax(m.vmax) / 127.0f;
    if (s == 0.0f) {
        memset(q, 0, (size_t) K);
        *rowsum = 0;
        return s;
    }
    const float inv = 1.0f / s;
    // subnormal scale: 1/s overflows; rare enough for the scalar definition
    if (!(inv <= FLT_MAX)) return quantize_row_portable(x, K, group, q, rowsum);
    const __m256 vinv = _mm256_set1_ps(inv);
    __m256i      vsum = _mm256_setzero_si256();
    for (int64_t k0 = 0; k0 < K; k0 += step) {
        if (keep) {
            for (int i = 0; i < nv; ++i) v[i] = _mm256_load_ps(rotated + k0 + 8 * i);
        } else {
            load_step(k0);
        }
        for (int i = 0; i < nv; ++i) {
            const __m256i qi = quantize8(v[i], vinv);
            // lanes past K hold zeros, which quantize to 0 and add nothing to the sum
            vsum = _mm256_add_epi32(vsum, qi);
            store8(q + k0 + 8 * i, qi, K - k0 - 8 * i);
        }
    }
    *rowsum = hsum(vsum);
    return s;
}

#else

float quantize_row_avx2(const float * x, int64_t K, int group, int8_t * q, int32_t * rowsum) {
    return quantize_row_portable(x, K, group, q, rowsum);
}

#endif

} // namespace sd_int8
