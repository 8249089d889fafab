// Scalar storage types as seen by the reference: IEEE half and bfloat16 conversions written
// from the format definitions, and the Q8_0 round trip from the facts sheet (section 1.5).

#include "ref.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace ref {

dense::dense(int64_t n0, int64_t n1, int64_t n2, int64_t n3, double fill) {
    ne[0] = n0; ne[1] = n1; ne[2] = n2; ne[3] = n3;
    v.assign((size_t) (n0 * n1 * n2 * n3), fill);
}

std::string dense::shape_str() const {
    char buf[96];
    snprintf(buf, sizeof(buf), "[%lld,%lld,%lld,%lld]", (long long) ne[0], (long long) ne[1], (long long) ne[2],
             (long long) ne[3]);
    return buf;
}

static uint32_t bits_of(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }
static float    float_of(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }

uint16_t f32_to_f16_bits(float f) {
    uint32_t       b    = bits_of(f);
    const uint16_t sign = (uint16_t) ((b >> 16) & 0x8000u);
    b &= 0x7fffffffu;
    if (b > 0x7f800000u) return sign | 0x7e00u;  // NaN, quieted
    if (b >= 0x477ff000u) return sign | 0x7c00u; // >= 65520 rounds to inf (tie goes to even = inf)
    if (b < 0x38800000u) {
        // below the smallest normal half: count units of 2^-24, ties to even (default FP mode)
        const double q = std::nearbyint((double) float_of(b) * 16777216.0);
        return sign | (uint16_t) q; // q == 1024 is the smallest normal, encoded the same way
    }
    const uint32_t e    = (b >> 23) - 127 + 15;
    const uint32_t mant = b & 0x7fffffu;
    uint32_t       h    = (e << 10) | (mant >> 13);
    const uint32_t rb   = mant & 0x1fffu;
    if (rb > 0x1000u || (rb == 0x1000u && (h & 1u))) h++; // carry may step into the exponent: correct
    return sign | (uint16_t) h;
}

float f16_bits_to_f32(uint16_t h) {
    const int    e    = (h >> 10) & 0x1f;
    const int    mant = h & 0x3ff;
    const double s    = (h & 0x8000) ? -1.0 : 1.0;
    if (e == 0) return (float) (s * std::ldexp((double) mant, -24));
    if (e == 31) return mant ? float_of((h & 0x8000 ? 0x80000000u : 0u) | 0x7fc00000u | ((uint32_t) mant << 13))
                             : (float) (s * INFINITY);
    return (float) (s * std::ldexp((double) (1024 + mant), e - 25));
}

uint16_t f32_to_bf16_bits(float f) {
    const uint32_t b = bits_of(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t) ((b >> 16) | 0x40u);
    return (uint16_t) ((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

float bf16_bits_to_f32(uint16_t h) { return float_of((uint32_t) h << 16); }

double round_f16(double x) { return f16_bits_to_f32(f32_to_f16_bits((float) x)); }
double round_bf16(double x) { return bf16_bits_to_f32(f32_to_bf16_bits((float) x)); }
double round_f32(double x) { return (double) (float) x; }

std::vector<double> q8_0_roundtrip(const std::vector<double> & x) {
    std::vector<double> out(x.size());
    for (size_t b0 = 0; b0 < x.size(); b0 += 32) {
        float amax = 0.0f;
        for (size_t j = 0; j < 32; j++) amax = std::fmax(amax, std::fabs((float) x[b0 + j]));
        const float  d  = amax / 127.0f;
        const float  id = d != 0.0f ? 1.0f / d : 0.0f;
        const double dh = f16_bits_to_f32(f32_to_f16_bits(d));
        for (size_t j = 0; j < 32; j++) out[b0 + j] = (double) std::round((float) x[b0 + j] * id) * dh;
    }
    return out;
}

} // namespace ref
