// int8_schema.cpp — the decoder of sd.quantize_i8_convrot.v1 / sd.linear_i8.v1 nodes shared by
// every backend's kernels (see int8_schema.h for what is checked here and what a backend adds).

#include "int8_schema.h"

namespace sd_int8_schema {

bool is_f32_vec(const ggml_tensor * t, int64_t n) {
    return t && t->type == GGML_TYPE_F32 && ggml_is_contiguous(t) && ggml_nelements(t) == n;
}

// ---------------------------------------------------------------------------------------------
// sd.quantize_i8_convrot.v1

int quantize_group(const ggml_tensor * node) {
    sd_quantize_i8_attrs at{};
    ggml_ext_get_attrs(node, &at, sizeof(at));
    return at.group;
}

bool decode_quantize(const ggml_tensor * node, quantize_node & q) {
    if (ggml_ext_get_op(node) != sd_op_quantize_i8_convrot()) return false;
    const ggml_tensor * x = node->src[0];
    if (!x || node->src[1] || x->type != GGML_TYPE_F32 || !ggml_is_contiguous(x)) return false;
    const int     group = quantize_group(node);
    const int64_t K = x->ne[0], rows = rows_of(x);
    if (!valid_group(group) || K <= 0 || K % group != 0) return false;
    if (node->type != GGML_TYPE_I8 || !ggml_is_contiguous(node) || node->ne[0] != K ||
        node->ne[1] != packed_ne1(K, rows) || node->ne[2] != 1 || node->ne[3] != 1)
        return false;
    q.x     = x;
    q.out   = node;
    q.group = group;
    q.K     = K;
    q.rows  = rows;
    return true;
}

// ---------------------------------------------------------------------------------------------
// sd.linear_i8.v1

bool linear_operands(const ggml_tensor * node, linear_node & l) {
    sd_linear_i8_attrs at{};
    ggml_ext_get_attrs(node, &at, sizeof(at));
    int n = 0;
    while (n < GGML_MAX_SRC && node->src[n]) ++n;
    const int known  = SD_LINEAR_I8_HAS_WEIGHT_SCALE | SD_LINEAR_I8_HAS_BIAS | SD_LINEAR_I8_HAS_INPUT_SCALE;
    const int expect = 2 + !!(at.flags & SD_LINEAR_I8_HAS_WEIGHT_SCALE) + !!(at.flags & SD_LINEAR_I8_HAS_BIAS) +
                       !!(at.flags & SD_LINEAR_I8_HAS_INPUT_SCALE);
    if (n != expect || (at.flags & ~known)) return false;
    linear_node d;
    int         i = 0;
    d.node        = node;
    d.weight      = node->src[i++];
    d.input       = node->src[i++];
    if (at.flags & SD_LINEAR_I8_HAS_WEIGHT_SCALE) d.weight_scale = node->src[i++];
    if (at.flags & SD_LINEAR_I8_HAS_BIAS) d.bias = node->src[i++];
    if (at.flags & SD_LINEAR_I8_HAS_INPUT_SCALE) d.input_scale = node->src[i++];
    d.kind  = at.input_kind;
    d.group = at.group <= 1 ? 1 : at.group;
    d.K     = d.weight->ne[0];
    d.N     = d.weight->ne[1];
    for (int k = 0; k < 3; ++k) d.out_ne[k] = at.out_ne[k];
    // a negative extent is rejected by decode_linear; no product is formed from it
    const bool sized = at.out_ne[0] >= 0 && at.out_ne[1] >= 0 && at.out_ne[2] >= 0;
    d.M              = sized ? at.out_ne[0] * at.out_ne[1] * at.out_ne[2] : -1;
    l                = d;
    return true;
}

bool decode_linear(const ggml_tensor * node, linear_node & l) {
    if (ggml_ext_get_op(node) != sd_op_linear_i8()) return false;
    linear_node d;
    if (!linear_operands(node, d)) return false;
    const ggml_tensor * w = d.weight;
    if (w->type != GGML_TYPE_I8 || !ggml_is_contiguous(w) || w->ne[2] != 1 || w->ne[3] != 1) return false;
    const int64_t K = d.K, N = d.N, M = d.M;
    // the schema's bound: |acc| <= K * 128 * 128 <= 2^31 - 1, so the int32 sum is exact
    if (K <= 0 || N <= 0 || K > SD_LINEAR_I8_MAX_K) return false;
    if (M < 0) return false;
    if (node->type != GGML_TYPE_F32 || !ggml_is_contiguous(node) || node->ne[0] != N || node->ne[1] != d.out_ne[0] ||
        node->ne[2] != d.out_ne[1] || node->ne[3] != d.out_ne[2])
        return false;
    if (d.weight_scale && !is_f32_vec(d.weight_scale, N)) return false;
    if (d.bias && !is_f32_vec(d.bias, N)) return false;
    const ggml_tensor * x = d.input;
    if (!ggml_is_contiguous(x) || x->ne[0] != K) return false;
    bool ok = false;
    switch (d.kind) {
        case SD_LINEAR_I8_INPUT_F32:
            ok = x->type == GGML_TYPE_F32 && rows_of(x) == M && valid_group(d.group) && K % d.group == 0 &&
                 !d.input_scale;
            break;
        case SD_LINEAR_I8_INPUT_PACKED:
            ok = x->type == GGML_TYPE_I8 && x->ne[2] == 1 && x->ne[3] == 1 && x->ne[1] >= packed_ne1(K, M) &&
                 !d.input_scale;
            break;
        case SD_LINEAR_I8_INPUT_I8:
            ok = x->type == GGML_TYPE_I8 && rows_of(x) == M && is_f32_vec(d.input_scale, M);
            break;
        default: ok = false;
    }
    if (ok) l = d;
    return ok;
}

// ---------------------------------------------------------------------------------------------
// Workspace layout

linear_workspace plan_linear_workspace(const linear_node & l, const linear_workspace_spec & spec) {
    linear_workspace w;
    w.parts = workspace_layout(spec.alignment);
    const uint64_t M = (uint64_t) l.M;
    if (spec.layout == activation_layout::packed) {
        w.act_stride = (uint64_t) l.K;
        w.act_bytes  = l.kind == SD_LINEAR_I8_INPUT_F32 ? (uint64_t) packed_bytes(l.K, l.M) : 0;
        w.act_off    = w.parts.add(w.act_bytes);
        w.scale_off  = w.act_off + (uint64_t) packed_scale_offset(l.K, l.M);
    } else {
        w.act_stride = (uint64_t) pad_up(l.K, spec.k_multiple);
        w.act_bytes  = M * w.act_stride;
        w.act_off    = w.parts.add(w.act_bytes);
        w.scale_off  = w.parts.add(sizeof(float) * M);
        if (spec.row_sums) w.rowsum_off = w.parts.add(sizeof(int32_t) * M);
    }
    w.stage_bytes = spec.stage_bytes;
    w.stage_off   = w.parts.add(spec.stage_bytes);
    return w;
}

} // namespace sd_int8_schema
