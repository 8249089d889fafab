// ops-elementwise.cu — CUDA kernels of the per-element ops: copies and type conversions (DUP,
// CONT, CPY), binary arithmetic with ggml's modulo broadcasting (ADD SUB MUL DIV), elementwise
// maps (SQR, SQRT, SCALE, UNARY, CLAMP, LEAKY_RELU, LOG, SIN, COS, DIAG_MASK_INF) and gated
// linear units (GLU).
//
// Semantics are the CPU backend's (ggml-cpu/ops-elementwise.cpp, ops-index.cpp): everything is
// computed in F32 and rounded once to the destination type; operands may have any byte strides.
// One generic kernel per family with the element types and the function chosen at run time keeps
// the compile small (CI builds two architectures on two cores); each thread owns whole output
// elements, so in-place nodes (dst aliasing src0) are safe.

#include "ops-common.cuh"

#include <cmath>

namespace {

// ---------------------------------------------------------------------------------------------
// Activation functions, written exactly as the CPU's (large |x| saturates, no inf*0 NaN).

__device__ __forceinline__ float sigmoid_f(float x) {
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    const float e = expf(x);
    return e / (1.0f + e);
}

// x * s with s -> 0 for x -> -inf: the limit is -0, not (-inf)*0
__device__ __forceinline__ float times_gate(float x, float s) { return s == 0.0f ? -0.0f : x * s; }

__device__ __forceinline__ float silu_f(float x) { return times_gate(x, sigmoid_f(x)); }

__device__ __forceinline__ float gelu_f(float x) {
    const float c = 0.7978845608028654f; // sqrt(2/pi)
    const float z = c * x * (1.0f + 0.044715f * x * x);
    return times_gate(x, sigmoid_f(2.0f * z));
}

__device__ __forceinline__ float gelu_quick_f(float x) { return times_gate(x, sigmoid_f(1.702f * x)); }

__device__ __forceinline__ float gelu_erf_f(float x) { return times_gate(x, 0.5f * erfcf(-x * 0.70710678118654752f)); }

__device__ __forceinline__ float relu_f(float x) { return x > 0.0f ? x : 0.0f; }

// ---------------------------------------------------------------------------------------------
// Elementwise maps: one selector covers the unary ops and the parameterised maps.

enum map_op : int {
    // values 0 .. GGML_UNARY_OP_COUNT-1 are the ggml_unary_op values
    MAP_SQR = 100,
    MAP_SQRT,
    MAP_SCALE,
    MAP_SCALE_BIAS,
    MAP_CLAMP,
    MAP_LEAKY_RELU,
    MAP_LOG,
    MAP_SIN,
    MAP_COS,
    MAP_DIAG_MASK_INF, // index-dependent: handled in k_map
};

__device__ __forceinline__ float apply_map(int op, float x, float p0, float p1) {
    switch (op) {
        case GGML_UNARY_OP_ABS: return fabsf(x);
        case GGML_UNARY_OP_SGN: return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
        case GGML_UNARY_OP_NEG: return -x;
        case GGML_UNARY_OP_STEP: return x > 0.0f ? 1.0f : 0.0f;
        case GGML_UNARY_OP_TANH: return tanhf(x);
        case GGML_UNARY_OP_ELU: return x > 0.0f ? x : expm1f(x);
        case GGML_UNARY_OP_RELU: return relu_f(x);
        case GGML_UNARY_OP_SIGMOID: return sigmoid_f(x);
        case GGML_UNARY_OP_GELU: return gelu_f(x);
        case GGML_UNARY_OP_GELU_QUICK: return gelu_quick_f(x);
        case GGML_UNARY_OP_SILU: return silu_f(x);
        case GGML_UNARY_OP_HARDSWISH: return x * fminf(1.0f, fmaxf(0.0f, (x + 3.0f) / 6.0f));
        case GGML_UNARY_OP_HARDSIGMOID: return fminf(1.0f, fmaxf(0.0f, (x + 3.0f) / 6.0f));
        case GGML_UNARY_OP_EXP: return expf(x);
        case GGML_UNARY_OP_EXPM1: return expm1f(x);
        case GGML_UNARY_OP_SOFTPLUS: return x > 20.0f ? x : log1pf(expf(x));
        case GGML_UNARY_OP_GELU_ERF: return gelu_erf_f(x);
        case GGML_UNARY_OP_FLOOR: return floorf(x);
        case GGML_UNARY_OP_CEIL: return ceilf(x);
        case GGML_UNARY_OP_ROUND: return roundf(x);
        case GGML_UNARY_OP_TRUNC: return truncf(x);
        case MAP_SQR: return x * x;
        case MAP_SQRT: return sqrtf(x);
        case MAP_SCALE: return p0 * x;
        case MAP_SCALE_BIAS: return p0 * x + p1;
        case MAP_CLAMP: {
            // std::max(lo, std::min(hi, x)) with std's argument order (NaN -> hi, as the CPU)
            const float m = x < p1 ? x : p1;
            return p0 < m ? m : p0;
        }
        case MAP_LEAKY_RELU: return x > 0.0f ? x : p0 * x;
        case MAP_LOG: return logf(x);
        case MAP_SIN: return sinf(x);
        case MAP_COS: return cosf(x);
        default: return x;
    }
}

// n_past: DIAG_MASK_INF's diagonal offset (element (i0, i1) is masked when i0 > n_past + i1)
__global__ void k_map(ggml_cuda_tdesc a, ggml_cuda_tdesc d, int op, float p0, float p1, int64_t n_past, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t i0, i1, i2, i3;
        ggml_cuda_unravel(e, d.ne, i0, i1, i2, i3);
        const float x = ggml_cuda_load_f32(a.data + ggml_cuda_offset(a, i0, i1, i2, i3), a.type);
        const float y = op == MAP_DIAG_MASK_INF ? (i0 > n_past + i1 ? -INFINITY : x) : apply_map(op, x, p0, p1);
        ggml_cuda_store_f32(d.data + ggml_cuda_offset(d, i0, i1, i2, i3), d.type, y);
    }
}

// ---------------------------------------------------------------------------------------------
// Binary ops: dst has src0's shape, src1 tiles it (index modulo src1's extents).

__global__ void k_binary(ggml_cuda_tdesc a, ggml_cuda_tdesc b, ggml_cuda_tdesc d, int op, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t i0, i1, i2, i3;
        ggml_cuda_unravel(e, d.ne, i0, i1, i2, i3);
        const float x = ggml_cuda_load_f32(a.data + ggml_cuda_offset(a, i0, i1, i2, i3), a.type);
        const float y = ggml_cuda_load_f32(
            b.data + ggml_cuda_offset(b, i0 % b.ne[0], i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]), b.type);
        float r;
        switch (op) {
            case GGML_OP_ADD: r = x + y; break;
            case GGML_OP_SUB: r = x - y; break;
            case GGML_OP_MUL: r = x * y; break;
            default: r = x / y; break;
        }
        ggml_cuda_store_f32(d.data + ggml_cuda_offset(d, i0, i1, i2, i3), d.type, r);
    }
}

// ---------------------------------------------------------------------------------------------
// GLU: out = act(x) * g over n = dst->ne[0] columns; x and g are the two halves of src0's row
// (or src0 and src1 when split), exchanged when swapped.

__device__ __forceinline__ float apply_glu(int op, float x, float g, float alpha, float limit) {
    switch (op) {
        case GGML_GLU_OP_REGLU: return relu_f(x) * g;
        case GGML_GLU_OP_GEGLU: return gelu_f(x) * g;
        case GGML_GLU_OP_SWIGLU: return silu_f(x) * g;
        case GGML_GLU_OP_GEGLU_ERF: return gelu_erf_f(x) * g;
        case GGML_GLU_OP_GEGLU_QUICK: return gelu_quick_f(x) * g;
        case GGML_GLU_OP_SWIGLU_OAI: {
            const float xc = fminf(x, limit);
            const float yc = fminf(fmaxf(g, -limit), limit);
            return times_gate(xc, sigmoid_f(alpha * xc)) * (yc + 1.0f);
        }
        default: return 0.0f;
    }
}

__global__ void k_glu(ggml_cuda_tdesc a, ggml_cuda_tdesc b, bool split, bool swapped, ggml_cuda_tdesc d, int op,
                      float alpha, float limit, int64_t n) {
    const int64_t half = d.ne[0];
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t i0, i1, i2, i3;
        ggml_cuda_unravel(e, d.ne, i0, i1, i2, i3);
        const float first  = ggml_cuda_load_f32(a.data + ggml_cuda_offset(a, i0, i1, i2, i3), a.type);
        const float second = split ? ggml_cuda_load_f32(b.data + ggml_cuda_offset(b, i0, i1, i2, i3), b.type)
                                   : ggml_cuda_load_f32(a.data + ggml_cuda_offset(a, i0 + half, i1, i2, i3), a.type);
        const float x = swapped ? second : first;
        const float g = swapped ? first : second;
        ggml_cuda_store_f32(d.data + ggml_cuda_offset(d, i0, i1, i2, i3), d.type, apply_glu(op, x, g, alpha, limit));
    }
}

// ---------------------------------------------------------------------------------------------
// Copies. Element e of the flat (row-major) order of src goes to element e of dst; the shapes
// may differ (only the element counts match).

__global__ void k_copy(ggml_cuda_tdesc s, ggml_cuda_tdesc d, int raw_size, int64_t n) {
    GGML_CUDA_GRID_STRIDE(e, n) {
        int64_t s0, s1, s2, s3, d0, d1, d2, d3;
        ggml_cuda_unravel(e, s.ne, s0, s1, s2, s3);
        ggml_cuda_unravel(e, d.ne, d0, d1, d2, d3);
        const char * sp = s.data + ggml_cuda_offset(s, s0, s1, s2, s3);
        char *       dp = d.data + ggml_cuda_offset(d, d0, d1, d2, d3);
        if (raw_size > 0) {
            // same type: bit-exact (NaN payloads and integer values survive)
            ggml_cuda_copy_elem(dp, sp, raw_size);
        } else {
            ggml_cuda_store_f32(dp, d.type, ggml_cuda_load_f32(sp, s.type));
        }
    }
}

void launch_copy(const ggml_cuda_tdesc & s, const ggml_cuda_tdesc & d, int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    const int raw_size = s.type == d.type ? (int) ggml_type_size((ggml_type) s.type) : 0;
    k_copy<<<ggml_cuda_ew_blocks(n), GGML_CUDA_EW_THREADS, 0, stream>>>(s, d, raw_size, n);
}

bool dup_supported(const ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    if (!src || ggml_nelements(src) != ggml_nelements(dst)) return false;
    const ggml_type ts = src->type, td = dst->type;
    if (ts == td && ggml_blck_size(ts) > 1) {
        // block-quantized payload: whole tensors only (a memcpy)
        return ggml_is_contiguous(src) && ggml_is_contiguous(dst);
    }
    if (ts == td) return ggml_cuda_movable(ts) && ggml_cuda_elem_aligned(src) && ggml_cuda_elem_aligned(dst);
    if (ggml_cuda_is_word(ts) && ggml_cuda_is_word(td)) {
        return ggml_cuda_elem_aligned(src) && ggml_cuda_elem_aligned(dst);
    }
    // block-quantized -> float, through the shared dequantizer (contiguous source)
    if (ggml_blck_size(ts) > 1 && ggml_cuda_is_float(td)) {
        return ggml_cuda_can_convert(ts) && ggml_is_contiguous(src) && src->ne[0] % ggml_blck_size(ts) == 0 &&
               ggml_cuda_elem_aligned(dst);
    }
    return false; // quantizing copies and other integer/F8 conversions run on the CPU
}

void compute_dup(ggml_cuda_op_ctx & ctx, ggml_tensor * dst) {
    const ggml_tensor * src = dst->src[0];
    const int64_t       n   = ggml_nelements(dst);
    if (n == 0 || (src->data == dst->data && src->type == dst->type && ggml_are_same_shape(src, dst) &&
                   ggml_are_same_stride(src, dst))) {
        return; // dup_inplace of an identical layout: nothing moves
    }
    if (src->type == dst->type && ggml_is_contiguous(src) && ggml_is_contiguous(dst)) {
        CUDA_CHECK(cudaMemcpyAsync(dst->data, src->data, ggml_nbytes(dst), cudaMemcpyDeviceToDevice, ctx.stream));
        return;
    }
    if (ggml_blck_size(src->type) > 1) {
        if (dst->type == GGML_TYPE_F32 && ggml_is_contiguous(dst)) {
            ggml_cuda_convert_to_f32(src->data, src->type, (float *) dst->data, n, ctx.stream);
            return;
        }
        if (dst->type == GGML_TYPE_F16 && ggml_is_contiguous(dst)) {
            ggml_cuda_convert_to_f16(src->data, src->type, (__half *) dst->data, n, ctx.stream);
            return;
        }
        // dequantize to a packed F32 copy of src's shape, then convert/scatter into dst
        ggml_cuda_pool_alloc<float> tmp(*ctx.pool, (size_t) n);
        ggml_cuda_convert_to_f32(src->data, src->type, tmp.get(), n, ctx.stream);
        ggml_cuda_tdesc s;
        s.data = (char *) tmp.get();
        s.type = GGML_TYPE_F32;
        for (int i = 0; i < 4; ++i) s.ne[i] = src->ne[i];
        s.nb[0] = sizeof(float);
        for (int i = 1; i < 4; ++i) s.nb[i] = s.nb[i - 1] * s.ne[i - 1];
        launch_copy(s, ggml_cuda_desc(dst), n, ctx.stream);
        return;
    }
    launch_copy(ggml_cuda_desc(src), ggml_cuda_desc(dst), n, ctx.stream);
}

// ---------------------------------------------------------------------------------------------
// Support checks

bool binary_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    if (!a || !b || !ggml_are_same_shape(a, dst) || !ggml_can_repeat(b, a)) return false;
    if (!ggml_cuda_elem_aligned(a) || !ggml_cuda_elem_aligned(b) || !ggml_cuda_elem_aligned(dst)) return false;
    const ggml_type t0 = a->type, t1 = b->type, td = dst->type;
    if (t0 == t1 && t1 == td && ggml_cuda_is_float(t0)) return true;
    return (t0 == GGML_TYPE_F16 || t0 == GGML_TYPE_BF16) && t1 == GGML_TYPE_F32 && (td == t0 || td == GGML_TYPE_F32);
}

bool glu_supported(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const int           g = (int) ggml_get_glu_op(dst);
    if (g < 0 || g >= GGML_GLU_OP_COUNT) return false;
    if (!a || !ggml_cuda_is_float(a->type) || dst->type != a->type) return false;
    if (!ggml_cuda_elem_aligned(a) || !ggml_cuda_elem_aligned(dst)) return false;
    for (int d = 1; d < 4; ++d) {
        if (a->ne[d] != dst->ne[d]) return false;
    }
    if (b) {
        return b->type == a->type && ggml_are_same_shape(a, b) && a->ne[0] == dst->ne[0] && ggml_cuda_elem_aligned(b);
    }
    return a->ne[0] == 2 * dst->ne[0];
}

} // namespace

bool ggml_cuda_elementwise_supports(const ggml_tensor * op) {
    switch (op->op) {
        case GGML_OP_DUP:
        case GGML_OP_CONT:
        case GGML_OP_CPY: return dup_supported(op);
        case GGML_OP_ADD:
        case GGML_OP_SUB:
        case GGML_OP_MUL:
        case GGML_OP_DIV: return binary_supported(op);
        case GGML_OP_SQR:
        case GGML_OP_SQRT:
        case GGML_OP_SCALE:
        case GGML_OP_CLAMP:
        case GGML_OP_LEAKY_RELU:
        case GGML_OP_LOG:
        case GGML_OP_SIN:
        case GGML_OP_COS:
        case GGML_OP_DIAG_MASK_INF: return ggml_cuda_same_float_type(op);
        case GGML_OP_UNARY: {
            const int u = (int) ggml_get_unary_op(op);
            return u >= 0 && u < GGML_UNARY_OP_COUNT && u != GGML_UNARY_OP_XIELU && ggml_cuda_same_float_type(op);
        }
        case GGML_OP_GLU: return glu_supported(op);
        default: return false;
    }
}

void ggml_cuda_elementwise_compute(ggml_cuda_op_ctx & ctx, ggml_tensor * node) {
    const int64_t n = ggml_nelements(node);
    if (n == 0) return;
    const unsigned blocks = ggml_cuda_ew_blocks(n);
    const int      T      = GGML_CUDA_EW_THREADS;

    auto run_map = [&](int op, float p0, float p1, int64_t n_past = 0) {
        k_map<<<blocks, T, 0, ctx.stream>>>(ggml_cuda_desc(node->src[0]), ggml_cuda_desc(node), op, p0, p1, n_past, n);
    };

    switch (node->op) {
        case GGML_OP_DUP:
        case GGML_OP_CONT:
        case GGML_OP_CPY: compute_dup(ctx, node); break;
        case GGML_OP_ADD:
        case GGML_OP_SUB:
        case GGML_OP_MUL:
        case GGML_OP_DIV:
            k_binary<<<blocks, T, 0, ctx.stream>>>(ggml_cuda_desc(node->src[0]), ggml_cuda_desc(node->src[1]),
                                                  ggml_cuda_desc(node), (int) node->op, n);
            break;
        case GGML_OP_SQR: run_map(MAP_SQR, 0.0f, 0.0f); break;
        case GGML_OP_SQRT: run_map(MAP_SQRT, 0.0f, 0.0f); break;
        case GGML_OP_SCALE: {
            const float s = ggml_get_op_params_f32(node, 0);
            const float b = ggml_get_op_params_f32(node, 1);
            // plain scale keeps s*x exactly (adding +0 would turn -0 into +0), as the CPU
            run_map(b == 0.0f ? MAP_SCALE : MAP_SCALE_BIAS, s, b);
            break;
        }
        case GGML_OP_CLAMP: run_map(MAP_CLAMP, ggml_get_op_params_f32(node, 0), ggml_get_op_params_f32(node, 1)); break;
        case GGML_OP_LEAKY_RELU: run_map(MAP_LEAKY_RELU, ggml_get_op_params_f32(node, 0), 0.0f); break;
        case GGML_OP_LOG: run_map(MAP_LOG, 0.0f, 0.0f); break;
        case GGML_OP_SIN: run_map(MAP_SIN, 0.0f, 0.0f); break;
        case GGML_OP_COS: run_map(MAP_COS, 0.0f, 0.0f); break;
        case GGML_OP_DIAG_MASK_INF: run_map(MAP_DIAG_MASK_INF, 0.0f, 0.0f, ggml_get_op_params_i32(node, 0)); break;
        case GGML_OP_UNARY: run_map((int) ggml_get_unary_op(node), 0.0f, 0.0f); break;
        case GGML_OP_GLU: {
            const ggml_tensor * a = node->src[0];
            const ggml_tensor * b = node->src[1];
            k_glu<<<blocks, T, 0, ctx.stream>>>(ggml_cuda_desc(a), ggml_cuda_desc(b ? b : a), b != nullptr,
                                               ggml_get_op_params_i32(node, 1) != 0, ggml_cuda_desc(node),
                                               (int) ggml_get_glu_op(node), ggml_get_op_params_f32(node, 2),
                                               ggml_get_op_params_f32(node, 3), n);
            break;
        }
        default: GGML_ABORT("ggml-cuda: elementwise op %s not handled", ggml_op_name(node->op));
    }
}
