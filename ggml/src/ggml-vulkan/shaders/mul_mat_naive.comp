#version 450
// mul_mat_naive.comp — the plain-loop baseline of bench-vulkan: one invocation per output
// element, no tiling, no shared memory. Same parameters as mul_mat.comp.
#include "common.glsl"

layout(local_size_x_id = 0) in;

void main() {
    const Tensor d = pc.p.t[0];
    const Tensor a = pc.p.t[1];
    const Tensor b = pc.p.t[2];
    const uint K = a.ne[0], M = a.ne[1];
    GRID_LOOP(i, nelem(d)) {
        const uvec4 c = unravel(d, i); // c.x = m, c.y = n
        const uint a_base = c.x * a.nb[1] + (c.z / (d.ne[2] / a.ne[2])) * a.nb[2] + (c.w / (d.ne[3] / a.ne[3])) * a.nb[3];
        const uint b_base = c.y * b.nb[1] + c.z * b.nb[2] + c.w * b.nb[3];
        float acc = 0.0;
        for (uint k = 0; k < K; k++) acc = fma(ld(a, a_base + k * a.nb[0]), ld(b, b_base + k * b.nb[0]), acc);
        PF32(d.addr).v[off4(d, c)] = acc;
    }
}
