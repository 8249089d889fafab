#pragma once

// sd-ref.h — plain scalar references for the sd operators (no ggml): the semantics every
// backend's kernel is checked against. Strides are in floats.

#include <cstddef>
#include <cstdint>

namespace sd_ref {

// sd.rope_apply.v1. x [d, H, L, N] with element (i, h, l, n) at x[i + h*s1 + l*s2 + n*s3];
// pe [2, 2, n_freq, L] contiguous; out [d, L, H*N] contiguous. Rotated pairs (interleaved:
// (2j, 2j+1); split-half: (j, j + n_freq)) get x0*R[r][0] + x1*R[r][1] with each product rounded
// to float and one float add, the native chain's arithmetic; dims 2*n_freq.. are copied.
void rope_apply(const float * x, int64_t d, int64_t H, int64_t L, int64_t N, int64_t s1, int64_t s2, int64_t s3,
                const float * pe, int64_t n_freq, int mode, float * out);

// rms_norm over rows of n (double statistics and double scaling, rounded once), times w.
void rms_norm_mul(const float * x, const float * w, float * y, int64_t n, float eps);

// Dense softmax attention, double accumulation. q [D, Lq, H, N], k/v [D, Lk, Hkv, N] contiguous
// (q head h reads kv head h / (H / Hkv)); out [D, H, Lq, N] = softmax(scale q.k) v.
void attention(const float * q, const float * k, const float * v, int64_t D, int64_t Lq, int64_t Lk, int64_t H,
               int64_t Hkv, int64_t N, float scale, float * out);

// sd.sage_attn.v1: what a SageAttention kernel approximates (its Q/K quantization is the
// kernel's error budget, not part of the semantics): dense attention with scale.
void sage_attn(const float * q, const float * k, const float * v, int64_t D, int64_t Lq, int64_t Lk, int64_t H,
               int64_t Hkv, int64_t N, float scale, int mode, float * out);

// sd.sol_attn.v1 on [128, tokens, heads, batch] inputs: dense attention with scale. tau is the
// threshold under which a block-sparse kernel may skip key blocks; the spec gives no exact
// selection rule, so the reference is the dense result a kernel must approximate.
void sol_attn(const float * q, const float * k, const float * v, int64_t Lq, int64_t Lk, int64_t heads, int64_t batch,
              float scale, float tau, float * out);

} // namespace sd_ref
