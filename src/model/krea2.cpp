// krea2.cpp — Krea2 block stack: synthetic weights, pe, weight conversion and the block graph.

#include "krea2.h"

#include "ggml-alloc.h"
#include "ggml-cpu.h"
#include "ggml_extensions.h"
#include "io/comfy_int8.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <cstdint>
#include <sys/mman.h>
#include <unistd.h>

namespace krea2 {

const char * const LINEAR_NAMES[8] = {"attn.wq", "attn.wk", "attn.wv", "attn.gate",
                                      "attn.wo", "mlp.gate", "mlp.up",  "mlp.down"};

const char * wtype_name(wtype t) {
    switch (t) {
        case wtype::f32: return "f32";
        case wtype::bf16: return "bf16";
        case wtype::int8: return "int8";
        case wtype::q8_0: return "q8_0";
        case wtype::q4_k: return "q4_k";
    }
    return "?";
}

bool parse_wtype(const std::string & s, wtype & out) {
    if (s == "f32") out = wtype::f32;
    else if (s == "bf16") out = wtype::bf16;
    else if (s == "int8") out = wtype::int8;
    else if (s == "q8_0") out = wtype::q8_0;
    else if (s == "q4_k") out = wtype::q4_k;
    else return false;
    return true;
}

static bool valid_group(int g) { return g == 1 || g == 4 || g == 16 || g == 64 || g == 256; }

std::string config::validate() const {
    auto s = [](int64_t v) { return std::to_string(v); };
    if (blocks < 1) return "--blocks must be at least 1";
    if (heads < 1 || kv_heads < 1) return "--heads and --kv-heads must be at least 1";
    if (heads % kv_heads != 0) return "--heads (" + s(heads) + ") must be a multiple of --kv-heads (" + s(kv_heads) + ")";
    if (hidden != heads * HEAD_DIM)
        return "--hidden (" + s(hidden) + ") must equal --heads x 128 (" + s(heads * HEAD_DIM) + "); the head dim is fixed at 128";
    if (mlp < 1) return "--mlp must be at least 1";
    if (text_tokens < 0) return "text tokens must be >= 0";
    if (tokens < 1 || tokens <= text_tokens)
        return "--tokens (" + s(tokens) + ") must exceed the text tokens (" + s(text_tokens) + ")";
    if (tokens > (int64_t) 1 << 16) return "--tokens is too large (at most 65536)";
    if (!valid_group(group)) return "ConvRot group must be 1, 4, 16, 64 or 256";
    if (hidden % group != 0 || mlp % group != 0)
        return "--hidden (" + s(hidden) + ") and --mlp (" + s(mlp) + ") must be multiples of the ConvRot group " + s(group);
    return "";
}

// ---------------------------------------------------------------------------------------------
// Deterministic synthetic values: splitmix64 per element, keyed by (seed, block, tensor)

static uint64_t splitmix(uint64_t & s) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z          = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z          = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void fill_uniform(std::vector<float> & v, size_t n, uint64_t key, float amp) {
    v.resize(n);
    uint64_t s = key;
    splitmix(s);
    for (size_t i = 0; i < n; ++i) {
        const float u = (float) (splitmix(s) >> 40) * (1.0f / 16777216.0f); // [0, 1)
        v[i]          = (2.0f * u - 1.0f) * amp;
    }
}

static uint64_t key_of(uint64_t seed, int block, int tensor) {
    uint64_t s = seed ^ 0x5DEECE66Dull;
    splitmix(s);
    s ^= (uint64_t) (block + 1) * 0x100000001B3ull;
    splitmix(s);
    s ^= (uint64_t) (tensor + 1) * 0xC2B2AE3D27D4EB4Full;
    return splitmix(s);
}

static void linear_dims(const config & c, int k, int64_t & in, int64_t & out) {
    const int64_t q = c.heads * HEAD_DIM, kv = c.kv_heads * HEAD_DIM;
    switch (k) {
        case 0: in = c.hidden; out = q; break;      // wq
        case 1: in = c.hidden; out = kv; break;     // wk
        case 2: in = c.hidden; out = kv; break;     // wv
        case 3: in = c.hidden; out = q; break;      // attention output gate
        case 4: in = q; out = c.hidden; break;      // wo
        case 5: in = c.hidden; out = c.mlp; break;  // mlp.gate
        case 6: in = c.hidden; out = c.mlp; break;  // mlp.up
        default: in = c.mlp; out = c.hidden; break; // mlp.down
    }
}

bool synthetic_source::get_block(const config & cfg, int i, host_block & b, std::string &) {
    for (int k = 0; k < 8; ++k) {
        host_linear & l = *b.linears[k];
        linear_dims(cfg, k, l.in, l.out);
        l.is_i8 = false;
        l.i8.clear();
        l.scale.clear();
        fill_uniform(l.f32, (size_t) (l.in * l.out), key_of(seed_, i, k), 1.0f / std::sqrt((float) l.in));
    }
    fill_uniform(b.mod_lin, (size_t) (6 * cfg.hidden), key_of(seed_, i, 8), 0.1f);
    fill_uniform(b.prenorm, (size_t) cfg.hidden, key_of(seed_, i, 9), 0.1f);
    fill_uniform(b.postnorm, (size_t) cfg.hidden, key_of(seed_, i, 10), 0.1f);
    fill_uniform(b.qnorm, (size_t) HEAD_DIM, key_of(seed_, i, 11), 0.1f);
    fill_uniform(b.knorm, (size_t) HEAD_DIM, key_of(seed_, i, 12), 0.1f);
    return true;
}

std::vector<float> synthetic_tvec(const config & cfg, uint64_t seed) {
    std::vector<float> v;
    fill_uniform(v, (size_t) (6 * cfg.hidden), key_of(seed, -2, 0), 0.2f);
    return v;
}

std::vector<float> synthetic_input(const config & cfg, uint64_t seed) {
    std::vector<float> v;
    fill_uniform(v, (size_t) (cfg.hidden * cfg.tokens), key_of(seed, -3, 0), 1.0f);
    return v;
}

// ---------------------------------------------------------------------------------------------
// pe (§4.2)

std::vector<float> build_pe(const config & cfg) {
    static const int axes[3] = {32, 48, 48};
    const int64_t    L       = cfg.tokens;
    const int64_t    I       = cfg.image_tokens();
    const int64_t    side    = std::max<int64_t>(1, (int64_t) std::ceil(std::sqrt((double) I)));
    std::vector<float> pe((size_t) (L * 256));
    for (int64_t p = 0; p < L; ++p) {
        float pos[3] = {0, 0, 0};
        if (p >= cfg.text_tokens) {
            const int64_t t = p - cfg.text_tokens;
            pos[1]          = (float) (t / side);
            pos[2]          = (float) (t % side);
        }
        int j = 0;
        for (int a = 0; a < 3; ++a) {
            const int d = axes[a];
            for (int k = 0; k < d / 2; ++k, ++j) {
                const float omega = 1.0f / powf(cfg.theta, (float) (2 * k) / (float) d);
                const float phi   = pos[a] * omega;
                const float c = cosf(phi), s = sinf(phi);
                float *     e = &pe[(size_t) (p * 256 + j * 4)];
                e[0] = c; e[1] = -s; e[2] = s; e[3] = c;
            }
        }
    }
    return pe;
}

// ---------------------------------------------------------------------------------------------
// model

model::~model() {
    if (buf_) ggml_backend_buffer_free(buf_);
    if (reserved_) munmap(reserved_, reserved_size_);
    if (ctx_) ggml_free(ctx_);
}

size_t model::weight_bytes() const { return buf_ ? ggml_backend_buffer_get_size(buf_) : 0; }

bool model::move_to(ggml_backend_buffer_type_t buft, std::string & err) {
    if (!ctx_ || !buf_ || !buft) { err = "no weights to move"; return false; }
    std::vector<std::pair<ggml_tensor *, void *>> old;
    for (ggml_tensor * t = ggml_get_first_tensor(ctx_); t; t = ggml_get_next_tensor(ctx_, t)) old.push_back({t, t->data});
    // re-place every tensor: the allocator places only tensors without storage
    for (auto & o : old) {
        o.first->data   = nullptr;
        o.first->buffer = nullptr;
    }
    ggml_backend_buffer_t nb = ggml_backend_alloc_ctx_tensors_from_buft(ctx_, buft);
    if (!nb) {
        for (auto & o : old) {
            o.first->data   = o.second;
            o.first->buffer = buf_;
        }
        err = std::string("cannot allocate the weights in ") + ggml_backend_buft_name(buft);
        return false;
    }
    ggml_backend_buffer_set_usage(nb, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    if (!reserved_) {
        for (auto & o : old) ggml_backend_tensor_set(o.first, o.second, 0, ggml_nbytes(o.first));
    }
    ggml_backend_buffer_free(buf_);
    buf_ = nb;
    if (reserved_) {
        munmap(reserved_, reserved_size_);
        reserved_      = nullptr;
        reserved_size_ = 0;
    }
    return true;
}

static void dequantize(const host_linear & l, float * dst) {
    for (int64_t o = 0; o < l.out; ++o) {
        float *        r = dst + o * l.in;
        const int8_t * q = l.i8.data() + o * l.in;
        for (int64_t i = 0; i < l.in; ++i) r[i] = (float) q[i] * l.scale[(size_t) o];
        sdio::convrot_rotate_row(r, l.in, l.group); // R is symmetric and orthogonal: W = W_rot R
    }
}

// The layout of a stored INT8 linear, checked before any graph is built so that a bad file is
// reported with the tensor's name (not later by the op that cannot take it): the group is 0, or
// a power of 4 with G <= K and K % G == 0, the scales are one finite positive value per output,
// and this build's ConvRot operators accept the group (a probe node on a [K, 1] input).
static bool check_int8_layout(const host_linear & l, const std::string & name, std::string & err) {
    const std::string pre = "tensor " + name + ".weight: ";
    if (l.group > 1 && (!sdio::is_power_of_4(l.group) || l.group > l.in || l.in % l.group != 0)) {
        err = pre + "ConvRot group " + std::to_string(l.group) + " is not a power of 4 dividing the input width " + std::to_string(l.in);
        return false;
    }
    if (l.scale.size() != (size_t) l.out) {
        err = "tensor " + name + ".weight_scale: " + std::to_string(l.scale.size()) + " scales for " + std::to_string(l.out) + " output rows";
        return false;
    }
    for (size_t o = 0; o < l.scale.size(); ++o) {
        if (!std::isfinite(l.scale[o]) || !(l.scale[o] > 0.0f)) {
            err = "tensor " + name + ".weight_scale: scale of row " + std::to_string(o) + " is not finite and > 0";
            return false;
        }
    }
    if (l.group <= 1) return true;
    ggml_init_params ip{ggml_tensor_overhead() * 8, nullptr, true};
    ggml_context *   ctx = ggml_init(ip);
    if (!ctx) { err = "out of memory (probe context)"; return false; }
    ggml_tensor * x  = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, l.in, 1);
    ggml_tensor * w  = ggml_new_tensor_2d(ctx, GGML_TYPE_I8, l.in, l.out);
    ggml_tensor * sc = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, l.out);
    ggml_tensor * q  = ggml_quantize_i8_convrot(ctx, x, l.group);
    ggml_tensor * y  = q ? ggml_mul_mat_i8_tensorwise(ctx, w, q, sc, nullptr, l.group) : nullptr;
    if (!y) err = pre + "ConvRot group " + std::to_string(l.group) + " (input width " + std::to_string(l.in) +
                  ") is not supported by this build's INT8 operators: " + sd_ggml_last_error();
    ggml_free(ctx);
    return y != nullptr;
}

static bool check_vec(const std::vector<float> & v, size_t n, const std::string & name, std::string & err) {
    if (v.size() == n) return true;
    err = "tensor " + name + " has " + std::to_string(v.size()) + " values, expected " + std::to_string(n);
    return false;
}

// The ggml type of the linear weights of a stack of `type`.
static ggml_type linear_type(wtype type) {
    switch (type) {
        case wtype::f32: return GGML_TYPE_F32;
        case wtype::bf16: return GGML_TYPE_BF16;
        case wtype::int8: return GGML_TYPE_I8;
        case wtype::q8_0: return GGML_TYPE_Q8_0;
        case wtype::q4_k: return GGML_TYPE_Q4_K;
    }
    return GGML_TYPE_F32;
}

// "" when this build can store and multiply linear weights of a block-quantized stack type
// (a quantizer, whole blocks per row, and a CPU mul_mat that takes them), else why not. Checked
// before loading: an unsupported mul_mat would only fail when the scheduler runs the graph.
std::string check_quant_wtype(const config & cfg, wtype type) {
    if (type != wtype::q8_0 && type != wtype::q4_k) return "";
    const ggml_type          t  = linear_type(type);
    const ggml_type_traits * tr = ggml_get_type_traits(t);
    const std::string        n  = wtype_name(type);
    if (!tr->type_name || !tr->from_float_ref) return "--dtype " + n + ": this build has no " + n + " quantizer (the block-quantized types are being added)";
    if (cfg.hidden % tr->blck_size != 0 || cfg.mlp % tr->blck_size != 0)
        return "--dtype " + n + ": the widths (" + std::to_string(cfg.hidden) + ", " + std::to_string(cfg.mlp) + ") are not multiples of its block size " +
               std::to_string(tr->blck_size);
    ggml_init_params ip{4 * ggml_tensor_overhead(), nullptr, true};
    ggml_context *   ctx = ggml_init(ip);
    ggml_tensor *    w   = ggml_new_tensor_2d(ctx, t, tr->blck_size, 4);
    ggml_tensor *    x   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, tr->blck_size, 4);
    ggml_tensor *    y   = ggml_mul_mat(ctx, w, x);
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    const bool       ok  = cpu && ggml_backend_dev_supports_op(cpu, y);
    ggml_free(ctx);
    if (!ok) return "--dtype " + n + ": the CPU backend has no mul_mat with " + n + " weights in this build";
    return "";
}

// The weight tensors of cfg's blocks in `type`, in a new no_alloc context (NULL: out of memory).
static ggml_context * new_weight_context(const config & cfg, wtype type, std::vector<block_t> & blocks) {
    const int      per_block = 8 * 2 + 5;
    ggml_init_params ip{ggml_tensor_overhead() * (size_t) (per_block * cfg.blocks + 8), nullptr, true};
    ggml_context * ctx = ggml_init(ip);
    if (!ctx) return nullptr;
    blocks.resize((size_t) cfg.blocks);
    const ggml_type wt = linear_type(type);
    if (!ggml_get_type_traits(wt)->type_name) { // a block type this build lacks (check_quant_wtype says why)
        ggml_free(ctx);
        return nullptr;
    }
    for (int i = 0; i < cfg.blocks; ++i) {
        block_t & b      = blocks[(size_t) i];
        linear_t * ls[8] = {&b.wq, &b.wk, &b.wv, &b.gate, &b.wo, &b.mgate, &b.up, &b.down};
        for (int k = 0; k < 8; ++k) {
            int64_t in, out;
            linear_dims(cfg, k, in, out);
            ls[k]->w = ggml_new_tensor_2d(ctx, wt, in, out);
            ggml_format_name(ls[k]->w, "blocks.%d.%s.weight", i, LINEAR_NAMES[k]);
            if (type == wtype::int8) {
                ls[k]->scale = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, out);
                ggml_format_name(ls[k]->scale, "blocks.%d.%s.weight_scale", i, LINEAR_NAMES[k]);
            }
        }
        b.mod_lin  = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 6 * cfg.hidden);
        b.prenorm  = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, cfg.hidden);
        b.postnorm = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, cfg.hidden);
        b.qnorm    = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, HEAD_DIM);
        b.knorm    = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, HEAD_DIM);
        ggml_format_name(b.mod_lin, "blocks.%d.mod.lin", i);
        ggml_format_name(b.prenorm, "blocks.%d.prenorm.scale", i);
        ggml_format_name(b.postnorm, "blocks.%d.postnorm.scale", i);
        ggml_format_name(b.qnorm, "blocks.%d.attn.qknorm.qnorm.scale", i);
        ggml_format_name(b.knorm, "blocks.%d.attn.qknorm.knorm.scale", i);
    }
    return ctx;
}

size_t model::weight_bytes_for(const config & cfg, wtype type) {
    std::vector<block_t> blocks;
    ggml_context *       ctx = new_weight_context(cfg, type, blocks);
    if (!ctx) return SIZE_MAX;
    const size_t n = ggml_backend_alloc_ctx_tensors_from_buft_size(ctx, ggml_backend_cpu_buffer_type());
    ggml_free(ctx);
    return n;
}

// Layout only: every tensor gets its own address inside a PROT_NONE, MAP_NORESERVE range, so the
// scheduler and the extension planners see real, non-overlapping addresses while no memory is
// committed (any access would fault, and nothing that only plans accesses weights).
bool model::place_layout_only(std::string & err) {
    const size_t size = ggml_backend_alloc_ctx_tensors_from_buft_size(ctx_, ggml_backend_cpu_buffer_type());
    if (size == 0) { err = "the model has no weights"; return false; }
    void * p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        err = "cannot reserve " + std::to_string(size >> 20) + " MiB of address space for the weight layout";
        return false;
    }
    reserved_      = p;
    reserved_size_ = size;
    buf_           = ggml_backend_cpu_buffer_from_ptr(p, size);
    if (!buf_) { err = "cannot create the weight layout buffer"; return false; }
    ggml_backend_buffer_set_usage(buf_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS); // as load(): same placement
    ggml_tallocr talloc = ggml_tallocr_new(buf_);
    for (ggml_tensor * t = ggml_get_first_tensor(ctx_); t; t = ggml_get_next_tensor(ctx_, t)) {
        if (ggml_tallocr_alloc(&talloc, t) != GGML_STATUS_SUCCESS) {
            err = "cannot lay out weight tensor " + std::string(t->name);
            return false;
        }
    }
    for (block_t & b : blocks_)
        for (linear_t * l : {&b.wq, &b.wk, &b.wv, &b.gate, &b.wo, &b.mgate, &b.up, &b.down}) l->group = cfg_.group;
    return true;
}

bool model::load(const config & cfg, wtype type, weight_source * src, std::string & err, const progress_fn & progress) {
    err = cfg.validate();
    if (err.empty()) err = check_quant_wtype(cfg, type);
    if (!err.empty()) return false;
    cfg_  = cfg;
    type_ = type;

    ctx_ = new_weight_context(cfg, type, blocks_);
    if (!ctx_) { err = "out of memory (weight context)"; return false; }
    if (!src) return place_layout_only(err);
    // refuse what cannot fit instead of being killed half-way through filling (overcommit)
    const size_t need = ggml_backend_alloc_ctx_tensors_from_buft_size(ctx_, ggml_backend_cpu_buffer_type());
    const long   pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && (double) need > 0.9 * (double) pages * (double) page) {
        err = "the " + std::string(wtype_name(type)) + " weights need " + std::to_string(need >> 20) +
              " MiB, more than this machine's memory (" + std::to_string(((size_t) pages * (size_t) page) >> 20) +
              " MiB); use fewer --blocks or a smaller width";
        return false;
    }
    buf_ = ggml_backend_alloc_ctx_tensors_from_buft(ctx_, ggml_backend_cpu_buffer_type());
    if (!buf_) { err = "cannot allocate the weight buffer (out of memory?)"; return false; }
    // weights: a scheduler with a GPU first offloads the ops that read them (with copies)
    ggml_backend_buffer_set_usage(buf_, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);

    std::vector<float> tmp;
    for (int i = 0; i < cfg.blocks; ++i) {
        // reported per linear: converting one block at full width takes seconds, and the caller
        // may stop from here (Ctrl-C)
        if (progress) progress(i * 8, cfg.blocks * 8, "weights");
        host_block hb;
        if (!src->get_block(cfg, i, hb, err)) return false;
        block_t &  b      = blocks_[(size_t) i];
        linear_t * ls[8]  = {&b.wq, &b.wk, &b.wv, &b.gate, &b.wo, &b.mgate, &b.up, &b.down};
        const std::string pre = "blocks." + std::to_string(i) + ".";
        for (int k = 0; k < 8; ++k) {
            host_linear & l = *hb.linears[k];
            int64_t       in, out;
            linear_dims(cfg, k, in, out);
            const std::string name = pre + LINEAR_NAMES[k];
            if (l.in != in || l.out != out) {
                err = "tensor " + name + ".weight has shape [in " + std::to_string(l.in) + ", out " + std::to_string(l.out) +
                      "], expected [in " + std::to_string(in) + ", out " + std::to_string(out) + "]";
                return false;
            }
            const size_t n = (size_t) (in * out);
            if ((l.is_i8 && (l.i8.size() != n || l.scale.size() != (size_t) out)) || (!l.is_i8 && l.f32.size() != n)) {
                err = "tensor " + name + " has inconsistent data sizes";
                return false;
            }
            void * dst = ls[k]->w->data;
            if (type == wtype::int8) {
                float * sc = (float *) ls[k]->scale->data;
                if (l.is_i8) {
                    if (l.full_precision) {
                        // ComfyUI dequantizes such a module and multiplies in float; running it
                        // on INT8 activations would compute something else.
                        err = "tensor " + name + ".comfy_quant: full_precision_matrix_mult asks for a float matmul, which the "
                              "INT8 model does not do; run with --dtype bf16 or f32 (the weights are dequantized then)";
                        return false;
                    }
                    if (!check_int8_layout(l, name, err)) return false;
                    std::memcpy(dst, l.i8.data(), n);
                    std::memcpy(sc, l.scale.data(), (size_t) out * sizeof(float));
                    ls[k]->group = l.group;
                } else {
                    int64_t bad = -1;
                    if (!sdio::quantize_weight_rows(l.f32.data(), out, in, cfg.group, (int8_t *) dst, sc, &bad)) {
                        err = "tensor " + name + ".weight: row " + std::to_string(bad) +
                              " is not finite after the ConvRot rotation (group " + std::to_string(cfg.group) +
                              "; non-finite weights, or weights near FLT_MAX that overflow), cannot quantize it";
                        return false;
                    }
                    ls[k]->group = cfg.group;
                }
            } else {
                const float * f = l.f32.data();
                if (l.is_i8) {
                    tmp.resize(n);
                    dequantize(l, tmp.data());
                    f = tmp.data();
                }
                if (type == wtype::f32) std::memcpy(dst, f, n * sizeof(float));
                else if (type == wtype::bf16) ggml_fp32_to_bf16_row(f, (ggml_bf16_t *) dst, (int64_t) n);
                else ggml_quantize_chunk(linear_type(type), f, dst, 0, out, in, nullptr); // rows of `in` values
            }
            // release as we go: at full width one block's F32 copy is 1.7 GB
            std::vector<float>().swap(l.f32);
            std::vector<int8_t>().swap(l.i8);
            if (progress) progress(i * 8 + k + 1, cfg.blocks * 8, "weights");
        }
        if (!check_vec(hb.mod_lin, (size_t) (6 * cfg.hidden), pre + "mod.lin", err) ||
            !check_vec(hb.prenorm, (size_t) cfg.hidden, pre + "prenorm.scale", err) ||
            !check_vec(hb.postnorm, (size_t) cfg.hidden, pre + "postnorm.scale", err) ||
            !check_vec(hb.qnorm, (size_t) HEAD_DIM, pre + "attn.qknorm.qnorm.scale", err) ||
            !check_vec(hb.knorm, (size_t) HEAD_DIM, pre + "attn.qknorm.knorm.scale", err)) {
            return false;
        }
        std::memcpy(b.mod_lin->data, hb.mod_lin.data(), ggml_nbytes(b.mod_lin));
        std::memcpy(b.prenorm->data, hb.prenorm.data(), ggml_nbytes(b.prenorm));
        std::memcpy(b.postnorm->data, hb.postnorm.data(), ggml_nbytes(b.postnorm));
        std::memcpy(b.qnorm->data, hb.qnorm.data(), ggml_nbytes(b.qnorm));
        std::memcpy(b.knorm->data, hb.knorm.data(), ggml_nbytes(b.knorm));
        if (type == wtype::int8) {
            // linears sharing one quantized input must agree on its rotation
            const int ga = b.wq.group;
            if (b.wk.group != ga || b.wv.group != ga || b.gate.group != ga || b.up.group != b.mgate.group) {
                err = pre + "*: linears sharing an input have different ConvRot group sizes";
                return false;
            }
        }
    }
    if (progress) progress(cfg.blocks * 8, cfg.blocks * 8, "weights");
    return true;
}

// ---------------------------------------------------------------------------------------------
// Graph

size_t block_graph_nodes() { return 1024; }

block_inputs new_inputs(ggml_context * ctx, const config & cfg) {
    block_inputs in;
    in.x    = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, cfg.hidden, cfg.tokens);
    in.pe   = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 2, 2, 64, cfg.tokens);
    in.tvec = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 6 * cfg.hidden);
    in.one  = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1);
    ggml_set_name(in.x, "x");
    ggml_set_name(in.pe, "pe");
    ggml_set_name(in.tvec, "tvec");
    ggml_set_name(in.one, "one");
    ggml_set_input(in.x);
    ggml_set_input(in.pe);
    ggml_set_input(in.tvec);
    ggml_set_input(in.one);
    return in;
}

namespace {

struct builder {
    ggml_context *  ctx;
    ggml_cgraph *   gf;
    const model &   m;
    std::string &   err;
    int             blk;
    // one quantize per (input, group): the convrot cache of sd.cpp's Linear
    std::map<std::pair<ggml_tensor *, int>, ggml_tensor *> packed;

    ggml_tensor * named(ggml_tensor * t, const char * name) {
        if (t) ggml_format_name(t, "b%d.%s", blk, name);
        return t;
    }

    ggml_tensor * linear(const linear_t & l, ggml_tensor * x, const char * name) {
        if (!x) return nullptr;
        if (m.type() != wtype::int8) return named(ggml_mul_mat(ctx, l.w, x), name);
        const int g   = l.group > 1 ? l.group : 1;
        auto      key = std::make_pair(x, g);
        auto      it  = packed.find(key);
        ggml_tensor * q;
        if (it == packed.end()) {
            q = ggml_quantize_i8_convrot(ctx, x, g);
            if (!q) { err = sd_ggml_last_error(); return nullptr; }
            ggml_format_name(q, "b%d.quant(%s)", blk, x->name);
            packed[key] = q;
        } else {
            q = it->second;
        }
        ggml_tensor * y = ggml_mul_mat_i8_tensorwise(ctx, l.w, q, l.scale, nullptr, g);
        if (!y) { err = sd_ggml_last_error(); return nullptr; }
        return named(y, name);
    }

    // RMSNorm(x) * (1 + scale) * (1 + mod_scale) + shift, in §2.3's op order
    ggml_tensor * modulated_norm(ggml_tensor * x, ggml_tensor * w1, ggml_tensor * m_scale, ggml_tensor * m_shift,
                                 const char * name) {
        const std::string n = name;
        ggml_tensor *     h = named(ggml_rms_norm(ctx, x, m.cfg().eps), (n + ".norm").c_str());
        h                   = named(ggml_mul(ctx, h, w1), (n + ".normw").c_str());
        ggml_tensor * t     = named(ggml_mul(ctx, h, m_scale), (n + ".scale").c_str());
        h                   = named(ggml_add(ctx, h, t), (n + ".mod").c_str());
        return named(ggml_add(ctx, h, m_shift), name);
    }

    // §4.3 native chain, interleaved mode: x [d, H, L, 1] -> [d, L, H]
    ggml_tensor * rope_chain(ggml_tensor * x, ggml_tensor * pe) {
        const int64_t d = x->ne[0], H = x->ne[1], L = x->ne[2], HN = H * x->ne[3];
        ggml_tensor * t  = ggml_cont(ctx, ggml_permute(ctx, x, 0, 2, 1, 3));
        t                = ggml_reshape_4d(ctx, t, 2, d / 2, L, HN);
        t                = ggml_cont(ctx, ggml_permute(ctx, t, 3, 0, 1, 2)); // [d/2, L, HN, 2]
        ggml_tensor * x0 = ggml_view_3d(ctx, t, d / 2, L, HN, t->nb[1], t->nb[2], 0);
        ggml_tensor * x1 = ggml_view_3d(ctx, t, d / 2, L, HN, t->nb[1], t->nb[2], t->nb[3]);
        x0 = ggml_repeat_4d(ctx, ggml_reshape_4d(ctx, x0, 1, d / 2, L, HN), 2, d / 2, L, HN);
        x1 = ggml_repeat_4d(ctx, ggml_reshape_4d(ctx, x1, 1, d / 2, L, HN), 2, d / 2, L, HN);
        ggml_tensor * p   = ggml_cont(ctx, ggml_permute(ctx, pe, 3, 0, 1, 2)); // [2, d/2, L, 2]
        ggml_tensor * pe0 = ggml_view_3d(ctx, p, 2, d / 2, L, p->nb[1], p->nb[2], 0);
        ggml_tensor * pe1 = ggml_view_3d(ctx, p, 2, d / 2, L, p->nb[1], p->nb[2], p->nb[3]);
        ggml_tensor * o   = ggml_add(ctx, ggml_mul(ctx, x0, pe0), ggml_mul(ctx, x1, pe1));
        return ggml_reshape_3d(ctx, o, d, L, HN);
    }
};

} // namespace

ggml_tensor * build_block(ggml_context * ctx, ggml_cgraph * gf, const model & m, int i, const block_inputs & in,
                          const build_options & o, std::string & err) {
    const config &  c = m.cfg();
    const block_t & b = m.blocks()[(size_t) i];
    builder         B{ctx, gf, m, err, i, {}};
    const int64_t   L = c.tokens, H = c.heads, Hkv = c.kv_heads, D = HEAD_DIM;

    // parameter-only nodes first, so that the activation chains below stay consecutive
    ggml_tensor * mods = B.named(ggml_add(ctx, in.tvec, b.mod_lin), "mods"); // §2.2
    ggml_tensor * m6[6];
    for (int k = 0; k < 6; ++k) {
        m6[k] = ggml_cont(ctx, ggml_view_1d(ctx, mods, c.hidden, (size_t) k * (size_t) c.hidden * sizeof(float)));
        m6[k] = ggml_reshape_3d(ctx, m6[k], c.hidden, 1, 1);
        ggml_format_name(m6[k], "b%d.mod%d", i, k);
        ggml_build_forward_expand(gf, m6[k]);
    }
    ggml_tensor * w_pre  = B.named(ggml_add(ctx, b.prenorm, in.one), "prenorm_w");
    ggml_tensor * w_post = B.named(ggml_add(ctx, b.postnorm, in.one), "postnorm_w");
    ggml_tensor * w_q    = B.named(ggml_add(ctx, b.qnorm, in.one), "qnorm_w");
    ggml_tensor * w_k    = B.named(ggml_add(ctx, b.knorm, in.one), "knorm_w");
    for (ggml_tensor * t : {w_pre, w_post, w_q, w_k}) ggml_build_forward_expand(gf, t);

    // attention half (a2..a21)
    ggml_tensor * x       = in.x;
    ggml_tensor * attn_in = B.modulated_norm(x, w_pre, m6[0], m6[1], "attn_in");
    ggml_tensor * q       = B.linear(b.wq, attn_in, "wq");
    ggml_tensor * k       = B.linear(b.wk, attn_in, "wk");
    ggml_tensor * v       = B.linear(b.wv, attn_in, "wv");
    if (!q || !k || !v) return nullptr;
    q = ggml_reshape_4d(ctx, q, D, H, L, 1);
    k = ggml_reshape_4d(ctx, k, D, Hkv, L, 1);
    v = ggml_reshape_4d(ctx, v, D, Hkv, L, 1);

    ggml_tensor * qn = B.named(ggml_rms_norm(ctx, q, c.eps), "q_norm");
    ggml_tensor * kn = B.named(ggml_rms_norm(ctx, k, c.eps), "k_norm");
    ggml_tensor * qm = B.named(ggml_mul(ctx, qn, w_q), "q_normw");
    ggml_tensor * km = B.named(ggml_mul(ctx, kn, w_k), "k_normw");
    ggml_tensor * qr, *kr;
    if (o.rope_ext) {
        qr = sd_rope_apply(ctx, qm, in.pe, SD_ROPE_INTERLEAVED);
        kr = sd_rope_apply(ctx, km, in.pe, SD_ROPE_INTERLEAVED);
        if (!qr || !kr) { err = sd_ggml_last_error(); return nullptr; }
    } else {
        qr = B.rope_chain(qm, in.pe);
        kr = B.rope_chain(km, in.pe);
    }
    B.named(qr, "q_rope");
    B.named(kr, "k_rope");
    // norm -> mul -> rope consecutive for each of q and k
    ggml_build_forward_expand(gf, qr);
    ggml_build_forward_expand(gf, kr);
    ggml_tensor * k16 = B.named(ggml_cast(ctx, kr, GGML_TYPE_F16), "k_f16");
    ggml_tensor * vp  = ggml_cont(ctx, ggml_permute(ctx, v, 0, 2, 1, 3));
    vp                = ggml_reshape_3d(ctx, vp, D, L, Hkv);
    ggml_tensor * v16 = B.named(ggml_cast(ctx, vp, GGML_TYPE_F16), "v_f16");
    ggml_tensor * fa  = ggml_flash_attn_ext(ctx, qr, k16, v16, nullptr, 1.0f / std::sqrt((float) D), 0.0f, 0.0f);
    ggml_flash_attn_ext_set_prec(fa, GGML_PREC_F32);
    B.named(fa, "attn");
    ggml_tensor * att = ggml_reshape_2d(ctx, fa, D * H, L);

    ggml_tensor * g = B.linear(b.gate, attn_in, "attn_gate");
    if (!g) return nullptr;
    ggml_tensor * gated = B.named(ggml_mul(ctx, att, ggml_sigmoid(ctx, g)), "attn_gated");
    ggml_tensor * wo    = B.linear(b.wo, gated, "wo");
    if (!wo) return nullptr;
    x = B.named(ggml_add(ctx, x, ggml_mul(ctx, wo, m6[2])), "x_attn");

    // MLP half (f1..f7)
    ggml_tensor * mlp_in = B.modulated_norm(x, w_post, m6[3], m6[4], "mlp_in");
    ggml_tensor * mg     = B.linear(b.mgate, mlp_in, "mlp_gate");
    if (!mg) return nullptr;
    mg               = ggml_silu(ctx, mg);
    ggml_tensor * up = B.linear(b.up, mlp_in, "mlp_up");
    if (!up) return nullptr;
    ggml_tensor * sw   = B.named(ggml_mul(ctx, mg, up), "swiglu");
    ggml_tensor * down = B.linear(b.down, sw, "mlp_down");
    if (!down) return nullptr;
    x = B.named(ggml_add(ctx, x, ggml_mul(ctx, down, m6[5])), "out");
    ggml_set_output(x);
    ggml_build_forward_expand(gf, x);
    return x;
}

} // namespace krea2
