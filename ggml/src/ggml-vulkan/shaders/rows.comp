#version 450
// rows.comp — row reductions, one subgroup per row (subgroup arithmetic, no shared memory and no
// workgroup barrier: on CPU drivers a barrier per short row costs more than the row itself).
// OP: 0 norm, 1 rms_norm, 2 soft_max_ext. Rows are visited with a grid-stride loop, so the
// group count and the subgroup size (any, even varying) only change the schedule.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int OP = 0;

void main() {
    const Tensor d = pc.p.t[0];
    const Tensor a = pc.p.t[1];
    const Tensor m = pc.p.t[2]; // soft_max mask (addr 0: none)
    const Tensor s = pc.p.t[3]; // soft_max sinks (addr 0: none)
    const uint ne0 = a.ne[0], ne1 = a.ne[1], ne2 = a.ne[2];
    const uint nrows = ne1 * ne2 * a.ne[3];
    const uint lane = gl_SubgroupInvocationID, sgs = gl_SubgroupSize;
    const float eps = pc.p.fp[0];

    for (uint row = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID; row < nrows;
         row += gl_NumWorkGroups.x * gl_NumSubgroups) {
        const uint i1 = row % ne1, i2 = (row / ne1) % ne2, i3 = row / (ne1 * ne2);
        const uint ra = i1 * a.nb[1] + i2 * a.nb[2] + i3 * a.nb[3];
        const uint rd = i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
        if (OP == 0) {
            float sum = 0.0;
            for (uint j = lane; j < ne0; j += sgs) sum += ld(a, ra + j * a.nb[0]);
            const float mean = subgroupAdd(sum) / float(ne0);
            float var = 0.0;
            for (uint j = lane; j < ne0; j += sgs) {
                const float x = ld(a, ra + j * a.nb[0]) - mean;
                var += x * x;
            }
            const float scale = 1.0 / sqrt(subgroupAdd(var) / float(ne0) + eps);
            for (uint j = lane; j < ne0; j += sgs) st(d, rd + j * d.nb[0], (ld(a, ra + j * a.nb[0]) - mean) * scale);
        } else if (OP == 1) {
            float sum = 0.0;
            for (uint j = lane; j < ne0; j += sgs) {
                const float x = ld(a, ra + j * a.nb[0]);
                sum += x * x;
            }
            const float scale = 1.0 / sqrt(subgroupAdd(sum) / float(ne0) + eps);
            for (uint j = lane; j < ne0; j += sgs) st(d, rd + j * d.nb[0], ld(a, ra + j * a.nb[0]) * scale);
        } else {
            const float scale = pc.p.fp[0], max_bias = pc.p.fp[1];
            float slope = 1.0;
            if (max_bias > 0.0) {
                const uint n_log2 = uint(pc.p.ip[0]);
                slope = i2 < n_log2 ? pow(pc.p.fp[2], float(i2 + 1)) : pow(pc.p.fp[3], float(2 * (i2 - n_log2) + 1));
            }
            const bool has_mask = m.addr != 0ul;
            const uint rm = has_mask ? i1 * m.nb[1] + (i2 % m.ne[2]) * m.nb[2] + (i3 % m.ne[3]) * m.nb[3] : 0u;
            float mx = -1.0 / 0.0;
            for (uint j = lane; j < ne0; j += sgs) {
                float v = ld(a, ra + j * a.nb[0]) * scale;
                if (has_mask) v += slope * ld(m, rm + j * m.nb[0]);
                mx = max(mx, v);
            }
            mx = subgroupMax(mx);
            const bool  has_sink = s.addr != 0ul;
            const float sink = has_sink ? ld(s, i2 * s.nb[0]) : -1.0 / 0.0;
            mx = max(mx, sink);
            if (mx == -1.0 / 0.0) {
                for (uint j = lane; j < ne0; j += sgs) st(d, rd + j * d.nb[0], 0.0);
                continue;
            }
            float sum = 0.0;
            for (uint j = lane; j < ne0; j += sgs) {
                float v = ld(a, ra + j * a.nb[0]) * scale;
                if (has_mask) v += slope * ld(m, rm + j * m.nb[0]);
                sum += exp(v - mx);
            }
            sum = subgroupAdd(sum);
            if (has_sink) sum += exp(sink - mx);
            const float inv = 1.0 / sum;
            for (uint j = lane; j < ne0; j += sgs) {
                float v = ld(a, ra + j * a.nb[0]) * scale;
                if (has_mask) v += slope * ld(m, rm + j * m.nb[0]);
                st(d, rd + j * d.nb[0], exp(v - mx) * inv);
            }
        }
    }
}
