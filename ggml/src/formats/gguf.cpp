// gguf.cpp — GGUF files (gguf.h): the in-memory context (key/value pairs, tensor infos), the
// hardened reader and the writer.
//
// The reader trusts nothing in the file. Every count is bounded by the bytes left in the file
// before anything is allocated for it (a string needs 8 bytes of length, an array element at
// least one byte), so memory stays a small multiple of the file size; tensor shapes are checked
// for overflow, tensor data for alignment, range and overlap. Errors are one line naming the
// file, the field and its byte offset.

#include "gguf.h"

#include "ggml-impl.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

struct gguf_kv {
    std::string              key;
    gguf_type                type     = GGUF_TYPE_UINT8; // GGUF_TYPE_ARRAY for arrays
    gguf_type                arr_type = GGUF_TYPE_UINT8; // element type of an array
    size_t                   n        = 1;               // elements (1 for a scalar)
    std::vector<uint8_t>     data;                       // n * element size bytes (not strings)
    std::vector<std::string> strs;                       // string values (a scalar string: one)
};

struct gguf_tensor_info {
    std::string  name;
    ggml_type    type = GGML_TYPE_F32;
    int64_t      ne[GGML_MAX_DIMS] = {1, 1, 1, 1};
    uint64_t     offset = 0;       // in the data section
    const void * data   = nullptr; // what the writer writes (not owned)
};

size_t type_size_of(gguf_type t) {
    switch (t) {
        case GGUF_TYPE_UINT8:
        case GGUF_TYPE_INT8:
        case GGUF_TYPE_BOOL: return 1;
        case GGUF_TYPE_UINT16:
        case GGUF_TYPE_INT16: return 2;
        case GGUF_TYPE_UINT32:
        case GGUF_TYPE_INT32:
        case GGUF_TYPE_FLOAT32: return 4;
        case GGUF_TYPE_UINT64:
        case GGUF_TYPE_INT64:
        case GGUF_TYPE_FLOAT64: return 8;
        default: return 0; // strings, arrays, invalid
    }
}

bool is_valid_type(int32_t t) {
    return t >= 0 && t < GGUF_TYPE_COUNT;
}

// A type the runtime knows (traits with a name and sizes), so sizes computed from it are right.
bool is_known_tensor_type(int32_t t) {
    if (t < 0 || t >= GGML_TYPE_COUNT) return false;
    const ggml_type_traits * tr = ggml_get_type_traits((ggml_type) t);
    return tr->type_name != nullptr && tr->blck_size > 0 && tr->type_size > 0;
}

// Bytes of a tensor of this type and shape; false when it overflows 63 bits.
bool tensor_nbytes(ggml_type type, const int64_t ne[GGML_MAX_DIMS], uint64_t & out) {
    const uint64_t blck = (uint64_t) ggml_blck_size(type);
    const uint64_t ts   = ggml_type_size(type);
    if (ne[0] < 0 || (uint64_t) ne[0] % blck != 0) return false;
    unsigned __int128 n = (unsigned __int128) ((uint64_t) ne[0] / blck) * ts;
    for (int i = 1; i < GGML_MAX_DIMS; ++i) {
        if (ne[i] < 0) return false;
        n *= (uint64_t) ne[i];
        if (n > (unsigned __int128) INT64_MAX) return false;
    }
    if (n > (unsigned __int128) INT64_MAX) return false;
    out = (uint64_t) n;
    return true;
}

uint64_t pad_to(uint64_t x, uint64_t a) {
    return (x + a - 1) / a * a;
}

thread_local std::string g_last_error;

} // namespace

struct gguf_context {
    uint32_t                       version   = GGUF_VERSION;
    size_t                         alignment = GGUF_DEFAULT_ALIGNMENT;
    size_t                         data_offset = 0; // of a file read; meta size otherwise
    std::vector<gguf_kv>           kv;
    std::vector<gguf_tensor_info>  info;
    std::map<std::string, int64_t> tensor_index;

    int64_t find_key(const char * key) const {
        for (size_t i = 0; i < kv.size(); ++i) {
            if (kv[i].key == key) return (int64_t) i;
        }
        return -1;
    }

    // Offsets of a context being written: tensors one after another, each padded to the
    // alignment (upstream's layout).
    void recompute_offsets() {
        uint64_t off = 0;
        for (auto & t : info) {
            t.offset = off;
            uint64_t nb = 0;
            GGML_ASSERT(tensor_nbytes(t.type, t.ne, nb));
            off += pad_to(nb, alignment);
        }
    }

    // general.alignment changed (set or removed): take it and re-lay out the tensors
    void refresh_alignment() {
        const int64_t id = find_key(GGUF_KEY_GENERAL_ALIGNMENT);
        size_t        a  = GGUF_DEFAULT_ALIGNMENT;
        if (id >= 0) {
            const gguf_kv & e = kv[(size_t) id];
            GGML_ASSERT(e.type == GGUF_TYPE_UINT32 && "general.alignment must be a uint32");
            uint32_t v;
            memcpy(&v, e.data.data(), 4);
            GGML_ASSERT(v != 0 && (v & (v - 1)) == 0 && "general.alignment must be a power of two");
            a = v;
        }
        if (a != alignment) {
            alignment = a;
            recompute_offsets();
        }
    }
};

// ---------------------------------------------------------------------------------------------
// Reader

namespace {

// Sequential reads from the file with the position known for messages; buffered so small
// fields do not cost a system call each.
class file_cursor {
  public:
    file_cursor(int fd, uint64_t size) : fd_(fd), size_(size) {}

    uint64_t pos() const { return pos_; }
    uint64_t left() const { return size_ - pos_; }
    uint64_t size() const { return size_; }

    // false when fewer than n bytes remain (or the file cannot be read)
    bool read(void * dst, uint64_t n) {
        if (n > left()) return false;
        uint8_t * d = (uint8_t *) dst;
        while (n > 0) {
            if (buf_pos_ == buf_.size()) {
                if (!fill()) return false;
            }
            const size_t k = (size_t) std::min<uint64_t>(n, buf_.size() - buf_pos_);
            memcpy(d, buf_.data() + buf_pos_, k);
            d += k;
            buf_pos_ += k;
            pos_ += k;
            n -= k;
        }
        return true;
    }

  private:
    bool fill() {
        const size_t want = (size_t) std::min<uint64_t>(1u << 16, size_ - pos_);
        buf_.resize(want);
        size_t got = 0;
        while (got < want) {
            const ssize_t r = pread(fd_, buf_.data() + got, want - got, (off_t) (pos_ + got));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return false; // the file shrank or cannot be read
            got += (size_t) r;
        }
        buf_pos_ = 0;
        return true;
    }

    int                  fd_;
    uint64_t             size_;
    uint64_t             pos_ = 0;
    std::vector<uint8_t> buf_;
    size_t               buf_pos_ = 0;
};

class gguf_parser {
  public:
    gguf_parser(const char * fname, file_cursor & in) : fname_(fname), in_(in) {}

    // One line: file, what, where.
    bool fail(uint64_t at, const char * fmt, ...) __attribute__((format(printf, 3, 4))) {
        char    msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        char line[1024];
        snprintf(line, sizeof(line), "gguf_init_from_file: %s: %s (at byte offset %" PRIu64 ")", fname_.c_str(), msg, at);
        error_ = line;
        return false;
    }
    const std::string & error() const { return error_; }

    template <typename T> bool read_val(T & v, const char * what) {
        const uint64_t at = in_.pos();
        if (!in_.read(&v, sizeof(T))) {
            return fail(at, "file truncated: %s needs %zu bytes, %" PRIu64 " left", what, sizeof(T), in_.left());
        }
        return true;
    }

    bool read_string(std::string & s, const char * what) {
        const uint64_t at = in_.pos();
        uint64_t       len;
        if (!read_val(len, what)) return false;
        if (len > in_.left()) {
            return fail(at, "%s: length %" PRIu64 " exceeds the %" PRIu64 " bytes left in the file", what, len, in_.left());
        }
        s.resize((size_t) len);
        if (len > 0 && !in_.read(&s[0], len)) return fail(at, "%s: cannot read %" PRIu64 " bytes", what, len);
        return true;
    }

    // A printable form of a file-supplied name for messages (control bytes escaped, capped).
    static std::string shown(const std::string & s) {
        std::string o;
        for (size_t i = 0; i < s.size() && i < 80; ++i) {
            const unsigned char c = (unsigned char) s[i];
            if (c < 0x20 || c == 0x7f || c == '\\') { // NUL too
                char b[8];
                snprintf(b, sizeof(b), "\\x%02x", c);
                o += b;
            } else {
                o += (char) c;
            }
        }
        if (s.size() > 80) o += "...";
        return o;
    }

    bool parse(gguf_context & ctx);

  private:
    bool parse_kv(gguf_context & ctx, std::map<std::string, int> & seen);
    bool parse_tensor_info(gguf_context & ctx, int64_t i);

    std::string   fname_;
    file_cursor & in_;
    std::string   error_;
};

bool gguf_parser::parse_kv(gguf_context & ctx, std::map<std::string, int> & seen) {
    gguf_kv        e;
    const uint64_t at_key = in_.pos();
    if (!read_string(e.key, "key")) return false;
    // keys and names are looked up as C strings: an embedded NUL would make two differ only
    // after it (duplicates the lookups cannot tell apart)
    if (e.key.find('\0') != std::string::npos) return fail(at_key, "key '%s' contains a NUL byte", shown(e.key).c_str());
    if (!seen.emplace(e.key, 0).second) return fail(at_key, "duplicate key '%s'", shown(e.key).c_str());
    const uint64_t at_type = in_.pos();
    int32_t        type;
    if (!read_val(type, "key value type")) return false;
    if (!is_valid_type(type)) return fail(at_type, "key '%s': invalid value type %d", shown(e.key).c_str(), type);
    e.type = (gguf_type) type;

    gguf_type elem = e.type;
    uint64_t  n    = 1;
    if (e.type == GGUF_TYPE_ARRAY) {
        const uint64_t at_at = in_.pos();
        int32_t        at;
        if (!read_val(at, "array element type")) return false;
        if (!is_valid_type(at) || at == GGUF_TYPE_ARRAY) {
            return fail(at_at, "key '%s': invalid array element type %d", shown(e.key).c_str(), at);
        }
        e.arr_type = (gguf_type) at;
        elem       = e.arr_type;
        const uint64_t at_n = in_.pos();
        if (!read_val(n, "array length")) return false;
        // every element takes at least its size (a string at least its 8-byte length)
        const uint64_t min_elem = elem == GGUF_TYPE_STRING ? 8 : type_size_of(elem);
        if (n > in_.left() / min_elem) {
            return fail(at_n, "key '%s': array length %" PRIu64 " exceeds what the %" PRIu64 " bytes left in the file can hold",
                        shown(e.key).c_str(), n, in_.left());
        }
    }
    e.n = (size_t) n;
    if (elem == GGUF_TYPE_STRING) {
        e.strs.resize(e.n);
        for (size_t i = 0; i < e.n; ++i) {
            if (!read_string(e.strs[i], "string value")) {
                error_ += " [key '" + shown(e.key) + "']";
                return false;
            }
        }
    } else {
        const uint64_t at_v = in_.pos();
        const size_t   nb   = e.n * type_size_of(elem);
        e.data.resize(nb);
        if (nb > 0 && !in_.read(e.data.data(), nb)) {
            return fail(at_v, "file truncated: value of key '%s' needs %zu bytes, %" PRIu64 " left", shown(e.key).c_str(), nb, in_.left());
        }
    }
    if (e.key == GGUF_KEY_GENERAL_ALIGNMENT) {
        if (e.type != GGUF_TYPE_UINT32) {
            return fail(at_key, "key '" GGUF_KEY_GENERAL_ALIGNMENT "' has type %s, expected u32", gguf_type_name(e.type));
        }
        uint32_t a;
        memcpy(&a, e.data.data(), 4);
        if (a == 0 || (a & (a - 1)) != 0) {
            return fail(at_key, "key '" GGUF_KEY_GENERAL_ALIGNMENT "' is %u, not a power of two", a);
        }
        ctx.alignment = a;
    }
    ctx.kv.push_back(std::move(e));
    return true;
}

bool gguf_parser::parse_tensor_info(gguf_context & ctx, int64_t i) {
    gguf_tensor_info t;
    const uint64_t   at_name = in_.pos();
    if (!read_string(t.name, "tensor name")) return false;
    if (t.name.size() >= GGML_MAX_NAME) {
        return fail(at_name, "tensor %" PRId64 ": name '%s' is %zu bytes, the limit is %d", i, shown(t.name).c_str(), t.name.size(),
                    GGML_MAX_NAME - 1);
    }
    if (t.name.find('\0') != std::string::npos) return fail(at_name, "tensor name '%s' contains a NUL byte", shown(t.name).c_str());
    if (ctx.tensor_index.count(t.name)) return fail(at_name, "duplicate tensor name '%s'", shown(t.name).c_str());
    const std::string nm = shown(t.name);
    const uint64_t    at_dims = in_.pos();
    uint32_t          n_dims;
    if (!read_val(n_dims, "tensor dimension count")) return false;
    if (n_dims > GGML_MAX_DIMS) return fail(at_dims, "tensor '%s': %u dimensions, at most %d supported", nm.c_str(), n_dims, GGML_MAX_DIMS);
    for (uint32_t j = 0; j < n_dims; ++j) {
        const uint64_t at_ne = in_.pos();
        if (!read_val(t.ne[j], "tensor dimension")) return false;
        if (t.ne[j] < 0) return fail(at_ne, "tensor '%s': dimension %u is negative (%" PRId64 ")", nm.c_str(), j, t.ne[j]);
    }
    const uint64_t at_type = in_.pos();
    int32_t        type;
    if (!read_val(type, "tensor type")) return false;
    if (!is_known_tensor_type(type)) return fail(at_type, "tensor '%s': unknown or unsupported ggml type %d", nm.c_str(), type);
    t.type = (ggml_type) type;
    const int64_t blck = ggml_blck_size(t.type);
    if (t.ne[0] % blck != 0) {
        return fail(at_type, "tensor '%s': row length %" PRId64 " is not a multiple of the %s block size %" PRId64, nm.c_str(), t.ne[0],
                    ggml_type_name(t.type), blck);
    }
    uint64_t nbytes = 0;
    if (!tensor_nbytes(t.type, t.ne, nbytes)) return fail(at_dims, "tensor '%s': shape overflows", nm.c_str());
    const uint64_t at_off = in_.pos();
    if (!read_val(t.offset, "tensor data offset")) return false;
    if (t.offset % ctx.alignment != 0) {
        return fail(at_off, "tensor '%s': data offset %" PRIu64 " is not a multiple of the alignment %zu", nm.c_str(), t.offset, ctx.alignment);
    }
    ctx.tensor_index[t.name] = i;
    ctx.info.push_back(std::move(t));
    return true;
}

bool gguf_parser::parse(gguf_context & ctx) {
    char magic[4];
    if (!in_.read(magic, 4)) return fail(0, "file truncated: %" PRIu64 " bytes, not a GGUF file", in_.size());
    if (memcmp(magic, GGUF_MAGIC, 4) != 0) return fail(0, "bad magic (not a GGUF file)");
    const uint64_t at_ver = in_.pos();
    if (!read_val(ctx.version, "version")) return false;
    if ((ctx.version & 0x0000FFFFu) == 0) return fail(at_ver, "version 0x%08x: a big-endian file (not supported)", ctx.version);
    if (ctx.version == 1) return fail(at_ver, "GGUF version 1 is not supported");
    if (ctx.version > GGUF_VERSION) return fail(at_ver, "GGUF version %u is newer than this reader (%d)", ctx.version, GGUF_VERSION);

    const uint64_t at_nt = in_.pos();
    int64_t        n_tensors, n_kv;
    if (!read_val(n_tensors, "tensor count")) return false;
    const uint64_t at_nkv = in_.pos();
    if (!read_val(n_kv, "key/value count")) return false;
    // a tensor info takes at least 24 bytes (name length, n_dims, type, offset), a pair 13
    if (n_tensors < 0 || (uint64_t) n_tensors > in_.left() / 24) {
        return fail(at_nt, "tensor count %" PRId64 " is impossible for a %" PRIu64 "-byte file", n_tensors, in_.size());
    }
    if (n_kv < 0 || (uint64_t) n_kv > in_.left() / 13) {
        return fail(at_nkv, "key/value count %" PRId64 " is impossible for a %" PRIu64 "-byte file", n_kv, in_.size());
    }

    std::map<std::string, int> seen;
    for (int64_t i = 0; i < n_kv; ++i) {
        if (!parse_kv(ctx, seen)) return false;
    }
    for (int64_t i = 0; i < n_tensors; ++i) {
        if (!parse_tensor_info(ctx, i)) return false;
    }

    const uint64_t meta_end = in_.pos();
    ctx.data_offset         = (size_t) pad_to(meta_end, ctx.alignment);
    const uint64_t data_cap = in_.size() >= ctx.data_offset ? in_.size() - ctx.data_offset : 0;

    // Upstream's layout rule: tensor i starts where tensor i-1 ends, padded to the alignment
    // (so tensors never overlap), and the whole data section lies inside the file.
    uint64_t expect = 0;
    for (const gguf_tensor_info & t : ctx.info) {
        uint64_t nb = 0;
        tensor_nbytes(t.type, t.ne, nb);
        if (t.offset != expect) {
            return fail(meta_end, "tensor '%s': data offset %" PRIu64 ", expected %" PRIu64 " (tensors must follow each other, padded to %zu)",
                        shown(t.name).c_str(), t.offset, expect, ctx.alignment);
        }
        if (t.offset > data_cap || nb > data_cap - t.offset) {
            return fail(meta_end, "tensor '%s': data [%" PRIu64 ", %" PRIu64 ") lies outside the file (data section: %" PRIu64 " bytes from offset %zu)",
                        shown(t.name).c_str(), t.offset, t.offset + nb, data_cap, ctx.data_offset);
        }
        expect = t.offset + pad_to(nb, ctx.alignment);
    }
    return true;
}

bool read_at(int fd, void * dst, uint64_t n, uint64_t off) {
    uint8_t * d = (uint8_t *) dst;
    while (n > 0) {
        const size_t  chunk = (size_t) std::min<uint64_t>(n, 1u << 30);
        const ssize_t r     = pread(fd, d, chunk, (off_t) off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        d += r;
        off += (uint64_t) r;
        n -= (uint64_t) r;
    }
    return true;
}

gguf_context * init_failed(const std::string & msg) {
    g_last_error = msg;
    GGML_LOG_ERROR("%s\n", msg.c_str());
    return nullptr;
}

} // namespace

extern "C" struct gguf_context * gguf_init_empty(void) {
    return new gguf_context();
}

extern "C" struct gguf_context * gguf_init_from_file(const char * fname, struct gguf_init_params params) {
    g_last_error.clear();
    if (params.ctx) *params.ctx = nullptr;
    // O_NONBLOCK: opening a FIFO must not block before the type check below refuses it
    const int fd = open(fname, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return init_failed(std::string("gguf_init_from_file: cannot open ") + fname + ": " + strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return init_failed(std::string("gguf_init_from_file: ") + fname + ": not a regular file");
    }
    file_cursor    in(fd, (uint64_t) st.st_size);
    gguf_parser    p(fname, in);
    gguf_context * ctx = new gguf_context();
    if (!p.parse(*ctx)) {
        close(fd);
        delete ctx;
        return init_failed(p.error());
    }

    if (params.ctx) {
        // memory: one tensor object each, plus the data (bounded by the file: tensors are disjoint
        // ranges inside it)
        size_t mem = (ctx->info.size() + 1) * ggml_tensor_overhead();
        if (!params.no_alloc) {
            for (const auto & t : ctx->info) {
                uint64_t nb = 0;
                tensor_nbytes(t.type, t.ne, nb);
                mem += (size_t) pad_to(nb, GGML_MEM_ALIGN);
            }
        }
        ggml_init_params ip = {mem, nullptr, params.no_alloc};
        ggml_context *   gc = ggml_init(ip);
        for (const auto & t : ctx->info) {
            ggml_tensor * x = ggml_new_tensor(gc, t.type, GGML_MAX_DIMS, t.ne);
            ggml_set_name(x, t.name.c_str());
            if (!params.no_alloc) {
                const size_t nb = ggml_nbytes(x);
                if (nb > 0 && !read_at(fd, x->data, nb, ctx->data_offset + t.offset)) {
                    ggml_free(gc);
                    close(fd);
                    delete ctx;
                    return init_failed(std::string("gguf_init_from_file: ") + fname + ": cannot read the data of tensor '" +
                                       gguf_parser::shown(t.name) + "' (file truncated while reading?)");
                }
            }
        }
        *params.ctx = gc;
    }
    close(fd);
    return ctx;
}

extern "C" void gguf_free(struct gguf_context * ctx) {
    delete ctx;
}

extern "C" const char * gguf_type_name(enum gguf_type type) {
    switch (type) {
        case GGUF_TYPE_UINT8: return "u8";
        case GGUF_TYPE_INT8: return "i8";
        case GGUF_TYPE_UINT16: return "u16";
        case GGUF_TYPE_INT16: return "i16";
        case GGUF_TYPE_UINT32: return "u32";
        case GGUF_TYPE_INT32: return "i32";
        case GGUF_TYPE_FLOAT32: return "f32";
        case GGUF_TYPE_BOOL: return "bool";
        case GGUF_TYPE_STRING: return "str";
        case GGUF_TYPE_ARRAY: return "arr";
        case GGUF_TYPE_UINT64: return "u64";
        case GGUF_TYPE_INT64: return "i64";
        case GGUF_TYPE_FLOAT64: return "f64";
        default: return nullptr;
    }
}

extern "C" const char * gguf_last_error(void) {
    return g_last_error.c_str();
}

// ---------------------------------------------------------------------------------------------
// Getters (a wrong id or type is a programming error: abort, as upstream)

namespace {

const gguf_kv & kv_at(const gguf_context * ctx, int64_t id) {
    GGML_ASSERT(ctx && id >= 0 && id < (int64_t) ctx->kv.size() && "gguf: key id out of range");
    return ctx->kv[(size_t) id];
}

const gguf_tensor_info & ti_at(const gguf_context * ctx, int64_t id) {
    GGML_ASSERT(ctx && id >= 0 && id < (int64_t) ctx->info.size() && "gguf: tensor id out of range");
    return ctx->info[(size_t) id];
}

template <typename T> T scalar(const gguf_context * ctx, int64_t id, gguf_type want) {
    const gguf_kv & e = kv_at(ctx, id);
    if (e.type != want) GGML_ABORT("gguf: key '%s' has type %s, read as %s", e.key.c_str(), gguf_type_name(e.type), gguf_type_name(want));
    T v;
    memcpy(&v, e.data.data(), sizeof(T));
    return v;
}

} // namespace

extern "C" uint32_t gguf_get_version(const struct gguf_context * ctx) { return ctx->version; }
extern "C" size_t   gguf_get_alignment(const struct gguf_context * ctx) { return ctx->alignment; }
extern "C" size_t   gguf_get_data_offset(const struct gguf_context * ctx) { return ctx->data_offset; }
extern "C" int64_t  gguf_get_n_kv(const struct gguf_context * ctx) { return (int64_t) ctx->kv.size(); }

extern "C" int64_t gguf_find_key(const struct gguf_context * ctx, const char * key) {
    return ctx->find_key(key);
}

extern "C" const char * gguf_get_key(const struct gguf_context * ctx, int64_t key_id) {
    return kv_at(ctx, key_id).key.c_str();
}

extern "C" enum gguf_type gguf_get_kv_type(const struct gguf_context * ctx, int64_t key_id) {
    return kv_at(ctx, key_id).type;
}

extern "C" enum gguf_type gguf_get_arr_type(const struct gguf_context * ctx, int64_t key_id) {
    const gguf_kv & e = kv_at(ctx, key_id);
    if (e.type != GGUF_TYPE_ARRAY) GGML_ABORT("gguf: key '%s' is not an array", e.key.c_str());
    return e.arr_type;
}

extern "C" uint8_t  gguf_get_val_u8(const struct gguf_context * c, int64_t id) { return scalar<uint8_t>(c, id, GGUF_TYPE_UINT8); }
extern "C" int8_t   gguf_get_val_i8(const struct gguf_context * c, int64_t id) { return scalar<int8_t>(c, id, GGUF_TYPE_INT8); }
extern "C" uint16_t gguf_get_val_u16(const struct gguf_context * c, int64_t id) { return scalar<uint16_t>(c, id, GGUF_TYPE_UINT16); }
extern "C" int16_t  gguf_get_val_i16(const struct gguf_context * c, int64_t id) { return scalar<int16_t>(c, id, GGUF_TYPE_INT16); }
extern "C" uint32_t gguf_get_val_u32(const struct gguf_context * c, int64_t id) { return scalar<uint32_t>(c, id, GGUF_TYPE_UINT32); }
extern "C" int32_t  gguf_get_val_i32(const struct gguf_context * c, int64_t id) { return scalar<int32_t>(c, id, GGUF_TYPE_INT32); }
extern "C" float    gguf_get_val_f32(const struct gguf_context * c, int64_t id) { return scalar<float>(c, id, GGUF_TYPE_FLOAT32); }
extern "C" uint64_t gguf_get_val_u64(const struct gguf_context * c, int64_t id) { return scalar<uint64_t>(c, id, GGUF_TYPE_UINT64); }
extern "C" int64_t  gguf_get_val_i64(const struct gguf_context * c, int64_t id) { return scalar<int64_t>(c, id, GGUF_TYPE_INT64); }
extern "C" double   gguf_get_val_f64(const struct gguf_context * c, int64_t id) { return scalar<double>(c, id, GGUF_TYPE_FLOAT64); }
extern "C" bool     gguf_get_val_bool(const struct gguf_context * c, int64_t id) { return scalar<uint8_t>(c, id, GGUF_TYPE_BOOL) != 0; }

extern "C" const char * gguf_get_val_str(const struct gguf_context * ctx, int64_t key_id) {
    const gguf_kv & e = kv_at(ctx, key_id);
    if (e.type != GGUF_TYPE_STRING) GGML_ABORT("gguf: key '%s' has type %s, read as str", e.key.c_str(), gguf_type_name(e.type));
    return e.strs[0].c_str();
}

extern "C" const void * gguf_get_val_data(const struct gguf_context * ctx, int64_t key_id) {
    const gguf_kv & e = kv_at(ctx, key_id);
    if (e.type == GGUF_TYPE_STRING || e.type == GGUF_TYPE_ARRAY) GGML_ABORT("gguf: key '%s' is not a scalar number", e.key.c_str());
    return e.data.data();
}

extern "C" size_t gguf_get_arr_n(const struct gguf_context * ctx, int64_t key_id) {
    return kv_at(ctx, key_id).n;
}

extern "C" const void * gguf_get_arr_data(const struct gguf_context * ctx, int64_t key_id) {
    const gguf_kv & e = kv_at(ctx, key_id);
    // as upstream: any key holding numbers (a scalar is an array of one); strings have no raw data
    if (e.type == GGUF_TYPE_STRING || (e.type == GGUF_TYPE_ARRAY && e.arr_type == GGUF_TYPE_STRING)) {
        GGML_ABORT("gguf: key '%s' holds strings, not raw data", e.key.c_str());
    }
    return e.data.data();
}

extern "C" const char * gguf_get_arr_str(const struct gguf_context * ctx, int64_t key_id, size_t i) {
    const gguf_kv & e = kv_at(ctx, key_id);
    if (e.type != GGUF_TYPE_ARRAY || e.arr_type != GGUF_TYPE_STRING) GGML_ABORT("gguf: key '%s' is not an array of strings", e.key.c_str());
    GGML_ASSERT(i < e.strs.size() && "gguf_get_arr_str: index out of range");
    return e.strs[i].c_str();
}

extern "C" int64_t gguf_get_n_tensors(const struct gguf_context * ctx) { return (int64_t) ctx->info.size(); }

extern "C" int64_t gguf_find_tensor(const struct gguf_context * ctx, const char * name) {
    auto it = ctx->tensor_index.find(name);
    return it == ctx->tensor_index.end() ? -1 : it->second;
}

extern "C" size_t gguf_get_tensor_offset(const struct gguf_context * ctx, int64_t id) { return (size_t) ti_at(ctx, id).offset; }
extern "C" const char * gguf_get_tensor_name(const struct gguf_context * ctx, int64_t id) { return ti_at(ctx, id).name.c_str(); }
extern "C" enum ggml_type gguf_get_tensor_type(const struct gguf_context * ctx, int64_t id) { return ti_at(ctx, id).type; }

extern "C" size_t gguf_get_tensor_size(const struct gguf_context * ctx, int64_t id) {
    const gguf_tensor_info & t = ti_at(ctx, id);
    uint64_t                 nb = 0;
    tensor_nbytes(t.type, t.ne, nb);
    return (size_t) nb;
}

// ---------------------------------------------------------------------------------------------
// Setters

namespace {

// The pair for key, new at the end (an existing pair of that key is removed first).
gguf_kv & fresh_kv(gguf_context * ctx, const char * key) {
    GGML_ASSERT(ctx && key && "gguf: NULL context or key");
    const int64_t id = ctx->find_key(key);
    if (id >= 0) ctx->kv.erase(ctx->kv.begin() + id);
    ctx->kv.emplace_back();
    ctx->kv.back().key = key;
    return ctx->kv.back();
}

template <typename T> void set_scalar(gguf_context * ctx, const char * key, gguf_type type, T v) {
    gguf_kv & e = fresh_kv(ctx, key);
    e.type      = type;
    e.data.resize(sizeof(T));
    memcpy(e.data.data(), &v, sizeof(T));
    if (e.key == GGUF_KEY_GENERAL_ALIGNMENT) ctx->refresh_alignment();
}

} // namespace

extern "C" int64_t gguf_remove_key(struct gguf_context * ctx, const char * key) {
    const int64_t id = ctx->find_key(key);
    if (id >= 0) {
        ctx->kv.erase(ctx->kv.begin() + id);
        if (strcmp(key, GGUF_KEY_GENERAL_ALIGNMENT) == 0) ctx->refresh_alignment();
    }
    return id;
}

extern "C" void gguf_set_val_u8(struct gguf_context * c, const char * k, uint8_t v) { set_scalar(c, k, GGUF_TYPE_UINT8, v); }
extern "C" void gguf_set_val_i8(struct gguf_context * c, const char * k, int8_t v) { set_scalar(c, k, GGUF_TYPE_INT8, v); }
extern "C" void gguf_set_val_u16(struct gguf_context * c, const char * k, uint16_t v) { set_scalar(c, k, GGUF_TYPE_UINT16, v); }
extern "C" void gguf_set_val_i16(struct gguf_context * c, const char * k, int16_t v) { set_scalar(c, k, GGUF_TYPE_INT16, v); }
extern "C" void gguf_set_val_u32(struct gguf_context * c, const char * k, uint32_t v) { set_scalar(c, k, GGUF_TYPE_UINT32, v); }
extern "C" void gguf_set_val_i32(struct gguf_context * c, const char * k, int32_t v) { set_scalar(c, k, GGUF_TYPE_INT32, v); }
extern "C" void gguf_set_val_f32(struct gguf_context * c, const char * k, float v) { set_scalar(c, k, GGUF_TYPE_FLOAT32, v); }
extern "C" void gguf_set_val_u64(struct gguf_context * c, const char * k, uint64_t v) { set_scalar(c, k, GGUF_TYPE_UINT64, v); }
extern "C" void gguf_set_val_i64(struct gguf_context * c, const char * k, int64_t v) { set_scalar(c, k, GGUF_TYPE_INT64, v); }
extern "C" void gguf_set_val_f64(struct gguf_context * c, const char * k, double v) { set_scalar(c, k, GGUF_TYPE_FLOAT64, v); }
extern "C" void gguf_set_val_bool(struct gguf_context * c, const char * k, bool v) { set_scalar(c, k, GGUF_TYPE_BOOL, (uint8_t) (v ? 1 : 0)); }

extern "C" void gguf_set_val_str(struct gguf_context * ctx, const char * key, const char * val) {
    GGML_ASSERT(val && "gguf_set_val_str: NULL value");
    gguf_kv & e = fresh_kv(ctx, key);
    e.type      = GGUF_TYPE_STRING;
    e.strs.assign(1, std::string(val));
    if (e.key == GGUF_KEY_GENERAL_ALIGNMENT) ctx->refresh_alignment(); // aborts: must be a u32
}

extern "C" void gguf_set_arr_data(struct gguf_context * ctx, const char * key, enum gguf_type type, const void * data, size_t n) {
    const size_t ts = type_size_of(type);
    GGML_ASSERT(ts > 0 && "gguf_set_arr_data: element type must be a number or bool");
    GGML_ASSERT((data || n == 0) && n <= SIZE_MAX / ts);
    gguf_kv & e = fresh_kv(ctx, key);
    e.type      = GGUF_TYPE_ARRAY;
    e.arr_type  = type;
    e.n         = n;
    e.data.resize(n * ts);
    if (n > 0) memcpy(e.data.data(), data, n * ts);
    if (e.key == GGUF_KEY_GENERAL_ALIGNMENT) ctx->refresh_alignment();
}

extern "C" void gguf_set_arr_str(struct gguf_context * ctx, const char * key, const char ** data, size_t n) {
    GGML_ASSERT(data || n == 0);
    gguf_kv & e = fresh_kv(ctx, key);
    e.type      = GGUF_TYPE_ARRAY;
    e.arr_type  = GGUF_TYPE_STRING;
    e.n         = n;
    e.strs.resize(n);
    for (size_t i = 0; i < n; ++i) {
        GGML_ASSERT(data[i] && "gguf_set_arr_str: NULL string");
        e.strs[i] = data[i];
    }
    if (e.key == GGUF_KEY_GENERAL_ALIGNMENT) ctx->refresh_alignment();
}

extern "C" void gguf_set_kv(struct gguf_context * ctx, const struct gguf_context * src) {
    GGML_ASSERT(ctx != src && "gguf_set_kv: source and destination are the same context");
    for (const gguf_kv & s : src->kv) {
        gguf_kv & e = fresh_kv(ctx, s.key.c_str());
        e           = s;
    }
    ctx->refresh_alignment();
}

extern "C" void gguf_add_tensor(struct gguf_context * ctx, const struct ggml_tensor * tensor) {
    GGML_ASSERT(ctx && tensor);
    if (ctx->tensor_index.count(tensor->name)) GGML_ABORT("gguf_add_tensor: duplicate tensor name '%s'", tensor->name);
    GGML_ASSERT(is_known_tensor_type(tensor->type) && "gguf_add_tensor: unknown tensor type");
    gguf_tensor_info t;
    t.name = tensor->name;
    t.type = tensor->type;
    for (int i = 0; i < GGML_MAX_DIMS; ++i) t.ne[i] = tensor->ne[i];
    t.data = tensor->data;
    uint64_t nb = 0;
    GGML_ASSERT(tensor_nbytes(t.type, t.ne, nb) && "gguf_add_tensor: bad shape");
    uint64_t off = 0;
    if (!ctx->info.empty()) {
        const gguf_tensor_info & last = ctx->info.back();
        uint64_t                 lnb  = 0;
        tensor_nbytes(last.type, last.ne, lnb);
        off = last.offset + pad_to(lnb, ctx->alignment);
    }
    t.offset                         = off;
    ctx->tensor_index[t.name]        = (int64_t) ctx->info.size();
    ctx->info.push_back(std::move(t));
}

extern "C" void gguf_set_tensor_type(struct gguf_context * ctx, const char * name, enum ggml_type type) {
    const int64_t id = gguf_find_tensor(ctx, name);
    if (id < 0) GGML_ABORT("gguf_set_tensor_type: no tensor '%s'", name);
    GGML_ASSERT(is_known_tensor_type(type) && "gguf_set_tensor_type: unknown tensor type");
    gguf_tensor_info & t = ctx->info[(size_t) id];
    t.type               = type;
    uint64_t nb = 0;
    if (!tensor_nbytes(type, t.ne, nb)) GGML_ABORT("gguf_set_tensor_type: tensor '%s' rows are not whole %s blocks", name, ggml_type_name(type));
    // the following tensors move so that the data stays contiguous
    for (size_t i = (size_t) id + 1; i < ctx->info.size(); ++i) {
        const gguf_tensor_info & p = ctx->info[i - 1];
        uint64_t                 pnb = 0;
        tensor_nbytes(p.type, p.ne, pnb);
        ctx->info[i].offset = p.offset + pad_to(pnb, ctx->alignment);
    }
}

extern "C" void gguf_set_tensor_data(struct gguf_context * ctx, const char * name, const void * data) {
    const int64_t id = gguf_find_tensor(ctx, name);
    if (id < 0) GGML_ABORT("gguf_set_tensor_data: no tensor '%s'", name);
    ctx->info[(size_t) id].data = data;
}

// ---------------------------------------------------------------------------------------------
// Writer

namespace {

struct meta_writer {
    std::vector<uint8_t> out;

    void bytes(const void * p, size_t n) {
        const uint8_t * b = (const uint8_t *) p;
        out.insert(out.end(), b, b + n);
    }
    template <typename T> void val(T v) { bytes(&v, sizeof(T)); }
    void str(const std::string & s) {
        val<uint64_t>(s.size());
        bytes(s.data(), s.size());
    }
};

std::vector<uint8_t> build_meta(const gguf_context * ctx) {
    meta_writer w;
    w.bytes(GGUF_MAGIC, 4);
    w.val<uint32_t>(GGUF_VERSION);
    w.val<int64_t>((int64_t) ctx->info.size());
    w.val<int64_t>((int64_t) ctx->kv.size());
    for (const gguf_kv & e : ctx->kv) {
        w.str(e.key);
        w.val<int32_t>(e.type);
        if (e.type == GGUF_TYPE_ARRAY) {
            w.val<int32_t>(e.arr_type);
            w.val<uint64_t>(e.n);
        }
        const gguf_type elem = e.type == GGUF_TYPE_ARRAY ? e.arr_type : e.type;
        if (elem == GGUF_TYPE_STRING) {
            for (const std::string & s : e.strs) w.str(s);
        } else {
            w.bytes(e.data.data(), e.data.size());
        }
    }
    for (const gguf_tensor_info & t : ctx->info) {
        w.str(t.name);
        uint32_t n_dims = 1; // upstream's ggml_n_dims: trailing 1s are dropped
        for (int i = GGML_MAX_DIMS - 1; i >= 1; --i) {
            if (t.ne[i] != 1) {
                n_dims = (uint32_t) i + 1;
                break;
            }
        }
        w.val<uint32_t>(n_dims);
        for (uint32_t i = 0; i < n_dims; ++i) w.val<int64_t>(t.ne[i]);
        w.val<int32_t>(t.type);
        w.val<uint64_t>(t.offset);
    }
    w.out.resize((size_t) pad_to(w.out.size(), ctx->alignment), 0);
    return w.out;
}

} // namespace

extern "C" size_t gguf_get_meta_size(const struct gguf_context * ctx) {
    return build_meta(ctx).size();
}

extern "C" void gguf_get_meta_data(const struct gguf_context * ctx, void * data) {
    const std::vector<uint8_t> m = build_meta(ctx);
    memcpy(data, m.data(), m.size());
}

namespace {

// Every tensor with bytes to write has data (gguf_set_tensor_data); `what` names the target.
bool check_tensor_data(const gguf_context * ctx, const char * fn, const char * what) {
    for (const gguf_tensor_info & t : ctx->info) {
        uint64_t nb = 0;
        tensor_nbytes(t.type, t.ne, nb);
        if (nb > 0 && !t.data) {
            GGML_LOG_ERROR("%s: %s: tensor '%s' has no data (gguf_set_tensor_data)\n", fn, what, t.name.c_str());
            return false;
        }
    }
    return true;
}

// The file's bytes (meta data, then unless only_meta the tensor data in the info's offsets,
// zero-padded to the alignment) appended to f at its current position. false on a write error.
bool write_stream(const gguf_context * ctx, FILE * f, bool only_meta) {
    const std::vector<uint8_t> meta = build_meta(ctx);
    bool                       ok   = fwrite(meta.data(), 1, meta.size(), f) == meta.size();
    if (!only_meta) {
        static const uint8_t zeros[256] = {};
        uint64_t             written    = 0; // in the data section
        for (size_t i = 0; ok && i < ctx->info.size(); ++i) {
            const gguf_tensor_info & t = ctx->info[i];
            uint64_t                 nb = 0;
            tensor_nbytes(t.type, t.ne, nb);
            // the offsets are those of a contiguous layout, except in a context read from a file
            // with gaps: pad up to each tensor's offset
            while (ok && written < t.offset) {
                const size_t k = (size_t) std::min<uint64_t>(sizeof(zeros), t.offset - written);
                ok             = fwrite(zeros, 1, k, f) == k;
                written += k;
            }
            if (ok && written != t.offset) ok = false; // offsets out of order: cannot stream them
            if (ok && nb > 0) ok = fwrite(t.data, 1, (size_t) nb, f) == nb;
            written += nb;
            const uint64_t padded = pad_to(written, ctx->alignment);
            while (ok && written < padded) {
                const size_t k = (size_t) std::min<uint64_t>(sizeof(zeros), padded - written);
                ok             = fwrite(zeros, 1, k, f) == k;
                written += k;
            }
        }
    }
    return ok;
}

} // namespace

// Atomic like every other writer of this project (src/io/atomic_file.cpp): the bytes go to a
// temporary file next to fname, which replaces fname only once complete and flushed, so a failed
// or interrupted write leaves the old file (or none) rather than a truncated one. A path that
// exists but is not a regular file (a FIFO, /dev/stdout) cannot be replaced: it is written in
// place, as upstream writes every path.
extern "C" bool gguf_write_to_file(const struct gguf_context * ctx, const char * fname, bool only_meta) {
    if (!only_meta && !check_tensor_data(ctx, "gguf_write_to_file", fname)) return false;
    struct stat st;
    const bool  special = stat(fname, &st) == 0 && !S_ISREG(st.st_mode);
    if (special) {
        FILE * f = fopen(fname, "wb");
        if (!f) {
            GGML_LOG_ERROR("gguf_write_to_file: cannot open %s: %s\n", fname, strerror(errno));
            return false;
        }
        bool ok = write_stream(ctx, f, only_meta);
        if (fclose(f) != 0) ok = false;
        if (!ok) GGML_LOG_ERROR("gguf_write_to_file: writing %s failed\n", fname);
        return ok;
    }
    // a fresh name next to fname, created with O_EXCL and mode 0666 so the umask applies as it
    // would for fopen (mkstemp's 0600 would not); a replaced file keeps its own mode
    static std::atomic<unsigned> counter{0};
    std::string                  tmp;
    int                          fd = -1;
    for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
        tmp = std::string(fname) + ".tmp." + std::to_string((long) getpid()) + "." + std::to_string(counter++);
        fd  = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        GGML_LOG_ERROR("gguf_write_to_file: cannot create %s: %s\n", tmp.c_str(), strerror(errno));
        return false;
    }
    if (stat(fname, &st) == 0) (void) fchmod(fd, st.st_mode & 07777);
    FILE * f = fdopen(fd, "wb");
    if (!f) {
        GGML_LOG_ERROR("gguf_write_to_file: cannot create %s: %s\n", fname, strerror(errno));
        close(fd);
        unlink(tmp.c_str());
        return false;
    }
    bool ok = write_stream(ctx, f, only_meta);
    ok      = fflush(f) == 0 && ok;
    ok      = fsync(fileno(f)) == 0 && ok;
    if (fclose(f) != 0) ok = false;
    if (ok && rename(tmp.c_str(), fname) != 0) {
        GGML_LOG_ERROR("gguf_write_to_file: cannot rename %s to %s: %s\n", tmp.c_str(), fname, strerror(errno));
        unlink(tmp.c_str());
        return false;
    }
    if (!ok) {
        GGML_LOG_ERROR("gguf_write_to_file: writing %s failed\n", fname);
        unlink(tmp.c_str());
    }
    return ok;
}

// Upstream's FILE * writer: the same bytes as gguf_write_to_file, written at the stream's current
// position. The caller owns the stream (not flushed or closed here, as upstream).
extern "C" bool gguf_write_to_file_ptr(const struct gguf_context * ctx, FILE * file, bool only_meta) {
    if (file == nullptr) {
        GGML_LOG_ERROR("gguf_write_to_file_ptr: file is NULL\n");
        return false;
    }
    if (!only_meta && !check_tensor_data(ctx, "gguf_write_to_file_ptr", "stream")) return false;
    const bool ok = write_stream(ctx, file, only_meta);
    if (!ok) GGML_LOG_ERROR("gguf_write_to_file_ptr: writing the stream failed\n");
    return ok;
}
