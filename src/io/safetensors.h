#pragma once

// safetensors files: a validating memory-mapped reader and an atomic writer.
//
// Layout: 8-byte little-endian header length N, N bytes of UTF-8 JSON
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}},
// then the data section; offsets are relative to the data section start. Shapes are in torch
// order (slowest dimension first). Tensor data pointers are NOT aligned in general (the header
// length is arbitrary): read elements with memcpy.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sdio {

struct tensor_view { std::string name; std::string dtype; std::vector<int64_t> shape; /* torch order */ const uint8_t * data; size_t nbytes; };

class reader {
  public:
    // Memory-maps and validates the whole file (header length within the file, JSON well formed,
    // every tensor: known dtype, shape product * dtype size == offset span, offsets inside the
    // data section, no overlapping tensors); on failure returns nullptr and sets err to one line
    // naming the file (and the tensor when it is about one).
    static std::unique_ptr<reader> open(const std::string & path, std::string & err);
    ~reader();
    reader(const reader &) = delete;
    reader & operator=(const reader &) = delete;

    // Sorted by data offset (file order), then name.
    const std::vector<tensor_view> & tensors() const;
    const tensor_view * find(const std::string & name) const; // nullptr if absent
    const std::map<std::string, std::string> & metadata() const;

    const std::string & path() const { return path_; }

    // Copies n bytes at `offset` of tensor t (one of this reader's) to dst. Reading the mapping
    // directly (t.data) kills the process with SIGBUS when the file shrank after it was opened;
    // this copy fails with a message naming the tensor instead.
    bool copy(const tensor_view & t, size_t offset, size_t n, void * dst, std::string & err) const;

  private:
    reader() = default;

    std::string                        path_;
    void *                             map_      = nullptr;
    size_t                             map_size_ = 0;
    std::vector<tensor_view>           tensors_;
    std::map<std::string, size_t>      index_;
    std::map<std::string, std::string> metadata_;
};

struct tensor_out { std::string name; std::string dtype; std::vector<int64_t> shape; std::vector<uint8_t> bytes; };

// Writes atomically (atomic_file.h: temporary file in the same directory, fsync, rename); on any
// failure, error, exception or SIGINT/SIGTERM nothing is left at `path` (and an existing file
// there is untouched) and err says why. What is written obeys the reader's rules (the header is
// checked before the temporary is created: valid UTF-8 names, known dtypes, the header-size
// limit, offsets that fit; and the finished file is opened with reader::open before it replaces
// the target), so a file this writes is always one the reader accepts. An existing symlink or
// non-regular file at `path` is refused.
bool write(const std::string & path, const std::vector<tensor_out> & tensors, const std::map<std::string, std::string> & metadata, std::string & err);

size_t dtype_size(const std::string & dtype); // 0 if unknown

// A tensor name (or any file-supplied text) for an error message: control characters, backslash
// and bytes that are not valid UTF-8 become \xNN, so a hostile name cannot drive the terminal.
std::string display_name(const std::string & s);

// The reader refuses larger headers (as the reference implementation does); the writer too.
constexpr uint64_t k_max_header_bytes = 100u * 1000u * 1000u;

// ---------------------------------------------------------------------------------------------
// Additions beyond the declared API

// Streaming form of write() for files larger than memory: the header is written from `specs`
// (their `bytes` are ignored and may be empty), then fill(i, buf) is called once per tensor, in
// order, and must resize buf to exactly that tensor's byte size (or return false with err set to
// abort the write). Same atomicity as write().
bool write_streamed(const std::string & path, const std::vector<tensor_out> & specs,
                    const std::map<std::string, std::string> & metadata,
                    const std::function<bool(size_t, std::vector<uint8_t> &, std::string &)> & fill,
                    std::string & err);

// Exact conversions used by the readers (IEEE half with subnormals/inf/nan; bf16 = upper 16 bits).
float    f16_to_f32(uint16_t h);
float    bf16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);  // round to nearest even
uint16_t f32_to_bf16(float f); // round to nearest even; NaN stays NaN (quiet)

} // namespace sdio
