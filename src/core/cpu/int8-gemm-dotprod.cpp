// INT8 GEMM with the Armv8.2 dot product (SDOT, FEAT_DotProd): exact int32 sums, then
// gemm_portable's epilogue (int8-gemm-arm.h's tile_epilogue). Compiled with
// -march=armv8.2-a+dotprod+fp16 and called only when the "dotprod" level is allowed.
//
// SDOT is signed x signed, so unlike the x86 VNNI path no weight offset and no row sums are
// needed, and -128 on either side is exact (4 products of at most 2^14 per lane step).
//
// Micro-tile: 8 rows x 8 channels = 16 int32x4 accumulators (acc[r][q]: row r, channels
// 4q..4q+3). The weight micro-panel is packed per 4-byte k group: 8 channels x 4 bytes = two
// vectors of 4 channels. The activation rows are read as they are, 16 bytes (4 k groups) per row
// and step, and vdotq_laneq_s32 picks k group j of the row as lane j: no activation packing.
// Per 16 k: 8 activation loads + 8 weight loads, 64 SDOT (1024 multiply-adds); 16 + 8 + 2 of
// the 32 vector registers live.

#include "int8-impl.h"

#if defined(__aarch64__)

#include "int8-gemm-arm.h"

namespace sd_int8 {
namespace {

// 4 x 4 transpose of 32-bit lanes: x[i] lane j <-> x[j] lane i.
inline void transpose4_s32(int32x4_t & x0, int32x4_t & x1, int32x4_t & x2, int32x4_t & x3) {
    const int32x4_t t0 = vzip1q_s32(x0, x1), t1 = vzip2q_s32(x0, x1);
    const int32x4_t t2 = vzip1q_s32(x2, x3), t3 = vzip2q_s32(x2, x3);
    x0 = vreinterpretq_s32_s64(vzip1q_s64(vreinterpretq_s64_s32(t0), vreinterpretq_s64_s32(t2)));
    x1 = vreinterpretq_s32_s64(vzip2q_s64(vreinterpretq_s64_s32(t0), vreinterpretq_s64_s32(t2)));
    x2 = vreinterpretq_s32_s64(vzip1q_s64(vreinterpretq_s64_s32(t1), vreinterpretq_s64_s32(t3)));
    x3 = vreinterpretq_s32_s64(vzip2q_s64(vreinterpretq_s64_s32(t1), vreinterpretq_s64_s32(t3)));
}

struct dotprod_kernel {
    static constexpr int  MR = 8, NR = 8;
    static constexpr bool packs = true;
    static size_t         panel_bytes(int64_t K) { return (size_t) pad_up(K, 16) * NR; }

    // Channels [c0, c0 + 8) x k [0, pad16(K)) into d: k group s (4 bytes) holds the vectors
    // (channels 0..3, channels 4..7) at d + (2 s + q) * 16. Channels at or past N and k at or
    // past K are zeros.
    static void pack_panel(const int8_t * w, int64_t K, int64_t N, int64_t c0, int8_t * d) {
        const int64_t K16 = pad_up(K, 16);
        alignas(16) int8_t tail[4][16];
        for (int q = 0; q < 2; ++q) {
            for (int64_t k = 0; k < K16; k += 16) {
                int32x4_t x[4];
                for (int i = 0; i < 4; ++i) {
                    const int64_t c = c0 + 4 * q + i;
                    if (c >= N) {
                        x[i] = vdupq_n_s32(0);
                    } else if (k + 16 <= K) {
                        x[i] = vreinterpretq_s32_s8(vld1q_s8(w + c * K + k));
                    } else {
                        tail16(w + c * K, k, K, tail[i]);
                        x[i] = vreinterpretq_s32_s8(vld1q_s8(tail[i]));
                    }
                }
                transpose4_s32(x[0], x[1], x[2], x[3]);
                for (int j = 0; j < 4; ++j) vst1q_s8(d + ((k / 4 + j) * 2 + q) * 16, vreinterpretq_s8_s32(x[j]));
            }
        }
    }

    // One 16-k step: rows[r] + off are the rows' 16 bytes, wp the step's 4 packed k groups.
    template <int R>
    static inline void step16(int32x4_t (&acc)[R][2], const int8_t * const * rows, int64_t off, const int8_t * wp) {
        int8x16_t a[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) a[r] = vld1q_s8(rows[r] + off);
#define SD_DOT_LANE(j)                                                                             \
    {                                                                                              \
        const int8x16_t w0 = vld1q_s8(wp + 32 * (j)), w1 = vld1q_s8(wp + 32 * (j) + 16);           \
        _Pragma("GCC unroll 8") for (int r = 0; r < R; ++r) {                                      \
            acc[r][0] = vdotq_laneq_s32(acc[r][0], w0, a[r], j);                                   \
            acc[r][1] = vdotq_laneq_s32(acc[r][1], w1, a[r], j);                                   \
        }                                                                                          \
    }
        SD_DOT_LANE(0) SD_DOT_LANE(1) SD_DOT_LANE(2) SD_DOT_LANE(3)
#undef SD_DOT_LANE
    }

    template <int R> static void tile_r(const tile_args & t) {
        const int8_t * rows[R];
        for (int r = 0; r < R; ++r) rows[r] = t.a + r * t.lda;
        int32x4_t acc[R][2];
        for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = vdupq_n_s32(0);
        const int64_t kmain = t.K / 16 * 16;
        const int8_t * wp   = t.w;
        for (int64_t k = 0; k < kmain; k += 16, wp += 16 * NR) step16<R>(acc, rows, k, wp);
        if (kmain < t.K) { // the ragged end of K, zero padded like the packed panel
            alignas(16) int8_t tail[R][16];
            const int8_t *     trows[R];
            for (int r = 0; r < R; ++r) {
                tail16(rows[r], kmain, t.K, tail[r]);
                trows[r] = tail[r];
            }
            step16<R>(acc, trows, 0, wp);
        }
        for (int r = 0; r < R; ++r) {
            vst1q_s32(t.out + r * NR, acc[r][0]);
            vst1q_s32(t.out + r * NR + 4, acc[r][1]);
        }
    }

    static void tile(const tile_args & t) {
        switch (t.R) {
            case 1: tile_r<1>(t); break;
            case 2: tile_r<2>(t); break;
            case 3: tile_r<3>(t); break;
            case 4: tile_r<4>(t); break;
            case 5: tile_r<5>(t); break;
            case 6: tile_r<6>(t); break;
            case 7: tile_r<7>(t); break;
            default: tile_r<8>(t); break;
        }
    }
};

} // namespace

bool gemm_dotprod(const gemm_problem & p, int ith, int nth, const abort_poll & stop) {
    return gemm_driver<dotprod_kernel>(p, ith, nth, stop);
}

} // namespace sd_int8

#else

namespace sd_int8 {
bool gemm_dotprod(const gemm_problem & p, int ith, int nth, const abort_poll & stop) {
    return gemm_portable(p, ith, nth, stop);
}
} // namespace sd_int8

#endif
