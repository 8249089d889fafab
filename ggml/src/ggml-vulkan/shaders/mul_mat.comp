#version 450
// mul_mat.comp — tiled GEMM: dst[m, n] = sum_k A[k, m] * B[k, n] per batch (ggml layout: A is
// src0 [K, M, ne02, ne03] broadcast over dst's batch by division, B is src1 [K, N, ne2, ne3]).
// A BM x BN output tile per workgroup, BK-deep slices of A and B staged in shared memory, each
// thread accumulating an 8 x 8 register block in F32 (16 shared loads per 64 FMAs). Tile sizes are specialization constants
// chosen on the host from the device's shared-memory and workgroup limits. Any strides.
#include "common.glsl"

layout(local_size_x_id = 0) in; // BM * BN / 64 threads
layout(constant_id = 1) const int BM = 64;
layout(constant_id = 2) const int BN = 64;
layout(constant_id = 3) const int BK = 16;
layout(constant_id = 4) const int A_TYPE = 0; // ggml_type of A (F32, F16, BF16)
layout(constant_id = 5) const int B_TYPE = 0; // ggml_type of B
// 1: no shared memory, operands read straight from memory (CPU drivers: "shared" memory is
// ordinary memory there, so staging only adds stores and barriers)
layout(constant_id = 6) const int DIRECT = 0;
#define TM 8
#define TN 8

shared float As[BK * BM];
shared float Bs[BK * BN];

float load_t(const int type, uint64_t addr, uint i) {
    if (type == T_F16) return float(PF16(addr).v[i]);
    if (type == T_BF16) return uintBitsToFloat(uint(PU16(addr).v[i]) << 16);
    return PF32(addr).v[i];
}

void main() {
    const Tensor d = pc.p.t[0];
    const Tensor a = pc.p.t[1];
    const Tensor b = pc.p.t[2];
    const uint K = a.ne[0], M = a.ne[1], N = b.ne[1];
    const uint m0 = gl_WorkGroupID.x * BM, n0 = gl_WorkGroupID.y * BN;
    const uint z = gl_WorkGroupID.z;
    const uint i2 = z % d.ne[2], i3 = z / d.ne[2];
    const uint a_base = (i2 / (d.ne[2] / a.ne[2])) * a.nb[2] + (i3 / (d.ne[3] / a.ne[3])) * a.nb[3];
    const uint b_base = i2 * b.nb[2] + i3 * b.nb[3];
    const uint a_nb0 = a.nb[0], a_nb1 = a.nb[1], b_nb0 = b.nb[0], b_nb1 = b.nb[1];
    const uint64_t a_addr = a.addr, b_addr = b.addr;

    const uint tid = gl_LocalInvocationID.x;
    const uint nthr = gl_WorkGroupSize.x;
    const uint SM = BM / TM, SN = BN / TN; // thread grid
    const uint tm = tid % SM, tn = tid / SM;

    float acc[TM * TN];
    for (int i = 0; i < TM * TN; i++) acc[i] = 0.0;

    if (DIRECT != 0) {
        uint arow[TM], brow[TN];
        bool aok[TM], bok[TN];
        for (uint i = 0; i < TM; i++) {
            const uint gm = m0 + tm + i * SM;
            aok[i]  = gm < M;
            arow[i] = a_base + min(gm, M - 1) * a_nb1;
        }
        for (uint j = 0; j < TN; j++) {
            const uint gn = n0 + tn + j * SN;
            bok[j]  = gn < N;
            brow[j] = b_base + min(gn, N - 1) * b_nb1;
        }
        for (uint k = 0; k < K; k++) {
            float ar[TM], br[TN];
            for (uint i = 0; i < TM; i++) ar[i] = load_t(A_TYPE, a_addr, arow[i] + k * a_nb0);
            for (uint j = 0; j < TN; j++) br[j] = load_t(B_TYPE, b_addr, brow[j] + k * b_nb0);
            for (uint j = 0; j < TN; j++)
                for (uint i = 0; i < TM; i++) acc[j * TM + i] = fma(ar[i], br[j], acc[j * TM + i]);
        }
    }
    for (uint k0 = 0; DIRECT == 0 && k0 < K; k0 += BK) {
        for (uint e = tid; e < BK * BM; e += nthr) {
            const uint kk = e % BK, mm = e / BK;
            const uint gk = k0 + kk, gm = m0 + mm;
            As[kk * BM + mm] = (gk < K && gm < M) ? load_t(A_TYPE, a_addr, a_base + gm * a_nb1 + gk * a_nb0) : 0.0;
        }
        for (uint e = tid; e < BK * BN; e += nthr) {
            const uint kk = e % BK, nn = e / BK;
            const uint gk = k0 + kk, gn = n0 + nn;
            Bs[kk * BN + nn] = (gk < K && gn < N) ? load_t(B_TYPE, b_addr, b_base + gn * b_nb1 + gk * b_nb0) : 0.0;
        }
        barrier();
        for (uint kk = 0; kk < BK; kk++) {
            float ar[TM], br[TN];
            for (uint i = 0; i < TM; i++) ar[i] = As[kk * BM + tm + i * SM];
            for (uint j = 0; j < TN; j++) br[j] = Bs[kk * BN + tn + j * SN];
            for (uint j = 0; j < TN; j++)
                for (uint i = 0; i < TM; i++) acc[j * TM + i] = fma(ar[i], br[j], acc[j * TM + i]);
        }
        barrier();
    }

    const uint d_base = i2 * d.nb[2] + i3 * d.nb[3];
    for (uint j = 0; j < TN; j++) {
        const uint gn = n0 + tn + j * SN;
        if (gn >= N) continue;
        for (uint i = 0; i < TM; i++) {
            const uint gm = m0 + tm + i * SM;
            if (gm < M) PF32(d.addr).v[d_base + gm * d.nb[0] + gn * d.nb[1]] = acc[j * TM + i];
        }
    }
}
