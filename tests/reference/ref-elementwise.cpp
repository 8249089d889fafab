// Elementwise references: binary ops with modulo broadcasting, sqr/sqrt/scale, unary ops with
// the exact formulas (no FP16 table), gated linear units (packed halves, swapped, split).

#include "ref.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ref {

dense binary(binop op, const dense & a, const dense & b) {
    dense out(a.ne[0], a.ne[1], a.ne[2], a.ne[3]);
    for (int64_t i3 = 0; i3 < a.ne[3]; i3++)
    for (int64_t i2 = 0; i2 < a.ne[2]; i2++)
    for (int64_t i1 = 0; i1 < a.ne[1]; i1++)
    for (int64_t i0 = 0; i0 < a.ne[0]; i0++) {
        const double x = a.at(i0, i1, i2, i3);
        const double y = b.at(i0 % b.ne[0], i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
        double       r = 0;
        switch (op) {
            case binop::add: r = x + y; break;
            case binop::sub: r = x - y; break;
            case binop::mul: r = x * y; break;
            case binop::div: r = x / y; break;
        }
        out.at(i0, i1, i2, i3) = r;
    }
    return out;
}

static dense map(const dense & a, double (*f)(double, const void *), const void * ud) {
    dense out = a;
    for (double & x : out.v) x = f(x, ud);
    return out;
}

dense sqr(const dense & a) {
    return map(a, [](double x, const void *) { return x * x; }, nullptr);
}

dense sqrt(const dense & a) {
    return map(a, [](double x, const void *) { return std::sqrt(x); }, nullptr);
}

dense scale(const dense & a, double s, double b) {
    dense out = a;
    for (double & x : out.v) x = s * x + b;
    return out;
}

static double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
static double gelu_tanh(double x) {
    const double c = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + std::tanh(c * x * (1.0 + 0.044715 * x * x)));
}
static double gelu_quick(double x) { return x * sigmoid(1.702 * x); }
static double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

double unary_scalar(unop op, double x) {
    switch (op) {
        case unop::abs:         return std::fabs(x);
        case unop::sgn:         return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
        case unop::neg:         return -x;
        case unop::step:        return x > 0 ? 1.0 : 0.0;
        case unop::tanh:        return std::tanh(x);
        case unop::elu:         return x > 0 ? x : std::expm1(x);
        case unop::relu:        return x > 0 ? x : 0.0;
        case unop::sigmoid:     return sigmoid(x);
        case unop::gelu:        return gelu_tanh(x);
        case unop::gelu_quick:  return gelu_quick(x);
        case unop::silu:        return x * sigmoid(x);
        case unop::hardswish:   return x * std::min(1.0, std::max(0.0, (x + 3.0) / 6.0));
        case unop::hardsigmoid: return std::min(1.0, std::max(0.0, (x + 3.0) / 6.0));
        case unop::exp:         return std::exp(x);
        case unop::expm1:       return std::expm1(x);
        case unop::softplus:    return x > 20.0 ? x : std::log1p(std::exp(x));
        case unop::gelu_erf:    return gelu_erf(x);
        case unop::floor:       return std::floor(x);
        case unop::ceil:        return std::ceil(x);
        case unop::round:       return std::round(x); // half away from zero, like roundf
        case unop::trunc:       return std::trunc(x);
        case unop::xielu:       break;
    }
    throw std::runtime_error("ref::unary_scalar: op without reference");
}

dense unary(unop op, const dense & a) {
    dense out = a;
    for (double & x : out.v) x = unary_scalar(op, x);
    return out;
}

dense glu(gluop op, const dense & a, const dense * b, bool swapped, double alpha, double limit) {
    const int64_t n = b ? a.ne[0] : a.ne[0] / 2;
    dense         out(n, a.ne[1], a.ne[2], a.ne[3]);
    for (int64_t i3 = 0; i3 < a.ne[3]; i3++)
    for (int64_t i2 = 0; i2 < a.ne[2]; i2++)
    for (int64_t i1 = 0; i1 < a.ne[1]; i1++)
    for (int64_t i0 = 0; i0 < n; i0++) {
        double x, g;
        if (b) {
            x = a.at(i0, i1, i2, i3);
            g = b->at(i0, i1, i2, i3);
        } else {
            x = a.at(i0, i1, i2, i3);
            g = a.at(i0 + n, i1, i2, i3);
            if (swapped) std::swap(x, g);
        }
        double r = 0;
        switch (op) {
            case gluop::reglu:       r = (x > 0 ? x : 0.0) * g; break;
            case gluop::geglu:       r = gelu_tanh(x) * g; break;
            case gluop::swiglu:      r = x * sigmoid(x) * g; break;
            case gluop::geglu_erf:   r = gelu_erf(x) * g; break;
            case gluop::geglu_quick: r = gelu_quick(x) * g; break;
            case gluop::swiglu_oai: {
                const double xc = std::min(x, limit);
                const double yc = std::max(-limit, std::min(g, limit));
                r               = xc * sigmoid(alpha * xc) * (yc + 1.0);
                break;
            }
        }
        out.at(i0, i1, i2, i3) = r;
    }
    return out;
}

} // namespace ref
