#pragma once

// Internals shared by the INT8 CPU kernel files and their tests: path selection, the ConvRot
// row quantizer and the GEMM paths. Every path is bit-identical to the scalar definition in
// /work/shared/reference/int8-convrot-facts.md: the integer sums are exact and every float
// step (rotation butterflies, amax, scale, epilogue) is evaluated in the stated order. These
// files are compiled with -ffp-contract=off so that no multiply-add is ever fused.

#include "../int8_schema.h"
#include "ggml-backend.h"
#include "ggml-ext.h"

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace sd_int8 {

// ---------------------------------------------------------------------------------------------
// Path selection

// avx2 and the AArch64 paths are listed last so the existing values keep their numbers; the
// preference order is resolve_path's (amx, vnni, avx2 on x86; i8mm, dotprod, neon on AArch64;
// then portable).
enum class path { automatic, portable, vnni, amx, avx2, neon, dotprod, i8mm };

// Forces a path for kernels prepared afterwards (tests); automatic = environment / CPU.
void        set_path_override(path p);
// Whether this CPU, under the GGML_CPU_ISA cap, may run the path: avx2 needs the CPU service's
// "avx2" level (AVX2 + FMA + F16C), vnni its "avx512" level and "avx512_vnni"; on AArch64 neon,
// dotprod and i8mm need the service's level of that name.
bool        path_available(path p);
const char * path_name(path p);
// override, else SD_INT8_PATH=portable|avx2|vnni|amx|neon|dotprod|i8mm, else the best available. A forced path that
// the CPU lacks falls back to the best available (with a warning).
path        resolve_path();

// ---------------------------------------------------------------------------------------------
// Cancellation: polled between phases and inside long loops.

struct abort_poll {
    const ggml_ext_cpu_parallel_v1 * svc     = nullptr;
    ggml_backend_t                   backend = nullptr;
    bool operator()() const { return svc && backend && svc->should_abort(backend); }
};

// ---------------------------------------------------------------------------------------------
// ConvRot rotation + per-row quantization

// The schema's layout arithmetic and group rule (int8_schema.h), under the names these files use.
using sd_int8_schema::packed_ne1;
using sd_int8_schema::pad_up;
using sd_int8_schema::rows_of;
using sd_int8_schema::valid_group;

// Whether the CPU quantizer kernel runs this sd.quantize_i8_convrot.v1 node (its supports(): every
// node sd_int8_schema::decode_quantize accepts; the CPU has no further limit). Fusion rules that
// end in a quantize node accept exactly these.
bool quantize_node_supported(const ggml_tensor * node);

// The quantizers' per-thread row scratch: groups above 256 are rotated in memory (the in-register
// 256-point transform, then the cross-block butterfly stages), and the AVX-512 path keeps the
// rotated row between its two passes. Every thread that calls quantize_row_* reserves it first
// with the row's K and group; false = out of memory (the caller fails its node with
// GGML_STATUS_ALLOC_FAILED). quantize_row_* reserve it themselves when a caller did not, and
// abort with a message if that allocation fails.
bool reserve_quantize_scratch(int64_t K, int group);

// Quantizes one row of K floats (rotated in groups of `group` first when group > 1) into q[0..K)
// and returns the row scale s_x; *rowsum receives the sum of the quantized values.
// Defined behaviour for non-finite input: if any rotated value is NaN or ±Inf, the row is all
// zeros with scale NaN (so every output of that row is NaN). A rotated value v * inv that is NaN
// (only possible for 0 * Inf when s_x is subnormal) quantizes to 0.
float quantize_row_portable(const float * x, int64_t K, int group, int8_t * q, int32_t * rowsum);
float quantize_row_avx2(const float * x, int64_t K, int group, int8_t * q, int32_t * rowsum);
float quantize_row_avx512(const float * x, int64_t K, int group, int8_t * q, int32_t * rowsum);
// AArch64 Advanced SIMD (int8-convrot-neon.cpp; every ARM path uses it): the portable one elsewhere.
float quantize_row_neon(const float * x, int64_t K, int group, int8_t * q, int32_t * rowsum);
// The one place a path is turned into a row quantizer (every path gives the same bits; p must be
// available, resolve_path's result or portable).
float quantize_row(path p, const float * x, int64_t K, int group, int8_t * q, int32_t * rowsum);
// The rotation alone (portable), in place on one group: used by tests and the reference.
void  rotate_group_portable(float * v, int group);

// Shared by the row quantizer files (int8-convrot*.cpp), not by callers.
namespace convrot_detail {
// 1/sqrt(G), the rotation's initial scaling (a power of two for G = 4^n, so exact); computed the
// way the facts sheet states.
inline float group_scale(int group) { return 1.0f / std::sqrt((float) group); }
// Whether the vector quantizers keep the rotated row in the scratch between their two passes.
bool    keeps_row(int64_t K, int group);
// The reserved per-thread scratch (64-byte aligned, whole 16-float vectors); reserves it when
// the caller did not and aborts with a message if that fails.
float * scratch_for(int64_t K, int group);
// A row with a non-finite rotated value: all zeros, scale NaN.
float   nonfinite_row(int64_t K, int8_t * q, int32_t * rowsum);
} // namespace convrot_detail

// ---------------------------------------------------------------------------------------------
// GEMM: y[r, o] = ((float(acc) * a_scale[r]) * w_scale[o]) + bias[o], acc = sum_k a[r,k] w[o,k]
// Optional epilogue extension (the Linear -> Mul(gate) -> Add(residual) fusion), each step
// rounded separately like the native MUL and ADD: y = y * gate[o], then y = residual[r, o] + y.

struct gemm_problem {
    const int8_t *  a        = nullptr; // rows x K, row stride lda bytes
    int64_t         lda      = 0;
    const float *   a_scale  = nullptr; // rows
    const int32_t * a_rowsum = nullptr; // rows (VNNI path: sum of each activation row)
    const int8_t *  w        = nullptr; // N x K contiguous
    const float *   w_scale  = nullptr; // N or NULL
    const float *   bias     = nullptr; // N or NULL
    float *         y        = nullptr; // rows x N contiguous
    const float *   gate     = nullptr; // N or NULL
    // rows x N contiguous or NULL. It may be y itself (exact in-place: every element is read by
    // the thread that then writes it, in the same epilogue step); no other overlap is allowed.
    const float *   residual = nullptr;
    // VNNI path, K split into k-blocks: rows x N int32 partial sums (so y, which may hold the
    // residual, is written only by the last k-block); NULL = keep them in y.
    int32_t *       partial  = nullptr;
    int64_t         rows = 0, K = 0, N = 0;
    // VNNI path: work units are claimed from this counter (starting at 0) when set, so a thread
    // that loses its core to another process does not hold up the others; NULL = static split.
    std::atomic<int64_t> * next_unit = nullptr;
};

// The scalar epilogue every GEMM path rounds like (res: the residual row or NULL): each step
// separately, in the order of the comment above gemm_problem.
inline float gemm_epilogue(int32_t acc, float sx, const gemm_problem & p, const float * res, int64_t o) {
    float y = (float) acc * sx;
    if (p.w_scale) y = y * p.w_scale[o];
    if (p.bias) y = y + p.bias[o];
    if (p.gate) y = y * p.gate[o];
    if (res) y = res[o] + y;
    return y;
}

// Contiguous share [begin, end) of n units for thread ith of nth.
inline void thread_share(int64_t n, int ith, int nth, int64_t & begin, int64_t & end) {
    begin = n * ith / nth;
    end   = n * (ith + 1) / nth;
}

// Rows [r0, r1) x channels [n0, n1) with plain int32 dot products and gemm_epilogue: what a SIMD
// path's thread does with a unit when it could not get its pack buffers (int8-gemm.cpp).
void gemm_rows_scalar(const gemm_problem & p, int64_t r0, int64_t r1, int64_t n0, int64_t n1);

// Each thread ith of nth computes its share; returns false if aborted.
bool gemm_portable(const gemm_problem & p, int ith, int nth, const abort_poll & stop);
bool gemm_avx2(const gemm_problem & p, int ith, int nth, const abort_poll & stop);
bool gemm_vnni(const gemm_problem & p, int ith, int nth, const abort_poll & stop);
// Whether the VNNI GEMM runs K in more than one k-block (its int32 partial sums then wait between
// blocks in the output, or in gemm_problem::partial when that is set).
bool gemm_vnni_splits_k(int64_t K);
bool gemm_avx2_splits_k(int64_t K);
// AArch64 GEMMs (int8-gemm-neon.cpp: vmull_s8 + vpadalq_s16; int8-gemm-dotprod.cpp: SDOT;
// int8-gemm-i8mm.cpp: SMMLA). They keep whole-K int32 sums in registers (never split K), read
// the activation rows as they are (any lda, no K padding) and need no row sums. On other targets
// they run gemm_portable.
bool gemm_neon(const gemm_problem & p, int ith, int nth, const abort_poll & stop);
bool gemm_dotprod(const gemm_problem & p, int ith, int nth, const abort_poll & stop);
bool gemm_i8mm(const gemm_problem & p, int ith, int nth, const abort_poll & stop);
// The one place a path is turned into a GEMM, and whether that GEMM splits K (the same meaning
// as gemm_vnni_splits_k; the portable GEMM never does).
bool gemm(path p, const gemm_problem & g, int ith, int nth, const abort_poll & stop);
bool gemm_splits_k(path p, int64_t K);
// Whether the path's GEMM reads gemm_problem::a_rowsum (only the VNNI offset trick does).
bool gemm_needs_rowsum(path p);
// Whether the path's GEMM reads whole 4-byte activation groups (rows of K4 bytes, zero padded).
bool gemm_needs_k4(path p);

} // namespace sd_int8
