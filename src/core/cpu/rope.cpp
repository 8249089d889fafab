// rope.cpp — CPU kernel for sd.rope_apply.v1 and the RMSNorm -> Mul(weight) -> RoPE fusion.
//
// Bit-exactness: both kernels reproduce the native op chain they replace (dit-workloads.md
// §4.3): every rotated element is x0*pe0 + x1*pe1 with two separately rounded F32 products and
// one F32 add (this file is compiled with -ffp-contract=off, and the SIMD path uses separate
// mul/add instructions). The fused kernel also reproduces the CPU backend's RMS_NORM rounding:
// the sum of squares is accumulated in double in the same order as the backend's kernel (which
// is exact-order sensitive), then its scale is applied exactly as that kernel does, then the
// weight multiply. See rms-norm-cpu.h.

#include "cpu_kernels.h"
#include "storage-overlap.h"
#include "rms-norm-cpu.h"

#include "../ggml_extensions.h"
#include "../kernel_desc.h"
#include "ggml-cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__)
#define SD_ROPE_X86 1
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#define SD_ROPE_NEON 1
#include <arm_neon.h> // baseline ARMv8-A: the neon variant runs only when the service allows neon
#endif

namespace {

// RMS norm semantics of the CPU backend: rms-norm-cpu.h (shared with norm-quant.cpp)

using sd_cpu_rms::cpu_fast_rms_path;
using sd_cpu_rms::rms_norm_mul_row;

// ---------------------------------------------------------------------------------------------
// Rotation of one row

// Per-position coefficients, rearranged so a row rotates with unit-stride loads:
//   interleaved: out[i] = x[i & ~1] * A[i] + x[i | 1] * B[i] for i < r
//                (A = {cos, sin} and B = {-sin, cos} per pair: A[2j+c] = pe[4j+2c], B[2j+c] = pe[4j+2c+1])
//   split-half:  out[j] = x[j]*T0[j] + x[j+h]*T1[j], out[j+h] = x[j]*T2[j] + x[j+h]*T3[j]
//                (T0..T3[j] = pe[4j + 0..3])
void build_tables(const float * pe_p, int64_t n_freq, int mode, float * tab) {
    if (mode == SD_ROPE_INTERLEAVED) {
        float * A = tab;
        float * B = tab + 2 * n_freq;
        for (int64_t j = 0; j < n_freq; ++j) {
            A[2 * j]     = pe_p[4 * j + 0];
            A[2 * j + 1] = pe_p[4 * j + 2];
            B[2 * j]     = pe_p[4 * j + 1];
            B[2 * j + 1] = pe_p[4 * j + 3];
        }
    } else {
        for (int64_t j = 0; j < n_freq; ++j) {
            for (int c = 0; c < 4; ++c) tab[c * n_freq + j] = pe_p[4 * j + c];
        }
    }
}

// The rotation's code, chosen once per job from the CPU service's level (GGML_CPU_ISA caps it).
// Every variant computes each element as two separately rounded float products and one float add,
// in the same order, so all give the same bits (this file is compiled with -ffp-contract=off, and
// the SIMD variants use separate mul/add instructions, no FMA).
enum class rot_isa { scalar, avx2, avx512, neon };

rot_isa choose_rot_isa() {
#if defined(SD_ROPE_X86)
    if (sd_cpu::isa_can_use("avx512")) return rot_isa::avx512;
    if (sd_cpu::isa_can_use("avx2")) return rot_isa::avx2;
#endif
#if defined(SD_ROPE_NEON)
    if (sd_cpu::isa_can_use("neon")) return rot_isa::neon;
#endif
    return rot_isa::scalar;
}

// interleaved pairs, elements [i, r) (i, r even)
void rotate_interleaved_scalar(const float * x, float * o, int64_t i, int64_t r, const float * A, const float * B) {
    for (; i < r; i += 2) {
        const float x0 = x[i], x1 = x[i + 1];
        const float a0 = x0 * A[i], b0 = x1 * B[i];
        const float a1 = x0 * A[i + 1], b1 = x1 * B[i + 1];
        o[i]           = a0 + b0;
        o[i + 1]       = a1 + b1;
    }
}

// split halves, j in [j0, h)
void rotate_split_scalar(const float * x, float * o, int64_t j0, int64_t h, const float * T) {
    const float * T0 = T;
    const float * T1 = T + h;
    const float * T2 = T + 2 * h;
    const float * T3 = T + 3 * h;
    for (int64_t j = j0; j < h; ++j) {
        const float x0 = x[j], x1 = x[j + h];
        const float a0 = x0 * T0[j], b0 = x1 * T1[j];
        const float a1 = x0 * T2[j], b1 = x1 * T3[j];
        o[j]           = a0 + b0;
        o[j + h]       = a1 + b1;
    }
}

#if defined(SD_ROPE_X86)
__attribute__((target("avx512f"))) void rotate_interleaved_avx512(const float * x, float * o, int64_t r, const float * A,
                                                                  const float * B) {
    for (int64_t i = 0; i < r; i += 16) {
        const __mmask16 m  = (__mmask16) (r - i >= 16 ? 0xFFFF : ((1u << (r - i)) - 1));
        const __m512    v  = _mm512_maskz_loadu_ps(m, x + i);
        const __m512    ev = _mm512_shuffle_ps(v, v, 0xA0); // x[2j] in both lanes of pair j
        const __m512    od = _mm512_shuffle_ps(v, v, 0xF5); // x[2j+1]
        const __m512    p0 = _mm512_mul_ps(ev, _mm512_maskz_loadu_ps(m, A + i));
        const __m512    p1 = _mm512_mul_ps(od, _mm512_maskz_loadu_ps(m, B + i));
        _mm512_mask_storeu_ps(o + i, m, _mm512_add_ps(p0, p1));
    }
}

__attribute__((target("avx512f"))) void rotate_split_avx512(const float * x, float * o, int64_t h, const float * T) {
    int64_t j = 0;
    for (; j + 16 <= h; j += 16) {
        const __m512 x0 = _mm512_loadu_ps(x + j), x1 = _mm512_loadu_ps(x + j + h);
        const __m512 a0 = _mm512_mul_ps(x0, _mm512_loadu_ps(T + j)), b0 = _mm512_mul_ps(x1, _mm512_loadu_ps(T + h + j));
        const __m512 a1 = _mm512_mul_ps(x0, _mm512_loadu_ps(T + 2 * h + j)), b1 = _mm512_mul_ps(x1, _mm512_loadu_ps(T + 3 * h + j));
        _mm512_storeu_ps(o + j, _mm512_add_ps(a0, b0));
        _mm512_storeu_ps(o + j + h, _mm512_add_ps(a1, b1));
    }
    rotate_split_scalar(x, o, j, h, T);
}

__attribute__((target("avx2"))) void rotate_interleaved_avx2(const float * x, float * o, int64_t r, const float * A,
                                                             const float * B) {
    int64_t i = 0;
    for (; i + 8 <= r; i += 8) {
        const __m256 v  = _mm256_loadu_ps(x + i);
        const __m256 ev = _mm256_shuffle_ps(v, v, 0xA0); // x[2j] in both lanes of pair j
        const __m256 od = _mm256_shuffle_ps(v, v, 0xF5); // x[2j+1]
        const __m256 p0 = _mm256_mul_ps(ev, _mm256_loadu_ps(A + i));
        const __m256 p1 = _mm256_mul_ps(od, _mm256_loadu_ps(B + i));
        _mm256_storeu_ps(o + i, _mm256_add_ps(p0, p1));
    }
    rotate_interleaved_scalar(x, o, i, r, A, B);
}

__attribute__((target("avx2"))) void rotate_split_avx2(const float * x, float * o, int64_t h, const float * T) {
    int64_t j = 0;
    for (; j + 8 <= h; j += 8) {
        const __m256 x0 = _mm256_loadu_ps(x + j), x1 = _mm256_loadu_ps(x + j + h);
        const __m256 a0 = _mm256_mul_ps(x0, _mm256_loadu_ps(T + j)), b0 = _mm256_mul_ps(x1, _mm256_loadu_ps(T + h + j));
        const __m256 a1 = _mm256_mul_ps(x0, _mm256_loadu_ps(T + 2 * h + j)), b1 = _mm256_mul_ps(x1, _mm256_loadu_ps(T + 3 * h + j));
        _mm256_storeu_ps(o + j, _mm256_add_ps(a0, b0));
        _mm256_storeu_ps(o + j + h, _mm256_add_ps(a1, b1));
    }
    rotate_split_scalar(x, o, j, h, T);
}
#endif

#if defined(SD_ROPE_NEON)
// Separate FMUL and FADD (this file is compiled with -ffp-contract=off, so GCC does not fuse the
// intrinsics' products into the add either): the same two roundings per element as the scalar code.
void rotate_interleaved_neon(const float * x, float * o, int64_t r, const float * A, const float * B) {
    int64_t i = 0;
    for (; i + 4 <= r; i += 4) {
        const float32x4_t v  = vld1q_f32(x + i);
        const float32x4_t ev = vtrn1q_f32(v, v); // x[2j] in both lanes of pair j
        const float32x4_t od = vtrn2q_f32(v, v); // x[2j+1]
        const float32x4_t p0 = vmulq_f32(ev, vld1q_f32(A + i));
        const float32x4_t p1 = vmulq_f32(od, vld1q_f32(B + i));
        vst1q_f32(o + i, vaddq_f32(p0, p1));
    }
    rotate_interleaved_scalar(x, o, i, r, A, B);
}

void rotate_split_neon(const float * x, float * o, int64_t h, const float * T) {
    int64_t j = 0;
    for (; j + 4 <= h; j += 4) {
        const float32x4_t x0 = vld1q_f32(x + j), x1 = vld1q_f32(x + j + h);
        const float32x4_t a0 = vmulq_f32(x0, vld1q_f32(T + j)), b0 = vmulq_f32(x1, vld1q_f32(T + h + j));
        const float32x4_t a1 = vmulq_f32(x0, vld1q_f32(T + 2 * h + j)), b1 = vmulq_f32(x1, vld1q_f32(T + 3 * h + j));
        vst1q_f32(o + j, vaddq_f32(a0, b0));
        vst1q_f32(o + j + h, vaddq_f32(a1, b1));
    }
    rotate_split_scalar(x, o, j, h, T);
}
#endif

void rotate_row(const float * x, float * o, int64_t d, int64_t n_freq, int mode, const float * tab, rot_isa isa) {
    const int64_t r = 2 * n_freq;
    if (mode == SD_ROPE_INTERLEAVED) {
        const float * A = tab;
        const float * B = tab + r;
#if defined(SD_ROPE_X86)
        if (isa == rot_isa::avx512) rotate_interleaved_avx512(x, o, r, A, B);
        else if (isa == rot_isa::avx2) rotate_interleaved_avx2(x, o, r, A, B);
        else
#endif
#if defined(SD_ROPE_NEON)
        if (isa == rot_isa::neon) rotate_interleaved_neon(x, o, r, A, B);
        else
#endif
            rotate_interleaved_scalar(x, o, 0, r, A, B);
    } else {
#if defined(SD_ROPE_X86)
        if (isa == rot_isa::avx512) rotate_split_avx512(x, o, n_freq, tab);
        else if (isa == rot_isa::avx2) rotate_split_avx2(x, o, n_freq, tab);
        else
#endif
#if defined(SD_ROPE_NEON)
        if (isa == rot_isa::neon) rotate_split_neon(x, o, n_freq, tab);
        else
#endif
            rotate_split_scalar(x, o, 0, n_freq, tab);
    }
    (void) isa;
    if (d > r) memcpy(o + r, x + r, (size_t) (d - r) * sizeof(float));
}

// ---------------------------------------------------------------------------------------------
// The parallel job shared by both kernels

struct rope_job {
    // x [d, H, L, N] with contiguous rows; out [d, L, H*N] contiguous
    const char * x;
    size_t       nb1, nb2, nb3;
    int64_t      d, H, L, N, n_freq;
    int          mode;
    const float * pe; // [2, 2, n_freq, L] contiguous
    float *       out;
    // fusion: out = rope(rms_norm(x) * w)
    const float * w;
    float         eps;
    sd_cpu_rms::rms_mode rms; // the backend's RMS_NORM rounding and the code reproducing it
    rot_isa       rot;
    // per-thread scratch: tables (4*n_freq floats) + one row (d floats)
    float *       scratch;
    int64_t       scratch_per_thread;
    int           max_threads;
    // cancellation
    const ggml_ext_cpu_parallel_v1 * svc;
    ggml_backend_t                   backend;
};

void rope_task(int ith, int nth, void * data) {
    const rope_job & j = *static_cast<const rope_job *>(data);
    if (ith >= j.max_threads) return; // more threads than scratch slots: the others cover the work
    nth = std::min(nth, j.max_threads);

    const int64_t HN    = j.H * j.N;
    const int64_t total = j.L * HN;
    const int64_t per   = (total + nth - 1) / nth;
    const int64_t i0    = std::min(total, per * ith);
    const int64_t i1    = std::min(total, i0 + per);

    float * tab = j.scratch + (int64_t) ith * j.scratch_per_thread;
    float * row = tab + 4 * j.n_freq;

    int64_t cur_l = -1;
    for (int64_t it = i0; it < i1; ++it) {
        // items run position-major so one table serves all heads of a position
        const int64_t l  = it / HN;
        const int64_t hn = it % HN;
        const int64_t h  = hn % j.H;
        const int64_t n  = hn / j.H;
        if (l != cur_l) {
            build_tables(j.pe + l * 4 * j.n_freq, j.n_freq, j.mode, tab);
            cur_l = l;
            if (j.svc && j.svc->should_abort(j.backend)) return;
        }
        const float * xr = (const float *) (j.x + h * j.nb1 + l * j.nb2 + n * j.nb3);
        float *       o  = j.out + (hn * j.L + l) * j.d;
        if (j.w) {
            rms_norm_mul_row(xr, j.w, row, j.d, j.eps, j.rms);
            xr = row;
        }
        rotate_row(xr, o, j.d, j.n_freq, j.mode, tab, j.rot);
    }
}

using sd_cpu::output_may_overlap;
using sd_cpu::overlaps;

// user_data of both registrations: the CPU backend's static service table (or NULL)
const ggml_ext_cpu_parallel_v1 * service_of(void * user_data) {
    return static_cast<const ggml_ext_cpu_parallel_v1 *>(user_data);
}

enum ggml_status run_job(rope_job & job, ggml_tensor * out, const ggml_tensor * const * inputs, int n_inputs,
                         ggml_backend_t backend, void * workspace, size_t workspace_bytes) {
    const ggml_ext_cpu_parallel_v1 * svc = ggml_backend_is_cpu(backend) ? job.svc : nullptr;
    job.svc                              = svc;
    job.backend                          = backend;
    job.rot                              = choose_rot_isa();
    job.max_threads                      = svc ? std::max(1, svc->n_threads(backend)) : 1;
    job.scratch_per_thread               = 4 * job.n_freq + job.d + 16; // +16: keeps slots apart

    bool overlap = false;
    for (int i = 0; i < n_inputs; ++i) overlap = overlap || overlaps(out, inputs[i]);

    std::vector<float> scratch, staging;
    try {
        scratch.resize((size_t) (job.scratch_per_thread * job.max_threads));
        // overlapping output: compute into scratch, then copy; the workspace prepared for this
        // case is used when large enough, else host memory (CPU only, so this is allowed)
        if (overlap && workspace_bytes < ggml_nbytes(out)) staging.resize((size_t) ggml_nelements(out));
    } catch (const std::bad_alloc &) {
        return GGML_STATUS_ALLOC_FAILED;
    }
    job.scratch = scratch.data();
    float * dst = (float *) out->data;
    if (overlap) job.out = staging.empty() ? (float *) workspace : staging.data();
    else         job.out = dst;

    enum ggml_status st = GGML_STATUS_SUCCESS;
    if (svc) {
        st = svc->parallel_for(backend, rope_task, &job);
    } else {
        rope_task(0, 1, &job);
    }
    if (st != GGML_STATUS_SUCCESS) return st;
    if (overlap) memcpy(dst, job.out, ggml_nbytes(out));
    return GGML_STATUS_SUCCESS;
}

void fill_geometry(rope_job & job, const ggml_tensor * x, const ggml_tensor * rope) {
    sd_rope_apply_attrs a;
    ggml_ext_get_attrs(rope, &a, sizeof(a));
    const ggml_tensor * pe = rope->src[1];
    job.x      = (const char *) x->data;
    job.nb1    = x->nb[1];
    job.nb2    = x->nb[2];
    job.nb3    = x->nb[3];
    job.d      = x->ne[0];
    job.H      = x->ne[1];
    job.L      = x->ne[2];
    job.N      = x->ne[3];
    job.n_freq = pe->ne[2];
    job.mode   = a.mode;
    job.pe     = (const float *) pe->data;
    job.w      = nullptr;
    job.eps    = 0.0f;
    job.rms    = sd_cpu_rms::rms_mode::portable; // unused without w
}

// ---------------------------------------------------------------------------------------------
// Single-node kernel: sd.rope_apply.v1

bool is_rope_node(const ggml_tensor * t) {
    return t != nullptr && ggml_ext_get_op(t) == sd_op_rope_apply();
}

// The schema validated types and shapes; what the kernel itself needs is host-addressable F32
// with contiguous x rows and contiguous pe/out.
bool rope_supports(ggml_backend_dev_t, const ggml_tensor * node, void *) {
    if (!is_rope_node(node)) return false;
    const ggml_tensor * x  = node->src[0];
    const ggml_tensor * pe = node->src[1];
    return x->type == GGML_TYPE_F32 && x->nb[0] == sizeof(float) && pe->type == GGML_TYPE_F32 &&
           ggml_is_contiguous(pe) && node->type == GGML_TYPE_F32 && ggml_is_contiguous(node);
}

enum ggml_status rope_prepare(ggml_backend_dev_t, const ggml_ext_nodes * nodes, void ** state,
                              size_t * workspace_bytes, void *) {
    const ggml_tensor * out       = nodes->nodes[nodes->n_nodes - 1];
    const ggml_tensor * inputs[2] = {out->src[0], out->src[1]};
    *state                        = nullptr;
    *workspace_bytes              = output_may_overlap(out, inputs, 2) ? ggml_nbytes(out) : 0;
    return GGML_STATUS_SUCCESS;
}

enum ggml_status rope_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void *, void * workspace,
                              size_t workspace_bytes, void * user_data) {
    ggml_tensor * out = nodes->nodes[nodes->n_nodes - 1];
    rope_job      job{};
    fill_geometry(job, out->src[0], out);
    job.svc                       = service_of(user_data);
    const ggml_tensor * inputs[2] = {out->src[0], out->src[1]};
    return run_job(job, out, inputs, 2, backend, workspace, workspace_bytes);
}

// ---------------------------------------------------------------------------------------------
// Fusion: RMS_NORM(x) -> MUL(., w[d]) -> sd.rope_apply.v1(., pe)

// The weight of the MUL when the three nodes at `first` are the chain this kernel computes.
const ggml_tensor * match_chain(const ggml_tensor * norm, const ggml_tensor * mul, const ggml_tensor * rope) {
    if (norm->op != GGML_OP_RMS_NORM || mul->op != GGML_OP_MUL || !is_rope_node(rope)) return nullptr;
    const ggml_tensor * x = norm->src[0];
    const ggml_tensor * w = mul->src[1];
    if (x == nullptr || w == nullptr || mul->src[0] != norm || rope->src[0] != mul) return nullptr;
    if (x->type != GGML_TYPE_F32 || x->nb[0] != sizeof(float) || norm->type != GGML_TYPE_F32 ||
        !ggml_are_same_shape(x, norm) || !ggml_is_contiguous(norm)) {
        return nullptr;
    }
    if (mul->type != GGML_TYPE_F32 || !ggml_are_same_shape(mul, norm) || !ggml_is_contiguous(mul)) return nullptr;
    // a one-dimensional weight over the normalised dimension (other broadcasts are not this rule)
    if (w->type != GGML_TYPE_F32 || !ggml_is_contiguous(w) || w->ne[0] != x->ne[0] || w->ne[1] != 1 ||
        w->ne[2] != 1 || w->ne[3] != 1) {
        return nullptr;
    }
    return rope_supports(nullptr, rope, nullptr) ? w : nullptr;
}

int fused_match(ggml_backend_dev_t, const ggml_cgraph * graph, int first, void *) {
    if (!sd_ggml_fusion_enabled()) return 0;
    ggml_cgraph * g = const_cast<ggml_cgraph *>(graph); // the accessors are not const; read only
    if (first + 2 >= ggml_graph_n_nodes(g)) return 0;
    return match_chain(ggml_graph_node(g, first), ggml_graph_node(g, first + 1), ggml_graph_node(g, first + 2)) ? 3
                                                                                                                 : 0;
}

enum ggml_status fused_prepare(ggml_backend_dev_t, const ggml_ext_nodes * nodes, void ** state,
                               size_t * workspace_bytes, void *) {
    const ggml_tensor * norm      = nodes->nodes[0];
    const ggml_tensor * mul       = nodes->nodes[1];
    const ggml_tensor * out       = nodes->nodes[2];
    const ggml_tensor * inputs[3] = {norm->src[0], mul->src[1], out->src[1]};
    *state                        = nullptr;
    *workspace_bytes              = output_may_overlap(out, inputs, 3) ? ggml_nbytes(out) : 0;
    return GGML_STATUS_SUCCESS;
}

enum ggml_status fused_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void *, void * workspace,
                               size_t workspace_bytes, void * user_data) {
    const ggml_tensor * norm = nodes->nodes[0];
    const ggml_tensor * mul  = nodes->nodes[1];
    ggml_tensor *       out  = nodes->nodes[2];
    rope_job            job{};
    fill_geometry(job, norm->src[0], out);
    job.w = (const float *) mul->src[1]->data;
    memcpy(&job.eps, norm->op_params, sizeof(float));
    job.rms = sd_cpu_rms::choose_rms_mode(cpu_fast_rms_path() &&
                                          !(ggml_backend_is_cpu(backend) && ggml_backend_cpu_get_use_ref(backend)));
    job.svc                       = service_of(user_data);
    const ggml_tensor * inputs[3] = {norm->src[0], mul->src[1], out->src[1]};
    return run_job(job, out, inputs, 3, backend, workspace, workspace_bytes);
}

} // namespace

bool sd_cpu_register_rope(ggml_backend_dev_t dev, const ggml_ext_cpu_parallel_v1 * svc) {
    if (sd_op_rope_apply() == 0) return false;
    // the service table is static in the CPU backend, so it outlives every registration
    void * ctx = const_cast<ggml_ext_cpu_parallel_v1 *>(svc);

    using namespace sd_kernels;
    return register_all(dev,
                        {op_kernel(SD_CPU_KERNEL_ROPE_APPLY, sd_op_rope_apply(), rope_supports, rope_prepare, rope_execute,
                                   nullptr, ctx),
                         fusion_rule(SD_CPU_KERNEL_RMS_NORM_MUL_ROPE, fused_match, nullptr, fused_prepare, fused_execute,
                                     nullptr, ctx)},
                        "sd rope");
}
