#pragma once

// ComfyUI int8_tensorwise (+ ConvRot) linear modules: reading, validation, and the offline
// weight quantizer. Arithmetic follows /work/shared/reference/int8-convrot-facts.md.
//
// Per module <m>: "<m>.weight" (torch [out, in]), "<m>.weight_scale" ([out] or [out, 1], one
// scale per output row), "<m>.comfy_quant" (U8 bytes of UTF-8 JSON, <= 64 KiB, keys format /
// convrot / convrot_groupsize; other keys ignored), optional "<m>.bias" ([out]).

#include "io/safetensors.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sdio {

struct linear_module {
    std::string name; int64_t in = 0, out = 0;
    bool int8 = false; bool convrot = false; int group = 0;   // from comfy_quant (group 0 = no rotation)
    std::vector<int8_t> weight_i8;    // [out][in] when int8
    std::vector<float>  weight_f32;   // [out][in] when not int8 (F32/F16/BF16 widened)
    std::vector<float>  weight_scale; // [out] when int8 (accepts [out] or [out,1], F32/F16/BF16); must be finite and > 0 -> else error naming the tensor
    std::vector<float>  bias;         // [out] or empty
};

// Reads module `name` ("<name>.weight", "<name>.weight_scale", "<name>.comfy_quant" (U8 bytes of
// JSON, <= 64 KiB; keys format/convrot/convrot_groupsize), "<name>.bias"); validates
// dtypes/shapes (weight 2-D; int8 format requires I8 weight; convrot group a power of 4 dividing
// in); err names the tensor.
//
// Decisions beyond the format sheet (each an error naming the tensor, never a silent guess):
// - no comfy_quant: the weight must be F32/F16/BF16 and there must be no weight_scale (a scaled
//   float weight, e.g. fp8-scaled, is not supported here);
// - comfy_quant "format" must be "int8_tensorwise";
// - "convrot": true requires an integer "convrot_groupsize" (no default is assumed); the group
//   is a power of 4 (1, 4, 16, ...) dividing in; convrot false or absent means group 0;
// - bias, when present, is F32/F16/BF16 with shape [out].
bool read_linear(const reader & r, const std::string & name, linear_module & out, std::string & err);

// Reads an F32/F16/BF16 tensor of any shape into F32 (shape optional out).
bool read_floats(const reader & r, const std::string & name, std::vector<float> & out, std::vector<int64_t> * shape, std::string & err);

// The regular Hadamard rotation of int8-convrot-facts.md applied in place to every group of
// `group` values of a row of n values (group 1 or 0: identity). n must be a multiple of group
// (aborts with a message otherwise: a caller bug, the readers validate files before this).
void convrot_rotate_row(float * row, int64_t n, int group);

// Offline weight quantization of one [out][in] F32 matrix. Per row: rotate (group; 0/1 = none),
// s_w = max|v| / 127.0f, q = clamp(lrintf(v / s_w), -127, 127): a true division, as the facts
// sheet writes W_rot / s_w (the run-time activation path multiplies by the inverse instead), and
// lrintf in the default rounding mode, i.e. round half to even. The clamp is applied before the
// rounding, which gives the same result for finite values and keeps NaN/Inf out of lrintf.
// A row whose s_w is 0 (all zeros, or so tiny that amax/127 underflows) gets q = 0 and scale
// 1.0f: it still dequantizes to exactly 0, and every stored scale stays > 0 as read_linear
// requires. Non-finite input is the caller's to reject (quantize_file does).
void quantize_weight_rows(const float * w, int64_t out, int64_t in, int group, int8_t * q, float * scale);

// Whole file: every "<m>.weight" that is 2-D F32/F16/BF16 with `in` divisible by group (and in >=
// group) becomes int8_tensorwise+convrot (weight I8 [out,in], weight_scale F32 [out,1] as ComfyUI
// writes, comfy_quant U8 JSON {"format": "int8_tensorwise", "convrot": true, "convrot_groupsize":
// G}); all other tensors copied unchanged; metadata copied. progress(done, total) after each
// tensor. Atomic like write().
//
// group must be 0 or a power of 4; 0 quantizes without rotation and writes "convrot": false.
// A module that already has a "<m>.weight_scale" or "<m>.comfy_quant" is copied unchanged. A
// non-finite weight value is an error naming the tensor. Tensors are streamed one at a time, so
// memory use is bounded by the largest tensor, not the file. progress counts input tensors.
bool quantize_file(const std::string & in_path, const std::string & out_path, int group, std::string & err, const std::function<void(size_t, size_t)> & progress);

// Addition: true for 1, 4, 16, 64, ... (the group sizes the rotation is defined for).
bool is_power_of_4(int64_t g);

} // namespace sdio
