#include "io/safetensors.h"

#include "io/json.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// Tensor bytes are little-endian on disk and are copied to and from host floats with memcpy.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "sdio assumes a little-endian host");

namespace sdio {

namespace {

// The reference implementation refuses larger headers; so do we, before parsing anything.
constexpr uint64_t k_max_header = 100u * 1000u * 1000u;

std::string errno_text() { return std::strerror(errno); }

std::string tensor_prefix(const std::string & path, const std::string & name) {
    return path + ": tensor '" + name + "': ";
}

// Non-negative exact integer from a JSON number (shape entries and offsets).
bool as_index(const json::value & v, int64_t & out) {
    if (!v.is_number() || !v.is_int || v.i < 0) return false;
    out = v.i;
    return true;
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

std::unique_ptr<reader> reader::open(const std::string & path, std::string & err) {
    std::unique_ptr<reader> r(new reader());
    r->path_ = path;

    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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
    ::close(fd); // the mapping keeps the file alive
    if (m == MAP_FAILED) { err = path + ": cannot mmap: " + std::strerror(map_errno); return nullptr; }
    r->map_      = m;
    r->map_size_ = (size_t) size;

    const uint8_t * base = (const uint8_t *) m;
    uint64_t        n    = 0;
    for (int k = 7; k >= 0; --k) n = (n << 8) | base[k]; // little-endian, independent of the host
    if (n > size - 8) {
        err = path + ": header length " + std::to_string(n) + " exceeds the file (" + std::to_string(size) +
              " bytes, " + std::to_string(size - 8) + " after the length field): truncated or not a safetensors file";
        return nullptr;
    }
    if (n > k_max_header) {
        err = path + ": header length " + std::to_string(n) + " exceeds the " + std::to_string(k_max_header) + "-byte limit";
        return nullptr;
    }

    json::value root;
    std::string jerr;
    if (!json::parse((const char *) base + 8, (size_t) n, root, jerr)) {
        err = path + ": header is not valid JSON: " + jerr;
        return nullptr;
    }
    if (!root.is_object()) { err = path + ": header JSON is not an object"; return nullptr; }

    const uint64_t  data_size = size - 8 - n;
    const uint8_t * data      = base + 8 + n;

    struct span { uint64_t begin, end; size_t idx; };
    std::vector<span> spans;

    for (const auto & kv : root.obj) {
        const std::string & name = kv.first;
        const json::value & e    = kv.second;
        if (name == "__metadata__") {
            if (!e.is_object()) { err = path + ": __metadata__ is not an object"; return nullptr; }
            for (const auto & mkv : e.obj) {
                if (!mkv.second.is_string()) {
                    err = path + ": __metadata__ value for key '" + mkv.first + "' is not a string";
                    return nullptr;
                }
                r->metadata_[mkv.first] = mkv.second.str;
            }
            continue;
        }
        const std::string pre = tensor_prefix(path, name);
        if (!e.is_object()) { err = pre + "entry is not an object"; return nullptr; }
        const json::value * jd = e.get("dtype");
        const json::value * js = e.get("shape");
        const json::value * jo = e.get("data_offsets");
        if (!jd || !jd->is_string()) { err = pre + "missing or non-string \"dtype\""; return nullptr; }
        if (!js || !js->is_array()) { err = pre + "missing or non-array \"shape\""; return nullptr; }
        if (!jo || !jo->is_array()) { err = pre + "missing or non-array \"data_offsets\""; return nullptr; }

        tensor_view tv;
        tv.name  = name;
        tv.dtype = jd->str;
        const size_t esize = dtype_size(tv.dtype);
        if (esize == 0) { err = pre + "unknown dtype \"" + tv.dtype + "\""; return nullptr; }

        // The element count times the element size is checked against the span in 128 bits, so a
        // hostile shape cannot wrap around to a small number.
        unsigned __int128 count = 1;
        bool              too_big = false, empty = false;
        for (const auto & d : js->arr) {
            int64_t dim;
            if (!as_index(d, dim)) { err = pre + "shape entries must be non-negative integers"; return nullptr; }
            tv.shape.push_back(dim);
            if (dim == 0) empty = true;
            if (!too_big) count *= (unsigned __int128) dim;
            if (count > ((unsigned __int128) 1 << 64)) too_big = true;
        }
        if (empty) { count = 0; too_big = false; }
        if (jo->arr.size() != 2) { err = pre + "\"data_offsets\" must have exactly 2 entries"; return nullptr; }
        int64_t b, en;
        if (!as_index(jo->arr[0], b) || !as_index(jo->arr[1], en)) {
            err = pre + "\"data_offsets\" must be non-negative integers";
            return nullptr;
        }
        if (en < b) {
            err = pre + "data_offsets [" + std::to_string(b) + ", " + std::to_string(en) + "] end before begin";
            return nullptr;
        }
        const unsigned __int128 want = count * esize;
        if (too_big || want != (unsigned __int128) (uint64_t) (en - b)) {
            std::string shp;
            for (size_t k = 0; k < tv.shape.size(); ++k) shp += (k ? "," : "") + std::to_string(tv.shape[k]);
            err = pre + "shape [" + shp + "] of " + tv.dtype + " needs " +
                  (too_big ? std::string("more than 2^64") : std::to_string((uint64_t) want)) +
                  " bytes but data_offsets span " + std::to_string(en - b);
            return nullptr;
        }
        if ((uint64_t) en > data_size) {
            err = pre + "data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                  "] extend past the data section (" + std::to_string(data_size) + " bytes)";
            return nullptr;
        }
        tv.data   = data + b;
        tv.nbytes = (size_t) (en - b);
        spans.push_back({(uint64_t) b, (uint64_t) en, r->tensors_.size()});
        r->tensors_.push_back(std::move(tv));
    }

    std::sort(spans.begin(), spans.end(), [&](const span & x, const span & y) {
        if (x.begin != y.begin) return x.begin < y.begin;
        if (x.end != y.end) return x.end < y.end;
        return r->tensors_[x.idx].name < r->tensors_[y.idx].name;
    });
    // Empty tensors occupy no bytes and so cannot overlap anything.
    const span * prev = nullptr;
    for (const auto & s : spans) {
        if (s.begin == s.end) continue;
        if (prev && s.begin < prev->end) {
            err = tensor_prefix(path, r->tensors_[s.idx].name) + "data_offsets [" + std::to_string(s.begin) + ", " +
                  std::to_string(s.end) + "] overlap tensor '" + r->tensors_[prev->idx].name + "' [" +
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

bool build_header(const std::vector<tensor_out> & specs, const std::map<std::string, std::string> & metadata,
                  std::string & header, std::vector<uint64_t> & sizes, std::string & err) {
    header = "{";
    bool first = true;
    if (!metadata.empty()) {
        header += "\"__metadata__\":{";
        bool mfirst = true;
        for (const auto & kv : metadata) {
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
        if (t.name == "__metadata__") { err = "tensor name '__metadata__' is reserved"; return false; }
        if (seen[t.name]++) { err = "duplicate tensor name '" + t.name + "'"; return false; }
        const size_t es = dtype_size(t.dtype);
        if (es == 0) { err = "tensor '" + t.name + "': unknown dtype \"" + t.dtype + "\""; return false; }
        unsigned __int128 count = 1;
        for (const int64_t d : t.shape) {
            if (d < 0) { err = "tensor '" + t.name + "': negative dimension"; return false; }
            count *= (unsigned __int128) d;
            if (count > ((unsigned __int128) 1 << 62)) { err = "tensor '" + t.name + "': too large"; return false; }
        }
        const uint64_t nbytes = (uint64_t) (count * es);
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
    }
    header += '}';
    // Pad with spaces (valid JSON whitespace) so the data section starts 8-byte aligned, as the
    // reference writer does; mmap users can then read F32/I64 data in place.
    while ((8 + header.size()) % 8 != 0) header += ' ';
    return true;
}

std::string dir_of(const std::string & path) {
    const size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

std::string base_of(const std::string & path) {
    const size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
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

    const std::string dir = dir_of(path);
    std::string       tmpl = dir + "/." + base_of(path) + ".tmp.XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    const int fd = mkostemp(buf.data(), O_CLOEXEC);
    if (fd < 0) { err = path + ": cannot create a temporary file in '" + dir + "': " + errno_text(); return false; }
    const std::string tmp(buf.data());

    auto fail = [&](const std::string & msg) {
        ::close(fd);
        ::unlink(tmp.c_str());
        err = path + ": " + msg;
        return false;
    };

    // mkstemp creates 0600; a model file is meant to be shared like any other output.
    if (fchmod(fd, 0644) != 0) return fail("cannot set permissions: " + errno_text());

    uint8_t        len[8];
    const uint64_t n = header.size();
    for (int k = 0; k < 8; ++k) len[k] = (uint8_t) (n >> (8 * k));
    if (!write_all(fd, len, 8, why) || !write_all(fd, (const uint8_t *) header.data(), header.size(), why)) return fail(why);

    std::vector<uint8_t> data;
    for (size_t i = 0; i < specs.size(); ++i) {
        data.clear();
        if (!fill(i, data, why)) return fail("tensor '" + specs[i].name + "': " + why);
        if ((uint64_t) data.size() != sizes[i]) {
            return fail("tensor '" + specs[i].name + "': " + std::to_string(data.size()) + " data bytes given, shape and dtype need " +
                        std::to_string(sizes[i]));
        }
        if (!write_all(fd, data.data(), data.size(), why)) return fail(why);
    }
    if (fsync(fd) != 0) return fail("fsync failed: " + errno_text());
    if (::close(fd) != 0) {
        ::unlink(tmp.c_str());
        err = path + ": close failed: " + errno_text();
        return false;
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string e = errno_text();
        ::unlink(tmp.c_str());
        err = path + ": cannot rename the temporary file into place: " + e;
        return false;
    }
    // Make the rename itself durable; failure here leaves a complete file, so it is not an error.
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void) fsync(dfd);
        ::close(dfd);
    }
    return true;
}

bool write(const std::string & path, const std::vector<tensor_out> & tensors, const std::map<std::string, std::string> & metadata,
           std::string & err) {
    // Sizes are checked up front so a bad tensor never even creates the temporary file.
    for (const auto & t : tensors) {
        const size_t es = dtype_size(t.dtype);
        if (es == 0) { err = path + ": tensor '" + t.name + "': unknown dtype \"" + t.dtype + "\""; return false; }
        unsigned __int128 count = 1;
        bool              neg   = false;
        for (const int64_t d : t.shape) {
            if (d < 0) neg = true;
            else count *= (unsigned __int128) d;
        }
        if (neg || count * es != (unsigned __int128) t.bytes.size()) {
            err = path + ": tensor '" + t.name + "': " + std::to_string(t.bytes.size()) +
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
