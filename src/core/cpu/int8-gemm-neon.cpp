// INT8 GEMM for baseline AArch64 Advanced SIMD (ARMv8-A, no dot-product instructions): exact
// int32 sums, then gemm_portable's epilogue (int8-gemm-arm.h's tile_epilogue).
//
// Exactness: vmull_s8 forms the 8 products of 8 byte pairs in int16 (|a * b| <= 128 * 128 =
// 2^14, exact for any int8 values, -128 included) and vpadalq_s16 adds adjacent product pairs
// into the int32 lanes. vmlal_s8 (summing two products in int16) is avoided on purpose: two
// products of -128 * -128 make 32768, which does not fit int16.
//
// Micro-tile: 4 rows x 4 channels, one int32x4 accumulator per (row, channel) over 16 k at a
// time (16 registers), the 4 activation rows and 4 weight rows loaded straight from their
// matrices (no packing: a weight row is contiguous in k); the lanes are added up at the end.
// Per 16 k: 8 loads, 32 vmull(_high)_s8, 32 vpadalq_s16 for 256 multiply-adds.

#include "int8-impl.h"

#if defined(__aarch64__)

#include "int8-gemm-arm.h"

namespace sd_int8 {
namespace {

struct neon_kernel {
    static constexpr int  MR = 4, NR = 4;
    static constexpr bool packs = false;
    static size_t         panel_bytes(int64_t) { return 0; }
    static void           pack_panel(const int8_t *, int64_t, int64_t, int64_t, int8_t *) {}

    template <int R> static void tile_r(const tile_args & t) {
        const int8_t * ar[4];
        const int8_t * wr[4];
        for (int r = 0; r < 4; ++r) ar[r] = t.a + std::min(r, R - 1) * t.lda;
        // channels past the panel's valid ones read the last valid row; their sums are dropped
        for (int c = 0; c < 4; ++c) wr[c] = t.w + std::min<int64_t>(c, t.wvalid - 1) * t.K;
        int32x4_t acc[R][4];
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < 4; ++c) acc[r][c] = vdupq_n_s32(0);
        const int64_t kmain = t.K / 16 * 16;
        for (int64_t k = 0; k < kmain; k += 16) {
            int8x16_t w[4];
            for (int c = 0; c < 4; ++c) w[c] = vld1q_s8(wr[c] + k);
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
                const int8x16_t a = vld1q_s8(ar[r] + k);
#pragma GCC unroll 4
                for (int c = 0; c < 4; ++c) {
                    acc[r][c] = vpadalq_s16(acc[r][c], vmull_s8(vget_low_s8(a), vget_low_s8(w[c])));
                    acc[r][c] = vpadalq_s16(acc[r][c], vmull_high_s8(a, w[c]));
                }
            }
        }
        for (int r = 0; r < R; ++r) {
            for (int c = 0; c < 4; ++c) {
                int32_t s = vaddvq_s32(acc[r][c]);
                for (int64_t k = kmain; k < t.K; ++k) s += (int32_t) ar[r][k] * (int32_t) wr[c][k];
                t.out[r * NR + c] = s;
            }
        }
    }

    static void tile(const tile_args & t) {
        switch (t.R) {
            case 1: tile_r<1>(t); break;
            case 2: tile_r<2>(t); break;
            case 3: tile_r<3>(t); break;
            default: tile_r<4>(t); break;
        }
    }
};

} // namespace

bool gemm_neon(const gemm_problem & p, int ith, int nth, const abort_poll & stop) {
    return gemm_driver<neon_kernel>(p, ith, nth, stop);
}

} // namespace sd_int8

#else

namespace sd_int8 {
bool gemm_neon(const gemm_problem & p, int ith, int nth, const abort_poll & stop) {
    return gemm_portable(p, ith, nth, stop);
}
} // namespace sd_int8

#endif
