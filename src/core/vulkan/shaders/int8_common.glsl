// int8_common.glsl — exact float helpers shared by the INT8 shaders. Vulkan only guarantees
// division to 2.5 ULP and may flush denormals, while the CPU kernels compute s = amax / 127 and
// inv = 1 / s correctly rounded; these helpers do both divisions in integer arithmetic and
// return the IEEE single-precision bit pattern (round to nearest even, subnormals and overflow
// to infinity included), so the scales match the CPU bit for bit.

// Bits of the correctly rounded num / den * 2^e2 (num, den in [1, 2^25)).
uint div_rne_bits(uint num, uint den, int e2) {
    // normalise: den <= num < 2 * den, so the quotient's leading bit has weight 2^e2
    while (num < den) { num <<= 1; e2 -= 1; }
    while (num >= 2u * den) { den <<= 1; e2 += 1; }
    // 26 quotient bits: value = q * 2^(e2 - 25) + a remainder (sticky)
    uint q = 0u, r = num;
    for (int i = 0; i < 26; ++i) {
        q <<= 1;
        if (r >= den) { r -= den; q |= 1u; }
        r <<= 1;
    }
    const bool sticky = r != 0u;
    // bits dropped to reach the float's 24-bit mantissa, more below the normal range (the
    // least significant subnormal bit weighs 2^-149)
    const int drop = max(2, -124 - e2);
    if (drop > 26) return 0u;
    uint       kept = q >> uint(drop);
    const uint rem  = q & ((1u << uint(drop)) - 1u);
    const uint half_ = 1u << uint(drop - 1);
    if (rem > half_ || (rem == half_ && (sticky || (kept & 1u) != 0u))) kept += 1u;
    if (drop > 2) return kept; // subnormal (kept == 2^23 is the smallest normal's bit pattern)
    // normal: kept in [2^23, 2^24]; adding it carries into the exponent when it rounded up to 2^24
    const int be = e2 + 127;
    if (be >= 255) return 0x7f800000u;
    const uint bits = (uint(be) << 23) + kept - 0x800000u;
    return min(bits, 0x7f800000u);
}

// A finite non-negative float's bits as num * 2^e2 with num a (possibly subnormal) mantissa.
void split_float(uint bits, out uint num, out int e2) {
    const uint e = bits >> 23, m = bits & 0x7fffffu;
    if (e == 0u) { num = m; e2 = -149; }
    else { num = m | 0x800000u; e2 = int(e) - 150; }
}

// s = amax / 127.0f for a finite amax > 0 (bits)
uint scale_bits(uint amax_bits) {
    uint num; int e2;
    split_float(amax_bits, num, e2);
    return div_rne_bits(num, 127u, e2);
}

// 1.0f / s for a finite s > 0 (bits); +Inf bits when it overflows
uint inv_bits(uint s_bits) {
    uint num; int e2;
    split_float(s_bits, num, e2);
    return div_rne_bits(1u, num, -e2);
}

// clamp(round_half_to_even(f), -127, 127); NaN -> 0 (the CPU's quant_value)
int quant_value(float f) {
    const uint b = floatBitsToUint(f) & 0x7fffffffu;
    if (b > 0x7f800000u) return 0;
    if (f > 127.0) return 127;
    if (f < -127.0) return -127;
    return int(roundEven(f));
}
