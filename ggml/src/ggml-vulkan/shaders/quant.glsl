// quant.glsl — decoding ggml's block-quantized types (layouts: ggml/src/ggml-common.h) from a
// buffer device address. Blocks are 18, 20, 22, 24, 34, 144, 176 or 210 bytes, so a block (and a
// row of blocks) is only guaranteed 2-byte aligned: every load here is a 16-bit load
// (GL_EXT_shader_16bit_storage, which the backend requires anyway); 32-bit words are assembled
// from two halves, bytes are shifted out of a half. Quantized tensors carry BYTE strides in
// Tensor.nb (vk-ops-quant.cpp), not element strides.
//
// Users enable GL_EXT_control_flow_attributes ([[unroll]]: lavapipe caps loop iterations).
//
// Two decoders:
// * q_elem: one element, computed with exactly the operations (and roundings) of the library's
//   dequantizers (ggml-quants.cpp, compiled with -ffp-contract=off): get_rows / cpy must be
//   bit-identical to the CPU. `precise` forbids the driver to fuse d * q + m into an fma.
// * q_unit: 8 weights (two runs of 4 consecutive elements, each run with one scale a and offset b:
//   w = a * q + b) for the GEMM, from two 32-bit words of quants: the GEMM walks a row unit by unit
//   and multiplies each weight with the activations of TN columns.

#define T_Q4_0 2
#define T_Q4_1 3
#define T_Q5_0 6
#define T_Q5_1 7
#define T_Q8_0 8
#define T_Q4_K 12
#define T_Q5_K 13
#define T_Q6_K 14

uint q_block_bytes(const int t) {
    if (t == T_Q4_0) return 18u;
    if (t == T_Q4_1) return 20u;
    if (t == T_Q5_0) return 22u;
    if (t == T_Q5_1) return 24u;
    if (t == T_Q8_0) return 34u;
    if (t == T_Q4_K) return 144u;
    if (t == T_Q5_K) return 176u;
    return 210u; // Q6_K
}
uint q_block_elems(const int t) { return (t == T_Q4_K || t == T_Q5_K || t == T_Q6_K) ? 256u : 32u; }

// o: byte offset from addr; o even for the 16-bit and 32-bit loads
uint q_u16(uint64_t addr, uint o) { return uint(PU16(addr).v[o >> 1]); }
uint q_u32(uint64_t addr, uint o) { return q_u16(addr, o) | (q_u16(addr, o + 2u) << 16); }
uint q_u8(uint64_t addr, uint o) { return (q_u16(addr, o & ~1u) >> ((o & 1u) * 8u)) & 0xFFu; }
float q_f16(uint64_t addr, uint o) { return float(PF16(addr).v[o >> 1]); }

// Q4_K / Q5_K: 6-bit scale and min of sub-block j (0..7) from the 12 scale bytes at o
// (get_scale_min_k4 in ggml-quants.cpp)
uvec2 q_scale_min_k4(uint64_t addr, uint o, uint j) {
    if (j < 4u) return uvec2(q_u8(addr, o + j) & 63u, q_u8(addr, o + j + 4u) & 63u);
    const uint b = q_u8(addr, o + j + 4u);
    return uvec2((b & 0xFu) | ((q_u8(addr, o + j - 4u) >> 6) << 4), (b >> 4) | ((q_u8(addr, o + j) >> 6) << 4));
}

// Element k of the row whose first block starts at byte ro: the dequantizers' arithmetic.
float q_elem(const int t, uint64_t addr, uint ro, uint k) {
    const uint nb = q_block_elems(t);
    const uint bo = ro + (k / nb) * q_block_bytes(t);
    const uint j  = k % nb;
    precise float r;
    if (t == T_Q4_0 || t == T_Q4_1 || t == T_Q5_0 || t == T_Q5_1) {
        const bool has_m = t == T_Q4_1 || t == T_Q5_1;
        const bool five  = t == T_Q5_0 || t == T_Q5_1;
        const uint qs    = bo + (has_m ? 4u : 2u) + (five ? 4u : 0u);
        const uint byte  = q_u8(addr, qs + (j % 16u));
        uint       q     = j < 16u ? (byte & 0xFu) : (byte >> 4);
        if (five) q |= ((q_u32(addr, bo + (has_m ? 4u : 2u)) >> j) & 1u) << 4;
        const float d = q_f16(addr, bo);
        if (has_m) {
            precise float p = float(q) * d;
            r = p + q_f16(addr, bo + 2u);
        } else {
            r = float(int(q) - (five ? 16 : 8)) * d;
        }
    } else if (t == T_Q8_0) {
        const int q = (int(q_u8(addr, bo + 2u + j)) << 24) >> 24;
        r = float(q) * q_f16(addr, bo);
    } else if (t == T_Q4_K || t == T_Q5_K) {
        const uint  sub = j / 32u; // sub-block of 32: its scale / min
        const uvec2 sm  = q_scale_min_k4(addr, bo + 4u, sub);
        const uint  qs  = bo + (t == T_Q5_K ? 48u : 16u);
        // byte l of 64-element chunk c holds element 64c + l (low nibble) and 64c + 32 + l (high)
        const uint  byte = q_u8(addr, qs + 32u * (j / 64u) + (j % 32u));
        uint        q    = (sub & 1u) == 0u ? (byte & 0xFu) : (byte >> 4);
        if (t == T_Q5_K) q |= ((q_u8(addr, bo + 16u + (j % 32u)) >> sub) & 1u) << 4; // bit j/32 of qh[j%32]
        precise float dl = q_f16(addr, bo) * float(sm.x);
        precise float ml = q_f16(addr, bo + 2u) * float(sm.y);
        precise float p  = dl * float(q);
        r = p - ml;
    } else { // Q6_K: ql[128] qh[64] scales[16] (int8) d
        const uint c = j / 128u, kq = (j % 128u) / 32u, l = j % 32u;
        const uint lo = (q_u8(addr, bo + 64u * c + l + 32u * (kq & 1u)) >> (4u * (kq >> 1))) & 0xFu;
        const uint hi = (q_u8(addr, bo + 128u + 32u * c + l) >> (2u * kq)) & 3u;
        const int  sc = (int(q_u8(addr, bo + 192u + j / 16u)) << 24) >> 24;
        precise float dl = q_f16(addr, bo + 208u) * float(sc);
        r = dl * float(int(lo | (hi << 4)) - 32);
    }
    return r;
}

// One GEMM unit: units of a row are numbered u = 0 .. K/8 - 1. Unit u holds 8 weights: w[0..3]
// are elements k.x + 0..3, w[4..7] elements k.y + 0..3 (the pairing follows each layout's nibble /
// byte order so that the quants of a unit are two 32-bit words or one).
struct qunit {
    float w[8];
    uvec2 k;
};

// q: 4 bytes of quants in a word -> 4 floats a * q + b (the fma rounding is fine for the GEMM)
void q_run(inout float w[8], uint base, uint q4, float a, float b, int off) {
    [[unroll]] for (uint i = 0u; i < 4u; i++) w[base + i] = fma(a, float(int((q4 >> (8u * i)) & 0xFFu) + off), b);
}

qunit q_unit(const int t, uint64_t addr, uint ro, uint u) {
    qunit r;
    if (t == T_Q4_0 || t == T_Q4_1 || t == T_Q5_0 || t == T_Q5_1) {
        // block u/4, word w = u%4 of qs: elements 4w..4w+3 (low nibbles) and 16+4w.. (high)
        const uint b = u >> 2, w = u & 3u;
        const uint bo = ro + b * q_block_bytes(t);
        const bool has_m = t == T_Q4_1 || t == T_Q5_1;
        const bool five  = t == T_Q5_0 || t == T_Q5_1;
        const uint hdr   = has_m ? 4u : 2u;
        const uint qw    = q_u32(addr, bo + hdr + (five ? 4u : 0u) + 4u * w);
        uint lo = qw & 0x0F0F0F0Fu, hi = (qw >> 4) & 0x0F0F0F0Fu;
        if (five) {
            const uint qh = q_u32(addr, bo + hdr);
            // bit e of qh is bit 4 of element e: spread the 4 bits of each run to bit 4 of each byte
            const uint h0 = (qh >> (4u * w)) & 0xFu, h1 = (qh >> (16u + 4u * w)) & 0xFu;
            lo |= ((h0 & 1u) << 4) | ((h0 & 2u) << 11) | ((h0 & 4u) << 18) | ((h0 & 8u) << 25);
            hi |= ((h1 & 1u) << 4) | ((h1 & 2u) << 11) | ((h1 & 4u) << 18) | ((h1 & 8u) << 25);
        }
        const float d = q_f16(addr, bo);
        float       a = d, bias;
        if (has_m) bias = q_f16(addr, bo + 2u);
        else bias = -d * (five ? 16.0 : 8.0);
        q_run(r.w, 0u, lo, a, bias, 0);
        q_run(r.w, 4u, hi, a, bias, 0);
        r.k = uvec2(b * 32u + 4u * w, b * 32u + 16u + 4u * w);
    } else if (t == T_Q8_0) {
        // block u/4, elements 8w..8w+7: two words of signed bytes
        const uint b = u >> 2, w = u & 3u;
        const uint bo = ro + b * 34u;
        const float d = q_f16(addr, bo);
        const uint q0 = q_u32(addr, bo + 2u + 8u * w), q1 = q_u32(addr, bo + 6u + 8u * w);
        [[unroll]] for (uint i = 0u; i < 4u; i++) {
            r.w[i]      = d * float((int(q0 << (24u - 8u * i))) >> 24);
            r.w[4u + i] = d * float((int(q1 << (24u - 8u * i))) >> 24);
        }
        r.k = uvec2(b * 32u + 8u * w, b * 32u + 8u * w + 4u);
    } else if (t == T_Q4_K || t == T_Q5_K) {
        // super-block u/32; chunk c (64 elements), word w of its 32 bytes: elements 64c + 4w..
        // (sub-block 2c, low nibbles) and 64c + 32 + 4w.. (sub-block 2c + 1, high nibbles)
        const uint b = u >> 5, r5 = u & 31u, c = r5 >> 3, w = r5 & 7u;
        const uint bo = ro + b * q_block_bytes(t);
        const bool five = t == T_Q5_K;
        const uint qw   = q_u32(addr, bo + (five ? 48u : 16u) + 32u * c + 4u * w);
        uint lo = qw & 0x0F0F0F0Fu, hi = (qw >> 4) & 0x0F0F0F0Fu;
        if (five) {
            // bit s of qh[l] is bit 4 of element 32s + l (l = 4w + i): sub-blocks 2c and 2c + 1
            const uint qh = q_u32(addr, bo + 16u + 4u * w);
            lo |= ((qh >> (2u * c)) & 0x01010101u) << 4;
            hi |= ((qh >> (2u * c + 1u)) & 0x01010101u) << 4;
        }
        const float d = q_f16(addr, bo), dmin = q_f16(addr, bo + 2u);
        const uvec2 s0 = q_scale_min_k4(addr, bo + 4u, 2u * c), s1 = q_scale_min_k4(addr, bo + 4u, 2u * c + 1u);
        q_run(r.w, 0u, lo, d * float(s0.x), -dmin * float(s0.y), 0);
        q_run(r.w, 4u, hi, d * float(s1.x), -dmin * float(s1.y), 0);
        r.k = uvec2(b * 256u + 64u * c + 4u * w, b * 256u + 64u * c + 32u + 4u * w);
    } else { // Q6_K
        // super-block u/32; half c (128 elements), ql half h, word w: bytes ql[64c + 32h + 4w ..]
        // hold elements 128c + 32h + 4w + i (low nibbles, kq = h) and 128c + 32(h + 2) + 4w + i
        // (high nibbles, kq = h + 2); their top bits are bits 2kq of qh[32c + 4w + i]
        const uint b = u >> 5, r5 = u & 31u, c = r5 >> 4, h = (r5 >> 3) & 1u, w = r5 & 7u;
        const uint bo = ro + b * 210u;
        const uint qw = q_u32(addr, bo + 64u * c + 32u * h + 4u * w);
        const uint qh = q_u32(addr, bo + 128u + 32u * c + 4u * w);
        const uint lo = (qw & 0x0F0F0F0Fu) | (((qh >> (2u * h)) & 0x03030303u) << 4);
        const uint hi = ((qw >> 4) & 0x0F0F0F0Fu) | (((qh >> (2u * h + 4u)) & 0x03030303u) << 4);
        const float d = q_f16(addr, bo + 208u);
        const uint  e0 = 128u * c + 32u * h + 4u * w, e1 = e0 + 64u;
        const float a0 = d * float((int(q_u8(addr, bo + 192u + e0 / 16u)) << 24) >> 24);
        const float a1 = d * float((int(q_u8(addr, bo + 192u + e1 / 16u)) << 24) >> 24);
        q_run(r.w, 0u, lo, a0, 0.0, -32);
        q_run(r.w, 4u, hi, a1, 0.0, -32);
        r.k = uvec2(b * 256u + e0, b * 256u + e1);
    }
    return r;
}

// The GEMM unit split in two for kernels that keep the scales of a group of 4 units (u % 4 == 0:
// one 32-element block, or one sub-block pair of a K-quant super-block, share them) and load only
// the quants per unit. q_head: (a, b) of the low run and of the high run, w = a * q + b, valid for
// units u .. u + 3; q_quants: the 8 quants of unit u as two words of 4 bytes (signed bytes for
// Q8_0, unsigned otherwise; q_quant_f converts one); q_kpos: the k of each run (as q_unit.k).
vec4 q_head(const int t, uint64_t addr, uint ro, uint u) {
    if (t == T_Q4_K || t == T_Q5_K) {
        const uint b = u >> 5, c = (u & 31u) >> 3;
        const uint bo = ro + b * q_block_bytes(t);
        const float d = q_f16(addr, bo), dmin = q_f16(addr, bo + 2u);
        const uvec2 s0 = q_scale_min_k4(addr, bo + 4u, 2u * c), s1 = q_scale_min_k4(addr, bo + 4u, 2u * c + 1u);
        return vec4(d * float(s0.x), -dmin * float(s0.y), d * float(s1.x), -dmin * float(s1.y));
    }
    if (t == T_Q6_K) {
        const uint b = u >> 5, r5 = u & 31u, c = r5 >> 4, h = (r5 >> 3) & 1u, w = r5 & 7u;
        const uint bo = ro + b * 210u;
        const float d = q_f16(addr, bo + 208u);
        const uint  e0 = 128u * c + 32u * h + 4u * w, e1 = e0 + 64u;
        const float a0 = d * float((int(q_u8(addr, bo + 192u + e0 / 16u)) << 24) >> 24);
        const float a1 = d * float((int(q_u8(addr, bo + 192u + e1 / 16u)) << 24) >> 24);
        return vec4(a0, -32.0 * a0, a1, -32.0 * a1);
    }
    const uint  bo = ro + (u >> 2) * q_block_bytes(t);
    const float d  = q_f16(addr, bo);
    float       bias;
    if (t == T_Q4_1 || t == T_Q5_1) bias = q_f16(addr, bo + 2u);
    else if (t == T_Q8_0) bias = 0.0;
    else bias = -d * (t == T_Q5_0 ? 16.0 : 8.0);
    return vec4(d, bias, d, bias);
}

uvec2 q_quants(const int t, uint64_t addr, uint ro, uint u) {
    if (t == T_Q8_0) {
        const uint bo = ro + (u >> 2) * 34u + 2u + 8u * (u & 3u);
        return uvec2(q_u32(addr, bo), q_u32(addr, bo + 4u));
    }
    if (t == T_Q4_0 || t == T_Q4_1 || t == T_Q5_0 || t == T_Q5_1) {
        const uint b = u >> 2, w = u & 3u;
        const uint bo = ro + b * q_block_bytes(t);
        const bool five = t == T_Q5_0 || t == T_Q5_1;
        const uint hdr  = (t == T_Q4_1 || t == T_Q5_1) ? 4u : 2u;
        const uint qw   = q_u32(addr, bo + hdr + (five ? 4u : 0u) + 4u * w);
        uint lo = qw & 0x0F0F0F0Fu, hi = (qw >> 4) & 0x0F0F0F0Fu;
        if (five) {
            const uint qh = q_u32(addr, bo + hdr);
            const uint h0 = (qh >> (4u * w)) & 0xFu, h1 = (qh >> (16u + 4u * w)) & 0xFu;
            lo |= ((h0 & 1u) << 4) | ((h0 & 2u) << 11) | ((h0 & 4u) << 18) | ((h0 & 8u) << 25);
            hi |= ((h1 & 1u) << 4) | ((h1 & 2u) << 11) | ((h1 & 4u) << 18) | ((h1 & 8u) << 25);
        }
        return uvec2(lo, hi);
    }
    if (t == T_Q4_K || t == T_Q5_K) {
        const uint b = u >> 5, r5 = u & 31u, c = r5 >> 3, w = r5 & 7u;
        const uint bo = ro + b * q_block_bytes(t);
        const bool five = t == T_Q5_K;
        const uint qw   = q_u32(addr, bo + (five ? 48u : 16u) + 32u * c + 4u * w);
        uint lo = qw & 0x0F0F0F0Fu, hi = (qw >> 4) & 0x0F0F0F0Fu;
        if (five) {
            const uint qh = q_u32(addr, bo + 16u + 4u * w);
            lo |= ((qh >> (2u * c)) & 0x01010101u) << 4;
            hi |= ((qh >> (2u * c + 1u)) & 0x01010101u) << 4;
        }
        return uvec2(lo, hi);
    }
    const uint b = u >> 5, r5 = u & 31u, c = r5 >> 4, h = (r5 >> 3) & 1u, w = r5 & 7u;
    const uint bo = ro + b * 210u;
    const uint qw = q_u32(addr, bo + 64u * c + 32u * h + 4u * w);
    const uint qh = q_u32(addr, bo + 128u + 32u * c + 4u * w);
    return uvec2((qw & 0x0F0F0F0Fu) | (((qh >> (2u * h)) & 0x03030303u) << 4),
                 ((qw >> 4) & 0x0F0F0F0Fu) | (((qh >> (2u * h + 4u)) & 0x03030303u) << 4));
}

float q_quant_f(const int t, uint word, uint i) {
    if (t == T_Q8_0) return float(int(word << (24u - 8u * i)) >> 24);
    return float((word >> (8u * i)) & 0xFFu);
}

uvec2 q_kpos(const int t, uint u) {
    if (t == T_Q4_K || t == T_Q5_K) {
        const uint r5 = u & 31u, c = r5 >> 3, w = r5 & 7u, base = (u >> 5) * 256u + 64u * c + 4u * w;
        return uvec2(base, base + 32u);
    }
    if (t == T_Q6_K) {
        const uint r5 = u & 31u, c = r5 >> 4, h = (r5 >> 3) & 1u, w = r5 & 7u;
        const uint e0 = (u >> 5) * 256u + 128u * c + 32u * h + 4u * w;
        return uvec2(e0, e0 + 64u);
    }
    const uint b = u >> 2, w = u & 3u;
    if (t == T_Q8_0) return uvec2(b * 32u + 8u * w, b * 32u + 8u * w + 4u);
    return uvec2(b * 32u + 4u * w, b * 32u + 16u + 4u * w);
}
