#pragma once

// weights.h — Krea2 block weights from a safetensors checkpoint (plain float or ComfyUI
// int8_tensorwise with ConvRot), read through src/io (sdio).

#include "krea2.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace krea2 {

// Opens path and detects the stack's shape: hidden from blocks.0.attn.wq (in), heads / kv heads
// from wq / wk (out / 128), mlp from blocks.0.mlp.gate (out), the block count from the names.
// cfg's tokens/text tokens/group are kept; asking for more blocks than the file has is an
// error.
// A GGUF file (recognised by its magic, whatever its name) is read by open_gguf_checkpoint.
std::unique_ptr<weight_source> open_checkpoint(const std::string & path, config & cfg, std::string & err);

// weights_gguf.cpp: the same layout from a GGUF file (tensor names as our safetensors writer
// writes them; any tensor type this build converts to float, mixed per tensor).
std::unique_ptr<weight_source> open_gguf_checkpoint(const std::string & path, config & cfg, std::string & err);

// The stack's shape as a checkpoint's tensors imply it (the rule open_checkpoint documents), for
// either file format. linear_shape(module, in, out, err) gives the (in, out) of module's 2-D weight
// or says why it cannot (absent, not 2-D); has_tensor(name) says whether a tensor exists.
bool infer_layout(const std::string & path,
                  const std::function<bool(const std::string &, int64_t &, int64_t &, std::string &)> & linear_shape,
                  const std::function<bool(const std::string &)> & has_tensor, config & cfg, std::string & err);

// sdio::quantize_file with a progress callback (done, total).
bool quantize_checkpoint(const std::string & in, const std::string & out, int group, std::string & err,
                         const std::function<void(size_t, size_t)> & progress);

} // namespace krea2
