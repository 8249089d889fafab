// convrot_fusion.cu — the CUDA fusions of the activation chains that feed the ConvRot quantizer
// sd.quantize_i8_convrot.v1 (ggml_extensions.md, "src/core/cuda/convrot.cu registers CUDA fusion
// for ..."):
//
//   SCALE(x)                                       -> quantize   sd.cuda.scale_quantize
//   NORM | RMS_NORM(x) -> MUL(., w[K])             -> quantize   sd.cuda.norm_quantize (3 nodes)
//   RMS_NORM(x) -> MUL(w) -> MUL(mod) -> ADD(h, t) -> ADD(shift) -> quantize
//                                                                sd.cuda.norm_quantize (6 nodes)
//   GLU(SWIGLU)(packed | swapped | separate gate/up) -> quantize sd.cuda.swiglu_quantize
//   SILU | SIGMOID(g) -> MUL(., other)             -> quantize   sd.cuda.gate_mul_quantize
//
// The matches are the CPU rules' (src/core/cpu/norm-quant.cpp, gate-quant.cpp) and the Vulkan
// modulation rule's (src/core/vulkan/norm_quant.cpp), written with the shared sd_chain tests
// (chain_match.h); the Scale and GLU chains have no CPU rule and follow the same shape tests.
//
// Exactness: the fused result equals the unfused chain on the same CUDA device bit for bit. Each
// row is one 256-thread block, the native RMS_NORM/NORM block (ggml-cuda ops-rows.cu k_norm):
// the lane-strided double sums, the same shuffle / shared-memory tree, scale = 1 / sqrt(...) in
// double, y = float((double(x) - mean) * scale). Every elementwise step is one separately rounded
// F32 operation (__fmul_rn / __fadd_rn: this file is built with --fmad=false and the intrinsics
// pin it anyway) in the native node's order. The native SCALE with a bias is compiled with
// multiply-add contraction (ggml-cuda's default --fmad=true), so it is one __fmaf_rn here. The
// activations are the native kernels' formulas (ops-elementwise.cu sigmoid_f / silu_f: IEEE
// division, the CUDA expf, x * s with the -0 limit). The row then goes through the quantizer of
// convrot.cu operation for operation (the shared row arithmetic of convrot_row.cuh, the same
// passes and reductions): the 1/sqrt(G) pre-scale, the butterfly stages with left to
// right quartet sums, the exact amax, IEEE scale and inverse, round-half-even with NaN -> 0, the
// NaN row for non-finite values, the zero padding rows and the zeroed scale tail. Against the CPU
// chain the results differ only where the CPU's activation or norm rounding differs (a few ulps
// before quantization: at most one quantization step after it).
//
// The row is formed twice (the quantizer's amax pass and its quantization pass recompute the
// rotation), so no F32 intermediate is written. Rows longer than kMaxFusedRow retain ordinary
// execution: the norm chains would read x three times per row in one block, where the unfused
// kernels spread it over the grid. External consumers of any intermediate are refused by the
// scheduler's fusion legality checks (the ordinary nodes run then). An output that overlaps an
// input is computed in the prepared workspace and copied on the stream. GGML_CUDA_DISABLE_FUSION
// and the sd fusion switch turn every rule off (fusion_enabled()).

#include "convrot_row.cuh"
#include "cuda_kernels.h"
#include "../graph_gather.h"

#include "../chain_match.h"
#include "../ggml_extensions.h"
#include "../int8_schema.h"
#include "../kernel_desc.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <vector>

namespace SD_CUDA_NAMESPACE {

namespace {

using convrot_row::block_row_scale;
using convrot_row::fold_amax;
using convrot_row::quant_value;
using convrot_row::rotate_chunk;

constexpr int     kThreads     = 256; // the native norm's row block and the quantizer's
constexpr int     kMinChunk    = 1024;
using convrot_row::kDefaultSmem;
constexpr int64_t kMaxFusedRow = 65536;

enum chain_kind : int {
    KIND_SCALE = 0,   // p0 * x (+ p1)
    KIND_NORM_MUL,    // NORM | RMS_NORM, then * w
    KIND_MODULATION,  // RMS_NORM, * w, (h + h * ms) + sh
    KIND_GLU,         // silu(x) * g from a GLU node
    KIND_UNARY_MUL,   // act(x) * other
};

struct fused_args {
    int           kind;
    const char *  x; // the row source (SCALE, norm and activation input; the GLU's first source)
    int64_t       xnb1, xnb2, xnb3;
    const char *  y; // the second row source (GLU separate up; the MUL's other operand), or null
    int64_t       ynb1, ynb2, ynb3;
    int64_t       ne1, ne2; // row index -> (i1, i2, i3)
    int64_t       K;
    int64_t       half;       // packed GLU: the second half's offset in the row (K)
    const float * w;          // norm weight
    const float * ms;         // modulation scale
    const float * sh;         // modulation shift
    float         p0, p1;     // SCALE factor and bias; norm eps in p0
    bool          has_bias;   // SCALE with a nonzero bias
    bool          is_norm;    // NORM (mean subtracted) rather than RMS_NORM
    bool          swapped;    // GLU: the first half is the up operand
    bool          split;      // GLU: separate gate (x) and up (y)
    int           act;        // KIND_UNARY_MUL: GGML_UNARY_OP_SILU or _SIGMOID
    int8_t *      q;
    float *       scales;
    int           G;
    float         gscale;
    int           chunk;
};

// --- the native activations (ggml-cuda ops-elementwise.cu), operation for operation -----------

__device__ inline float sigmoid_native(float x) {
    if (x >= 0.0f) return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x)));
    const float e = expf(x);
    return __fdiv_rn(e, __fadd_rn(1.0f, e));
}
__device__ inline float times_gate(float x, float s) { return s == 0.0f ? -0.0f : __fmul_rn(x, s); }
__device__ inline float silu_native(float x) { return times_gate(x, sigmoid_native(x)); }

// The native block sum (ops-rows.cu block_sum), every thread gets the same value.
__device__ inline double native_block_sum(double v, double * sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    double r = lane < nw ? sh[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
    return r;
}

// Element i of the chain's F32 row, each step rounded as its native node rounds it.
__device__ inline float chain_value(const fused_args & a, const float * xr, const float * yr, int64_t i, double mean,
                                    double scale) {
    switch (a.kind) {
        case KIND_SCALE: return a.has_bias ? __fmaf_rn(a.p0, xr[i], a.p1) : __fmul_rn(a.p0, xr[i]);
        case KIND_NORM_MUL:
        case KIND_MODULATION: {
            const float n = __double2float_rn(__dmul_rn(__dsub_rn((double) xr[i], mean), scale));
            const float h = __fmul_rn(n, a.w[i]);
            if (a.kind == KIND_NORM_MUL) return h;
            const float t = __fmul_rn(h, a.ms[i]);
            return __fadd_rn(__fadd_rn(h, t), a.sh[i]);
        }
        case KIND_GLU: {
            const float first  = xr[i];
            const float second = a.split ? yr[i] : xr[i + a.half];
            return __fmul_rn(silu_native(a.swapped ? second : first), a.swapped ? first : second);
        }
        default: {
            const float u = a.act == GGML_UNARY_OP_SILU ? silu_native(xr[i]) : sigmoid_native(xr[i]);
            return __fmul_rn(u, yr[i]);
        }
    }
}



__global__ void __launch_bounds__(kThreads) fused_quantize_kernel(const fused_args a) {
    extern __shared__ float s[];
    __shared__ double       red_d[kThreads / 32];
    __shared__ float        red_max[kThreads / 32];
    __shared__ int          red_nf[kThreads / 32];
    const int64_t           r  = blockIdx.x;
    const int64_t           i1 = r % a.ne1, i2 = (r / a.ne1) % a.ne2, i3 = r / (a.ne1 * a.ne2);
    const float *           xr = (const float *) (a.x + i1 * a.xnb1 + i2 * a.xnb2 + i3 * a.xnb3);
    const float *           yr = a.y ? (const float *) (a.y + i1 * a.ynb1 + i2 * a.ynb2 + i3 * a.ynb3) : nullptr;
    const int64_t           K  = a.K;
    int8_t *                qr = a.q + r * K;

    // the norm's row statistics, as the native k_norm (squares of floats are exact in double, so
    // the multiply-add the native build contracts gives the same sums; the variance's is kept)
    double mean = 0.0, scale = 1.0;
    if (a.kind == KIND_NORM_MUL || a.kind == KIND_MODULATION) {
        double acc = 0.0;
        for (int64_t i = threadIdx.x; i < K; i += blockDim.x) {
            const double v = (double) xr[i];
            acc            = a.is_norm ? __dadd_rn(acc, v) : __dadd_rn(acc, __dmul_rn(v, v));
        }
        acc = native_block_sum(acc, red_d);
        if (a.is_norm) {
            mean       = acc / (double) K;
            double var = 0.0;
            for (int64_t i = threadIdx.x; i < K; i += blockDim.x) {
                const double dx = __dsub_rn((double) xr[i], mean);
                var             = __fma_rn(dx, dx, var);
            }
            var   = native_block_sum(var, red_d) / (double) K;
            scale = 1.0 / sqrt(var + (double) a.p0);
        } else {
            scale = 1.0 / sqrt(acc / (double) K + (double) a.p0);
        }
    }

    // pass 1: amax of the rotated row, and whether any rotated value is non-finite
    float amax = 0.0f;
    int   nf   = 0;
    for (int64_t c0 = 0; c0 < K; c0 += a.chunk) {
        const int len = (int) (K - c0 < a.chunk ? K - c0 : a.chunk);
        for (int i = threadIdx.x; i < len; i += blockDim.x) s[i] = chain_value(a, xr, yr, c0 + i, mean, scale);
        __syncthreads();
        if (a.G > 1) rotate_chunk(s, len, a.G, a.gscale);
        for (int i = threadIdx.x; i < len; i += blockDim.x) fold_amax(s[i], amax, nf);
        __syncthreads();
    }
    float       inv = 0.0f;
    const float sx  = block_row_scale(amax, nf, red_max, red_nf, inv);
    if (threadIdx.x == 0) a.scales[r] = sx;
    if (nf || sx == 0.0f) {
        for (int64_t i = threadIdx.x; i < K; i += blockDim.x) qr[i] = 0;
        return;
    }
    // pass 2: the same row and rotation again, quantized
    for (int64_t c0 = 0; c0 < K; c0 += a.chunk) {
        const int len = (int) (K - c0 < a.chunk ? K - c0 : a.chunk);
        for (int i = threadIdx.x; i < len; i += blockDim.x) s[i] = chain_value(a, xr, yr, c0 + i, mean, scale);
        __syncthreads();
        if (a.G > 1) rotate_chunk(s, len, a.G, a.gscale);
        for (int i = threadIdx.x; i < len; i += blockDim.x) qr[c0 + i] = quant_value(__fmul_rn(s[i], inv));
        __syncthreads();
    }
}

// The 64 KiB shared-memory opt-in of group 16384, once per device.
bool allow_large_chunk(int device, size_t bytes) {
    static convrot_row::smem_opt_in opt_in;
    return opt_in.allow(fused_quantize_kernel, device, bytes, "fused quantizer shared-memory opt-in");
}

// ---------------------------------------------------------------------------------------------
// Matching (host, graph metadata only)

// F32 rows of unit element stride at float-aligned byte strides (any view).
bool f32_rows(const ggml_tensor * t) {
    return t != nullptr && t->type == GGML_TYPE_F32 && t->nb[0] == sizeof(float) && t->nb[1] % 4 == 0 &&
           t->nb[2] % 4 == 0 && t->nb[3] % 4 == 0 && aligned_to(t, 4);
}

// One contiguous F32 value per channel (K), broadcast over rows.
bool is_channel_vec(const ggml_tensor * t, int64_t K) {
    return t != nullptr && t->type == GGML_TYPE_F32 && ggml_is_contiguous(t) && t->ne[0] == K && t->ne[1] == 1 &&
           t->ne[2] == 1 && t->ne[3] == 1 && aligned_to(t, 4);
}

// The chain's quantizer: sd.quantize_i8_convrot.v1 of `a` the CUDA quantizer runs, and rows this
// fusion takes (dev nullptr at execution: the device was checked at match).
bool is_quantize_of(ggml_backend_dev_t dev, const ggml_tensor * q, const ggml_tensor * a) {
    if (q == nullptr || q->src[0] != a || !quantize_node_supported(dev, q)) return false;
    return a->ne[0] <= kMaxFusedRow && rows_of(a) <= INT32_MAX;
}

// The matched chain: its kind, length and operands.
struct chain {
    int                 kind = -1;
    int                 len  = 0;
    const ggml_tensor * x = nullptr, *y = nullptr;          // row sources
    const ggml_tensor * w = nullptr, *ms = nullptr, *sh = nullptr;
    const ggml_tensor * first = nullptr;                     // the chain's first node (op params)
    const ggml_tensor * q     = nullptr;
};

// SCALE(x) -> quantize
bool match_scale(ggml_backend_dev_t dev, const ggml_tensor * const * n, int avail, chain & c) {
    if (avail < 2 || n[0]->op != GGML_OP_SCALE) return false;
    const ggml_tensor * x = n[0]->src[0];
    if (!f32_rows(x) || !sd_chain::is_f32_like(n[0], x) || !is_quantize_of(dev, n[1], n[0])) return false;
    c = chain{KIND_SCALE, 2, x, nullptr, nullptr, nullptr, nullptr, n[0], n[1]};
    return true;
}

// NORM | RMS_NORM -> MUL(w) -> quantize (3), or RMS_NORM -> MUL(w) -> MUL(ms) -> ADD -> ADD(sh)
// -> quantize (6). An operand that is itself a chain node (single-row x, where the intermediates
// are [K] vectors) would be read before the fused step wrote it: refused.
bool match_norm(ggml_backend_dev_t dev, const ggml_tensor * const * n, int avail, chain & c) {
    if (avail < 3) return false;
    const ggml_tensor *norm = n[0], *mul = n[1];
    if ((norm->op != GGML_OP_RMS_NORM && norm->op != GGML_OP_NORM) || mul->op != GGML_OP_MUL) return false;
    const ggml_tensor * x = norm->src[0];
    if (!f32_rows(x) || !sd_chain::is_f32_like(norm, x) || !sd_chain::is_f32_like(mul, norm)) return false;
    const int64_t       K = x->ne[0];
    const ggml_tensor * w = sd_chain::other_src(mul, norm);
    if (!is_channel_vec(w, K)) return false;
    auto inside = [&](const ggml_tensor * t, int len) {
        for (int i = 0; i < len; ++i)
            if (n[i] == t) return true;
        return false;
    };
    if (is_quantize_of(dev, n[2], mul)) {
        if (inside(w, 3)) return false;
        c = chain{KIND_NORM_MUL, 3, x, nullptr, w, nullptr, nullptr, norm, n[2]};
        return true;
    }
    if (avail < 6 || norm->op != GGML_OP_RMS_NORM) return false;
    const ggml_tensor *mul2 = n[2], *add1 = n[3], *add2 = n[4];
    if (mul2->op != GGML_OP_MUL || add1->op != GGML_OP_ADD || add2->op != GGML_OP_ADD) return false;
    const ggml_tensor * ms = sd_chain::other_src(mul2, mul);
    const ggml_tensor * sh = sd_chain::other_src(add2, add1);
    if (!is_channel_vec(ms, K) || !is_channel_vec(sh, K)) return false;
    // ADD(h, t): exactly the weighted norm and its modulation term
    const bool add_ok = (add1->src[0] == mul && add1->src[1] == mul2) || (add1->src[0] == mul2 && add1->src[1] == mul);
    if (!add_ok || add1->src[2]) return false;
    for (const ggml_tensor * t : {mul2, add1, add2})
        if (!sd_chain::is_f32_like(t, norm)) return false;
    if (!is_quantize_of(dev, n[5], add2) || inside(w, 6) || inside(ms, 6) || inside(sh, 6)) return false;
    c = chain{KIND_MODULATION, 6, x, nullptr, w, ms, sh, norm, n[5]};
    return true;
}

// GLU(SWIGLU) -> quantize: packed ([2K] rows, halves exchanged when swapped) or separate gate/up
bool match_glu(ggml_backend_dev_t dev, const ggml_tensor * const * n, int avail, chain & c) {
    if (avail < 2 || n[0]->op != GGML_OP_GLU || ggml_get_glu_op(n[0]) != GGML_GLU_OP_SWIGLU) return false;
    const ggml_tensor *glu = n[0], *a = glu->src[0], *b = glu->src[1];
    if (!f32_rows(a) || glu->type != GGML_TYPE_F32 || !ggml_is_contiguous(glu)) return false;
    for (int d = 1; d < 4; ++d)
        if (a->ne[d] != glu->ne[d]) return false;
    if (b) {
        if (!f32_rows(b) || !ggml_are_same_shape(a, b) || a->ne[0] != glu->ne[0]) return false;
    } else if (a->ne[0] != 2 * glu->ne[0]) {
        return false;
    }
    if (!is_quantize_of(dev, n[1], glu)) return false;
    c = chain{KIND_GLU, 2, a, b, nullptr, nullptr, nullptr, glu, n[1]};
    return true;
}

// UNARY(SILU | SIGMOID)(g) -> MUL(u, other) in either order -> quantize (gate-quant.cpp's shapes:
// one row of every tensor per quantized row, no broadcast)
bool match_unary_mul(ggml_backend_dev_t dev, const ggml_tensor * u, const ggml_tensor * mul, const ggml_tensor * q,
                     chain & c) {
    if (u->op != GGML_OP_UNARY || mul->op != GGML_OP_MUL) return false;
    const ggml_unary_op op = ggml_get_unary_op(u);
    if (op != GGML_UNARY_OP_SILU && op != GGML_UNARY_OP_SIGMOID) return false;
    const ggml_tensor * other = sd_chain::other_src(mul, u);
    const ggml_tensor * x     = u->src[0];
    if (!other || !f32_rows(x) || !f32_rows(other) || u->type != GGML_TYPE_F32 || mul->type != GGML_TYPE_F32)
        return false;
    if (!ggml_are_same_shape(x, u) || !ggml_are_same_shape(u, mul) || !ggml_are_same_shape(other, mul)) return false;
    if (!ggml_is_contiguous(mul) || !is_quantize_of(dev, q, mul)) return false;
    c = chain{KIND_UNARY_MUL, 3, x, other, nullptr, nullptr, nullptr, u, q};
    return true;
}

bool match_any(ggml_backend_dev_t dev, const ggml_tensor * const * n, int avail, chain & c) {
    return match_scale(dev, n, avail, c) || match_norm(dev, n, avail, c) || match_glu(dev, n, avail, c) ||
           (avail >= 3 && match_unary_mul(dev, n[0], n[1], n[2], c));
}

// The rule of each kind family (user_data): which kinds it owns.
enum rule_family : int { RULE_SCALE, RULE_NORM, RULE_SWIGLU, RULE_GATE_MUL };

bool family_owns(int family, int kind) {
    switch (family) {
        case RULE_SCALE: return kind == KIND_SCALE;
        case RULE_NORM: return kind == KIND_NORM_MUL || kind == KIND_MODULATION;
        case RULE_SWIGLU: return kind == KIND_GLU;
        default: return kind == KIND_UNARY_MUL;
    }
}

int family_of(void * user_data) { return (int) (intptr_t) user_data; }

int chain_at(ggml_backend_dev_t dev, const ggml_cgraph * graph, int first, chain & c) {
    ggml_cgraph *       g     = const_cast<ggml_cgraph *>(graph); // the accessors are not const; read only
    const int           avail = std::min(6, ggml_graph_n_nodes(g) - first);
    const ggml_tensor * n[6];
    for (int i = 0; i < avail; ++i) n[i] = ggml_graph_node(g, first + i);
    return avail >= 2 && match_any(dev, n, avail, c) ? c.len : 0;
}

int rule_match(ggml_backend_dev_t dev, const ggml_cgraph * graph, int first, void * user_data) {
    if (!fusion_enabled()) return 0;
    chain c;
    return chain_at(dev, graph, first, c) && family_owns(family_of(user_data), c.kind) ? c.len : 0;
}

// Graph delay for the modulation chain: its six nodes with independent work in between (the
// modulation vectors computed after the norm) are gathered before the quantizer. The weighted
// norm has two readers (MUL(mod) and ADD), every other node one.
void gather_modulation_chains(ggml_backend_dev_t dev, ggml_cgraph * g) {
    sd_graph::gather_modulation_chains(g, [dev](const ggml_tensor * const * n) {
        chain c;
        return match_norm(dev, n, 6, c) && c.len == 6;
    });
}

// Graph delay for SiLU/Sigmoid -> Mul: the model builds SILU(gate) before the up linear, so the
// activation is moved to just before its only consumer, the MUL (gate-quant.cpp gate_optimize).
void delay_activations(ggml_backend_dev_t dev, ggml_cgraph * g) {
    const int n = ggml_graph_n_nodes(g);
    for (int i = 0; i + 2 < n;) {
        ggml_tensor * u = ggml_graph_node(g, i);
        if (u->op != GGML_OP_UNARY || ggml_graph_get_use_count(g, u) != 1 ||
            (ggml_get_unary_op(u) != GGML_UNARY_OP_SILU && ggml_get_unary_op(u) != GGML_UNARY_OP_SIGMOID)) {
            ++i;
            continue;
        }
        int j = i + 1; // the consumer
        for (; j < n; ++j) {
            const ggml_tensor * t    = ggml_graph_node(g, j);
            bool                uses = false;
            for (int s = 0; s < GGML_MAX_SRC; ++s) uses = uses || t->src[s] == u;
            if (uses) break;
        }
        chain      c;
        const bool move = j > i + 1 && j + 1 < n &&
                          match_unary_mul(dev, u, ggml_graph_node(g, j), ggml_graph_node(g, j + 1), c) &&
                          ggml_ext_graph_delay(g, i, 1, j - 1);
        // after a move index i holds the next unvisited node; u sits next to its MUL for good
        if (!move) ++i;
    }
}

void rule_optimize(ggml_backend_dev_t dev, ggml_cgraph * g, void * user_data) {
    if (!fusion_enabled()) return;
    if (family_of(user_data) == RULE_NORM) gather_modulation_chains(dev, g);
    if (family_of(user_data) == RULE_GATE_MUL) delay_activations(dev, g);
}

// ---------------------------------------------------------------------------------------------
// Execution

// The prepared plan's state: the chain matched once at prepare (kind and operand nodes, checked
// against the device), so each execution only reads the current addresses.
ggml_status rule_prepare(ggml_backend_dev_t dev, const ggml_ext_nodes * nodes, void ** state, size_t * ws, void *) {
    chain c;
    if (!match_any(dev, nodes->nodes, nodes->n_nodes, c) || c.len != nodes->n_nodes) return GGML_STATUS_FAILED;
    chain * st = new (std::nothrow) chain(c);
    if (st == nullptr) return GGML_STATUS_ALLOC_FAILED;
    *state = st;
    *ws    = ggml_nbytes(nodes->nodes[nodes->n_nodes - 1]); // staging when the output overlaps an input
    return GGML_STATUS_SUCCESS;
}

void rule_destroy(void * state, void *) { delete static_cast<chain *>(state); }

// The byte span a strided tensor's elements cover.
bool span_overlaps(const ggml_tensor * out, const ggml_tensor * t) {
    if (!t || !t->data) return false;
    const char * t0 = (const char *) t->data;
    const char * t1 = t0 + ggml_type_size(t->type);
    for (int k = 0; k < 4; ++k) t1 += (t->ne[k] - 1) * (int64_t) t->nb[k];
    const char * o0 = (const char *) out->data;
    return o0 < t1 && t0 < o0 + ggml_nbytes(out);
}

ggml_status rule_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void * state, void * ws,
                         size_t ws_bytes, void *) {
    // the prepared chain when it still names these nodes; otherwise matched again, against the
    // backend's device (the group-16384 quantizer needs its shared-memory opt-in)
    chain c;
    const chain * st = static_cast<const chain *>(state);
    if (st && st->len == nodes->n_nodes && st->first == nodes->nodes[0] && st->q == nodes->nodes[nodes->n_nodes - 1]) {
        c = *st;
    } else if (!match_any(ggml_backend_get_device(backend), nodes->nodes, nodes->n_nodes, c) ||
               c.len != nodes->n_nodes) {
        return GGML_STATUS_FAILED;
    }
    exec_ctx ctx;
    if (!get_exec(backend, ctx)) return GGML_STATUS_FAILED;
    ggml_tensor *       out = nodes->nodes[nodes->n_nodes - 1];
    const ggml_tensor * a   = c.q->src[0]; // the chain's F32 result the quantizer reads
    const int64_t       K = a->ne[0], rows = rows_of(a);
    const int           G = std::max(1, sd_int8_schema::quantize_group(out));

    fused_args args{};
    args.kind  = c.kind;
    args.x     = (const char *) c.x->data;
    args.xnb1  = (int64_t) c.x->nb[1];
    args.xnb2  = (int64_t) c.x->nb[2];
    args.xnb3  = (int64_t) c.x->nb[3];
    args.y     = c.y ? (const char *) c.y->data : nullptr;
    args.ynb1  = c.y ? (int64_t) c.y->nb[1] : 0;
    args.ynb2  = c.y ? (int64_t) c.y->nb[2] : 0;
    args.ynb3  = c.y ? (int64_t) c.y->nb[3] : 0;
    args.ne1   = a->ne[1];
    args.ne2   = a->ne[2];
    args.K     = K;
    args.half  = K;
    args.w     = c.w ? (const float *) c.w->data : nullptr;
    args.ms    = c.ms ? (const float *) c.ms->data : nullptr;
    args.sh    = c.sh ? (const float *) c.sh->data : nullptr;
    memcpy(&args.p0, c.first->op_params, sizeof(float));
    memcpy(&args.p1, (const char *) c.first->op_params + sizeof(float), sizeof(float));
    args.has_bias = c.kind == KIND_SCALE && args.p1 != 0.0f; // the native SCALE's choice
    args.is_norm  = c.first->op == GGML_OP_NORM;
    int32_t swapped = 0; // the GLU's op_params[1] (ggml_glu_impl)
    memcpy(&swapped, (const char *) c.first->op_params + sizeof(int32_t), sizeof(swapped));
    args.swapped  = c.kind == KIND_GLU && swapped != 0;
    args.split    = c.kind == KIND_GLU && c.y != nullptr;
    args.act      = c.kind == KIND_UNARY_MUL ? (int) ggml_get_unary_op(c.first) : 0;
    args.G        = G;
    args.gscale   = 1.0f / sqrtf((float) G); // a power of two for G = 4^n: exact, as the quantizer's
    args.chunk    = std::max(kMinChunk, G);

    bool stage = false;
    for (const ggml_tensor * t : {c.x, c.y, c.w, c.ms, c.sh}) stage = stage || span_overlaps(out, t);
    if (stage && (!ws || ws_bytes < ggml_nbytes(out))) return GGML_STATUS_FAILED;
    int8_t * dst = (int8_t *) (stage ? ws : out->data);
    const int64_t prows = pad_up(rows, 4);
    args.q      = dst;
    args.scales = (float *) (dst + K * prows);

    if (rows > 0) {
        const size_t smem = sizeof(float) * (size_t) args.chunk;
        if (smem > (size_t) kDefaultSmem && !allow_large_chunk(ctx.device, smem)) return GGML_STATUS_FAILED;
        fused_quantize_kernel<<<(unsigned) rows, kThreads, smem, ctx.stream>>>(args);
        if (!launched("convrot fusion")) return GGML_STATUS_FAILED;
    }
    if (prows > rows &&
        !cuda_ok(cudaMemsetAsync(dst + K * rows, 0, (size_t) ((prows - rows) * K), ctx.stream), "pad rows"))
        return GGML_STATUS_FAILED;
    // the bytes after the scales are never read; zeroed like the standalone quantizer's
    const size_t used = (size_t) (K * prows) + sizeof(float) * (size_t) rows;
    if (ggml_nbytes(out) > used &&
        !cuda_ok(cudaMemsetAsync((char *) dst + used, 0, ggml_nbytes(out) - used, ctx.stream), "scale tail"))
        return GGML_STATUS_FAILED;
    if (stage && !cuda_ok(cudaMemcpyAsync(out->data, ws, ggml_nbytes(out), cudaMemcpyDeviceToDevice, ctx.stream),
                          "fused quantizer copy"))
        return GGML_STATUS_FAILED;
    return GGML_STATUS_SUCCESS;
}

} // namespace

int convrot_fusion_chain_length(const ggml_cgraph * graph, int first) {
    if (!graph || first < 0 || first >= ggml_graph_n_nodes(const_cast<ggml_cgraph *>(graph)) || !fusion_enabled())
        return 0;
    chain c;
    return chain_at(nullptr, graph, first, c);
}

void convrot_fusion_optimize(ggml_cgraph * graph) {
    if (!graph) return;
    rule_optimize(nullptr, graph, (void *) (intptr_t) RULE_NORM);
    rule_optimize(nullptr, graph, (void *) (intptr_t) RULE_GATE_MUL);
}

bool register_convrot_fusion(ggml_backend_dev_t dev) {
    using namespace sd_kernels;
    auto rule = [](const char * name, optimize_fn optimize, rule_family f) {
        return fusion_rule(name, rule_match, optimize, rule_prepare, rule_execute, rule_destroy, (void *) (intptr_t) f);
    };
    const ggml_ext_kernel_desc descs[] = {
        rule(SD_CUDA_KERNEL_SCALE_QUANTIZE, nullptr, RULE_SCALE),
        rule(SD_CUDA_KERNEL_NORM_QUANTIZE, rule_optimize, RULE_NORM),
        rule(SD_CUDA_KERNEL_SWIGLU_QUANTIZE, nullptr, RULE_SWIGLU),
        rule(SD_CUDA_KERNEL_GATE_MUL_QUANTIZE, rule_optimize, RULE_GATE_MUL),
    };
    return register_all(dev, descs, 4, "sd cuda convrot fusion");
}

} // namespace SD_CUDA_NAMESPACE
