// int8.cpp — sd.quantize_i8_convrot.v1 and sd.linear_i8.v1 on Vulkan through the public
// execution services (vk_service.h), plus the fusions Linear -> Mul(gate) -> Add(residual) and
// GEMM -> SwiGLU [-> ConvRot], with graph-delay rules (optimize callbacks) that bring a chain's
// nodes together when independent nodes sit between them.
//
// Exactness: the quantizer shader replicates the CPU portable kernel's float operation order and
// computes the two divisions (amax / 127, 1 / s) exactly in integers, so packed bytes and scales
// are bit-identical to the CPU's; the GEMM's integer sums are exact int32 and its epilogue runs
// the CPU's steps in the CPU's order, each rounded separately.
//
// Supported (anything else declines, and the scheduler runs the node elsewhere, e.g. the CPU):
// K % 4 == 0 (32-bit words), every ConvRot group (a power of 4; F32 inputs and the quantizer;
// rows whose per-lane loop count is within sd_vk::kLoopBudget, i.e. K up to ~170k at 8 lanes for
// groups up to 256, every K the INT8 linear admits for larger groups), packed and
// plain I8 inputs (any group: the packed layout does not depend on it), weights, weight scales,
// biases and gates within one storage-buffer binding window (they are bound whole), row-wise
// tensors of any size (bound a window of rows per dispatch: the device's maxStorageBufferRange,
// 128 MiB on lavapipe, or SD_VK_MAX_BINDING_BYTES, bounds each binding, not the tensor). Outputs
// that overlap an input are computed into the workspace and copied (the service's copy), so any
// allocator reuse is safe.
//
// The integer path is an int32 multiply-add on bytes unpacked from 32-bit words: the build's
// glslc (Debian 12) rejects GL_EXT_integer_dot_product, so no integer-dot-product variant exists
// yet even where the device reports the feature (lavapipe does, not accelerated).

#include "int8.h"

#include "../chain_match.h"
#include "../ggml_extensions.h"
#include "../int8_schema.h"
#include "../kernel_desc.h"
#include "../graph_gather.h"
#include "vk_service.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>
#include <vector>

namespace {

using sd_vk::bound;

constexpr uint32_t kLinearLocal = 64; // 4 x 4 output tiles per GEMM workgroup
constexpr int64_t  kTile        = 4;

// The node decoding, schema checks and layout arithmetic are the shared ones (int8_schema.h);
// this file adds the device's limits and the dispatches. The quantizer shader rotates every
// group the schema allows (up to 256 in one private array, larger ones through a scratch row,
// convrot_large.glsl), so groups add no limit here.
using sd_int8_schema::linear_node;
using sd_int8_schema::pad_up;
// Tensors are bound as 32-bit words: a view must start on a 4-byte boundary.
bool word_aligned(const ggml_tensor * t) { return t->view_src == nullptr || t->view_offs % 4 == 0; }
bool bindable(ggml_backend_dev_t dev, const ggml_tensor * t) {
    return word_aligned(t) && sd_vk::fits_binding(dev, ggml_nbytes(t));
}

// ---------------------------------------------------------------------------------------------
// The quantizer dispatch (shared by the node and by the F32-input linear)

struct quant_push {
    uint32_t x_off, o_off, K, rows, prows, s_off;
    float    gscale;
    uint32_t row0, row_end, t_off;
};

} // namespace

int64_t sd_vulkan_quant_window_rows(ggml_backend_dev_t dev, int64_t K) {
    // the F32 input rows are the widest row-wise binding (4 K bytes a row; the packed rows take
    // K, the scales 4); windows of whole quartets of rows, the packed layout's padding unit
    return K > 0 ? sd_vk::window_rows(dev, 4 * (uint64_t) K, 4) : 0;
}

namespace {

// Quantizes rows x K floats at x into the packed layout at dst (K * pad4(rows) bytes of rows,
// then the F32 scales). Each dispatch binds only its rows of x, of the packed rows and of the
// scales: windows of sd_vulkan_quant_window_rows rows (a binding spans at most
// sd_vk::max_binding_bytes), fewer for groups above 256, whose F32 scratch rows (`scratch`,
// sd_vulkan_convrot_scratch_bytes; ignored otherwise) hold sd_vulkan_convrot_chunk_rows rows.
// Rows are independent, so the windows change no value.
ggml_status run_quantizer(ggml_backend_t backend, const sd_vk::region & x, const sd_vk::region & dst,
                          const bound * scratch, int64_t K, int64_t rows, int group) {
    const ggml_backend_dev_t dev   = ggml_backend_get_device(backend);
    const int64_t            prows = pad_up(rows, 4);
    const bool               large = group > 256;
    if (large && !scratch) return GGML_STATUS_FAILED;
    int64_t chunk = sd_vulkan_quant_window_rows(dev, K);
    if (chunk <= 0) return GGML_STATUS_FAILED;
    if (large) {
        const int64_t s = sd_vulkan_convrot_chunk_rows(dev, K, rows);
        if (s < chunk) chunk = s;
    }
    const uint64_t scale_base = (uint64_t) sd_int8_schema::packed_scale_offset(K, rows);
    quant_push     pc{};
    pc.K      = (uint32_t) K;
    pc.rows   = (uint32_t) rows;
    pc.prows  = (uint32_t) prows;
    pc.gscale = 1.0f / sqrtf((float) group); // the CPU kernel's expression (exact: a power of 2)
    pc.t_off  = large ? scratch->words() : 0;
    const uint32_t W = GGML_EXT_VULKAN_WRITE;
    for (int64_t r0 = 0; r0 < prows; r0 += chunk) {
        const int64_t n = prows - r0 < chunk ? prows - r0 : chunk;
        // the real rows of this window (a window of padding rows only, possible when the scratch
        // splits a quartet, binds the last real row: never read, its scale never written)
        const int64_t real = (r0 + n < rows ? r0 + n : rows) - r0;
        const int64_t xr0 = real > 0 ? r0 : rows - 1, xn = real > 0 ? real : 1;
        bound         bx, bo, bs;
        ggml_status   s = sd_vk::bind_region(backend, x, (uint64_t) xr0 * 4 * K, (uint64_t) xn * 4 * K,
                                             GGML_EXT_VULKAN_READ, bx);
        if (s == GGML_STATUS_SUCCESS) s = sd_vk::bind_region(backend, dst, (uint64_t) (r0 * K), (uint64_t) (n * K), W, bo);
        if (s == GGML_STATUS_SUCCESS)
            s = sd_vk::bind_region(backend, dst, scale_base + 4 * (uint64_t) xr0, 4 * (uint64_t) xn, W, bs);
        if (s != GGML_STATUS_SUCCESS) return s;
        pc.x_off   = bx.words();
        pc.o_off   = bo.words();
        pc.s_off   = real > 0 ? bs.words() : 0;
        pc.row0    = (uint32_t) r0;
        pc.row_end = (uint32_t) (r0 + n);
        const bound * b[4] = {&bx, &bo, large ? scratch : &bx, &bs}; // without a scratch: any range, never read
        uint32_t      wg = 0, groups[3];
        sd_vk::subgroup_grid(backend, (uint64_t) n, wg, groups); // one subgroup per row
        const uint32_t spec[2] = {wg, (uint32_t) group};
        s = sd_vk::dispatch(backend, "quantize_i8_convrot", b, 4, spec, 2, &pc, sizeof(pc), groups);
        if (s != GGML_STATUS_SUCCESS) return s;
    }
    return GGML_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------------------------
// sd.quantize_i8_convrot.v1

bool quant_supports(ggml_backend_dev_t dev, const ggml_tensor * node, void *) {
    return sd_vulkan_quantize_supported(dev, node);
}

} // namespace

int64_t sd_vulkan_convrot_chunk_rows(ggml_backend_dev_t dev, int64_t K, int64_t rows) {
    // a scratch window of at most 64 MiB (and the device's binding range): 4096 tokens of the
    // 16384-wide MLP row in four dispatches. SD_VK_CONVROT_SCRATCH_BYTES lowers the window (the
    // tests split a few rows over several dispatches with it); read at every call.
    uint64_t     cap = 64ull << 20;
    const char * env = getenv("SD_VK_CONVROT_SCRATCH_BYTES");
    if (env && strtoull(env, nullptr, 10) > 0 && strtoull(env, nullptr, 10) < cap) cap = strtoull(env, nullptr, 10);
    const uint64_t window = dev ? sd_vk::max_binding_bytes(dev) : 0;
    if (window > 0 && window < cap) cap = window;
    const int64_t prows = pad_up(rows, 4);
    const int64_t fit   = K > 0 ? (int64_t) (cap / (4 * (uint64_t) K)) : prows;
    return fit < 1 ? 1 : (fit < prows ? fit : prows);
}

uint64_t sd_vulkan_convrot_scratch_bytes(ggml_backend_dev_t dev, int64_t K, int64_t rows, int group) {
    if (group <= 256) return 0;
    return 4 * (uint64_t) K * (uint64_t) sd_vulkan_convrot_chunk_rows(dev, K, rows);
}

uint64_t sd_vulkan_quant_lane_iterations(ggml_backend_dev_t dev, int64_t K, int group, bool with_norm) {
    const uint64_t lanes = sd_vk::min_subgroup_size(dev);
    if (group > 256) {
        // convrot_large.glsl: per 256-value block the load loop (V = 64), the stages 4..64 (3
        // loops of V / 4) and the store loop (V): under 4 V + 8; per cross-block stage K / 16
        // quartets over the lanes; the packing (or zero) loop K / 4 words over the lanes; the
        // scale's integer divisions and the loop heads a constant.
        uint64_t stages = 0;
        for (uint64_t s = 256; s < (uint64_t) group; s *= 4) ++stages;
        const uint64_t blocks = ((uint64_t) K + 256 * lanes - 1) / (256 * lanes);
        uint64_t       n      = blocks * (4 * 64 + 8) + stages * (((uint64_t) K / 16 + lanes - 1) / lanes + 2) +
                     ((uint64_t) K / 4 + lanes - 1) / lanes + 256;
        if (with_norm) n += ((uint64_t) K + lanes - 1) / lanes;
        return n;
    }
    // convrot.glsl: a step is max(G, 16) values (V = step / 4 vec4); per step and pass the load
    // loop runs V times, the stages s >= 4 V / 4 each (at most 3), the amax or packing loop V
    // times, so both passes stay under 6 V + 8 per step. Per row: the zero / padding writes (K / 4
    // words), the norm's reduction (K values) split over the lanes, and a constant for the
    // scale's integer divisions (about 80 iterations) and the loop heads.
    const uint64_t step = (uint64_t) (group < 16 ? 16 : group), V = step / 4;
    const uint64_t steps = ((uint64_t) K + step * lanes - 1) / (step * lanes);
    uint64_t       n     = steps * (6 * V + 8) + ((uint64_t) K / 4 + lanes - 1) / lanes + 256;
    if (with_norm) n += ((uint64_t) K + lanes - 1) / lanes;
    return n;
}

bool sd_vulkan_quantize_supported(ggml_backend_dev_t dev, const ggml_tensor * node) {
    sd_int8_schema::quantize_node q;
    if (!sd_int8_schema::decode_quantize(node, q)) return false;
    // the device's limits: 32-bit words and indices, at least one row, the lane loop budget,
    // binding windows
    const int64_t K = q.K, rows = q.rows;
    // (the shader indexes within one window; row numbers are 32-bit push constants)
    if (K % 4 != 0 || K > UINT32_MAX / 4 || rows <= 0 || rows > INT32_MAX) return false;
    if (sd_vulkan_quant_lane_iterations(dev, K, q.group, false) > sd_vk::kLoopBudget) return false;
    // any number of rows: dispatches over windows of rows; one quartet of rows must fit a window
    return word_aligned(q.x) && word_aligned(node) && sd_vulkan_quant_window_rows(dev, K) > 0;
}

namespace {

// Workspace: [staged output (when it overlaps the input)] [scratch rows (groups above 256)]
uint64_t quant_scratch_off(const ggml_tensor * node) { return pad_up((int64_t) ggml_nbytes(node), 256); }

uint64_t quant_scratch_bytes(ggml_backend_dev_t dev, const ggml_tensor * node) {
    return sd_vulkan_convrot_scratch_bytes(dev, node->src[0]->ne[0], sd_int8_schema::rows_of(node->src[0]),
                                           sd_int8_schema::quantize_group(node));
}

ggml_status quant_prepare(ggml_backend_dev_t dev, const ggml_ext_nodes * nodes, void **, size_t * ws, void *) {
    const ggml_tensor * node  = nodes->nodes[nodes->n_nodes - 1];
    const uint64_t      extra = quant_scratch_bytes(dev, node);
    *ws                       = extra ? quant_scratch_off(node) + extra : ggml_nbytes(node);
    return GGML_STATUS_SUCCESS;
}

ggml_status quant_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void *, void * ws, size_t ws_bytes,
                          void *) {
    const ggml_tensor *           node = nodes->nodes[nodes->n_nodes - 1];
    sd_int8_schema::quantize_node q;
    if (!sd_int8_schema::decode_quantize(node, q)) return GGML_STATUS_FAILED;
    const int64_t K = q.K, rows = q.rows;
    bound         bx, bo; // whole ranges, for the alias check only (never dispatched: maybe over a window)
    ggml_status   s = sd_vk::bind_tensor(backend, q.x, 0, 0, GGML_EXT_VULKAN_READ, bx);
    if (s == GGML_STATUS_SUCCESS) s = sd_vk::bind_tensor(backend, node, 0, 0, GGML_EXT_VULKAN_WRITE, bo);
    if (s != GGML_STATUS_SUCCESS) return s;
    bound          scratch;
    const uint64_t extra = quant_scratch_bytes(ggml_backend_get_device(backend), node);
    if (extra) {
        if (!ws || ws_bytes < quant_scratch_off(node) + extra) return GGML_STATUS_FAILED;
        s = sd_vk::bind_base(backend, ws, quant_scratch_off(node), extra, GGML_EXT_VULKAN_READ_WRITE, scratch);
        if (s != GGML_STATUS_SUCCESS) return s;
    }
    const bound * sp = extra ? &scratch : nullptr;
    const sd_vk::region x = sd_vk::region_of(q.x);
    if (!sd_vk::overlap(bx, bo)) return run_quantizer(backend, x, sd_vk::region_of(node), sp, K, rows, q.group);
    // the output overlaps the input: quantize into the workspace, then copy
    if (!ws || ws_bytes < ggml_nbytes(node)) return GGML_STATUS_FAILED;
    bound stage;
    s = sd_vk::bind_base(backend, ws, 0, ggml_nbytes(node), GGML_EXT_VULKAN_READ_WRITE, stage);
    if (s == GGML_STATUS_SUCCESS) s = run_quantizer(backend, x, sd_vk::region_at(ws, 0), sp, K, rows, q.group);
    if (s == GGML_STATUS_SUCCESS) s = sd_vk::copy(backend, bo, stage);
    return s;
}

// ---------------------------------------------------------------------------------------------
// sd.linear_i8.v1

// Rows per GEMM dispatch (a multiple of 4, the tile): every row-wise binding, the activations' K
// bytes and F32 scale and the output's or residual's 4 N bytes a row, holds that many rows
// within one binding window (sd_vk::max_binding_bytes). 0: not even 4 rows fit.
int64_t linear_window_rows(ggml_backend_dev_t dev, int64_t K, int64_t N) {
    const uint64_t row = (uint64_t) K > 4 * (uint64_t) N ? (uint64_t) K : 4 * (uint64_t) N;
    return sd_vk::window_rows(dev, row, 4);
}

// The schema's checks (sd_int8_schema::decode_linear), then the device's limits: K in 32-bit
// words, at least one row, 32-bit element indices, the weights bindable whole and four rows of
// each row-wise tensor within one binding; an F32 input also within the quantizer's lane loop
// budget and its windows.
bool linear_supports(ggml_backend_dev_t dev, const ggml_tensor * node, void *) {
    linear_node l;
    if (!sd_int8_schema::decode_linear(node, l)) return false;
    const int64_t K = l.K, rows = l.M;
    if (K % 4 != 0 || rows <= 0) return false;
    if (K > UINT32_MAX / 4 || l.N > UINT32_MAX / 4 || rows > INT32_MAX / 4) return false; // 32-bit push constants
    // the weights, their scales and the bias are bound whole: each must fit one binding
    for (const ggml_tensor * t : {l.weight, l.weight_scale, l.bias})
        if (t && !bindable(dev, t)) return false;
    // the row-wise tensors go in windows of rows: a quartet of rows must fit one
    for (const ggml_tensor * t : {l.input, l.input_scale, node})
        if (t && !word_aligned(t)) return false;
    if (linear_window_rows(dev, K, l.N) <= 0) return false;
    if (l.kind != SD_LINEAR_I8_INPUT_F32) return true;
    return sd_vulkan_quant_lane_iterations(dev, K, l.group, false) <= sd_vk::kLoopBudget &&
           sd_vulkan_quant_window_rows(dev, K) > 0;
}

// linear_i8.comp MODE 1 (the subgroup-broadcast GEMM) block: 8 * kSgRowGroups rows x
// 8 * kSgChannels channels per 8-lane workgroup (half the channels with SwiGLU's second
// accumulator set). Measured on lavapipe (Zen 3): see use_subgroup_gemm.
constexpr uint32_t kSgRowGroups = 2, kSgChannels = 2;
constexpr bool     kSgFloatMac  = false; // lavapipe K=N=3072 x256: int32 0.93x the time of F32 chunks (noise-level)

// MODE 1's multiply-add: F32 chunks (FMAC) or int32. SD_VK_LINEAR_I8=sg-int / sg-f32 picks one.
bool sg_float_mac() {
    const char * env = getenv("SD_VK_LINEAR_I8");
    if (env && strcmp(env, "sg-int") == 0) return false;
    if (env && strcmp(env, "sg-f32") == 0) return true;
    return kSgFloatMac;
}

// MODE 1 where it pays and its preconditions hold: CPU drivers (lavapipe) with exactly 8-lane
// subgroups and subgroupBroadcast, K % 16 == 0 and 16-byte aligned I8 operands (the 16-byte
// loads). SD_VK_LINEAR_I8=tile4 forces the previous 4x4-per-invocation kernel (benchmarks
// compare the two in one run); read per dispatch.
bool use_subgroup_gemm(ggml_backend_t backend, int64_t K, std::initializer_list<const bound *> i8) {
    const char * env = getenv("SD_VK_LINEAR_I8");
    if (env && strcmp(env, "tile4") == 0) return false;
    const ggml_ext_vulkan_device_info * info = sd_vk::device_info(ggml_backend_get_device(backend));
    if (!info || !info->is_cpu || !info->subgroup_ballot || info->subgroup_size != 8 || info->subgroup_min_size != 8 ||
        info->subgroup_max_size != 8)
        return false;
    if (K % 16 != 0) return false;
    for (const bound * b : i8)
        if (b->r.shader_offset % 16 != 0) return false;
    return true;
}

// Workspace, parts on 256-byte boundaries: [quantized activations + scales in the packed layout
// (F32 input)] [staged output (overlap)] (sd_int8_schema::plan_linear_workspace), then [the
// quantizer's scratch rows (a ConvRot group above 256 for the F32 input, or for the quantized
// SwiGLU product `quant`)]
struct linear_layout {
    sd_int8_schema::linear_workspace common; // the shared parts (activations, staging)
    uint64_t                         scratch_off = 0, scratch_bytes = 0, total = 0;
};

linear_layout layout_of(ggml_backend_dev_t dev, const linear_node & ln, const ggml_tensor * out,
                        const ggml_tensor * quant = nullptr) {
    sd_int8_schema::linear_workspace_spec spec;
    spec.alignment   = 256;
    spec.layout      = sd_int8_schema::activation_layout::packed;
    spec.stage_bytes = ggml_nbytes(out);
    linear_layout l;
    l.common = sd_int8_schema::plan_linear_workspace(ln, spec);
    if (ln.kind == SD_LINEAR_I8_INPUT_F32) l.scratch_bytes = sd_vulkan_convrot_scratch_bytes(dev, ln.K, ln.M, ln.group);
    if (quant) {
        const uint64_t q = sd_vulkan_convrot_scratch_bytes(dev, ln.N, ln.M, sd_int8_schema::quantize_group(quant));
        if (q > l.scratch_bytes) l.scratch_bytes = q;
    }
    if (l.scratch_bytes) l.scratch_off = l.common.parts.add(l.scratch_bytes);
    l.total = l.common.parts.total(false);
    return l;
}

// The workspace bytes of a step whose GEMM is the linear `lin` (out and quant as for layout_of).
ggml_status workspace_of(ggml_backend_dev_t dev, const ggml_tensor * lin, const ggml_tensor * out,
                         const ggml_tensor * quant, size_t * ws) {
    linear_node ln;
    if (!sd_int8_schema::linear_operands(lin, ln)) return GGML_STATUS_FAILED;
    *ws = layout_of(dev, ln, out, quant).total;
    return GGML_STATUS_SUCCESS;
}

struct linear_push {
    uint32_t w_off, a_off, sx_off, sw_off, b_off, y_off, g_off, r_off;
    uint32_t K, N, rows, n_tiles;
    uint32_t wu_off, swu_off, bu_off;
};

// The extensions of the plain GEMM a fused step asks for (all NULL: the linear alone).
struct gemm_extras {
    const ggml_tensor * gate     = nullptr; // MUL(., gate[N])
    const ggml_tensor * residual = nullptr; // ADD(residual, .)
    const ggml_tensor * up       = nullptr; // SwiGLU: the up linear (same input): silu(lin) * up
    const ggml_tensor * quant    = nullptr; // then sd.quantize_i8_convrot.v1 of the result
};

// lin: the linear; out: where its result goes (the node, or the fused chain's last node, of the
// linear's shape; with x.quant, the F32 intermediate the quantizer reads, kept in the workspace).
// The weights, their scales, the biases and the gate are bound whole (they must fit one binding);
// the row-wise tensors (activations and their scales, the output, the residual) are bound a
// window of linear_window_rows rows per dispatch. Every output element is computed alone, so the
// windows change no value.
ggml_status linear_run(ggml_backend_t backend, const ggml_tensor * lin, const ggml_tensor * out, const gemm_extras & x,
                       void * ws, size_t ws_bytes) {
    const ggml_tensor *gate = x.gate, *residual = x.residual;
    linear_node        src;
    if (!sd_int8_schema::linear_operands(lin, src)) return GGML_STATUS_FAILED;
    const ggml_backend_dev_t dev = ggml_backend_get_device(backend);
    const int64_t            K = src.K, N = src.N, rows = src.M;
    const int64_t            chunk = linear_window_rows(dev, K, N);
    if (chunk <= 0) return GGML_STATUS_FAILED;
    const linear_layout l = layout_of(dev, src, out, x.quant);
    if (l.total > 0 && (!ws || ws_bytes < l.total)) return GGML_STATUS_FAILED;
    bound scratch;
    if (l.scratch_bytes) {
        const ggml_status s =
            sd_vk::bind_base(backend, ws, l.scratch_off, l.scratch_bytes, GGML_EXT_VULKAN_READ_WRITE, scratch);
        if (s != GGML_STATUS_SUCCESS) return s;
    }
    const bound * sp = l.scratch_bytes ? &scratch : nullptr;

    const uint32_t R = GGML_EXT_VULKAN_READ;
    bound          bw, ba, bsx, bsw, bb, by, bg, br, bwu, bswu, bbu;
    ggml_status    s = sd_vk::bind_tensor(backend, src.weight, 0, 0, R, bw);
    if (s != GGML_STATUS_SUCCESS) return s;
    linear_node up;
    if (x.up && !sd_int8_schema::linear_operands(x.up, up)) return GGML_STATUS_FAILED;
    // activations: quantized into the workspace (F32), the packed rows + their scale tail, or
    // plain I8 rows + input_scale
    const sd_int8_schema::linear_workspace & act = l.common;
    sd_vk::region                            act_rows, act_scales;
    switch (src.kind) {
        case SD_LINEAR_I8_INPUT_F32:
            s = run_quantizer(backend, sd_vk::region_of(src.input), sd_vk::region_at(ws, act.act_off), sp, K, rows,
                              src.group);
            act_rows   = sd_vk::region_at(ws, act.act_off);
            act_scales = sd_vk::region_at(ws, act.scale_off);
            break;
        case SD_LINEAR_I8_INPUT_PACKED:
            act_rows   = sd_vk::region_of(src.input);
            act_scales = sd_vk::region{src.input, nullptr, (uint64_t) sd_int8_schema::packed_scale_offset(K, rows)};
            break;
        case SD_LINEAR_I8_INPUT_I8:
            act_rows   = sd_vk::region_of(src.input);
            act_scales = sd_vk::region_of(src.input_scale);
            break;
        default: return GGML_STATUS_FAILED;
    }
    if (s != GGML_STATUS_SUCCESS) return s;
    // whole ranges of the row-wise tensors, for the alias checks only (never dispatched)
    if ((s = sd_vk::bind_region(backend, act_rows, 0, (uint64_t) (K * rows), R, ba)) != GGML_STATUS_SUCCESS) return s;
    if ((s = sd_vk::bind_region(backend, act_scales, 0, 4 * (uint64_t) rows, R, bsx)) != GGML_STATUS_SUCCESS) return s;
    // absent operands: any valid range (the weight), never read
    bsw = bb = bg = br = bwu = bswu = bbu = bw;
    if (x.up && (s = sd_vk::bind_tensor(backend, up.weight, 0, 0, R, bwu)) != GGML_STATUS_SUCCESS) return s;
    if (up.weight_scale && (s = sd_vk::bind_tensor(backend, up.weight_scale, 0, 0, R, bswu)) != GGML_STATUS_SUCCESS)
        return s;
    if (up.bias && (s = sd_vk::bind_tensor(backend, up.bias, 0, 0, R, bbu)) != GGML_STATUS_SUCCESS) return s;
    if (src.weight_scale && (s = sd_vk::bind_tensor(backend, src.weight_scale, 0, 0, R, bsw)) != GGML_STATUS_SUCCESS)
        return s;
    if (src.bias && (s = sd_vk::bind_tensor(backend, src.bias, 0, 0, R, bb)) != GGML_STATUS_SUCCESS) return s;
    if (gate && (s = sd_vk::bind_tensor(backend, gate, 0, 0, R, bg)) != GGML_STATUS_SUCCESS) return s;
    if (residual && (s = sd_vk::bind_tensor(backend, residual, 0, 0, R, br)) != GGML_STATUS_SUCCESS) return s;
    bound               bout;
    const ggml_tensor * dst = x.quant ? x.quant : out;
    if ((s = sd_vk::bind_tensor(backend, dst, 0, 0, GGML_EXT_VULKAN_READ_WRITE, bout)) != GGML_STATUS_SUCCESS) return s;

    // the output must not overlap anything the GEMM reads, except a residual it covers exactly
    // (each element is read, then written, by the same invocation); a quantized result goes
    // through the workspace anyway
    bool stage = x.quant != nullptr;
    for (const bound * in : {&bw, &ba, &bsx, &bsw, &bb, &bg, &bwu, &bswu, &bbu}) stage = stage || sd_vk::overlap(bout, *in);
    if (residual && sd_vk::overlap(bout, br) && !sd_vk::same_range(bout, br)) stage = true;
    const sd_vk::region y_rows = stage ? sd_vk::region_at(ws, act.stage_off) : sd_vk::region_of(out);

    linear_push pc{};
    pc.w_off   = bw.words();
    pc.sw_off  = bsw.words();
    pc.b_off   = bb.words();
    pc.g_off   = bg.words();
    pc.K       = (uint32_t) K;
    pc.N       = (uint32_t) N;
    const int64_t tn = x.up ? kTile / 2 : kTile; // the shader's TN (SwiGLU: two accumulator sets)
    pc.n_tiles = (uint32_t) ((N + tn - 1) / tn);
    pc.wu_off  = bwu.words();
    pc.swu_off = bswu.words();
    pc.bu_off  = bbu.words();
    const uint64_t sg_cols = 8u * (x.up ? kSgChannels / 2 : kSgChannels), sg_rows = 8u * kSgRowGroups;
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t  n  = rows - r0 < chunk ? rows - r0 : chunk;
        const uint64_t yb = 4 * (uint64_t) N; // output / residual bytes per row
        if ((s = sd_vk::bind_region(backend, act_rows, (uint64_t) (r0 * K), (uint64_t) (n * K), R, ba)) !=
                GGML_STATUS_SUCCESS ||
            (s = sd_vk::bind_region(backend, act_scales, 4 * (uint64_t) r0, 4 * (uint64_t) n, R, bsx)) !=
                GGML_STATUS_SUCCESS ||
            (s = sd_vk::bind_region(backend, y_rows, yb * (uint64_t) r0, yb * (uint64_t) n, GGML_EXT_VULKAN_READ_WRITE,
                                    by)) != GGML_STATUS_SUCCESS)
            return s;
        if (residual && (s = sd_vk::bind_region(backend, sd_vk::region_of(residual), yb * (uint64_t) r0,
                                                yb * (uint64_t) n, R, br)) != GGML_STATUS_SUCCESS)
            return s;
        pc.a_off  = ba.words();
        pc.sx_off = bsx.words();
        pc.y_off  = by.words();
        pc.r_off  = br.words();
        pc.rows   = (uint32_t) n;
        const uint64_t tiles = (uint64_t) pc.n_tiles * (uint64_t) ((n + kTile - 1) / kTile);
        uint32_t spec[12] = {kLinearLocal,        src.weight_scale != nullptr, src.bias != nullptr,
                             gate != nullptr,     residual != nullptr,         x.up != nullptr,
                             up.weight_scale != nullptr, up.bias != nullptr,   0u,
                             kSgRowGroups,        x.up ? kSgChannels / 2 : kSgChannels, sg_float_mac()};
        uint32_t groups[3];
        if (use_subgroup_gemm(backend, K, {&bw, &ba, x.up ? &bwu : &bw}) &&
            (uint64_t) ((N + sg_cols - 1) / sg_cols) <= 65535 && (uint64_t) ((n + sg_rows - 1) / sg_rows) <= 65535) {
            // linear_i8.comp MODE 1: one 8-lane workgroup per (8 * TC channels) x (8 * RA rows) block
            spec[0]   = 8;
            spec[8]   = 1;
            groups[0] = (uint32_t) ((N + sg_cols - 1) / sg_cols);
            groups[1] = (uint32_t) ((n + sg_rows - 1) / sg_rows);
            groups[2] = 1;
        } else {
            sd_vk::grid_1d(backend, (tiles + kLinearLocal - 1) / kLinearLocal, groups);
        }
        const bound * b[11] = {&bw, &ba, &bsx, &bsw, &bb, &by, &bg, &br, &bwu, &bswu, &bbu};
        s = sd_vk::dispatch(backend, "linear_i8", b, 11, spec, 12, &pc, sizeof(pc), groups);
        if (s != GGML_STATUS_SUCCESS) return s;
    }
    if (x.quant)
        return run_quantizer(backend, y_rows, sd_vk::region_of(x.quant), sp, N, rows,
                             sd_int8_schema::quantize_group(x.quant));
    if (stage) {
        if ((s = sd_vk::bind_base(backend, ws, act.stage_off, act.stage_bytes, GGML_EXT_VULKAN_READ, by)) !=
            GGML_STATUS_SUCCESS)
            return s;
        s = sd_vk::copy(backend, bout, by);
    }
    return s;
}

ggml_status linear_prepare(ggml_backend_dev_t dev, const ggml_ext_nodes * nodes, void **, size_t * ws, void *) {
    const ggml_tensor * node = nodes->nodes[nodes->n_nodes - 1];
    return workspace_of(dev, node, node, nullptr, ws);
}

ggml_status linear_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void *, void * ws, size_t ws_bytes,
                           void *) {
    const ggml_tensor * node = nodes->nodes[nodes->n_nodes - 1];
    return linear_run(backend, node, node, gemm_extras{}, ws, ws_bytes);
}

// ---------------------------------------------------------------------------------------------
// Fusion: sd.linear_i8.v1 -> MUL(., gate[N]) -> ADD(residual, .), or sd.linear_i8.v1 -> ADD
// (the Krea2 block's wo and mlp_down epilogues): the GEMM's epilogue multiplies by the gate and
// adds the residual, each step rounded separately like the native MUL and ADD, so the linear's
// output and the product are never written. The same chains as the CPU rule.

using sd_chain::is_f32_like;

// The gate (one F32 value per output channel, sd_chain::gate_of) and the residual, each bound as
// 32-bit words.
const ggml_tensor * gate_of(const ggml_tensor * mul, const ggml_tensor * lin) {
    const ggml_tensor * g = sd_chain::gate_of(mul, lin);
    return g && word_aligned(g) ? g : nullptr;
}

const ggml_tensor * residual_of(const ggml_tensor * add, const ggml_tensor * v) {
    const ggml_tensor * r = sd_chain::residual_of(add, v);
    return r && word_aligned(r) ? r : nullptr;
}

struct epilogue_chain {
    const ggml_tensor *lin = nullptr, *gate = nullptr, *residual = nullptr;
};

bool chain_of(ggml_backend_dev_t dev, const ggml_tensor * const * n, int count, epilogue_chain & c) {
    c     = epilogue_chain{};
    c.lin = n[0];
    if (ggml_ext_get_op(n[0]) != sd_op_linear_i8() || (dev && !linear_supports(dev, n[0], nullptr))) return false;
    if (count == 3) {
        c.gate = gate_of(n[1], n[0]);
        if (!c.gate || c.gate == n[0]) return false;
    }
    c.residual = residual_of(n[count - 1], n[count - 2]);
    if (!c.residual || c.residual == n[0] || c.residual == n[1]) return false;
    // the residual is bound in the output's windows of rows; the gate (one value per channel)
    // whole
    return !dev || !c.gate || sd_vk::fits_binding(dev, ggml_nbytes(c.gate));
}

int epilogue_match(ggml_backend_dev_t dev, const ggml_cgraph * graph, int first, void *) {
    if (!sd_vk::fusion_enabled()) return 0;
    return sd_graph::match_linear_epilogue(graph, first, [dev](const ggml_tensor * const * n, int count) {
        epilogue_chain c;
        return chain_of(dev, n, count, c);
    });
}

ggml_status epilogue_prepare(ggml_backend_dev_t dev, const ggml_ext_nodes * nodes, void **, size_t * ws, void *) {
    epilogue_chain c;
    if ((nodes->n_nodes != 2 && nodes->n_nodes != 3) || !chain_of(nullptr, nodes->nodes, nodes->n_nodes, c))
        return GGML_STATUS_FAILED;
    return workspace_of(dev, c.lin, nodes->nodes[nodes->n_nodes - 1], nullptr, ws);
}

ggml_status epilogue_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void *, void * ws, size_t ws_bytes,
                             void *) {
    epilogue_chain c;
    if ((nodes->n_nodes != 2 && nodes->n_nodes != 3) || !chain_of(nullptr, nodes->nodes, nodes->n_nodes, c))
        return GGML_STATUS_FAILED;
    gemm_extras x;
    x.gate     = c.gate;
    x.residual = c.residual;
    return linear_run(backend, c.lin, nodes->nodes[nodes->n_nodes - 1], x, ws, ws_bytes);
}

// ---------------------------------------------------------------------------------------------
// Fusion: GEMM -> SwiGLU [-> ConvRot]: sd.linear_i8.v1 (gate) and sd.linear_i8.v1 (up) on the
// same input, SILU(gate), MUL(silu, up) [, sd.quantize_i8_convrot.v1]: one GEMM dispatch computes
// both projections and silu(gate) * up (the native SILU's expressions, one rounded MUL); with the
// quantizer, the F32 product goes through the workspace into the quantizer shader. Equals the
// unfused chain on the device bit for bit.

bool same_linear_shape(const ggml_tensor * a, const ggml_tensor * b) {
    linear_node sa, sb;
    if (!sd_int8_schema::linear_operands(a, sa) || !sd_int8_schema::linear_operands(b, sb)) return false;
    return sa.kind == sb.kind && sa.kind != SD_LINEAR_I8_INPUT_F32 && sa.input == sb.input &&
           sa.input_scale == sb.input_scale && ggml_are_same_shape(sa.weight, sb.weight) && ggml_are_same_shape(a, b) &&
           sa.out_ne[0] == sb.out_ne[0] && sa.out_ne[1] == sb.out_ne[1] && sa.out_ne[2] == sb.out_ne[2];
}

struct swiglu_chain {
    const ggml_tensor *gate = nullptr, *up = nullptr, *mul = nullptr, *quant = nullptr;
};

bool is_silu(const ggml_tensor * t) { return t->op == GGML_OP_UNARY && ggml_get_unary_op(t) == GGML_UNARY_OP_SILU; }

// n: lin, lin, SILU(one of them), MUL(silu, the other) [, quantize(MUL)]; or
//    lin, SILU(it), lin, MUL(silu, the other) [, quantize(MUL)]
bool swiglu_of(ggml_backend_dev_t dev, const ggml_tensor * const * n, int count, swiglu_chain & c) {
    c = swiglu_chain{};
    const ggml_tensor *l0 = n[0], *l1 = n[1], *silu = n[2], *mul = n[3];
    if (is_silu(n[1])) std::swap(l1, silu); // the second order
    if (ggml_ext_get_op(l0) != sd_op_linear_i8() || ggml_ext_get_op(l1) != sd_op_linear_i8()) return false;
    if (!is_silu(silu) || mul->op != GGML_OP_MUL) return false;
    if (silu->src[0] == l0) { c.gate = l0; c.up = l1; }
    else if (silu->src[0] == l1 && silu == n[2]) { c.gate = l1; c.up = l0; }
    else return false;
    if (!is_f32_like(silu, c.gate) || !is_f32_like(mul, c.gate)) return false;
    const bool mul_ok = (mul->src[0] == silu && mul->src[1] == c.up) || (mul->src[0] == c.up && mul->src[1] == silu);
    if (!mul_ok || mul->src[2] || !same_linear_shape(c.gate, c.up)) return false;
    if (dev && (!linear_supports(dev, c.gate, nullptr) || !linear_supports(dev, c.up, nullptr))) return false;
    c.mul = mul;
    if (count == 5) {
        c.quant = n[4];
        if (ggml_ext_get_op(c.quant) != sd_op_quantize_i8_convrot() || c.quant->src[0] != mul) return false;
        if (dev && !sd_vulkan_quantize_supported(dev, c.quant)) return false;
    }
    return true;
}

int swiglu_match(ggml_backend_dev_t dev, const ggml_cgraph * graph, int first, void *) {
    if (!sd_vk::fusion_enabled()) return 0;
    ggml_cgraph * g = const_cast<ggml_cgraph *>(graph); // the accessors are not const; read only
    const int     n = ggml_graph_n_nodes(g);
    if (first + 3 >= n) return 0;
    const ggml_tensor * nodes[5];
    for (int i = 0; i < 5; ++i) nodes[i] = first + i < n ? ggml_graph_node(g, first + i) : nullptr;
    swiglu_chain c;
    if (nodes[4] && swiglu_of(dev, nodes, 5, c)) return 5;
    return swiglu_of(dev, nodes, 4, c) ? 4 : 0;
}

ggml_status swiglu_prepare(ggml_backend_dev_t dev, const ggml_ext_nodes * nodes, void **, size_t * ws, void *) {
    swiglu_chain c;
    if ((nodes->n_nodes != 4 && nodes->n_nodes != 5) || !swiglu_of(nullptr, nodes->nodes, nodes->n_nodes, c))
        return GGML_STATUS_FAILED;
    return workspace_of(dev, c.gate, c.mul, c.quant, ws); // the F32 product (quantized) or the staged output
}

ggml_status swiglu_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void *, void * ws, size_t ws_bytes,
                           void *) {
    swiglu_chain c;
    if ((nodes->n_nodes != 4 && nodes->n_nodes != 5) || !swiglu_of(nullptr, nodes->nodes, nodes->n_nodes, c))
        return GGML_STATUS_FAILED;
    gemm_extras x;
    x.up    = c.up;
    x.quant = c.quant;
    return linear_run(backend, c.gate, c.mul, x, ws, ws_bytes);
}

// ---------------------------------------------------------------------------------------------
// Graph-delay rules: the matches above need their chain's nodes consecutive, but a graph may
// compute independent work in between (a gate or residual produced after the linear, another
// node between the SiLU and the up linear). The optimize callbacks find each whole chain the
// match would accept and delay its earlier nodes, latest first, to just before the chain's last
// node; ggml_ext_graph_delay refuses any move that could change results (a crossed node reading
// a moved one, aliasing writes), so such a chain simply stays unfused.

using sd_graph::gather_before_last;
using sd_graph::sole_consumer;

void epilogue_optimize(ggml_backend_dev_t dev, ggml_cgraph * g, void *) {
    if (!sd_vk::fusion_enabled()) return;
    sd_graph::gather_linear_epilogues(g, sd_op_linear_i8(), [dev](const ggml_tensor * const * n, int count) {
        epilogue_chain c;
        return chain_of(dev, n, count, c);
    });
}

void swiglu_optimize(ggml_backend_dev_t dev, ggml_cgraph * g, void *) {
    if (!sd_vk::fusion_enabled()) return;
    const ggml_ext_op_t                           lop = sd_op_linear_i8();
    const ggml_ext_op_t                           qop = sd_op_quantize_i8_convrot();
    std::vector<std::vector<const ggml_tensor *>> chains;
    for (int i = 0; i < ggml_graph_n_nodes(g); ++i) {
        ggml_tensor * silu = ggml_graph_node(g, i);
        if (!is_silu(silu) || ggml_ext_get_op(silu->src[0]) != lop) continue;
        ggml_tensor * mul = sole_consumer(g, silu, i);
        if (mul == nullptr || mul->op != GGML_OP_MUL) continue;
        const ggml_tensor * up = mul->src[0] == silu ? mul->src[1] : mul->src[0];
        if (up == nullptr || ggml_ext_get_op(up) != lop) continue;
        ggml_tensor * quant = sole_consumer(g, mul, i);
        if (quant && ggml_ext_get_op(quant) != qop) quant = nullptr;
        const ggml_tensor * nodes[5] = {silu->src[0], up, silu, mul, quant};
        swiglu_chain        c;
        if (quant && swiglu_of(dev, nodes, 5, c)) chains.push_back({nodes, nodes + 5});
        else if (swiglu_of(dev, nodes, 4, c)) chains.push_back({nodes, nodes + 4});
    }
    for (const auto & chain : chains) gather_before_last(g, chain);
}

} // namespace

bool sd_vulkan_register_int8(ggml_backend_dev_t dev) {
    static sd_kernels::once_per_device once;
    if (!dev) return false;
    if (!sd_vk::service(dev)) return true; // not a Vulkan device
    return once(dev, [&] {
        const ggml_ext_op_t qop = sd_op_quantize_i8_convrot();
        const ggml_ext_op_t lop = sd_op_linear_i8();
        if (!qop || !lop) {
            fprintf(stderr, "sd vulkan int8: operators not registered\n");
            return false;
        }
        using namespace sd_kernels;
        return register_all(
            dev,
            {op_kernel(SD_VK_KERNEL_QUANTIZE_I8, qop, quant_supports, quant_prepare, quant_execute),
             op_kernel(SD_VK_KERNEL_LINEAR_I8, lop, linear_supports, linear_prepare, linear_execute),
             fusion_rule(SD_VK_KERNEL_LINEAR_I8_GATE_RES, epilogue_match, epilogue_optimize, epilogue_prepare,
                         epilogue_execute),
             fusion_rule(SD_VK_KERNEL_LINEAR_I8_SWIGLU, swiglu_match, swiglu_optimize, swiglu_prepare, swiglu_execute)},
            "sd vulkan int8");
    });
}
