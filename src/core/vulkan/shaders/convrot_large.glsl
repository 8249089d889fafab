// convrot_large.glsl — ConvRot groups above 256 values (G = 1024, 4096, 16384, ...: what
// convert-to-quant's dynamic mode writes), one subgroup per row, shared by
// quantize_i8_convrot.comp and modulation_quantize.comp.
//
// A group of G values is too long for one invocation's registers (and for 32 KiB of shared
// memory at G = 16384), so the row goes through a per-row F32 scratch row in device memory, the
// split of the CPU kernel (int8-convrot.cpp):
//   1. each lane rotates 256-value blocks of the row in registers (convrot.glsl with RG = 256:
//      the 1 / sqrt(G) scaling and stages 1, 4, 16, 64) and stores them to the scratch row;
//   2. the cross-block stages s = 256, 1024, ..., G / 4 run over the scratch row, each stage's
//      vec4 quartets spread over the lanes (lane l takes quartets l, l + sgs, ...); the last
//      stage also takes each lane's amax, and one subgroupMax makes it the row's;
//   3. the lanes quantize the scratch row word by word.
// Every stage applies the scalar definition's float operations to the same operands in the same
// order (precise), so the values, the amax, the scale and the bytes are the CPU's bit for bit,
// whatever lane computes what. Between the phases the lanes exchange values through the scratch
// row: a subgroup memory barrier plus a subgroup control barrier (the buffer is coherent).
//
// Loop counts per lane (lavapipe stops an invocation's loops after 65,535 iterations in total):
// about K / (256 sgs) blocks of ~3 V iterations, K / (16 sgs) per cross-block stage and K / (4 sgs)
// for the packing; the host (int8.cpp, sd_vulkan_quant_lane_iterations) declines rows above its
// budget.
//
// The including shader declares G, includes convrot.glsl, and declares the scratch buffer
// `coherent buffer T { float t[]; }`, the output `writeonly buffer O { uint o[]; }` and the row
// scales `writeonly buffer S { uint sc[]; }` (a binding of its own: the host binds a window of
// rows of each, see int8.cpp).

vec4 scratch_load(uint b) { return vec4(t[b], t[b + 1u], t[b + 2u], t[b + 3u]); }

void scratch_store(uint b, vec4 a) {
    t[b] = a.x;
    t[b + 1u] = a.y;
    t[b + 2u] = a.z;
    t[b + 3u] = a.w;
}

// Phase 1's store: the rotated step (one 256-value block, V = 64 vec4) at scratch float tb.
void store_block(uint tb) {
    [[dont_unroll]] for (int i = 0; i < V; ++i) scratch_store(tb + uint(4 * i), v[i]);
}

// Makes the lanes' scratch writes visible to the whole subgroup before any lane reads them.
void scratch_sync() {
    subgroupMemoryBarrierBuffer();
    subgroupBarrier();
}

// Phase 2: stages s = 256 .. G / 4 over the row's K values at scratch float tr (groups of G
// tile the row, so blocks of 4 s never straddle a group). Returns this lane's amax (float bits)
// of the values it wrote in the last stage: every value is written by exactly one lane there.
uint cross_block_stages(uint tr, uint K, uint lane, uint sgs) {
    uint       amax = 0u;
    const uint nq   = K / 16u; // vec4 quartets per stage
    [[dont_unroll]] for (uint s = 256u; s < uint(G); s *= 4u) {
        scratch_sync();
        const uint s4   = s / 4u; // the quartet's stride in vec4
        const bool last = s * 4u == uint(G);
        for (uint q = lane; q < nq; q += sgs) {
            const uint   b = tr + 4u * ((q / s4) * 4u * s4 + q % s4);
            const vec4   a = scratch_load(b), c1 = scratch_load(b + s), c2 = scratch_load(b + 2u * s),
                       c3 = scratch_load(b + 3u * s);
            precise vec4 o0 = a + c1 + c2 - c3;
            precise vec4 o1 = a + c1 - c2 + c3;
            precise vec4 o2 = a - c1 + c2 + c3;
            precise vec4 o3 = -a + c1 + c2 + c3;
            scratch_store(b, o0);
            scratch_store(b + s, o1);
            scratch_store(b + 2u * s, o2);
            scratch_store(b + 3u * s, o3);
            if (last) amax = max(amax, max(max(vec4_amax(o0), vec4_amax(o1)), max(vec4_amax(o2), vec4_amax(o3))));
        }
    }
    scratch_sync();
    return amax;
}

// Phase 3: the row's packed words (at word ob of O) and its scale (word so of S) from the rotated scratch
// row and the row's amax bits (the subgroup's; >= Inf bits: a non-finite value).
void quantize_scratch_row(uint tr, uint ob, uint so, uint K, uint lane, uint sgs, uint amax) {
    const uint wpr = K / 4u;
    // amax / 127 rounding to zero is the CPU's s == 0 row
    const uint s_bits = amax >= 0x7f800000u || amax == 0u ? 0u : scale_bits(amax);
    if (s_bits == 0u) { // all zeros; scale NaN (non-finite row) or 0
        for (uint w = lane; w < wpr; w += sgs) o[ob + w] = 0u;
        if (lane == 0u) sc[so] = amax >= 0x7f800000u ? 0x7fc00000u : 0u;
        return;
    }
    const float inv = uintBitsToFloat(inv_bits(s_bits));
    for (uint w = lane; w < wpr; w += sgs) o[ob + w] = pack_word(scratch_load(tr + 4u * w), inv);
    if (lane == 0u) sc[so] = s_bits;
}
