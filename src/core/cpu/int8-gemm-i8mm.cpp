// INT8 GEMM with the Armv8.6 int8 matrix multiply (SMMLA, FEAT_I8MM): exact int32 sums, then
// gemm_portable's epilogue (int8-gemm-arm.h's tile_epilogue). Compiled with
// -march=armv8.2-a+dotprod+fp16+i8mm+bf16 and called only when the "i8mm" level is allowed.
//
// vmmlaq_s32(acc, A, B): A holds 2 rows x 8 k (one row per 64-bit half), B 2 channels x 8 k;
// acc (2 x 2 int32: r0c0, r0c1, r1c0, r1c1) += A B^T, 32 signed multiply-adds, exact for any
// int8 values (-128 included).
//
// Micro-tile: 8 rows x 8 channels = 4 row pairs x 4 channel pairs = 16 accumulators. The weight
// micro-panel is packed per 8-byte k group as channel pairs (channel 2p's 8 bytes, then channel
// 2p+1's). The activation rows are read as they are, 16 bytes per row and step; vzip1q/vzip2q on
// 64-bit lanes make the row-pair operands of the step's two k groups (no activation packing).
// Per 16 k: 8 activation loads + 8 zips, 8 weight loads, 32 SMMLA (1024 multiply-adds); 16
// accumulators + 8 pair operands + 1-2 weight vectors live.

#include "int8-impl.h"

#if defined(__aarch64__)

#include "int8-gemm-arm.h"

namespace sd_int8 {
namespace {

inline int8x16_t zip_lo64(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
inline int8x16_t zip_hi64(int8x16_t a, int8x16_t b) {
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

struct i8mm_kernel {
    static constexpr int  MR = 8, NR = 8;
    static constexpr bool packs = true;
    static size_t         panel_bytes(int64_t K) { return (size_t) pad_up(K, 16) * NR; }

    // Channels [c0, c0 + 8) x k [0, pad16(K)) into d: k group g (8 bytes) holds channel pair p
    // at d + (4 g + p) * 16. Channels at or past N and k at or past K are zeros.
    static void pack_panel(const int8_t * w, int64_t K, int64_t N, int64_t c0, int8_t * d) {
        const int64_t K16 = pad_up(K, 16);
        alignas(16) int8_t tail[2][16];
        for (int pr = 0; pr < 4; ++pr) {
            for (int64_t k = 0; k < K16; k += 16) {
                int8x16_t x[2];
                for (int i = 0; i < 2; ++i) {
                    const int64_t c = c0 + 2 * pr + i;
                    if (c >= N) {
                        x[i] = vdupq_n_s8(0);
                    } else if (k + 16 <= K) {
                        x[i] = vld1q_s8(w + c * K + k);
                    } else {
                        tail16(w + c * K, k, K, tail[i]);
                        x[i] = vld1q_s8(tail[i]);
                    }
                }
                vst1q_s8(d + ((k / 8) * 4 + pr) * 16, zip_lo64(x[0], x[1]));
                vst1q_s8(d + ((k / 8 + 1) * 4 + pr) * 16, zip_hi64(x[0], x[1]));
            }
        }
    }

    // One 16-k step over PR row pairs: rows[i] + off are the rows' 16 bytes, wp the step's two
    // packed k groups.
    template <int PR>
    static inline void step16(int32x4_t (&acc)[PR][4], const int8_t * const * rows, int64_t off, const int8_t * wp) {
        int8x16_t lo[PR], hi[PR];
#pragma GCC unroll 4
        for (int i = 0; i < PR; ++i) {
            const int8x16_t r0 = vld1q_s8(rows[2 * i] + off), r1 = vld1q_s8(rows[2 * i + 1] + off);
            lo[i] = zip_lo64(r0, r1);
            hi[i] = zip_hi64(r0, r1);
        }
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
            const int8x16_t w = vld1q_s8(wp + 16 * p);
#pragma GCC unroll 4
            for (int i = 0; i < PR; ++i) acc[i][p] = vmmlaq_s32(acc[i][p], lo[i], w);
        }
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
            const int8x16_t w = vld1q_s8(wp + 64 + 16 * p);
#pragma GCC unroll 4
            for (int i = 0; i < PR; ++i) acc[i][p] = vmmlaq_s32(acc[i][p], hi[i], w);
        }
    }

    template <int PR> static void tile_pr(const tile_args & t) {
        // an odd row count pairs its last row with itself; that sum is dropped
        const int8_t * rows[2 * PR];
        for (int r = 0; r < 2 * PR; ++r) rows[r] = t.a + std::min(r, t.R - 1) * t.lda;
        int32x4_t acc[PR][4];
        for (int i = 0; i < PR; ++i)
            for (int p = 0; p < 4; ++p) acc[i][p] = vdupq_n_s32(0);
        const int64_t  kmain = t.K / 16 * 16;
        const int8_t * wp    = t.w;
        for (int64_t k = 0; k < kmain; k += 16, wp += 16 * NR) step16<PR>(acc, rows, k, wp);
        if (kmain < t.K) { // the ragged end of K, zero padded like the packed panel
            alignas(16) int8_t tail[2 * PR][16];
            const int8_t *     trows[2 * PR];
            for (int r = 0; r < 2 * PR; ++r) {
                tail16(rows[r], kmain, t.K, tail[r]);
                trows[r] = tail[r];
            }
            step16<PR>(acc, trows, 0, wp);
        }
        // acc[i][p] = (r0 c0, r0 c1, r1 c0, r1 c1) for rows 2i, 2i+1 and channels 2p, 2p+1
        for (int i = 0; i < PR; ++i) {
            for (int p = 0; p < 4; ++p) {
                vst1_s32(t.out + (2 * i) * NR + 2 * p, vget_low_s32(acc[i][p]));
                vst1_s32(t.out + (2 * i + 1) * NR + 2 * p, vget_high_s32(acc[i][p]));
            }
        }
    }

    static void tile(const tile_args & t) {
        switch ((t.R + 1) / 2) {
            case 1: tile_pr<1>(t); break;
            case 2: tile_pr<2>(t); break;
            case 3: tile_pr<3>(t); break;
            default: tile_pr<4>(t); break;
        }
    }
};

} // namespace

bool gemm_i8mm(const gemm_problem & p, int ith, int nth, const abort_poll & stop) {
    return gemm_driver<i8mm_kernel>(p, ith, nth, stop);
}

} // namespace sd_int8

#else

namespace sd_int8 {
bool gemm_i8mm(const gemm_problem & p, int ith, int nth, const abort_poll & stop) {
    return gemm_portable(p, ith, nth, stop);
}
} // namespace sd_int8

#endif
