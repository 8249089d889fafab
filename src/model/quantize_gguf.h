#pragma once

// quantize_gguf.h — `sdx quantize --to TYPE`: a safetensors or GGUF checkpoint to a GGUF file
// whose linear weights are block-quantized.

#include "ggml.h"

#include <functional>
#include <string>

namespace krea2 {

// The type named `name` (ggml_type_name: "q8_0", "q4_k", "f16", ...) when this build can
// quantize to it (ggml_quantize_chunk); false otherwise. `available` lists those that work.
bool parse_quant_type(const std::string & name, ggml_type & out, std::string & available);

// Reads `in` (safetensors or GGUF, recognised by content) and writes `out` as GGUF: every 2-D
// '<m>.weight' stored as F32/F16/BF16 whose row length is a multiple of the type's block size
// becomes `type` (tensors already block-quantized are copied as they are); every other tensor is
// copied with its type and shape (safetensors F32/F16/BF16/F64/I8/I16/I32/I64; other dtypes are
// an error naming the tensor), and the metadata too (safetensors metadata as string keys).
// Written through sdio::atomic_file: on any error or SIGINT/SIGTERM nothing is left at `out`;
// the finished file is validated with gguf_init_from_file before it replaces `out`.
// ComfyUI int8 checkpoints are refused (quantize the float original instead).
bool quantize_to_gguf(const std::string & in, const std::string & out, ggml_type type, std::string & err,
                      const std::function<void(size_t, size_t)> & progress);

} // namespace krea2
