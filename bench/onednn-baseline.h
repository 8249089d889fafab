#pragma once

// oneDNN s8 matmul baselines for bench-int8. Only compiled (and BENCH_HAVE_ONEDNN defined) when
// libdnnl is found; the library and the tests never link oneDNN.
//
// Both baselines compute the same product as sd.linear_i8.v1 from the same int8 data:
//   acc[r][n] = sum_k x[r][k] * w[n][k]   (x: rows x K, w: N x K, both row-major int8)
// - fused:  y[r][n] = (float(acc) * (w_scale[n] * x_scale)) + bias[n], f32 out, with the weight
//           read in its given [N,K] layout (a strided [K,N] view, format tag `ba`). x_scale is ONE
//           common activation scale, not ours per row: oneDNN 2.x output scales take mask 0 or
//           per-N only for matmul, and a per-row ([rows,1]) binary-mul post-op makes 2.6 fall back
//           to its reference kernel (ref_int8), as does a transposed problem; a full [rows,N]
//           multiplier would be fused but is not a scale. The per-N scale is oneDNN's output
//           scale; the bias is a binary-add post-op because a matmul bias is added before the
//           output scales in 2.x.
// - packed: acc as s32, the weight reordered once (at create) into the layout oneDNN prefers.

#include <cstdint>
#include <memory>
#include <string>

namespace onednn_baseline {

struct problem {
    int64_t        K = 0, N = 0, rows = 0;
    const int8_t * x       = nullptr; // rows x K
    float          x_scale = 1.0f;    // common activation scale (fused case)
    const int8_t * w       = nullptr; // N x K
    const float *  w_scale = nullptr; // N
    const float *  bias    = nullptr; // N
};

// Sets oneDNN's (OpenMP) thread count for the calling thread and returns a one-line description:
// version, threading runtime and the ISA oneDNN dispatches to.
std::string setup(int n_threads);

class linear {
  public:
    // The problem's buffers must outlive the object (they are used in place). Returns NULL with
    // the reason in err when oneDNN rejects the problem.
    static std::unique_ptr<linear> create(const problem & p, std::string & err);
    virtual ~linear() = default;

    virtual void run_fused()  = 0; // -> fused_out()
    virtual void run_packed() = 0; // -> packed_out()
    virtual const float *   fused_out() const  = 0; // rows x N
    virtual const int32_t * packed_out() const = 0; // rows x N
    // oneDNN's implementation names (e.g. "brg:avx512_core_vnni"); "ref" ones are slow fallbacks.
    virtual std::string impl_fused() const  = 0;
    virtual std::string impl_packed() const = 0;
};

} // namespace onednn_baseline
