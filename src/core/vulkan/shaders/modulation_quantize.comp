#version 450
// modulation_quantize.comp — the Krea2 modulated-norm path fused into the ConvRot quantizer:
//     h = rms_norm(x) * w1;  y = (h + h * mod_scale) + shift;  out = quantize_i8_convrot(y)
// (RMS_NORM -> MUL(w1) -> MUL(mod_scale) -> ADD -> ADD(shift) -> sd.quantize_i8_convrot.v1),
// bit-identical to the unfused chain on the same device: the RMS norm reproduces the native
// Vulkan RMS_NORM row reduction (lane-strided partial sums, subgroupAdd, 1 / sqrt(mean + eps),
// x * scale), each MUL / ADD is one separately rounded operation like the native elementwise
// shader, and the quantization is quantize_i8_convrot.comp's (same rotation order, exact integer
// divisions for the scale and its inverse).
//
// One subgroup per row (grid-stride over pad4(rows) rows): lanes share the norm's sum, then each
// lane rotates and quantizes whole ConvRot groups (chunks of max(G, 4) values); the row's amax is
// a subgroupMax of float bits. Padding rows are written as zeros.
//
// Bindings: 0 x (F32 contiguous rows of K), 1 w1, 2 mod_scale, 3 shift (F32 [K] each), 4 out (the
// packed tensor as 32-bit words).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "int8_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int G = 256; // 1, 4, 16, 64 or 256

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W1 { float w1[]; };
layout(std430, binding = 2) readonly buffer MS { float ms[]; };
layout(std430, binding = 3) readonly buffer SH { float sh[]; };
layout(std430, binding = 4) writeonly buffer O { uint o[]; };

layout(push_constant) uniform PC {
    uint x_off, w_off, ms_off, sh_off, o_off; // shader offsets, in words
    uint K, rows, prows, scale_off;
    float gscale; // 1 / sqrt(G)
    float eps;
} pc;

const int C = G < 4 ? 4 : G;
float v[256];
float norm_scale = 1.0;

float value_of(uint xr, uint i) {
    const float r = x[xr + i] * norm_scale;      // native RMS_NORM's stored value
    precise float h = r * w1[pc.w_off + i];       // MUL(w1)
    precise float t = h * ms[pc.ms_off + i];      // MUL(mod_scale)
    precise float a = h + t;                      // ADD
    precise float y = a + sh[pc.sh_off + i];      // ADD(shift)
    return y;
}

void rotate_chunk() {
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

void load_chunk(uint xr, uint base) {
    for (int i = 0; i < C; ++i) v[i] = value_of(xr, base + uint(i));
    rotate_chunk();
}

void main() {
    const uint lane = gl_SubgroupInvocationID, sgs = gl_SubgroupSize;
    const uint K = pc.K, wpr = K / 4u, chunks = K / uint(C), cw = uint(C) / 4u;
    for (uint row = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID; row < pc.prows;
         row += gl_NumWorkGroups.x * gl_NumSubgroups) {
        const uint ob = pc.o_off + row * wpr;
        if (row >= pc.rows) { // zero padding row
            for (uint w = lane; w < wpr; w += sgs) o[ob + w] = 0u;
            continue;
        }
        const uint xr = pc.x_off + row * K;
        // the native RMS_NORM's reduction (deliberately not precise: compiled like the native one)
        float sum = 0.0;
        for (uint j = lane; j < K; j += sgs) {
            const float e = x[xr + j];
            sum += e * e;
        }
        norm_scale = 1.0 / sqrt(subgroupAdd(sum) / float(K) + pc.eps);

        uint amax = 0u;
        for (uint c = lane; c < chunks; c += sgs) {
            load_chunk(xr, c * uint(C));
            for (int i = 0; i < C; ++i) amax = max(amax, floatBitsToUint(v[i]) & 0x7fffffffu);
        }
        amax = subgroupMax(amax); // exact in any order; >= Inf bits: a non-finite value
        const uint so = pc.o_off + pc.scale_off + row;
        const uint s_bits = amax >= 0x7f800000u || amax == 0u ? 0u : scale_bits(amax);
        if (s_bits == 0u) { // all zeros; scale NaN (non-finite row) or 0
            for (uint w = lane; w < wpr; w += sgs) o[ob + w] = 0u;
            if (lane == 0u) o[so] = amax >= 0x7f800000u ? 0x7fc00000u : 0u;
            continue;
        }
        const float inv = uintBitsToFloat(inv_bits(s_bits));
        for (uint c = lane; c < chunks; c += sgs) {
            load_chunk(xr, c * uint(C));
            for (uint k = 0u; k < cw; ++k) {
                uint word = 0u;
                for (uint b = 0u; b < 4u; ++b) {
                    precise float f = v[4u * k + b] * inv;
                    word |= (uint(quant_value(f)) & 0xffu) << (8u * b);
                }
                o[ob + c * cw + k] = word;
            }
        }
        if (lane == 0u) o[so] = s_bits;
    }
}
