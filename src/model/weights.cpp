// weights.cpp — Krea2 block weights from a safetensors checkpoint through sdio (src/io).

#include "weights.h"

#include "gguf_reader.h"
#include "io/comfy_int8.h"
#include "io/safetensors.h"

namespace krea2 {

namespace {

class checkpoint_source : public weight_source {
  public:
    checkpoint_source(std::unique_ptr<sdio::reader> r, sdio::header_quant h) : r_(std::move(r)), header_(std::move(h)) {}

    bool get_block(const config & cfg, int i, host_block & b, std::string & err) override {
        const std::string pre = "blocks." + std::to_string(i) + ".";
        for (int k = 0; k < 8; ++k) {
            sdio::linear_module m;
            const std::string   name = pre + LINEAR_NAMES[k];
            if (!sdio::read_linear(*r_, name, m, err, &header_)) return false;
            if (!m.bias.empty()) {
                err = "tensor " + name + ".bias: Krea2 block linears have no bias (unknown model layout)";
                return false;
            }
            host_linear & l = *b.linears[k];
            l.in            = m.in;
            l.out           = m.out;
            l.is_i8         = m.int8;
            l.group         = m.convrot ? m.group : 0;
            l.full_precision = m.full_precision_mm;
            l.f32           = std::move(m.weight_f32);
            l.i8            = std::move(m.weight_i8);
            l.scale         = std::move(m.weight_scale);
        }
        struct { const char * n; std::vector<float> * v; } vecs[] = {
            {"mod.lin", &b.mod_lin},
            {"prenorm.scale", &b.prenorm},
            {"postnorm.scale", &b.postnorm},
            {"attn.qknorm.qnorm.scale", &b.qnorm},
            {"attn.qknorm.knorm.scale", &b.knorm},
        };
        for (auto & e : vecs) {
            if (!sdio::read_floats(*r_, pre + e.n, *e.v, nullptr, err)) return false;
            if (!sdio::check_finite(*r_, pre + e.n, *e.v, 0, err)) return false; // NaN would only show as "deviation nan"
        }
        (void) cfg;
        return true;
    }

  private:
    std::unique_ptr<sdio::reader> r_;
    sdio::header_quant            header_; // parsed once, not per module
};

// The (in, out) of a linear's weight, from its torch shape [out, in].
bool weight_dims(const sdio::reader & r, const std::string & module, int64_t & in, int64_t & out, std::string & err) {
    const sdio::tensor_view * t = r.find(module + ".weight");
    if (!t) {
        err = "unknown model layout: no tensor " + module + ".weight in " + r.path();
        return false;
    }
    if (t->shape.size() != 2) {
        err = "tensor " + module + ".weight must be 2-D, has " + std::to_string(t->shape.size()) + " dims";
        return false;
    }
    out = t->shape[0];
    in  = t->shape[1];
    return true;
}

} // namespace

bool infer_layout(const std::string & path,
                  const std::function<bool(const std::string &, int64_t &, int64_t &, std::string &)> & linear_shape,
                  const std::function<bool(const std::string &)> & has_tensor, config & cfg, std::string & err) {
    int64_t in, out, kin, kout, gin, gout;
    if (!linear_shape("blocks.0.attn.wq", in, out, err) || !linear_shape("blocks.0.attn.wk", kin, kout, err) ||
        !linear_shape("blocks.0.mlp.gate", gin, gout, err)) {
        return false;
    }
    if (out % HEAD_DIM != 0 || kout % HEAD_DIM != 0) {
        err = "tensor blocks.0.attn.wq/wk.weight: output size is not a multiple of the head dim 128";
        return false;
    }
    int n = 0;
    while (has_tensor("blocks." + std::to_string(n) + ".attn.wq.weight")) ++n;
    if (cfg.blocks > n) {
        err = path + " has " + std::to_string(n) + " blocks, --blocks asks for " + std::to_string(cfg.blocks);
        return false;
    }
    cfg.hidden    = in;
    cfg.heads     = out / HEAD_DIM;
    cfg.kv_heads  = kout / HEAD_DIM;
    cfg.mlp       = gout;
    std::string v = cfg.validate();
    if (!v.empty()) {
        err = "unknown model layout in " + path + ": " + v;
        return false;
    }
    return true;
}

std::unique_ptr<weight_source> open_checkpoint(const std::string & path, config & cfg, std::string & err) {
    if (sdgguf::is_gguf_file(path)) return open_gguf_checkpoint(path, cfg, err);
    std::unique_ptr<sdio::reader> r = sdio::reader::open(path, err);
    if (!r) return nullptr;
    const auto shape = [&](const std::string & m, int64_t & in, int64_t & out, std::string & e) {
        return weight_dims(*r, m, in, out, e);
    };
    if (!infer_layout(path, shape, [&](const std::string & name) { return r->find(name) != nullptr; }, cfg, err)) {
        return nullptr;
    }
    sdio::header_quant header;
    if (!sdio::read_header_quant(*r, header, err)) return nullptr;
    return std::unique_ptr<weight_source>(new checkpoint_source(std::move(r), std::move(header)));
}

bool quantize_checkpoint(const std::string & in, const std::string & out, int group, std::string & err,
                         const std::function<void(size_t, size_t)> & progress) {
    return sdio::quantize_file(in, out, group, err, progress);
}


} // namespace krea2
