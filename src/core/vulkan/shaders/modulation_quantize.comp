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
// One subgroup per row (a grid-stride loop over subgroups, so any subgroup size is correct): the
// lanes share the norm's reduction like the native RMS_NORM, then lane l rotates and quantizes
// the row's groups l, l + sgs, ... (convrot.glsl), and a subgroupMax gives the row's amax, as in
// quantize_i8_convrot.comp. Nothing loops over a whole row in one invocation: lavapipe silently
// stops an invocation's loops after 65,535 iterations in total (see quantize_i8_convrot.comp;
// the host, norm_quant.cpp, declines rows over its iteration budget). Padding rows are written
// as zeros. Groups above 256 go through a scratch row (convrot_large.glsl), rows [row0, row_end)
// per dispatch, as in quantize_i8_convrot.comp.
//
// Bindings: 0 x (F32 contiguous rows of K), 1 w1, 2 mod_scale, 3 shift (F32 [K] each), 4 out (the
// packed rows as 32-bit words), 5 the scratch rows (G > 256 only; any range otherwise), 6 the
// packed tensor's F32 row scales (as words). The host binds only one dispatch's rows [row0,
// row_end) of x, out, the scales and the scratch (binding windows are limited): row r sits at
// local row r - row0 of each.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#include "int8_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int G = 256; // a power of 4

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W1 { float w1[]; };
layout(std430, binding = 2) readonly buffer MS { float ms[]; };
layout(std430, binding = 3) readonly buffer SH { float sh[]; };
layout(std430, binding = 4) writeonly buffer O { uint o[]; };
layout(std430, binding = 5) coherent buffer T { float t[]; };
layout(std430, binding = 6) writeonly buffer S { uint sc[]; };

layout(push_constant) uniform PC {
    uint x_off, w_off, ms_off, sh_off, o_off; // shader offsets, in words (x, o: local row 0)
    uint K, rows, prows, s_off;               // s_off: local row 0's scale in binding 6, in words
    float gscale; // 1 / sqrt(G)
    float eps;
    uint row0, row_end; // this dispatch's rows of pad4(rows)
    uint t_off;         // the scratch rows (G > 256), in floats
} pc;

#include "convrot.glsl"
#include "convrot_large.glsl"

float norm_scale = 1.0;

float value_of(uint xr, uint i) {
    const float r = x[xr + i] * norm_scale;      // native RMS_NORM's stored value
    precise float h = r * w1[pc.w_off + i];       // MUL(w1)
    precise float t = h * ms[pc.ms_off + i];      // MUL(mod_scale)
    precise float a = h + t;                      // ADD
    precise float y = a + sh[pc.sh_off + i];      // ADD(shift)
    return y;
}

// The modulated values of the step starting at column c of the row at xr, rotated; columns past
// K (a ragged last step, G < 16 only) are zeros.
void load_step(uint xr, uint c) {
    [[dont_unroll]] for (int i = 0; i < V; ++i) {
        const uint b = c + uint(4 * i);
        v[i] = b < pc.K ? vec4(value_of(xr, b), value_of(xr, b + 1u), value_of(xr, b + 2u), value_of(xr, b + 3u))
                        : vec4(0.0);
        rotate_first(i, pc.gscale);
    }
    rotate_rest();
}

void main() {
    const uint lane = gl_SubgroupInvocationID, sgs = gl_SubgroupSize;
    const uint K = pc.K, wpr = K / 4u;
    const uint first = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_NumSubgroups + gl_SubgroupID;
    const uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumSubgroups;
    for (uint row = pc.row0 + first; row < pc.row_end; row += stride) {
        const uint lr = row - pc.row0; // the row in this dispatch's windows
        const uint ob = pc.o_off + lr * wpr;
        if (row >= pc.rows) { // zero padding row
            for (uint w = lane; w < wpr; w += sgs) o[ob + w] = 0u;
            continue;
        }
        const uint xr = pc.x_off + lr * K;
        // the native RMS_NORM's reduction (deliberately not precise: compiled like the native one)
        float sum = 0.0;
        for (uint j = lane; j < K; j += sgs) {
            const float e = x[xr + j];
            sum += e * e;
        }
        norm_scale = 1.0 / sqrt(subgroupAdd(sum) / float(K) + pc.eps);
        const uint so = pc.s_off + lr;

        if (G > 256) { // a scratch row: 256-value blocks, the cross-block stages, the packing
            const uint tr = pc.t_off + lr * K;
            for (uint c = lane * uint(C); c < K; c += sgs * uint(C)) {
                load_step(xr, c);
                store_block(tr + c);
            }
            const uint amax = subgroupMax(cross_block_stages(tr, K, lane, sgs));
            quantize_scratch_row(tr, ob, so, K, lane, sgs, amax);
            continue;
        }

        uint amax = 0u;
        for (uint c = lane * uint(C); c < K; c += sgs * uint(C)) {
            load_step(xr, c);
            amax = max(amax, step_amax());
        }
        amax = subgroupMax(amax);
        // >= Inf bits: a non-finite value; max is exact in any order
        const uint s_bits = amax >= 0x7f800000u || amax == 0u ? 0u : scale_bits(amax);
        if (s_bits == 0u) { // all zeros; scale NaN (non-finite row) or 0
            for (uint w = lane; w < wpr; w += sgs) o[ob + w] = 0u;
            if (lane == 0u) sc[so] = amax >= 0x7f800000u ? 0x7fc00000u : 0u;
            continue;
        }
        const float inv = uintBitsToFloat(inv_bits(s_bits));
        for (uint c = lane * uint(C); c < K; c += sgs * uint(C)) {
            load_step(xr, c);
            const uint wb = ob + c / 4u;
            [[dont_unroll]] for (int i = 0; i < V; ++i)
                if (c / 4u + uint(i) < wpr) o[wb + uint(i)] = step_word(i, inv);
        }
        if (lane == 0u) sc[so] = s_bits;
    }
}
