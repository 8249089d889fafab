#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
// [[unroll]]: lavapipe counts every loop iteration an invocation runs against a cap of 65,535
// (then silently skips the rest); the constant inner loops must not count
#extension GL_EXT_control_flow_attributes : require
// linear_i8.comp — sd.linear_i8.v1's GEMM on I8 activations (packed ConvRot rows or plain I8
// with separate row scales): acc[r, o] = sum_k int32(a[r, k]) * int32(w[o, k]), an exact int32
// sum (K <= SD_LINEAR_I8_MAX_K), then the CPU epilogue in its order, each step rounded
// separately (precise: no multiply-add contraction):
//     y = float(acc) * sx[r];  y = y * sw[o];  y = y + b[o];  y = y * gate[o];  y = res[r, o] + y
// (steps whose operand is absent are skipped; gate and residual are the fused
// Linear -> Mul(gate) -> Add(residual) epilogue). The integer path is a plain int32
// multiply-add on bytes unpacked from 32-bit words (the toolchain has no integer dot product).
//
// Two GEMM loops, chosen by the specialization constant MODE (the epilogue is shared):
//   MODE 0 (the previous kernel, any device): each invocation computes a TR x TN tile (rows x
//     output channels) from 4-byte loads, no shared memory or barriers (lavapipe: a
//     synchronising workgroup costs ~0.25 ms). K % 4 == 0.
//   MODE 1 (CPU drivers with 8-wide subgroups, lavapipe): one workgroup = one subgroup of 8
//     lanes computing 8*RA rows x 8*TC channels. lavapipe turns each storage-buffer load into a
//     loop over the lanes (all components of one load share the loop), while arithmetic costs
//     one 8-lane vector instruction; so every load is 16 bytes (two 64-bit components: 16 int8
//     values) and each byte is loaded once per workgroup: lane l loads its TC weight rows
//     (channels o0 + l + 8 j) and activation row r0 + l + 8 i, unpacks them with vector shifts,
//     and subgroupBroadcast with a literal lane index (one extract + splat) hands every row's
//     values to all lanes. K % 16 == 0 and 16-byte aligned operand offsets (host-checked).
// Both sum the same int32 products (exact, any order gives the same result).
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
layout(constant_id = 8) const uint MODE     = 0u; // 0: 4x4 tiles per invocation; 1: subgroup broadcast
layout(constant_id = 9) const uint RA       = 2u; // MODE 1: row groups of 8 per workgroup
layout(constant_id = 10) const uint TC      = 2u; // MODE 1: channels per lane
// MODE 1: multiply-add in F32 over chunks of 1024 k values, each chunk's sum then added to the
// int32 accumulator. Exact: a product is at most 128 * 128 = 2^14 in magnitude, so every partial
// sum of a chunk is an integer of magnitude <= 2^24, which F32 represents exactly (an F32 fma
// is one vector instruction on lavapipe, an int32 multiply-add two).
layout(constant_id = 11) const bool FMAC    = false;

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
// MODE 1's 16-byte views of the same I8 bindings (offsets in 16-byte units)
layout(std430, binding = 0) readonly buffer W16 { u64vec2 w16[]; };
layout(std430, binding = 1) readonly buffer A16 { u64vec2 a16[]; };
layout(std430, binding = 8) readonly buffer WU16 { u64vec2 wu16[]; };

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

// The epilogue of one output (row r, channel o): the CPU kernels' order, each step rounded
void finish(uint r, uint o, int acc_v, int acc_uv) {
    const float s_x = sx[pc.sx_off + r];
    precise float v = float(acc_v) * s_x;
    if (HAS_WS) v = v * sw[pc.sw_off + o];
    if (HAS_BIAS) v = v + bias[pc.b_off + o];
    if (HAS_GATE) v = v * gate[pc.g_off + o];
    if (HAS_RES) v = res[pc.r_off + r * pc.N + o] + v;
    if (SWIGLU) {
        precise float u = float(acc_uv) * s_x;
        if (UP_WS) u = u * swu[pc.swu_off + o];
        if (UP_BIAS) u = u + bu[pc.bu_off + o];
        const float g = silu_native(v);
        precise float p = g * u;
        v = p;
    }
    y[pc.y_off + r * pc.N + o] = v;
}

void main_tile4() {
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
        for (uint j = 0u; j < TN; ++j) {
            const uint o = o0 + j;
            if (o >= pc.N) break;
            finish(r, o, acc[i][j], acc_u[i][j]);
        }
    }
}

// 16 signed bytes of a 16-byte load, little-endian
void unpack16(u64vec2 q, out int v[16]) {
    const uvec2 lo = unpackUint2x32(q.x), hi = unpackUint2x32(q.y);
    const uint  wd[4] = uint[4](lo.x, lo.y, hi.x, hi.y);
    [[unroll]] for (int i = 0; i < 4; i++) {
        const int x = int(wd[i]);
        v[4 * i + 0] = (x << 24) >> 24;
        v[4 * i + 1] = (x << 16) >> 24;
        v[4 * i + 2] = (x << 8) >> 24;
        v[4 * i + 3] = x >> 24;
    }
}

void main_sg() {
    const uint lane = gl_SubgroupInvocationID;
    const uint r0 = gl_WorkGroupID.y * 8u * RA, o0 = gl_WorkGroupID.x * 8u * TC;
    const uint qpr = pc.K / 16u; // 16-byte units per row
    // rows / channels past the end re-read the last one (always valid) and are not stored; no
    // lane leaves early (every load below runs with all 8 lanes active)
    uint ar[RA], wr[TC], ur[TC];
    [[unroll]] for (uint i = 0u; i < RA; ++i) ar[i] = pc.a_off / 4u + min(r0 + lane + 8u * i, pc.rows - 1u) * qpr;
    [[unroll]] for (uint j = 0u; j < TC; ++j) wr[j] = pc.w_off / 4u + min(o0 + lane + 8u * j, pc.N - 1u) * qpr;
    [[unroll]] for (uint j = 0u; j < TC; ++j) ur[j] = pc.wu_off / 4u + min(o0 + lane + 8u * j, pc.N - 1u) * qpr;

    int acc[8 * RA][TC], acc_u[8 * RA][TC];
    [[unroll]] for (uint i = 0u; i < 8u * RA; ++i)
        [[unroll]] for (uint j = 0u; j < TC; ++j) { acc[i][j] = 0; acc_u[i][j] = 0; }

    // F32 chunks of 64 steps (1024 k values, the exactness bound above); int32: one chunk
    const uint chunk = FMAC ? 64u : qpr;
    for (uint q0 = 0u; q0 < qpr; q0 += chunk) {
        float fa[8 * RA][TC], fu[8 * RA][TC];
        [[unroll]] for (uint i = 0u; i < 8u * RA; ++i)
            [[unroll]] for (uint j = 0u; j < TC; ++j) { fa[i][j] = 0.0; fu[i][j] = 0.0; }
        const uint q1 = min(q0 + chunk, qpr);
        for (uint q = q0; q < q1; ++q) {
            int av[RA][16], wv[TC][16], uv[TC][16];
            [[unroll]] for (uint i = 0u; i < RA; ++i) unpack16(a16[ar[i] + q], av[i]);
            [[unroll]] for (uint j = 0u; j < TC; ++j) unpack16(w16[wr[j] + q], wv[j]);
            if (SWIGLU)
                [[unroll]] for (uint j = 0u; j < TC; ++j) unpack16(wu16[ur[j] + q], uv[j]);
            if (FMAC) {
                float af[RA][16], wf[TC][16], uf[TC][16];
                [[unroll]] for (uint i = 0u; i < RA; ++i) [[unroll]] for (int kk = 0; kk < 16; kk++) af[i][kk] = float(av[i][kk]);
                [[unroll]] for (uint j = 0u; j < TC; ++j) [[unroll]] for (int kk = 0; kk < 16; kk++) wf[j][kk] = float(wv[j][kk]);
                if (SWIGLU)
                    [[unroll]] for (uint j = 0u; j < TC; ++j) [[unroll]] for (int kk = 0; kk < 16; kk++) uf[j][kk] = float(uv[j][kk]);
                [[unroll]] for (int kk = 0; kk < 16; kk++) {
#define ROWF(S)                                                                                          \
                    [[unroll]] for (uint i = 0u; i < RA; ++i) {                                          \
                        const float x = subgroupBroadcast(af[i][kk], S);                                 \
                        [[unroll]] for (uint j = 0u; j < TC; ++j) fa[8u * i + S][j] = fma(x, wf[j][kk], fa[8u * i + S][j]); \
                        if (SWIGLU)                                                                      \
                            [[unroll]] for (uint j = 0u; j < TC; ++j) fu[8u * i + S][j] = fma(x, uf[j][kk], fu[8u * i + S][j]); \
                    }
                    ROWF(0) ROWF(1) ROWF(2) ROWF(3) ROWF(4) ROWF(5) ROWF(6) ROWF(7)
#undef ROWF
                }
            } else {
                [[unroll]] for (int kk = 0; kk < 16; kk++) {
                    // literal lane indices: GLSL wants a constant, lavapipe makes it one extract
#define ROW(S)                                                                                  \
                    [[unroll]] for (uint i = 0u; i < RA; ++i) {                                 \
                        const int x = subgroupBroadcast(av[i][kk], S);                          \
                        [[unroll]] for (uint j = 0u; j < TC; ++j) acc[8u * i + S][j] += x * wv[j][kk]; \
                        if (SWIGLU)                                                             \
                            [[unroll]] for (uint j = 0u; j < TC; ++j) acc_u[8u * i + S][j] += x * uv[j][kk]; \
                    }
                    ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
#undef ROW
                }
            }
        }
        if (FMAC)
            [[unroll]] for (uint i = 0u; i < 8u * RA; ++i)
                [[unroll]] for (uint j = 0u; j < TC; ++j) {
                    acc[i][j] += int(fa[i][j]);
                    acc_u[i][j] += int(fu[i][j]);
                }
    }

    [[unroll]] for (uint j = 0u; j < TC; ++j) {
        const uint o = o0 + lane + 8u * j;
        if (o >= pc.N) continue;
        [[unroll]] for (uint i = 0u; i < RA; ++i)
            [[unroll]] for (uint s = 0u; s < 8u; ++s) {
                const uint r = r0 + 8u * i + s;
                if (r < pc.rows) finish(r, o, acc[8u * i + s][j], acc_u[8u * i + s][j]);
            }
    }
}

void main() {
    if (MODE == 1u) main_sg();
    else main_tile4();
}
