#pragma once

// Harness for test-backend-ops: a case builds one op (inputs in a no_alloc context, allocated
// like weights with ggml_backend_alloc_ctx_tensors; the graph in a compute buffer from
// ggml_gallocr), fills the inputs with seeded data, snapshots the op's operands as the op sees
// them (logical shape and strides, before compute so in-place variants are checked too), runs the
// graph on a backend and compares the output with a double-precision reference under a stated
// error bound.

#include "ggml.h"
#include "ggml-backend.h"
#include "reference/ref.h"

#include <array>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace bops {

using ne4 = std::array<int64_t, 4>;

// Value generator for an input. Values are drawn as double, then stored in the tensor's type;
// the reference reads back what was stored, so F16/BF16/Q8_0 inputs are seen exactly.
struct fill {
    enum kind_t { uniform, integer, custom } kind = uniform;
    double lo = -1.0, hi = 1.0; // uniform: [lo, hi); integer: [lo, hi] inclusive
    // custom: value for the element at logical coordinates idx of the (contiguous) input
    std::function<double(std::mt19937 &, const int64_t * idx)> gen;

    static fill range(double lo, double hi) { fill f; f.lo = lo; f.hi = hi; return f; }
    static fill ints(int64_t lo, int64_t hi) { fill f; f.kind = integer; f.lo = (double) lo; f.hi = (double) hi; return f; }
    static fill with(std::function<double(std::mt19937 &, const int64_t *)> g) { fill f; f.kind = custom; f.gen = std::move(g); return f; }
};

// How a logical input of shape ne is laid out in memory.
enum class layout {
    cont,   // fresh contiguous tensor
    pad,    // view with padded row stride and a small element offset (rows packed)
    perm12, // dims 1 and 2 swapped in memory (rows packed, is_permuted)
    trans,  // dims 0 and 1 swapped in memory (elements of a row not adjacent)
    perm,   // full permutation (1,2,0,3) of a contiguous base (rows not packed)
};
const char * layout_name(layout l);

struct builder {
    ggml_context * ctx_in = nullptr; // inputs ("weights"): allocated with ggml_backend_alloc_ctx_tensors
    ggml_context * ctx    = nullptr; // views and ops: allocated by the graph allocator

    struct input {
        ggml_tensor * t;
        fill          f;
    };
    std::vector<input>         inputs;
    std::vector<ggml_tensor *> srcs; // operands snapshotted for the reference, in order
    ggml_tensor *              out = nullptr;

    // A contiguous input tensor.
    ggml_tensor * in(ggml_type type, ne4 ne, fill f = {});
    // A logical input of shape ne laid out per `l` (a view of a fresh input when l != cont).
    ggml_tensor * in(ggml_type type, ne4 ne, layout l, fill f = {});
    // in(...) that is also recorded as a reference operand
    ggml_tensor * src(ggml_type type, ne4 ne, layout l = layout::cont, fill f = {});
};

// Per-element bound |got - ref| <= abs + rel*|ref| + scale*s (s from ref_scale, e.g. sum|a*b| for
// mul_mat), and/or normalised mean squared error sum(d^2)/sum(ref^2) <= nmse.
struct tolerance {
    double abs   = 0.0;
    double rel   = 0.0;
    double scale = 0.0;
    double nmse  = -1.0;
};

using dense   = ref::dense;
using refs_fn = std::function<dense(const std::vector<dense> & srcs, dense * scale)>;

struct op_case {
    std::string                        name;  // unique, [A-Za-z0-9_]
    std::string                        desc;  // human-readable: op, shapes, types, layouts
    std::function<void(builder &)>     build; // sets b.out and b.srcs
    refs_fn                            ref;
    tolerance                          tol;
    // Optional (quantized-weight mul_mat): the CPU backend quantizes the activations to the weight
    // type's dot type first, as `ref` models; a backend that multiplies the activations as given
    // (the Vulkan backend) is checked against f32_act_ref instead (the stored weights times the
    // unquantized activations, same bound form and tol), and against the CPU with the bound
    // cpu_gap returns per output element (the activation quantization term included).
    refs_fn                                          f32_act_ref;
    std::function<dense(const std::vector<dense> &)> cpu_gap;
};

// All cases of the suite (built once).
const std::vector<op_case> & all_cases();

struct result {
    // declined: the backend does not support a node of the case (judged by the caller against
    // the expected-decline table of test-backend-ops.cpp)
    enum status_t { pass, fail, declined } status = pass;
    std::string message;
};

// Run a case on a backend (n_threads > 0 sets the CPU thread count) and compare with the reference.
result run_case(const op_case & c, ggml_backend_t backend, int n_threads);

// Run a case on `backend` and on the CPU backend with identical inputs and compare the two
// outputs (bound: twice the case tolerance, measured against the CPU result). For non-CPU
// backends.
result run_case_vs_cpu(const op_case & c, ggml_backend_t backend, ggml_backend_t cpu);

// The same two checks for a backend whose quantized mul_mat uses unquantized activations: against
// c.f32_act_ref, and against the CPU within c.cpu_gap (both required to be set).
result run_case_f32_act(const op_case & c, ggml_backend_t backend);
result run_case_vs_cpu_f32_act(const op_case & c, ggml_backend_t backend, ggml_backend_t cpu);

// read a tensor (any supported type, any strides) into a dense array of its logical shape
dense read_tensor(const ggml_tensor * t);

std::string sanitize_name(const std::string & s);

} // namespace bops
