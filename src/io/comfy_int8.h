#pragma once

// ComfyUI int8_tensorwise (+ ConvRot) linear modules: reading, validation, and the offline
// weight quantizer. Arithmetic follows /work/shared/reference/int8-convrot-facts.md.
//
// Per module <m>: "<m>.weight" (torch [out, in]), "<m>.weight_scale" (one scale per output row,
// or one for the whole tensor), "<m>.comfy_quant" (U8 bytes of UTF-8 JSON, <= 64 KiB), optional
// "<m>.bias" ([out]). The configuration may also come from the file header, as ComfyUI reads it.

#include "io/json.h"
#include "io/safetensors.h"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace sdio {

struct linear_module {
    std::string name; int64_t in = 0, out = 0;
    bool int8 = false; bool convrot = false; int group = 0;   // from comfy_quant (group 0 = no rotation)
    bool full_precision_mm = false; // comfy_quant "full_precision_matrix_mult": ComfyUI dequantizes and multiplies in float; sdx still runs INT8
    bool per_tensor_scale  = false; // the file holds one scale for the whole matrix (shape [] or [1]); weight_scale repeats it per row
    std::vector<int8_t> weight_i8;    // [out][in] when int8
    std::vector<float>  weight_f32;   // [out][in] when not int8 (F32/F16/BF16 widened); every value finite
    std::vector<float>  weight_scale; // [out] when int8 (F32/F16/BF16 in the file); finite and > 0
    std::vector<float>  bias;         // [out] or empty; every value finite
    std::vector<std::string> warnings; // "<file>: tensor '<m>': unknown comfy_quant key ..." (ignored keys; each
                                       // distinct key is also printed once per process as "sdio: warning: ...")
};

// The per-layer configurations of the header entry "_quantization_metadata"
// ({"layers": {"<m>": {comfy_quant object}, ...}}, other keys ignored). ComfyUI writes each into
// "<m>.comfy_quant", replacing a tensor of that name, so they are part of the file's meaning.
struct header_quant {
    bool                               present = false;
    std::map<std::string, json::value> layers;
};
// Parses r's header entry (absent: present = false, true returned). Malformed JSON or no
// "layers" object: false, err names the file and the entry.
bool read_header_quant(const reader & r, header_quant & out, std::string & err);

// Reads module `name`, validating dtypes, shapes and the configuration; err names the tensor.
// header: r's parsed header configurations (nullptr: parsed here, once per call).
//
// The configuration is read the way ComfyUI's loader reads it (comfy/ops.py
// _load_quantized_module, comfy/utils.py convert_old_quants, comfy-kitchen's int8 layout):
// - "<m>.comfy_quant" and/or the header entry for <m>; both present and describing different
//   layouts is an error (ComfyUI would take the header's);
// - "format" must be "int8_tensorwise"; "convrot" (bool) and "convrot_groupsize" (integer, 256
//   when absent) at the top level or inside "params"; both places given with different values
//   is an error; without convrot the group size is ignored (as ComfyUI does): no rotation;
// - the group is a power of 4 dividing in (any size, e.g. 1024 or 16384 from
//   convert-to-quant --dynamic-convrot; 1 = identity); "full_precision_matrix_mult" (bool) is
//   recorded; "per_row", "scale_dtype", "orig_dtype" (descriptive) and "orig_shape" (must be
//   [out, in]) are type-checked, a wrong type being an error naming the tensor; any other key
//   is ignored, as ComfyUI ignores it, with a warning naming it (linear_module::warnings);
// - weight_scale: [] / [1] / [1,1] (one scale for the tensor, broadcast to every row) or [out] /
//   [out,1] / [1,out] (generally: all dimensions 1, or one dimension out and the rest 1);
//   F32/F16/BF16; finite and > 0; the error for another shape lists these;
// - no configuration: the weight must be F32/F16/BF16 with finite values and there must be no
//   weight_scale (scaled float checkpoints are not supported);
// - bias, when present, is F32/F16/BF16 [out] with finite values.
bool read_linear(const reader & r, const std::string & name, linear_module & out, std::string & err,
                 const header_quant * header = nullptr);

// err = "<file>: tensor '<name>': NaN value at row r, column c ..." for the first non-finite
// value of v (rows of row_len values) and false; true when all are finite.
bool check_finite(const reader & r, const std::string & tensor, const std::vector<float> & v, int64_t row_len, std::string & err);

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
// requires. Returns false (and *bad_row) at the first row whose rotated values are not finite:
// non-finite input, or finite weights near FLT_MAX whose rotation sums overflow (the scale
// would be infinite); that row gets q = 0, scale 1 and later rows are not written.
[[nodiscard]] bool quantize_weight_rows(const float * w, int64_t out, int64_t in, int group, int8_t * q, float * scale,
                                        int64_t * bad_row = nullptr);

// Whole file: every "<m>.weight" that is 2-D F32/F16/BF16 with `in` divisible by group (and in >=
// group) becomes int8_tensorwise (weight I8 [out,in], weight_scale F32 [out,1] as ComfyUI
// writes, comfy_quant U8 JSON); all other tensors copied unchanged; metadata copied.
// progress(done, total) after each tensor. Atomic like write().
//
// group must be 0 or a power of 4. G > 1 writes {"format": "int8_tensorwise", "convrot": true,
// "convrot_groupsize": G}; G = 0 and G = 1 (no rotation) write {"format": "int8_tensorwise"}
// with no ConvRot keys at all. A module that already has a "<m>.weight_scale", a
// "<m>.comfy_quant" or a header _quantization_metadata entry is copied unchanged. A non-finite
// weight value, or a row whose rotation overflows float, is an error naming the tensor (nothing
// is written). Tensors are streamed one at a time, so memory use is bounded by the largest
// tensor, not the file. progress counts input tensors.
bool quantize_file(const std::string & in_path, const std::string & out_path, int group, std::string & err, const std::function<void(size_t, size_t)> & progress);

// Addition: true for 1, 4, 16, 64, ... (the group sizes the rotation is defined for).
bool is_power_of_4(int64_t g);

} // namespace sdio
