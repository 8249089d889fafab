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
#include "../int8_schema.h"
#include "../kernel_desc.h"

namespace SD_CUDA_NAMESPACE {

namespace {

constexpr uint64_t kWsAlign = 256;

// ---------------------------------------------------------------------------------------------
// Input decoding and workspace layout: the shared decoder (src/core/int8_schema.h), plus this
// backend's part, the int32 accumulator.

using sd_int8_schema::linear_node;
using sd_int8_schema::packed_scale_offset;

// Workspace: [quantized activations + scales (F32 input only, the quantizer's packed layout)]
// [int32 accumulator rows x N], parts 256-byte aligned (the workspace base is a device buffer's).
struct linear_layout {
    size_t act_off = 0, scale_off = 0, acc_off = 0, total = 0;
};

linear_layout layout_of(const linear_node & l) {
    sd_int8_schema::linear_workspace_spec spec;
    spec.alignment = kWsAlign;
    spec.layout    = sd_int8_schema::activation_layout::packed;
    sd_int8_schema::linear_workspace w = sd_int8_schema::plan_linear_workspace(l, spec);
    linear_layout                    r;
    r.act_off   = (size_t) w.act_off;
    r.scale_off = (size_t) w.scale_off;
    r.acc_off   = (size_t) w.parts.add(sizeof(int32_t) * (uint64_t) l.M * (uint64_t) l.N);
    r.total     = (size_t) w.parts.total(false);
    return r;
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
    linear_node in;
    if (!sd_int8_schema::decode_linear(node, in)) return false; // the schema's checks
    if (dev) {
        ggml_ext_gpu_device_info info{};
        if (!device_info(dev, info) || !info.int8_blas || info.compute_capability < 75) return false;
    }
    // this backend's limits: cuBLAS INT8 (K, N multiples of 4; 16-byte aligned I8 operands; int32
    // dimensions), 4-byte aligned F32 vectors, the groups the CUDA quantizer rotates
    const int64_t K = in.K, N = in.N, rows = in.M;
    if (K % 4 != 0 || N % 4 != 0 || N > INT32_MAX || rows < 1 || rows > INT32_MAX - 3) return false;
    if (!aligned_to(in.weight, 16) || !aligned_to(in.input, 16) || !aligned_to(node, 4)) return false;
    for (const ggml_tensor * v : {in.weight_scale, in.bias, in.input_scale})
        if (v && !aligned_to(v, 4)) return false;
    return in.kind != SD_LINEAR_I8_INPUT_F32 || quantizer_group_supported(dev, in.group);
}

size_t linear_workspace_bytes(const ggml_tensor * node) {
    linear_node in;
    if (!sd_int8_schema::linear_operands(node, in) || in.M < 0) return 0;
    return layout_of(in).total;
}

ggml_status linear_run(ggml_backend_t backend, const ggml_tensor * lin, ggml_tensor * out, const ggml_tensor * gate,
                       const ggml_tensor * residual, void * ws, size_t ws_bytes) {
    linear_node in;
    if (!sd_int8_schema::linear_operands(lin, in) || in.M < 1) return GGML_STATUS_FAILED;
    const linear_layout l = layout_of(in);
    if (!ws || ws_bytes < l.total || ((uintptr_t) ws % 16) != 0) return GGML_STATUS_FAILED;
    exec_ctx ctx;
    if (!get_exec(backend, ctx)) return GGML_STATUS_FAILED;
    cublasHandle_t blas = get_blas(backend);
    if (!blas) return GGML_STATUS_FAILED;

    const int64_t K = in.K, N = in.N, rows = in.M;
    char *        wsb = (char *) ws;
    // the activation rows and their scales
    const int8_t * act = nullptr;
    const float *  sx  = nullptr;
    switch (in.kind) {
        case SD_LINEAR_I8_INPUT_F32:
            if (!launch_quantize((const float *) in.input->data, wsb + l.act_off, K, rows, in.group, ctx.stream))
                return GGML_STATUS_FAILED;
            act = (const int8_t *) (wsb + l.act_off);
            sx  = (const float *) (wsb + l.scale_off);
            break;
        case SD_LINEAR_I8_INPUT_PACKED:
            act = (const int8_t *) in.input->data;
            sx  = (const float *) ((const char *) in.input->data + packed_scale_offset(K, rows));
            break;
        case SD_LINEAR_I8_INPUT_I8:
            act = (const int8_t *) in.input->data;
            sx  = (const float *) in.input_scale->data;
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
                   (in.input_scale && overlaps(out, in.input_scale)))) ||
                 (in.weight_scale && overlaps(out, in.weight_scale)) || (in.bias && overlaps(out, in.bias)) ||
                 (gate && overlaps(out, gate)) || (residual && overlaps(out, residual) && !same_bytes(out, residual));
    epilogue_args a{};
    a.acc   = acc;
    a.sx    = sx;
    a.sw    = in.weight_scale ? (const float *) in.weight_scale->data : nullptr;
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
