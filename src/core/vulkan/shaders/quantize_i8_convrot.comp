#version 450
// quantize_i8_convrot.comp — sd.quantize_i8_convrot.v1: rotates (regular Hadamard, groups of
// G = 4^n values) and quantizes rows, with the CPU portable kernel's operation order
// (int8-convrot-facts.md), so bytes and scales are bit-identical.
//
// One subgroup per row: lane l takes the row's groups l, l + sgs, l + 2 sgs, ... (convrot.glsl
// rotates one group in registers). Pass 1 takes each lane's amax of its rotated groups, one
// subgroupMax makes it the row's (max is exact in any order, so the scale is the CPU's); pass 2
// rotates again and quantizes (no per-row scratch). No shared memory and no barrier: lavapipe
// charges ~0.25 ms per workgroup that synchronises.
//
// Why not one row per invocation (the former shape): lavapipe's gallivm stops an invocation's
// loops, silently, once they have run 65,535 iterations in total (one loop limiter per shader
// invocation, shared by all its loops), and a whole row of K = 8192 took more than that; the
// tail of the row was never written. Spread over a subgroup, an invocation runs about
// 2 * 2.75 * (G / 4) iterations per group it owns; the host (int8.cpp, quant_lane_iterations)
// declines rows whose estimate exceeds a budget far below the cap (the CPU then runs the node).
//
// Groups above 256 (G = 1024, 4096, ...) go through a scratch row in device memory
// (convrot_large.glsl: blocks of 256 rotated in registers, the cross-block stages spread over the
// lanes, then the packing), same bytes as the CPU.
//
// Rows are visited with a grid-stride loop over subgroups, so any subgroup size the driver picks
// is correct; the host launches one subgroup per row at the device's subgroup size. Subgroups
// past the last row write the zero padding rows up to pad4(rows).
//
// The host may split the rows over several dispatches (rows [row0, row_end) in one) and binds
// only that dispatch's rows of each row-wise tensor (a storage-buffer binding spans at most
// maxStorageBufferRange, 128 MiB on lavapipe): row r sits at local row r - row0 of the x, out,
// scale and scratch windows.
//
// Bindings: 0 x (F32 rows of K), 1 out (the packed rows as 32-bit words), 2 the scratch rows
// (G > 256 only; any range otherwise), 3 the packed tensor's F32 row scales (as words).
// K % max(G, 4) == 0.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
#include "int8_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int G = 256; // a power of 4

#include "convrot.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer O { uint o[]; };
layout(std430, binding = 2) coherent buffer T { float t[]; };
layout(std430, binding = 3) writeonly buffer S { uint sc[]; };

layout(push_constant) uniform PC {
    uint x_off;     // in floats (the binding's shader_offset / 4): local row 0 of x
    uint o_off;     // in words: local row 0 of the packed rows
    uint K;
    uint rows;
    uint prows;     // pad4(rows)
    uint s_off;     // in words: local row 0's scale in binding 3
    float gscale;   // 1 / sqrt(G), computed on the host like the CPU kernel
    uint row0;      // this dispatch's rows: [row0, row_end) of pad4(rows)
    uint row_end;
    uint t_off;     // the scratch rows (G > 256), in floats
} pc;

#include "convrot_large.glsl"

// Loads and rotates the step of C values starting at column c of the row at xb; columns past K
// (a ragged last step, G < 16 only: K is a multiple of G and of 4) load as zeros.
void load_step(uint xb, uint c) {
    [[dont_unroll]] for (int i = 0; i < V; ++i) {
        const uint col = c + uint(4 * i), b = xb + col;
        v[i] = col < pc.K ? vec4(x[b], x[b + 1u], x[b + 2u], x[b + 3u]) : vec4(0.0);
        rotate_first(i, pc.gscale);
    }
    rotate_rest();
}

void main() {
    const uint lane = gl_SubgroupInvocationID, sgs = gl_SubgroupSize;
    const uint K = pc.K, wpr = K / 4u; // words per row
    const uint first = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_NumSubgroups + gl_SubgroupID;
    const uint stride = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumSubgroups;
    for (uint r = pc.row0 + first; r < pc.row_end; r += stride) {
        const uint lr = r - pc.row0; // the row in this dispatch's windows
        const uint ob = pc.o_off + lr * wpr;
        if (r >= pc.rows) { // zero padding row
            for (uint w = lane; w < wpr; w += sgs) o[ob + w] = 0u;
            continue;
        }
        const uint xb = pc.x_off + lr * K;
        const uint so = pc.s_off + lr;

        if (G > 256) { // a scratch row: 256-value blocks, the cross-block stages, the packing
            const uint tr = pc.t_off + lr * K;
            for (uint c = lane * uint(C); c < K; c += sgs * uint(C)) {
                load_step(xb, c);
                store_block(tr + c);
            }
            const uint amax = subgroupMax(cross_block_stages(tr, K, lane, sgs));
            quantize_scratch_row(tr, ob, so, K, lane, sgs, amax);
            continue;
        }

        // pass 1: this lane's amax, then the row's (>= Inf bits: a non-finite value)
        uint amax = 0u;
        for (uint c = lane * uint(C); c < K; c += sgs * uint(C)) {
            load_step(xb, c);
            amax = max(amax, step_amax());
        }
        amax = subgroupMax(amax);
        // amax / 127 rounding to zero is the CPU's s == 0 row
        const uint s_bits = amax >= 0x7f800000u || amax == 0u ? 0u : scale_bits(amax);
        if (s_bits == 0u) { // all zeros; scale NaN (non-finite row) or 0
            for (uint w = lane; w < wpr; w += sgs) o[ob + w] = 0u;
            if (lane == 0u) sc[so] = amax >= 0x7f800000u ? 0x7fc00000u : 0u;
            continue;
        }
        const float inv = uintBitsToFloat(inv_bits(s_bits));

        // pass 2: rotate again, quantize, pack four bytes per word (little endian)
        for (uint c = lane * uint(C); c < K; c += sgs * uint(C)) {
            load_step(xb, c);
            const uint wb = ob + c / 4u;
            [[dont_unroll]] for (int i = 0; i < V; ++i)
                if (c / 4u + uint(i) < wpr) o[wb + uint(i)] = step_word(i, inv);
        }
        if (lane == 0u) sc[so] = s_bits;
    }
}
