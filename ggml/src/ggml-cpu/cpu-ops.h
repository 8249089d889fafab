#pragma once

// cpu-ops.h — the contract between the CPU backend's graph executor and its op kernels.
//
// Execution model: every worker thread of the pool walks the graph's nodes in order; each
// kernel is called on all threads with (ith, nth) and partitions its own work; a barrier
// separates nodes. Kernels never spawn threads. Kernels for ops that the allocator may run in
// place (ggml_op_can_inplace) must tolerate dst aliasing a src.

#include "../ggml-impl.h"

#include <atomic>
#include <cstdint>

struct ggml_threadpool;

// Shared state of one graph computation (owned by the executor).
struct ggml_cpu_compute_state {
    ggml_abort_callback abort_callback      = nullptr;
    void *              abort_callback_data = nullptr;
    // Abort requested. Kernels poll it (ggml_cpu_should_abort) to return early; it may turn true
    // while other threads are still between nodes, so it must not decide where threads stop.
    std::atomic<bool> aborted{false};
    // Thread 0's decision, made before a node's closing barrier: every thread leaves the graph
    // after the node with this index. Indexed by node so a decision for a later node can never
    // be mistaken for one about an earlier node by a thread that is late past the barrier.
    std::atomic<int> stop_at_node{INT32_MAX};
};

struct ggml_compute_params {
    int ith; // this thread's index
    int nth; // number of threads working on the node

    size_t wsize; // node work buffer, shared by all threads (layout chosen by the kernel)
    void * wdata;

    struct ggml_threadpool *        threadpool; // for ggml_cpu_barrier
    struct ggml_cpu_compute_state * state;      // abort handling
    bool                            use_ref;    // force the portable path
};

// All nth threads of the node wait here (used by kernels with a preparation phase).
void ggml_cpu_barrier(const struct ggml_compute_params * params);

// Long kernels call this between chunks of work and return early when it is true. Thread 0
// polls the abort callback; every thread sees the shared flag.
bool ggml_cpu_should_abort(const struct ggml_compute_params * params);

// Bytes of work buffer a node needs with n_threads threads (0 for most ops).
size_t ggml_cpu_op_work_size(const struct ggml_tensor * node, int n_threads);

// Whether the CPU kernels implement this node (types, shapes, layouts).
bool ggml_cpu_op_supported(const struct ggml_tensor * node);

// Run one node on this thread's share (dispatch by node->op).
void ggml_cpu_compute_forward(const struct ggml_compute_params * params, struct ggml_tensor * node);

// ---------------------------------------------------------------------------------------------
// Kernels (one per op). Split by file:
//   ops-elementwise.cpp: dup/cont/cpy (also type conversion), add/sub/mul/div, sqr, sqrt, scale,
//                        unary, glu
//   ops-norm.cpp:        norm, rms_norm
//   ops-layout.cpp:      get_rows, concat, pad, repeat, arange, timestep_embedding, custom
//   ops-mul-mat.cpp:     mul_mat
//   ops-softmax.cpp:     soft_max
//   ops-rope.cpp:        rope
//   ops-flash-attn.cpp:  flash_attn_ext

void ggml_cpu_op_dup(const struct ggml_compute_params * params, struct ggml_tensor * dst);  // DUP, CONT, CPY
void ggml_cpu_op_binary(const struct ggml_compute_params * params, struct ggml_tensor * dst); // ADD SUB MUL DIV
void ggml_cpu_op_sqr(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_sqrt(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_scale(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_unary(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_glu(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_norm(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_rms_norm(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_get_rows(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_concat(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_pad(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_repeat(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_arange(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_timestep_embedding(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_custom(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_mul_mat(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_soft_max(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_rope(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_flash_attn_ext(const struct ggml_compute_params * params, struct ggml_tensor * dst);

// Ops for diffusion clients (issue 13):
//   ops-conv.cpp:          im2col, conv_2d (tiled im2col + MUL_MAT), conv_2d_dw, conv_transpose_1d/2d
//   ops-pool-upscale.cpp:  pool_1d, pool_2d, upscale
//   ops-norm-group.cpp:    group_norm, l2_norm
void ggml_cpu_op_im2col(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_conv_2d(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_conv_2d_dw(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_im2col_3d(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_conv_3d(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_conv_transpose_1d(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_conv_transpose_2d(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_pool_1d(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_pool_2d(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_upscale(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_group_norm(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_l2_norm(const struct ggml_compute_params * params, struct ggml_tensor * dst);
size_t ggml_cpu_conv_2d_work_size(const struct ggml_tensor * dst, int n_threads);
//   ops-reduce.cpp:        sum, sum_rows + mean, argmax, argsort + top_k
//   ops-index.cpp:         clamp/leaky_relu/log/sin/cos/diag_mask_inf, acc + set, roll, add_id,
//                          mul_mat_id, set_rows, map_custom1..3
void ggml_cpu_op_sum(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_sum_rows(const struct ggml_compute_params * params, struct ggml_tensor * dst); // SUM_ROWS, MEAN
void ggml_cpu_op_argmax(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_argsort(const struct ggml_compute_params * params, struct ggml_tensor * dst); // ARGSORT, TOP_K
void ggml_cpu_op_elementwise_client(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_acc_set(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_roll(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_add_id(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_mul_mat_id(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_set_rows(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_map_custom(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_win(const struct ggml_compute_params * params, struct ggml_tensor * dst); // WIN_PART, WIN_UNPART
void ggml_cpu_op_get_rel_pos(const struct ggml_compute_params * params, struct ggml_tensor * dst);
void ggml_cpu_op_add_rel_pos(const struct ggml_compute_params * params, struct ggml_tensor * dst);

// work-buffer sizes of the kernels that need scratch (others need none)
size_t ggml_cpu_mul_mat_work_size(const struct ggml_tensor * dst, int n_threads);
size_t ggml_cpu_soft_max_work_size(const struct ggml_tensor * dst, int n_threads);
size_t ggml_cpu_flash_attn_ext_work_size(const struct ggml_tensor * dst, int n_threads);

// per-op support checks (types/layouts), used by ggml_cpu_op_supported
bool ggml_cpu_mul_mat_supported(const struct ggml_tensor * dst);
bool ggml_cpu_flash_attn_ext_supported(const struct ggml_tensor * dst);

// *out = b as a contiguous F32 tensor of b's shape, data NULL: the operand a MUL_MAT route fills
// with b's rows widened or dequantized to F32 before running the F32 GEMM on a copy of the node.
static inline void ggml_cpu_f32_twin(const struct ggml_tensor * b, struct ggml_tensor * out) {
    *out       = *b;
    out->type  = GGML_TYPE_F32;
    out->data  = NULL;
    out->nb[0] = sizeof(float);
    for (int i = 1; i < GGML_MAX_DIMS; ++i) out->nb[i] = out->nb[i - 1] * (size_t) out->ne[i - 1];
}

// The name of the fast kernel a float-weight MUL_MAT runs (the AVX-512 path's name, marked where
// F16/BF16 activations are widened to F32 first), or NULL where the portable kernel runs.
const char * ggml_cpu_mul_mat_float_kernel(const struct ggml_tensor * dst);

// Split n items into nth near-equal contiguous ranges; this thread's range is [*i0, *i1).
static inline void ggml_cpu_split_range(int64_t n, int ith, int nth, int64_t * i0, int64_t * i1) {
    const int64_t per = (n + nth - 1) / nth;
    *i0 = per * ith < n ? per * ith : n;
    *i1 = *i0 + per < n ? *i0 + per : n;
}
