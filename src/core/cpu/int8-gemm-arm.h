#pragma once

// int8-gemm-arm.h — the work split, the per-thread weight panel and the float epilogue shared by
// the AArch64 INT8 GEMMs (int8-gemm-neon.cpp, int8-gemm-dotprod.cpp, int8-gemm-i8mm.cpp). Each
// of those files supplies only its micro-kernel and its panel packing.
//
// Included by files compiled for different -march levels: everything here has internal linkage
// (an anonymous namespace), so the linker can never substitute one file's higher-level copy of a
// helper for another's (an inline or template function with external linkage could be merged
// across the files and run i8mm instructions on a dotprod-only CPU).
//
// Exactness: the micro-kernels keep the whole-K int32 sum in registers (exact: |sum| <= K * 2^14
// <= 2^31 - 1 for every K the schema admits), so K is never split and no partial sums pass
// through the output. The epilogue is gemm_epilogue's order, one rounding per step (explicit
// vmulq / vaddq, nothing fused): y = float(acc) * s_x; y * s_w; y + b; y * gate; residual + y.

#if defined(__aarch64__)

#include "int8-impl.h"

#include <arm_neon.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>

namespace sd_int8 {
namespace {

// One micro-tile's call: rows [0, R) of the tile starting at a (row stride lda), the whole K,
// against one micro-panel (packed by the kernel file's pack_panel, or for an unpacked kernel the
// weight row of the panel's first channel; wvalid channels of it exist).
struct tile_args {
    const int8_t * a;
    int64_t        lda;
    int            R;
    int64_t        K;
    const int8_t * w;
    int64_t        wvalid;
    int32_t *      out; // MR x NR int32 sums, row stride NR
};

// The epilogue of R rows x C channels of a tile's int32 sums (row stride ld), written to y.
inline void tile_epilogue(const gemm_problem & p, const int32_t * acc, int64_t ld, int64_t r0, int R, int64_t c0,
                          int64_t C) {
    for (int r = 0; r < R; ++r) {
        const int32_t *   s   = acc + r * ld;
        const float       sxs = p.a_scale[r0 + r];
        const float32x4_t sx  = vdupq_n_f32(sxs);
        float *           y   = p.y + (r0 + r) * p.N + c0;
        const float *     res = p.residual ? p.residual + (r0 + r) * p.N : nullptr;
        int64_t           c   = 0;
        for (; c + 4 <= C; c += 4) {
            const int64_t o = c0 + c;
            float32x4_t   f = vmulq_f32(vcvtq_f32_s32(vld1q_s32(s + c)), sx);
            if (p.w_scale) f = vmulq_f32(f, vld1q_f32(p.w_scale + o));
            if (p.bias) f = vaddq_f32(f, vld1q_f32(p.bias + o));
            if (p.gate) f = vmulq_f32(f, vld1q_f32(p.gate + o));
            // read before the store below: the residual may be y itself
            if (res) f = vaddq_f32(vld1q_f32(res + o), f);
            vst1q_f32(y + c, f);
        }
        for (; c < C; ++c) y[c] = gemm_epilogue(s[c], sxs, p, res, c0 + c);
    }
}

// The per-thread packed weight panel, grown on demand (64-byte aligned); NULL when out of memory.
inline int8_t * panel_buffer(size_t bytes) {
    struct buf {
        std::unique_ptr<int8_t[]> mem;
        size_t                    cap = 0;
    };
    static thread_local buf b;
    if (bytes > b.cap) {
        b.mem.reset(new (std::nothrow) int8_t[bytes + 64]);
        b.cap = b.mem ? bytes : 0;
        if (!b.mem) return nullptr;
    }
    return (int8_t *) (((uintptr_t) b.mem.get() + 63) & ~(uintptr_t) 63);
}

// Rows [k0, K) of a row (fewer than 16 bytes) copied into a zeroed 16-byte block: the ragged
// end of K goes through the same micro-kernel step as the rest.
inline void tail16(const int8_t * row, int64_t k0, int64_t K, int8_t * dst) {
    memset(dst, 0, 16);
    memcpy(dst, row + k0, (size_t) (K - k0));
}

// The GEMM: work units are (a panel of micro-panels) x (a block of rows), claimed from
// gemm_problem::next_unit when set (a descheduled thread then does not hold up the others).
// A unit packs its micro-panels once (packing kernels), then runs every row tile of its block
// over them. KERNEL: MR, NR, packs, panel_bytes(K), pack_panel(w, K, N, c0, dst), tile(args).
template <class KERNEL> bool gemm_driver(const gemm_problem & p, int ith, int nth, const abort_poll & stop) {
    constexpr int MR = KERNEL::MR, NR = KERNEL::NR;
    const size_t  pb = KERNEL::packs ? KERNEL::panel_bytes(p.K) : 0;
    // micro-panels per unit: the packed panel stays within ~256 KiB (L2) while the row tiles
    // pass over it; the unpacked kernel reads the weight rows in place
    const int64_t per_unit = KERNEL::packs ? std::max<int64_t>(1, std::min<int64_t>(4, (256 * 1024) / (int64_t) pb)) : 4;
    const int64_t NC       = per_unit * NR;
    const int64_t n_nb     = (p.N + NC - 1) / NC;
    // about 16 units per thread (as the x86 GEMMs): the last ones leave little idle time
    const int64_t want_mb = (16 * nth + n_nb - 1) / n_nb;
    const int64_t n_mb    = std::max<int64_t>(1, std::min(want_mb, (p.rows + MR - 1) / MR));
    const int64_t MB      = pad_up((p.rows + n_mb - 1) / n_mb, MR);
    const int64_t n_units = n_nb * n_mb;
    int8_t *      panel   = KERNEL::packs ? panel_buffer(pb * (size_t) per_unit) : nullptr;
    alignas(16) int32_t acc[MR * NR];
    int64_t u0, u1;
    thread_share(n_units, ith, nth, u0, u1);
    for (int64_t i = u0;; ++i) {
        const int64_t u = p.next_unit ? p.next_unit->fetch_add(1, std::memory_order_relaxed) : i;
        if (u >= (p.next_unit ? n_units : u1)) break;
        if (stop()) return false;
        const int64_t nb = u / n_mb, mb = u % n_mb;
        const int64_t n0 = nb * NC, n1 = std::min(p.N, n0 + NC);
        const int64_t r0 = std::min(p.rows, mb * MB), r1 = std::min(p.rows, r0 + MB);
        if (r0 >= r1) continue;
        if (KERNEL::packs && !panel) {
            gemm_rows_scalar(p, r0, r1, n0, n1);
            continue;
        }
        const int n_panels = (int) ((n1 - n0 + NR - 1) / NR);
        if (KERNEL::packs) {
            for (int j = 0; j < n_panels; ++j) KERNEL::pack_panel(p.w, p.K, p.N, n0 + (int64_t) j * NR, panel + j * pb);
        }
        for (int64_t r = r0; r < r1; r += MR) {
            // a unit of many rows polls between row tiles too
            if (((r - r0) / MR & 63) == 63 && stop()) return false;
            const int R = (int) std::min<int64_t>(MR, r1 - r);
            for (int j = 0; j < n_panels; ++j) {
                const int64_t c0 = n0 + (int64_t) j * NR;
                const int64_t C  = std::min<int64_t>(NR, p.N - c0);
                tile_args     t;
                t.a      = p.a + r * p.lda;
                t.lda    = p.lda;
                t.R      = R;
                t.K      = p.K;
                t.w      = KERNEL::packs ? panel + j * pb : p.w + c0 * p.K;
                t.wvalid = C;
                t.out    = acc;
                KERNEL::tile(t);
                tile_epilogue(p, acc, NR, r, R, c0, C);
            }
        }
    }
    return true;
}

} // namespace
} // namespace sd_int8

#endif
