// quantize_gguf.cpp — checkpoints to GGUF with block-quantized linear weights (quantize_gguf.h).

#include "quantize_gguf.h"

#include "gguf.h"
#include "gguf_reader.h"
#include "io/atomic_file.h"
#include "io/comfy_int8.h"
#include "io/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <thread>
#include <strings.h>
#include <memory>
#include <vector>

#include <unistd.h>

namespace krea2 {

namespace {

// ggml_quantize_chunk over row ranges on all online CPUs: rows quantize independently, so the
// bytes are those of one call (sdx quantize was single-threaded: ~1,000 CPU-s for a 12B model to
// Q4_K). Small tensors (< 64 rows per thread) stay on this thread.
void quantize_rows_parallel(ggml_type type, const float * src, void * dst, int64_t nrows, int64_t n_per_row) {
    const unsigned hw  = std::max(1u, std::thread::hardware_concurrency());
    const int64_t  nth = std::min<int64_t>((int64_t) hw, nrows / 64);
    if (nth <= 1) {
        ggml_quantize_chunk(type, src, dst, 0, nrows, n_per_row, nullptr);
        return;
    }
    std::vector<std::thread> pool;
    for (int64_t t = 0; t < nth; ++t) {
        const int64_t r0 = nrows * t / nth, r1 = nrows * (t + 1) / nth;
        pool.emplace_back([=] { ggml_quantize_chunk(type, src, dst, r0 * n_per_row, r1 - r0, n_per_row, nullptr); });
    }
    for (std::thread & th : pool) th.join();
}

} // namespace


bool parse_quant_type(const std::string & name, ggml_type & out, std::string & available) {
    bool found = false;
    available.clear();
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        const ggml_type_traits * tr = ggml_get_type_traits((ggml_type) t);
        // float and block types the quantizer can write (integer types are not weights)
        if (!tr->type_name || !(t == GGML_TYPE_F32 || tr->from_float_ref)) continue;
        if (t == GGML_TYPE_Q8_1 || t == GGML_TYPE_Q8_K) continue; // activation-only (dot) types, not weights
        available += (available.empty() ? "" : ", ") + std::string(tr->type_name);
        if (strcasecmp(name.c_str(), tr->type_name) == 0) { // "q4_k" as well as upstream's "q4_K"
            out   = (ggml_type) t;
            found = true;
        }
    }
    return found;
}

namespace {

// One tensor of the input, whichever format it came from.
struct src_tensor {
    std::string name;
    ggml_type   type;              // stored type (safetensors dtypes mapped to ggml types)
    int64_t     ne[GGML_MAX_DIMS]; // ggml order
    int         n_dims;
    const void * handle;           // sdio::tensor_view or ggml_tensor shell
};

bool map_dtype(const std::string & d, ggml_type & t) {
    static const std::pair<const char *, ggml_type> k[] = {
        {"F32", GGML_TYPE_F32}, {"F16", GGML_TYPE_F16}, {"BF16", GGML_TYPE_BF16}, {"F64", GGML_TYPE_F64},
        {"I8", GGML_TYPE_I8},   {"I16", GGML_TYPE_I16}, {"I32", GGML_TYPE_I32},   {"I64", GGML_TYPE_I64},
    };
    for (const auto & e : k) {
        if (d == e.first) {
            t = e.second;
            return true;
        }
    }
    return false;
}

bool is_float_type(ggml_type t) {
    return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16;
}

bool ends_with(const std::string & s, const char * suf) {
    const size_t n = strlen(suf);
    return s.size() >= n && s.compare(s.size() - n, n, suf) == 0;
}

bool write_all(int fd, const void * p, size_t n, std::string & err, const std::string & path) {
    const uint8_t * b = (const uint8_t *) p;
    while (n > 0) {
        const ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            err = "writing " + path + ": " + strerror(errno);
            return false;
        }
        b += w;
        n -= (size_t) w;
    }
    return true;
}

} // namespace

bool quantize_to_gguf(const std::string & in, const std::string & out, ggml_type type, std::string & err,
                      const std::function<void(size_t, size_t)> & progress) {
    // --- the input's tensors
    std::unique_ptr<sdio::reader>   st;
    std::unique_ptr<sdgguf::reader> gg;
    std::vector<src_tensor>         list;
    if (sdgguf::is_gguf_file(in)) {
        gg = sdgguf::reader::open(in, err);
        if (!gg) return false;
        for (int64_t i = 0; i < gg->n_tensors(); ++i) {
            const ggml_tensor * t = gg->tensor(i);
            src_tensor          s{t->name, t->type, {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}, ggml_n_dims(t), t};
            list.push_back(s);
        }
    } else {
        st = sdio::reader::open(in, err);
        if (!st) return false;
        for (const sdio::tensor_view & t : st->tensors()) {
            if (ends_with(t.name, ".weight_scale") || ends_with(t.name, ".comfy_quant") || ends_with(t.name, ".input_scale")) {
                err = "tensor " + sdio::display_name(t.name) + ": " + in +
                      " is already a ComfyUI quantized checkpoint; quantize its float original instead";
                return false;
            }
            src_tensor s{t.name, GGML_TYPE_F32, {1, 1, 1, 1}, (int) t.shape.size(), &t};
            if (!map_dtype(t.dtype, s.type)) {
                err = "tensor " + sdio::display_name(t.name) + ": dtype " + t.dtype + " has no GGUF tensor type";
                return false;
            }
            if (t.shape.size() > GGML_MAX_DIMS) {
                err = "tensor " + sdio::display_name(t.name) + ": " + std::to_string(t.shape.size()) + " dimensions, GGUF holds at most 4";
                return false;
            }
            for (size_t d = 0; d < t.shape.size(); ++d) s.ne[d] = t.shape[t.shape.size() - 1 - d];
            list.push_back(s);
        }
    }

    // --- the output's meta data: tensor shells with the output types
    const size_t   n   = list.size();
    ggml_init_params ip = {(n + 1) * ggml_tensor_overhead(), nullptr, true};
    ggml_context * shells = ggml_init(ip);
    std::unique_ptr<ggml_context, void (*)(ggml_context *)> shells_guard(shells, ggml_free);
    std::unique_ptr<gguf_context, void (*)(gguf_context *)> ctx(gguf_init_empty(), gguf_free);
    if (gg) {
        gguf_set_kv(ctx.get(), gg->meta());
        // our output's layout is ours: the default alignment (an input's 2^29 would pad 512 MiB)
        gguf_remove_key(ctx.get(), GGUF_KEY_GENERAL_ALIGNMENT);
    }
    if (st) {
        for (const auto & kv : st->metadata()) {
            // the one key GGUF gives a meaning (a u32): a string there would make the file unreadable
            if (kv.first != GGUF_KEY_GENERAL_ALIGNMENT) gguf_set_val_str(ctx.get(), kv.first.c_str(), kv.second.c_str());
        }
    }
    gguf_set_val_str(ctx.get(), "sdx.quantized_to", ggml_type_name(type));
    std::vector<ggml_type> out_type(n);
    for (size_t i = 0; i < n; ++i) {
        const src_tensor & s = list[i];
        if (s.name.size() >= GGML_MAX_NAME) {
            err = "tensor " + sdio::display_name(s.name) + ": name longer than " + std::to_string(GGML_MAX_NAME - 1) + " bytes (GGUF tensor names are limited)";
            return false;
        }
        const bool linear = s.n_dims == 2 && ends_with(s.name, ".weight") && is_float_type(s.type) && s.ne[0] % ggml_blck_size(type) == 0;
        out_type[i]       = linear ? type : s.type;
        ggml_tensor * t   = ggml_new_tensor(shells, out_type[i], GGML_MAX_DIMS, s.ne);
        ggml_set_name(t, s.name.c_str());
        gguf_add_tensor(ctx.get(), t);
    }

    // --- stream: meta data, then each tensor converted, padded to the alignment
    sdio::atomic_file f;
    if (!f.open(out, err)) return false;
    std::vector<uint8_t> meta(gguf_get_meta_size(ctx.get()));
    gguf_get_meta_data(ctx.get(), meta.data());
    if (!write_all(f.fd(), meta.data(), meta.size(), err, out)) return false;
    const size_t         align = gguf_get_alignment(ctx.get());
    std::vector<uint8_t> bytes, conv;
    std::vector<float>   vals;
    const std::vector<uint8_t> zeros(align, 0);
    for (size_t i = 0; i < n; ++i) {
        if (f.interrupted()) {
            if (progress) progress(i, n); // the caller's own signal handling may unwind from here
            err = "interrupted; nothing written to " + out;
            return false;
        }
        const src_tensor & s = list[i];
        // the stored bytes
        if (gg) {
            if (!gg->read_bytes((const ggml_tensor *) s.handle, bytes, err)) return false;
        } else {
            const sdio::tensor_view * t = (const sdio::tensor_view *) s.handle;
            bytes.resize(t->nbytes);
            if (t->nbytes > 0 && !st->copy(*t, 0, t->nbytes, bytes.data(), err)) return false;
        }
        const uint8_t * data = bytes.data();
        size_t          size = bytes.size();
        if (out_type[i] != s.type) {
            const int64_t ne = s.ne[0] * s.ne[1];
            vals.resize((size_t) ne);
            if (s.type == GGML_TYPE_F32) memcpy(vals.data(), bytes.data(), (size_t) ne * 4);
            else ggml_get_type_traits(s.type)->to_float(bytes.data(), vals.data(), ne);
            for (int64_t k = 0; k < ne; ++k) {
                if (!std::isfinite(vals[(size_t) k])) {
                    err = "tensor " + sdio::display_name(s.name) + ": value " + std::to_string(k) + " is not finite, cannot quantize it";
                    return false;
                }
            }
            conv.resize(ggml_row_size(out_type[i], s.ne[0]) * (size_t) s.ne[1]);
            quantize_rows_parallel(out_type[i], vals.data(), conv.data(), s.ne[1], s.ne[0]);
            data = conv.data();
            size = conv.size();
        }
        if (!write_all(f.fd(), data, size, err, out)) return false;
        const size_t padn = (align - size % align) % align;
        if (padn && !write_all(f.fd(), zeros.data(), padn, err, out)) return false;
        if (progress) progress(i + 1, n);
    }
    // what we write must be what we read
    gguf_init_params vp = {true, nullptr};
    gguf_context *   v  = gguf_init_from_file(f.temp_path().c_str(), vp);
    if (!v) {
        err = "internal error: the GGUF written to " + f.temp_path() + " does not read back (see the line above)";
        return false;
    }
    gguf_free(v);
    return f.commit(err);
}

} // namespace krea2
