// convrot.glsl — the ConvRot rotation of one group (regular Hadamard, G = 1, 4, 16, 64 or 256
// values) in one invocation's registers, shared by quantize_i8_convrot.comp and
// modulation_quantize.comp. The including shader declares the specialization constant G first.
// A larger group (G = 1024, 4096, ...) uses the 256-value part here for each of its 256-value
// blocks (the 1 / sqrt(G) scaling and stages 1..64, exactly the CPU's split) and finishes the
// cross-block stages in memory (convrot_large.glsl).
//
// Why vec4: the facts sheet's butterfly at stride s >= 4 pairs whole runs of 4 consecutive values
// (the quartet (j, j+s, j+2s, j+3s) for j, j+1, j+2, j+3 are four independent quartets), so a
// stage is V/4 vec4 quartets, and stage s = 1 is one quartet inside each vec4. Every component
// goes through exactly the scalar definition's float operations in the same order (precise: no
// contraction or reassociation), so the result is bit-identical to the CPU kernels; and a group
// costs about 2.75 * V loop iterations instead of ~4 * G, which matters because lavapipe caps
// the loop iterations of an invocation (see quantize_i8_convrot.comp).

const int RG = G > 256 ? 256 : G;    // values rotated in registers (a block of a larger group)
const int VG = RG < 4 ? 1 : RG / 4;  // vec4 per register block
const int V  = RG < 16 ? 4 : RG / 4; // vec4 per step: whole blocks, at least 16 values (fewer
                                     // loop iterations per value for the small groups)
const int C  = 4 * V;                // values per step

vec4 v[V];

// Stage s = 1 of vec4 i, after the 1 / sqrt(G) scaling (first, in single precision).
void rotate_first(int i, float gscale) {
    if (G == 1) return;
    precise vec4 t  = v[i] * gscale;
    precise float o0 = t.x + t.y + t.z - t.w;
    precise float o1 = t.x + t.y - t.z + t.w;
    precise float o2 = t.x - t.y + t.z + t.w;
    precise float o3 = -t.x + t.y + t.z + t.w;
    v[i] = vec4(o0, o1, o2, o3);
}

// Stages s = 4, 16, 64 (s4 = s / 4 = 1, 4, 16 vec4 apart; blocks of 4 * s4 vec4, which tile the
// step's groups).
void rotate_rest() {
    [[dont_unroll]] for (int s4 = 1; s4 < VG; s4 *= 4) {
        [[dont_unroll]] for (int i = 0; i < V / 4; ++i) {
            const int   p = (i / s4) * 4 * s4 + i % s4;
            const vec4  a = v[p], b = v[p + s4], c = v[p + 2 * s4], d = v[p + 3 * s4];
            precise vec4 o0 = a + b + c - d;
            precise vec4 o1 = a + b - c + d;
            precise vec4 o2 = a - b + c + d;
            precise vec4 o3 = -a + b + c + d;
            v[p] = o0; v[p + s4] = o1; v[p + 2 * s4] = o2; v[p + 3 * s4] = o3;
        }
    }
}

// max |value| of the step as float bits (for non-negative floats the integer order is the float
// order; NaN bits are above +Inf's, so a result >= 0x7f800000 means a non-finite value)
uint step_amax() {
    uint m = 0u;
    [[dont_unroll]] for (int i = 0; i < V; ++i) {
        const uvec4 a = floatBitsToUint(v[i]) & uvec4(0x7fffffffu);
        m = max(m, max(max(a.x, a.y), max(a.z, a.w)));
    }
    return m;
}

// four values quantized with the row's inverse scale, packed little endian into one word
uint pack_word(vec4 a, float inv) {
    precise vec4 f = a * inv;
    return (uint(quant_value(f.x)) & 0xffu) | ((uint(quant_value(f.y)) & 0xffu) << 8) |
           ((uint(quant_value(f.z)) & 0xffu) << 16) | ((uint(quant_value(f.w)) & 0xffu) << 24);
}

// vec4 i quantized with the row's inverse scale, packed little endian into one word
uint step_word(int i, float inv) { return pack_word(v[i], inv); }

// max |value| of four values as float bits (see step_amax)
uint vec4_amax(vec4 a) {
    const uvec4 b = floatBitsToUint(a) & uvec4(0x7fffffffu);
    return max(max(b.x, b.y), max(b.z, b.w));
}
