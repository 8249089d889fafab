#pragma once

// ops-common.cuh — what the op-kernel files (ops-*.cu) share and nothing else needs: a tensor
// descriptor passed to kernels by value, element loads/stores by type with the CPU backend's
// rounding rules, launch-size helpers, and the per-file entry points the dispatcher (ops.cu)
// calls. Private to the op kernels.
//
// Kernels favour exactness over speed: arbitrary byte strides everywhere (views need no special
// casing), 64-bit index math, F32 (or wider) accumulation, fixed reduction orders (results are
// deterministic run to run), no atomics.

#include "common.cuh"

#include <cuda_bf16.h>

#include <cstdint>

// A tensor as a kernel sees it: base address, element type and the ggml extents/strides.
struct ggml_cuda_tdesc {
    char *  data;
    int     type; // enum ggml_type
    int64_t ne[4];
    int64_t nb[4];
};

static inline ggml_cuda_tdesc ggml_cuda_desc(const ggml_tensor * t) {
    ggml_cuda_tdesc d;
    d.data = (char *) t->data;
    d.type = (int) t->type;
    for (int i = 0; i < 4; ++i) {
        d.ne[i] = t->ne[i];
        d.nb[i] = (int64_t) t->nb[i];
    }
    return d;
}

// ---------------------------------------------------------------------------------------------
// Element conversions. F32 -> F16/BF16 round to nearest even; NaN stays NaN (BF16 quieted as the
// CPU's ggml_fp32_to_bf16 does); -> I32 truncates toward zero, saturating, NaN -> 0 (as
// ggml_store_f32).

static __device__ __forceinline__ float ggml_cuda_bf16_bits_to_f32(uint16_t b) {
    return __uint_as_float((uint32_t) b << 16);
}

static __device__ __forceinline__ uint16_t ggml_cuda_f32_to_bf16_bits(float f) {
    const uint32_t x = __float_as_uint(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t) ((x >> 16) | 0x40u);
    return (uint16_t) ((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

static __device__ __forceinline__ float ggml_cuda_load_f32(const char * p, int type) {
    switch (type) {
        case GGML_TYPE_F32: return *(const float *) p;
        case GGML_TYPE_F16: return __half2float(*(const __half *) p);
        case GGML_TYPE_BF16: return ggml_cuda_bf16_bits_to_f32(*(const uint16_t *) p);
        case GGML_TYPE_I32: return (float) *(const int32_t *) p;
        default: return 0.0f; // never reached: supports() admits only the types above
    }
}

static __device__ __forceinline__ int32_t ggml_cuda_f32_to_i32_sat(float v) {
    if (isnan(v)) return 0;
    const float t = truncf(v);
    if (t <= -2147483648.0f) return INT32_MIN;
    if (t >= 2147483648.0f) return INT32_MAX;
    return (int32_t) t;
}

static __device__ __forceinline__ void ggml_cuda_store_f32(char * p, int type, float v) {
    switch (type) {
        case GGML_TYPE_F32: *(float *) p = v; break;
        case GGML_TYPE_F16: *(__half *) p = __float2half_rn(v); break;
        case GGML_TYPE_BF16: *(uint16_t *) p = ggml_cuda_f32_to_bf16_bits(v); break;
        case GGML_TYPE_I32: *(int32_t *) p = ggml_cuda_f32_to_i32_sat(v); break;
        default: break;
    }
}

// Raw element copy of es bytes (es is 1, 2, 4 or 8; pointers aligned to es).
static __device__ __forceinline__ void ggml_cuda_copy_elem(char * d, const char * s, int es) {
    switch (es) {
        case 1: *(uint8_t *) d = *(const uint8_t *) s; break;
        case 2: *(uint16_t *) d = *(const uint16_t *) s; break;
        case 4: *(uint32_t *) d = *(const uint32_t *) s; break;
        case 8: *(uint64_t *) d = *(const uint64_t *) s; break;
        default:
            for (int k = 0; k < es; ++k) d[k] = s[k];
            break;
    }
}

// flat index (ne0 fastest) -> coordinates. 64-bit division is a long software sequence on the
// GPU: indices and extents that fit 32 bits (nearly always) take 32-bit division instead.
static __device__ __forceinline__ void ggml_cuda_unravel(int64_t i, const int64_t ne[4], int64_t & i0, int64_t & i1,
                                                         int64_t & i2, int64_t & i3) {
    if ((uint64_t) i <= UINT32_MAX && (uint64_t) ne[0] <= UINT32_MAX && (uint64_t) ne[1] <= UINT32_MAX &&
        (uint64_t) ne[2] <= UINT32_MAX) {
        uint32_t       u  = (uint32_t) i;
        const uint32_t n0 = (uint32_t) ne[0], n1 = (uint32_t) ne[1], n2 = (uint32_t) ne[2];
        i0 = u % n0;
        u /= n0;
        i1 = u % n1;
        u /= n1;
        i2 = u % n2;
        i3 = u / n2;
        return;
    }
    i0 = i % ne[0];
    i /= ne[0];
    i1 = i % ne[1];
    i /= ne[1];
    i2 = i % ne[2];
    i3 = i / ne[2];
}

static __device__ __forceinline__ int64_t ggml_cuda_offset(const ggml_cuda_tdesc & t, int64_t i0, int64_t i1,
                                                           int64_t i2, int64_t i3) {
    return i0 * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

// ---------------------------------------------------------------------------------------------
// Launch sizes

constexpr int GGML_CUDA_EW_THREADS = 256;

// Blocks for a grid-stride loop over n items (capped: each thread then takes several items).
static inline unsigned ggml_cuda_ew_blocks(int64_t n) {
    const int64_t b = (n + GGML_CUDA_EW_THREADS - 1) / GGML_CUDA_EW_THREADS;
    return (unsigned) (b < 1 ? 1 : (b > (1 << 20) ? (1 << 20) : b));
}

#define GGML_CUDA_GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t) gridDim.x * blockDim.x)

// ---------------------------------------------------------------------------------------------
// Host-side checks shared by the supports() tables

static inline bool ggml_cuda_is_float(ggml_type t) {
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16;
}

// types the element loads/stores above handle
static inline bool ggml_cuda_is_word(ggml_type t) { return ggml_cuda_is_float(t) || t == GGML_TYPE_I32; }

// Strides and view offset are whole elements, so typed loads through them are aligned.
static inline bool ggml_cuda_elem_aligned(const ggml_tensor * t) {
    if (!t) return true;
    const size_t ts = ggml_type_size(t->type);
    if (ggml_blck_size(t->type) != 1 || ts == 0) return false;
    for (int i = 0; i < GGML_MAX_DIMS; ++i) {
        if (t->nb[i] % ts != 0) return false;
    }
    return !t->view_src || t->view_offs % ts == 0;
}

static inline bool ggml_cuda_rows_packed(const ggml_tensor * t) {
    return t->ne[0] <= 1 || t->nb[0] == ggml_type_size(t->type);
}

// the node and its first n_src sources (those present) are element-aligned
static inline bool ggml_cuda_aligned_all(const ggml_tensor * node, int n_src) {
    if (!ggml_cuda_elem_aligned(node)) return false;
    for (int i = 0; i < n_src; ++i) {
        if (node->src[i] && !ggml_cuda_elem_aligned(node->src[i])) return false;
    }
    return true;
}

// one float input of the node's type and shape
static inline bool ggml_cuda_same_float_type(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    return a && ggml_cuda_is_float(a->type) && dst->type == a->type && ggml_are_same_shape(a, dst) &&
           ggml_cuda_aligned_all(dst, 1);
}

// element sizes the raw moves (ggml_cuda_copy_elem) handle
static inline bool ggml_cuda_movable(ggml_type t) {
    if (ggml_blck_size(t) != 1) return false;
    const size_t ts = ggml_type_size(t);
    return ts == 1 || ts == 2 || ts == 4 || ts == 8;
}

// ---------------------------------------------------------------------------------------------
// Per-file entry points. *_supports: whether the file's kernels run this node exactly;
// *_compute: run it on ctx.stream (only called for supported nodes).

// ops-elementwise.cu: DUP CONT CPY, ADD SUB MUL DIV, SQR SQRT SCALE, UNARY, GLU, CLAMP,
// LEAKY_RELU, LOG SIN COS, DIAG_MASK_INF
bool ggml_cuda_elementwise_supports(const ggml_tensor * op);
void ggml_cuda_elementwise_compute(ggml_cuda_op_ctx & ctx, ggml_tensor * node);

// ops-rows.cu: NORM RMS_NORM L2_NORM GROUP_NORM, SOFT_MAX, ROPE, SUM SUM_ROWS MEAN ARGMAX,
// ARGSORT TOP_K
bool ggml_cuda_rows_supports(const ggml_tensor * op);
void ggml_cuda_rows_compute(ggml_cuda_op_ctx & ctx, ggml_tensor * node);

// ops-layout.cu: GET_ROWS SET_ROWS, CONCAT PAD REPEAT ROLL, ACC SET, ARANGE TIMESTEP_EMBEDDING
bool ggml_cuda_layout_supports(const ggml_tensor * op);
void ggml_cuda_layout_compute(ggml_cuda_op_ctx & ctx, ggml_tensor * node);

// ops-image.cu: UPSCALE, IM2COL IM2COL_3D, CONV_2D CONV_2D_DW CONV_3D, CONV_TRANSPOSE_1D
// CONV_TRANSPOSE_2D, POOL_1D POOL_2D
bool ggml_cuda_image_supports(const ggml_tensor * op);
void ggml_cuda_image_compute(ggml_cuda_op_ctx & ctx, ggml_tensor * node);

// ops-flash-attn.cu: FLASH_ATTN_EXT
bool ggml_cuda_flash_attn_supports(const ggml_tensor * op);
void ggml_cuda_flash_attn_compute(ggml_cuda_op_ctx & ctx, ggml_tensor * node);
