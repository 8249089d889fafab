// INT8 GEMM paths with the fixed epilogue y = ((float(acc) * s_x) * s_w) + b, optionally
// extended by y = y * gate and y = residual + y (the fused Linear -> Mul -> Add chain).
//
// Portable: plain int32 dot products. VNNI (AVX512-VNNI, vpdpbusd = u8 x s8): the weight is
// repacked with +128 (w ^ 0x80) so it can be the unsigned operand while the activation stays
// signed and is broadcast 4 bytes at a time; sum((w + 128) a) = sum(w a) + 128 sum(a), so each
// row starts from -128 * rowsum(a). The int32 arithmetic wraps, but the final value equals the
// true sum, which fits in int32 for K <= SD_LINEAR_I8_MAX_K (131071), so the result is exact.
//
// On Zen 4 (one 512-bit vpdpbusd per cycle) the 6 x 64 micro-tile reaches ~90% of the measured
// vpdpbusd peak. The weight is repacked inside the GEMM, one L2-sized block at a time into a
// per-thread buffer (a gather per 64-byte step), so no packed copy of the whole weight is ever
// written to memory and read back; work units are claimed dynamically so a descheduled thread
// does not stall the others.

#include "int8-impl.h"
#include "int8-x86.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>


namespace sd_int8 {

void gemm_rows_scalar(const gemm_problem & p, int64_t r0, int64_t r1, int64_t n0, int64_t n1) {
    for (int64_t r = r0; r < r1; ++r) {
        for (int64_t o = n0; o < n1; ++o) {
            const int8_t * a   = p.a + r * p.lda;
            const int8_t * w   = p.w + o * p.K;
            int32_t        acc = 0;
            for (int64_t k = 0; k < p.K; ++k) acc += (int32_t) a[k] * (int32_t) w[k];
            p.y[r * p.N + o] = gemm_epilogue(acc, p.a_scale[r], p, p.residual ? p.residual + r * p.N : nullptr, o);
        }
    }
}

bool gemm_portable(const gemm_problem & p, int ith, int nth, const abort_poll & stop) {
    // rows x (blocks of 64 channels), split across threads; poll once per unit
    const int64_t NB = 64;
    const int64_t nb = (p.N + NB - 1) / NB;
    int64_t       u0, u1;
    thread_share(p.rows * nb, ith, nth, u0, u1);
    for (int64_t u = u0; u < u1; ++u) {
        if (((u - u0) & 15) == 0 && stop()) return false;
        const int64_t  r  = u / nb;
        const int64_t  o0 = (u % nb) * NB, o1 = std::min(p.N, o0 + NB);
        const int8_t * a  = p.a + r * p.lda;
        float *        y  = p.y + r * p.N;
        const float *  rs = p.residual ? p.residual + r * p.N : nullptr;
        for (int64_t o = o0; o < o1; ++o) {
            const int8_t * w   = p.w + o * p.K;
            int32_t        acc = 0;
            for (int64_t k = 0; k < p.K; ++k) acc += (int32_t) a[k] * (int32_t) w[k];
            y[o] = gemm_epilogue(acc, p.a_scale[r], p, rs, o);
        }
    }
    return true;
}


#ifdef SD_INT8_X86

#define SD_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

namespace {

// Cache blocking, measured on Zen 4 (1 MiB L2): a work unit is one 64-channel micro-panel (NC =
// 16 * NV) and the k loop of each micro-kernel call runs over the whole K when K <= KC, so the
// int32 sums never leave the registers; the packed panel (64 x K bytes, <= 512 KiB) stays in L2
// while every row tile of the unit passes over it. Longer K is cut into equal k-blocks whose
// partial sums wait in the output (int32) between blocks; the epilogue runs on the last one.
// Smaller k-blocks (256-1024) with partial sums measured 8-25% slower: the partial-sum reloads
// miss the caches at the start of every micro-kernel call.
constexpr int     MR = 6;  // rows per micro-tile (6 x 4 vectors = 24 accumulators)
constexpr int     NV = 4;  // 16-channel vectors per micro-tile (64 channels)
constexpr int64_t NC = 16 * NV;
constexpr int64_t KC = 8192;

struct ukernel_args {
    const int8_t *  a;        // first row of the tile at the k-block start
    int64_t         lda;
    const uint8_t * w;        // the packed k-block: per k4 step, V panels x 64 bytes
    int64_t         k4n;      // k4 steps in this block
    float *         y;        // first row / channel of the tile
    int64_t         ldy;
    int32_t *       part;     // where partial sums wait between k-blocks (y or a separate buffer)
    int64_t         ldp;
    const int32_t * rowsum;   // first row
    const float *   sx;       // first row
    const float *   ws;       // first channel or NULL
    const float *   bias;     // first channel or NULL
    const float *   gate;     // first channel or NULL
    const float *   res;      // first row / channel or NULL; row stride ldy
    __mmask16       last_mask; // valid lanes of the last vector
    bool            first, last;
};

template <int R, int V> struct kloop {
    SD_VNNI_TARGET static inline void run(__m512i (&acc)[R][V], const int8_t * a, int64_t lda, const uint8_t * w,
                                          int64_t k4n) {
        for (int64_t k = 0; k < k4n; ++k) {
            __m512i wv[V];
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v) wv[v] = _mm512_loadu_si512(w + v * 64);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                int32_t a4;
                memcpy(&a4, a + r * lda, 4);
                const __m512i av = _mm512_set1_epi32(a4);
#pragma GCC unroll 4
                for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], wv[v], av);
            }
            a += 4;
            w += 64 * V;
        }
    }
};

// The full tile: 24 accumulators + 4 weight vectors + 1 broadcast fit the 32 zmm registers. Named
// variables instead of an array, because GCC 12 otherwise shuffles the accumulators through extra
// register moves on every step.
#define SD_A4(r) _mm512_set1_epi32(load_a4(a##r + 4 * k))
#define SD_ROW(r)                                                                                  \
    {                                                                                              \
        const __m512i b = SD_A4(r);                                                                \
        c##r##0         = _mm512_dpbusd_epi32(c##r##0, w0, b);                                     \
        c##r##1         = _mm512_dpbusd_epi32(c##r##1, w1, b);                                     \
        c##r##2         = _mm512_dpbusd_epi32(c##r##2, w2, b);                                     \
        c##r##3         = _mm512_dpbusd_epi32(c##r##3, w3, b);                                     \
    }
#define SD_IN(r)                                                                                   \
    __m512i c##r##0 = x[r][0], c##r##1 = x[r][1], c##r##2 = x[r][2], c##r##3 = x[r][3];           \
    const int8_t * a##r = a + (r < R ? r : 0) * lda;
#define SD_OUT(r) x[r][0] = c##r##0, x[r][1] = c##r##1, x[r][2] = c##r##2, x[r][3] = c##r##3;

inline int32_t load_a4(const int8_t * p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

template <int R> struct kloop<R, 4> {
    SD_VNNI_TARGET static inline void run(__m512i (&acc)[R][4], const int8_t * a, int64_t lda, const uint8_t * w,
                                          int64_t k4n) {
        static_assert(R >= 1 && R <= 6, "tile rows");
        // rows past R alias row 0 and their sums are dropped: the compiler removes them
        __m512i x[6][4];
        for (int r = 0; r < 6; ++r)
            for (int v = 0; v < 4; ++v) x[r][v] = acc[r < R ? r : 0][v];
        SD_IN(0) SD_IN(1) SD_IN(2) SD_IN(3) SD_IN(4) SD_IN(5)
        for (int64_t k = 0; k < k4n; ++k) {
            const __m512i w0 = _mm512_loadu_si512(w + 256 * k);
            const __m512i w1 = _mm512_loadu_si512(w + 256 * k + 64);
            const __m512i w2 = _mm512_loadu_si512(w + 256 * k + 128);
            const __m512i w3 = _mm512_loadu_si512(w + 256 * k + 192);
            SD_ROW(0)
            if (R > 1) SD_ROW(1)
            if (R > 2) SD_ROW(2)
            if (R > 3) SD_ROW(3)
            if (R > 4) SD_ROW(4)
            if (R > 5) SD_ROW(5)
        }
        SD_OUT(0) SD_OUT(1) SD_OUT(2) SD_OUT(3) SD_OUT(4) SD_OUT(5)
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < 4; ++v) acc[r][v] = x[r][v];
    }
};

#undef SD_A4
#undef SD_ROW
#undef SD_IN
#undef SD_OUT

template <int R, int V> SD_VNNI_TARGET void ukernel(const ukernel_args & u) {
    __m512i acc[R][V];
    for (int r = 0; r < R; ++r) {
        for (int v = 0; v < V; ++v) {
            const __mmask16 m = v == V - 1 ? u.last_mask : (__mmask16) 0xffff;
            acc[r][v] = u.first ? _mm512_set1_epi32(-128 * u.rowsum[r])
                                : _mm512_maskz_loadu_epi32(m, u.part + r * u.ldp + 16 * v);
        }
    }
    // the epilogue's residual lines arrive while the k loop runs instead of stalling it afterwards
    if (u.last && u.res) {
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < V; ++v) _mm_prefetch((const char *) (u.res + r * u.ldy + 16 * v), _MM_HINT_T0);
    }
    kloop<R, V>::run(acc, u.a, u.lda, u.w, u.k4n);
    for (int r = 0; r < R; ++r) {
        const __m512 sx = _mm512_set1_ps(u.sx[r]);
        for (int v = 0; v < V; ++v) {
            const __mmask16 m = v == V - 1 ? u.last_mask : (__mmask16) 0xffff;
            float *         y = u.y + r * u.ldy + 16 * v;
            if (!u.last) {
                _mm512_mask_storeu_epi32(u.part + r * u.ldp + 16 * v, m, acc[r][v]);
                continue;
            }
            __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[r][v]), sx);
            if (u.ws) f = _mm512_mul_ps(f, _mm512_maskz_loadu_ps(m, u.ws + 16 * v));
            if (u.bias) f = _mm512_add_ps(f, _mm512_maskz_loadu_ps(m, u.bias + 16 * v));
            if (u.gate) f = _mm512_mul_ps(f, _mm512_maskz_loadu_ps(m, u.gate + 16 * v));
            // read before the store below: res may be y itself
            if (u.res) f = _mm512_add_ps(_mm512_maskz_loadu_ps(m, u.res + r * u.ldy + 16 * v), f);
            _mm512_mask_storeu_ps(y, m, f);
        }
    }
}

using ukernel_fn = void (*)(const ukernel_args &);

template <int R> SD_VNNI_TARGET ukernel_fn pick_v(int v) {
    switch (v) {
        case 1: return ukernel<R, 1>;
        case 2: return ukernel<R, 2>;
        case 3: return ukernel<R, 3>;
        default: return ukernel<R, 4>;
    }
}

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


// Packs channels [n0, n0 + nch) (nch <= 64: nv = ceil(nch / 16) panels of 16) x k [k0, k1)
// (multiples of 4, k1 <= K4) of the N x K weight into d, step-major: k4 step s holds the nv
// panels' 64-byte steps (16 channels x 4 k bytes, bytes w ^ 0x80) at d + s * 64 * nv + 64 * q,
// so the micro-kernel reads one contiguous stream. A step is 16 dwords taken one from each
// channel row: one masked gather (channels past N read as 0, and 0 ^ 0x80 is the weight-0
// padding); the ragged step at the end of K goes byte by byte.
__attribute__((target("avx512f"))) void pack_block(const int8_t * w, int64_t K, int64_t N, int64_t n0, int64_t nch,
                                                   int64_t k0, int64_t k1, uint8_t * d) {
    const int64_t kfull = std::min(k1, K / 4 * 4); // end of the steps with all 4 k bytes inside K
    const __m512i flip  = _mm512_set1_epi32((int) 0x80808080u);
    const __m512i idx   = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                             _mm512_set1_epi32((int) K));
    for (int64_t q = 0; q * 16 < nch; ++q) {
        const int64_t   c0    = n0 + 16 * q;
        const int64_t   valid = std::min<int64_t>(16, N - c0);
        const __mmask16 m     = (__mmask16) (valid >= 16 ? 0xffffu : ((1u << valid) - 1));
        const int8_t *  src   = w + c0 * K;
        const int64_t   nv    = (nch + 15) / 16;
        uint8_t *       dp    = d + 64 * q;
        int64_t         k     = k0;
        for (; k < kfull; k += 4, dp += 64 * nv) {
            const __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, src + k, 1);
            _mm512_storeu_si512(dp, _mm512_xor_si512(v, flip));
        }
        for (; k < k1; k += 4, dp += 64 * nv) {
            for (int c = 0; c < 16; ++c) {
                for (int j = 0; j < 4; ++j) {
                    const bool in = c < valid && k + j < K;
                    dp[c * 4 + j] = in ? (uint8_t) src[c * K + k + j] ^ 0x80 : 0x80;
                }
            }
        }
    }
}

// The per-thread packed weight panel (NC x KC bytes, L2-resident), made on first use.
uint8_t * pack_buffer() {
    static thread_local std::unique_ptr<uint8_t[]> buf;
    if (!buf) buf.reset(new (std::nothrow) uint8_t[NC * KC + 64]);
    return buf ? (uint8_t *) (((uintptr_t) buf.get() + 63) & ~(uintptr_t) 63) : nullptr;
}

} // namespace

bool gemm_vnni_splits_k(int64_t K) { return pad_up(K, 4) > KC; }

// Work units are NC-channel panels (times row blocks only when there are too few panels to keep
// every thread busy). A unit packs its weight panel one k-block at a time into the thread's
// buffer, so the weight is read from memory once per unit and never written back packed.
SD_VNNI_TARGET bool gemm_vnni(const gemm_problem & p, int ith, int nth, const abort_poll & stop) {
    const int64_t K4      = pad_up(p.K, 4);
    const int64_t n_kb    = (K4 + KC - 1) / KC;
    const int64_t kc      = pad_up((K4 + n_kb - 1) / n_kb, 4); // equal k-blocks, each <= KC
    const int64_t n_nb    = (p.N + NC - 1) / NC;
    // about 16 units per thread: the last units then leave little idle time at the end (at N = 1536
    // with 2 threads, 24 panels ran 4% slower than 48 half-height units); packing a panel costs ~1%
    // of a unit, so splitting rows is cheap, but much smaller units measured slower again
    const int64_t want_mb = (16 * nth + n_nb - 1) / n_nb;
    const int64_t n_mb    = std::max<int64_t>(1, std::min(want_mb, (p.rows + MR - 1) / MR));
    const int64_t MB      = pad_up((p.rows + n_mb - 1) / n_mb, MR);
    const int64_t n_units = n_nb * n_mb;
    uint8_t *     wbuf    = pack_buffer();
    int64_t       u0, u1;
    thread_share(n_units, ith, nth, u0, u1);
    for (int64_t i = u0;; ++i) {
        const int64_t u = p.next_unit ? p.next_unit->fetch_add(1, std::memory_order_relaxed) : i;
        if (u >= (p.next_unit ? n_units : u1)) break;
        const int64_t nb = u / n_mb, mb = u % n_mb;
        const int64_t n0 = nb * NC, nch = std::min(p.N, n0 + NC) - n0;
        const int64_t r0 = std::min(p.rows, mb * MB), r1 = std::min(p.rows, r0 + MB);
        if (!wbuf) {
            if (stop()) return false;
            gemm_rows_scalar(p, r0, r1, n0, n0 + nch);
            continue;
        }
        const int     nv  = (int) ((nch + 15) / 16);
        const int64_t rem = nch - 16 * (nv - 1);
        for (int64_t k0 = 0; k0 < K4; k0 += kc) {
            if (stop()) return false;
            const int64_t k1 = std::min(K4, k0 + kc);
            pack_block(p.w, p.K, p.N, n0, nch, k0, k1, wbuf);
            for (int64_t r = r0; r < r1; r += MR) {
                // a unit of many rows polls between row tiles too (a tile is at most 6 x 64 x K)
                if (((r - r0) / MR & 63) == 63 && stop()) return false;
                ukernel_args a;
                a.a         = p.a + r * p.lda + k0;
                a.lda       = p.lda;
                a.w         = wbuf;
                a.k4n       = (k1 - k0) / 4;
                a.y         = p.y + r * p.N + n0;
                a.ldy       = p.N;
                a.part      = p.partial ? p.partial + r * p.N + n0 : (int32_t *) a.y;
                a.ldp       = p.N;
                a.rowsum    = p.a_rowsum + r;
                a.sx        = p.a_scale + r;
                a.ws        = p.w_scale ? p.w_scale + n0 : nullptr;
                a.bias      = p.bias ? p.bias + n0 : nullptr;
                a.gate      = p.gate ? p.gate + n0 : nullptr;
                a.res       = p.residual ? p.residual + r * p.N + n0 : nullptr;
                a.last_mask = (__mmask16) (rem >= 16 ? 0xffffu : ((1u << rem) - 1));
                a.first     = k0 == 0;
                a.last      = k1 == K4;
                pick((int) std::min<int64_t>(MR, r1 - r), nv)(a);
            }
        }
    }
    return true;
}

#else

bool gemm_vnni(const gemm_problem & p, int ith, int nth, const abort_poll & stop) {
    return gemm_portable(p, ith, nth, stop);
}

bool gemm_vnni_splits_k(int64_t) { return false; } // the portable GEMM keeps whole sums

#endif

// The path -> GEMM choice, in one place (int8.cpp's phases and prepare ask only these).
bool gemm(path p, const gemm_problem & g, int ith, int nth, const abort_poll & stop) {
    switch (p) {
        case path::avx2: return gemm_avx2(g, ith, nth, stop);
        // no AMX kernel: resolve_path never returns amx; an AMX CPU runs the VNNI GEMM
        case path::vnni:
        case path::amx: return gemm_vnni(g, ith, nth, stop);
        case path::neon: return gemm_neon(g, ith, nth, stop);
        case path::dotprod: return gemm_dotprod(g, ith, nth, stop);
        case path::i8mm: return gemm_i8mm(g, ith, nth, stop);
        case path::automatic:
        case path::portable: break;
    }
    return gemm_portable(g, ith, nth, stop);
}

bool gemm_splits_k(path p, int64_t K) {
    switch (p) {
        case path::avx2: return gemm_avx2_splits_k(K);
        case path::vnni:
        case path::amx: return gemm_vnni_splits_k(K);
        case path::neon:
        case path::dotprod:
        case path::i8mm: // the AArch64 GEMMs keep whole-K sums in registers
        case path::automatic:
        case path::portable: break;
    }
    return false; // the portable GEMM keeps whole sums
}

// Only the VNNI offset trick starts from -128 * rowsum(a), and only it reads whole 4-byte k groups.
bool gemm_needs_rowsum(path p) { return p == path::vnni || p == path::amx; }
bool gemm_needs_k4(path p) { return p == path::vnni || p == path::amx; }

} // namespace sd_int8
