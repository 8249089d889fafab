#pragma once

// krea2.h — the Krea2 single-stream DiT block stack (dit-workloads.md §2.2, §2.3, §4) as a ggml
// graph, with every block linear in F32, BF16 or INT8 ConvRot, plus the host-side pieces the
// graph needs (weights in a backend buffer, the RoPE pe tensor, the modulation vector).
//
// Width is a parameter so that tests run small; the defaults are the real model's. The head
// dimension is fixed at 128 because the RoPE axes (32/48/48) cover exactly 128 dims.

#include "ggml-backend.h"
#include "ggml.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace krea2 {

constexpr int64_t HEAD_DIM = 128;

// q8_0 / q4_k: linear weights block-quantized (ggml types), computed by the backend's mul_mat
// with F32 activations; model::load refuses a type this build cannot quantize or multiply.
enum class wtype { f32, bf16, int8, q8_0, q4_k };
const char * wtype_name(wtype t);
bool         parse_wtype(const std::string & s, wtype & out);
struct config;
// "" when this build can run a stack of `type` at cfg's widths, else why not (one line): the
// block-quantized types need a quantizer, whole blocks per row and a CPU mul_mat for them.
std::string check_quant_wtype(const config & cfg, wtype type);

struct config {
    int64_t hidden      = 6144;
    int64_t heads       = 48;
    int64_t kv_heads    = 12;
    int64_t mlp         = 16384;
    int     blocks      = 2;
    int64_t tokens      = 1024; // L = text + image tokens
    int64_t text_tokens = 32;
    float   eps         = 1e-5f;
    int     group       = 256; // ConvRot group used when quantizing F32 weights to INT8
    float   theta       = 1000.0f;

    int64_t image_tokens() const { return tokens - text_tokens; }
    // "" when consistent, else why not (one line)
    std::string validate() const;
};

// ---------------------------------------------------------------------------------------------
// Host-side weights of one block: every linear as F32 or as stored INT8 (+ per-row scale).

struct host_linear {
    int64_t              in = 0, out = 0;
    bool                 is_i8 = false;
    int                  group = 0; // ConvRot group of the stored INT8 weight (0/1: none)
    bool                 full_precision = false; // the file asks for a float matmul (ComfyUI's full_precision_matrix_mult)
    std::vector<float>   f32;       // [out][in] (ggml [in, out])
    std::vector<int8_t>  i8;        // [out][in]
    std::vector<float>   scale;     // [out]
};

struct host_block {
    host_linear        wq, wk, wv, gate, wo, mgate, up, down;
    std::vector<float> mod_lin;  // [6*hidden]
    std::vector<float> prenorm, postnorm, qnorm, knorm;

    host_linear * linears[8] = {&wq, &wk, &wv, &gate, &wo, &mgate, &up, &down};
};

// Checkpoint names of the eight linears, in host_block::linears order.
extern const char * const LINEAR_NAMES[8];

// Where block weights come from. get_block is called once per block, in order.
class weight_source {
  public:
    virtual ~weight_source() = default;
    virtual bool get_block(const config & cfg, int i, host_block & out, std::string & err) = 0;
};

// Deterministic synthetic weights: linears uniform in [-1, 1) / sqrt(in), norm scales and the
// modulation parameter small uniform values; depends only on (seed, block, tensor).
class synthetic_source : public weight_source {
  public:
    explicit synthetic_source(uint64_t seed) : seed_(seed) {}
    bool get_block(const config & cfg, int i, host_block & out, std::string & err) override;
  private:
    uint64_t seed_;
};

// The synthetic tvec [6*hidden] (the shared timestep modulation vector) and input x
// [hidden, tokens] for a seed.
std::vector<float> synthetic_tvec(const config & cfg, uint64_t seed);
std::vector<float> synthetic_input(const config & cfg, uint64_t seed);

// Host pe tensor [2, 2, 64, L] (§4.2): text tokens ids (0,0,0), image tokens (0, y, x) on a
// square grid of side ceil(sqrt(I)) filled row-major.
std::vector<float> build_pe(const config & cfg);

// ---------------------------------------------------------------------------------------------
// Weights in a CPU backend buffer, in one dtype.

struct linear_t {
    ggml_tensor * w     = nullptr; // F32/BF16 [in, out] or I8 [in, out]
    ggml_tensor * scale = nullptr; // I8 only: F32 [out]
    int           group = 0;       // I8 only: ConvRot group the weight was rotated with
};

struct block_t {
    linear_t      wq, wk, wv, gate, wo, mgate, up, down;
    ggml_tensor * mod_lin = nullptr, *prenorm = nullptr, *postnorm = nullptr, *qnorm = nullptr, *knorm = nullptr;
};

// Called between linears while loading (done of total linears); it may throw to stop the load.
using progress_fn = std::function<void(int done, int total, const char * what)>;

class model {
  public:
    model() = default;
    ~model();
    model(const model &)             = delete;
    model & operator=(const model &) = delete;

    // Converts every block of src to `type` (F32 <-> BF16 <-> INT8 as needed: F32 -> INT8
    // quantizes with cfg.group, INT8 -> F32 dequantizes and undoes the rotation). src NULL:
    // layout only — the tensors get distinct addresses in reserved, inaccessible address space
    // and no memory (for plan inspection and memory measurement, which never compute).
    bool load(const config & cfg, wtype type, weight_source * src, std::string & err,
              const progress_fn & progress = nullptr);

    // Moves the loaded weights into a buffer of buft (the --device GPU's, so the ops that read
    // them run there without per-graph copies from host memory). A layout-only model gets an
    // uninitialised buffer (plans only). false, weights left where they were, when the buffer
    // cannot be allocated.
    bool move_to(ggml_backend_buffer_type_t buft, std::string & err);

    // Bytes of the weight buffer load() would allocate for cfg in type (nothing allocated).
    static size_t weight_bytes_for(const config & cfg, wtype type);

    const config &               cfg() const { return cfg_; }
    wtype                        type() const { return type_; }
    const std::vector<block_t> & blocks() const { return blocks_; }
    size_t                       weight_bytes() const;

  private:
    bool place_layout_only(std::string & err);

    config                cfg_;
    wtype                 type_   = wtype::f32;
    ggml_context *        ctx_    = nullptr;
    ggml_backend_buffer_t buf_    = nullptr;
    void *                reserved_      = nullptr; // layout-only address range (munmap'ed)
    size_t                reserved_size_ = 0;
    std::vector<block_t>  blocks_;
};

// ---------------------------------------------------------------------------------------------
// Graph construction

struct build_options {
    bool rope_ext = true; // sd_rope_apply; false: the native op chain of §4.3
    bool fusion   = true; // the sd fusion rules on while this model's graphs are scheduled
};

struct block_inputs {
    ggml_tensor * x    = nullptr; // F32 [hidden, L]
    ggml_tensor * pe   = nullptr; // F32 [2, 2, 64, L]
    ggml_tensor * tvec = nullptr; // F32 [6*hidden]
    ggml_tensor * one  = nullptr; // F32 [1] holding 1.0
};

// Creates the four inputs (flagged as inputs) in ctx.
block_inputs new_inputs(ggml_context * ctx, const config & cfg);

// Adds block i to gf and returns its output [hidden, L] (flagged as output). NULL with err
// when an sd constructor rejects its inputs.
ggml_tensor * build_block(ggml_context * ctx, ggml_cgraph * gf, const model & m, int i, const block_inputs & in,
                          const build_options & o, std::string & err);

// Graph metadata size for one block graph.
size_t block_graph_nodes();

} // namespace krea2
