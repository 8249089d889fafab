// INT8 GEMM for AVX2 CPUs (no VNNI): exact int32 sums, then the fixed epilogue of gemm_portable
// (int8-gemm.cpp): y = ((float(acc) * s_x) * s_w) + b, then y * gate, then residual + y.
//
// Exactness. AVX2's byte multiply, vpmaddubsw (u8 x s8), adds each pair of products into a
// saturating int16, which is exact only while |a0*b0 + a1*b1| <= 32767: the VNNI trick of
// offsetting the weight by +128 would reach 255*127*2 and saturate, and the sign trick (|x| times
// sign(x)*y) breaks on a -128 on the y side. Both operands here are instead sign-extended to
// int16 and multiplied with vpmaddwd: each product is at most 128*128 = 2^14 in magnitude, a
// pair sum at most 2^15, and the int32 accumulation holds the true sum for every K the schema
// admits (K * 2^14 <= 2^31 - 1, SD_LINEAR_I8_MAX_K). So any int8 values, -128 on either side
// included, give the exact sum, with no per-weight or per-activation check and no row sums. On
// Zen 3 this costs no more multiplier work than the sign trick: 16 products per vpmaddwd against
// 32 per vpmaddubsw + vpmaddwd pair, both instructions issuing two per cycle, and no vpsignb.
//
// Blocking (16 ymm registers): the micro-kernel holds a 6-row x 16-channel tile of int32 sums
// (12 registers) plus two weight vectors, one activation broadcast and one product. A work unit
// is a 96-channel weight panel (six 16-channel micro-panels) times a block of rows. Per k-block
// the unit packs its panel into a per-thread buffer as int16 pairs (k, k+1) per channel, 8
// channels per vector, step-major (L2-resident, up to 384 KiB), and for each 6-row tile widens the
// tile's activations once into a small per-thread buffer that the six micro-panels share. The k
// loop itself runs at ~97% of a register-only vpmaddwd + vpaddd loop on Zen 3; what a profile
// showed around it was the widening (activation rows re-read from L3 or memory for every panel,
// and the int16 tile written out), so the panel is 96 channels rather than 48 (half the widening
// per product) and the next tile's rows are prefetched while this one is widened.
// Longer K is cut into equal k-blocks whose int32 partial sums wait in the output (or in
// gemm_problem::partial) between blocks; the epilogue runs on the last one. Work units are
// claimed from gemm_problem::next_unit like the VNNI GEMM's.

#include "int8-impl.h"
#include "int8-x86.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>

namespace sd_int8 {

#ifdef SD_INT8_X86

#define SD_AVX2_TARGET __attribute__((target("avx2,fma,f16c")))

namespace {

constexpr int     MR = 6;       // rows per micro-tile
constexpr int     NP = 16;      // channels per micro-panel (2 vectors of 8)
constexpr int     NC = 6 * NP;  // channels per work unit (see the blocking note above)
constexpr int64_t KC = 2048;    // largest k-block (k values; a multiple of 16)

struct ukernel_args {
    const int16_t * a;      // first tile row, widened; row r at a + r * lda, k pairs as dwords
    int64_t         lda;    // int16 elements
    const int16_t * w;      // packed micro-panel: per k pair, V vectors of 8 channels
    int64_t         steps;  // k pairs in this block
    float *         y;      // first row / channel of the tile
    int64_t         ldy;
    int32_t *       part;   // partial sums between k-blocks (y itself or gemm_problem::partial)
    int64_t         ldp;
    const float *   sx;     // first row
    const float *   ws;     // first channel or NULL
    const float *   bias;   // first channel or NULL
    const float *   gate;   // first channel or NULL
    const float *   res;    // first row / channel or NULL; row stride ldy
    int             last_n; // valid channels of the last vector (1..8)
    bool            first, last;
};

SD_AVX2_TARGET inline __m256i lanes_below(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

SD_AVX2_TARGET inline __m256i bcast_pair(const int16_t * p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

// The k loop of a full 6 x 16 tile, with named accumulators: GCC 12 keeps them in registers this
// way (an array made it shuffle them through extra moves), and all 16 ymm registers are used.
#define SD_ROW(r)                                                                                  \
    if (R > r) {                                                                                   \
        const __m256i b = bcast_pair(a##r + 2 * k);                                                \
        c##r##0         = _mm256_add_epi32(c##r##0, _mm256_madd_epi16(w0, b));                     \
        if (V > 1) c##r##1 = _mm256_add_epi32(c##r##1, _mm256_madd_epi16(w1, b));                  \
    }
#define SD_IN(r)                                                                                   \
    __m256i c##r##0 = acc[r < R ? r : 0][0], c##r##1 = acc[r < R ? r : 0][V > 1 ? 1 : 0];           \
    const int16_t * a##r = u.a + (r < R ? r : 0) * u.lda;
#define SD_OUT(r)                                                                                  \
    if (R > r) {                                                                                   \
        acc[r][0] = c##r##0;                                                                       \
        if (V > 1) acc[r][V > 1 ? 1 : 0] = c##r##1;                                                \
    }

template <int R, int V> SD_AVX2_TARGET inline void kloop(__m256i (&acc)[R][V], const ukernel_args & u) {
    SD_IN(0) SD_IN(1) SD_IN(2) SD_IN(3) SD_IN(4) SD_IN(5)
    const int16_t * w = u.w;
    // two k pairs per iteration: the loop's own counter and branch are then 3 of ~67 instructions
#pragma GCC unroll 2
    for (int64_t k = 0; k < u.steps; ++k) {
        const __m256i w0 = _mm256_load_si256((const __m256i *) (w + 16 * V * k));
        const __m256i w1 = V > 1 ? _mm256_load_si256((const __m256i *) (w + 16 * V * k + 16)) : w0;
        SD_ROW(0) SD_ROW(1) SD_ROW(2) SD_ROW(3) SD_ROW(4) SD_ROW(5)
    }
    SD_OUT(0) SD_OUT(1) SD_OUT(2) SD_OUT(3) SD_OUT(4) SD_OUT(5)
}

#undef SD_ROW
#undef SD_IN
#undef SD_OUT

// Loads and stores of a tile row's vector: the masked forms only for a partial last vector.
// vpmaskmovd is microcoded on Zen (the store form especially), and a full tile's prologue and
// epilogue would otherwise issue dozens of them per k-block.
SD_AVX2_TARGET inline __m256i ld_i(const int32_t * p, __m256i m, bool full) {
    return full ? _mm256_loadu_si256((const __m256i *) p) : _mm256_maskload_epi32(p, m);
}
SD_AVX2_TARGET inline void st_i(int32_t * p, __m256i m, bool full, __m256i v) {
    if (full) _mm256_storeu_si256((__m256i *) p, v);
    else _mm256_maskstore_epi32(p, m, v);
}
SD_AVX2_TARGET inline __m256 ld_f(const float * p, __m256i m, bool full) {
    return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}
SD_AVX2_TARGET inline void st_f(float * p, __m256i m, bool full, __m256 v) {
    if (full) _mm256_storeu_ps(p, v);
    else _mm256_maskstore_ps(p, m, v);
}

template <int R, int V> SD_AVX2_TARGET void ukernel(const ukernel_args & u) {
    const __m256i last_mask = lanes_below(u.last_n);
    const bool    last_full = u.last_n == 8;
    __m256i       acc[R][V];
    for (int r = 0; r < R; ++r) {
        for (int v = 0; v < V; ++v) {
            const bool full = v < V - 1 || last_full;
            acc[r][v]       = u.first ? _mm256_setzero_si256() : ld_i(u.part + r * u.ldp + 8 * v, last_mask, full);
        }
    }
    kloop<R, V>(acc, u);
    for (int r = 0; r < R; ++r) {
        const __m256 sx = _mm256_set1_ps(u.sx[r]);
        for (int v = 0; v < V; ++v) {
            const bool full = v < V - 1 || last_full;
            if (!u.last) {
                st_i(u.part + r * u.ldp + 8 * v, last_mask, full, acc[r][v]);
                continue;
            }
            // the epilogue in gemm_portable's order, one rounding per step
            __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(acc[r][v]), sx);
            if (u.ws) f = _mm256_mul_ps(f, ld_f(u.ws + 8 * v, last_mask, full));
            if (u.bias) f = _mm256_add_ps(f, ld_f(u.bias + 8 * v, last_mask, full));
            if (u.gate) f = _mm256_mul_ps(f, ld_f(u.gate + 8 * v, last_mask, full));
            // read before the store below: res may be y itself
            if (u.res) f = _mm256_add_ps(ld_f(u.res + r * u.ldy + 8 * v, last_mask, full), f);
            st_f(u.y + r * u.ldy + 8 * v, last_mask, full, f);
        }
    }
}

using ukernel_fn = void (*)(const ukernel_args &);

template <int R> ukernel_fn pick_v(int v) { return v == 1 ? ukernel<R, 1> : ukernel<R, 2>; }

ukernel_fn pick(int r, int v) {
    switch (r) {
        case 1: return pick_v<1>(v);
        case 2: return pick_v<2>(v);
        case 3: return pick_v<3>(v);
        case 4: return pick_v<4>(v);
        case 5: return pick_v<5>(v);
        default: return pick_v<6>(v);
    }
}

// 8 x 8 transpose of dwords: in[i] holds channel i's 8 k pairs, out[j] pair j of the 8 channels.
SD_AVX2_TARGET inline void transpose8(__m256i (&x)[8]) {
    const __m256i t0 = _mm256_unpacklo_epi32(x[0], x[1]), t1 = _mm256_unpackhi_epi32(x[0], x[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(x[2], x[3]), t3 = _mm256_unpackhi_epi32(x[2], x[3]);
    const __m256i t4 = _mm256_unpacklo_epi32(x[4], x[5]), t5 = _mm256_unpackhi_epi32(x[4], x[5]);
    const __m256i t6 = _mm256_unpacklo_epi32(x[6], x[7]), t7 = _mm256_unpackhi_epi32(x[6], x[7]);
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    x[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
    x[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
    x[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
    x[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
    x[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
    x[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
    x[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
    x[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

// Packs channels [c0, c0 + 8 * nv) (nv = 1 or 2 vectors; channels at or past N are zeros) x k
// [k0, k1) of the N x K weight into d: k pair s holds, for vector q, 8 dwords (w[c][k], w[c][k+1])
// as int16 at d + (s * nv + q) * 16 int16. k values at or past K are zeros. 16 k at a time: each
// channel's 16 bytes sign-extended, then transposed so a vector holds one pair of 8 channels.
SD_AVX2_TARGET void pack_panel(const int8_t * w, int64_t K, int64_t N, int64_t c0, int nv, int64_t k0, int64_t k1,
                               int16_t * d) {
    const int64_t kfull = std::min(k1, k0 + (std::max<int64_t>(0, K - k0) / 16) * 16);
    for (int q = 0; q < nv; ++q) {
        int64_t k = k0;
        for (; k < kfull; k += 16) {
            __m256i x[8];
            for (int i = 0; i < 8; ++i) {
                const int64_t c = c0 + 8 * q + i;
                x[i] = c < N ? _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) (w + c * K + k)))
                             : _mm256_setzero_si256();
            }
            transpose8(x);
            int16_t * dp = d + ((k - k0) / 2 * nv + q) * 16;
            for (int j = 0; j < 8; ++j) _mm256_store_si256((__m256i *) (dp + j * nv * 16), x[j]);
        }
        for (; k < k1; k += 2) { // the ragged end of K
            int16_t * dp = d + ((k - k0) / 2 * nv + q) * 16;
            for (int i = 0; i < 8; ++i) {
                const int64_t c = c0 + 8 * q + i;
                dp[2 * i]       = c < N && k < K ? w[c * K + k] : 0;
                dp[2 * i + 1]   = c < N && k + 1 < K ? w[c * K + k + 1] : 0;
            }
        }
    }
}

// Rows [0, R) of the tile (row r at a + r * lda bytes), k [k0, k1), sign-extended into d (row r
// at d + r * ldd); k at or past K reads as zero. The next tile's rows (next, next_R; none when
// next_R is 0) are prefetched into L2 on the way: a unit re-reads the whole activation block for
// each of its panels, from L3 or memory, and the widening otherwise stalls on those misses
// (~6% of the GEMM's time in a profile). The prefetch lands a tile's three micro-panels (~15k
// cycles) before the rows are read.
SD_AVX2_TARGET void widen_tile(const int8_t * a, int64_t lda, int R, int64_t K, int64_t k0, int64_t k1, int16_t * d,
                               int64_t ldd, const int8_t * next, int next_R) {
    const int64_t kfull = std::min(k1, k0 + (std::max<int64_t>(0, K - k0) / 16) * 16);
    for (int r = 0; r < R; ++r) {
        const int8_t * src = a + r * lda;
        int16_t *      dst = d + r * ldd;
        int64_t        k   = k0;
        for (; k < kfull; k += 16) {
            _mm256_store_si256((__m256i *) (dst + (k - k0)),
                               _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) (src + k))));
        }
        for (; k < k1; ++k) dst[k - k0] = k < K ? src[k] : 0;
    }
    const int64_t kend = std::min(k1, K);
    for (int r = 0; r < next_R; ++r) {
        const int8_t * src = next + r * lda;
        for (int64_t k = k0; k < kend; k += 64) _mm_prefetch((const char *) (src + k), _MM_HINT_T1);
        if (kend > k0) _mm_prefetch((const char *) (src + kend - 1), _MM_HINT_T1);
    }
}

// Per-thread buffers, 32-byte aligned, made on first use: the packed weight panel (NC x KC
// int16) and the widened activation tile (MR x KC int16).
struct thread_buffers {
    std::unique_ptr<int16_t[]> mem;
    int16_t *                  panel = nullptr;
    int16_t *                  tile  = nullptr;
};

thread_buffers * buffers() {
    static thread_local thread_buffers b;
    if (!b.mem) {
        const size_t n = (size_t) (NC * KC + MR * KC + 32);
        b.mem.reset(new (std::nothrow) int16_t[n]);
        if (!b.mem) return nullptr;
        int16_t * base = (int16_t *) (((uintptr_t) b.mem.get() + 31) & ~(uintptr_t) 31);
        b.panel        = base;
        b.tile         = base + NC * KC;
    }
    return &b;
}



} // namespace

bool gemm_avx2_splits_k(int64_t K) { return pad_up(K, 2) > KC; }

SD_AVX2_TARGET bool gemm_avx2(const gemm_problem & p, int ith, int nth, const abort_poll & stop) {
    const int64_t K2   = pad_up(p.K, 2);
    const int64_t n_kb = (K2 + KC - 1) / KC;
    const int64_t kc   = pad_up((K2 + n_kb - 1) / n_kb, 16); // equal k-blocks, each <= KC
    const int64_t n_nb = (p.N + NC - 1) / NC;
    // about 16 units per thread, as in the VNNI GEMM: the last ones then leave little idle time
    const int64_t want_mb = (16 * nth + n_nb - 1) / n_nb;
    const int64_t n_mb    = std::max<int64_t>(1, std::min(want_mb, (p.rows + MR - 1) / MR));
    const int64_t MB      = pad_up((p.rows + n_mb - 1) / n_mb, MR);
    const int64_t n_units = n_nb * n_mb;
    thread_buffers * tb   = buffers();
    int64_t          u0, u1;
    thread_share(n_units, ith, nth, u0, u1);
    for (int64_t i = u0;; ++i) {
        const int64_t u = p.next_unit ? p.next_unit->fetch_add(1, std::memory_order_relaxed) : i;
        if (u >= (p.next_unit ? n_units : u1)) break;
        const int64_t nb = u / n_mb, mb = u % n_mb;
        const int64_t n0 = nb * NC, nch = std::min(p.N, n0 + NC) - n0;
        const int64_t r0 = std::min(p.rows, mb * MB), r1 = std::min(p.rows, r0 + MB);
        if (!tb) {
            if (stop()) return false;
            gemm_rows_scalar(p, r0, r1, n0, n0 + nch);
            continue;
        }
        const int n_panels = (int) ((nch + NP - 1) / NP);
        for (int64_t k0 = 0; k0 < K2; k0 += kc) {
            if (stop()) return false;
            const int64_t k1    = std::min(K2, k0 + kc);
            const int64_t steps = (k1 - k0) / 2;
            // micro-panel j at panel + j * NP * kc: k pair s of vector q at (s * nv + q) * 16
            for (int j = 0; j < n_panels; ++j) {
                const int64_t c0 = n0 + (int64_t) j * NP;
                const int     nv = (int) std::min<int64_t>(2, (std::min(p.N, c0 + NP) - c0 + 7) / 8);
                pack_panel(p.w, p.K, p.N, c0, nv, k0, k1, tb->panel + (int64_t) j * NP * kc);
            }
            for (int64_t r = r0; r < r1; r += MR) {
                // a unit of many rows polls between row tiles too
                if (((r - r0) / MR & 63) == 63 && stop()) return false;
                const int R = (int) std::min<int64_t>(MR, r1 - r);
                const int64_t rn = r + MR < r1 ? r + MR : r1;
                widen_tile(p.a + r * p.lda, p.lda, R, p.K, k0, k1, tb->tile, kc, p.a + rn * p.lda,
                           (int) std::min<int64_t>(MR, r1 - rn));
                for (int j = 0; j < n_panels; ++j) {
                    const int64_t c0   = n0 + (int64_t) j * NP;
                    const int64_t cn   = std::min(p.N, c0 + NP) - c0;
                    const int     nv   = (int) ((cn + 7) / 8);
                    ukernel_args  a;
                    a.a      = tb->tile;
                    a.lda    = kc;
                    a.w      = tb->panel + (int64_t) j * NP * kc;
                    a.steps  = steps;
                    a.y      = p.y + r * p.N + c0;
                    a.ldy    = p.N;
                    a.part   = p.partial ? p.partial + r * p.N + c0 : (int32_t *) a.y;
                    a.ldp    = p.N;
                    a.sx     = p.a_scale + r;
                    a.ws     = p.w_scale ? p.w_scale + c0 : nullptr;
                    a.bias   = p.bias ? p.bias + c0 : nullptr;
                    a.gate   = p.gate ? p.gate + c0 : nullptr;
                    a.res    = p.residual ? p.residual + r * p.N + c0 : nullptr;
                    a.last_n = (int) (cn - 8 * (nv - 1));
                    a.first  = k0 == 0;
                    a.last   = k1 == K2;
                    pick(R, nv)(a);
                }
            }
        }
    }
    return true;
}

#else

bool gemm_avx2(const gemm_problem & p, int ith, int nth, const abort_poll & stop) {
    return gemm_portable(p, ith, nth, stop);
}

bool gemm_avx2_splits_k(int64_t) { return false; } // the portable GEMM keeps whole sums

#endif

} // namespace sd_int8
