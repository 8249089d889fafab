// weights_gguf.cpp — Krea2 block weights from a GGUF checkpoint: tensor names as our
// safetensors writer names them (blocks.<i>.attn.wq.weight, ..., blocks.<i>.prenorm.scale),
// linear weights 2-D with ggml ne [in, out] (torch [out, in]), each tensor of any type this build
// can convert to float (F32, F16, BF16 and the block-quantized types), mixed per tensor as real
// files are. Every tensor is converted to F32 here; model::load then stores the linears in the
// stack's weight type (--dtype).

#include "weights.h"

#include "gguf_reader.h"
#include "io/safetensors.h" // display_name

#include <cmath>

namespace krea2 {

namespace {

bool all_finite(const std::vector<float> & v, const std::string & name, std::string & err) {
    for (size_t i = 0; i < v.size(); ++i) {
        if (!std::isfinite(v[i])) {
            err = "tensor " + sdio::display_name(name) + ": value " + std::to_string(i) + " is not finite (NaN or Inf)";
            return false;
        }
    }
    return true;
}

class gguf_source : public weight_source {
  public:
    explicit gguf_source(std::unique_ptr<sdgguf::reader> r) : r_(std::move(r)) {}

    bool get_block(const config & cfg, int i, host_block & b, std::string & err) override {
        (void) cfg;
        const std::string pre = "blocks." + std::to_string(i) + ".";
        for (int k = 0; k < 8; ++k) {
            const std::string   name = pre + LINEAR_NAMES[k];
            const ggml_tensor * t    = r_->find(name + ".weight");
            if (!t) {
                err = "unknown model layout: no tensor " + name + ".weight in " + r_->path();
                return false;
            }
            if (ggml_n_dims(t) > 2) {
                err = "tensor " + name + ".weight must be 2-D, has " + std::to_string(ggml_n_dims(t)) + " dims";
                return false;
            }
            if (r_->find(name + ".bias")) {
                err = "tensor " + name + ".bias: Krea2 block linears have no bias (unknown model layout)";
                return false;
            }
            host_linear & l = *b.linears[k];
            l.in            = t->ne[0];
            l.out           = t->ne[1];
            l.is_i8         = false;
            l.group         = 0;
            if (!r_->read_f32(t, l.f32, err) || !all_finite(l.f32, name + ".weight", err)) return false;
        }
        struct { const char * n; std::vector<float> * v; } vecs[] = {
            {"mod.lin", &b.mod_lin},
            {"prenorm.scale", &b.prenorm},
            {"postnorm.scale", &b.postnorm},
            {"attn.qknorm.qnorm.scale", &b.qnorm},
            {"attn.qknorm.knorm.scale", &b.knorm},
        };
        for (auto & e : vecs) {
            const std::string   name = pre + e.n;
            const ggml_tensor * t    = r_->find(name);
            if (!t) {
                err = "unknown model layout: no tensor " + name + " in " + r_->path();
                return false;
            }
            if (!r_->read_f32(t, *e.v, err) || !all_finite(*e.v, name, err)) return false;
        }
        return true;
    }

  private:
    std::unique_ptr<sdgguf::reader> r_;
};

bool dims(const sdgguf::reader & r, const std::string & module, int64_t & in, int64_t & out, std::string & err) {
    const ggml_tensor * t = r.find(module + ".weight");
    if (!t) {
        err = "unknown model layout: no tensor " + module + ".weight in " + r.path();
        return false;
    }
    if (ggml_n_dims(t) != 2) {
        err = "tensor " + module + ".weight must be 2-D, has " + std::to_string(ggml_n_dims(t)) + " dims";
        return false;
    }
    in  = t->ne[0];
    out = t->ne[1];
    return true;
}

} // namespace

std::unique_ptr<weight_source> open_gguf_checkpoint(const std::string & path, config & cfg, std::string & err) {
    std::unique_ptr<sdgguf::reader> r = sdgguf::reader::open(path, err);
    if (!r) return nullptr;
    const auto shape = [&](const std::string & m, int64_t & in, int64_t & out, std::string & e) {
        return dims(*r, m, in, out, e);
    };
    if (!infer_layout(path, shape, [&](const std::string & name) { return r->find(name) != nullptr; }, cfg, err)) {
        return nullptr;
    }
    return std::unique_ptr<weight_source>(new gguf_source(std::move(r)));
}

} // namespace krea2
