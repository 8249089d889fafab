#pragma once

// Checks one quantized ComfyUI int8_tensorwise module against the float module it was made
// from (`sdx verify`). The run-time deviation check of `sdx run` compares the INT8 stack with an
// F32 stack built from the same file, so a misread layout (a dropped rotation, a wrong group)
// shifts both sides alike; only the float original can expose it.
//
// Two measures per module, each as a ratio to a stated bound (pass: ratio <= 1):
//
// weight: the dequantized weight with the rotation undone, W' = (Q * s) R, against the float W.
//   Bound per output row o: ||W'_o - W_o||_2 <= s_o * sqrt(in). Any quantizer that rounds each
//   rotated value to one of its two neighbouring grid points errs by at most one step s_o per
//   value, and R is orthogonal, so the row's L2 error is the same in both domains. Round to
//   nearest gives about 0.29 of the bound; a misread rotation gives tens of times the bound.
//
// linear: `rows` random inputs x (standard normal, fixed seed) through the quantized module's
//   arithmetic (int8-convrot-facts.md: rotate x by the group, per-row s_x = amax/127, multiply by
//   the inverse, round half to even, clamp to +-127, exact integer sum, ((acc * s_x) * s_w) + b)
//   against x W^T + b of the float module (in double). The error of one output is
//   x.(W' - W) + e_x.(W' R) with e_x the activation rounding; its allowed RMS is taken from the
//   weight bound above (||W'_o - W_o|| at s_o sqrt(in), seen by a random x as ||x|| s_o) and
//   round-to-nearest activations (uniform within half a step: ||W'_o|| s_x / sqrt(12)):
//     sigma^2(r, o) = ||x_r||^2 s_o^2 + ||W'_o||^2 s_x,r^2 / 12,
//   and the ratio is RMS(error) / RMS(sigma) over all (r, o). A correctly read file gives about
//   0.4, a misread rotation about 40.

#include "io/comfy_int8.h"

#include <cstdint>
#include <string>

namespace sdio {

struct module_check {
    double weight_rel_rms = 0; // ||W' - W||_F / ||W||_F
    double weight_ratio   = 0; // max over rows of ||W'_o - W_o|| / (s_o sqrt(in))
    double linear_rel_rms = 0; // RMS(y_q - y_f) / RMS(y_f)
    double linear_ratio   = 0; // RMS(y_q - y_f) / RMS(sigma)
    bool   pass() const { return weight_ratio <= 1.0 && linear_ratio <= 1.0; }
};

// q: an int8 module (read_linear); f: the float module of the same name and shape. rows >= 1.
// False (err says why) when the two cannot be compared (q not int8, f not float, shapes or
// bias presence differ). threads: output rows split over that many threads; the results are
// the same for every thread count (per-row partial results, reduced in row order).
bool verify_module(const linear_module & q, const linear_module & f, int rows, uint64_t seed, module_check & out, std::string & err,
                   int threads = 1);

} // namespace sdio
