// common.glsl — shared by every shader: tensors by buffer device address, the per-dispatch
// parameter block (mirrors vk_params in vk-internal.h), element loads/stores with ggml's
// conversions (F16/BF16 stores round to nearest even exactly like ggml-types.cpp).

#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_shader_16bit_storage : require

// ggml_type values
#define T_F32  0
#define T_F16  1
#define T_I32  26
#define T_BF16 30

layout(buffer_reference, std430, buffer_reference_align = 4) buffer PF32 { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer PU32 { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer PF16 { float16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer PU16 { uint16_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer PI32 { int v[]; };

struct Tensor {
    uint64_t addr;
    uint     type;
    uint     pad;
    uint     ne[4];
    uint     nb[4]; // element strides
};

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Params {
    Tensor t[6];
    int    ip[16];
    float  fp[16];
};

layout(push_constant) uniform PC { Params p; } pc;

uint f32_to_f16_bits(float f) {
    const uint x    = floatBitsToUint(f);
    const uint sign = (x >> 16) & 0x8000u;
    const uint ax   = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return sign | 0x7E00u;
    if (ax >= 0x477FF000u) return sign | 0x7C00u;
    if (ax >= 0x38800000u) {
        const uint e   = (ax >> 23) - 127u + 15u;
        const uint m   = ax & 0x7FFFFFu;
        uint       h   = (e << 10) | (m >> 13);
        const uint rem = m & 0x1FFFu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) h++;
        return sign | h;
    }
    if (ax <= 0x33000000u) return sign;
    const uint e     = ax >> 23;
    const uint m     = (ax & 0x7FFFFFu) | 0x800000u;
    const uint shift = 126u - e;
    uint       h     = m >> shift;
    const uint rem   = m & ((1u << shift) - 1u);
    const uint half_ = 1u << (shift - 1u);
    if (rem > half_ || (rem == half_ && (h & 1u) != 0u)) h++;
    return sign | h;
}

uint f32_to_bf16_bits(float f) {
    const uint x = floatBitsToUint(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (x >> 16) | 0x40u;
    return (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
}

float ld(const Tensor t, uint i) {
    if (t.type == T_F32) return PF32(t.addr).v[i];
    if (t.type == T_F16) return float(PF16(t.addr).v[i]);
    if (t.type == T_BF16) return uintBitsToFloat(uint(PU16(t.addr).v[i]) << 16);
    return float(PI32(t.addr).v[i]);
}

void st(const Tensor t, uint i, float x) {
    if (t.type == T_F32) PF32(t.addr).v[i] = x;
    else if (t.type == T_F16) PU16(t.addr).v[i] = uint16_t(f32_to_f16_bits(x));
    else if (t.type == T_BF16) PU16(t.addr).v[i] = uint16_t(f32_to_bf16_bits(x));
    else PI32(t.addr).v[i] = int(x);
}

uint tsize(const Tensor t) { return (t.type == T_F16 || t.type == T_BF16) ? 2u : 4u; }

uint nelem(const Tensor t) { return t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]; }

// logical index -> coordinates (dimension 0 fastest)
uvec4 unravel(const Tensor t, uint i) {
    uvec4 c;
    c.x = i % t.ne[0]; i /= t.ne[0];
    c.y = i % t.ne[1]; i /= t.ne[1];
    c.z = i % t.ne[2];
    c.w = i / t.ne[2];
    return c;
}

uint off4(const Tensor t, uvec4 c) { return c.x * t.nb[0] + c.y * t.nb[1] + c.z * t.nb[2] + c.w * t.nb[3]; }

// 1-D dispatch over n items with a grid-stride loop: any group count is correct
#define GRID_LOOP(i, n) \
    for (uint i = gl_GlobalInvocationID.x; i < (n); i += gl_NumWorkGroups.x * gl_WorkGroupSize.x)
