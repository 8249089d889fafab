// ops-mul-mat.cpp — portable MUL_MAT kernel: out[n, m] = sum_k a[k, n] * b[k, m] (facts 4.8).
//
// Precision (ARCHITECTURE choice): F16/BF16 weights are widened to F32 and multiplied by F32
// activations; everything accumulates in F32. Activations are never rounded to F16/BF16 here.
// Block-quantized weights (Q8_0, Q4_K, ...) go to ops-mul-mat-quant.cpp, which quantizes the
// activations to the weight type's dot type as upstream does. FP8 weights (F8_E4M3/F8_E5M2) take
// the portable path below, widened exactly to F32 per K chunk like F16/BF16 (no x86 GEMM for them).
//
// Structure: the output of each matrix pair is cut into blocks of (weight rows) x (activation
// rows); threads take contiguous runs of blocks. Inside a block, K is walked in chunks so that a
// chunk of the block's weight rows (widened to F32 when needed) stays in L1 while every
// activation row of the block is dotted with it through a small register tile.
//
// Work buffer layout: per thread [weight scratch (non-F32 weights)][activation scratch (src1 rows
// not packed F32, widened per block and K chunk)].
//
// Fast paths: on x86 CPUs at the avx2 level or above (cpu-isa.h), ops-mul-mat-x86.cpp takes over
// (packed GEMMs of the active level, see there and ops-mul-mat-avx2.cpp) unless params->use_ref
// forces this portable path; the work buffer is sized for any of them. The AVX2 GEMM takes
// F16/BF16 activations itself, and at the avx512 level such nodes run it too (the next lower
// level with a kernel for them); only a node no AVX2 kernel takes has its F16/BF16 activations
// widened to F32 in the work buffer first, so that it reaches the AVX-512 GEMM. On AArch64 CPUs (neon level and above)
// ops-mul-mat-neon.cpp takes over the same way (packed 8 x 12 FMLA GEMM, small-M dot products;
// F16/BF16 weights and activations widened exactly while packing); each family's entry points
// decline on the other's builds.

#include "cpu-isa.h"
#include "cpu-ops.h"
#include "ops-mul-mat-neon.h"
#include "ops-mul-mat-quant.h"
#include "ops-mul-mat-x86.h"
#include "ops-row.h"
#include "portable-dot.h"

#include <algorithm>
#include <cstring>

namespace {

constexpr int64_t MM_KC     = 256; // K chunk (elements)
static_assert(MM_KC % QK8_0 == 0, "a K chunk must hold whole Q8_0 blocks");
constexpr int64_t MM_NB_MAX = 16;  // weight rows per block (upper bound; the planner may shrink it)
constexpr int64_t MM_MB_MAX = 64;  // activation rows per block
constexpr int     MM_NR     = ggml_cpu_portable::DOT_NR; // register tile: weight rows
constexpr int     MM_MR     = ggml_cpu_portable::DOT_MR; // register tile: activation rows
constexpr size_t  MM_ALIGN  = 64;

inline size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

inline char * align_ptr(void * p) {
    return (char *) (((uintptr_t) p + MM_ALIGN - 1) & ~(uintptr_t) (MM_ALIGN - 1));
}

using ggml_cpu_portable::dot_block;
using ggml_cpu_portable::fp16_to_f32_inline;

inline void widen_row(enum ggml_type type, const void * src, float * dst, int64_t n) {
    ggml_cpu_portable::widen_row(type, src, dst, n, "mul_mat");
}

// Strided gather for activation rows whose elements are not adjacent (nb0 != element size).
void widen_row_strided(enum ggml_type type, const char * src, size_t stride, float * dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = ggml_load_f32(type, src + (size_t) i * stride);
}


bool src1_needs_conversion(const struct ggml_tensor * src1) {
    return src1->type != GGML_TYPE_F32 || src1->nb[0] != sizeof(float);
}

// Activation rows that are not packed F32 are widened per (block, K chunk) into the thread's
// scratch (MM_MB_MAX rows x MM_KC), not converted whole: the work buffer stays small when src1 is a
// large F16 matrix (stable-diffusion.cpp's conv_2d multiplies by its F16 kernel as src1).
size_t thread_scratch_bytes(const struct ggml_tensor * src0, const struct ggml_tensor * src1) {
    size_t bytes = 0;
    if (src0->type != GGML_TYPE_F32) bytes += align_up((size_t) (MM_NB_MAX * MM_KC) * sizeof(float), MM_ALIGN);
    if (src1_needs_conversion(src1)) bytes += align_up((size_t) (MM_MB_MAX * MM_KC) * sizeof(float), MM_ALIGN);
    return bytes;
}

struct block_plan {
    int64_t nb, mb;             // block extents
    int64_t n_blocks, m_blocks; // per matrix
};

// Shrink blocks until there are enough of them to keep every thread busy (M = 1 decode, or a
// handful of weight rows with many activation rows).
block_plan plan_blocks(int64_t N, int64_t M, int64_t n_mats, int nth) {
    block_plan p{MM_NB_MAX, MM_MB_MAX, 0, 0};
    for (;;) {
        p.n_blocks = (N + p.nb - 1) / p.nb;
        p.m_blocks = (M + p.mb - 1) / p.mb;
        if (p.n_blocks * p.m_blocks * n_mats >= 2 * (int64_t) nth) break;
        if (p.mb > 2 * MM_MR && M > p.mb / 2) {
            p.mb /= 2;
        } else if (p.nb > MM_NR && N > p.nb / 2) {
            p.nb /= 2;
        } else {
            break;
        }
    }
    return p;
}

// F16/BF16 activations (upstream's conv_2d/conv_1d compositions multiply an F16 im2col matrix by
// an F16 kernel as src1): the x86 fast path takes F32 activations only, so they are widened
// (exactly) into the work buffer first and the fast path runs on a copy of the node whose src1 is
// that F32 matrix. widened_node fills `b32`/`d32` and says whether this route applies.
// sizing: whether the route could run at any level (the cap may change until compute time).
bool widened_node(const struct ggml_tensor * dst, struct ggml_tensor * b32, struct ggml_tensor * d32,
                  bool sizing = false) {
    const struct ggml_tensor * b = dst->src[1];
    if (!b || (b->type != GGML_TYPE_F16 && b->type != GGML_TYPE_BF16)) return false;
    ggml_cpu_f32_twin(b, b32);
    *d32        = *dst;
    d32->src[1] = b32;
    return sizing ? ggml_cpu_mul_mat_x86_shape_ok(d32) : ggml_cpu_mul_mat_x86_usable(d32);
}

size_t widened_bytes(const struct ggml_tensor * b) {
    return align_up((size_t) ggml_nelements(b) * sizeof(float), MM_ALIGN);
}

} // namespace

bool ggml_cpu_mul_mat_supported(const struct ggml_tensor * dst) {
    const struct ggml_tensor * a = dst->src[0];
    const struct ggml_tensor * b = dst->src[1];
    if (!a || !b) return false;
    // block-quantized weights (Q8_0 included): activations quantized as upstream, ops-mul-mat-quant.cpp
    if (ggml_cpu_mul_mat_quant_applies(dst)) return ggml_cpu_mul_mat_quant_supported(dst);
    auto float_type = [](enum ggml_type t) {
        return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16;
    };
    // FP8 weights (sd.cpp's pinned ggml) are widened exactly per K chunk on the portable path
    const bool a_ok = float_type(a->type) || a->type == GGML_TYPE_F8_E4M3 || a->type == GGML_TYPE_F8_E5M2;
    if (!a_ok || !float_type(b->type) || dst->type != GGML_TYPE_F32) return false;
    // rows packed (which also rules out a transposed a); a row of <= 1 element has no layout to check
    if (a->ne[0] > 1 && a->nb[0] != ggml_type_size(a->type)) return false;
    if (dst->nb[0] != sizeof(float)) return false;
    if (a->ne[0] != b->ne[0]) return false;
    if (a->ne[2] == 0 || a->ne[3] == 0) return ggml_nelements(dst) == 0;
    return b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0;
}

size_t ggml_cpu_mul_mat_work_size(const struct ggml_tensor * dst, int n_threads) {
    const struct ggml_tensor * a = dst->src[0];
    const struct ggml_tensor * b = dst->src[1];
    if (ggml_cpu_mul_mat_quant_applies(dst)) return ggml_cpu_mul_mat_quant_work_size(dst, n_threads);
    const size_t bytes    = (size_t) n_threads * thread_scratch_bytes(a, b);
    const size_t portable = bytes == 0 ? 0 : bytes + MM_ALIGN; // + room to align the base
    // use_ref is not known here, so room for whichever path runs; the widened route runs only at
    // the avx512 level and only for nodes no x86 kernel takes directly (a node the AVX2 GEMM takes,
    // e.g. F16/BF16 src1, runs it at the avx512 level too), so only such a node on such a CPU sizes
    // the F32 copy of src1
    size_t fast = std::max(ggml_cpu_mul_mat_x86_work_size(dst, n_threads), ggml_cpu_mul_mat_neon_work_size(dst, n_threads));
    struct ggml_tensor b32, d32;
    if ((int) ggml_cpu_isa_detected() >= (int) ggml_cpu_isa::avx512 && !ggml_cpu_mul_mat_x86_shape_ok(dst) &&
        widened_node(dst, &b32, &d32, true)) {
        fast = std::max(fast, widened_bytes(b) + ggml_cpu_mul_mat_x86_work_size(&d32, n_threads) + MM_ALIGN);
    }
    return std::max(portable, fast);
}

const char * ggml_cpu_mul_mat_float_kernel(const struct ggml_tensor * dst) {
    if (const char * k = ggml_cpu_mul_mat_x86_kernel(dst)) return k;
    if (const char * k = ggml_cpu_mul_mat_neon_kernel(dst)) return k;
    struct ggml_tensor b32, d32;
    if (!widened_node(dst, &b32, &d32)) return nullptr;
    const char * k = ggml_cpu_mul_mat_x86_kernel(&d32);
    if (!k) return nullptr;
    // the x86 names are a fixed set of literals; each gets its widened variant once
    static const char * const names[][2] = {
        {"avx512 small-M dot (f32)", "avx512 small-M dot (f32), src1 widened to f32"},
        {"avx512 f32fma", "avx512 f32fma, src1 widened to f32"},
        {"avx512 bf16dot", "avx512 bf16dot, src1 widened to f32"},
        {"amx bf16", "amx bf16, src1 widened to f32"},
        {"avx2 small-M dot (f32)", "avx2 small-M dot (f32), src1 widened to f32"},
        {"avx2 f32fma", "avx2 f32fma, src1 widened to f32"},
    };
    for (const auto & n : names) {
        if (strcmp(n[0], k) == 0) return n[1];
    }
    return "x86, src1 widened to f32"; // a kernel name missing from the list above
}

void ggml_cpu_op_mul_mat(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    if (ggml_cpu_mul_mat_quant_applies(dst)) {
        ggml_cpu_mul_mat_quant(params, dst);
        return;
    }
    if (!params->use_ref && ggml_cpu_mul_mat_x86_usable(dst)) {
        ggml_cpu_mul_mat_x86(params, dst);
        return;
    }
    if (!params->use_ref && ggml_cpu_mul_mat_neon_usable(dst)) {
        ggml_cpu_mul_mat_neon(params, dst);
        return;
    }
    struct ggml_tensor b32, d32;
    if (!params->use_ref && widened_node(dst, &b32, &d32)) {
        const struct ggml_tensor * b = dst->src[1];
        GGML_ASSERT(params->wsize >= ggml_cpu_mul_mat_work_size(dst, params->nth) && "mul_mat: work buffer too small");
        char *        wbase = align_ptr(params->wdata);
        float *       x     = (float *) wbase;
        const int64_t K = b->ne[0], rows = b->ne[1] * b->ne[2] * b->ne[3];
        int64_t       r0, r1;
        ggml_cpu_split_range(rows, params->ith, params->nth, &r0, &r1);
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t i1 = r % b->ne[1], i2 = (r / b->ne[1]) % b->ne[2], i3 = r / (b->ne[1] * b->ne[2]);
            const char *  src = (const char *) b->data + i1 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3];
            if (b->nb[0] == ggml_type_size(b->type)) {
                widen_row(b->type, src, x + r * K, K);
            } else {
                widen_row_strided(b->type, src, b->nb[0], x + r * K, K);
            }
        }
        // every thread must reach the barrier, so no early abort return before it
        ggml_cpu_barrier(params);
        b32.data                  = x;
        ggml_compute_params inner = *params;
        inner.wdata               = wbase + widened_bytes(b);
        inner.wsize               = params->wsize - (size_t) ((char *) inner.wdata - (char *) params->wdata);
        ggml_cpu_mul_mat_x86(&inner, &d32);
        return;
    }

    const struct ggml_tensor * a = dst->src[0];
    const struct ggml_tensor * b = dst->src[1];

    const int ith = params->ith;
    const int nth = params->nth;

    const int64_t K  = a->ne[0];
    const int64_t N  = a->ne[1];
    const int64_t A2 = a->ne[2];
    const int64_t A3 = a->ne[3];
    const int64_t M  = b->ne[1];
    const int64_t B2 = b->ne[2];
    const int64_t B3 = b->ne[3];

    GGML_ASSERT(b->ne[0] == K && "mul_mat: a and b must have the same number of columns");
    GGML_ASSERT(dst->type == GGML_TYPE_F32 && dst->nb[0] == sizeof(float));
    GGML_ASSERT(dst->ne[0] == N && dst->ne[1] == M && dst->ne[2] == B2 && dst->ne[3] == B3);
    GGML_ASSERT((K <= 1 || a->nb[0] == ggml_type_size(a->type)) && "mul_mat: weight rows must be packed");

    if (N == 0 || M == 0 || B2 == 0 || B3 == 0) return;
    GGML_ASSERT(A2 > 0 && A3 > 0 && B2 % A2 == 0 && B3 % A3 == 0);
    const int64_t r2 = B2 / A2;
    const int64_t r3 = B3 / A3;

    const size_t need = ggml_cpu_mul_mat_work_size(dst, nth);
    GGML_ASSERT(params->wsize >= need && "mul_mat: work buffer too small");
    char * wbase = params->wdata ? align_ptr(params->wdata) : nullptr;

    // Activations whose rows are not packed F32 are widened per block and K chunk (below).
    const bool conv     = src1_needs_conversion(b);
    float *    wscratch = nullptr;
    float *    xscratch = nullptr;
    if (a->type != GGML_TYPE_F32 || conv) {
        GGML_ASSERT(wbase != nullptr);
        float * t = (float *) (wbase + (size_t) ith * thread_scratch_bytes(a, b));
        if (a->type != GGML_TYPE_F32) {
            wscratch = t;
            t += align_up((size_t) (MM_NB_MAX * MM_KC) * sizeof(float), MM_ALIGN) / sizeof(float);
        }
        if (conv) xscratch = t;
    }

    // Phase 2: blocks of the output.
    const block_plan p       = plan_blocks(N, M, B2 * B3, nth);
    const int64_t    n_units = p.n_blocks * p.m_blocks * B2 * B3;
    int64_t          u0, u1;
    ggml_cpu_split_range(n_units, ith, nth, &u0, &u1);

    float         acc[MM_NB_MAX * MM_MB_MAX];
    const float * arow[MM_NB_MAX];
    const float * brow[MM_MB_MAX];

    for (int64_t u = u0; u < u1; ++u) {
        if (ggml_cpu_should_abort(params)) return;

        // units: matrix outermost, then weight block, activation block innermost
        const int64_t mbi = u % p.m_blocks;
        const int64_t nbi = (u / p.m_blocks) % p.n_blocks;
        const int64_t mat = u / (p.m_blocks * p.n_blocks);
        const int64_t i2  = mat % B2;
        const int64_t i3  = mat / B2;

        const int64_t n0 = nbi * p.nb, nn = std::min(p.nb, N - n0);
        const int64_t m0 = mbi * p.mb, mm = std::min(p.mb, M - m0);

        const char * a_mat = (const char *) a->data + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3];

        std::fill(acc, acc + nn * mm, 0.0f);

        for (int64_t k0 = 0; k0 < K; k0 += MM_KC) {
            const int64_t kc = std::min(MM_KC, K - k0);

            for (int64_t n = 0; n < nn; ++n) {
                const char * src = a_mat + (n0 + n) * a->nb[1];
                if (a->type == GGML_TYPE_F32) {
                    arow[n] = (const float *) src + k0;
                } else {
                    float * w = wscratch + n * MM_KC;
                    // k0 is a multiple of MM_KC, so of any block size: byte offset of element k0
                    widen_row(a->type, src + ggml_row_size(a->type, k0), w, kc);
                    arow[n] = w;
                }
            }
            for (int64_t m = 0; m < mm; ++m) {
                if (conv) {
                    const char * src = (const char *) b->data + (m0 + m) * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3];
                    float *      x   = xscratch + m * MM_KC;
                    if (b->nb[0] == ggml_type_size(b->type)) {
                        widen_row(b->type, src + k0 * b->nb[0], x, kc);
                    } else {
                        widen_row_strided(b->type, src + k0 * b->nb[0], b->nb[0], x, kc);
                    }
                    brow[m] = x;
                } else {
                    brow[m] = (const float *) ((const char *) b->data + (m0 + m) * b->nb[1] + i2 * b->nb[2] +
                                               i3 * b->nb[3]) +
                              k0;
                }
            }
            dot_block(arow, nn, brow, mm, kc, acc, nn);
        }

        for (int64_t m = 0; m < mm; ++m) {
            float * out = (float *) ((char *) dst->data + (m0 + m) * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
            memcpy(out + n0, acc + m * nn, (size_t) nn * sizeof(float));
        }
    }
}
