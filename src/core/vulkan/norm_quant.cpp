// norm_quant.cpp — the Krea2 modulated-norm path fused into the ConvRot quantizer on Vulkan
// (shaders/modulation_quantize.comp):
//     RMS_NORM(x) -> MUL(., w1) -> MUL(., mod_scale) -> ADD(h, t) -> ADD(., shift)
//         -> sd.quantize_i8_convrot.v1
// (sd.cpp's modulated_norm: RMSNorm(x) * (1 + scale) * (1 + mod_scale) + shift, then the packed
// INT8 activation the following linears share). w1, mod_scale and shift are one F32 value per
// channel (K), broadcast over rows. The fused result equals the unfused chain on the same device
// bit for bit (see the shader). External consumers of any intermediate are refused by ggml's
// fusion checks; an output overlapping the input is computed in the workspace and copied. A
// graph-delay rule gathers the chain when independent nodes sit between its nodes.

#include "int8.h"
#include "norm_quant.h"

#include "../chain_match.h"
#include "../ggml_extensions.h"
#include "../int8_schema.h"
#include "../kernel_desc.h"
#include "../graph_gather.h"
#include "ggml-graph.h"
#include "vk_service.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

using sd_vk::bound;

bool is_channel_vec(const ggml_tensor * t, int64_t K) {
    return t && t->type == GGML_TYPE_F32 && ggml_is_contiguous(t) && t->ne[0] == K && t->ne[1] == 1 &&
           t->ne[2] == 1 && t->ne[3] == 1 && (t->view_src == nullptr || t->view_offs % 4 == 0);
}

using sd_chain::other_src;

struct mod_chain {
    const ggml_tensor *x = nullptr, *w1 = nullptr, *ms = nullptr, *sh = nullptr;
    float eps = 0.0f;
};

bool chain_of(ggml_backend_dev_t dev, const ggml_tensor * const * n, mod_chain & c) {
    const ggml_tensor *norm = n[0], *mul1 = n[1], *mul2 = n[2], *add1 = n[3], *add2 = n[4], *q = n[5];
    if (norm->op != GGML_OP_RMS_NORM || mul1->op != GGML_OP_MUL || mul2->op != GGML_OP_MUL ||
        add1->op != GGML_OP_ADD || add2->op != GGML_OP_ADD || ggml_ext_get_op(q) != sd_op_quantize_i8_convrot())
        return false;
    c.x = norm->src[0];
    if (!c.x || !sd_chain::is_f32_like(c.x, norm) || !sd_chain::is_f32_like(norm, norm)) return false;
    const int64_t K = c.x->ne[0];
    c.w1 = other_src(mul1, norm);
    c.ms = other_src(mul2, mul1);
    c.sh = other_src(add2, add1);
    if (!is_channel_vec(c.w1, K) || !is_channel_vec(c.ms, K) || !is_channel_vec(c.sh, K)) return false;
    // ADD(h, t): exactly the normalised product and its modulation term
    const bool add_ok = (add1->src[0] == mul1 && add1->src[1] == mul2) || (add1->src[0] == mul2 && add1->src[1] == mul1);
    if (!add_ok || add1->src[2]) return false;
    for (const ggml_tensor * t : {mul1, mul2, add1, add2})
        if (!sd_chain::is_f32_like(t, norm)) return false;
    if (q->src[0] != add2 || (dev && !sd_vulkan_quantize_supported(dev, q))) return false;
    memcpy(&c.eps, norm->op_params, sizeof(float));
    if (!dev) return true;
    if (sd_vulkan_quant_lane_iterations(dev, K, sd_int8_schema::quantize_group(q), true) > sd_vk::kLoopBudget)
        return false;
    // the per-channel vectors are bound whole (the rows in windows: sd_vulkan_quantize_supported)
    if (!sd_vk::fits_binding(dev, 4 * (uint64_t) K)) return false;
    const ggml_ext_vulkan_device_info * info = sd_vk::device_info(dev);
    return info && info->subgroup_basic && info->subgroup_arithmetic && info->subgroup_size > 0;
}

int mod_match(ggml_backend_dev_t dev, const ggml_cgraph * graph, int first, void *) {
    if (!sd_vk::fusion_enabled()) return 0;
    ggml_cgraph * g = const_cast<ggml_cgraph *>(graph); // the accessors are not const; read only
    if (first + 5 >= ggml_graph_n_nodes(g)) return 0;
    const ggml_tensor * n[6];
    for (int i = 0; i < 6; ++i) n[i] = ggml_graph_node(g, first + i);
    mod_chain c;
    return chain_of(dev, n, c) ? 6 : 0;
}

// Workspace: [staged output (when it overlaps an input)] [scratch rows (ConvRot groups above
// 256, sd_vulkan_convrot_scratch_bytes)]
uint64_t scratch_off(const ggml_tensor * q) { return (ggml_nbytes(q) + 255) & ~(uint64_t) 255; }

uint64_t scratch_bytes(ggml_backend_dev_t dev, const mod_chain & c, const ggml_tensor * q) {
    return sd_vulkan_convrot_scratch_bytes(dev, c.x->ne[0], ggml_nrows(c.x), sd_int8_schema::quantize_group(q));
}

ggml_status mod_prepare(ggml_backend_dev_t dev, const ggml_ext_nodes * nodes, void **, size_t * ws, void *) {
    mod_chain c;
    if (nodes->n_nodes != 6 || !chain_of(nullptr, nodes->nodes, c)) return GGML_STATUS_FAILED;
    const uint64_t extra = scratch_bytes(dev, c, nodes->nodes[5]);
    *ws = extra ? scratch_off(nodes->nodes[5]) + extra : ggml_nbytes(nodes->nodes[5]);
    return GGML_STATUS_SUCCESS;
}

struct mod_push {
    uint32_t x_off, w_off, ms_off, sh_off, o_off;
    uint32_t K, rows, prows, s_off;
    float    gscale, eps;
    uint32_t row0, row_end, t_off;
};

// The per-channel vectors are bound whole; x, the packed rows and their scales a window of rows
// per dispatch (sd_vulkan_quant_window_rows; fewer rows for groups above 256, whose scratch holds
// sd_vulkan_convrot_chunk_rows), so no binding exceeds the device's range. Rows are independent:
// the windows change no value.
ggml_status mod_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void *, void * ws, size_t ws_bytes,
                        void *) {
    mod_chain c;
    if (nodes->n_nodes != 6 || !chain_of(nullptr, nodes->nodes, c)) return GGML_STATUS_FAILED;
    const ggml_tensor *      q     = nodes->nodes[5];
    const int                group = sd_int8_schema::quantize_group(q);
    const ggml_backend_dev_t dev   = ggml_backend_get_device(backend);
    const uint32_t           R     = GGML_EXT_VULKAN_READ, W = GGML_EXT_VULKAN_WRITE;
    bound                    bx, bw, bm, bs, bo; // bx, bo: whole ranges for the alias check only
    ggml_status              s = sd_vk::bind_tensor(backend, c.x, 0, 0, R, bx);
    if (s == GGML_STATUS_SUCCESS) s = sd_vk::bind_tensor(backend, c.w1, 0, 0, R, bw);
    if (s == GGML_STATUS_SUCCESS) s = sd_vk::bind_tensor(backend, c.ms, 0, 0, R, bm);
    if (s == GGML_STATUS_SUCCESS) s = sd_vk::bind_tensor(backend, c.sh, 0, 0, R, bs);
    if (s == GGML_STATUS_SUCCESS) s = sd_vk::bind_tensor(backend, q, 0, 0, W, bo);
    if (s != GGML_STATUS_SUCCESS) return s;
    const bool stage = sd_vk::overlap(bo, bx) || sd_vk::overlap(bo, bw) || sd_vk::overlap(bo, bm) || sd_vk::overlap(bo, bs);
    if (stage && (!ws || ws_bytes < ggml_nbytes(q))) return GGML_STATUS_FAILED;
    const sd_vk::region out = stage ? sd_vk::region_at(ws, 0) : sd_vk::region_of(q);
    const int64_t  K = c.x->ne[0], rows = ggml_nrows(c.x), prows = sd_int8_schema::pad_up(rows, 4);
    const uint64_t extra = scratch_bytes(dev, c, q);
    bound          scratch;
    if (extra) {
        if (!ws || ws_bytes < scratch_off(q) + extra) return GGML_STATUS_FAILED;
        s = sd_vk::bind_base(backend, ws, scratch_off(q), extra, GGML_EXT_VULKAN_READ_WRITE, scratch);
        if (s != GGML_STATUS_SUCCESS) return s;
    }
    int64_t chunk = sd_vulkan_quant_window_rows(dev, K);
    if (chunk <= 0) return GGML_STATUS_FAILED;
    if (extra) {
        const int64_t sc = sd_vulkan_convrot_chunk_rows(dev, K, rows);
        if (sc < chunk) chunk = sc;
    }
    const uint64_t scale_base = (uint64_t) sd_int8_schema::packed_scale_offset(K, rows);
    mod_push       pc{};
    pc.w_off  = bw.words();
    pc.ms_off = bm.words();
    pc.sh_off = bs.words();
    pc.K      = (uint32_t) K;
    pc.rows   = (uint32_t) rows;
    pc.prows  = (uint32_t) prows;
    pc.gscale = 1.0f / sqrtf((float) group);
    pc.eps    = c.eps;
    pc.t_off  = extra ? scratch.words() : 0;
    for (int64_t r0 = 0; r0 < prows && s == GGML_STATUS_SUCCESS; r0 += chunk) {
        const int64_t n = prows - r0 < chunk ? prows - r0 : chunk;
        // the real rows of this window (padding only, possible when the scratch splits a quartet:
        // the last real row is bound, never read, its scale never written)
        const int64_t real = (r0 + n < rows ? r0 + n : rows) - r0;
        const int64_t xr0 = real > 0 ? r0 : rows - 1, xn = real > 0 ? real : 1;
        bound         wx, wo, wsc;
        s = sd_vk::bind_tensor(backend, c.x, (uint64_t) xr0 * 4 * K, (uint64_t) xn * 4 * K, R, wx);
        if (s == GGML_STATUS_SUCCESS) s = sd_vk::bind_region(backend, out, (uint64_t) (r0 * K), (uint64_t) (n * K), W, wo);
        if (s == GGML_STATUS_SUCCESS)
            s = sd_vk::bind_region(backend, out, scale_base + 4 * (uint64_t) xr0, 4 * (uint64_t) xn, W, wsc);
        if (s != GGML_STATUS_SUCCESS) break;
        pc.x_off   = wx.words();
        pc.o_off   = wo.words();
        pc.s_off   = real > 0 ? wsc.words() : 0;
        pc.row0    = (uint32_t) r0;
        pc.row_end = (uint32_t) (r0 + n);
        uint32_t wg = 0, groups[3];
        sd_vk::subgroup_grid(backend, (uint64_t) n, wg, groups); // one subgroup per row
        const uint32_t spec[2] = {wg, (uint32_t) group};
        const bound *  b[7]    = {&wx, &bw, &bm, &bs, &wo, extra ? &scratch : &wx, &wsc}; // no scratch: never read
        s = sd_vk::dispatch(backend, "modulation_quantize", b, 7, spec, 2, &pc, sizeof(pc), groups);
    }
    if (s == GGML_STATUS_SUCCESS && stage) {
        bound bt;
        s = sd_vk::bind_base(backend, ws, 0, ggml_nbytes(q), R, bt);
        if (s == GGML_STATUS_SUCCESS) s = sd_vk::copy(backend, bo, bt);
    }
    return s;
}

// Graph-delay rule: the six nodes with independent work in between (e.g. the modulation vectors
// computed after the norm) are gathered so mod_match sees them consecutive (graph_gather.h). The
// first product has two readers (MUL(mod) and ADD), every other node one.
void mod_optimize(ggml_backend_dev_t dev, ggml_cgraph * g, void *) {
    if (!sd_vk::fusion_enabled()) return;
    sd_graph::gather_modulation_chains(g, [dev](const ggml_tensor * const * n) {
        mod_chain c;
        return chain_of(dev, n, c);
    });
}

} // namespace

bool sd_vulkan_register_norm_quant(ggml_backend_dev_t dev) {
    static sd_kernels::once_per_device once;
    if (!dev) return false;
    if (!sd_vk::service(dev)) return true; // not a Vulkan device
    return once(dev, [&] {
        return sd_kernels::register_all(dev,
                                        {sd_kernels::fusion_rule(SD_VK_KERNEL_MODULATION_QUANTIZE, mod_match, mod_optimize,
                                                                 mod_prepare, mod_execute)},
                                        "sd vulkan norm-quant");
    });
}
