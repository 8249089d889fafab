#version 450
// glu.comp — gated linear units: dst[i] = act(x[i]) * g[i], x/g from one packed row (halves) or
// two tensors, swapped on request. OP (specialization constant) is the ggml_glu_op.
#include "common.glsl"
#include "math.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int OP = 0;

float act(float x, float g) {
    if (OP == 0) return relu_f(x) * g;
    if (OP == 1) return gelu_f(x) * g;
    if (OP == 2) return silu_f(x) * g;
    if (OP == 3) { // swiglu_oai
        const float alpha = pc.p.fp[2], limit = pc.p.fp[3];
        const float xc = min(x, limit);
        const float yc = min(max(g, -limit), limit);
        return times_gate(xc, sigmoid_f(alpha * xc)) * (yc + 1.0);
    }
    if (OP == 4) return gelu_erf_f(x) * g;
    return gelu_quick_f(x) * g;
}

void main() {
    const Tensor d = pc.p.t[0];
    const Tensor a = pc.p.t[1];
    const Tensor b = pc.p.t[2];
    const bool swapped = pc.p.ip[1] != 0;
    const bool split   = b.addr != 0ul;
    const uint n       = d.ne[0];
    GRID_LOOP(i, nelem(d)) {
        const uvec4 c  = unravel(d, i);
        const uint  oa = off4(a, c);
        float x, g;
        if (split) {
            x = ld(a, oa);
            g = ld(b, off4(b, c));
        } else {
            x = ld(a, oa);
            g = ld(a, oa + n * a.nb[0]);
        }
        if (swapped) { const float t = x; x = g; g = t; }
        st(d, off4(d, c), act(x, g));
    }
}
