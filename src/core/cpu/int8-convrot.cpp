// ConvRot: the regular Hadamard rotation in groups of 4^n values fused with the per-row INT8
// quantization (int8-convrot-facts.md). Implementations with identical float evaluation: a
// portable scalar one and an AVX-512 one here (compiled for that target, selected at run time),
// an AVX2 one in int8-convrot-avx2.cpp; quantize_row picks one for a path.
//
// Every power-of-4 group is supported. Groups up to 256 rotate in registers. A larger group G
// (converted ComfyUI files use 1024 and 16384) is the same stage sequence done in two parts:
// the in-register 256-point transform of each 256-value block (the 1/sqrt(G) scaling and stages
// 1..64), stored to the per-thread scratch, then the cross-block stages 256, 1024, ... over the
// scratch, two stages per pass where possible (16 vectors at stride s carry the quartets of
// stage s and of stage 4s). Each stage is elementwise the same float operations in the same
// order as the scalar definition, so the result is bit-identical whatever the split. The last
// pass also takes the amax (exact in any order).

#include "int8-impl.h"
#include "int8-x86.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>


namespace sd_int8 {

namespace {

// q = clamp(round_half_to_even(f), -127, 127); clamping first keeps lrintf in range and gives the
// same result for every finite f. NaN (0 * Inf) maps to 0.
inline int8_t quant_value(float f) {
    if (!(f == f)) return 0;
    if (f > 127.0f) f = 127.0f;
    if (f < -127.0f) f = -127.0f;
    return (int8_t) lrintf(f);
}

// Rows the vector paths keep rotated between their passes instead of rotating twice: up to 64 KiB
// (L2-resident) for groups rotated in registers; groups above 256 are rotated in memory anyway,
// and a second in-memory rotation costs more than reading a longer kept row back, so up to
// 512 KiB (every K the INT8 linear admits).
constexpr int64_t kKeepSmallGroups = 16384;
constexpr int64_t kKeepLargeGroups = 131072;

// Floats of scratch a row needs on any path (whole 16-float vectors, so a masked tail step may
// store a whole vector).
size_t scratch_floats(int64_t K, int group) {
    size_t n = group > 256 ? (size_t) group : 0; // one group rotated in memory
    if (convrot_detail::keeps_row(K, group)) n = std::max(n, (size_t) pad_up(K, 16));
    return n;
}

struct row_scratch {
    float * p   = nullptr;
    size_t  cap = 0; // floats
    ~row_scratch() { free(p); }
};
thread_local row_scratch t_scratch;

} // namespace

namespace convrot_detail {

bool keeps_row(int64_t K, int group) { return K <= (group > 256 ? kKeepLargeGroups : kKeepSmallGroups); }

float nonfinite_row(int64_t K, int8_t * q, int32_t * rowsum) {
    memset(q, 0, (size_t) K);
    *rowsum = 0;
    return NAN;
}

float * scratch_for(int64_t K, int group) {
    if (!reserve_quantize_scratch(K, group)) {
        fprintf(stderr, "sd int8: out of memory for the ConvRot row scratch (K = %lld, group %d)\n", (long long) K,
                group);
        abort();
    }
    return t_scratch.p;
}

} // namespace convrot_detail

using namespace convrot_detail;

bool reserve_quantize_scratch(int64_t K, int group) {
    const size_t n = scratch_floats(K, group < 1 ? 1 : group);
    if (n <= t_scratch.cap) return true;
    const size_t bytes = (n * sizeof(float) + 63) & ~(size_t) 63;
    float *      p     = static_cast<float *>(aligned_alloc(64, bytes));
    if (!p) return false;
    free(t_scratch.p);
    t_scratch.p   = p;
    t_scratch.cap = bytes / sizeof(float);
    return true;
}

void rotate_group_portable(float * v, int group) {
    if (group <= 1) return;
    const float c = group_scale(group);
    for (int i = 0; i < group; ++i) v[i] = v[i] * c;
    for (int s = 1; s < group; s *= 4) {
        for (int blk = 0; blk < group; blk += 4 * s) {
            for (int j = 0; j < s; ++j) {
                float *     p = v + blk + j;
                const float a = p[0], b = p[s], cc = p[2 * s], d = p[3 * s];
                p[0]          = a + b + cc - d;
                p[s]          = a + b - cc + d;
                p[2 * s]      = a - b + cc + d;
                p[3 * s]      = -a + b + cc + d;
            }
        }
    }
}

float quantize_row_portable(const float * x, int64_t K, int group, int8_t * q, int32_t * rowsum) {
    if (group < 1) group = 1;
    float   small[256];
    float * buf = group > 256 ? scratch_for(K, group) : small;
    // pass 1: amax over the rotated row (the rotation is recomputed in pass 2; no scratch beyond
    // one group)
    float amax      = 0.0f;
    bool  nonfinite = false;
    for (int64_t g0 = 0; g0 < K; g0 += group) {
        memcpy(buf, x + g0, sizeof(float) * (size_t) group);
        rotate_group_portable(buf, group);
        for (int i = 0; i < group; ++i) {
            const float a = fabsf(buf[i]);
            if (!(a <= FLT_MAX)) nonfinite = true;
            if (a > amax) amax = a;
        }
    }
    if (nonfinite) return nonfinite_row(K, q, rowsum);
    const float s   = amax / 127.0f;
    const float inv = s == 0.0f ? 0.0f : 1.0f / s;
    if (s == 0.0f) {
        memset(q, 0, (size_t) K);
        *rowsum = 0;
        return s;
    }
    // the row sum wraps like the vector path's (it is only used where K * 127 fits in int32)
    uint32_t sum = 0;
    for (int64_t g0 = 0; g0 < K; g0 += group) {
        memcpy(buf, x + g0, sizeof(float) * (size_t) group);
        rotate_group_portable(buf, group);
        for (int i = 0; i < group; ++i) {
            const int8_t v = quant_value(buf[i] * inv);
            q[g0 + i]      = v;
            sum += (uint32_t) (int32_t) v;
        }
    }
    *rowsum = (int32_t) sum;
    return s;
}

#ifdef SD_INT8_X86

#define SD_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

namespace {

// One butterfly quartet per 4 lanes (stride 1) or per 4 128-bit blocks (stride 4). For output
// slot k the terms are (±a, ±b, ±c, ±d) summed left to right; negation by sign-bit xor is exact
// and x + (-y) is x - y, so this matches the scalar ((a + b) + c) - d etc. bit for bit.
SD_AVX512_TARGET inline __m512 flip(__m512 v, __m512i sign) {
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), sign));
}

SD_AVX512_TARGET inline __m512 quartet_combine(__m512 A, __m512 B, __m512 C, __m512 D, __m512i sa, __m512i sb,
                                               __m512i sc, __m512i sd) {
    __m512 r = _mm512_add_ps(flip(A, sa), flip(B, sb));
    r        = _mm512_add_ps(r, flip(C, sc));
    return _mm512_add_ps(r, flip(D, sd));
}

struct signs {
    __m512i a, b, c, d;
};

// slot k of a quartet: k=0 (+,+,+,-), k=1 (+,+,-,+), k=2 (+,-,+,+), k=3 (-,+,+,+)
SD_AVX512_TARGET inline signs make_signs(int unit) {
    alignas(64) int32_t sa[16], sb[16], sc[16], sd[16];
    const int32_t       m = (int32_t) 0x80000000u;
    for (int i = 0; i < 16; ++i) {
        const int k = (i / unit) % 4;
        sa[i]       = k == 3 ? m : 0;
        sb[i]       = k == 2 ? m : 0;
        sc[i]       = k == 1 ? m : 0;
        sd[i]       = k == 0 ? m : 0;
    }
    return {_mm512_load_si512(sa), _mm512_load_si512(sb), _mm512_load_si512(sc), _mm512_load_si512(sd)};
}

SD_AVX512_TARGET inline __m512 stage_s1(__m512 v, const signs & s) {
    return quartet_combine(_mm512_permute_ps(v, 0x00), _mm512_permute_ps(v, 0x55), _mm512_permute_ps(v, 0xAA),
                           _mm512_permute_ps(v, 0xFF), s.a, s.b, s.c, s.d);
}

SD_AVX512_TARGET inline __m512 stage_s4(__m512 v, const signs & s) {
    return quartet_combine(_mm512_shuffle_f32x4(v, v, 0x00), _mm512_shuffle_f32x4(v, v, 0x55),
                           _mm512_shuffle_f32x4(v, v, 0xAA), _mm512_shuffle_f32x4(v, v, 0xFF), s.a, s.b, s.c, s.d);
}

// Vector-level quartet (stride >= 16): slots are whole vectors.
SD_AVX512_TARGET inline void stage_vec(__m512 & a, __m512 & b, __m512 & c, __m512 & d) {
    const __m512 ab  = _mm512_add_ps(a, b);
    const __m512 o0  = _mm512_sub_ps(_mm512_add_ps(ab, c), d);
    const __m512 o1  = _mm512_add_ps(_mm512_sub_ps(ab, c), d);
    const __m512 o2  = _mm512_add_ps(_mm512_add_ps(_mm512_sub_ps(a, b), c), d);
    const __m512 o3  = _mm512_add_ps(_mm512_add_ps(_mm512_sub_ps(b, a), c), d);
    a = o0;
    b = o1;
    c = o2;
    d = o3;
}

struct rot_ctx {
    int    group;
    __m512 scale;
    signs  s1, s4;
};

// Rotates the vectors of one group (group >= 16: group/16 vectors) or, for group <= 16, one
// vector holding 16/group whole groups (a masked tail holds whole groups padded with zeros).
// For group > 256, nv = 16: the scaling and stages 1..64 of one 256-value block (the cross-block
// stages follow in cross_block_stages).
SD_AVX512_TARGET inline void rotate_vectors(__m512 * v, int nv, const rot_ctx & rc) {
    if (rc.group == 1) return;
    for (int i = 0; i < nv; ++i) {
        v[i] = _mm512_mul_ps(v[i], rc.scale);
        v[i] = stage_s1(v[i], rc.s1);
        if (rc.group >= 16) v[i] = stage_s4(v[i], rc.s4);
    }
    if (rc.group >= 64) {
        for (int b = 0; b < nv; b += 4) stage_vec(v[b], v[b + 1], v[b + 2], v[b + 3]);
    }
    if (rc.group >= 256) {
        for (int j = 0; j < 4; ++j) stage_vec(v[j], v[j + 4], v[j + 8], v[j + 12]);
    }
}

// |v| into the running max, and a flag per lane for NaN or |v| > FLT_MAX (max is exact in any
// order, so where it is taken does not change the result).
struct amax_acc {
    __m512    vmax;
    __mmask16 bad;
};

SD_AVX512_TARGET inline void amax_add(amax_acc & m, __m512 v) {
    const __m512 a = _mm512_and_ps(v, _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff)));
    m.bad |= _mm512_cmp_ps_mask(a, _mm512_set1_ps(FLT_MAX), _CMP_NLE_UQ);
    m.vmax = _mm512_max_ps(m.vmax, a);
}

// Stages s = 256, 1024, ... (< group) over a group already through the in-register stages, in
// place in 64-byte aligned memory; the last pass also takes the group's amax.
SD_AVX512_TARGET void cross_block_stages(float * g, int group, amax_acc & acc) {
    // a local copy: stores through g may alias the caller's accumulator (vector types may alias
    // float), which would keep it in memory across the loop
    amax_acc m = acc;
    int64_t  s = 256;
    while (s < group) {
        const bool two  = s * 16 <= group;
        const bool last = (two ? s * 16 : s * 4) == group;
        if (two) { // stages s and 4s in one pass
            for (int64_t blk = 0; blk < group; blk += 16 * s) {
                for (int64_t j = 0; j < s; j += 16) {
                    float * p = g + blk + j;
                    __m512  v[16];
#pragma GCC unroll 16
                    for (int i = 0; i < 16; ++i) v[i] = _mm512_load_ps(p + i * s);
#pragma GCC unroll 4
                    for (int b = 0; b < 16; b += 4) stage_vec(v[b], v[b + 1], v[b + 2], v[b + 3]);
#pragma GCC unroll 4
                    for (int b = 0; b < 4; ++b) stage_vec(v[b], v[b + 4], v[b + 8], v[b + 12]);
#pragma GCC unroll 16
                    for (int i = 0; i < 16; ++i) {
                        _mm512_store_ps(p + i * s, v[i]);
                        if (last) amax_add(m, v[i]);
                    }
                }
            }
            s *= 16;
        } else { // the last stage alone
            for (int64_t blk = 0; blk < group; blk += 4 * s) {
                for (int64_t j = 0; j < s; j += 16) {
                    float * p = g + blk + j;
                    __m512  a = _mm512_load_ps(p), b = _mm512_load_ps(p + s), c = _mm512_load_ps(p + 2 * s),
                           d = _mm512_load_ps(p + 3 * s);
                    stage_vec(a, b, c, d);
                    _mm512_store_ps(p, a);
                    _mm512_store_ps(p + s, b);
                    _mm512_store_ps(p + 2 * s, c);
                    _mm512_store_ps(p + 3 * s, d);
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

// One group > 256 of x rotated into out (64-byte aligned); its amax accumulated into m.
SD_AVX512_TARGET void rotate_group_large(const float * x, float * out, const rot_ctx & rc, amax_acc & m) {
    for (int b = 0; b < rc.group; b += 256) {
        __m512 v[16];
        for (int i = 0; i < 16; ++i) v[i] = _mm512_loadu_ps(x + b + 16 * i);
        rotate_vectors(v, 16, rc);
        for (int i = 0; i < 16; ++i) _mm512_store_ps(out + b + 16 * i, v[i]);
    }
    cross_block_stages(out, rc.group, m);
}

// q = clamp(round_half_to_even(v * inv), -127, 127) on 16 lanes (default MXCSR rounding: nearest,
// ties to even, as lrintf).
SD_AVX512_TARGET inline __m512i quantize16(__m512 v, __m512 vinv) {
    __m512 f = _mm512_mul_ps(v, vinv);
    f        = _mm512_min_ps(_mm512_max_ps(f, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
    return _mm512_cvtps_epi32(f);
}

SD_AVX512_TARGET inline rot_ctx make_rot_ctx(int group) {
    rot_ctx rc;
    rc.group = group;
    rc.scale = _mm512_set1_ps(group_scale(group));
    rc.s1    = make_signs(1);
    rc.s4    = make_signs(4);
    return rc;
}

// Groups above 256 (K is a multiple of the group, so of 1024: no tails).
SD_AVX512_TARGET float quantize_row_large_avx512(const float * x, int64_t K, int group, int8_t * q, int32_t * rowsum) {
    const rot_ctx rc   = make_rot_ctx(group);
    const bool    keep = keeps_row(K, group);
    float *       buf  = scratch_for(K, group);
    amax_acc      m{_mm512_setzero_ps(), 0};
    // pass 1: rotate (kept in the scratch when the row fits), amax and the non-finite flag
    for (int64_t g0 = 0; g0 < K; g0 += group) rotate_group_large(x + g0, keep ? buf + g0 : buf, rc, m);
    if (m.bad) return nonfinite_row(K, q, rowsum);
    const float s = _mm512_reduce_max_ps(m.vmax) / 127.0f;
    if (s == 0.0f) {
        memset(q, 0, (size_t) K);
        *rowsum = 0;
        return s;
    }
    const float inv = 1.0f / s;
    if (!(inv <= FLT_MAX)) return quantize_row_portable(x, K, group, q, rowsum); // subnormal scale
    const __m512 vinv = _mm512_set1_ps(inv);
    __m512i      vsum = _mm512_setzero_si512();
    for (int64_t g0 = 0; g0 < K; g0 += group) {
        float * r = keep ? buf + g0 : buf;
        amax_acc unused{_mm512_setzero_ps(), 0};
        if (!keep) rotate_group_large(x + g0, r, rc, unused);
        for (int i = 0; i < group; i += 16) {
            const __m512i qi = quantize16(_mm512_load_ps(r + i), vinv);
            vsum             = _mm512_add_epi32(vsum, qi);
            _mm_storeu_si128((__m128i *) (q + g0 + i), _mm512_cvtepi32_epi8(qi));
        }
    }
    *rowsum = _mm512_reduce_add_epi32(vsum);
    return s;
}

} // namespace

SD_AVX512_TARGET float quantize_row_avx512(const float * x, int64_t K, int group, int8_t * q, int32_t * rowsum) {
    if (group < 1) group = 1;
    if (group > 256) return quantize_row_large_avx512(x, K, group, q, rowsum);
    const rot_ctx rc = make_rot_ctx(group);

    const int     nv    = group >= 16 ? group / 16 : 1; // vectors per step
    const int64_t step  = (int64_t) nv * 16;            // floats per step (whole groups)
    const __m512  absm  = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    const __m512  fmax  = _mm512_set1_ps(FLT_MAX);
    __m512        vmax  = _mm512_setzero_ps();
    __mmask16     bad   = 0;
    __m512        v[16];

    // a lambda does not inherit the enclosing function's target attribute: give it its own
    auto load_step = [&](int64_t k0, __mmask16 & tail) SD_AVX512_TARGET {
        const int64_t left = K - k0;
        tail               = left >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << left) - 1);
        if (nv == 1) {
            v[0] = _mm512_maskz_loadu_ps(tail, x + k0);
        } else {
            for (int i = 0; i < nv; ++i) v[i] = _mm512_loadu_ps(x + k0 + 16 * i);
        }
        rotate_vectors(v, nv, rc);
    };

    // The rotated row is kept for pass 2 when it fits (keeps_row: up to 64 KiB, L2-resident):
    // rotating twice was half the cost of this kernel. Longer rows rotate again; both ways give
    // the same bits.
    const bool keep    = keeps_row(K, group);
    float *    rotated = keep ? scratch_for(K, group) : nullptr;

    // pass 1: amax (max is exact in any order) and a non-finite flag (NaN or |v| > FLT_MAX)
    for (int64_t k0 = 0; k0 < K; k0 += step) {
        __mmask16 tail;
        load_step(k0, tail);
        for (int i = 0; i < nv; ++i) {
            const __m512 a = _mm512_and_ps(v[i], absm);
            bad |= _mm512_cmp_ps_mask(a, fmax, _CMP_NLE_UQ);
            vmax = _mm512_max_ps(vmax, a);
            // the scratch is padded to whole vectors, so a masked tail step stores all 16 lanes
            if (keep) _mm512_store_ps(rotated + k0 + 16 * i, v[i]);
        }
    }
    if (bad) return nonfinite_row(K, q, rowsum);
    const float amax = _mm512_reduce_max_ps(vmax);
    const float s    = amax / 127.0f;
    if (s == 0.0f) {
        memset(q, 0, (size_t) K);
        *rowsum = 0;
        return s;
    }
    const float inv = 1.0f / s;
    if (!(inv <= FLT_MAX)) {
        // subnormal scale: 1/s overflows; rare enough for the scalar definition
        return quantize_row_portable(x, K, group, q, rowsum);
    }
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    __m512i      vsum = _mm512_setzero_si512();
    for (int64_t k0 = 0; k0 < K; k0 += step) {
        __mmask16 tail;
        if (keep) {
            const int64_t left = K - k0;
            tail = left >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << left) - 1);
            for (int i = 0; i < nv; ++i) v[i] = _mm512_load_ps(rotated + k0 + 16 * i);
        } else {
            load_step(k0, tail);
        }
        for (int i = 0; i < nv; ++i) {
            __m512 f = _mm512_mul_ps(v[i], vinv);
            f        = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
            // default MXCSR rounding: nearest, ties to even (lrintf)
            const __m512i qi = _mm512_cvtps_epi32(f);
            vsum             = _mm512_add_epi32(vsum, qi);
            _mm_mask_storeu_epi8(q + k0 + 16 * i, nv == 1 ? tail : (__mmask16) 0xffff, _mm512_cvtepi32_epi8(qi));
        }
    }
    *rowsum = _mm512_reduce_add_epi32(vsum);
    return s;
}

#else

float quantize_row_avx512(const float * x, int64_t K, int group, int8_t * q, int32_t * rowsum) {
    return quantize_row_portable(x, K, group, q, rowsum);
}

#endif

float quantize_row(path p, const float * x, int64_t K, int group, int8_t * q, int32_t * rowsum) {
    switch (p) {
        case path::avx2: return quantize_row_avx2(x, K, group, q, rowsum);
        // no AMX quantizer: an AMX CPU has AVX-512, and resolve_path never returns amx today
        case path::vnni:
        case path::amx: return quantize_row_avx512(x, K, group, q, rowsum);
        case path::neon:
        case path::dotprod:
        case path::i8mm: return quantize_row_neon(x, K, group, q, rowsum);
        case path::automatic:
        case path::portable: break;
    }
    return quantize_row_portable(x, K, group, q, rowsum);
}

} // namespace sd_int8
