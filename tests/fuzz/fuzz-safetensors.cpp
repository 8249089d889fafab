// Fuzzes the safetensors reader (src/io/safetensors.*): any bytes as a file. Whatever opens must
// be self-consistent (every tensor inside the file, found by name, readable through the guarded
// copy), and writing it back must give a file the reader accepts with the same contents.

#include "fuzz-support.h"
#include "io/safetensors.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#define CHECK(c) FUZZ_CHECK("fuzz-safetensors", c, #c)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::string path = fuzz::as_file(data, size);
    std::string       err;
    auto              r = sdio::reader::open(path, err);
    if (!r) {
        CHECK(!err.empty());
        CHECK(err.find('\n') == std::string::npos);
        return 0;
    }
    std::vector<sdio::tensor_out> out;
    for (const auto & t : r->tensors()) {
        CHECK(r->find(t.name) == &t);
        CHECK(t.nbytes <= size);
        std::vector<uint8_t> bytes(t.nbytes);
        CHECK(r->copy(t, 0, t.nbytes, bytes.data(), err));
        out.push_back({t.name, t.dtype, t.shape, std::move(bytes)});
    }
    // Round trip through the writer (it must never write what the reader refuses).
    const std::string o = fuzz::scratch_dir() + "/rt.safetensors";
    std::string       werr;
    CHECK(sdio::write(o, out, r->metadata(), werr));
    {
        auto back = sdio::reader::open(o, err);
        CHECK(back);
        CHECK(back->tensors().size() == out.size());
        CHECK(back->metadata() == r->metadata());
        for (const auto & t : out) {
            const sdio::tensor_view * b = back->find(t.name);
            CHECK(b && b->dtype == t.dtype && b->shape == t.shape && b->nbytes == t.bytes.size());
            std::vector<uint8_t> bytes(b->nbytes);
            CHECK(back->copy(*b, 0, b->nbytes, bytes.data(), err));
            CHECK(bytes == t.bytes);
        }
    }
    unlink(o.c_str());
    return 0;
}
