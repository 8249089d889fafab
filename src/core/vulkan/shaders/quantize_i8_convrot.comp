#version 450
// quantize_i8_convrot.comp — sd.quantize_i8_convrot.v1: each invocation rotates (regular
// Hadamard, groups of G <= 256 values) and quantizes one whole row, with the CPU portable
// kernel's operation order (int8-convrot-facts.md), so bytes and scales are bit-identical.
// One row per invocation: no barriers or shared memory (lavapipe charges ~0.25 ms per workgroup
// that synchronises). Pass 1 takes the amax of the rotated row, pass 2 rotates again and
// quantizes (no per-row scratch beyond one group). Invocations past the last row write the zero
// padding rows up to pad4(rows).
//
// Bindings: 0 x (F32 rows of K), 1 out (the packed tensor as 32-bit words). K % 4 == 0.
#include "int8_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int G = 256; // 1, 4, 16, 64 or 256 (K % max(G, 4) == 0)

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer O { uint o[]; };

layout(push_constant) uniform PC {
    uint x_off;     // in floats (the binding's shader_offset / 4)
    uint o_off;     // in words
    uint K;
    uint rows;
    uint prows;     // pad4(rows)
    uint scale_off; // word offset of the row scales inside the packed tensor (K * prows / 4)
    float gscale;   // 1 / sqrt(G), computed on the host like the CPU kernel
} pc;

// values handled per step: whole groups, at least one 32-bit word of output (G = 1: 4 groups)
const int C = G < 4 ? 4 : G;

float v[256];

// The rotation of one group in v[0..G), in the facts sheet's order: scale first, then the
// butterfly stages s = 1, 4, 16, 64 with each sum evaluated left to right (precise: no
// contraction or reassociation).
void rotate_group() {
    if (G == 1) return;
    for (int i = 0; i < G; ++i) { precise float t = v[i] * pc.gscale; v[i] = t; }
    for (int s = 1; s < G; s *= 4) {
        for (int blk = 0; blk < G; blk += 4 * s) {
            for (int j = 0; j < s; ++j) {
                const int p = blk + j;
                const float a = v[p], b = v[p + s], c = v[p + 2 * s], d = v[p + 3 * s];
                precise float o0 = a + b + c - d;
                precise float o1 = a + b - c + d;
                precise float o2 = a - b + c + d;
                precise float o3 = -a + b + c + d;
                v[p] = o0; v[p + s] = o1; v[p + 2 * s] = o2; v[p + 3 * s] = o3;
            }
        }
    }
}

void load_group(uint base) {
    for (int i = 0; i < C; ++i) v[i] = x[base + uint(i)];
}

void main() {
    const uint r = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x +
                   gl_LocalInvocationID.x;
    if (r >= pc.prows) return;
    const uint K = pc.K, wpr = K / 4u; // words per row
    const uint ob = pc.o_off + r * wpr;
    if (r >= pc.rows) { // zero padding row
        for (uint w = 0u; w < wpr; ++w) o[ob + w] = 0u;
        return;
    }
    const uint xb = pc.x_off + r * K;

    // pass 1: amax (as bits: for non-negative floats the integer order is the float order, and
    // max is exact in any order) and the non-finite flag
    uint amax = 0u;
    bool nonfinite = false;
    for (uint g0 = 0u; g0 < K; g0 += uint(C)) {
        load_group(xb + g0);
        rotate_group();
        for (int i = 0; i < C; ++i) {
            const uint a = floatBitsToUint(v[i]) & 0x7fffffffu;
            if (a >= 0x7f800000u) nonfinite = true;
            amax = max(amax, a);
        }
    }
    const uint so = pc.o_off + pc.scale_off + r;
    if (nonfinite || amax == 0u) { // all zeros; scale NaN (non-finite row) or 0
        for (uint w = 0u; w < wpr; ++w) o[ob + w] = 0u;
        o[so] = nonfinite ? 0x7fc00000u : 0u;
        return;
    }
    const uint s_bits = scale_bits(amax);
    if (s_bits == 0u) { // amax / 127 rounds to zero: the CPU's s == 0 row
        for (uint w = 0u; w < wpr; ++w) o[ob + w] = 0u;
        o[so] = 0u;
        return;
    }
    const float inv = uintBitsToFloat(inv_bits(s_bits));

    // pass 2: rotate again, quantize, pack four bytes per word (little endian)
    for (uint g0 = 0u; g0 < K; g0 += uint(C)) {
        load_group(xb + g0);
        rotate_group();
        for (int i = 0; i < C; i += 4) {
            uint word = 0u;
            for (int k = 0; k < 4; ++k) {
                precise float f = v[i + k] * inv;
                word |= (uint(quant_value(f)) & 0xffu) << uint(8 * k);
            }
            o[ob + (g0 + uint(i)) / 4u] = word;
        }
    }
    o[so] = s_bits;
}
