#include "io/comfy_int8.h"

#include "io/atomic_file.h"
#include "io/json.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

// Tensor bytes are little-endian on disk and are copied to and from host floats with memcpy.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "sdio assumes a little-endian host");

namespace sdio {

namespace {

constexpr size_t k_max_comfy_quant = 64 * 1024;

std::string where(const reader & r, const std::string & tensor) { return r.path() + ": tensor '" + display_name(tensor) + "': "; }

bool is_float_dtype(const std::string & d) { return d == "F32" || d == "F16" || d == "BF16"; }

std::string shape_text(const std::vector<int64_t> & s) {
    std::string t = "[";
    for (size_t k = 0; k < s.size(); ++k) t += (k ? "," : "") + std::to_string(s[k]);
    return t + "]";
}

// Widens t to F32 through reader::copy (chunked), so a file that shrank after it was opened is
// an error naming the tensor, not a SIGBUS.
bool widen(const reader & r, const tensor_view & t, float * out, std::string & err) {
    const size_t n = t.nbytes / dtype_size(t.dtype);
    if (t.dtype == "F32") return r.copy(t, 0, n * 4, out, err);
    const bool            bf = t.dtype == "BF16";
    constexpr size_t      k_chunk = 32768;
    std::vector<uint16_t> h(std::min(n, k_chunk));
    for (size_t i0 = 0; i0 < n; i0 += k_chunk) {
        const size_t m = std::min(k_chunk, n - i0);
        if (!r.copy(t, 2 * i0, 2 * m, h.data(), err)) return false;
        for (size_t i = 0; i < m; ++i) out[i0 + i] = bf ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
    }
    return true;
}

// Everything read_linear learns from a module's comfy_quant configuration.
struct quant_config {
    bool int8              = false;
    bool convrot           = false;
    int  group             = 0;
    bool full_precision_mm = false;
};

bool same_config(const quant_config & a, const quant_config & b) {
    return a.int8 == b.int8 && a.convrot == b.convrot && a.group == b.group && a.full_precision_mm == b.full_precision_mm;
}

std::string describe(const quant_config & c) {
    std::string d = c.convrot ? "int8_tensorwise with ConvRot group " + std::to_string(c.group) : "int8_tensorwise without rotation";
    if (c.full_precision_mm) d += ", full_precision_matrix_mult";
    return d;
}

// Keys of a comfy_quant object. ComfyUI's loader (comfy/ops.py, _load_quantized_module) reads
// "format", "full_precision_matrix_mult", "convrot" and "convrot_groupsize", the last two either
// at the top level or inside a "params" object (the top level wins there). The descriptive keys
// are written by convert-to-quant and carry nothing ComfyUI uses. Any other key is a warning
// naming it, not a refusal: ComfyUI ignores keys it does not read, so files written by other tools
// (extra bookkeeping keys) load there, and the keys that decide the layout are all read here.
const char * const k_read_keys[]        = {"format", "convrot", "convrot_groupsize", "params", "full_precision_matrix_mult"};
const char * const k_descriptive_keys[] = {"per_row", "scale_dtype", "orig_dtype", "orig_shape"};

template <size_t N> bool one_of(const std::string & k, const char * const (&set)[N]) {
    for (const char * s : set)
        if (k == s) return true;
    return false;
}

// A JSON number that is an integer (ComfyUI applies int(), so 256.0 reads as 256; 256.5 or a
// string is refused here rather than truncated).
bool integral(const json::value & v, int64_t & out) {
    if (!v.is_number()) return false;
    if (v.is_int) { out = v.i; return true; }
    if (!(std::fabs(v.num) < 9.0e15) || std::floor(v.num) != v.num) return false;
    out = (int64_t) v.num;
    return true;
}

// One setting that may sit at the top level or in "params": both present and different is an
// error (ComfyUI would silently take the top level one).
const json::value * pick(const json::value & top, const json::value * params, const char * key, std::string & why) {
    const json::value * a = top.get(key);
    const json::value * b = params ? params->get(key) : nullptr;
    if (a && b) {
        int64_t    ia = 0, ib = 0;
        const bool same = (a->is_bool() && b->is_bool() && a->b == b->b) ||
                          (integral(*a, ia) && integral(*b, ib) && ia == ib); // 16 and 16.0 agree
        if (!same) {
            why = std::string("\"") + key + "\" is given both at the top level and in \"params\" with different values";
            return nullptr;
        }
    }
    return a ? a : b;
}

// Interprets one comfy_quant object (from the tensor or from the header) for a weight
// [out, in]. why: the reason, without the tensor prefix.
// warns: one line per unknown key (ignored, as ComfyUI ignores it).
bool interpret_quant(const json::value & v, int64_t out, int64_t in, quant_config & cfg, std::string & why,
                     std::vector<std::string> & warns) {
    cfg = quant_config();
    why.clear(); // pick() reports through it
    if (!v.is_object()) { why = "comfy_quant JSON is not an object"; return false; }
    for (const auto & kv : v.obj) {
        if (one_of(kv.first, k_read_keys) || one_of(kv.first, k_descriptive_keys)) continue;
        warns.push_back("unknown comfy_quant key \"" + kv.first +
                        "\" ignored, as ComfyUI ignores it (read: format, convrot, convrot_groupsize, params, "
                        "full_precision_matrix_mult; descriptive: per_row, scale_dtype, orig_dtype, orig_shape)");
    }
    const json::value * fmt = v.get("format");
    if (!fmt || !fmt->is_string()) { why = "comfy_quant has no string \"format\""; return false; }
    if (fmt->str != "int8_tensorwise") {
        why = "unsupported comfy_quant format \"" + fmt->str + "\" (only int8_tensorwise)";
        return false;
    }
    cfg.int8 = true;

    const json::value * params = v.get("params");
    if (params) {
        if (!params->is_object()) { why = "comfy_quant \"params\" must be an object"; return false; }
        for (const auto & kv : params->obj) {
            if (kv.first == "convrot" || kv.first == "convrot_groupsize") continue;
            warns.push_back("unknown key \"" + kv.first +
                            "\" in comfy_quant \"params\" ignored, as ComfyUI ignores it (read: convrot, convrot_groupsize)");
        }
    }
    for (const char * k : {"full_precision_matrix_mult", "per_row"}) {
        const json::value * b = v.get(k);
        if (b && !b->is_bool()) { why = std::string("comfy_quant \"") + k + "\" must be true or false"; return false; }
    }
    cfg.full_precision_mm = v.get("full_precision_matrix_mult") && v.get("full_precision_matrix_mult")->b;
    for (const char * k : {"scale_dtype", "orig_dtype"}) {
        const json::value * s = v.get(k);
        if (s && !s->is_string()) { why = std::string("comfy_quant \"") + k + "\" must be a string"; return false; }
    }
    if (const json::value * os = v.get("orig_shape")) {
        int64_t a = 0, b = 0;
        if (!os->is_array() || os->arr.size() != 2 || !integral(os->arr[0], a) || !integral(os->arr[1], b) || a != out || b != in) {
            why = "comfy_quant \"orig_shape\" must be [" + std::to_string(out) + ", " + std::to_string(in) + "], the weight's shape";
            return false;
        }
    }

    const json::value * cr = pick(v, params, "convrot", why);
    if (!cr && !why.empty()) return false;
    if (cr && !cr->is_bool()) { why = "comfy_quant \"convrot\" must be true or false"; return false; }
    const json::value * gs = pick(v, params, "convrot_groupsize", why);
    if (!gs && !why.empty()) return false;
    int64_t g = 256; // ComfyUI's default when convrot is on and no group size is given
    if (gs && !integral(*gs, g)) { why = "comfy_quant \"convrot_groupsize\" must be an integer"; return false; }
    cfg.convrot = cr && cr->b;
    // Without convrot ComfyUI ignores convrot_groupsize (convert-to-quant may write one): no rotation.
    if (!cfg.convrot) return true;

    if (g > (int64_t) 1 << 30) {
        why = "convrot_groupsize " + std::to_string(g) + " is too large (at most 2^30)";
        return false;
    }
    if (!is_power_of_4(g)) {
        why = "convrot_groupsize " + std::to_string(g) + " is not a power of 4";
        return false;
    }
    if (g > in || in % g != 0) {
        why = "convrot_groupsize " + std::to_string(g) + " does not divide the weight's in = " + std::to_string(in);
        return false;
    }
    cfg.group = (int) g;
    return true;
}

bool parse_comfy_quant_tensor(const reader & r, const tensor_view & t, int64_t out, int64_t in, quant_config & cfg, std::string & err,
                              std::vector<std::string> & warns) {
    const std::string pre = where(r, t.name);
    if (t.dtype != "U8") { err = pre + "comfy_quant must be U8 (bytes of JSON), got " + t.dtype; return false; }
    if (t.nbytes > k_max_comfy_quant) {
        err = pre + "comfy_quant is " + std::to_string(t.nbytes) + " bytes, over the 64 KiB limit";
        return false;
    }
    std::string text(t.nbytes, '\0');
    if (!r.copy(t, 0, t.nbytes, &text[0], err)) return false;
    json::value v;
    std::string jerr;
    if (!json::parse(text.data(), text.size(), v, jerr)) { err = pre + "comfy_quant is not valid JSON: " + jerr; return false; }
    std::string              why;
    std::vector<std::string> w;
    if (!interpret_quant(v, out, in, cfg, why, w)) { err = pre + why; return false; }
    for (const std::string & m : w) warns.push_back(pre + m);
    return true;
}

// Prints each warning once per process (a checkpoint repeats the same extra key in every module;
// a line per module would bury everything else).
void print_warnings_once(const std::vector<std::string> & warns) {
    static std::mutex            mutex;
    static std::set<std::string> seen;
    std::lock_guard<std::mutex>  lock(mutex);
    for (const std::string & w : warns) {
        // the key, not the tensor, decides whether it is news: strip "<file>: tensor '<m>': "
        const size_t k = w.find("unknown ");
        if (seen.insert(k == std::string::npos ? w : w.substr(k)).second) std::fprintf(stderr, "sdio: warning: %s\n", w.c_str());
    }
}

// The scale layouts ComfyUI accepts (comfy-kitchen reshapes the scale to 1-D and wants 1 or out
// values): one scale for the tensor ([], [1], [1,1]) or one per output row ([out], [out,1],
// [1,out]). A shape with two dimensions above 1 is refused even when its size matches.
bool scale_shape_ok(const std::vector<int64_t> & s, int64_t out, bool & per_tensor) {
    int64_t n = 1, big = 0;
    for (int64_t d : s) {
        n *= d;
        if (d != 1) ++big;
        if (d < 0 || n > out) return false;
    }
    per_tensor = n == 1 && out != 1;
    return big <= 1 && (n == 1 || n == out);
}

[[noreturn]] void die(const char * msg) {
    std::fprintf(stderr, "sdio: %s\n", msg);
    std::abort();
}

} // namespace

bool is_power_of_4(int64_t g) {
    if (g <= 0 || (g & (g - 1)) != 0) return false;
    return (g & 0x5555555555555555LL) != 0; // the single set bit sits at an even position
}

bool read_floats(const reader & r, const std::string & name, std::vector<float> & out, std::vector<int64_t> * shape, std::string & err) {
    const tensor_view * t = r.find(name);
    if (!t) { err = where(r, name) + "not found"; return false; }
    if (!is_float_dtype(t->dtype)) { err = where(r, name) + "expected F32, F16 or BF16, got " + t->dtype; return false; }
    out.resize(t->nbytes / dtype_size(t->dtype));
    if (!widen(r, *t, out.data(), err)) return false;
    if (shape) *shape = t->shape;
    return true;
}

bool read_header_quant(const reader & r, header_quant & out, std::string & err) {
    out = header_quant();
    const auto it = r.metadata().find("_quantization_metadata");
    if (it == r.metadata().end()) return true;
    const std::string pre = r.path() + ": header metadata '_quantization_metadata': ";
    json::value       v;
    std::string       jerr;
    if (!json::parse(it->second.data(), it->second.size(), v, jerr)) { err = pre + "not valid JSON: " + jerr; return false; }
    const json::value * layers = v.get("layers");
    if (!layers || !layers->is_object()) { err = pre + "has no \"layers\" object (ComfyUI requires one)"; return false; }
    out.present = true;
    for (const auto & kv : layers->obj) out.layers[kv.first] = kv.second;
    return true;
}

bool read_linear(const reader & r, const std::string & name, linear_module & out, std::string & err, const header_quant * header) {
    out = linear_module();
    out.name = name;

    header_quant own;
    if (!header) {
        if (!read_header_quant(r, own, err)) return false;
        header = &own;
    }

    const std::string   wname = name + ".weight";
    const tensor_view * w     = r.find(wname);
    if (!w) { err = where(r, wname) + "not found"; return false; }
    if (w->shape.size() != 2) { err = where(r, wname) + "weight must be 2-D [out, in], got " + shape_text(w->shape); return false; }
    out.out = w->shape[0];
    out.in  = w->shape[1];

    // ComfyUI turns every header entry into "<m>.comfy_quant", replacing the tensor of that name
    // (comfy/utils.py, convert_old_quants): the header wins. When both exist and disagree the
    // writer's intent is unknown, so the module is refused.
    quant_config        cfg;
    const tensor_view * cq = r.find(name + ".comfy_quant");
    if (cq && !parse_comfy_quant_tensor(r, *cq, out.out, out.in, cfg, err, out.warnings)) return false;
    const auto hl = header->layers.find(name);
    if (hl != header->layers.end()) {
        quant_config hcfg;
        std::string  why;
        std::vector<std::string> hw;
        if (!interpret_quant(hl->second, out.out, out.in, hcfg, why, hw)) {
            err = r.path() + ": header metadata '_quantization_metadata', layer '" + name + "': " + why;
            return false;
        }
        for (const std::string & m : hw) {
            out.warnings.push_back(r.path() + ": header metadata '_quantization_metadata', layer '" + name + "': " + m);
        }
        if (cq && !same_config(cfg, hcfg)) {
            err = where(r, cq->name) + "says " + describe(cfg) + " but the header's _quantization_metadata entry says " +
                  describe(hcfg) + " (ComfyUI would use the header entry; refusing an ambiguous layout)";
            return false;
        }
        cfg = hcfg;
    }
    print_warnings_once(out.warnings);
    out.int8              = cfg.int8;
    out.convrot           = cfg.convrot;
    out.group             = cfg.group;
    out.full_precision_mm = cfg.full_precision_mm;

    const std::string   sname = name + ".weight_scale";
    const tensor_view * s     = r.find(sname);
    if (out.int8) {
        if (w->dtype != "I8") { err = where(r, wname) + "comfy_quant format int8_tensorwise requires an I8 weight, got " + w->dtype; return false; }
        out.weight_i8.resize(w->nbytes);
        if (!r.copy(*w, 0, w->nbytes, out.weight_i8.data(), err)) return false;

        if (!s) { err = where(r, sname) + "not found (required for an int8_tensorwise weight)"; return false; }
        bool per_tensor = false;
        if (!scale_shape_ok(s->shape, out.out, per_tensor)) {
            // every shape scale_shape_ok accepts, spelled out
            const std::string o = std::to_string(out.out);
            err = where(r, sname) + "shape " + shape_text(s->shape) +
                  " is not accepted: one scale for the tensor ([], [1], [1,1], or any shape whose dimensions are all 1)"
                  " or one per output row ([" + o + "], [" + o + ",1], [1," + o + "], or any shape with one dimension " +
                  o + " and the others 1)";
            return false;
        }
        if (!read_floats(r, sname, out.weight_scale, nullptr, err)) return false;
        for (size_t o = 0; o < out.weight_scale.size(); ++o) {
            const float v = out.weight_scale[o];
            if (!std::isfinite(v) || !(v > 0.0f)) {
                char buf[64];
                std::snprintf(buf, sizeof buf, "%g", (double) v);
                err = where(r, sname) + (per_tensor ? std::string("the scale") : "scale of row " + std::to_string(o)) + " is " + buf +
                      " (must be finite and > 0)";
                return false;
            }
        }
        // int8_tensorwise's original meaning: one scale for the whole matrix, the same for every row
        out.per_tensor_scale = per_tensor;
        if (per_tensor) out.weight_scale.assign((size_t) out.out, out.weight_scale.empty() ? 1.0f : out.weight_scale[0]);
    } else {
        if (w->dtype == "I8") { err = where(r, wname) + "I8 weight without an int8_tensorwise comfy_quant"; return false; }
        if (!is_float_dtype(w->dtype)) { err = where(r, wname) + "weight dtype " + w->dtype + " is not F32, F16 or BF16"; return false; }
        if (s) { err = where(r, sname) + "weight_scale on a float weight (scaled float checkpoints) is not supported"; return false; }
        if (!read_floats(r, wname, out.weight_f32, nullptr, err)) return false;
        if (!check_finite(r, wname, out.weight_f32, out.in, err)) return false;
    }

    const std::string bname = name + ".bias";
    if (r.find(bname)) {
        std::vector<int64_t> bshape;
        if (!read_floats(r, bname, out.bias, &bshape, err)) return false;
        if (bshape.size() != 1 || bshape[0] != out.out) {
            err = where(r, bname) + "shape " + shape_text(bshape) + " must be [" + std::to_string(out.out) + "]";
            out.bias.clear();
            return false;
        }
        if (!check_finite(r, bname, out.bias, out.out, err)) return false;
    }
    return true;
}

bool check_finite(const reader & r, const std::string & tensor, const std::vector<float> & v, int64_t row_len, std::string & err) {
    for (size_t e = 0; e < v.size(); ++e) {
        if (std::isfinite(v[e])) continue;
        const size_t n = row_len > 0 ? (size_t) row_len : v.size();
        err = where(r, tensor) + (std::isnan(v[e]) ? "NaN" : "infinite") + " value at row " + std::to_string(e / n) + ", column " +
              std::to_string(e % n) + " (weights must be finite)";
        return false;
    }
    return true;
}

void convrot_rotate_row(float * row, int64_t n, int group) {
    if (group <= 1) return;
    if (!is_power_of_4(group)) die("convrot_rotate_row: group is not a power of 4");
    if (n % group != 0) die("convrot_rotate_row: row length is not a multiple of the group");
    // The facts sheet fixes every float step: scale first, then butterflies whose sums are
    // evaluated left to right (this file is built with -ffp-contract=off, and only adds here).
    const float c = 1.0f / sqrtf((float) group);
    for (int64_t g0 = 0; g0 < n; g0 += group) {
        float * v = row + g0;
        for (int i = 0; i < group; ++i) v[i] = v[i] * c;
        for (int s = 1; s < group; s *= 4) {
            for (int blk = 0; blk < group; blk += 4 * s) {
                for (int j = 0; j < s; ++j) {
                    float *     p  = v + blk + j;
                    const float a  = p[0];
                    const float b  = p[s];
                    const float cc = p[2 * s];
                    const float d  = p[3 * s];
                    p[0]           = a + b + cc - d;
                    p[s]           = a + b - cc + d;
                    p[2 * s]       = a - b + cc + d;
                    p[3 * s]       = -a + b + cc + d;
                }
            }
        }
    }
}

bool quantize_weight_rows(const float * w, int64_t out, int64_t in, int group, int8_t * q, float * scale, int64_t * bad_row) {
    std::vector<float> row((size_t) in);
    for (int64_t o = 0; o < out; ++o) {
        std::memcpy(row.data(), w + o * in, (size_t) in * sizeof(float));
        convrot_rotate_row(row.data(), in, group);
        float amax = 0.0f;
        bool  finite = true;
        for (int64_t i = 0; i < in; ++i) {
            const float v = row[(size_t) i];
            finite        = finite && std::isfinite(v);
            const float a = fabsf(v);
            if (a > amax) amax = a;
        }
        int8_t * qo = q + o * in;
        // Non-finite input, or finite weights that the rotation's sums carry past FLT_MAX
        // (|w| near FLT_MAX / sqrt(G)): an infinite scale would be written and dequantize to
        // NaN, so the row is refused instead.
        if (!finite) {
            std::memset(qo, 0, (size_t) in);
            scale[o] = 1.0f;
            if (bad_row) *bad_row = o;
            return false;
        }
        const float s = amax / 127.0f;
        if (!(s > 0.0f)) {
            std::memset(qo, 0, (size_t) in);
            scale[o] = 1.0f;
            continue;
        }
        for (int64_t i = 0; i < in; ++i) {
            float v = row[(size_t) i] / s;
            v       = fminf(fmaxf(v, -127.0f), 127.0f);
            qo[i]   = (int8_t) lrintf(v);
        }
        scale[o] = s;
    }
    return true;
}

bool quantize_file(const std::string & in_path, const std::string & out_path, int group, std::string & err,
                   const std::function<void(size_t, size_t)> & progress) {
    if (group != 0 && !is_power_of_4(group)) {
        err = out_path + ": group " + std::to_string(group) + " is not 0 or a power of 4";
        return false;
    }
    if (same_file(in_path, out_path)) { // by device+inode: "./in", hard links
        err = out_path + ": is the input file itself; refusing to replace it";
        return false;
    }
    std::unique_ptr<reader> r = reader::open(in_path, err);
    if (!r) return false;
    const auto & ts = r->tensors();
    header_quant header; // modules the header already configures are copied, like those with comfy_quant
    if (!read_header_quant(*r, header, err)) return false;

    // What each output tensor is made from.
    enum class kind { copy, weight, scale, config };
    struct plan { kind k; size_t src; bool last_of_src; };
    std::vector<tensor_out> specs;
    std::vector<plan>       plans;

    // Group 0 and 1 both mean no rotation: no ConvRot keys at all (comfy-kitchen refuses a
    // Hadamard of size 1, so "convrot": true with group 1 would not load in ComfyUI).
    std::string config = "{\"format\": \"int8_tensorwise\"";
    if (group > 1) config += ", \"convrot\": true, \"convrot_groupsize\": " + std::to_string(group);
    config += "}";

    for (size_t k = 0; k < ts.size(); ++k) {
        const tensor_view & t = ts[k];
        bool                quantize = false;
        const size_t        suffix   = std::string(".weight").size();
        if (t.name.size() > suffix && t.name.compare(t.name.size() - suffix, suffix, ".weight") == 0 && t.shape.size() == 2 &&
            is_float_dtype(t.dtype) && t.shape[0] > 0 && t.shape[1] > 0) {
            const std::string m  = t.name.substr(0, t.name.size() - suffix);
            const int64_t     in = t.shape[1];
            const bool fits = group == 0 || (in >= group && in % group == 0);
            quantize        = fits && !r->find(m + ".weight_scale") && !r->find(m + ".comfy_quant") && !header.layers.count(m);
        }
        // A module that is already int8 (or claims to be) is copied, but only if read_linear
        // accepts it: the output must be a file this library can read back as modules.
        if (!quantize && t.name.size() > suffix && t.name.compare(t.name.size() - suffix, suffix, ".weight") == 0) {
            const std::string m = t.name.substr(0, t.name.size() - suffix);
            if (r->find(m + ".comfy_quant") || header.layers.count(m) || t.dtype == "I8") {
                linear_module lm;
                if (!read_linear(*r, m, lm, err, &header)) return false;
            }
        }
        if (!quantize) {
            specs.push_back({t.name, t.dtype, t.shape, {}});
            plans.push_back({kind::copy, k, true});
            continue;
        }
        const std::string m = t.name.substr(0, t.name.size() - 7);
        specs.push_back({t.name, "I8", t.shape, {}});
        plans.push_back({kind::weight, k, false});
        specs.push_back({m + ".weight_scale", "F32", {t.shape[0], 1}, {}});
        plans.push_back({kind::scale, k, false});
        specs.push_back({m + ".comfy_quant", "U8", {(int64_t) config.size()}, {}});
        plans.push_back({kind::config, k, true});
    }

    const size_t       total = ts.size();
    size_t             done  = 0;
    std::vector<float> scales; // from the weight just quantized, written by the next spec
    std::vector<float> wf;

    auto fill = [&](size_t i, std::vector<uint8_t> & buf, std::string & why) -> bool {
        if (i > 0 && plans[i - 1].last_of_src && progress) progress(++done, total);
        const plan &        p = plans[i];
        const tensor_view & t = ts[p.src];
        switch (p.k) {
            case kind::copy:
                buf.resize(t.nbytes);
                return r->copy(t, 0, t.nbytes, buf.data(), why);
            case kind::weight: {
                const int64_t out = t.shape[0], in = t.shape[1];
                wf.resize(t.nbytes / dtype_size(t.dtype));
                if (!widen(*r, t, wf.data(), why)) return false;
                for (size_t e = 0; e < wf.size(); ++e) {
                    if (!std::isfinite(wf[e])) {
                        why = "non-finite weight value at row " + std::to_string(e / (size_t) in) + ", column " +
                              std::to_string(e % (size_t) in);
                        return false;
                    }
                }
                buf.resize((size_t) (out * in));
                scales.resize((size_t) out);
                int64_t bad = -1;
                if (!quantize_weight_rows(wf.data(), out, in, group, (int8_t *) buf.data(), scales.data(), &bad)) {
                    why = "row " + std::to_string(bad) + " overflows float when rotated (ConvRot group " + std::to_string(group) +
                          "; weights near FLT_MAX), its scale would be infinite";
                    return false;
                }
                // What is written must pass read_linear's rules (finite scales > 0).
                for (size_t o = 0; o < scales.size(); ++o) {
                    if (!std::isfinite(scales[o]) || !(scales[o] > 0.0f)) {
                        why = "row " + std::to_string(o) + " would get an invalid scale";
                        return false;
                    }
                }
                return true;
            }
            case kind::scale:
                buf.resize(scales.size() * 4);
                std::memcpy(buf.data(), scales.data(), buf.size()); // little-endian host (x86/ARM)
                return true;
            case kind::config:
                buf.assign(config.begin(), config.end());
                return true;
        }
        return false;
    };

    if (!write_streamed(out_path, specs, r->metadata(), fill, err)) return false;
    if (!plans.empty() && progress) progress(++done, total);
    return true;
}

} // namespace sdio
