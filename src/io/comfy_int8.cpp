#include "io/comfy_int8.h"

#include "io/atomic_file.h"
#include "io/json.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

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

// Everything read_linear learns from "<m>.comfy_quant", validated against the weight's `in`.
struct quant_config {
    bool int8    = false;
    bool convrot = false;
    int  group   = 0;
};

bool parse_comfy_quant(const reader & r, const tensor_view & t, int64_t in, quant_config & cfg, std::string & err) {
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
    if (!v.is_object()) { err = pre + "comfy_quant JSON is not an object"; return false; }

    const json::value * fmt = v.get("format");
    if (!fmt || !fmt->is_string()) { err = pre + "comfy_quant has no string \"format\""; return false; }
    if (fmt->str != "int8_tensorwise") {
        err = pre + "unsupported comfy_quant format \"" + fmt->str + "\" (only int8_tensorwise)";
        return false;
    }
    cfg.int8 = true;

    const json::value * cr = v.get("convrot");
    if (cr && !cr->is_bool()) { err = pre + "comfy_quant \"convrot\" must be true or false"; return false; }
    cfg.convrot = cr && cr->b;
    if (!cfg.convrot) return true;

    const json::value * gs = v.get("convrot_groupsize");
    if (!gs || !gs->is_number() || !gs->is_int) {
        err = pre + "comfy_quant has convrot but no integer \"convrot_groupsize\"";
        return false;
    }
    if (!is_power_of_4(gs->i)) {
        err = pre + "convrot_groupsize " + std::to_string(gs->i) + " is not a power of 4";
        return false;
    }
    if (gs->i > INT_MAX) { // kept as int from here on: never narrowed
        err = pre + "convrot_groupsize " + std::to_string(gs->i) + " is too large";
        return false;
    }
    if (in % gs->i != 0) {
        err = pre + "convrot_groupsize " + std::to_string(gs->i) + " does not divide the weight's in = " + std::to_string(in);
        return false;
    }
    cfg.group = (int) gs->i;
    return true;
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

bool read_linear(const reader & r, const std::string & name, linear_module & out, std::string & err) {
    out = linear_module();
    out.name = name;

    const std::string   wname = name + ".weight";
    const tensor_view * w     = r.find(wname);
    if (!w) { err = where(r, wname) + "not found"; return false; }
    if (w->shape.size() != 2) { err = where(r, wname) + "weight must be 2-D [out, in], got " + shape_text(w->shape); return false; }
    out.out = w->shape[0];
    out.in  = w->shape[1];

    quant_config        cfg;
    const tensor_view * cq = r.find(name + ".comfy_quant");
    if (cq && !parse_comfy_quant(r, *cq, out.in, cfg, err)) return false;
    out.int8    = cfg.int8;
    out.convrot = cfg.convrot;
    out.group   = cfg.group;

    const std::string   sname = name + ".weight_scale";
    const tensor_view * s     = r.find(sname);
    if (out.int8) {
        if (w->dtype != "I8") { err = where(r, wname) + "comfy_quant format int8_tensorwise requires an I8 weight, got " + w->dtype; return false; }
        out.weight_i8.resize(w->nbytes);
        if (!r.copy(*w, 0, w->nbytes, out.weight_i8.data(), err)) return false;

        if (!s) { err = where(r, sname) + "not found (required for an int8_tensorwise weight)"; return false; }
        const bool shape_ok = (s->shape.size() == 1 && s->shape[0] == out.out) ||
                              (s->shape.size() == 2 && s->shape[0] == out.out && s->shape[1] == 1);
        if (!shape_ok) {
            err = where(r, sname) + "shape " + shape_text(s->shape) + " must be [" + std::to_string(out.out) + "] or [" +
                  std::to_string(out.out) + ",1]";
            return false;
        }
        if (!read_floats(r, sname, out.weight_scale, nullptr, err)) return false;
        for (size_t o = 0; o < out.weight_scale.size(); ++o) {
            const float v = out.weight_scale[o];
            if (!std::isfinite(v) || !(v > 0.0f)) {
                char buf[64];
                std::snprintf(buf, sizeof buf, "%g", (double) v);
                err = where(r, sname) + "scale of row " + std::to_string(o) + " is " + buf + " (must be finite and > 0)";
                return false;
            }
        }
    } else {
        if (w->dtype == "I8") { err = where(r, wname) + "I8 weight without an int8_tensorwise comfy_quant"; return false; }
        if (!is_float_dtype(w->dtype)) { err = where(r, wname) + "weight dtype " + w->dtype + " is not F32, F16 or BF16"; return false; }
        if (s) { err = where(r, sname) + "weight_scale on a float weight (scaled float checkpoints) is not supported"; return false; }
        if (!read_floats(r, wname, out.weight_f32, nullptr, err)) return false;
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

void quantize_weight_rows(const float * w, int64_t out, int64_t in, int group, int8_t * q, float * scale) {
    std::vector<float> row((size_t) in);
    for (int64_t o = 0; o < out; ++o) {
        std::memcpy(row.data(), w + o * in, (size_t) in * sizeof(float));
        convrot_rotate_row(row.data(), in, group);
        float amax = 0.0f;
        for (int64_t i = 0; i < in; ++i) {
            const float a = fabsf(row[(size_t) i]);
            if (a > amax) amax = a;
        }
        const float s  = amax / 127.0f;
        int8_t *    qo = q + o * in;
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

    // What each output tensor is made from.
    enum class kind { copy, weight, scale, config };
    struct plan { kind k; size_t src; bool last_of_src; };
    std::vector<tensor_out> specs;
    std::vector<plan>       plans;

    std::string config = "{\"format\": \"int8_tensorwise\"";
    if (group != 0) config += ", \"convrot\": true, \"convrot_groupsize\": " + std::to_string(group);
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
            quantize        = fits && !r->find(m + ".weight_scale") && !r->find(m + ".comfy_quant");
        }
        // A module that is already int8 (or claims to be) is copied, but only if read_linear
        // accepts it: the output must be a file this library can read back as modules.
        if (!quantize && t.name.size() > suffix && t.name.compare(t.name.size() - suffix, suffix, ".weight") == 0) {
            const std::string m = t.name.substr(0, t.name.size() - suffix);
            if (r->find(m + ".comfy_quant") || t.dtype == "I8") {
                linear_module lm;
                if (!read_linear(*r, m, lm, err)) return false;
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
                quantize_weight_rows(wf.data(), out, in, group, (int8_t *) buf.data(), scales.data());
                return true;
            }
            case kind::scale:
                // read_linear refuses scales that are not finite and > 0: never write one (the
                // rotation can push a finite weight near FLT_MAX to inf).
                for (size_t o = 0; o < scales.size(); ++o) {
                    if (!std::isfinite(scales[o]) || !(scales[o] > 0.0f)) {
                        why = "row " + std::to_string(o) + " of '" + display_name(t.name) +
                              "' quantizes to a scale that is not finite (|weight| too large for the rotation)";
                        return false;
                    }
                }
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
