#version 450
// rope.comp — rope_ext NORMAL (adjacent pairs) and NEOX (halves), partial rotation (n_dims <
// ne0, offset n_offs), frequency factors and YaRN, with ggml's CPU formulas. One invocation per
// element: the first element of each pair rotates both, the others copy (unless in place).
#include "common.glsl"

layout(local_size_x_id = 0) in;

void main() {
    const Tensor d = pc.p.t[0];
    const Tensor a = pc.p.t[1];
    const Tensor p = pc.p.t[2]; // positions, I32 [ne2]
    const Tensor f = pc.p.t[3]; // frequency factors (addr 0: none)
    const int  n_dims = pc.p.ip[1];
    const bool neox   = pc.p.ip[2] != 0;
    const int  n_offs = pc.p.ip[3];
    const float log2_base = pc.p.fp[0], freq_scale = pc.p.fp[1], ext_factor = pc.p.fp[2];
    const float corr_low = pc.p.fp[4], corr_high = pc.p.fp[5], mscale = pc.p.fp[6];
    const bool inplace = d.addr == a.addr;
    const int half_ = n_dims / 2;

    GRID_LOOP(i, nelem(d)) {
        const uvec4 c = unravel(d, i);
        const int r = int(c.x) - n_offs;
        if (r < 0 || r >= n_dims) {
            if (!inplace) st(d, off4(d, c), ld(a, off4(a, c)));
            continue;
        }
        int k, partner;
        if (neox) {
            if (r >= half_) continue;
            k = r; partner = half_;
        } else {
            if ((r & 1) != 0) continue;
            k = r / 2; partner = 1;
        }
        const float pos = float(PI32(p.addr).v[c.z * p.nb[0]]);
        const float ff = f.addr != 0ul ? PF32(f.addr).v[uint(k) * f.nb[0]] : 1.0;
        const float inv_freq = exp2(-2.0 * float(k) / float(n_dims) * log2_base);
        const float theta_extrap = pos * inv_freq / ff;
        const float theta_interp = freq_scale * theta_extrap;
        float theta = theta_interp;
        if (ext_factor != 0.0) {
            const float y    = (float(k) - corr_low) / max(0.001, corr_high - corr_low);
            const float ramp = 1.0 - min(1.0, max(0.0, y));
            const float mix_ = ramp * ext_factor;
            theta = theta_interp * (1.0 - mix_) + theta_extrap * mix_;
        }
        const float cs = cos(theta) * mscale, sn = sin(theta) * mscale;
        const uvec4 c1 = uvec4(c.x + uint(partner), c.yzw);
        const uint o0a = off4(a, c), o1a = off4(a, c1);
        const float x0 = ld(a, o0a), x1 = ld(a, o1a);
        st(d, off4(d, c), x0 * cs - x1 * sn);
        st(d, off4(d, c1), x0 * sn + x1 * cs);
    }
}
