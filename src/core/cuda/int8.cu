// int8.cu — sd.linear_i8.v1 on CUDA: I8 x I8 -> I32 GEMM through the backend's borrowed cuBLAS
// handle (cublasGemmEx, CUDA_R_8I operands, CUBLAS_COMPUTE_32I), then a rescale epilogue kernel.
// No CUTLASS: the cuBLAS path is the only GEMM here.
//
// Activations: F32 input is quantized (ConvRot when group > 1, convrot.cu) into the workspace;
// a packed sd.quantize_i8_convrot.v1 input is consumed directly (rows, then its F32 scale tail at
// byte K * pad4(rows)); plain I8 input is used in place with its separate input_scale tensor.
//
// Exactness: the int32 sums are exact (the schema bounds K), and the epilogue rounds each step
// alone in the facts sheet's order, y = ((float(acc) * s_x[r]) * s_w[o]) + b[o], then, for the
// gate/residual fusion (i8_gated_residual.cu), y = y * gate[o] and y = residual[r, o] + y, all
// through __fmul_rn / __fadd_rn (never contracted). So the outputs are bit-identical to the CPU
// kernel's for the same packed activations.
//
// Requirements (else the node declines and the scheduler runs it elsewhere, e.g. the CPU):
// Turing or newer with INT8 BLAS (GGML_EXT_GPU_DEVICE_V1), K and N multiples of 4, contiguous
// operands starting on 16 bytes, rows + 3 within int32, ConvRot groups the quantizer supports.
//
// Overlap: the GEMM reads the weight and activations before the epilogue writes (stream order),
// so only what the epilogue reads matters: an output overlapping a scale, bias or gate vector, or
// partly overlapping the residual, is computed in place over the workspace accumulator (each
// thread reads its int32 and writes its float at the same index) and then copied. An output that
// is exactly the residual is updated in place (each element read, then written, by one thread).

#include "cuda_kernels.h"

#include "../ggml_extensions.h"
#include "../kernel_desc.h"

namespace SD_CUDA_NAMESPACE {

namespace {

constexpr size_t kWsAlign = 256;
size_t           align_ws(size_t x) { return (x + kWsAlign - 1) & ~(kWsAlign - 1); }

// ---------------------------------------------------------------------------------------------
// Input decoding of sd.linear_i8.v1 (sources by flags, input kind, rows). Kept in this one
// function so it can be switched to the shared src/core/int8_schema.* decoder when that lands.

struct linear_inputs {
    const ggml_tensor *weight = nullptr, *input = nullptr, *wscale = nullptr, *bias = nullptr, *iscale = nullptr;
    int     kind  = -1;
    int     group = 1; // the ConvRot group of an F32 input (1 = none)
    int64_t K = 0, N = 0, rows = 0;
};

bool decode_linear_inputs(const ggml_tensor * node, linear_inputs & in) {
    if (!node || ggml_ext_get_op(node) != sd_op_linear_i8()) return false;
    sd_linear_i8_attrs at{};
    ggml_ext_get_attrs(node, &at, sizeof(at));
    if (at.flags & ~(SD_LINEAR_I8_HAS_WEIGHT_SCALE | SD_LINEAR_I8_HAS_BIAS | SD_LINEAR_I8_HAS_INPUT_SCALE)) return false;
    int n = 0;
    while (n < GGML_MAX_SRC && node->src[n]) ++n;
    const int expect = 2 + !!(at.flags & SD_LINEAR_I8_HAS_WEIGHT_SCALE) + !!(at.flags & SD_LINEAR_I8_HAS_BIAS) +
                       !!(at.flags & SD_LINEAR_I8_HAS_INPUT_SCALE);
    if (n != expect) return false;
    int i     = 0;
    in.weight = node->src[i++];
    in.input  = node->src[i++];
    if (at.flags & SD_LINEAR_I8_HAS_WEIGHT_SCALE) in.wscale = node->src[i++];
    if (at.flags & SD_LINEAR_I8_HAS_BIAS) in.bias = node->src[i++];
    if (at.flags & SD_LINEAR_I8_HAS_INPUT_SCALE) in.iscale = node->src[i++];
    in.kind  = at.input_kind;
    in.group = at.group <= 1 ? 1 : at.group;
    in.K     = in.weight->ne[0];
    in.N     = in.weight->ne[1];
    if (at.out_ne[0] < 1 || at.out_ne[1] < 1 || at.out_ne[2] < 1) return false;
    in.rows = at.out_ne[0] * at.out_ne[1] * at.out_ne[2];
    return true;
}

// Byte offset of the activation's F32 row scales inside a packed ConvRot tensor.
size_t packed_scale_offset(int64_t K, int64_t rows) { return (size_t) (K * pad_up(rows, 4)); }

// Workspace: [quantized activations + scales (F32 input only)] [int32 accumulator rows x N]
struct linear_layout {
    size_t act_bytes = 0, acc_off = 0, total = 0;
};

linear_layout layout_of(const linear_inputs & in) {
    linear_layout l;
    if (in.kind == SD_LINEAR_I8_INPUT_F32) l.act_bytes = packed_scale_offset(in.K, in.rows) + 4 * (size_t) in.rows;
    l.acc_off = align_ws(l.act_bytes);
    l.total   = l.acc_off + align_ws(sizeof(int32_t) * (size_t) in.rows * (size_t) in.N);
    return l;
}

bool f32_vec(const ggml_tensor * t, int64_t n) {
    return t && t->type == GGML_TYPE_F32 && ggml_is_contiguous(t) && ggml_nelements(t) == n && aligned_to(t, 4);
}

// ---------------------------------------------------------------------------------------------
// The epilogue: y[r, o] = ((float(acc) * sx[r]) * sw[o]) + b[o], then * gate[o], then residual + y.
// y may be acc itself (read, then written, at the same index) or exactly the residual.

struct epilogue_args {
    const int32_t * acc;
    const float *   sx;
    const float *   sw;   // or nullptr
    const float *   bias; // or nullptr
    const float *   gate; // or nullptr
    const float *   res;  // or nullptr
    float *         y;
    int64_t         N, total;
};

__global__ void epilogue_kernel(const epilogue_args a) {
    const int64_t stride = (int64_t) gridDim.x * blockDim.x;
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < a.total; i += stride) {
        const int64_t r = i / a.N, o = i % a.N;
        float         v = __fmul_rn(__int2float_rn(a.acc[i]), a.sx[r]);
        if (a.sw) v = __fmul_rn(v, a.sw[o]);
        if (a.bias) v = __fadd_rn(v, a.bias[o]);
        if (a.gate) v = __fmul_rn(v, a.gate[o]);
        if (a.res) v = __fadd_rn(a.res[i], v);
        a.y[i] = v;
    }
}

bool linear_supports(ggml_backend_dev_t dev, const ggml_tensor * node, void *) { return linear_node_supported(dev, node); }

ggml_status linear_prepare(ggml_backend_dev_t, const ggml_ext_nodes * nodes, void ** state, size_t * ws, void *) {
    *state = nullptr;
    *ws    = linear_workspace_bytes(nodes->nodes[nodes->n_nodes - 1]);
    return GGML_STATUS_SUCCESS;
}

ggml_status linear_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void *, void * ws, size_t ws_bytes,
                           void *) {
    ggml_tensor * node = nodes->nodes[nodes->n_nodes - 1];
    return linear_run(backend, node, node, nullptr, nullptr, ws, ws_bytes);
}

} // namespace

bool linear_node_supported(ggml_backend_dev_t dev, const ggml_tensor * node) {
    linear_inputs in;
    if (!decode_linear_inputs(node, in)) return false;
    if (dev) {
        ggml_ext_gpu_device_info info{};
        if (!device_info(dev, info) || !info.int8_blas || info.compute_capability < 75) return false;
    }
    const ggml_tensor * w = in.weight;
    if (w->type != GGML_TYPE_I8 || !ggml_is_contiguous(w) || w->ne[2] != 1 || w->ne[3] != 1 || !aligned_to(w, 16))
        return false;
    const int64_t K = in.K, N = in.N, rows = in.rows;
    if (K <= 0 || N <= 0 || K > SD_LINEAR_I8_MAX_K || K % 4 != 0 || N % 4 != 0 || N > INT32_MAX) return false;
    if (rows > INT32_MAX - 3) return false;
    if (node->type != GGML_TYPE_F32 || !ggml_is_contiguous(node) || !aligned_to(node, 4) || ggml_nelements(node) != rows * N)
        return false;
    if (in.wscale && !f32_vec(in.wscale, N)) return false;
    if (in.bias && !f32_vec(in.bias, N)) return false;
    const ggml_tensor * x = in.input;
    if (!ggml_is_contiguous(x) || x->ne[0] != K || !aligned_to(x, 16)) return false;
    switch (in.kind) {
        case SD_LINEAR_I8_INPUT_F32:
            return x->type == GGML_TYPE_F32 && rows_of(x) == rows && !in.iscale && K % in.group == 0 &&
                   quantizer_group_supported(dev, in.group);
        case SD_LINEAR_I8_INPUT_PACKED:
            return x->type == GGML_TYPE_I8 && x->ne[2] == 1 && x->ne[3] == 1 && x->ne[1] >= packed_ne1(K, rows) &&
                   !in.iscale;
        case SD_LINEAR_I8_INPUT_I8: return x->type == GGML_TYPE_I8 && rows_of(x) == rows && f32_vec(in.iscale, rows);
        default: return false;
    }
}

size_t linear_workspace_bytes(const ggml_tensor * node) {
    linear_inputs in;
    if (!decode_linear_inputs(node, in)) return 0;
    return layout_of(in).total;
}

ggml_status linear_run(ggml_backend_t backend, const ggml_tensor * lin, ggml_tensor * out, const ggml_tensor * gate,
                       const ggml_tensor * residual, void * ws, size_t ws_bytes) {
    linear_inputs in;
    if (!decode_linear_inputs(lin, in)) return GGML_STATUS_FAILED;
    const linear_layout l = layout_of(in);
    if (!ws || ws_bytes < l.total || ((uintptr_t) ws % 16) != 0) return GGML_STATUS_FAILED;
    exec_ctx ctx;
    if (!get_exec(backend, ctx)) return GGML_STATUS_FAILED;
    cublasHandle_t blas = get_blas(backend);
    if (!blas) return GGML_STATUS_FAILED;

    const int64_t K = in.K, N = in.N, rows = in.rows;
    char *        wsb = (char *) ws;
    // the activation rows and their scales
    const int8_t * act = nullptr;
    const float *  sx  = nullptr;
    switch (in.kind) {
        case SD_LINEAR_I8_INPUT_F32:
            if (!launch_quantize((const float *) in.input->data, wsb, K, rows, in.group, ctx.stream))
                return GGML_STATUS_FAILED;
            act = (const int8_t *) wsb;
            sx  = (const float *) (wsb + packed_scale_offset(K, rows));
            break;
        case SD_LINEAR_I8_INPUT_PACKED:
            act = (const int8_t *) in.input->data;
            sx  = (const float *) ((const char *) in.input->data + packed_scale_offset(K, rows));
            break;
        case SD_LINEAR_I8_INPUT_I8:
            act = (const int8_t *) in.input->data;
            sx  = (const float *) in.iscale->data;
            break;
        default: return GGML_STATUS_FAILED;
    }

    // acc (column-major N x rows, ldc N) = W^T (W: column-major K x N, ld K) * A (K x rows, ld K)
    int32_t *     acc = (int32_t *) (wsb + l.acc_off);
    const int32_t one = 1, zero = 0;
    if (!cublas_ok(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int) N, (int) rows, (int) K, &one, in.weight->data,
                                CUDA_R_8I, (int) K, act, CUDA_R_8I, (int) K, &zero, acc, CUDA_R_32I, (int) N,
                                CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx (I8 x I8 -> I32)"))
        return GGML_STATUS_FAILED;

    // where the epilogue writes: in place over acc when the output overlaps anything it reads
    // (other than exactly the residual)
    bool stage = (in.kind != SD_LINEAR_I8_INPUT_F32 &&
                  ((in.kind == SD_LINEAR_I8_INPUT_PACKED && overlaps(out, in.input)) ||
                   (in.iscale && overlaps(out, in.iscale)))) ||
                 (in.wscale && overlaps(out, in.wscale)) || (in.bias && overlaps(out, in.bias)) ||
                 (gate && overlaps(out, gate)) || (residual && overlaps(out, residual) && !same_bytes(out, residual));
    epilogue_args a{};
    a.acc   = acc;
    a.sx    = sx;
    a.sw    = in.wscale ? (const float *) in.wscale->data : nullptr;
    a.bias  = in.bias ? (const float *) in.bias->data : nullptr;
    a.gate  = gate ? (const float *) gate->data : nullptr;
    a.res   = residual ? (const float *) residual->data : nullptr;
    a.y     = stage ? (float *) acc : (float *) out->data;
    a.N     = N;
    a.total = rows * N;
    const int64_t blocks = (a.total + 255) / 256;
    epilogue_kernel<<<(unsigned) (blocks < 65535 * 16 ? blocks : 65535 * 16), 256, 0, ctx.stream>>>(a);
    if (!launched("linear_i8 epilogue")) return GGML_STATUS_FAILED;
    if (stage && !cuda_ok(cudaMemcpyAsync(out->data, acc, sizeof(float) * (size_t) a.total, cudaMemcpyDeviceToDevice,
                                          ctx.stream),
                          "linear_i8 copy"))
        return GGML_STATUS_FAILED;
    return GGML_STATUS_SUCCESS;
}

bool register_int8(ggml_backend_dev_t dev) {
    using namespace sd_kernels;
    const ggml_ext_kernel_desc descs[] = {
        op_kernel(SD_CUDA_KERNEL_LINEAR_I8, sd_op_linear_i8(), linear_supports, linear_prepare, linear_execute),
    };
    return register_all(dev, descs, 1, "sd cuda int8");
}

} // namespace SD_CUDA_NAMESPACE
