#pragma once

// chain_match.h — graph-shape tests the sd fusion rules of every backend share when they match a
// chain of element-wise nodes after a producer (Linear -> Mul(gate) -> Add(residual), the
// modulation chain): which operand of a binary node is not the chain, and whether a tensor is a
// plain F32 tensor of the chain's shape. Backend-specific limits (alignment, binding sizes) stay
// with each backend's rule.

#include "ggml.h"

namespace sd_chain {

// F32, contiguous and of shape's shape.
inline bool is_f32_like(const ggml_tensor * t, const ggml_tensor * shape) {
    return t->type == GGML_TYPE_F32 && ggml_is_contiguous(t) && ggml_are_same_shape(t, shape);
}

// The operand of the binary node b that is not `chain` (NULL unless exactly one src is chain).
inline const ggml_tensor * other_src(const ggml_tensor * b, const ggml_tensor * chain) {
    if (!b->src[0] || !b->src[1] || b->src[2]) return nullptr;
    if (b->src[0] == chain && b->src[1] != chain) return b->src[1];
    if (b->src[1] == chain && b->src[0] != chain) return b->src[0];
    return nullptr;
}

// The gate of MUL(lin, gate) / MUL(gate, lin) (IEEE products commute bitwise) when it is one F32
// value per output channel broadcast over every row; NULL otherwise.
inline const ggml_tensor * gate_of(const ggml_tensor * mul, const ggml_tensor * lin) {
    if (mul->op != GGML_OP_MUL || !is_f32_like(mul, lin)) return nullptr;
    const ggml_tensor * g = other_src(mul, lin);
    if (!g || g->type != GGML_TYPE_F32 || !ggml_is_contiguous(g) || g->ne[0] != lin->ne[0] || g->ne[1] != 1 ||
        g->ne[2] != 1 || g->ne[3] != 1)
        return nullptr;
    return g;
}

// The residual of ADD(residual, v) / ADD(v, residual): same shape as v, F32 and contiguous.
inline const ggml_tensor * residual_of(const ggml_tensor * add, const ggml_tensor * v) {
    if (add->op != GGML_OP_ADD || !is_f32_like(add, v)) return nullptr;
    const ggml_tensor * r = other_src(add, v);
    return r && is_f32_like(r, v) ? r : nullptr;
}

} // namespace sd_chain
