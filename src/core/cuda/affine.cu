// affine.cu — the FP32 fusion MUL(x, gate) -> ADD(residual, .) on CUDA: y = residual + x * gate
// with the product and the sum each rounded separately in FP32 (__fmul_rn, __fadd_rn), exactly
// the native MUL and ADD, so fusion on equals fusion off bit for bit. The gate may broadcast into
// x by ggml's repeat rule (the per-channel modulation gates of the DiT blocks).
//
// Declined, so the ordinary operators run: non-F32 or non-contiguous tensors, a residual of
// another shape, an ADD of the product with itself, and fusion disabled (SD_DISABLE_FUSION,
// GGML_CUDA_DISABLE_FUSION). External consumers of the product are refused by ggml's fusion
// legality checks. An output exactly over x, the residual or a same-shape gate is safe for the
// pointwise kernel; any other overlap (partial, or a broadcast gate) goes through the workspace.
//
// Not here (spec, "affine.cu"): the Concat -> [Permute] -> FP16 Copy and Contiguous -> Scale ->
// Permute -> FP16 Copy fusions.

#include "cuda_kernels.h"

#include "../chain_match.h"
#include "../ggml_extensions.h"
#include "../kernel_desc.h"

namespace SD_CUDA_NAMESPACE {

namespace {

struct mul_add_args {
    const float * x;
    const float * gate;
    const float * res;
    float *       y;
    int64_t       ne0, ne1, ne2;      // y's shape (ne3 implied by total)
    int64_t       g0, g1, g2, g3;     // the gate's shape (broadcast by repeat)
    int64_t       total;
};

__global__ void mul_add_kernel(const mul_add_args a) {
    const int64_t stride = (int64_t) gridDim.x * blockDim.x;
    for (int64_t i = (int64_t) blockIdx.x * blockDim.x + threadIdx.x; i < a.total; i += stride) {
        const int64_t i0 = i % a.ne0, i1 = (i / a.ne0) % a.ne1, i2 = (i / (a.ne0 * a.ne1)) % a.ne2,
                      i3 = i / (a.ne0 * a.ne1 * a.ne2);
        const int64_t gi = (i0 % a.g0) + a.g0 * ((i1 % a.g1) + a.g1 * ((i2 % a.g2) + a.g2 * (i3 % a.g3)));
        const float   p  = __fmul_rn(a.x[i], a.gate[gi]);
        a.y[i]           = __fadd_rn(a.res[i], p);
    }
}

struct mul_add_chain {
    const ggml_tensor *x = nullptr, *gate = nullptr, *residual = nullptr;
};

bool plain_f32(const ggml_tensor * t) { return t->type == GGML_TYPE_F32 && ggml_is_contiguous(t) && aligned_to(t, 4); }

bool chain_of(const ggml_tensor * mul, const ggml_tensor * add, mul_add_chain & c) {
    c = mul_add_chain{};
    if (mul->op != GGML_OP_MUL || !plain_f32(mul) || !mul->src[0] || !mul->src[1] || mul->src[2]) return false;
    const ggml_tensor *a = mul->src[0], *b = mul->src[1];
    if (plain_f32(a) && ggml_are_same_shape(a, mul) && plain_f32(b) && ggml_can_repeat(b, mul)) {
        c.x    = a;
        c.gate = b;
    } else if (plain_f32(b) && ggml_are_same_shape(b, mul) && plain_f32(a) && ggml_can_repeat(a, mul)) {
        c.x    = b;
        c.gate = a;
    } else {
        return false;
    }
    c.residual = sd_chain::residual_of(add, mul); // same shape, F32, contiguous; NULL for ADD(mul, mul)
    return c.residual && aligned_to(c.residual, 4) && aligned_to(add, 4);
}

bool cuda_device(ggml_backend_dev_t dev) {
    ggml_ext_gpu_device_info info{};
    return device_info(dev, info);
}

int mul_add_match(ggml_backend_dev_t dev, const ggml_cgraph * graph, int first, void *) {
    if (!fusion_enabled() || !cuda_device(dev)) return 0;
    ggml_cgraph * g = const_cast<ggml_cgraph *>(graph); // the accessors are not const; read only
    if (first + 1 >= ggml_graph_n_nodes(g)) return 0;
    mul_add_chain c;
    return chain_of(ggml_graph_node(g, first), ggml_graph_node(g, first + 1), c) ? 2 : 0;
}

ggml_status mul_add_prepare(ggml_backend_dev_t, const ggml_ext_nodes * nodes, void ** state, size_t * ws, void *) {
    *state = nullptr;
    *ws    = ggml_nbytes(nodes->nodes[nodes->n_nodes - 1]); // staging for overlapping outputs
    return GGML_STATUS_SUCCESS;
}

// pointwise-safe: no overlap, or exactly the same bytes (each element read, then written, by one thread)
bool pointwise_safe(const ggml_tensor * out, const ggml_tensor * in) {
    return !overlaps(out, in) || same_bytes(out, in);
}

ggml_status mul_add_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void *, void * ws, size_t ws_bytes,
                            void *) {
    mul_add_chain c;
    if (nodes->n_nodes != 2 || !chain_of(nodes->nodes[0], nodes->nodes[1], c)) return GGML_STATUS_FAILED;
    ggml_tensor * out = nodes->nodes[1];
    exec_ctx      ctx;
    if (!get_exec(backend, ctx)) return GGML_STATUS_FAILED;
    const bool stage = !pointwise_safe(out, c.x) || !pointwise_safe(out, c.residual) ||
                       (overlaps(out, c.gate) && !(same_bytes(out, c.gate) && ggml_are_same_shape(out, c.gate)));
    if (stage && (!ws || ws_bytes < ggml_nbytes(out))) return GGML_STATUS_FAILED;
    mul_add_args a{};
    a.x     = (const float *) c.x->data;
    a.gate  = (const float *) c.gate->data;
    a.res   = (const float *) c.residual->data;
    a.y     = stage ? (float *) ws : (float *) out->data;
    a.ne0   = out->ne[0];
    a.ne1   = out->ne[1];
    a.ne2   = out->ne[2];
    a.g0    = c.gate->ne[0];
    a.g1    = c.gate->ne[1];
    a.g2    = c.gate->ne[2];
    a.g3    = c.gate->ne[3];
    a.total = ggml_nelements(out);
    if (a.total == 0) return GGML_STATUS_SUCCESS;
    const int64_t blocks = (a.total + 255) / 256;
    mul_add_kernel<<<(unsigned) (blocks < 65535 * 16 ? blocks : 65535 * 16), 256, 0, ctx.stream>>>(a);
    if (!launched("mul_gate_add_residual")) return GGML_STATUS_FAILED;
    if (stage && !cuda_ok(cudaMemcpyAsync(out->data, ws, ggml_nbytes(out), cudaMemcpyDeviceToDevice, ctx.stream),
                          "mul/add copy"))
        return GGML_STATUS_FAILED;
    return GGML_STATUS_SUCCESS;
}

} // namespace

bool register_affine(ggml_backend_dev_t dev) {
    using namespace sd_kernels;
    const ggml_ext_kernel_desc d =
        fusion_rule(SD_CUDA_KERNEL_MUL_ADD, mul_add_match, nullptr, mul_add_prepare, mul_add_execute);
    return register_all(dev, &d, 1, "sd cuda affine");
}

} // namespace SD_CUDA_NAMESPACE
