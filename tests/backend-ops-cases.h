#pragma once

// Internal to test-backend-ops: the case table is split by op family across files.

#include "backend-ops-harness.h"

#include <set>

namespace bops {

struct case_list {
    std::vector<op_case>  v;
    std::set<std::string> names;

    void add(const std::string & desc, std::function<void(builder &)> build, refs_fn ref, tolerance tol);
};

std::string sh(ne4 ne); // "7x3x1x1"
const char * tn(ggml_type t);

// output-type rounding on top of a base bound (F16: 2^-11 relative, BF16: 2^-8)
tolerance for_type(ggml_type out, tolerance base);

void add_elementwise_cases(case_list & cl); // binary, sqr/sqrt, scale, unary, glu
void add_norm_cases(case_list & cl);        // norm, rms_norm, soft_max
void add_matmul_cases(case_list & cl);
void add_copy_cases(case_list & cl);        // cpy, cast, cont, dup, reshape/view/permute, get_rows
void add_rope_cases(case_list & cl);
void add_attention_cases(case_list & cl);
void add_layout_cases(case_list & cl);      // concat, pad, repeat, arange, timestep, custom, view chains
void add_client_cases(case_list & cl);      // clamp..cos, reductions, sorting, masks, acc/set, roll, ids, set_rows, maps
void add_conv_cases(case_list & cl);        // im2col, convolutions, pools, upscale, group/l2 norm, circular pad
void add_quant_cases(case_list & cl);       // block-quantized types: mul_mat, get_rows, cpy (issue 14)
// quantized mul_mat at real model sizes (K 4096/16384, N 3072/6144, M 1..8): not in all_cases()
std::vector<op_case> quant_mul_mat_large_cases();

} // namespace bops
