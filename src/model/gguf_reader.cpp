// gguf_reader.cpp — on-demand tensor reads from a validated GGUF file (see gguf_reader.h).

#include "gguf_reader.h"

#include "io/safetensors.h" // display_name

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

namespace sdgguf {

bool is_gguf_file(const std::string & path) {
    // O_NONBLOCK: a FIFO must not block here; the reader that takes the file reports it
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    char          m[4];
    const ssize_t n = pread(fd, m, 4, 0);
    close(fd);
    return n == 4 && memcmp(m, GGUF_MAGIC, 4) == 0;
}

std::unique_ptr<reader> reader::open(const std::string & path, std::string & err) {
    std::unique_ptr<reader> r(new reader());
    r->path_            = path;
    gguf_init_params ip = {true, &r->shells_};
    // The reader logs why it refuses a file. That line becomes err (the caller reports it once:
    // sdx prints one "sdx: error:" line), so it is captured rather than printed: through the log
    // callback, which upstream ggml has too (gguf_last_error() is ours only; src/ also builds
    // against upstream). Nothing in src/ installs a log callback, so the default is restored.
    std::string captured;
    ggml_log_set(
        [](ggml_log_level level, const char * text, void * user) {
            std::string & c = *(std::string *) user;
            if (level == GGML_LOG_LEVEL_ERROR && c.empty() && text) { // the first, most specific line
                c = text;
                while (!c.empty() && (c.back() == '\n' || c.back() == '\r')) c.pop_back();
            }
        },
        &captured);
    r->meta_ = gguf_init_from_file(path.c_str(), ip);
    ggml_log_set(nullptr, nullptr);
    if (!r->meta_) {
        err = captured.empty() ? "cannot read " + path + " as a GGUF file" : captured;
        return nullptr;
    }
    r->fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (r->fd_ < 0) {
        err = "cannot open " + path + ": " + strerror(errno);
        return nullptr;
    }
    return r;
}

reader::~reader() {
    if (fd_ >= 0) close(fd_);
    if (shells_) ggml_free(shells_);
    if (meta_) gguf_free(meta_);
}

int64_t reader::n_tensors() const {
    return gguf_get_n_tensors(meta_);
}

const ggml_tensor * reader::tensor(int64_t i) const {
    return ggml_get_tensor(shells_, gguf_get_tensor_name(meta_, i));
}

const ggml_tensor * reader::find(const std::string & name) const {
    return gguf_find_tensor(meta_, name.c_str()) < 0 ? nullptr : ggml_get_tensor(shells_, name.c_str());
}

bool reader::read_bytes(const ggml_tensor * t, std::vector<uint8_t> & out, std::string & err) const {
    const int64_t id = gguf_find_tensor(meta_, t->name);
    if (id < 0) {
        err = "tensor " + sdio::display_name(t->name) + " is not in " + path_;
        return false;
    }
    const size_t n   = gguf_get_tensor_size(meta_, id);
    uint64_t     off = gguf_get_data_offset(meta_) + gguf_get_tensor_offset(meta_, id);
    out.resize(n);
    size_t got = 0;
    while (got < n) {
        const ssize_t k = pread(fd_, out.data() + got, n - got, (off_t) (off + got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            err = "tensor " + sdio::display_name(t->name) + ": cannot read its data from " + path_ +
                  (k == 0 ? " (the file shrank after it was opened)" : std::string(": ") + strerror(errno));
            return false;
        }
        got += (size_t) k;
    }
    return true;
}

bool reader::read_f32(const ggml_tensor * t, std::vector<float> & out, std::string & err) const {
    const ggml_type_traits * tr = ggml_get_type_traits(t->type);
    if (t->type != GGML_TYPE_F32 && !tr->to_float) {
        err = "tensor " + sdio::display_name(t->name) + " has type " + ggml_type_name(t->type) +
              ", which this build cannot convert to float";
        return false;
    }
    std::vector<uint8_t> bytes;
    if (!read_bytes(t, bytes, err)) return false;
    const int64_t n = ggml_nelements(t);
    out.resize((size_t) n);
    if (t->type == GGML_TYPE_F32) {
        if (n > 0) memcpy(out.data(), bytes.data(), (size_t) n * sizeof(float));
    } else if (n > 0) {
        tr->to_float(bytes.data(), out.data(), n);
    }
    return true;
}

} // namespace sdgguf
