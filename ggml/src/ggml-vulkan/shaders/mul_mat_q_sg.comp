#version 450
// mul_mat_q_sg.comp — the product of mul_mat_q.comp (quantized A dequantized in the shader, F32
// B as given) laid out for CPU drivers with 8-wide subgroups (lavapipe). There every load is a
// loop over the 8 lanes (one scalar load per lane and component, uniform address or not) while
// arithmetic is one vector instruction for all lanes, so loads set the speed:
//   - lane l owns TN columns of B (n0 + l + 8j) and loads 4 consecutive k values of a column
//     with one 16-byte load (two 8-byte components);
//   - lane l decodes the 8 weights of a unit (quant.glsl q_unit) of A rows m0 + l + 8r (RA row
//     groups), and subgroupBroadcast with a literal lane index (one extract + splat) hands each
//     decoded weight to all 8 lanes.
// Per unit of 8 k values a lane loads the quants of RA rows (their scales once per 4 units) and
// makes 2 TN wide loads, for 8 RA x TN x 8 products.
// One workgroup = one subgroup: no barriers. Sums per 32 elements, then added to the total.
//
// Preconditions (checked on the host, else mul_mat_q.comp runs): subgroup size 8; B F32,
// contiguous along K, rows / batch strides / base address 16-byte aligned.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "quant.glsl"

layout(local_size_x = 8) in;
layout(constant_id = 0) const int RA = 2; // row groups of 8 per workgroup
layout(constant_id = 1) const int TN = 4; // columns per lane
layout(constant_id = 2) const int QT = 8; // ggml_type of A

// 16-byte loads as two 8-byte components: lavapipe's per-lane load loop runs per component
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer PQ64 { u64vec2 v[]; };

void load4(uint64_t addr, uint e, out float v[4]) {
    const u64vec2 x = PQ64(addr).v[e / 4u];
    const uvec2 p0 = unpackUint2x32(x.x), p1 = unpackUint2x32(x.y);
    v[0] = uintBitsToFloat(p0.x); v[1] = uintBitsToFloat(p0.y);
    v[2] = uintBitsToFloat(p1.x); v[3] = uintBitsToFloat(p1.y);
}

void main() {
    const Tensor d = pc.p.t[0];
    const Tensor a = pc.p.t[1];
    const Tensor b = pc.p.t[2];
    const uint K = a.ne[0], M = a.ne[1], N = b.ne[1];
    const uint m0 = gl_WorkGroupID.x * 8u * uint(RA), n0 = gl_WorkGroupID.y * 8u * uint(TN);
    const uint z = gl_WorkGroupID.z;
    const uint i2 = z % d.ne[2], i3 = z / d.ne[2];
    const uint a_base = (i2 / (d.ne[2] / a.ne[2])) * a.nb[2] + (i3 / (d.ne[3] / a.ne[3])) * a.nb[3];
    const uint b_base = i2 * b.nb[2] + i3 * b.nb[3];
    const uint lane = gl_SubgroupInvocationID;
    const uint64_t a_addr = a.addr, b_addr = b.addr;

    // rows / columns past the end re-read the last one (always valid) and are not stored
    uint arow[RA], brow[TN];
    [[unroll]] for (int r = 0; r < RA; r++) arow[r] = a_base + min(m0 + lane + 8u * uint(r), M - 1u) * a.nb[1];
    [[unroll]] for (int j = 0; j < TN; j++) brow[j] = b_base + min(n0 + lane + 8u * uint(j), N - 1u) * b.nb[1];

    float acc[8 * RA][TN];
    [[unroll]] for (int i = 0; i < 8 * RA; i++)
        [[unroll]] for (int j = 0; j < TN; j++) acc[i][j] = 0.0;

    const uint U = K / 8u;
    for (uint u0 = 0u; u0 < U; u0 += 4u) {
        float part[8 * RA][TN];
        [[unroll]] for (int i = 0; i < 8 * RA; i++)
            [[unroll]] for (int j = 0; j < TN; j++) part[i][j] = 0.0;
        // the scales of these 4 units, once per row (quant.glsl q_head)
        vec4 hd[RA];
        [[unroll]] for (int r = 0; r < RA; r++) hd[r] = q_head(QT, a_addr, arow[r], u0);
        [[unroll]] for (uint du = 0u; du < 4u; du++) {
            float w[RA][8];
            const uvec2 kk2 = q_kpos(QT, u0 + du); // the same for every row
            [[unroll]] for (int r = 0; r < RA; r++) {
                const uvec2 qq = q_quants(QT, a_addr, arow[r], u0 + du);
                [[unroll]] for (uint i = 0u; i < 4u; i++) {
                    w[r][i]      = fma(hd[r].x, q_quant_f(QT, qq.x, i), hd[r].y);
                    w[r][4u + i] = fma(hd[r].z, q_quant_f(QT, qq.y, i), hd[r].w);
                }
            }
            float bv[TN][8];
            [[unroll]] for (int j = 0; j < TN; j++) {
                float t[4];
                load4(b_addr, brow[j] + kk2.x, t);
                bv[j][0] = t[0]; bv[j][1] = t[1]; bv[j][2] = t[2]; bv[j][3] = t[3];
                load4(b_addr, brow[j] + kk2.y, t);
                bv[j][4] = t[0]; bv[j][5] = t[1]; bv[j][6] = t[2]; bv[j][7] = t[3];
            }
            [[unroll]] for (int e = 0; e < 8; e++) {
#define ROW(S)                                                                                   \
                [[unroll]] for (int r = 0; r < RA; r++) {                                        \
                    const float x = subgroupBroadcast(w[r][e], S);                               \
                    [[unroll]] for (int j = 0; j < TN; j++) part[8 * r + S][j] = fma(x, bv[j][e], part[8 * r + S][j]); \
                }
                ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
#undef ROW
            }
        }
        [[unroll]] for (int i = 0; i < 8 * RA; i++)
            [[unroll]] for (int j = 0; j < TN; j++) acc[i][j] += part[i][j];
    }

    const uint d_base = i2 * d.nb[2] + i3 * d.nb[3];
    [[unroll]] for (int j = 0; j < TN; j++) {
        const uint gn = n0 + lane + 8u * uint(j);
        if (gn >= N) continue;
        [[unroll]] for (int r = 0; r < RA; r++)
            [[unroll]] for (int s = 0; s < 8; s++) {
                const uint gm = m0 + 8u * uint(r) + uint(s);
                if (gm < M) PF32(d.addr).v[d_base + gm * d.nb[0] + gn * d.nb[1]] = acc[8 * r + s][j];
            }
    }
}
