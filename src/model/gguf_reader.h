#pragma once

// gguf_reader.h — tensors of a GGUF file read on demand, for checkpoints larger than memory:
// the file's meta data is parsed and validated once (gguf_init_from_file, hardened), tensor
// shapes come from a ggml context of data-less tensors, and each tensor's bytes are read with
// pread when asked for (a file that shrank since gives an error naming the tensor, not SIGBUS).

#include "ggml.h"
#include "gguf.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sdgguf {

// true when the file starts with the GGUF magic (files are recognised by content, not name)
bool is_gguf_file(const std::string & path);

class reader {
  public:
    // nullptr and err (one line, naming the file and the field) when the file is not valid GGUF
    static std::unique_ptr<reader> open(const std::string & path, std::string & err);
    ~reader();
    reader(const reader &) = delete;
    reader & operator=(const reader &) = delete;

    const gguf_context * meta() const { return meta_; }
    const std::string &  path() const { return path_; }
    int64_t              n_tensors() const;
    // the data-less tensor (name, type, ne) of tensor i / of a name (nullptr if absent)
    const ggml_tensor * tensor(int64_t i) const;
    const ggml_tensor * find(const std::string & name) const;

    // the tensor's bytes as stored
    bool read_bytes(const ggml_tensor * t, std::vector<uint8_t> & out, std::string & err) const;
    // the tensor's values as F32 (any type with a to_float conversion); false naming the tensor
    // for a type that has none
    bool read_f32(const ggml_tensor * t, std::vector<float> & out, std::string & err) const;

  private:
    reader() = default;
    std::string    path_;
    gguf_context * meta_ = nullptr;
    ggml_context * shells_ = nullptr;
    int            fd_ = -1;
};

} // namespace sdgguf
