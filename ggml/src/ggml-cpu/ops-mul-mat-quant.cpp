// ops-mul-mat-quant.cpp — MUL_MAT with block-quantized weights: out[n, m] = dot(a row n, b row m).
//
// Semantics (as upstream ggml's CPU backend): each activation row is quantized to the weight
// type's vec_dot_type (Q8_0, Q8_1 or Q8_K) with the reference quantize_act, and each output is
// that type's dot product (integer sums per block, scaled in F32). The portable path calls
// vec_dot_ref per output (it IS the reference); the fast path (quant-dot-fast.h: AVX512-VNNI tiles)
// computes the same integer sums and differs only in the order of the F32 scaling and sums.
//
// Phases: (1) the activation rows are quantized once into the work buffer (the AVX-512 quantizers
// of quant-act-fast.h: the reference's bytes), rows split over the threads, then a barrier; (2)
// the output is cut into blocks of (weight rows) x (activation rows) which the threads take in
// contiguous runs; a block's weight rows stay in cache while all its
// activation rows pass.
//
// Work buffer: [quantized activation rows, each padded to 64 bytes][per-thread F32 row scratch].
//
// Types without a fast tile (Q2_K, Q3_K) take the dequantizing route where the active level has an
// x86 F32 GEMM (AVX-512 or AVX2) and the kernel choice is vnni: each activation row is quantized to
// vec_dot_type as above and dequantized back to F32 (the exact values the dot product multiplies),
// the weights are dequantized exactly while the GEMM packs them (ops-mul-mat-x86.cpp,
// ops-mul-mat-avx2.cpp; on AArch64 ops-mul-mat-neon.cpp), and products and sums are F32 instead of
// integer: within F32 rounding of vec_dot_ref, ~100x the portable path's speed.
// Work buffer then: [F32 activation rows][per-thread row scratch][the F32 GEMM's own work].

#include "ops-mul-mat-quant.h"

#include "formats/ggml-quants.h"
#include "kernel-choice.h"
#include "ops-mul-mat-neon.h"
#include "ops-mul-mat-x86.h"
#include "ops-row.h"
#include "quant-act-fast.h"
#include "quant-dot-fast.h"

#include <algorithm>
#include <cstring>

namespace {

constexpr size_t  QMM_ALIGN  = 64;
constexpr int64_t QMM_NB_MAX = 16; // weight rows per block
constexpr int64_t QMM_MB_MAX = 64; // activation rows per block

inline size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

inline char * align_ptr(void * p) {
    return (char *) (((uintptr_t) p + QMM_ALIGN - 1) & ~(uintptr_t) (QMM_ALIGN - 1));
}

// bytes of one quantized activation row as the reference quantizer writes it
size_t std_act_bytes(const ggml_quant_dot_traits * tr, int64_t K) {
    return align_up(ggml_row_size(tr->vec_dot_type, K), QMM_ALIGN);
}

// stride of the activation rows in the work buffer for the kernel that runs (fast: may be repacked)
size_t act_stride(const ggml_quant_dot_traits * tr, const ggml_quant_dot_fast * fast, int64_t K) {
    if (fast && fast->act_repack) return align_up(fast->act_row_bytes(K), QMM_ALIGN);
    return std_act_bytes(tr, K);
}

// activation rows that are not packed F32 are gathered into a per-thread F32 row first
bool needs_gather(const ggml_tensor * b) { return b->type != GGML_TYPE_F32 || b->nb[0] != sizeof(float); }

// Activation row r (r = i1 + M * (i2 + B2 * i3)) as packed F32: in place, or gathered into `gather`
// (non-NULL exactly when needs_gather(b)).
const float * activation_row(const ggml_tensor * b, int64_t r, float * gather) {
    int64_t i1, i2, i3;
    ggml_cpu_row_coords(r, b->ne, &i1, &i2, &i3);
    const char * src = (const char *) b->data + i1 * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3];
    if (!gather) return (const float *) src;
    ggml_cpu_load_row(b->type, src, b->nb[0], b->ne[0], gather);
    return gather;
}

size_t gather_bytes(const ggml_tensor * b) {
    return needs_gather(b) ? align_up((size_t) b->ne[0] * sizeof(float), QMM_ALIGN) : 0;
}

const ggml_quant_dot_fast * fast_kernel(const ggml_tensor * a, bool use_ref) {
    if (use_ref) return nullptr;
    if (ggml_cpu_kernel_for(ggml_cpu_kernel_family::mul_mat_quant) != ggml_cpu_kernel::vnni) return nullptr;
    return ggml_cpu_quant_dot_fast(a->type);
}

// The dequantizing route (see the top): whether it runs this node, with b32 / d32 set to the F32
// activation matrix (data not yet set) and the node that multiplies the weights by it;
// route_nodes: the same without the run-time conditions (use_ref, the kernel choice), for sizing.
bool route_nodes(const ggml_tensor * dst, ggml_tensor * b32, ggml_tensor * d32) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    if (ggml_cpu_quant_dot_fast(a->type)) return false;
    if (!ggml_cpu_mul_mat_x86_dequantizes(a->type) && !ggml_cpu_mul_mat_neon_dequantizes(a->type)) return false;
    ggml_cpu_f32_twin(b, b32);
    *d32        = *dst;
    d32->src[1] = b32;
    // any level's GEMM (the cap may change until compute); each family's declines on the other's builds
    return ggml_cpu_mul_mat_x86_shape_ok(d32) || ggml_cpu_mul_mat_neon_shape_ok(d32);
}

// The F32 GEMM of the active level that runs the route's node (x86 or AArch64).
bool route_gemm_usable(const ggml_tensor * d32) {
    return ggml_cpu_mul_mat_x86_usable(d32) || ggml_cpu_mul_mat_neon_usable(d32);
}

bool dequant_route(const ggml_tensor * dst, bool use_ref, ggml_tensor * b32, ggml_tensor * d32) {
    if (use_ref || ggml_cpu_kernel_for(ggml_cpu_kernel_family::mul_mat_quant) != ggml_cpu_kernel::vnni) return false;
    return route_nodes(dst, b32, d32) && route_gemm_usable(d32);
}

size_t f32_rows_bytes(const ggml_tensor * b) {
    return align_up((size_t) (b->ne[0] * b->ne[1] * b->ne[2] * b->ne[3]) * sizeof(float), QMM_ALIGN);
}

// The activation quantizer: the AVX-512 one (bit-identical, quant-act-fast.h) unless the portable
// path is forced, which runs the reference itself.
ggml_quantize_act_fn act_quantizer(const ggml_quant_dot_traits * tr, bool use_ref) {
    const ggml_quantize_act_fn fast = use_ref ? nullptr : ggml_cpu_quantize_act_fast(tr->vec_dot_type);
    return fast ? fast : tr->quantize_act;
}

struct block_plan {
    int64_t nb, mb, n_blocks, m_blocks;
};

// Shrink blocks until every thread has work (small M or N).
block_plan plan_blocks(int64_t N, int64_t M, int64_t n_mats, int nth) {
    block_plan p{QMM_NB_MAX, QMM_MB_MAX, 0, 0};
    for (;;) {
        p.n_blocks = (N + p.nb - 1) / p.nb;
        p.m_blocks = (M + p.mb - 1) / p.mb;
        if (p.n_blocks * p.m_blocks * n_mats >= 2 * (int64_t) nth) break;
        if (p.mb > 4 && M > p.mb / 2) {
            p.mb /= 2;
        } else if (p.nb > 4 && N > p.nb / 2) {
            p.nb /= 2;
        } else {
            break;
        }
    }
    return p;
}

// The portable tile: vec_dot_ref per output.
void ref_tile(const ggml_quant_dot_traits * tr, int64_t K, const char * w, size_t w_stride, int nr, const char * x,
              size_t x_stride, int nc, float * out, size_t ldo) {
    for (int c = 0; c < nc; ++c) {
        for (int r = 0; r < nr; ++r) {
            tr->vec_dot_ref(K, &out[c * ldo + r], w + r * w_stride, x + c * x_stride);
        }
    }
}

} // namespace

bool ggml_cpu_mul_mat_quant_applies(const struct ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    return a && ggml_blck_size(a->type) > 1;
}

bool ggml_cpu_mul_mat_quant_supported(const struct ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    if (!a || !b) return false;
    const ggml_quant_dot_traits * tr = ggml_get_quant_dot_traits(a->type);
    if (!tr || !tr->quantize_act || !tr->vec_dot_ref) return false;
    if (ggml_get_type_traits(a->type)->type_name == nullptr) return false;
    if (a->ne[0] % ggml_blck_size(a->type) != 0) return false;
    if (a->nb[0] != ggml_type_size(a->type)) return false; // packed rows (no transposed weights)
    // F32 activations, as upstream (the kernel could gather F16/BF16 too, but no case checks it)
    if (b->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 || dst->nb[0] != sizeof(float)) return false;
    if (a->ne[0] != b->ne[0]) return false;
    if (a->ne[2] == 0 || a->ne[3] == 0) return ggml_nelements(dst) == 0;
    return b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0;
}

// [activation rows][per thread: F32 gather row, reference-layout row (repacked from)]; use_ref and
// the kernel choice are not known here, so room for either layout
size_t ggml_cpu_mul_mat_quant_work_size(const struct ggml_tensor * dst, int n_threads) {
    const ggml_tensor *           a  = dst->src[0];
    const ggml_tensor *           b  = dst->src[1];
    const ggml_quant_dot_traits * tr = ggml_get_quant_dot_traits(a->type);
    if (!tr) return 0;
    const int64_t               rows   = b->ne[1] * b->ne[2] * b->ne[3];
    const int64_t               K      = b->ne[0];
    const size_t                stride = std::max(act_stride(tr, nullptr, K), act_stride(tr, ggml_cpu_quant_dot_fast(a->type), K));
    const size_t scratch = (size_t) n_threads * (gather_bytes(b) + std_act_bytes(tr, K));
    size_t       bytes   = QMM_ALIGN + (size_t) rows * stride + scratch;
    ggml_tensor  b32, d32;
    // the route's room whenever it could run (use_ref and the kernel choice may change until then)
    if (route_nodes(dst, &b32, &d32)) {
        bytes = std::max(bytes, QMM_ALIGN + f32_rows_bytes(b) + scratch +
                                    std::max(ggml_cpu_mul_mat_x86_work_size(&d32, n_threads),
                                             ggml_cpu_mul_mat_neon_work_size(&d32, n_threads)));
    }
    return bytes;
}

const char * ggml_cpu_mul_mat_quant_kernel(const struct ggml_tensor * dst, bool use_ref) {
    const ggml_quant_dot_fast * f = fast_kernel(dst->src[0], use_ref);
    if (f) return f->name;
    ggml_tensor b32, d32;
    if (dequant_route(dst, use_ref, &b32, &d32)) {
        if (const char * k = ggml_cpu_mul_mat_x86_dequant_kernel(&d32)) return k;
        return ggml_cpu_mul_mat_neon_dequant_kernel(&d32);
    }
    return "portable vec_dot_ref";
}

namespace {

// The dequantizing route: phase 1 as below but each quantized row is dequantized into F32 rows,
// then the F32 GEMM (all threads) on d32.
void mul_mat_dequantized(const struct ggml_compute_params * params, const ggml_tensor * dst, ggml_tensor & b32,
                         ggml_tensor & d32) {
    const ggml_tensor *           a  = dst->src[0];
    const ggml_tensor *           b  = dst->src[1];
    const ggml_quant_dot_traits * tr = ggml_get_quant_dot_traits(a->type);
    const int64_t                 K  = b->ne[0];
    const int64_t                 n_rows = b->ne[1] * b->ne[2] * b->ne[3];
    char *                        wbase  = align_ptr(params->wdata);
    float *                       x32    = (float *) wbase;
    const size_t                  per_thread = gather_bytes(b) + std_act_bytes(tr, K);
    char *                        mine       = wbase + f32_rows_bytes(b) + (size_t) params->ith * per_thread;
    float *                       gather     = needs_gather(b) ? (float *) mine : nullptr;
    char *                        std_row    = mine + gather_bytes(b);
    const auto                    dequantize = ggml_get_type_traits(tr->vec_dot_type)->to_float;
    const ggml_quantize_act_fn    quantize   = act_quantizer(tr, false);
    int64_t                       r0, r1;
    ggml_cpu_split_range(n_rows, params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; ++r) {
        quantize(activation_row(b, r, gather), std_row, K);
        dequantize(std_row, x32 + r * K, K);
    }
    // every thread must reach the barrier, so no early abort return before it
    ggml_cpu_barrier(params);
    b32.data                  = x32;
    ggml_compute_params inner = *params;
    inner.wdata               = wbase + f32_rows_bytes(b) + (size_t) params->nth * per_thread;
    inner.wsize               = params->wsize - (size_t) ((char *) inner.wdata - (char *) params->wdata);
    if (ggml_cpu_mul_mat_x86_usable(&d32)) {
        ggml_cpu_mul_mat_x86(&inner, &d32);
    } else {
        ggml_cpu_mul_mat_neon(&inner, &d32);
    }
}

} // namespace

void ggml_cpu_mul_mat_quant(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];

    const int ith = params->ith;
    const int nth = params->nth;

    const int64_t K  = a->ne[0];
    const int64_t N  = a->ne[1];
    const int64_t A2 = a->ne[2];
    const int64_t A3 = a->ne[3];
    const int64_t M  = b->ne[1];
    const int64_t B2 = b->ne[2];
    const int64_t B3 = b->ne[3];

    const ggml_quant_dot_traits * tr = ggml_get_quant_dot_traits(a->type);
    GGML_ASSERT(tr && tr->quantize_act && tr->vec_dot_ref && "mul_mat: no dot product for this weight type");
    GGML_ASSERT(b->ne[0] == K && K % ggml_blck_size(a->type) == 0);
    GGML_ASSERT(a->nb[0] == ggml_type_size(a->type) && "mul_mat: weight rows must be packed");
    GGML_ASSERT(dst->type == GGML_TYPE_F32 && dst->nb[0] == sizeof(float));
    GGML_ASSERT(dst->ne[0] == N && dst->ne[1] == M && dst->ne[2] == B2 && dst->ne[3] == B3);

    if (N == 0 || M == 0 || B2 == 0 || B3 == 0) return;
    GGML_ASSERT(A2 > 0 && A3 > 0 && B2 % A2 == 0 && B3 % A3 == 0);
    const int64_t r2 = B2 / A2;
    const int64_t r3 = B3 / A3;

    if (K == 0) {
        // no blocks: every dot product is 0
        int64_t r0, r1;
        ggml_cpu_split_range(M * B2 * B3, ith, nth, &r0, &r1);
        for (int64_t r = r0; r < r1; ++r) {
            int64_t i1, i2, i3;
            ggml_cpu_row_coords(r, dst->ne, &i1, &i2, &i3);
            memset((char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3], 0, (size_t) N * sizeof(float));
        }
        return;
    }

    GGML_ASSERT(params->wsize >= ggml_cpu_mul_mat_quant_work_size(dst, nth) && "mul_mat: work buffer too small");
    ggml_tensor b32, d32;
    if (dequant_route(dst, params->use_ref, &b32, &d32)) {
        mul_mat_dequantized(params, dst, b32, d32);
        return;
    }
    const ggml_quant_dot_fast * fast       = fast_kernel(a, params->use_ref);
    const bool                  repack     = fast && fast->act_repack;
    char *                      wbase      = align_ptr(params->wdata);
    const size_t                xs         = act_stride(tr, fast, K);
    const int64_t               n_act_rows = M * B2 * B3;
    const ggml_quantize_act_fn  quantize   = act_quantizer(tr, params->use_ref);

    // Phase 1: quantize the activation rows (row r = i1 + M * (i2 + B2 * i3)).
    {
        // per-thread scratch after the rows, laid out as ggml_cpu_mul_mat_quant_work_size counts it
        const size_t xs_max  = std::max(act_stride(tr, nullptr, K), act_stride(tr, ggml_cpu_quant_dot_fast(a->type), K));
        char *       mine    = wbase + (size_t) n_act_rows * xs_max + (size_t) ith * (gather_bytes(b) + std_act_bytes(tr, K));
        float *      gather  = needs_gather(b) ? (float *) mine : nullptr;
        char *       std_row = mine + gather_bytes(b); // reference-layout row before the fast kernel's repack
        int64_t      r0, r1;
        ggml_cpu_split_range(n_act_rows, ith, nth, &r0, &r1);
        for (int64_t r = r0; r < r1; ++r) {
            const float * row = activation_row(b, r, gather);
            if (repack) {
                quantize(row, std_row, K);
                fast->act_repack(std_row, wbase + (size_t) r * xs, K);
            } else {
                quantize(row, wbase + (size_t) r * xs, K);
            }
        }
        // every thread must reach the barrier, so no early abort return before it
        ggml_cpu_barrier(params);
    }

    // Phase 2: blocks of the output.
    const block_plan p       = plan_blocks(N, M, B2 * B3, nth);
    const int64_t    n_units = p.n_blocks * p.m_blocks * B2 * B3;
    int64_t          u0, u1;
    ggml_cpu_split_range(n_units, ith, nth, &u0, &u1);

    float acc[QMM_NB_MAX * QMM_MB_MAX];
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

        const char * w = (const char *) a->data + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3] + n0 * a->nb[1];
        const char * x = wbase + (size_t) (m0 + M * (i2 + B2 * i3)) * xs;
        if (fast) {
            fast->tile(K, w, a->nb[1], (int) nn, x, xs, (int) mm, acc, (size_t) nn);
        } else {
            ref_tile(tr, K, w, a->nb[1], (int) nn, x, xs, (int) mm, acc, (size_t) nn);
        }
        for (int64_t m = 0; m < mm; ++m) {
            float * out = (float *) ((char *) dst->data + (m0 + m) * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
            memcpy(out + n0, acc + m * nn, (size_t) nn * sizeof(float));
        }
    }
}
