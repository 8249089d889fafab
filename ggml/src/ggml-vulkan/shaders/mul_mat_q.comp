#version 450
// mul_mat_q.comp — dst[m, n] = sum_k A[k, m] * B[k, n] with A block-quantized (Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q4_K, Q5_K, Q6_K) and B F32 or F16, per batch (A broadcast over dst's batch by
// division, as mul_mat.comp). The weights are dequantized in the shader (quant.glsl) and multiplied
// with the activations as given, in F32: unlike the CPU backend, the activations are not quantized
// to the weight type's dot type, so the result is the exact product up to F32 rounding.
//
// Each invocation computes TM weight rows x TN activation columns: it decodes a unit of 8 weights
// per row (a few 16-bit loads and shifts, amortised over TN columns) and loads 8 activations per
// column (amortised over TM rows). A workgroup covers WG * TM rows and TN columns. Sums are kept
// per 32 elements and then added to the running total, which keeps the F32 rounding of long rows
// (K = 16384) small. No shared memory and no barriers: on CPU drivers (lavapipe) each workgroup
// with barriers costs a fixed overhead, and the caches hold a workgroup's rows anyway.
//
// Tensor.nb of A is in BYTES (rows of blocks are only 2-byte aligned); B and dst use element strides.
// [[unroll]] on the constant inner loops: lavapipe caps the iterations an invocation runs per loop
// (65,535, then silently skips the rest); only the K loop (K / 32 iterations) may count
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "quant.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int QT     = 8; // ggml_type of A
layout(constant_id = 2) const int B_TYPE = 0; // ggml_type of B (F32 or F16)
layout(constant_id = 3) const int TM     = 4;
layout(constant_id = 4) const int TN     = 4;

float load_b(uint64_t addr, uint i) {
    if (B_TYPE == T_F16) return float(PF16(addr).v[i]);
    return PF32(addr).v[i];
}

void main() {
    const Tensor d = pc.p.t[0];
    const Tensor a = pc.p.t[1];
    const Tensor b = pc.p.t[2];
    const uint K = a.ne[0], M = a.ne[1], N = b.ne[1];
    const uint z = gl_WorkGroupID.z;
    const uint i2 = z % d.ne[2], i3 = z / d.ne[2];
    const uint a_base = (i2 / (d.ne[2] / a.ne[2])) * a.nb[2] + (i3 / (d.ne[3] / a.ne[3])) * a.nb[3];
    const uint b_base = i2 * b.nb[2] + i3 * b.nb[3];
    const uint64_t a_addr = a.addr, b_addr = b.addr;
    const uint b_nb0 = b.nb[0];

    const uint WG = gl_WorkGroupSize.x;
    const uint m0 = gl_WorkGroupID.x * WG * TM + gl_LocalInvocationID.x;
    const uint n0 = gl_WorkGroupID.y * TN;

    uint arow[TM], brow[TN];
    for (uint i = 0; i < TM; i++) arow[i] = a_base + min(m0 + i * WG, M - 1) * a.nb[1];
    for (uint j = 0; j < TN; j++) brow[j] = b_base + min(n0 + j, N - 1) * b.nb[1];

    float acc[TM * TN];
    for (uint i = 0; i < TM * TN; i++) acc[i] = 0.0;

    const uint U = K / 8u; // units of 8 weights; K is a multiple of 32, U of 4
    for (uint u0 = 0; u0 < U; u0 += 4u) {
        float part[TM * TN];
        [[unroll]] for (uint i = 0; i < TM * TN; i++) part[i] = 0.0;
        [[unroll]] for (uint u = u0; u < u0 + 4u; u++) {
            float xv[TN * 8];
            [[unroll]] for (uint i = 0; i < TM; i++) {
                const qunit q = q_unit(QT, a_addr, arow[i], u);
                if (i == 0) {
                    [[unroll]] for (uint j = 0; j < TN; j++) {
                        [[unroll]] for (uint e = 0; e < 4u; e++) {
                            xv[j * 8 + e]      = load_b(b_addr, brow[j] + (q.k.x + e) * b_nb0);
                            xv[j * 8 + 4 + e]  = load_b(b_addr, brow[j] + (q.k.y + e) * b_nb0);
                        }
                    }
                }
                [[unroll]] for (uint j = 0; j < TN; j++) {
                    float s = part[j * TM + i];
                    [[unroll]] for (uint e = 0; e < 8u; e++) s = fma(q.w[e], xv[j * 8 + e], s);
                    part[j * TM + i] = s;
                }
            }
        }
        [[unroll]] for (uint i = 0; i < TM * TN; i++) acc[i] += part[i];
    }

    const uint d_base = i2 * d.nb[2] + i3 * d.nb[3];
    for (uint j = 0; j < TN; j++) {
        const uint gn = n0 + j;
        if (gn >= N) continue;
        for (uint i = 0; i < TM; i++) {
            const uint gm = m0 + i * WG;
            if (gm < M) PF32(d.addr).v[d_base + gm * d.nb[0] + gn * d.nb[1]] = acc[j * TM + i];
        }
    }
}
