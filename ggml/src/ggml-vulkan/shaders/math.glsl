// math.glsl — scalar functions with ggml's CPU formulas (ops-elementwise.cpp), including the
// ones GLSL lacks (erfc, expm1, log1p) and a round() that breaks ties away from zero.

float sigmoid_f(float x) {
    if (x >= 0.0) return 1.0 / (1.0 + exp(-x));
    const float e = exp(x);
    return e / (1.0 + e);
}

float times_gate(float x, float s) { return s == 0.0 ? -0.0 : x * s; }

// Chebyshev fit, fractional error < 1.2e-7 everywhere (Numerical Recipes erfcc)
float erfc_f(float x) {
    const float z = abs(x);
    const float t = 1.0 / (1.0 + 0.5 * z);
    const float r = t * exp(-z * z - 1.26551223 +
                            t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
                            t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 +
                            t * 0.17087277)))))))));
    return x >= 0.0 ? r : 2.0 - r;
}

// Kahan's trick: exact to a few ulp without a dedicated instruction
float expm1_f(float x) {
    const float u = exp(x);
    if (u == 1.0) return x;
    const float um1 = u - 1.0;
    if (um1 == -1.0) return -1.0;
    return um1 * x / log(u);
}

float log1p_f(float x) {
    const float u = 1.0 + x;
    if (u == 1.0) return x;
    return log(u) * x / (u - 1.0);
}

// tanh without the overflow of exp-based implementations for large |x|
float tanh_f(float x) { return tanh(clamp(x, -10.0, 10.0)); }

float round_away(float x) {
    float t = trunc(x);
    if (abs(x - t) >= 0.5) t += sign(x);
    return t;
}

float gelu_f(float x) {
    const float c = 0.7978845608028654;
    const float z = c * x * (1.0 + 0.044715 * x * x);
    return times_gate(x, sigmoid_f(2.0 * z));
}
float gelu_quick_f(float x) { return times_gate(x, sigmoid_f(1.702 * x)); }
float gelu_erf_f(float x) { return times_gate(x, 0.5 * erfc_f(-x * 0.70710678118654752)); }
float silu_f(float x) { return times_gate(x, sigmoid_f(x)); }
float relu_f(float x) { return x > 0.0 ? x : 0.0; }

// ggml_unary_op values
float unary_f(int op, float x) {
    switch (op) {
        case 0: return abs(x);
        case 1: return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0);
        case 2: return -x;
        case 3: return x > 0.0 ? 1.0 : 0.0;
        case 4: return tanh_f(x);
        case 5: return x > 0.0 ? x : expm1_f(x);
        case 6: return relu_f(x);
        case 7: return sigmoid_f(x);
        case 8: return gelu_f(x);
        case 9: return gelu_quick_f(x);
        case 10: return silu_f(x);
        case 11: return x * min(1.0, max(0.0, (x + 3.0) / 6.0));
        case 12: return min(1.0, max(0.0, (x + 3.0) / 6.0));
        case 13: return exp(x);
        case 14: return expm1_f(x);
        case 15: return x > 20.0 ? x : log1p_f(exp(x));
        case 16: return gelu_erf_f(x);
        case 18: return floor(x);
        case 19: return ceil(x);
        case 20: return round_away(x);
        case 21: return trunc(x);
    }
    return x;
}

// a*b + c with one rounding in practice: Dekker's two-product (Veltkamp splits) recovers the
// rounding error of a*b exactly; `precise` forbids contraction/reassociation of these steps
float mul_add_exact(float a, float b, float c) {
    precise float p  = a * b;
    precise float ca = 4097.0 * a;
    precise float ah = ca - (ca - a);
    precise float al = a - ah;
    precise float cb = 4097.0 * b;
    precise float bh = cb - (cb - b);
    precise float bl = b - bh;
    precise float e  = ((ah * bh - p) + ah * bl + al * bh) + al * bl;
    precise float r  = (p + c) + e;
    return r;
}
