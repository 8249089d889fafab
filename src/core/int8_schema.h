#pragma once

// int8_schema.h — the one decoder of the sd INT8 operators' nodes that every backend's kernels
// share (sd.quantize_i8_convrot.v1 and sd.linear_i8.v1; the schemas are in ggml_extensions.h):
// which source is which, the input kind, the ConvRot group, the sizes, the schema checks a
// kernel's supports() repeats, and the workspace layout of a linear step.
//
// Why a kernel re-checks what the schema's infer already validated: supports() also sees nodes
// whose attributes or sources were edited after construction, and a kernel must decline those
// rather than read out of bounds. decode_quantize / decode_linear accept exactly the nodes that
// any backend could run; a backend file (src/core/<backend>/) adds only its device limits (the
// groups its quantizer rotates, K alignment, index widths, binding sizes) and the launches.
//
// Backend-neutral and public ggml headers only (like everything under src/core): no backend
// header, no memory access — only tensor metadata is read, so a GPU backend calls it on its
// host side.

#include "ggml_extensions.h"
#include "ggml.h"

#include <cstdint>

namespace sd_int8_schema {

// ---------------------------------------------------------------------------------------------
// Layout arithmetic

inline int64_t  pad_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
inline uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
// Rows of a tensor whose rows run along ne0.
inline int64_t  rows_of(const ggml_tensor * t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

// The packed ConvRot activation (the quantizer's output, I8 [K, packed_ne1(K, rows)]): rows
// quantized rows of K bytes, zero rows up to pad4(rows), then the rows F32 scales starting at
// byte packed_scale_offset; ne1 rounds the scales up to whole K-byte rows.
inline int64_t packed_scale_offset(int64_t K, int64_t rows) { return K * pad_up(rows, 4); }
inline int64_t packed_bytes(int64_t K, int64_t rows) { return packed_scale_offset(K, rows) + 4 * rows; }
inline int64_t packed_ne1(int64_t K, int64_t rows) { return pad_up(rows, 4) + (rows * 4 + K - 1) / K; }

// A ConvRot group the schema allows: every power of 4 (1 = no rotation); it must also divide K.
inline bool valid_group(int g) { return g >= 1 && (g & (g - 1)) == 0 && (g & 0x55555555) != 0; }

// n contiguous F32 values (a weight scale, bias or input scale vector, any of its accepted shapes).
bool is_f32_vec(const ggml_tensor * t, int64_t n);

// ---------------------------------------------------------------------------------------------
// sd.quantize_i8_convrot.v1

struct quantize_node {
    const ggml_tensor * x     = nullptr; // F32 [K, rows...] contiguous
    const ggml_tensor * out   = nullptr; // I8 [K, packed_ne1(K, rows)] contiguous (the node)
    int                 group = 1;       // valid_group, divides K
    int64_t             K = 0, rows = 0;
};

// The node's ConvRot group attribute as stored (no checks; for nodes already decoded or matched).
int quantize_group(const ggml_tensor * node);

// Whether node is an sd.quantize_i8_convrot.v1 node any backend could run: one contiguous F32
// source, a valid group dividing K, the packed output shape. Fills q when true.
bool decode_quantize(const ggml_tensor * node, quantize_node & q);

// ---------------------------------------------------------------------------------------------
// sd.linear_i8.v1: y[M, N] = ((float(acc) * s_x[m]) * s_w[n]) + b[n], acc = sum_k a[m, k] w[n, k]

struct linear_node {
    const ggml_tensor * node         = nullptr; // F32 [N, out_ne[0], out_ne[1], out_ne[2]]
    const ggml_tensor * weight       = nullptr; // I8 [K, N]
    const ggml_tensor * input        = nullptr; // by kind: F32 [K, M...], packed I8, or I8 [K, M...]
    const ggml_tensor * weight_scale = nullptr; // N F32 values or NULL
    const ggml_tensor * bias         = nullptr; // N F32 values or NULL
    const ggml_tensor * input_scale  = nullptr; // M F32 values (kind SD_LINEAR_I8_INPUT_I8 only)
    int                 kind         = SD_LINEAR_I8_INPUT_F32; // enum sd_linear_i8_input_kind
    // the ConvRot group with 0 read as 1: kind F32, the group the backend quantizes with; kind
    // PACKED, the group the input was quantized with (the packed layout does not depend on it)
    int                 group        = 1;
    int64_t             M = 0, N = 0, K = 0; // activation rows, output channels, reduction length
    int64_t             out_ne[3]    = {0, 0, 0};
};

// The node's operands, kind, group and sizes from its attributes and sources; false when the
// source count does not match the flags or unknown flags are set. No shape checks: for
// execution paths of nodes decode_linear accepted (and for matching chains).
bool linear_operands(const ggml_tensor * node, linear_node & l);

// Whether node is an sd.linear_i8.v1 node any backend could run: I8 [K, N] contiguous weight
// with 0 < K <= SD_LINEAR_I8_MAX_K, F32 contiguous output of the attributes' shape, weight
// scale and bias of N values, and per kind: F32 input of M rows with a valid group dividing K;
// a packed input of at least packed_ne1(K, M) rows; I8 input of M rows with M input scales.
// Fills l when true.
bool decode_linear(const ggml_tensor * node, linear_node & l);

// ---------------------------------------------------------------------------------------------
// Workspace layout

// Byte offsets of the parts of a workspace, in order, each part starting at a multiple of the
// backend's alignment.
class workspace_layout {
public:
    explicit workspace_layout(uint64_t alignment) : align_(alignment) {}
    // The offset of a new part of `bytes` bytes (0 bytes: a part that is absent).
    uint64_t add(uint64_t bytes) {
        const uint64_t off = align_up(end_, align_);
        end_               = off + bytes;
        return off;
    }
    uint64_t end() const { return end_; }
    // The bytes to reserve; with_base_slack adds room to round a base pointer that is not
    // aligned up to the alignment (a backend whose workspace pointers carry no alignment).
    uint64_t total(bool with_base_slack) const { return with_base_slack ? align_up(end_, align_) + align_ : end_; }

private:
    uint64_t align_;
    uint64_t end_ = 0;
};

enum class activation_layout {
    // what the backend's quantizer writes (packed_bytes(K, M): rows, then scales at
    // packed_scale_offset); reserved for F32 input only, since packed and plain I8 inputs are
    // read where they are
    packed,
    // M rows of pad_up(K, k_multiple) bytes (zero padded), then M F32 scales, then (row_sums) M
    // int32 row sums; reserved for every kind, as a backend copies I8 rows into it when its
    // GEMM needs padded rows or the input overlaps the output
    padded_rows,
};

struct linear_workspace_spec {
    uint64_t          alignment   = 64; // every part's offset is a multiple (the backend's)
    activation_layout layout      = activation_layout::packed;
    int64_t           k_multiple  = 1;     // padded_rows: the row stride's multiple
    bool              row_sums    = false; // padded_rows: reserve the int32 row sums
    uint64_t          stage_bytes = 0;     // the output staged here when it overlaps an input (0: none)
};

struct linear_workspace {
    uint64_t act_off = 0, act_bytes = 0, act_stride = 0; // quantized activation rows, row stride
    uint64_t scale_off  = 0;                              // M F32 activation scales
    uint64_t rowsum_off = 0;                              // M int32 row sums (row_sums)
    uint64_t stage_off = 0, stage_bytes = 0;              // the staged output
    // the parts above; a backend appends its own parts and reserves parts.total(...)
    workspace_layout parts{64};
};

// The activation and staging parts of a linear step's workspace (l from decode_linear).
linear_workspace plan_linear_workspace(const linear_node & l, const linear_workspace_spec & spec);

} // namespace sd_int8_schema
