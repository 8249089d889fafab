#version 450
// rope_apply.comp — sd.rope_apply.v1, optionally fused after RMSNorm -> Mul(weight):
//     y = rms_norm(x) * w  (FUSED) or y = x,
//     out[i0] = y[i0] * pe0 + y[i1] * pe1,  out[i1] = y[i0] * pe2 + y[i1] * pe3
// for every rotated pair (i0, i1) = (2j, 2j+1) (interleaved) or (j, j + n_freq) (split-half),
// j < n_freq, with pe(.., j, l) the 2 x 2 rotation of position l; dims 2 * n_freq .. d-1 are
// copied. Products and the sum are rounded separately (precise), as on the CPU, so the
// standalone kernel is bit-identical to the CPU kernel.
//
// One subgroup per output row (a grid-stride loop over rows, no barriers). The fused RMS norm
// reproduces the native Vulkan RMS_NORM row reduction (ggml-vulkan rows.comp) operation for
// operation: lane-strided partial sums of x * x, subgroupAdd, 1 / sqrt(mean + eps), then x * scale
// stored as a float, then the separate weight multiply; so the fused chain equals the unfused
// native RMS_NORM -> MUL -> this kernel on the same device. These reduction expressions are
// deliberately not `precise`: they must be compiled like the native shader's.
//
// Bindings: 0 x (F32, rows at float strides xs1, xs2, xs3), 1 pe (F32 [2, 2, n_freq, L]
// contiguous), 2 w (F32 [d], FUSED only), 3 out (F32 [d, L, H * N] contiguous), 4 out as F16
// (F16OUT; the offsets are in elements of the bound type).
//
// One dispatch covers a box of cH x cL x cN rows (h, l, n) of the whole H x L x N: the host splits
// tensors larger than one binding window (maxStorageBufferRange, 128 MiB on lavapipe) into boxes
// and binds x and out from the box's first row (x_off, o_off) and pe from its first position
// (pe_off), so box-local indices address them; rows are independent, so boxes change no value.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_shader_16bit_storage : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int MODE  = 0;     // 0 interleaved, 1 split-half
layout(constant_id = 2) const bool FUSED = false;
// the fused tail: -> SCALE(s) (bias 0: one rounded product, as the native SCALE) -> CPY to F16
// (round to nearest even, the native conversion's NaN and overflow handling)
layout(constant_id = 3) const bool SCALE = false;
layout(constant_id = 4) const bool F16OUT = false;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer PE { float pe[]; };
layout(std430, binding = 2) readonly buffer WT { float w[]; };
layout(std430, binding = 3) writeonly buffer O { float o[]; };
layout(std430, binding = 4) writeonly buffer O16 { uint16_t o16[]; };

layout(push_constant) uniform PC {
    uint x_off, pe_off, w_off, o_off; // shader offsets, in floats
    uint d, H, L, N, n_freq;
    uint xs1, xs2, xs3;               // x strides in floats
    float eps;
    float scale;                      // SCALE
    uint cH, cL, cN;                  // this dispatch's box of rows
} pc;

// F32 -> F16 bits, round to nearest even; NaN -> sign | 0x7E00, overflow -> Inf, subnormals
// rounded (the conversion ggml's F32 -> F16 copy performs on the CPU and on Vulkan)
uint f16_bits(float f) {
    const uint x = floatBitsToUint(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u;
    if (ax >= 0x477ff000u) return sign | 0x7c00u; // rounds to or beyond 65520: Inf
    if (ax >= 0x38800000u) { // normal half
        uint       h   = (((ax >> 23) - 112u) << 10) | ((ax & 0x7fffffu) >> 13);
        const uint rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) h += 1u;
        return sign | h;
    }
    if (ax <= 0x33000000u) return sign; // at most half the smallest subnormal: zero
    const uint m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - (ax >> 23);
    uint       h = m >> shift;
    const uint rem = m & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
    if (rem > half_ || (rem == half_ && (h & 1u) != 0u)) h += 1u;
    return sign | h;
}

void store(uint at, float v) {
    float r = v;
    if (SCALE) { precise float t = pc.scale * v; r = t; }
    if (F16OUT) o16[at] = uint16_t(f16_bits(r));
    else o[at] = r;
}

float scale_v = 1.0;

// The normalised (and weighted) input of element i of the row at xr.
float y_of(uint xr, uint i) {
    if (!FUSED) return x[xr + i];
    const float r = x[xr + i] * scale_v; // the native RMS_NORM's stored value
    precise float v = r * w[pc.w_off + i]; // the native MUL
    return v;
}

void main() {
    const uint lane = gl_SubgroupInvocationID, sgs = gl_SubgroupSize;
    const uint rows = pc.cL * pc.cH * pc.cN;
    const uint d = pc.d, nf = pc.n_freq;
    for (uint row = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID; row < rows;
         row += gl_NumWorkGroups.x * gl_NumSubgroups) {
        // box-local (h, l, n); output row (h + H * n) * L + l from the box's first row
        const uint l = row % pc.cL, hn = row / pc.cL, h = hn % pc.cH, n = hn / pc.cH;
        const uint xr = pc.x_off + h * pc.xs1 + l * pc.xs2 + n * pc.xs3;
        const uint orow = pc.o_off + ((h + pc.H * n) * pc.L + l) * d;
        if (FUSED) {
            float sum = 0.0;
            for (uint j = lane; j < d; j += sgs) {
                const float v = x[xr + j];
                sum += v * v;
            }
            scale_v = 1.0 / sqrt(subgroupAdd(sum) / float(d) + pc.eps);
        }
        const uint pr = pc.pe_off + l * 4u * nf;
        for (uint j = lane; j < nf; j += sgs) {
            const uint i0 = MODE == 0 ? 2u * j : j;
            const uint i1 = MODE == 0 ? 2u * j + 1u : j + nf;
            const float y0 = y_of(xr, i0), y1 = y_of(xr, i1);
            const float p0 = pe[pr + 4u * j], p1 = pe[pr + 4u * j + 1u];
            const float p2 = pe[pr + 4u * j + 2u], p3 = pe[pr + 4u * j + 3u];
            precise float a0 = y0 * p0, b0 = y1 * p1;
            precise float a1 = y0 * p2, b1 = y1 * p3;
            precise float r0 = a0 + b0;
            precise float r1 = a1 + b1;
            store(orow + i0, r0);
            store(orow + i1, r1);
        }
        for (uint i = 2u * nf + lane; i < d; i += sgs) store(orow + i, y_of(xr, i));
    }
}
