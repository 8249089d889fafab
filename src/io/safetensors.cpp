#include "io/safetensors.h"

#include "io/atomic_file.h"
#include "io/json.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>

#include <csetjmp>
#include <csignal>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// Tensor bytes are little-endian on disk and are copied to and from host floats with memcpy.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "sdio assumes a little-endian host");

namespace sdio {

namespace {

constexpr uint64_t k_max_header = k_max_header_bytes;

std::string errno_text() { return std::strerror(errno); }

std::string tensor_prefix(const std::string & path, const std::string & name) {
    return path + ": tensor '" + display_name(name) + "': ";
}

} // namespace

size_t dtype_size(const std::string & dtype) {
    static const std::pair<const char *, size_t> k_types[] = {
        {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
        {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},
        {"I32", 4},  {"U32", 4}, {"F32", 4},
        {"I64", 8},  {"U64", 8}, {"F64", 8},
    };
    for (const auto & t : k_types) {
        if (dtype == t.first) return t.second;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Reader

reader::~reader() {
    if (map_) munmap(map_, map_size_);
}

const std::vector<tensor_view> & reader::tensors() const { return tensors_; }

const tensor_view * reader::find(const std::string & name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &tensors_[it->second];
}

const std::map<std::string, std::string> & reader::metadata() const { return metadata_; }

namespace {

// Reads the header's events straight into tensor views: no JSON tree is built, so a hostile
// header costs about what the tensors it declares cost (and an array of a million zeros where an
// entry belongs is refused at its '['). Field order inside an entry is free, unknown fields are
// skipped, as the reference implementation does.
class header_reader : public json::handler {
  public:
    header_reader(const std::string & path, const uint8_t * data, uint64_t data_size)
        : path_(path), data_(data), data_size_(data_size) {}

    std::string                        err;
    std::vector<tensor_view>           tensors;
    std::map<std::string, std::string> metadata;
    struct span { uint64_t begin, end; size_t idx; };
    std::vector<span>                  spans;

    bool begin_object() override {
        switch (st_) {
            case state::top: st_ = state::root; return true;
            case state::entry_value: st_ = name_ == "__metadata__" ? state::metadata : state::entry; return true;
            case state::field_value:
                if (field_ != field::other) return field_type_error();
                return skip_open();
            case state::skip: return skip_open();
            case state::metadata: return bad("__metadata__ value for key '" + display_name(meta_key_) + "' is not a string");
            case state::in_shape: return bad_entry("shape entries must be non-negative integers");
            case state::in_offsets: return bad_entry("\"data_offsets\" must be non-negative integers");
            default: return bad("unexpected object");
        }
    }
    bool begin_array() override {
        switch (st_) {
            case state::top: return bad("header JSON is not an object");
            case state::entry_value:
                return name_ == "__metadata__" ? bad("__metadata__ is not an object") : bad_entry("entry is not an object");
            case state::field_value:
                if (field_ == field::shape) { st_ = state::in_shape; have_shape_ = true; return true; }
                if (field_ == field::offsets) { st_ = state::in_offsets; have_offsets_ = true; return true; }
                if (field_ == field::other) return skip_open();
                return field_type_error();
            case state::skip: return skip_open();
            case state::metadata: return bad("__metadata__ value for key '" + display_name(meta_key_) + "' is not a string");
            case state::in_shape: return bad_entry("shape entries must be non-negative integers");
            case state::in_offsets: return bad_entry("\"data_offsets\" must be non-negative integers");
            default: return bad("unexpected array");
        }
    }
    bool end_array() override {
        switch (st_) {
            case state::in_shape:
            case state::in_offsets: st_ = state::entry; return true;
            case state::skip: return skip_close();
            default: return bad("unexpected end of array");
        }
    }
    bool end_object() override {
        switch (st_) {
            case state::skip: return skip_close();
            case state::metadata: st_ = state::root; return true;
            case state::entry: st_ = state::root; return finish_entry();
            case state::root: st_ = state::done; return true;
            default: return bad("unexpected end of object");
        }
    }
    bool key(const std::string & k) override {
        switch (st_) {
            case state::root:
                name_ = k;
                st_   = state::entry_value;
                return true;
            case state::metadata: meta_key_ = k; return true;
            case state::entry:
                field_ = k == "dtype" ? field::dtype : k == "shape" ? field::shape : k == "data_offsets" ? field::offsets : field::other;
                st_    = state::field_value;
                return true;
            case state::skip: return true;
            default: return bad("unexpected key");
        }
    }
    bool scalar(json::value && v) override {
        switch (st_) {
            case state::top: return bad("header JSON is not an object");
            case state::entry_value:
                return name_ == "__metadata__" ? bad("__metadata__ is not an object") : bad_entry("entry is not an object");
            case state::metadata:
                if (!v.is_string()) return bad("__metadata__ value for key '" + display_name(meta_key_) + "' is not a string");
                metadata[meta_key_] = std::move(v.str);
                return true;
            case state::field_value:
                st_ = state::entry;
                if (field_ == field::dtype) {
                    if (!v.is_string()) return field_type_error();
                    dtype_      = std::move(v.str);
                    have_dtype_ = true;
                    return true;
                }
                if (field_ == field::other) return true;
                return field_type_error();
            case state::in_shape: {
                if (!v.is_number() || !v.is_int || v.i < 0) return bad_entry("shape entries must be non-negative integers");
                shape_.push_back(v.i);
                return true;
            }
            case state::in_offsets:
                if (!v.is_number() || !v.is_int || v.i < 0) return bad_entry("\"data_offsets\" must be non-negative integers");
                if (offsets_.size() == 2) return bad_entry("\"data_offsets\" must have exactly 2 entries");
                offsets_.push_back(v.i);
                return true;
            case state::skip: return true;
            default: return bad("unexpected value");
        }
    }

  private:
    enum class state { top, root, entry_value, entry, field_value, in_shape, in_offsets, metadata, skip, done };
    enum class field { dtype, shape, offsets, other };

    const std::string & path_;
    const uint8_t *     data_;
    uint64_t            data_size_;
    state               st_ = state::top;
    field               field_ = field::other;
    std::string         name_, meta_key_, dtype_;
    std::vector<int64_t> shape_, offsets_;
    bool                have_dtype_ = false, have_shape_ = false, have_offsets_ = false;
    int                 skip_depth_ = 0;

    bool bad(const std::string & msg) {
        err = path_ + ": " + msg;
        return false;
    }
    bool bad_entry(const std::string & msg) {
        err = tensor_prefix(path_, name_) + msg;
        return false;
    }
    bool field_type_error() {
        switch (field_) {
            case field::dtype: return bad_entry("missing or non-string \"dtype\"");
            case field::shape: return bad_entry("missing or non-array \"shape\"");
            default: return bad_entry("missing or non-array \"data_offsets\"");
        }
    }
    // An unknown field's value, however nested, is skipped without being kept.
    bool skip_open() {
        if (st_ != state::skip) st_ = state::skip;
        ++skip_depth_;
        return true;
    }
    bool skip_close() {
        if (--skip_depth_ == 0) st_ = state::entry;
        return true;
    }

    bool finish_entry() {
        tensor_view tv;
        tv.name  = std::move(name_);
        tv.dtype = std::move(dtype_);
        tv.shape = std::move(shape_);
        name_    = tv.name; // for messages
        const bool had_dtype = have_dtype_, had_shape = have_shape_, had_offsets = have_offsets_;
        std::vector<int64_t> off = std::move(offsets_);
        shape_.clear();
        offsets_.clear();
        dtype_.clear();
        have_dtype_ = have_shape_ = have_offsets_ = false;

        if (!had_dtype) return bad_entry("missing or non-string \"dtype\"");
        if (!had_shape) return bad_entry("missing or non-array \"shape\"");
        if (!had_offsets) return bad_entry("missing or non-array \"data_offsets\"");
        const size_t esize = dtype_size(tv.dtype);
        if (esize == 0) return bad_entry("unknown dtype \"" + display_name(tv.dtype) + "\"");

        // The element count times the element size is checked against the span in 128 bits, so a
        // hostile shape cannot wrap around to a small number.
        unsigned __int128 count = 1;
        bool              too_big = false, empty = false;
        for (const int64_t dim : tv.shape) {
            if (dim == 0) empty = true;
            if (!too_big) count *= (unsigned __int128) dim;
            if (count > ((unsigned __int128) 1 << 64)) too_big = true;
        }
        if (empty) { count = 0; too_big = false; }
        if (off.size() != 2) return bad_entry("\"data_offsets\" must have exactly 2 entries");
        const int64_t b = off[0], en = off[1];
        if (en < b) return bad_entry("data_offsets [" + std::to_string(b) + ", " + std::to_string(en) + "] end before begin");
        const unsigned __int128 want = count * esize;
        if (too_big || want != (unsigned __int128) (uint64_t) (en - b)) {
            std::string shp;
            for (size_t k = 0; k < tv.shape.size(); ++k) shp += (k ? "," : "") + std::to_string(tv.shape[k]);
            return bad_entry("shape [" + shp + "] of " + tv.dtype + " needs " +
                             (too_big ? std::string("more than 2^64") : std::to_string((uint64_t) want)) +
                             " bytes but data_offsets span " + std::to_string(en - b));
        }
        if ((uint64_t) en > data_size_) {
            return bad_entry("data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                             "] extend past the data section (" + std::to_string(data_size_) + " bytes)");
        }
        tv.data   = data_ + b;
        tv.nbytes = (size_t) (en - b);
        spans.push_back({(uint64_t) b, (uint64_t) en, tensors.size()});
        tensors.push_back(std::move(tv));
        return true;
    }
};

// ---------------------------------------------------------------------------------------------
// SIGBUS guard: a mapped file that shrinks after mmap faults with SIGBUS on access past its new
// end. Copies out of a mapping run with a per-thread jump target; the handler jumps back there
// instead of letting the process die, and passes any other SIGBUS on to the previous handler.

// volatile + signal fences: the compiler must not drop the store before the memcpy as dead
// (it knows memcpy does not read it; only the signal handler does).
thread_local sigjmp_buf * volatile t_bus_jump __attribute__((tls_model("initial-exec"))) = nullptr;
struct sigaction          g_old_bus;
std::once_flag            g_bus_once;

extern "C" void bus_handler(int sig, siginfo_t * info, void * ctx) {
    if (t_bus_jump) siglongjmp(*t_bus_jump, 1);
    // Not ours: restore the previous disposition; returning re-runs the faulting access.
    sigaction(SIGBUS, &g_old_bus, nullptr);
    (void) sig; (void) info; (void) ctx;
}

void install_bus_handler() {
    std::call_once(g_bus_once, [] {
        struct sigaction sa;
        std::memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = bus_handler;
        sa.sa_flags     = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, &g_old_bus);
    });
}

// The copy itself: nothing with a destructor lives in this frame, so jumping out is clean.
bool copy_guarded(void * dst, const void * src, size_t n) {
    sigjmp_buf jb;
    if (sigsetjmp(jb, 1) != 0) {
        t_bus_jump = nullptr;
        return false;
    }
    t_bus_jump = &jb;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    std::memcpy(dst, src, n);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t_bus_jump = nullptr;
    return true;
}

} // namespace

std::string display_name(const std::string & s) {
    std::string out;
    out.reserve(s.size());
    const unsigned char * p = (const unsigned char *) s.data();
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = p[i];
        char                buf[8];
        if (c == '\\') { out += "\\\\"; ++i; continue; }
        if (c < 0x20 || c == 0x7f) {
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
            ++i;
            continue;
        }
        if (c < 0x80) { out += (char) c; ++i; continue; }
        std::string one(s, i, std::min<size_t>(4, s.size() - i));
        size_t      len = 0;
        for (size_t l = 2; l <= one.size() && len == 0; ++l) {
            if (json::is_valid_utf8(one.substr(0, l))) len = l;
        }
        // C1 controls (U+0080..U+009F, UTF-8 C2 80..C2 9F) act on terminals too.
        if (len == 2 && c == 0xC2 && p[i + 1] < 0xA0) len = 0;
        if (len == 0) {
            std::snprintf(buf, sizeof buf, "\\x%02x", c);
            out += buf;
            ++i;
        } else {
            out.append(s, i, len);
            i += len;
        }
    }
    return out;
}

bool reader::copy(const tensor_view & t, size_t offset, size_t n, void * dst, std::string & err) const {
    if (offset > t.nbytes || n > t.nbytes - offset) {
        err = tensor_prefix(path_, t.name) + "read of " + std::to_string(n) + " bytes at " + std::to_string(offset) +
              " is outside the tensor (" + std::to_string(t.nbytes) + " bytes)";
        return false;
    }
    if (n == 0) return true;
    install_bus_handler();
    if (!copy_guarded(dst, t.data + offset, n)) {
        err = tensor_prefix(path_, t.name) + "the file shrank or became unreadable after it was opened (SIGBUS reading its data)";
        return false;
    }
    return true;
}

std::unique_ptr<reader> reader::open(const std::string & path, std::string & err) {
    std::unique_ptr<reader> r(new reader());
    r->path_ = path;

    // O_NONBLOCK: opening a FIFO must not wait for a writer before the type check refuses it.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) { err = path + ": cannot open: " + errno_text(); return nullptr; }
    struct stat st;
    if (fstat(fd, &st) != 0) { err = path + ": cannot stat: " + errno_text(); ::close(fd); return nullptr; }
    if (!S_ISREG(st.st_mode)) { err = path + ": not a regular file"; ::close(fd); return nullptr; }
    const uint64_t size = (uint64_t) st.st_size;
    if (size < 8) {
        err = path + ": file is " + std::to_string(size) + " bytes, too small for the 8-byte header length";
        ::close(fd);
        return nullptr;
    }
    void * m = mmap(nullptr, (size_t) size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int map_errno = errno;
    if (m == MAP_FAILED) { ::close(fd); err = path + ": cannot mmap: " + std::strerror(map_errno); return nullptr; }
    r->map_      = m;
    r->map_size_ = (size_t) size;

    // The header is copied out of the mapping (guarded) and parsed from the copy, so a file cut
    // short now is an error, not a SIGBUS; the size is checked again after the copy.
    uint8_t len_bytes[8];
    install_bus_handler();
    if (!copy_guarded(len_bytes, m, 8)) { ::close(fd); err = path + ": the file shrank while it was being opened"; return nullptr; }
    uint64_t n = 0;
    for (int k = 7; k >= 0; --k) n = (n << 8) | len_bytes[k]; // little-endian, independent of the host
    if (n > size - 8) {
        ::close(fd);
        err = path + ": header length " + std::to_string(n) + " exceeds the file (" + std::to_string(size) +
              " bytes, " + std::to_string(size - 8) + " after the length field): truncated or not a safetensors file";
        return nullptr;
    }
    if (n > k_max_header) {
        ::close(fd);
        err = path + ": header length " + std::to_string(n) + " exceeds the " + std::to_string(k_max_header) + "-byte limit";
        return nullptr;
    }
    std::string header((size_t) n, '\0');
    const bool  copied = copy_guarded(&header[0], (const uint8_t *) m + 8, (size_t) n);
    struct stat st2;
    const bool  same_size = fstat(fd, &st2) == 0 && (uint64_t) st2.st_size == size;
    ::close(fd); // the mapping keeps the file alive
    if (!copied || !same_size) { err = path + ": the file changed size while it was being opened"; return nullptr; }

    const uint64_t  data_size = size - 8 - n;
    const uint8_t * data      = (const uint8_t *) m + 8 + n;
    header_reader   h(path, data, data_size);
    std::string     jerr;
    if (!json::parse_events(header.data(), header.size(), h, jerr)) {
        err = jerr.empty() ? h.err : path + ": header is not valid JSON: " + jerr;
        return nullptr;
    }
    std::string().swap(header);
    r->metadata_ = std::move(h.metadata);
    r->tensors_  = std::move(h.tensors);
    auto & spans = h.spans;

    std::sort(spans.begin(), spans.end(), [&](const header_reader::span & x, const header_reader::span & y) {
        if (x.begin != y.begin) return x.begin < y.begin;
        if (x.end != y.end) return x.end < y.end;
        return r->tensors_[x.idx].name < r->tensors_[y.idx].name;
    });
    // Empty tensors occupy no bytes and so cannot overlap anything.
    const header_reader::span * prev = nullptr;
    for (const auto & s : spans) {
        if (s.begin == s.end) continue;
        if (prev && s.begin < prev->end) {
            err = tensor_prefix(path, r->tensors_[s.idx].name) + "data_offsets [" + std::to_string(s.begin) + ", " +
                  std::to_string(s.end) + "] overlap tensor '" + display_name(r->tensors_[prev->idx].name) + "' [" +
                  std::to_string(prev->begin) + ", " + std::to_string(prev->end) + "]";
            return nullptr;
        }
        prev = &s;
    }

    std::vector<tensor_view> sorted;
    sorted.reserve(spans.size());
    for (const auto & s : spans) sorted.push_back(std::move(r->tensors_[s.idx]));
    r->tensors_ = std::move(sorted);
    for (size_t k = 0; k < r->tensors_.size(); ++k) r->index_[r->tensors_[k].name] = k;
    return r;
}

// ---------------------------------------------------------------------------------------------
// Writer

namespace {

bool write_all(int fd, const uint8_t * p, size_t n, std::string & err) {
    while (n > 0) {
        const size_t  chunk = std::min<size_t>(n, (size_t) 1 << 30);
        const ssize_t w     = ::write(fd, p, chunk);
        if (w < 0) {
            if (errno == EINTR) continue;
            err = "write failed: " + errno_text();
            return false;
        }
        p += w;
        n -= (size_t) w;
    }
    return true;
}

// The header for specs, under the reader's rules; sizes[i] = bytes of tensor i.
bool build_header(const std::vector<tensor_out> & specs, const std::map<std::string, std::string> & metadata,
                  std::string & header, std::vector<uint64_t> & sizes, std::string & err) {
    header = "{";
    bool first = true;
    if (!metadata.empty()) {
        header += "\"__metadata__\":{";
        bool mfirst = true;
        for (const auto & kv : metadata) {
            if (!json::is_valid_utf8(kv.first) || !json::is_valid_utf8(kv.second)) {
                err = "metadata key '" + display_name(kv.first) + "': key or value is not valid UTF-8";
                return false;
            }
            if (!mfirst) header += ',';
            mfirst = false;
            json::append_quoted(header, kv.first);
            header += ':';
            json::append_quoted(header, kv.second);
        }
        header += '}';
        first = false;
    }
    std::map<std::string, int> seen;
    uint64_t                   offset = 0;
    sizes.clear();
    for (const auto & t : specs) {
        const std::string pre = "tensor '" + display_name(t.name) + "': ";
        if (t.name == "__metadata__") { err = "tensor name '__metadata__' is reserved"; return false; }
        if (!json::is_valid_utf8(t.name)) { err = pre + "name is not valid UTF-8"; return false; }
        if (seen[t.name]++) { err = "duplicate tensor name '" + display_name(t.name) + "'"; return false; }
        const size_t es = dtype_size(t.dtype);
        if (es == 0) { err = pre + "unknown dtype \"" + display_name(t.dtype) + "\""; return false; }
        unsigned __int128 count = 1;
        for (const int64_t d : t.shape) {
            if (d < 0) { err = pre + "negative dimension"; return false; }
            count *= (unsigned __int128) d;
            if (count > ((unsigned __int128) 1 << 62)) { err = pre + "too large"; return false; }
        }
        const uint64_t nbytes = (uint64_t) (count * es);
        // Offsets are read back as int64: the data section must end below 2^63.
        if (nbytes > ((uint64_t) 1 << 62) - offset) { err = pre + "the data section would exceed 2^62 bytes"; return false; }
        sizes.push_back(nbytes);
        if (!first) header += ',';
        first = false;
        json::append_quoted(header, t.name);
        header += ":{\"dtype\":";
        json::append_quoted(header, t.dtype);
        header += ",\"shape\":[";
        for (size_t k = 0; k < t.shape.size(); ++k) {
            if (k) header += ',';
            header += std::to_string(t.shape[k]);
        }
        header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + nbytes) + "]}";
        offset += nbytes;
        if (header.size() > k_max_header) break; // reported below, without building the rest
    }
    header += '}';
    // Pad with spaces (valid JSON whitespace) so the data section starts 8-byte aligned, as the
    // reference writer does; mmap users can then read F32/I64 data in place.
    while ((8 + header.size()) % 8 != 0) header += ' ';
    if (header.size() > k_max_header) {
        err = "the header would exceed the " + std::to_string(k_max_header) + "-byte limit readers apply (" +
              std::to_string(specs.size()) + " tensors)";
        return false;
    }
    return true;
}

} // namespace

bool write_streamed(const std::string & path, const std::vector<tensor_out> & specs,
                    const std::map<std::string, std::string> & metadata,
                    const std::function<bool(size_t, std::vector<uint8_t> &, std::string &)> & fill,
                    std::string & err) {
    std::string           header;
    std::vector<uint64_t> sizes;
    std::string           why;
    if (!build_header(specs, metadata, header, sizes, why)) { err = path + ": " + why; return false; }

    // Every exit below, including an exception from fill, removes the temporary (~atomic_file).
    atomic_file out;
    if (!out.open(path, err)) return false;
    const int fd = out.fd();

    uint8_t        len[8];
    const uint64_t n = header.size();
    for (int k = 0; k < 8; ++k) len[k] = (uint8_t) (n >> (8 * k));
    if (!write_all(fd, len, 8, why) || !write_all(fd, (const uint8_t *) header.data(), header.size(), why)) {
        err = path + ": " + why;
        return false;
    }

    std::vector<uint8_t> data;
    for (size_t i = 0; i < specs.size(); ++i) {
        if (out.interrupted()) break; // reported below; no point producing the rest
        data.clear();
        if (!fill(i, data, why)) {
            err = path + ": tensor '" + display_name(specs[i].name) + "': " + why;
            return false;
        }
        if ((uint64_t) data.size() != sizes[i]) {
            err = path + ": tensor '" + display_name(specs[i].name) + "': " + std::to_string(data.size()) +
                  " data bytes given, shape and dtype need " + std::to_string(sizes[i]);
            return false;
        }
        if (!write_all(fd, data.data(), data.size(), why)) {
            err = path + ": " + why;
            return false;
        }
    }
    if (out.interrupted()) { err = path + ": interrupted by a signal; the previous file (if any) is unchanged"; return false; }
    // The finished file must pass the reader before it may replace anything.
    if (fsync(fd) != 0) { err = path + ": fsync failed: " + errno_text(); return false; }
    std::string rerr;
    if (!reader::open(out.temp_path(), rerr)) {
        err = path + ": the file written does not pass the reader's checks, not replacing the target: " + rerr;
        return false;
    }
    return out.commit(err);
}

bool write(const std::string & path, const std::vector<tensor_out> & tensors, const std::map<std::string, std::string> & metadata,
           std::string & err) {
    // Sizes are checked up front so a bad tensor never even creates the temporary file.
    for (const auto & t : tensors) {
        const size_t es = dtype_size(t.dtype);
        if (es == 0) { err = path + ": tensor '" + display_name(t.name) + "': unknown dtype \"" + display_name(t.dtype) + "\""; return false; }
        unsigned __int128 count = 1;
        bool              neg   = false;
        for (const int64_t d : t.shape) {
            if (d < 0) neg = true;
            else count *= (unsigned __int128) d;
        }
        if (neg || count * es != (unsigned __int128) t.bytes.size()) {
            err = path + ": tensor '" + display_name(t.name) + "': " + std::to_string(t.bytes.size()) +
                  " data bytes given, which does not match its shape and dtype " + t.dtype;
            return false;
        }
    }
    return write_streamed(
        path, tensors, metadata,
        [&](size_t i, std::vector<uint8_t> & out, std::string &) {
            out = tensors[i].bytes;
            return true;
        },
        err);
}

// ---------------------------------------------------------------------------------------------
// Half-precision conversions

float f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t) (h & 0x8000) << 16;
    const uint32_t exp  = (h >> 10) & 0x1f;
    const uint32_t mant = h & 0x3ff;
    uint32_t       bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {
            const float v = std::ldexp((float) mant, -24); // exact: subnormal halves are k * 2^-24
            return sign ? -v : v;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

float bf16_to_f32(uint16_t h) {
    const uint32_t bits = (uint32_t) h << 16;
    float          f;
    std::memcpy(&f, &bits, 4);
    return f;
}

uint16_t f32_to_f16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint16_t sign = (uint16_t) ((x >> 16) & 0x8000);
    const uint32_t ax   = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) {
        if (ax == 0x7f800000u) return sign | 0x7c00;
        return (uint16_t) (sign | 0x7e00 | ((ax >> 13) & 0x3ff)); // quiet NaN, payload kept where it fits
    }
    if (ax >= 0x477ff000u) return sign | 0x7c00; // >= 65520 rounds (to even) past 65504
    if (ax < 0x38800000u) {                        // below 2^-14: half subnormal or zero
        if (ax <= 0x33000000u) return sign;        // <= 2^-25 rounds to zero (the tie goes to even 0)
        const uint32_t e     = ax >> 23;
        const uint32_t m     = (ax & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126 - e; // value / 2^-24 = m * 2^(e - 126)
        uint32_t       k     = m >> shift;
        const uint32_t rem   = m & ((1u << shift) - 1);
        const uint32_t half  = 1u << (shift - 1);
        if (rem > half || (rem == half && (k & 1))) ++k;
        return (uint16_t) (sign | k);
    }
    uint32_t       h   = ((ax >> 23) - 112) << 10 | ((ax & 0x7fffffu) >> 13);
    const uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h; // a carry moves into the exponent correctly
    return (uint16_t) (sign | h);
}

uint16_t f32_to_bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t) ((x >> 16) | 0x40);
    return (uint16_t) ((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

} // namespace sdio
