#version 450
// mul_mat_sg.comp — GEMM for CPU drivers with 8-wide subgroups (Mesa lavapipe): the same
// product as mul_mat.comp, dst[m, n] = sum_k A[k, m] * B[k, n] per batch, with A broadcast over
// dst's batch by division.
//
// Why a separate kernel: lavapipe runs one subgroup as one 8-lane SIMD vector and turns every
// storage-buffer or shared-memory load into a loop over the 8 lanes (one scalar load per lane
// and component, with an exec-mask branch), whether or not the address is uniform; arithmetic
// costs one vector instruction for all 8 lanes. So loads, not FMAs, set the speed, and staging
// in shared memory only adds loads (plus ~0.25 ms per barrier'd workgroup). This kernel makes
// every load as wide as the load loop allows (8-byte components, 16 bytes per load: 4 F32 or
// 8 F16/BF16 values) and loads each value once per workgroup:
//   - lane l loads B column n0 + l + 8 j (TN columns per lane), 8 k values per step, and keeps
//     them: lane l owns those output columns;
//   - lane l also loads A row m0 + l + 8 r (RA row groups), and subgroupBroadcast with a literal
//     lane index (one extract + splat on lavapipe) hands each row's values to all 8 lanes.
// Each lane accumulates 8 * RA rows x TN columns in F32, k ascending, one fma per product (the
// order of the other mul_mat kernels). One workgroup = one subgroup: no barriers at all.
//
// Preconditions (checked on the host, else another kernel runs): subgroup size 8, A and B
// contiguous along K with K % 8 == 0, A/B rows and batch strides and base addresses 16-byte
// aligned. The k loop runs K / 8 iterations per invocation.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
// [[unroll]]: lavapipe counts every loop iteration an invocation runs against a cap of 65,535
// (then silently skips the rest); the constant inner loops must not count
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x = 8) in;
layout(constant_id = 0) const int RA = 2;     // row groups of 8 per workgroup (BM = 8 * RA)
layout(constant_id = 1) const int TN = 4;     // columns per lane (BN = 8 * TN)
layout(constant_id = 2) const int A_TYPE = 0; // ggml_type of A (F32, F16, BF16)
layout(constant_id = 3) const int B_TYPE = 0; // ggml_type of B

// 64-bit components: lavapipe loads buffer-reference data one component per lane at a time, so
// 8-byte components halve the number of lane-loop iterations of 4-byte ones
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer PU64 { u64vec2 v[]; };

// 8 consecutive values starting at element e (e % 8 == 0; the address is 16-byte aligned)
void load8(const int type, uint64_t addr, uint e, out float v[8]) {
    if (type == T_F32) {
        const u64vec2 x = PU64(addr).v[e / 4u];
        const u64vec2 y = PU64(addr).v[e / 4u + 1u];
        const uvec2 p0 = unpackUint2x32(x.x), p1 = unpackUint2x32(x.y);
        const uvec2 p2 = unpackUint2x32(y.x), p3 = unpackUint2x32(y.y);
        v[0] = uintBitsToFloat(p0.x); v[1] = uintBitsToFloat(p0.y);
        v[2] = uintBitsToFloat(p1.x); v[3] = uintBitsToFloat(p1.y);
        v[4] = uintBitsToFloat(p2.x); v[5] = uintBitsToFloat(p2.y);
        v[6] = uintBitsToFloat(p3.x); v[7] = uintBitsToFloat(p3.y);
    } else {
        const u64vec2 x = PU64(addr).v[e / 8u];
        const uvec2 lo = unpackUint2x32(x.x), hi = unpackUint2x32(x.y);
        const uint w[4] = uint[4](lo.x, lo.y, hi.x, hi.y);
        [[unroll]] for (int i = 0; i < 4; i++) {
            if (type == T_F16) {
                const vec2 h = unpackHalf2x16(w[i]);
                v[2 * i] = h.x; v[2 * i + 1] = h.y;
            } else { // BF16: the high 16 bits of an F32
                v[2 * i]     = uintBitsToFloat(w[i] << 16);
                v[2 * i + 1] = uintBitsToFloat(w[i] & 0xFFFF0000u);
            }
        }
    }
}

void main() {
    const Tensor d = pc.p.t[0];
    const Tensor a = pc.p.t[1];
    const Tensor b = pc.p.t[2];
    const uint K = a.ne[0], M = a.ne[1], N = b.ne[1];
    const uint BM = 8u * uint(RA), BN = 8u * uint(TN);
    const uint m0 = gl_WorkGroupID.x * BM, n0 = gl_WorkGroupID.y * BN;
    const uint z = gl_WorkGroupID.z;
    const uint i2 = z % d.ne[2], i3 = z / d.ne[2];
    const uint a_base = (i2 / (d.ne[2] / a.ne[2])) * a.nb[2] + (i3 / (d.ne[3] / a.ne[3])) * a.nb[3];
    const uint b_base = i2 * b.nb[2] + i3 * b.nb[3];
    const uint lane = gl_SubgroupInvocationID;

    // rows / columns past the end re-read the last one (always valid) and are not stored
    uint arow[RA], brow[TN];
    [[unroll]] for (int r = 0; r < RA; r++) arow[r] = a_base + min(m0 + lane + 8u * uint(r), M - 1u) * a.nb[1];
    [[unroll]] for (int j = 0; j < TN; j++) brow[j] = b_base + min(n0 + lane + 8u * uint(j), N - 1u) * b.nb[1];

    float acc[8 * RA][TN];
    [[unroll]] for (int i = 0; i < 8 * RA; i++)
        [[unroll]] for (int j = 0; j < TN; j++) acc[i][j] = 0.0;

    for (uint k = 0u; k < K; k += 8u) {
        float av[RA][8], bv[TN][8];
        [[unroll]] for (int r = 0; r < RA; r++) load8(A_TYPE, a.addr, arow[r] + k, av[r]);
        [[unroll]] for (int j = 0; j < TN; j++) load8(B_TYPE, b.addr, brow[j] + k, bv[j]);
        [[unroll]] for (int kk = 0; kk < 8; kk++) {
            // literal lane indices (the GLSL rule for subgroupBroadcast; a constant index is
            // a single extract on lavapipe, a variable one a loop over the lanes)
#define ROW(S)                                                                                     \
            [[unroll]] for (int r = 0; r < RA; r++) {                                                         \
                const float x = subgroupBroadcast(av[r][kk], S);                                   \
                [[unroll]] for (int j = 0; j < TN; j++) acc[8 * r + S][j] = fma(x, bv[j][kk], acc[8 * r + S][j]); \
            }
            ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
#undef ROW
        }
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
