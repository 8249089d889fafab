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
// One subgroup per sgs consecutive rows (grid-stride over pad4(rows) rows): for each row the
// lanes share the norm's reduction like the native RMS_NORM, then every lane rotates and
// quantizes one whole row (as quantize_i8_convrot.comp). Padding rows are written as zeros.
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
    const uint K = pc.K, wpr = K / 4u;
    // a subgroup takes sgs consecutive rows: their norm scales one row at a time (lanes share the
    // reduction, as the native RMS_NORM), then each lane rotates and quantizes one of the rows
    // (one row per lane keeps every SIMD lane busy: a row is only K / G ConvRot groups)
    for (uint base = (gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID) * sgs; base < pc.prows;
         base += gl_NumWorkGroups.x * gl_NumSubgroups * sgs) {
        float my_scale = 1.0;
        for (uint k = 0u; k < sgs && base + k < pc.rows; ++k) { // uniform in the subgroup
            const uint xr = pc.x_off + (base + k) * K;
            // the native RMS_NORM's reduction (deliberately not precise: compiled like the native one)
            float sum = 0.0;
            for (uint j = lane; j < K; j += sgs) {
                const float e = x[xr + j];
                sum += e * e;
            }
            const float s = 1.0 / sqrt(subgroupAdd(sum) / float(K) + pc.eps);
            if (lane == k) my_scale = s;
        }
        const uint row = base + lane;
        if (row >= pc.prows) continue;
        const uint ob = pc.o_off + row * wpr;
        if (row >= pc.rows) { // zero padding row
            for (uint w = 0u; w < wpr; ++w) o[ob + w] = 0u;
            continue;
        }
        norm_scale = my_scale;
        const uint xr = pc.x_off + row * K;
        uint amax = 0u;
        for (uint c = 0u; c < K; c += uint(C)) {
            load_chunk(xr, c);
            for (int i = 0; i < C; ++i) amax = max(amax, floatBitsToUint(v[i]) & 0x7fffffffu);
        }
        // >= Inf bits: a non-finite value; max is exact in any order
        const uint so = pc.o_off + pc.scale_off + row;
        const uint s_bits = amax >= 0x7f800000u || amax == 0u ? 0u : scale_bits(amax);
        if (s_bits == 0u) { // all zeros; scale NaN (non-finite row) or 0
            for (uint w = 0u; w < wpr; ++w) o[ob + w] = 0u;
            o[so] = amax >= 0x7f800000u ? 0x7fc00000u : 0u;
            continue;
        }
        const float inv = uintBitsToFloat(inv_bits(s_bits));
        for (uint c = 0u; c < K; c += uint(C)) {
            load_chunk(xr, c);
            for (int i = 0; i < C; i += 4) {
                uint word = 0u;
                for (int b = 0; b < 4; ++b) {
                    precise float f = v[i + b] * inv;
                    word |= (uint(quant_value(f)) & 0xffu) << uint(8 * b);
                }
                o[ob + (c + uint(i)) / 4u] = word;
            }
        }
        o[so] = s_bits;
    }
}
