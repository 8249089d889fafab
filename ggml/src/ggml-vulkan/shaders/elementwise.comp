#version 450
// elementwise.comp — one output element per iteration; OP (specialization constant) selects the
// op. Shapes/strides come from the parameter block: t[0] dst, t[1] src0, t[2] src1.
#include "common.glsl"
#include "math.glsl"

#define OP_COPY     0
#define OP_ADD      1
#define OP_SUB      2
#define OP_MUL      3
#define OP_DIV      4
#define OP_SCALE    5
#define OP_SQR      6
#define OP_SQRT     7
#define OP_REPEAT   8
#define OP_PAD      9
#define OP_CONCAT   10
#define OP_ARANGE   11
#define OP_GET_ROWS 12
#define OP_TIMESTEP 13
#define OP_UNARY    100 // + ggml_unary_op

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int OP = 0;
// FAST 1: dst, src0 (and src1) contiguous with dst's shape; 2: the same but src1 one contiguous
// row broadcast over dst. Element i is then offset i (i % ne10 for a broadcast row) and the
// element types are the constants TD/TA/TB: no index arithmetic, no per-element type branches.
layout(constant_id = 2) const int FAST = 0;
layout(constant_id = 3) const int TD = 0;
layout(constant_id = 4) const int TA = 0;
layout(constant_id = 5) const int TB = 0;

float ldc(const int type, uint64_t addr, uint i) {
    if (type == T_F16) return float(PF16(addr).v[i]);
    if (type == T_BF16) return uintBitsToFloat(uint(PU16(addr).v[i]) << 16);
    if (type == T_I32) return float(PI32(addr).v[i]);
    return PF32(addr).v[i];
}

void stc(const int type, uint64_t addr, uint i, float x) {
    if (type == T_F16) PU16(addr).v[i] = uint16_t(f32_to_f16_bits(x));
    else if (type == T_BF16) PU16(addr).v[i] = uint16_t(f32_to_bf16_bits(x));
    else if (type == T_I32) PI32(addr).v[i] = int(x);
    else PF32(addr).v[i] = x;
}

float binary_f(float x, float y) {
    if (OP == OP_ADD) return x + y;
    if (OP == OP_SUB) return x - y;
    if (OP == OP_MUL) return x * y;
    return x / y;
}


void main() {
    const Tensor d = pc.p.t[0];
    const Tensor a = pc.p.t[1];
    const Tensor b = pc.p.t[2];
    const uint   n = nelem(d);
    if (FAST != 0) {
        const uint64_t da = d.addr, aa = a.addr, ba = b.addr;
        const uint nb0 = b.ne[0];
        GRID_LOOP(i, n) {
            const float x = ldc(TA, aa, i);
            float r;
            if (OP >= OP_ADD && OP <= OP_DIV) r = binary_f(x, ldc(TB, ba, FAST == 2 ? i % nb0 : i));
            else if (OP == OP_SCALE) r = pc.p.fp[1] == 0.0 ? pc.p.fp[0] * x : mul_add_exact(pc.p.fp[0], x, pc.p.fp[1]);
            else if (OP == OP_SQR) r = x * x;
            else if (OP == OP_SQRT) r = sqrt(x);
            else if (OP >= OP_UNARY) r = unary_f(OP - OP_UNARY, x);
            else r = x; // OP_COPY between different types (same types take the bit-copy path below)
            stc(TD, da, i, r);
        }
        return;
    }
    GRID_LOOP(i, n) {
        const uvec4 c  = unravel(d, i);
        const uint  od = off4(d, c);
        if (OP == OP_COPY) {
            // element i of src in its own logical order (shapes may differ, counts do not)
            const uint oa = off4(a, unravel(a, i));
            if (a.type == d.type) {
                // bit copy: keeps NaN payloads, -0 and integers beyond 2^24
                if (tsize(d) == 4u) PU32(d.addr).v[od] = PU32(a.addr).v[oa];
                else PU16(d.addr).v[od] = PU16(a.addr).v[oa];
            } else {
                st(d, od, ld(a, oa));
            }
        } else if (OP >= OP_ADD && OP <= OP_DIV) {
            const float x = ld(a, off4(a, c));
            const uvec4 cb = uvec4(c.x % b.ne[0], c.y % b.ne[1], c.z % b.ne[2], c.w % b.ne[3]);
            const float y = ld(b, off4(b, cb));
            float r;
            if (OP == OP_ADD) r = x + y;
            else if (OP == OP_SUB) r = x - y;
            else if (OP == OP_MUL) r = x * y;
            else r = x / y;
            st(d, od, r);
        } else if (OP == OP_SCALE) {
            const float x = ld(a, off4(a, c));
            const float s = pc.p.fp[0], bias = pc.p.fp[1];
            // plain scale keeps s*x exactly (adding +0 would turn -0 into +0). With a bias the
            // result must be s*x+b rounded once (the CPU uses FMA): drivers may split fma(), so
            // the product's rounding error comes from Dekker's exact product and is added back
            st(d, od, bias == 0.0 ? s * x : mul_add_exact(s, x, bias));
        } else if (OP == OP_SQR) {
            const float x = ld(a, off4(a, c));
            st(d, od, x * x);
        } else if (OP == OP_SQRT) {
            st(d, od, sqrt(ld(a, off4(a, c))));
        } else if (OP == OP_REPEAT) {
            const uvec4 ca = uvec4(c.x % a.ne[0], c.y % a.ne[1], c.z % a.ne[2], c.w % a.ne[3]);
            if (tsize(d) == 4u) PU32(d.addr).v[od] = PU32(a.addr).v[off4(a, ca)];
            else PU16(d.addr).v[od] = PU16(a.addr).v[off4(a, ca)];
        } else if (OP == OP_PAD) {
            const ivec4 lp = ivec4(pc.p.ip[0], pc.p.ip[2], pc.p.ip[4], pc.p.ip[6]);
            const ivec4 j  = ivec4(c) - lp;
            const bool inside = all(greaterThanEqual(j, ivec4(0))) &&
                                all(lessThan(j, ivec4(a.ne[0], a.ne[1], a.ne[2], a.ne[3])));
            uint v = 0u;
            if (inside) v = tsize(a) == 4u ? PU32(a.addr).v[off4(a, uvec4(j))] : uint(PU16(a.addr).v[off4(a, uvec4(j))]);
            if (tsize(d) == 4u) PU32(d.addr).v[od] = v;
            else PU16(d.addr).v[od] = uint16_t(v);
        } else if (OP == OP_CONCAT) {
            const int dim = pc.p.ip[0];
            uvec4 cc = c;
            bool from_a = c[dim] < a.ne[dim];
            if (!from_a) cc[dim] -= a.ne[dim];
            uint v;
            if (tsize(d) == 4u) v = from_a ? PU32(a.addr).v[off4(a, cc)] : PU32(b.addr).v[off4(b, cc)];
            else v = from_a ? uint(PU16(a.addr).v[off4(a, cc)]) : uint(PU16(b.addr).v[off4(b, cc)]);
            if (tsize(d) == 4u) PU32(d.addr).v[od] = v;
            else PU16(d.addr).v[od] = uint16_t(v);
        } else if (OP == OP_ARANGE) {
            st(d, od, pc.p.fp[0] + float(i) * pc.p.fp[2]);
        } else if (OP == OP_GET_ROWS) {
            // dst [ne00, ne10, ne11, ne12]: row idx[c.y, c.z, c.w] of src0's matrix (c.z, c.w)
            const int  row = PI32(b.addr).v[c.y * b.nb[0] + c.z * b.nb[1] + c.w * b.nb[2]];
            const uint oa  = c.x * a.nb[0] + uint(row) * a.nb[1] + c.z * a.nb[2] + c.w * a.nb[3];
            if (a.type == d.type && tsize(d) == 4u) PU32(d.addr).v[od] = PU32(a.addr).v[oa];
            else st(d, od, ld(a, oa));
        } else if (OP == OP_TIMESTEP) {
            const int   half_ = pc.p.ip[0] / 2;
            const float t     = ld(a, c.y * a.nb[0]);
            const int   j     = int(c.x);
            float v = 0.0;
            if (j < 2 * half_) {
                const int   k = j < half_ ? j : j - half_;
                const float f = exp(-pc.p.fp[0] * float(k) / float(half_)); // fp[0] = log(max_period)
                const float arg = t * f;
                v = j < half_ ? cos(arg) : sin(arg);
            }
            st(d, od, v);
        } else if (OP >= OP_UNARY) {
            st(d, od, unary_f(OP - OP_UNARY, ld(a, off4(a, c))));
        }
    }
}
