#version 450
// linear_i8.comp — sd.linear_i8.v1's GEMM on I8 activations (packed ConvRot rows or plain I8
// with separate row scales): acc[r, o] = sum_k int32(a[r, k]) * int32(w[o, k]), an exact int32
// sum (K <= SD_LINEAR_I8_MAX_K), then the CPU epilogue in its order, each step rounded
// separately (precise: no multiply-add contraction):
//     y = float(acc) * sx[r];  y = y * sw[o];  y = y + b[o];  y = y * gate[o];  y = res[r, o] + y
// (steps whose operand is absent are skipped; gate and residual are the fused
// Linear -> Mul(gate) -> Add(residual) epilogue). The integer path is a plain int32
// multiply-add on bytes unpacked from 32-bit words (the toolchain has no integer dot product).
//
// Each invocation computes a TR x TN tile (rows x output channels) with no shared memory or
// barriers (lavapipe: a synchronising workgroup costs ~0.25 ms). K % 4 == 0.
//
// Bindings: 0 w (N x K bytes as words), 1 a (rows x K bytes as words), 2 sx (F32 per row),
// 3 sw (F32 per channel), 4 bias, 5 y (F32 rows x N), 6 gate (F32 per channel), 7 residual
// (F32 rows x N, may be exactly y), 8 the up weight, 9 its scales, 10 its bias (SWIGLU).
// Absent operands are bound to any valid range, never read.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool HAS_WS   = true;
layout(constant_id = 2) const bool HAS_BIAS = false;
layout(constant_id = 3) const bool HAS_GATE = false;
layout(constant_id = 4) const bool HAS_RES  = false;
// SwiGLU: a second GEMM (the up projection: bindings 8..10) on the same activations, and
// y = silu(gate) * up with the native SILU's formula (ggml-vulkan math.glsl) and one rounded MUL
layout(constant_id = 5) const bool SWIGLU   = false;
layout(constant_id = 6) const bool UP_WS    = true;
layout(constant_id = 7) const bool UP_BIAS  = false;

// SwiGLU keeps two accumulator sets: half as many channels per invocation (register pressure)
const uint TR = 4u, TN = SWIGLU ? 2u : 4u;

layout(std430, binding = 0) readonly buffer W { uint w[]; };
layout(std430, binding = 1) readonly buffer A { uint a[]; };
layout(std430, binding = 2) readonly buffer SX { float sx[]; };
layout(std430, binding = 3) readonly buffer SW { float sw[]; };
layout(std430, binding = 4) readonly buffer B { float bias[]; };
layout(std430, binding = 5) buffer Y { float y[]; };
layout(std430, binding = 6) readonly buffer GT { float gate[]; };
layout(std430, binding = 7) readonly buffer R { float res[]; };
layout(std430, binding = 8) readonly buffer WU { uint wu[]; };
layout(std430, binding = 9) readonly buffer SWU { float swu[]; };
layout(std430, binding = 10) readonly buffer BU { float bu[]; };

layout(push_constant) uniform PC {
    uint w_off, a_off, sx_off, sw_off, b_off, y_off, g_off, r_off; // shader offsets, in words
    uint K, N, rows;
    uint n_tiles; // ceil(N / TN)
    uint wu_off, swu_off, bu_off;
} pc;

// the native Vulkan SILU (ggml-vulkan math.glsl: sigmoid with the CPU's two branches, then the
// gate product with its -0 for a zero gate), expression for expression
float sigmoid_native(float x) {
    if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
    const float e = exp(x);
    return e / (1.0 + e);
}
float silu_native(float x) {
    const float s = sigmoid_native(x);
    return s == 0.0 ? -0.0 : x * s;
}

ivec4 unpack_i8(uint word) {
    return ivec4(bitfieldExtract(int(word), 0, 8), bitfieldExtract(int(word), 8, 8),
                 bitfieldExtract(int(word), 16, 8), bitfieldExtract(int(word), 24, 8));
}

int dot4(ivec4 p, ivec4 q) { return p.x * q.x + p.y * q.y + p.z * q.z + p.w * q.w; }

void main() {
    // the workgroups form an (x, y) grid when one dimension's count limit is too small
    const uint t  = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * gl_WorkGroupSize.x +
                   gl_LocalInvocationID.x;
    const uint tn = t % pc.n_tiles, tr = t / pc.n_tiles;
    const uint r0 = tr * TR, o0 = tn * TN;
    if (r0 >= pc.rows) return;
    const uint wpr = pc.K / 4u;

    // rows / channels past the end read row / channel 0 again (always valid) and are not stored
    uint ar[TR], wr[TN], ur[TN];
    for (uint i = 0u; i < TR; ++i) ar[i] = pc.a_off + (r0 + i < pc.rows ? r0 + i : 0u) * wpr;
    for (uint j = 0u; j < TN; ++j) wr[j] = pc.w_off + (o0 + j < pc.N ? o0 + j : 0u) * wpr;
    for (uint j = 0u; j < TN; ++j) ur[j] = pc.wu_off + (o0 + j < pc.N ? o0 + j : 0u) * wpr;

    int acc[TR][TN], acc_u[TR][TN];
    for (uint i = 0u; i < TR; ++i)
        for (uint j = 0u; j < TN; ++j) { acc[i][j] = 0; acc_u[i][j] = 0; }

    for (uint k = 0u; k < wpr; ++k) {
        ivec4 av[TR], wv[TN];
        for (uint i = 0u; i < TR; ++i) av[i] = unpack_i8(a[ar[i] + k]);
        for (uint j = 0u; j < TN; ++j) wv[j] = unpack_i8(w[wr[j] + k]);
        for (uint i = 0u; i < TR; ++i)
            for (uint j = 0u; j < TN; ++j) acc[i][j] += dot4(av[i], wv[j]);
        if (SWIGLU) {
            for (uint j = 0u; j < TN; ++j) wv[j] = unpack_i8(wu[ur[j] + k]);
            for (uint i = 0u; i < TR; ++i)
                for (uint j = 0u; j < TN; ++j) acc_u[i][j] += dot4(av[i], wv[j]);
        }
    }

    for (uint i = 0u; i < TR; ++i) {
        const uint r = r0 + i;
        if (r >= pc.rows) break;
        const float s_x = sx[pc.sx_off + r];
        for (uint j = 0u; j < TN; ++j) {
            const uint o = o0 + j;
            if (o >= pc.N) break;
            precise float v = float(acc[i][j]) * s_x;
            if (HAS_WS) v = v * sw[pc.sw_off + o];
            if (HAS_BIAS) v = v + bias[pc.b_off + o];
            if (HAS_GATE) v = v * gate[pc.g_off + o];
            if (HAS_RES) v = res[pc.r_off + r * pc.N + o] + v;
            if (SWIGLU) {
                precise float u = float(acc_u[i][j]) * s_x;
                if (UP_WS) u = u * swu[pc.swu_off + o];
                if (UP_BIAS) u = u + bu[pc.bu_off + o];
                const float g = silu_native(v);
                precise float p = g * u;
                v = p;
            }
            y[pc.y_off + r * pc.N + o] = v;
        }
    }
}
