#version 450
// dequant.comp — block-quantized -> F32/F16 element by element: OP 0 copies (cpy/dup/cont, element
// i of src in its logical order to element i of dst; shapes may differ, counts do not), OP 1 is
// get_rows (dst [ne00, ne10, ne11, ne12] = row idx[c.y, c.z, c.w] of src0's matrix (c.z, c.w)).
// Values are computed exactly as the library's dequantizers do (quant.glsl q_elem), then stored
// with ggml's rounding: bit-identical to the CPU backend. Tensor.nb of the quantized source is in
// BYTES; dst and the index tensor use element strides.
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "quant.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int OP = 0;
layout(constant_id = 2) const int QT = 8;

void main() {
    const Tensor d = pc.p.t[0];
    const Tensor a = pc.p.t[1];
    const Tensor b = pc.p.t[2];
    GRID_LOOP(i, nelem(d)) {
        const uvec4 c = unravel(d, i);
        uint ro, k;
        if (OP == 1) {
            const int row = PI32(b.addr).v[c.y * b.nb[0] + c.z * b.nb[1] + c.w * b.nb[2]];
            // an index outside the table would read outside the tensor: clamped (the CPU asserts)
            ro = min(uint(max(row, 0)), a.ne[1] - 1u) * a.nb[1] + c.z * a.nb[2] + c.w * a.nb[3];
            k  = c.x;
        } else {
            const uvec4 ca = unravel(a, i);
            ro = ca.y * a.nb[1] + ca.z * a.nb[2] + ca.w * a.nb[3];
            k  = ca.x;
        }
        st(d, off4(d, c), q_elem(QT, a.addr, ro, k));
    }
}
