#pragma once

// io-test-files.h — file helpers shared by the checkpoint I/O tests (test-io, test-io-hardening,
// test-comfy) and the tool-running tests (run-tool.h). Header-only: every test is its own
// executable and uses a subset.
//
// What lives here is what those tests did identically: a temporary directory removed with all it
// holds, reading and writing a whole file, a raw safetensors file from a header text, and the
// bytes of a vector. What a test checks stays in the test file.

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include <stdlib.h> // mkdtemp

namespace sd_test {

// $TMPDIR, or /tmp when it is unset or empty.
inline std::string env_tmpdir() {
    const char * base = std::getenv("TMPDIR");
    return std::string(base && *base ? base : "/tmp");
}

// A fresh directory made from a mkdtemp template (a path ending in XXXXXX; aborts when it cannot
// be made), removed with everything in it when the object goes.
class tmp_dir {
  public:
    explicit tmp_dir(const std::string & tmpl) {
        std::vector<char> buf(tmpl.begin(), tmpl.end());
        buf.push_back('\0');
        if (!mkdtemp(buf.data())) std::abort();
        path_ = buf.data();
    }
    ~tmp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    tmp_dir(const tmp_dir &)             = delete;
    tmp_dir & operator=(const tmp_dir &) = delete;

    std::string         file(const std::string & name) const { return path_ + "/" + name; }
    const std::string & path() const { return path_; }
    // Names in the directory, sorted, to prove no temporary file was left behind.
    std::vector<std::string> entries() const {
        std::vector<std::string> v;
        for (const auto & e : std::filesystem::directory_iterator(path_)) v.push_back(e.path().filename().string());
        std::sort(v.begin(), v.end());
        return v;
    }

  private:
    std::string path_;
};

// The whole file's bytes ("" when it cannot be read).
inline std::string slurp(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Replaces the file's contents with `bytes`.
inline void spit(const std::string & path, const std::string & bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), (std::streamsize) bytes.size());
}

// A raw safetensors file from a header text and a data section, with the length field given or
// (when len is UINT64_MAX) computed.
inline std::string raw_file(const std::string & header, const std::string & data = "", uint64_t len = UINT64_MAX) {
    if (len == UINT64_MAX) len = header.size();
    std::string s(8, '\0');
    for (int k = 0; k < 8; ++k) s[k] = (char) (uint8_t) (len >> (8 * k));
    return s + header + data;
}

template <typename T> std::vector<uint8_t> bytes_of(const std::vector<T> & v) {
    std::vector<uint8_t> b(v.size() * sizeof(T));
    if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
    return b;
}

inline std::vector<uint8_t> bytes_of_string(const std::string & s) { return std::vector<uint8_t>(s.begin(), s.end()); }

} // namespace sd_test
