#version 450
// flash_attn.comp — flash_attn_ext with online softmax, one subgroup per (query, head, sequence):
// lanes split the head dimension, a subgroup sum forms each score, V rows accumulate in
// registers (head dims up to MAXR * subgroup size). Mask (F16/F32, broadcast over heads and
// sequences by modulo), ALiBi, softcap, sinks and GQA (kv head = head / ratio) as on the CPU.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
#define MAXR 32

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
    const uint nrows = n_q * H * S;
    const float NINF = -1.0 / 0.0;

    for (uint row = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID; row < nrows;
         row += gl_NumWorkGroups.x * gl_NumSubgroups) {
        const uint iq = row % n_q, h = (row / n_q) % H, sq = row / (n_q * H);
        const uint kb = (h / (H / k.ne[2])) * k.nb[2] + (sq / (S / k.ne[3])) * k.nb[3];
        const uint vb = (h / (H / v.ne[2])) * v.nb[2] + (sq / (S / v.ne[3])) * v.nb[3];
        const uint qb = iq * q.nb[1] + h * q.nb[2] + sq * q.nb[3];
        const bool has_mask = m.addr != 0ul;
        const uint mb = has_mask ? iq * m.nb[1] + (h % m.ne[2]) * m.nb[2] + (sq % m.ne[3]) * m.nb[3] : 0u;
        float slope = 1.0;
        if (has_mask && max_bias > 0.0) {
            const uint n_log2 = uint(pc.p.ip[0]);
            slope = h < n_log2 ? pow(pc.p.fp[3], float(h + 1)) : pow(pc.p.fp[4], float(2 * (h - n_log2) + 1));
        }

        float qr[MAXR];
        float acc[MAXR];
        for (uint r = 0; r < MAXR; r++) {
            const uint dd = lane + r * sgs;
            qr[r]  = dd < D ? ld(q, qb + dd * q.nb[0]) : 0.0;
            acc[r] = 0.0;
        }
        float mx = NINF, sum = 0.0;
        for (uint j = 0; j < n_kv; j++) {
            float mv = 0.0;
            if (has_mask) {
                mv = slope * ld(m, mb + j * m.nb[0]);
                if (mv == NINF) continue; // uniform across the subgroup
            }
            float dot = 0.0;
            const uint kr = kb + j * k.nb[1];
            for (uint r = 0; r < MAXR; r++) {
                const uint dd = lane + r * sgs;
                if (dd >= D) break;
                dot += qr[r] * ld(k, kr + dd * k.nb[0]);
            }
            float x = subgroupAdd(dot) * scale;
            if (softcap != 0.0) x = softcap * tanh(clamp(x / softcap, -10.0, 10.0));
            x += mv;
            if (x > mx) {
                const float c = exp(mx - x); // 0 on the first visible key
                for (uint r = 0; r < MAXR; r++) acc[r] *= c;
                sum *= c;
                mx = x;
            }
            const float pj = exp(x - mx);
            sum += pj;
            const uint vr = vb + j * v.nb[1];
            for (uint r = 0; r < MAXR; r++) {
                const uint dd = lane + r * sgs;
                if (dd >= Dv) break;
                acc[r] += pj * ld(v, vr + dd * v.nb[0]);
            }
        }
        if (s.addr != 0ul) {
            const float sv = ld(s, h * s.nb[0]);
            if (sv != NINF) {
                if (sv > mx) {
                    const float c = exp(mx - sv);
                    for (uint r = 0; r < MAXR; r++) acc[r] *= c;
                    sum *= c;
                    mx = sv;
                }
                sum += exp(sv - mx);
            }
        }
        const float inv = sum > 0.0 ? 1.0 / sum : 0.0;
        const uint ob = h * o.nb[1] + iq * o.nb[2] + sq * o.nb[3];
        for (uint r = 0; r < MAXR; r++) {
            const uint dd = lane + r * sgs;
            if (dd >= Dv) break;
            PF32(o.addr).v[ob + dd * o.nb[0]] = acc[r] * inv;
        }
    }
}
