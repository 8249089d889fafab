#version 450
// flash_attn.comp — flash_attn_ext with online softmax. One subgroup handles NQ consecutive
// queries of one (head, sequence): lanes split the head dimension (MAXR registers per lane), so
// each K and V row is loaded once for NQ queries; a subgroup sum forms each score. Mask
// (F16/F32, broadcast over heads and sequences by modulo), ALiBi, softcap, sinks and GQA (kv head
// = head / ratio) as on the CPU. MAXR and NQ are specialization constants chosen on the host.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int MAXR = 16; // registers per lane: ceil(max(D, Dv) / subgroup size)
layout(constant_id = 2) const int NQ   = 4;  // queries per subgroup

void main() {
    const Tensor o = pc.p.t[0]; // [Dv, H, n_q, S]
    const Tensor q = pc.p.t[1]; // [D, n_q, H, S]
    const Tensor k = pc.p.t[2]; // [D, n_kv, Hk, Sk]
    const Tensor v = pc.p.t[3]; // [Dv, n_kv, Hv, Sv]
    const Tensor m = pc.p.t[4];
    const Tensor s = pc.p.t[5];
    const float scale = pc.p.fp[0], max_bias = pc.p.fp[1], softcap = pc.p.fp[2];
    const uint D = q.ne[0], n_q = q.ne[1], H = q.ne[2], S = q.ne[3];
    const uint n_kv = k.ne[1], Dv = v.ne[0];
    const uint lane = gl_SubgroupInvocationID, sgs = gl_SubgroupSize;
    const uint n_qt = (n_q + NQ - 1) / NQ;
    const uint nitems = n_qt * H * S;
    const float NINF = -1.0 / 0.0;
    const bool has_mask = m.addr != 0ul;

    for (uint item = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID; item < nitems;
         item += gl_NumWorkGroups.x * gl_NumSubgroups) {
        const uint qt = item % n_qt, h = (item / n_qt) % H, sq = item / (n_qt * H);
        const uint iq0 = qt * NQ;
        const uint kb = (h / (H / k.ne[2])) * k.nb[2] + (sq / (S / k.ne[3])) * k.nb[3];
        const uint vb = (h / (H / v.ne[2])) * v.nb[2] + (sq / (S / v.ne[3])) * v.nb[3];
        const uint mb = has_mask ? (h % m.ne[2]) * m.nb[2] + (sq % m.ne[3]) * m.nb[3] : 0u;
        float slope = 1.0;
        if (has_mask && max_bias > 0.0) {
            const uint n_log2 = uint(pc.p.ip[0]);
            slope = h < n_log2 ? pow(pc.p.fp[3], float(h + 1)) : pow(pc.p.fp[4], float(2 * (h - n_log2) + 1));
        }

        float qr[NQ * MAXR];
        float acc[NQ * MAXR];
        float mx[NQ], sum[NQ];
        for (uint r = 0; r < NQ; r++) {
            const uint iq = min(iq0 + r, n_q - 1); // rows past the end compute a copy, never written
            const uint qb = iq * q.nb[1] + h * q.nb[2] + sq * q.nb[3];
            for (uint c = 0; c < MAXR; c++) {
                const uint dd = lane + c * sgs;
                qr[r * MAXR + c]  = dd < D ? ld(q, qb + dd * q.nb[0]) : 0.0;
                acc[r * MAXR + c] = 0.0;
            }
            mx[r]  = NINF;
            sum[r] = 0.0;
        }
        for (uint j = 0; j < n_kv; j++) {
            float mv[NQ];
            bool  any = false;
            for (uint r = 0; r < NQ; r++) {
                mv[r] = 0.0;
                if (has_mask) mv[r] = slope * ld(m, mb + min(iq0 + r, n_q - 1) * m.nb[1] + j * m.nb[0]);
                any = any || mv[r] != NINF;
            }
            if (!any) continue; // uniform: every lane read the same mask values

            const uint kr = kb + j * k.nb[1];
            float kv[MAXR];
            for (uint c = 0; c < MAXR; c++) {
                const uint dd = lane + c * sgs;
                kv[c] = dd < D ? ld(k, kr + dd * k.nb[0]) : 0.0;
            }
            float p[NQ];
            for (uint r = 0; r < NQ; r++) {
                float dot = 0.0;
                for (uint c = 0; c < MAXR; c++) dot += qr[r * MAXR + c] * kv[c];
                float x = subgroupAdd(dot) * scale;
                p[r] = 0.0;
                if (mv[r] == NINF) continue;
                if (softcap != 0.0) x = softcap * tanh(clamp(x / softcap, -10.0, 10.0));
                x += mv[r];
                if (x > mx[r]) {
                    const float c = exp(mx[r] - x); // 0 on the first visible key
                    for (uint cc = 0; cc < MAXR; cc++) acc[r * MAXR + cc] *= c;
                    sum[r] *= c;
                    mx[r] = x;
                }
                p[r] = exp(x - mx[r]);
                sum[r] += p[r];
            }
            const uint vr = vb + j * v.nb[1];
            for (uint c = 0; c < MAXR; c++) {
                const uint dd = lane + c * sgs;
                const float vv = dd < Dv ? ld(v, vr + dd * v.nb[0]) : 0.0;
                for (uint r = 0; r < NQ; r++) acc[r * MAXR + c] += p[r] * vv;
            }
        }
        for (uint r = 0; r < NQ; r++) {
            const uint iq = iq0 + r;
            if (iq >= n_q) break;
            if (s.addr != 0ul) {
                const float sv = ld(s, h * s.nb[0]);
                if (sv != NINF) {
                    if (sv > mx[r]) {
                        const float c = exp(mx[r] - sv);
                        for (uint cc = 0; cc < MAXR; cc++) acc[r * MAXR + cc] *= c;
                        sum[r] *= c;
                        mx[r] = sv;
                    }
                    sum[r] += exp(sv - mx[r]);
                }
            }
            const float inv = sum[r] > 0.0 ? 1.0 / sum[r] : 0.0;
            const uint ob = h * o.nb[1] + iq * o.nb[2] + sq * o.nb[3];
            for (uint c = 0; c < MAXR; c++) {
                const uint dd = lane + c * sgs;
                if (dd < Dv) PF32(o.addr).v[ob + dd * o.nb[0]] = acc[r * MAXR + c] * inv;
            }
        }
    }
}
