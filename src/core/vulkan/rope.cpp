// rope.cpp — sd.rope_apply.v1 and the RMS_NORM -> MUL(., w[d]) -> sd.rope_apply.v1
// [-> SCALE] [-> CPY to F16] fusion on Vulkan (shaders/rope_apply.comp).
//
// The standalone kernel is bit-identical to the CPU kernel (separately rounded products and sum).
// The fused kernel reproduces the unfused chain on the same Vulkan device: the native RMS_NORM
// row reduction's operations (see the shader), the native MUL, then the same rotation; so
// fusion on == fusion off bit for bit. It does not equal the CPU chain bit for bit (the CPU's
// RMS_NORM reduces in double). External consumers of the norm or the product are refused by
// ggml's fusion checks (the plain operators run); an output overlapping an input is computed in
// the workspace and copied. A graph-delay rule gathers a chain split by independent nodes.

#include "rope.h"

#include "../ggml_extensions.h"
#include "../kernel_desc.h"
#include "../graph_gather.h"
#include "vk_service.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using sd_vk::bound;

bool is_rope_node(const ggml_tensor * t) { return t != nullptr && ggml_ext_get_op(t) == sd_op_rope_apply(); }

// float strides and a word-aligned start (the shader indexes floats)
bool float_strided(const ggml_tensor * t) {
    return t->type == GGML_TYPE_F32 && t->nb[0] == sizeof(float) && t->nb[1] % 4 == 0 && t->nb[2] % 4 == 0 &&
           t->nb[3] % 4 == 0 && (t->view_src == nullptr || t->view_offs % 4 == 0);
}

// A box of rows (h, l, n) one dispatch covers: the shader's cH, cL, cN.
struct rope_box {
    int64_t c[3] = {0, 0, 0}; // H, L, N
};

// The largest box (the whole tensor when it fits) whose windows of x (F32 at x's strides) and of
// the contiguous [d, L, H * N] output (elem_bytes: 4 F32, 2 F16) each fit one binding on dev:
// halves the dimension that spans most of a window too large until both fit. false when a single
// row does not fit, or an F16 output of odd d would need windows (4-byte aligned bindings).
bool plan_box(ggml_backend_dev_t dev, const ggml_tensor * x, uint64_t elem_bytes, rope_box & box) {
    const int64_t  d = x->ne[0], H = x->ne[1], L = x->ne[2], N = x->ne[3];
    const uint64_t xs[3] = {x->nb[1] / 4, x->nb[2] / 4, x->nb[3] / 4};
    const uint64_t os[3] = {(uint64_t) (L * d), (uint64_t) d, (uint64_t) (H * L * d)};
    const uint64_t W     = sd_vk::max_binding_bytes(dev);
    box.c[0] = H;
    box.c[1] = L;
    box.c[2] = N;
    for (;;) {
        uint64_t sx = (uint64_t) d, so = (uint64_t) d;
        for (int i = 0; i < 3; ++i) {
            sx += (uint64_t) (box.c[i] - 1) * xs[i];
            so += (uint64_t) (box.c[i] - 1) * os[i];
        }
        const bool x_big = 4 * sx > W, o_big = elem_bytes * so > W;
        if (!x_big && !o_big) break;
        int      pick = -1;
        uint64_t most = 0;
        for (int i = 0; i < 3; ++i) {
            if (box.c[i] <= 1) continue;
            const uint64_t part = (x_big ? (uint64_t) (box.c[i] - 1) * xs[i] : 0) +
                                  (o_big ? (uint64_t) (box.c[i] - 1) * os[i] : 0);
            if (pick < 0 || part > most) {
                pick = i;
                most = part;
            }
        }
        if (pick < 0) return false; // one row is over a window
        box.c[pick] = (box.c[pick] + 1) / 2;
    }
    const bool whole = box.c[0] == H && box.c[1] == L && box.c[2] == N;
    return whole || elem_bytes != 2 || d % 2 == 0;
}

bool rope_supports(ggml_backend_dev_t dev, const ggml_tensor * node, void *) {
    if (!is_rope_node(node)) return false;
    const ggml_tensor * x = node->src[0], *pe = node->src[1];
    if (!float_strided(x) || pe->type != GGML_TYPE_F32 || !ggml_is_contiguous(pe) || !float_strided(pe)) return false;
    if (node->type != GGML_TYPE_F32 || !ggml_is_contiguous(node)) return false;
    const int64_t d = x->ne[0], nf = pe->ne[2];
    if (2 * nf > d) return false;
    // 32-bit push constants (sizes, float strides); the shader's indices stay within one box
    for (int i = 0; i < 4; ++i)
        if (x->ne[i] > INT32_MAX || x->nb[i] / 4 > UINT32_MAX) return false;
    if ((uint64_t) x->ne[1] * (uint64_t) x->ne[2] > UINT32_MAX) return false; // the shader's H * L
    const ggml_ext_vulkan_device_info * info = sd_vk::device_info(dev);
    if (!info || !info->subgroup_basic || !info->subgroup_arithmetic || info->subgroup_size == 0) return false;
    // x and the output go in boxes of rows (plan_box); the PE table is bound whole
    rope_box box;
    return sd_vk::fits_binding(dev, ggml_nbytes(pe)) && plan_box(dev, x, 4, box);
}

struct rope_push {
    uint32_t x_off, pe_off, w_off, o_off;
    uint32_t d, H, L, N, n_freq;
    uint32_t xs1, xs2, xs3;
    float    eps;
    float    scale;
    uint32_t cH, cL, cN;
};

// The fused tail after the RoPE: SCALE (bias 0) and / or the CPY to F16 (out: the last node).
struct rope_tail {
    const ggml_tensor * scale = nullptr;
    const ggml_tensor * out   = nullptr; // the F16 CPY node, or NULL (the rope or scale is the output)
};

// x: the rope's input (or the norm's input when fused); w: the weight (fused) or NULL.
ggml_status rope_run(ggml_backend_t backend, const ggml_tensor * x, const ggml_tensor * w, float eps,
                     const ggml_tensor * rope, const rope_tail & tail, void * ws, size_t ws_bytes) {
    const ggml_tensor * out = tail.out ? tail.out : (tail.scale ? tail.scale : rope);
    const bool          f16 = out->type == GGML_TYPE_F16;
    const ggml_tensor * pe = rope->src[1];
    sd_rope_apply_attrs at{};
    ggml_ext_get_attrs(rope, &at, sizeof(at));
    const uint32_t R = GGML_EXT_VULKAN_READ;
    bound          bx, bp, bw, bo; // bx, bo: whole ranges for the alias check only
    ggml_status    s = sd_vk::bind_tensor(backend, x, 0, 0, R, bx);
    if (s == GGML_STATUS_SUCCESS) s = sd_vk::bind_tensor(backend, pe, 0, 0, R, bp);
    if (s == GGML_STATUS_SUCCESS) s = w ? sd_vk::bind_tensor(backend, w, 0, 0, R, bw) : (bw = bp, s);
    if (s == GGML_STATUS_SUCCESS) s = sd_vk::bind_tensor(backend, out, 0, 0, GGML_EXT_VULKAN_WRITE, bo);
    if (s != GGML_STATUS_SUCCESS) return s;
    const bool stage = sd_vk::overlap(bo, bx) || sd_vk::overlap(bo, bp) || (w && sd_vk::overlap(bo, bw));
    if (stage && (!ws || ws_bytes < ggml_nbytes(out))) return GGML_STATUS_FAILED;
    const sd_vk::region dst = stage ? sd_vk::region_at(ws, 0) : sd_vk::region_of(out);
    const uint64_t      eb  = f16 ? 2 : 4;
    rope_box            box;
    if (!plan_box(ggml_backend_get_device(backend), x, eb, box)) return GGML_STATUS_FAILED;

    rope_push pc{};
    pc.w_off  = bw.words();
    pc.d      = (uint32_t) x->ne[0];
    pc.H      = (uint32_t) x->ne[1];
    pc.L      = (uint32_t) x->ne[2];
    pc.N      = (uint32_t) x->ne[3];
    pc.n_freq = (uint32_t) pe->ne[2];
    pc.xs1    = (uint32_t) (x->nb[1] / 4);
    pc.xs2    = (uint32_t) (x->nb[2] / 4);
    pc.xs3    = (uint32_t) (x->nb[3] / 4);
    pc.eps    = eps;
    if (tail.scale) memcpy(&pc.scale, tail.scale->op_params, sizeof(float));

    const ggml_ext_vulkan_device_info * info = sd_vk::device_info(ggml_backend_get_device(backend));
    const uint32_t sgs = info->subgroup_size, wg = 4 * sgs <= info->max_workgroup_invocations ? 4 * sgs : sgs;
    const uint32_t spec[5] = {wg, (uint32_t) at.mode, w != nullptr, tail.scale != nullptr, f16};
    const int64_t  d = x->ne[0], H = x->ne[1], L = x->ne[2], N = x->ne[3], nf = pe->ne[2];
    // one dispatch per box; x and the output bound from the box's first row to its last
    for (int64_t n0 = 0; n0 < N && s == GGML_STATUS_SUCCESS; n0 += box.c[2])
        for (int64_t h0 = 0; h0 < H && s == GGML_STATUS_SUCCESS; h0 += box.c[0])
            for (int64_t l0 = 0; l0 < L && s == GGML_STATUS_SUCCESS; l0 += box.c[1]) {
                const int64_t cH = std::min(box.c[0], H - h0), cL = std::min(box.c[1], L - l0),
                              cN = std::min(box.c[2], N - n0);
                const uint64_t x_first = (uint64_t) h0 * x->nb[1] + (uint64_t) l0 * x->nb[2] + (uint64_t) n0 * x->nb[3];
                const uint64_t x_bytes = 4 * (uint64_t) d + (uint64_t) (cH - 1) * x->nb[1] +
                                         (uint64_t) (cL - 1) * x->nb[2] + (uint64_t) (cN - 1) * x->nb[3];
                const uint64_t o_first = (uint64_t) (((h0 + H * n0) * L + l0) * d) * eb;
                const uint64_t o_bytes = (uint64_t) (((cH - 1 + H * (cN - 1)) * L + cL - 1) * d + d) * eb;
                bound          wx, wo;
                s = sd_vk::bind_tensor(backend, x, x_first, x_bytes, R, wx);
                if (s == GGML_STATUS_SUCCESS)
                    s = sd_vk::bind_region(backend, dst, o_first, o_bytes, GGML_EXT_VULKAN_WRITE, wo);
                if (s != GGML_STATUS_SUCCESS) break;
                pc.x_off  = wx.words();
                pc.pe_off = bp.words() + (uint32_t) (l0 * 4 * nf); // pe rows from the box's first position
                pc.o_off  = f16 ? (uint32_t) (wo.r.shader_offset / 2) : wo.words();
                pc.cH     = (uint32_t) cH;
                pc.cL     = (uint32_t) cL;
                pc.cN     = (uint32_t) cN;
                const uint64_t rows = (uint64_t) cL * cH * cN, per_wg = wg / sgs;
                uint64_t       nwg  = (rows + per_wg - 1) / per_wg;
                if (nwg > info->max_workgroup_count[0]) nwg = info->max_workgroup_count[0]; // grid-stride loop
                const uint32_t groups[3] = {(uint32_t) nwg, 1, 1};
                const bound *  b[5] = {&wx, &bp, &bw, f16 ? &bp : &wo, f16 ? &wo : &bp}; // unused: pe, never written
                s = sd_vk::dispatch(backend, "rope_apply", b, 5, spec, 5, &pc, sizeof(pc), groups);
            }
    if (s == GGML_STATUS_SUCCESS && stage) {
        bound bt;
        s = sd_vk::bind_base(backend, ws, 0, ggml_nbytes(out), R, bt);
        if (s == GGML_STATUS_SUCCESS) s = sd_vk::copy(backend, bo, bt);
    }
    return s;
}

ggml_status rope_prepare(ggml_backend_dev_t, const ggml_ext_nodes * nodes, void **, size_t * ws, void *) {
    *ws = ggml_nbytes(nodes->nodes[nodes->n_nodes - 1]); // staging when the output overlaps an input
    return GGML_STATUS_SUCCESS;
}

ggml_status rope_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void *, void * ws, size_t ws_bytes,
                         void *) {
    const ggml_tensor * rope = nodes->nodes[nodes->n_nodes - 1];
    return rope_run(backend, rope->src[0], nullptr, 0.0f, rope, rope_tail{}, ws, ws_bytes);
}

// ---------------------------------------------------------------------------------------------
// Fusion: RMS_NORM(x) -> MUL(., w[d]) -> sd.rope_apply.v1(., pe)

const ggml_tensor * match_chain(ggml_backend_dev_t dev, const ggml_tensor * norm, const ggml_tensor * mul,
                                const ggml_tensor * rope) {
    if (norm->op != GGML_OP_RMS_NORM || mul->op != GGML_OP_MUL || !is_rope_node(rope)) return nullptr;
    const ggml_tensor * x = norm->src[0], *w = mul->src[1];
    if (!x || !w || mul->src[0] != norm || rope->src[0] != mul) return nullptr;
    if (!float_strided(x) || norm->type != GGML_TYPE_F32 || !ggml_are_same_shape(x, norm) || !ggml_is_contiguous(norm))
        return nullptr;
    if (mul->type != GGML_TYPE_F32 || !ggml_are_same_shape(mul, norm) || !ggml_is_contiguous(mul)) return nullptr;
    if (w->type != GGML_TYPE_F32 || !ggml_is_contiguous(w) || !float_strided(w) || w->ne[0] != x->ne[0] ||
        w->ne[1] != 1 || w->ne[2] != 1 || w->ne[3] != 1)
        return nullptr;
    if (!dev) return is_rope_node(rope) ? w : nullptr; // execution: the rule matched with the device already
    // x goes in boxes of rows like the rope's input (its strides); the weight is bound whole
    rope_box box;
    return rope_supports(dev, rope, nullptr) && plan_box(dev, x, 4, box) && sd_vk::fits_binding(dev, ggml_nbytes(w))
               ? w
               : nullptr;
}

// SCALE(prev, s) with bias 0, F32 of prev's shape
bool is_plain_scale(const ggml_tensor * t, const ggml_tensor * prev) {
    if (t->op != GGML_OP_SCALE || t->src[0] != prev || t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t) ||
        !ggml_are_same_shape(t, prev))
        return false;
    float bias;
    memcpy(&bias, (const char *) t->op_params + sizeof(float), sizeof(float));
    return bias == 0.0f;
}

// CPY(prev, dst) into a contiguous F16 dst of prev's shape (an even element count: the
// workspace copy moves whole 32-bit words); x: the chain's input (the kernel's boxes follow it)
bool is_f16_copy(ggml_backend_dev_t dev, const ggml_tensor * t, const ggml_tensor * prev, const ggml_tensor * x) {
    if (t->op != GGML_OP_CPY || t->src[0] != prev || t->type != GGML_TYPE_F16 || !ggml_is_contiguous(t)) return false;
    const ggml_tensor * dst = t->src[1];
    if (!dst || dst->type != GGML_TYPE_F16 || !ggml_is_contiguous(dst) || !ggml_are_same_shape(dst, prev) ||
        ggml_nelements(dst) % 2 != 0 || (t->view_src && t->view_offs % 4 != 0))
        return false;
    if (!dev) return true;
    const ggml_ext_vulkan_device_info * info = sd_vk::device_info(dev);
    // the F16 output goes in boxes of rows (plan_box with 2-byte elements: odd d only whole)
    rope_box box;
    return info && info->storage_buffer_16bit && plan_box(dev, x, 2, box);
}

// the fused chain's length at nodes n (3, 4 or 5; 0: none) and its tail
int chain_length(ggml_backend_dev_t dev, const ggml_tensor * const * n, int avail, rope_tail & tail) {
    tail = rope_tail{};
    if (avail < 3 || !match_chain(dev, n[0], n[1], n[2])) return 0;
    int len = 3;
    if (avail > 3 && is_plain_scale(n[3], n[2])) {
        tail.scale = n[3];
        len        = 4;
    }
    if (avail > len && is_f16_copy(dev, n[len], n[len - 1], n[0]->src[0])) {
        tail.out = n[len];
        ++len;
    }
    return len;
}

int fused_match(ggml_backend_dev_t dev, const ggml_cgraph * graph, int first, void *) {
    if (!sd_vk::fusion_enabled()) return 0;
    ggml_cgraph *       g = const_cast<ggml_cgraph *>(graph); // the accessors are not const; read only
    const int           avail = std::min(5, ggml_graph_n_nodes(g) - first);
    const ggml_tensor * n[5];
    for (int i = 0; i < avail; ++i) n[i] = ggml_graph_node(g, first + i);
    rope_tail tail;
    return chain_length(dev, n, avail, tail);
}

ggml_status fused_execute(ggml_backend_t backend, const ggml_ext_nodes * nodes, void *, void * ws, size_t ws_bytes,
                          void *) {
    rope_tail tail;
    if (chain_length(nullptr, nodes->nodes, nodes->n_nodes, tail) != nodes->n_nodes) return GGML_STATUS_FAILED;
    const ggml_tensor * norm = nodes->nodes[0], *mul = nodes->nodes[1], *rope = nodes->nodes[2];
    float               eps;
    memcpy(&eps, norm->op_params, sizeof(float));
    return rope_run(backend, norm->src[0], mul->src[1], eps, rope, tail, ws, ws_bytes);
}

// Graph-delay rule: RMS_NORM, its MUL, the RoPE [, SCALE] [, F16 CPY] each the sole reader of
// the previous, with independent work in between (e.g. the PE table or another projection
// computed after the norm): gathered so fused_match sees them consecutive (graph_gather.h).
void fused_optimize(ggml_backend_dev_t dev, ggml_cgraph * g, void *) {
    if (!sd_vk::fusion_enabled()) return;
    sd_graph::gather_sole_consumer_chains(g, GGML_OP_RMS_NORM, 5, 3, [dev](const ggml_tensor * const * n, int avail) {
        rope_tail tail;
        return chain_length(dev, n, avail, tail);
    });
}

} // namespace

bool sd_vulkan_register_rope(ggml_backend_dev_t dev) {
    static sd_kernels::once_per_device once;
    if (!dev) return false;
    if (!sd_vk::service(dev)) return true; // not a Vulkan device
    return once(dev, [&] {
        if (sd_op_rope_apply() == 0) return false;
        using namespace sd_kernels;
        return register_all(dev,
                            {op_kernel(SD_VK_KERNEL_ROPE_APPLY, sd_op_rope_apply(), rope_supports, rope_prepare,
                                       rope_execute),
                             fusion_rule(SD_VK_KERNEL_RMS_NORM_MUL_ROPE, fused_match, fused_optimize, rope_prepare,
                                         fused_execute)},
                            "sd vulkan rope");
    });
}
