// rope.cu — sd.rope_apply.v1 and the RMS_NORM -> MUL(., w[d]) -> sd.rope_apply.v1 [-> SCALE]
// [-> CPY to F16] fusion on CUDA.
//
// Exactness (the CPU kernel's order, src/core/cpu/rope.cpp): every rotated element is
// x0 * pe0 + x1 * pe1 with two separately rounded F32 products and one F32 add, written with
// __fmul_rn / __fadd_rn so no multiply-add is ever contracted whatever the compiler flags; the
// standalone kernel is therefore bit-identical to the CPU kernel. The fused kernel reproduces the
// unfused chain on the same CUDA device (fusion on == fusion off, bit for bit): the native CUDA
// RMS_NORM's row reduction operation for operation (ggml-cuda ops-rows.cu: a 256-thread block,
// lane-strided double sums of x * x, the same shuffle / shared-memory tree, scale =
// 1 / sqrt(sum / d + eps) in double, y = float(double(x) * scale)), then the native MUL (one
// rounded float product), the same rotation, SCALE with bias 0 as one rounded product
// (scale * v) and the F16 copy's round-to-nearest-even conversion. Against the CPU chain it
// differs only by the order of the double sum (and, on the CPU's fast path, its float scale), so
// the tests compare the fusion with the CPU within a few ulps.
//
// Standalone: one warp per output row; fused: one 256-thread block per row (the native norm's
// shape). Both loop over rows grid-stride; x is read through its own float-aligned
// byte strides (any view), pe, w and the output are contiguous. An output that overlaps an input
// is computed in the workspace and copied (stream-ordered), so allocator reuse is safe.

#include "cuda_kernels.h"
#include "../graph_gather.h"

#include "../ggml_extensions.h"
#include "../kernel_desc.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace SD_CUDA_NAMESPACE {

namespace {

constexpr int kRopeWarps = 4; // rows per 128-thread block

struct rope_args {
    const char *  x;          // [d, H, L, N] at byte strides nb1..nb3 (rows contiguous)
    int64_t       nb1, nb2, nb3;
    const float * pe;         // [2, 2, n_freq, L] contiguous
    const float * w;          // [d] (fused) or nullptr
    void *        out;        // [d, L, H * N] contiguous, F32 or F16
    int64_t       d, H, L, N, n_freq;
    float         eps;
    float         scale;      // the SCALE tail's factor (has_scale)
    bool          has_scale;
    bool          f16_out;
};

__device__ inline void store(const rope_args & a, int64_t at, float v) {
    if (a.has_scale) v = __fmul_rn(a.scale, v);
    if (a.f16_out) ((__half *) a.out)[at] = to_f16(v);
    else ((float *) a.out)[at] = v;
}

// The rotation of one row by `nthreads` threads starting at thread `t`: y_of(i) gives the
// (normalised and weighted) input element i.
template <int MODE, class Y>
__device__ inline void rotate_row(const rope_args & a, const float * pr, int64_t orow, int t, int nthreads, Y y_of) {
    for (int64_t j = t; j < a.n_freq; j += nthreads) {
        const int64_t i0 = MODE == SD_ROPE_INTERLEAVED ? 2 * j : j;
        const int64_t i1 = MODE == SD_ROPE_INTERLEAVED ? 2 * j + 1 : j + a.n_freq;
        const float   y0 = y_of(i0), y1 = y_of(i1);
        const float   p0 = pr[4 * j], p1 = pr[4 * j + 1], p2 = pr[4 * j + 2], p3 = pr[4 * j + 3];
        store(a, orow + i0, __fadd_rn(__fmul_rn(y0, p0), __fmul_rn(y1, p1)));
        store(a, orow + i1, __fadd_rn(__fmul_rn(y0, p2), __fmul_rn(y1, p3)));
    }
    for (int64_t i = 2 * a.n_freq + t; i < a.d; i += nthreads) store(a, orow + i, y_of(i));
}

// output row (h + H * n) * L + l: its input row
__device__ inline const float * input_row(const rope_args & a, int64_t row) {
    const int64_t l = row % a.L, hn = row / a.L, h = hn % a.H, n = hn / a.H;
    return (const float *) (a.x + h * a.nb1 + l * a.nb2 + n * a.nb3);
}

template <int MODE> __global__ void rope_kernel(const rope_args a) {
    const int     lane = threadIdx.x % kWarp;
    const int64_t rows = a.L * a.H * a.N, stride = (int64_t) gridDim.x * kRopeWarps;
    for (int64_t row = (int64_t) blockIdx.x * kRopeWarps + threadIdx.x / kWarp; row < rows; row += stride) {
        const float * xr = input_row(a, row);
        rotate_row<MODE>(a, a.pe + (row % a.L) * 4 * a.n_freq, row * a.d, lane, kWarp,
                         [&](int64_t i) { return xr[i]; });
    }
}

constexpr int kNormThreads = 256; // the native RMS_NORM's row block

// The native block sum (ops-rows.cu block_sum): xor butterfly in each warp, the warp totals
// through shared memory, the butterfly again over them; every thread gets the same value.
__device__ inline double native_block_sum(double v, double * sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    __syncthreads(); // sh may still be read by the previous row's reduction
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    double r = lane < nw ? sh[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
    return r;
}

template <int MODE> __global__ void __launch_bounds__(kNormThreads) rope_norm_kernel(const rope_args a) {
    __shared__ double sh[32];
    const int64_t     rows = a.L * a.H * a.N;
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float * xr  = input_row(a, row);
        double        acc = 0.0;
        for (int64_t i = threadIdx.x; i < a.d; i += blockDim.x) {
            const double v = (double) xr[i];
            acc            = __dadd_rn(acc, __dmul_rn(v, v)); // the square is exact in double
        }
        acc                = native_block_sum(acc, sh);
        const double scale = 1.0 / sqrt(acc / (double) a.d + (double) a.eps);
        rotate_row<MODE>(a, a.pe + (row % a.L) * 4 * a.n_freq, row * a.d, threadIdx.x, blockDim.x, [&](int64_t i) {
            // the native RMS_NORM's stored value, then the native MUL
            return __fmul_rn(__double2float_rn(__dmul_rn((double) xr[i], scale)), a.w[i]);
        });
    }
}

bool is_rope_node(const ggml_tensor * t) { return t != nullptr && ggml_ext_get_op(t) == sd_op_rope_apply(); }

// F32 rows at float-aligned byte strides, starting on a float
bool float_strided(const ggml_tensor * t) {
    return t->type == GGML_TYPE_F32 && t->nb[0] == sizeof(float) && t->nb[1] % 4 == 0 && t->nb[2] % 4 == 0 &&
           t->nb[3] % 4 == 0 && aligned_to(t, 4);
}

bool cuda_device(ggml_backend_dev_t dev) {
    ggml_ext_gpu_device_info info{};
    return dev == nullptr || device_info(dev, info); // nullptr: execution re-check, device known
}

bool rope_supports(ggml_backend_dev_t dev, const ggml_tensor * node, void *) {
    if (!is_rope_node(node) || !cuda_device(dev)) return false;
    const ggml_tensor *x = node->src[0], *pe = node->src[1];
    if (!x || !pe || !float_strided(x) || pe->type != GGML_TYPE_F32 || !ggml_is_contiguous(pe) || !aligned_to(pe, 4))
        return false;
    if (node->type != GGML_TYPE_F32 || !ggml_is_contiguous(node)) return false;
    return 2 * pe->ne[2] <= x->ne[0] && pe->ne[3] == x->ne[2];
}

// The fused tail after the RoPE: SCALE (bias 0) and / or the CPY to F16.
struct rope_tail {
    const ggml_tensor * scale = nullptr;
    const ggml_tensor * copy  = nullptr;
};

ggml_status rope_run(ggml_backend_t backend, const ggml_tensor * x, const ggml_tensor * w, float eps,
                     const ggml_tensor * rope, const rope_tail & tail, ggml_tensor * out, void * ws, size_t ws_bytes) {
    exec_ctx ctx;
    if (!get_exec(backend, ctx)) return GGML_STATUS_FAILED;
    const ggml_tensor * pe = rope->src[1];
    sd_rope_apply_attrs at{};
    ggml_ext_get_attrs(rope, &at, sizeof(at));

    rope_args a{};
    a.x = (const char *) x->data;
    a.nb1 = (int64_t) x->nb[1];
    a.nb2 = (int64_t) x->nb[2];
    a.nb3 = (int64_t) x->nb[3];
    a.pe = (const float *) pe->data;
    a.w = w ? (const float *) w->data : nullptr;
    a.d = x->ne[0];
    a.H = x->ne[1];
    a.L = x->ne[2];
    a.N = x->ne[3];
    a.n_freq = pe->ne[2];
    a.eps = eps;
    a.has_scale = tail.scale != nullptr;
    if (tail.scale) memcpy(&a.scale, tail.scale->op_params, sizeof(float));
    a.f16_out = out->type == GGML_TYPE_F16;

    // x's bytes span (any strides): the output must not overlap it, pe or w
    bool stage = overlaps(out, pe) || (w && overlaps(out, w));
    {
        const char * x0 = (const char *) x->data, *x1 = x0;
        for (int k = 0; k < 4; ++k) x1 += (x->ne[k] - 1) * (int64_t) x->nb[k];
        x1 += sizeof(float);
        const char * o0 = (const char *) out->data;
        stage = stage || (o0 < x1 && x0 < o0 + ggml_nbytes(out));
    }
    if (stage && (!ws || ws_bytes < ggml_nbytes(out))) return GGML_STATUS_FAILED;
    a.out = stage ? ws : out->data;

    const int64_t rows = a.L * a.H * a.N;
    if (rows == 0) return GGML_STATUS_SUCCESS;
    const bool il = at.mode == SD_ROPE_INTERLEAVED;
    if (w) {
        const dim3 grid((unsigned) std::min<int64_t>(rows, 65535 * 16));
        if (il) rope_norm_kernel<SD_ROPE_INTERLEAVED><<<grid, kNormThreads, 0, ctx.stream>>>(a);
        else rope_norm_kernel<SD_ROPE_SPLIT_HALF><<<grid, kNormThreads, 0, ctx.stream>>>(a);
    } else {
        const dim3 grid((unsigned) std::min<int64_t>((rows + kRopeWarps - 1) / kRopeWarps, 65535 * 16));
        if (il) rope_kernel<SD_ROPE_INTERLEAVED><<<grid, kRopeWarps * kWarp, 0, ctx.stream>>>(a);
        else rope_kernel<SD_ROPE_SPLIT_HALF><<<grid, kRopeWarps * kWarp, 0, ctx.stream>>>(a);
    }
    if (!launched("rope_apply")) return GGML_STATUS_FAILED;
    if (stage &&
        !cuda_ok(cudaMemcpyAsync(out->data, ws, ggml_nbytes(out), cudaMemcpyDeviceToDevice, ctx.stream), "rope copy"))
        return GGML_STATUS_FAILED;
    return GGML_STATUS_SUCCESS;
}

ggml_status rope_prepare(ggml_backend_dev_t, const ggml_ext_nodes * nodes, void ** state, size_t * ws, void *) {
    *state = nullptr;
    *ws    = ggml_nbytes(nodes->nodes[nodes->n_nodes - 1]); // staging when the output overlaps an input
    return GGML_STATUS_SUCCESS;
}

ggml_status rope_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void *, void * ws, size_t ws_bytes,
                         void *) {
    ggml_tensor * rope = nodes->nodes[nodes->n_nodes - 1];
    return rope_run(backend, rope->src[0], nullptr, 0.0f, rope, rope_tail{}, rope, ws, ws_bytes);
}

// ---------------------------------------------------------------------------------------------
// Fusion: RMS_NORM(x) -> MUL(., w[d]) -> sd.rope_apply.v1(., pe) [-> SCALE] [-> CPY to F16]
// (the chain the CPU and Vulkan rules match; external consumers of the intermediates are
// refused by ggml's fusion legality checks, so the plain operators run then).

const ggml_tensor * match_chain(ggml_backend_dev_t dev, const ggml_tensor * norm, const ggml_tensor * mul,
                                const ggml_tensor * rope) {
    if (norm->op != GGML_OP_RMS_NORM || mul->op != GGML_OP_MUL || !is_rope_node(rope)) return nullptr;
    const ggml_tensor *x = norm->src[0], *w = mul->src[1];
    if (!x || !w || mul->src[0] != norm || rope->src[0] != mul) return nullptr;
    if (!float_strided(x) || norm->type != GGML_TYPE_F32 || !ggml_are_same_shape(x, norm) || !ggml_is_contiguous(norm))
        return nullptr;
    if (mul->type != GGML_TYPE_F32 || !ggml_are_same_shape(mul, norm) || !ggml_is_contiguous(mul)) return nullptr;
    // a one-dimensional contiguous weight over the normalised dimension
    if (w->type != GGML_TYPE_F32 || !ggml_is_contiguous(w) || !aligned_to(w, 4) || w->ne[0] != x->ne[0] ||
        w->ne[1] != 1 || w->ne[2] != 1 || w->ne[3] != 1)
        return nullptr;
    return rope_supports(dev, rope, nullptr) ? w : nullptr;
}

// SCALE(prev, s) with bias 0, F32 of prev's shape
bool is_plain_scale(const ggml_tensor * t, const ggml_tensor * prev) {
    if (t->op != GGML_OP_SCALE || t->src[0] != prev || t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t) ||
        !ggml_are_same_shape(t, prev))
        return false;
    float bias;
    memcpy(&bias, (const char *) t->op_params + sizeof(float), sizeof(float));
    return bias == 0.0f;
}

// CPY(prev, dst) into a contiguous F16 tensor of prev's shape
bool is_f16_copy(const ggml_tensor * t, const ggml_tensor * prev) {
    if (t->op != GGML_OP_CPY || t->src[0] != prev || t->type != GGML_TYPE_F16 || !ggml_is_contiguous(t)) return false;
    const ggml_tensor * dst = t->src[1];
    return dst && dst->type == GGML_TYPE_F16 && ggml_is_contiguous(dst) && ggml_are_same_shape(dst, prev) &&
           aligned_to(t, 2);
}

// the fused chain's length at nodes n (3, 4 or 5; 0: none) and its tail
int chain_length(ggml_backend_dev_t dev, const ggml_tensor * const * n, int avail, rope_tail & tail) {
    tail = rope_tail{};
    if (avail < 3 || !match_chain(dev, n[0], n[1], n[2])) return 0;
    int len = 3;
    if (avail > 3 && is_plain_scale(n[3], n[2])) {
        tail.scale = n[3];
        len        = 4;
    }
    if (avail > len && is_f16_copy(n[len], n[len - 1])) {
        tail.copy = n[len];
        ++len;
    }
    return len;
}

int fused_match(ggml_backend_dev_t dev, const ggml_cgraph * graph, int first, void *) {
    if (!fusion_enabled()) return 0;
    ggml_cgraph *       g     = const_cast<ggml_cgraph *>(graph); // the accessors are not const; read only
    const int           avail = std::min(5, ggml_graph_n_nodes(g) - first);
    const ggml_tensor * n[5];
    for (int i = 0; i < avail; ++i) n[i] = ggml_graph_node(g, first + i);
    rope_tail tail;
    return chain_length(dev, n, avail, tail);
}

// Graph-delay rule: RMS_NORM, its MUL, the RoPE [, SCALE] [, F16 CPY], each the sole reader of
// the previous, with independent work in between (the PE table, another projection) are gathered
// so fused_match sees them consecutive.
void fused_optimize(ggml_backend_dev_t dev, ggml_cgraph * g, void *) {
    if (!fusion_enabled()) return;
    sd_graph::gather_sole_consumer_chains(g, GGML_OP_RMS_NORM, 5, 3, [dev](const ggml_tensor * const * n, int avail) {
        rope_tail tail;
        return chain_length(dev, n, avail, tail);
    });
}

ggml_status fused_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void *, void * ws, size_t ws_bytes,
                          void *) {
    rope_tail tail;
    if (chain_length(nullptr, nodes->nodes, nodes->n_nodes, tail) != nodes->n_nodes) return GGML_STATUS_FAILED;
    const ggml_tensor *norm = nodes->nodes[0], *mul = nodes->nodes[1], *rope = nodes->nodes[2];
    float              eps;
    memcpy(&eps, norm->op_params, sizeof(float));
    return rope_run(backend, norm->src[0], mul->src[1], eps, rope, tail, nodes->nodes[nodes->n_nodes - 1], ws,
                    ws_bytes);
}

} // namespace

bool register_rope(ggml_backend_dev_t dev) {
    using namespace sd_kernels;
    const ggml_ext_kernel_desc descs[] = {
        op_kernel(SD_CUDA_KERNEL_ROPE_APPLY, sd_op_rope_apply(), rope_supports, rope_prepare, rope_execute),
        fusion_rule(SD_CUDA_KERNEL_RMS_NORM_MUL_ROPE, fused_match, fused_optimize, rope_prepare, fused_execute),
    };
    return register_all(dev, descs, 2, "sd cuda rope");
}

} // namespace SD_CUDA_NAMESPACE
