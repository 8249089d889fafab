#pragma once

// ops-fast.h — the row kernels of each instruction-set level (ops-*-avx512.cpp, ops-*-avx2.cpp,
// ops-*-neon.cpp)
// and the table that selects them. The portable kernels call a level's row kernel only for
// contiguous F32 rows (and F16/BF16 conversions) when ggml_cpu_rows(params) returns a table with
// that entry; everything else stays on the portable path, which is also what params->use_ref
// forces. The level comes from cpu-isa.h (GGML_CPU_ISA caps it).

#include "cpu-isa.h"
#include "cpu-ops.h"

#include <cstddef>
#include <cstdint>

// ---- elementwise rows (ops-elementwise-avx512.cpp); x, y may be the same array -------------
enum class ggml_fast_map { scale, scale_bias, sqr, sqrt, silu, gelu, gelu_erf, gelu_quick, sigmoid, tanh, exp, relu, neg, abs };
// y[i] = f(x[i]) (a, b: the scale op's factor and bias)
void ggml_avx512_map_row(ggml_fast_map op, const float * x, float * y, int64_t n, float a, float b);

enum class ggml_fast_glu { reglu, geglu, swiglu, geglu_erf, geglu_quick };
// y[i] = f(x[i]) * g[i]
void ggml_avx512_glu_row(ggml_fast_glu op, const float * x, const float * g, float * y, int64_t n);

enum class ggml_fast_bin { add, sub, mul, div };
// d[i] = a[i] op b[i]; with b_scalar, b[0] for every i
void ggml_avx512_binary_row(ggml_fast_bin op, const float * a, const float * b, float * d, int64_t n, bool b_scalar);

// packed conversions, bit-identical to ggml_fp32_to_fp16 / ggml_fp16_to_fp32 / ggml_fp32_to_bf16
void ggml_avx512_f32_to_f16(const float * x, uint16_t * y, int64_t n);
void ggml_avx512_f16_to_f32(const uint16_t * x, float * y, int64_t n);
void ggml_avx512_f32_to_bf16(const float * x, uint16_t * y, int64_t n);
void ggml_avx512_bf16_to_f32(const uint16_t * x, float * y, int64_t n);

// ---- row ops (ops-rows-avx512.cpp) -----------------------------------------------------------
// rms_norm / norm of one packed row (statistics in double, like the portable kernel)
void ggml_avx512_rms_norm_row(const float * x, float * y, int64_t n, float eps);
void ggml_avx512_norm_row(const float * x, float * y, int64_t n, float eps);

// soft_max of one row: y = softmax(x*scale + slope*mask) with an optional extra sink logit
// (-inf: none). mask: nullptr, F32 or F16 (mask_f16). tmp: n floats of scratch; y may alias x.
void ggml_avx512_soft_max_row(const float * x, float * y, float * tmp, int64_t n, float scale, const void * mask,
                              bool mask_f16, float slope, float sink);

// rope: cos/sin cache for one position. theta_i = pos * coef[i] (coef already holds the inverse
// frequency, frequency factor and YaRN mix); values are multiplied by mscale. NEOX: cs[i], sn[i]
// for i < half. NORMAL: interleaved for the pair layout, cs[2i] = cs[2i+1] = cos_i,
// sn[2i] = -sin_i, sn[2i+1] = +sin_i.
void ggml_avx512_rope_cache(const double * coef, int half, double pos, float mscale, bool neox, float * cs, float * sn);
// rotate one packed F32 row using a cache built for the same mode; y may alias x
void ggml_avx512_rope_row(const float * x, float * y, int64_t ne0, int n_offs, int n_dims, bool neox, const float * cs,
                          const float * sn);

// ---- flash attention (ops-flash-attn-avx512.cpp) ----------------------------------------------
// Per-thread scratch of the fast kernel, in floats (plus 64-byte alignment slack by the caller).
size_t ggml_avx512_flash_attn_floats(int64_t D, int64_t Dv);
// Whole op on this thread's share (same contract as ggml_cpu_op_flash_attn_ext).
void ggml_avx512_flash_attn_ext(const struct ggml_compute_params * params, struct ggml_tensor * dst);
// Whether that kernel runs this node with bf16 products (F16/BF16 K and V, GGML_PREC_DEFAULT, the
// kernel table's choice) rather than exact F32 ones.
bool ggml_avx512_flash_attn_uses_bf16(const struct ggml_tensor * dst);

// ---- the AVX2 level (ops-elementwise-avx2.cpp, ops-rows-avx2.cpp) ----------------------------
// The same contracts as the AVX-512 kernels above, 8 lanes wide. Bit-identical to them: the
// transcendental maps, the conversions, rms_norm_row (the sd fusions rely on it, see
// src/core/cpu/rms-norm-cpu.h), rope_cache and rope_row; norm_row and soft_max_row keep their
// precision but group their sums by 8 lanes.
void ggml_avx2_map_row(ggml_fast_map op, const float * x, float * y, int64_t n, float a, float b);
void ggml_avx2_glu_row(ggml_fast_glu op, const float * x, const float * g, float * y, int64_t n);
void ggml_avx2_binary_row(ggml_fast_bin op, const float * a, const float * b, float * d, int64_t n, bool b_scalar);
void ggml_avx2_f32_to_f16(const float * x, uint16_t * y, int64_t n);
void ggml_avx2_f16_to_f32(const uint16_t * x, float * y, int64_t n);
void ggml_avx2_f32_to_bf16(const float * x, uint16_t * y, int64_t n);
void ggml_avx2_bf16_to_f32(const uint16_t * x, float * y, int64_t n);
void ggml_avx2_rms_norm_row(const float * x, float * y, int64_t n, float eps);
void ggml_avx2_norm_row(const float * x, float * y, int64_t n, float eps);
void ggml_avx2_soft_max_row(const float * x, float * y, float * tmp, int64_t n, float scale, const void * mask,
                            bool mask_f16, float slope, float sink);
void ggml_avx2_rope_cache(const double * coef, int half, double pos, float mscale, bool neox, float * cs, float * sn);
void ggml_avx2_rope_row(const float * x, float * y, int64_t ne0, int n_offs, int n_dims, bool neox, const float * cs,
                        const float * sn);

// ---- the NEON level (ops-elementwise-neon.cpp, ops-rows-neon.cpp; AArch64) ---------------------
// The same contracts, 4 lanes wide, baseline ARMv8-A AdvSIMD (it serves the neon, dotprod and i8mm
// levels). Bit-identical to the x86 kernels: the transcendental maps, the conversions, rms_norm_row,
// rope_cache and rope_row (same operations in the same order, FMLA/FMLS for vfmadd/vfnmadd, see
// vec-neon-rows.h); norm_row and soft_max_row keep their precision but group their sums by 4 lanes.
void ggml_neon_map_row(ggml_fast_map op, const float * x, float * y, int64_t n, float a, float b);
void ggml_neon_glu_row(ggml_fast_glu op, const float * x, const float * g, float * y, int64_t n);
void ggml_neon_binary_row(ggml_fast_bin op, const float * a, const float * b, float * d, int64_t n, bool b_scalar);
void ggml_neon_f32_to_f16(const float * x, uint16_t * y, int64_t n);
void ggml_neon_f16_to_f32(const uint16_t * x, float * y, int64_t n);
void ggml_neon_f32_to_bf16(const float * x, uint16_t * y, int64_t n);
void ggml_neon_bf16_to_f32(const uint16_t * x, float * y, int64_t n);
void ggml_neon_rms_norm_row(const float * x, float * y, int64_t n, float eps);
void ggml_neon_norm_row(const float * x, float * y, int64_t n, float eps);
void ggml_neon_soft_max_row(const float * x, float * y, float * tmp, int64_t n, float scale, const void * mask,
                            bool mask_f16, float slope, float sink);
void ggml_neon_rope_cache(const double * coef, int half, double pos, float mscale, bool neox, float * cs, float * sn);
void ggml_neon_rope_row(const float * x, float * y, int64_t ne0, int n_offs, int n_dims, bool neox, const float * cs,
                        const float * sn);

// ---- the table ---------------------------------------------------------------------------------
// One per level; an entry a level has not written is nullptr (that op stays portable there).
struct ggml_cpu_row_kernels {
    const char * isa; // "avx512", "avx2", "neon": prefix of the kernel names the ops report
    void (*map_row)(ggml_fast_map op, const float * x, float * y, int64_t n, float a, float b);
    void (*glu_row)(ggml_fast_glu op, const float * x, const float * g, float * y, int64_t n);
    void (*binary_row)(ggml_fast_bin op, const float * a, const float * b, float * d, int64_t n, bool b_scalar);
    void (*f32_to_f16)(const float * x, uint16_t * y, int64_t n);
    void (*f16_to_f32)(const uint16_t * x, float * y, int64_t n);
    void (*f32_to_bf16)(const float * x, uint16_t * y, int64_t n);
    void (*bf16_to_f32)(const uint16_t * x, float * y, int64_t n);
    void (*rms_norm_row)(const float * x, float * y, int64_t n, float eps);
    void (*norm_row)(const float * x, float * y, int64_t n, float eps);
    void (*soft_max_row)(const float * x, float * y, float * tmp, int64_t n, float scale, const void * mask,
                         bool mask_f16, float slope, float sink);
    void (*rope_cache)(const double * coef, int half, double pos, float mscale, bool neox, float * cs, float * sn);
    void (*rope_row)(const float * x, float * y, int64_t ne0, int n_offs, int n_dims, bool neox, const float * cs,
                     const float * sn);
};

// The tables (nullptr where the build has no such level: the x86 ones off x86-64 GCC/Clang, the
// NEON one off AArch64).
const ggml_cpu_row_kernels * ggml_cpu_row_kernels_avx512(void); // ops-fast.cpp
const ggml_cpu_row_kernels * ggml_cpu_row_kernels_avx2(void);   // ops-rows-avx2.cpp
const ggml_cpu_row_kernels * ggml_cpu_row_kernels_neon(void);   // ops-rows-neon.cpp

// The row kernels of the active level, nullptr for the portable path (use_ref, or no level).
inline const ggml_cpu_row_kernels * ggml_cpu_rows_for_level(void) {
    if (ggml_cpu_isa_allows(ggml_cpu_isa::avx512)) return ggml_cpu_row_kernels_avx512();
    if (ggml_cpu_isa_allows(ggml_cpu_isa::avx2)) return ggml_cpu_row_kernels_avx2();
    // dotprod and i8mm add nothing to these kernels: they run the NEON table
    if (ggml_cpu_isa_allows(ggml_cpu_isa::neon)) return ggml_cpu_row_kernels_neon();
    return nullptr;
}
inline const ggml_cpu_row_kernels * ggml_cpu_rows(const struct ggml_compute_params * params) {
    return params->use_ref ? nullptr : ggml_cpu_rows_for_level();
}
