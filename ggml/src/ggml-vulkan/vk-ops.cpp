// vk-ops.cpp — which nodes the Vulkan device runs (supports_op) and how each is recorded: the
// shader, its specialization constants (op selector, tile sizes from the device limits) and the
// parameter block. The support table must match what the shaders handle: the scheduler trusts
// it, and whatever it declines runs on another device.

#include "vk-internal.h"

#include <algorithm>
#include <cmath>
#include <cstring>

bool vk_describe_tensor(const ggml_tensor * t, vk_tensor_desc & d) {
    memset(&d, 0, sizeof(d));
    if (!t) return true;
    const size_t ts = ggml_type_size(t->type);
    d.addr          = vk_tensor_address(t);
    if (d.addr % ts != 0) {
        GGML_LOG_ERROR("ggml-vulkan: tensor %s is not aligned to its element size\n", t->name);
        return false;
    }
    d.type = (uint32_t) t->type;
    for (int i = 0; i < 4; i++) {
        d.ne[i] = (uint32_t) t->ne[i];
        d.nb[i] = (uint32_t) (t->nb[i] / ts);
    }
    return true;
}

namespace {

bool is_float(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }
// types the shaders move as raw 16/32-bit words
bool is_word_type(ggml_type t) { return is_float(t) || t == GGML_TYPE_I32; }

// Shaders index elements with 32-bit unsigned integers: every tensor must have element strides
// and an extent (in elements) below 2^32.
bool addressable(const ggml_tensor * t) {
    if (!t) return true;
    if (!is_word_type(t->type)) return false;
    const size_t ts   = ggml_type_size(t->type);
    if (t->view_src && t->view_offs % ts != 0) return false; // element loads must be aligned
    uint64_t     span = 1;
    for (int d = 0; d < GGML_MAX_DIMS; d++) {
        if (t->ne[d] < 0 || (uint64_t) t->ne[d] > UINT32_MAX) return false;
        if (t->nb[d] % ts != 0) return false;
        if (t->ne[d] > 1) span += (uint64_t) (t->ne[d] - 1) * (t->nb[d] / ts);
    }
    return span <= UINT32_MAX && (uint64_t) ggml_nelements(t) <= UINT32_MAX;
}

bool srcs_addressable(const ggml_tensor * node) {
    if (!addressable(node)) return false;
    for (int i = 0; i < GGML_MAX_SRC; i++) {
        if (node->src[i] && !addressable(node->src[i])) return false;
    }
    return true;
}

bool same_float_type(const ggml_tensor * node) {
    return node->src[0] && is_float(node->src[0]->type) && node->type == node->src[0]->type;
}

bool binary_ok(const ggml_tensor * node) {
    const ggml_tensor * a = node->src[0];
    const ggml_tensor * b = node->src[1];
    if (!a || !b || !ggml_can_repeat(b, a)) return false;
    const ggml_type t0 = a->type, t1 = b->type, td = node->type;
    if (t0 == t1 && t1 == td && is_float(t0)) return true;
    return (t0 == GGML_TYPE_F16 || t0 == GGML_TYPE_BF16) && t1 == GGML_TYPE_F32 && (td == t0 || td == GGML_TYPE_F32);
}

// most registers per lane the flash-attention shader keeps (MAXR in flash_attn.comp)
constexpr int64_t FA_MAXR = 32;

bool flash_attn_ok(vk_device * dev, const ggml_tensor * node) {
    const ggml_tensor * q = node->src[0], * k = node->src[1], * v = node->src[2];
    const ggml_tensor * mask = node->src[3], * sinks = node->src[4];
    if (!q || !k || !v) return false;
    if (!is_float(q->type) || !is_float(k->type) || !is_float(v->type) || node->type != GGML_TYPE_F32) return false;
    if (k->ne[0] != q->ne[0] || v->ne[1] != k->ne[1]) return false;
    if (k->ne[2] <= 0 || v->ne[2] <= 0 || k->ne[3] <= 0 || v->ne[3] <= 0) return false;
    if (q->ne[2] % k->ne[2] != 0 || q->ne[2] % v->ne[2] != 0) return false;
    if (q->ne[3] % k->ne[3] != 0 || q->ne[3] % v->ne[3] != 0) return false;
    const int64_t max_d = FA_MAXR * (int64_t) dev->subgroup_size;
    if (q->ne[0] > max_d || v->ne[0] > max_d) return false;
    if (mask) {
        if (mask->type != GGML_TYPE_F16 && mask->type != GGML_TYPE_F32) return false;
        if (mask->ne[0] < k->ne[1] || mask->ne[1] < q->ne[1] || mask->ne[2] <= 0 || mask->ne[3] <= 0) return false;
        if (q->ne[2] % mask->ne[2] != 0 || q->ne[3] % mask->ne[3] != 0) return false;
    }
    if (sinks && (sinks->type != GGML_TYPE_F32 || sinks->ne[0] < q->ne[2])) return false;
    return true;
}

bool mul_mat_ok(vk_device * dev, const ggml_tensor * node) {
    const ggml_tensor * a = node->src[0], * b = node->src[1];
    if (!a || !b || !is_float(a->type) || !is_float(b->type) || node->type != GGML_TYPE_F32) return false;
    if (a->ne[0] != b->ne[0] || a->ne[2] == 0 || a->ne[3] == 0) return false;
    if (b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) return false;
    return (uint64_t) (node->ne[2] * node->ne[3]) <= dev->props.limits.maxComputeWorkGroupCount[2];
}

bool op_supported(vk_device * dev, const ggml_tensor * node) {
    switch (node->op) {
        case GGML_OP_NONE:
        case GGML_OP_RESHAPE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE: return true;

        case GGML_OP_DUP:
        case GGML_OP_CONT:
        case GGML_OP_CPY: {
            const ggml_tensor * s = node->src[0];
            if (!s || ggml_nelements(s) != ggml_nelements(node)) return false;
            // float <-> float, float <-> I32 (truncation toward zero, as the CPU), raw same-type copies
            return is_word_type(s->type) && is_word_type(node->type);
        }
        case GGML_OP_ADD:
        case GGML_OP_SUB:
        case GGML_OP_MUL:
        case GGML_OP_DIV: return binary_ok(node);

        case GGML_OP_SCALE:
        case GGML_OP_SQR:
        case GGML_OP_SQRT:
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM: return same_float_type(node);

        case GGML_OP_UNARY: {
            const int u = (int) ggml_get_unary_op(node);
            return u >= 0 && u < GGML_UNARY_OP_COUNT && u != GGML_UNARY_OP_XIELU && same_float_type(node);
        }
        case GGML_OP_GLU: {
            const int g = (int) ggml_get_glu_op(node);
            if (g < 0 || g >= GGML_GLU_OP_COUNT || !same_float_type(node)) return false;
            return !node->src[1] || node->src[1]->type == node->src[0]->type;
        }
        case GGML_OP_SOFT_MAX: {
            const ggml_tensor * a = node->src[0], * m = node->src[1], * s = node->src[2];
            if (!a || a->type != GGML_TYPE_F32 || node->type != GGML_TYPE_F32) return false;
            if (m && (m->type != GGML_TYPE_F32 && m->type != GGML_TYPE_F16)) return false;
            if (m && (m->ne[0] != a->ne[0] || m->ne[1] < a->ne[1] || m->ne[2] <= 0 || m->ne[3] <= 0)) return false;
            return !s || s->type == GGML_TYPE_F32;
        }
        case GGML_OP_ROPE: {
            const ggml_tensor * a = node->src[0], * pos = node->src[1], * ff = node->src[2];
            if (!a || !pos || (a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_F16)) return false;
            if (node->type != a->type || pos->type != GGML_TYPE_I32 || (ff && ff->type != GGML_TYPE_F32)) return false;
            const int mode = ggml_get_op_params_i32(node, 2);
            return mode == GGML_ROPE_TYPE_NORMAL || mode == GGML_ROPE_TYPE_NEOX;
        }
        case GGML_OP_MUL_MAT: return mul_mat_ok(dev, node);
        case GGML_OP_FLASH_ATTN_EXT: return flash_attn_ok(dev, node);

        case GGML_OP_GET_ROWS: {
            const ggml_tensor * a = node->src[0], * idx = node->src[1];
            if (!a || !idx || idx->type != GGML_TYPE_I32) return false;
            if (is_float(a->type)) return node->type == GGML_TYPE_F32;
            return a->type == GGML_TYPE_I32 && node->type == GGML_TYPE_I32;
        }
        case GGML_OP_CONCAT:
            return node->src[0] && node->src[1] && node->src[0]->type == node->type &&
                   node->src[1]->type == node->type && is_word_type(node->type);
        case GGML_OP_PAD:
            if (ggml_get_op_params_i32(node, 8) != 0) return false; // circular padding
            return node->src[0] && node->src[0]->type == node->type && is_word_type(node->type);
        case GGML_OP_REPEAT: return node->src[0] && node->src[0]->type == node->type && is_word_type(node->type);
        case GGML_OP_ARANGE: return node->type == GGML_TYPE_F32;
        case GGML_OP_TIMESTEP_EMBEDDING:
            return node->type == GGML_TYPE_F32 && node->src[0] && node->src[0]->type == GGML_TYPE_F32;

        default: return false; // CUSTOM (incl. extension nodes), and ops without a shader
    }
}

// ---------------------------------------------------------------------------------------------
// Recording

// elementwise.comp OP values
enum ew_op {
    EW_COPY = 0, EW_ADD, EW_SUB, EW_MUL, EW_DIV, EW_SCALE, EW_SQR, EW_SQRT, EW_REPEAT, EW_PAD, EW_CONCAT, EW_ARANGE,
    EW_GET_ROWS, EW_TIMESTEP, EW_UNARY = 100,
};


uint32_t wg_size(vk_device * dev, uint32_t want) {
    return std::min<uint32_t>({want, dev->props.limits.maxComputeWorkGroupInvocations, dev->props.limits.maxComputeWorkGroupSize[0]});
}

uint32_t groups_for(vk_device * dev, uint64_t items, uint32_t per_group) {
    const uint64_t g = (items + per_group - 1) / per_group;
    return (uint32_t) std::max<uint64_t>(1, std::min<uint64_t>({g, (uint64_t) 65535, (uint64_t) dev->props.limits.maxComputeWorkGroupCount[0]}));
}

struct recorder {
    vk_stream &   s;
    ggml_tensor * node;
    vk_params     p{};

    bool set(int i, const ggml_tensor * t) { return vk_describe_tensor(t, p.t[i]); }

    bool run(const char * shader, std::vector<int32_t> spec, uint32_t gx, uint32_t gy = 1, uint32_t gz = 1) {
        std::vector<const ggml_tensor *> reads;
        for (int i = 0; i < GGML_MAX_SRC; i++) {
            if (node->src[i]) reads.push_back(node->src[i]);
        }
        vk_stream_access(s, reads, node);
        return vk_stream_dispatch(s, vk_get_pipeline(s.dev, shader, spec), p, gx, gy, gz);
    }

    // one output element per iteration
    bool elementwise(int op) {
        const uint32_t wg   = wg_size(s.dev, 256);
        const int32_t  fast = fast_mode(op);
        std::vector<int32_t> spec = {(int32_t) wg, op, fast};
        if (fast) {
            spec.push_back((int32_t) node->type);
            spec.push_back((int32_t) node->src[0]->type);
            spec.push_back(node->src[1] ? (int32_t) node->src[1]->type : 0);
        }
        return run("elementwise", spec, groups_for(s.dev, (uint64_t) ggml_nelements(node), wg));
    }

    // elementwise.comp FAST: 1 when dst and its operands are contiguous with dst's shape (2 when
    // src1 is one contiguous row broadcast over dst); only for the element-by-element ops, and
    // not for same-type copies (their bit-copy path keeps NaN payloads and integers exact)
    int32_t fast_mode(int op) const {
        const bool binary = op >= EW_ADD && op <= EW_DIV;
        const bool map    = op == EW_SCALE || op == EW_SQR || op == EW_SQRT || op >= EW_UNARY;
        const bool cvt    = op == EW_COPY && node->src[0]->type != node->type && ggml_are_same_shape(node, node->src[0]);
        if (!binary && !map && !cvt) return 0;
        const ggml_tensor * a = node->src[0];
        if (!ggml_is_contiguous(node) || !ggml_is_contiguous(a) || !ggml_are_same_shape(node, a)) return 0;
        if (!binary) return 1;
        const ggml_tensor * b = node->src[1];
        if (!ggml_is_contiguous(b)) return 0;
        if (ggml_are_same_shape(node, b)) return 1;
        return ggml_nrows(b) == 1 && node->ne[0] % b->ne[0] == 0 ? 2 : 0;
    }

    // one invocation per output element of a shader without an OP selector
    bool plain(const char * shader) {
        const uint32_t wg = wg_size(s.dev, 256);
        return run(shader, {(int32_t) wg}, groups_for(s.dev, (uint64_t) ggml_nelements(node), wg));
    }

    // one subgroup per row (rows.comp, flash_attn.comp)
    bool per_row(const char * shader, int op, uint64_t rows) {
        const uint32_t wg        = wg_size(s.dev, 4 * s.dev->subgroup_size);
        const uint32_t sg_per_wg = std::max<uint32_t>(1, wg / std::max<uint32_t>(1, s.dev->subgroup_size));
        std::vector<int32_t> spec = {(int32_t) wg};
        if (op >= 0) spec.push_back(op);
        return run(shader, spec, groups_for(s.dev, rows, sg_per_wg));
    }
};

// mul_mat_sg.comp's preconditions: 16-byte loads of 8 consecutive K values from every row of A
// and B (contiguous along K, K % 8 == 0, rows, batches and base 16-byte aligned)
bool sg_operand_ok(const ggml_tensor * t) {
    const size_t ts = ggml_type_size(t->type);
    if (t->nb[0] != ts || t->ne[0] % 8 != 0) return false;
    if (vk_tensor_address(t) % 16 != 0) return false;
    return t->nb[1] % 16 == 0 && t->nb[2] % 16 == 0 && t->nb[3] % 16 == 0;
}

bool record_mul_mat(recorder & r) {
    ggml_tensor * node = r.node;
    vk_device *   dev  = r.s.dev;
    const int     want = r.s.mm_kernel; // ggml_vk_mul_mat_kernel
    const bool    sg   = want == GGML_VK_MUL_MAT_SUBGROUP || (want == GGML_VK_MUL_MAT_AUTO && dev->gemm_sg);
    if (!r.s.plain_mul_mat && sg && dev->subgroup_size == 8 && sg_operand_ok(node->src[0]) &&
        sg_operand_ok(node->src[1])) {
        // 16 rows x 16 columns per workgroup of 8 lanes (32 accumulators per lane). On lavapipe
        // (Zen 3, 2 threads, loaded machine) 8x32, 16x16, 16x32 and 32x16 blocks all measured
        // 2.8-3.1x the previous kernel, within the noise; the smallest register block is kept.
        // Grids past the device's limits take the paths below.
        const int32_t ra = 2, tn = 2;
        const uint32_t gx = (uint32_t) ((node->ne[0] + 8 * ra - 1) / (8 * ra));
        const uint32_t gy = (uint32_t) ((node->ne[1] + 8 * tn - 1) / (8 * tn));
        const uint32_t gz = (uint32_t) (node->ne[2] * node->ne[3]);
        if (gx <= dev->props.limits.maxComputeWorkGroupCount[0] && gy <= dev->props.limits.maxComputeWorkGroupCount[1])
            return r.run("mul_mat_sg", {ra, tn, (int32_t) node->src[0]->type, (int32_t) node->src[1]->type}, gx, gy, gz);
    }
    // 128 x 128 tiles with 256 threads (8 x 8 outputs each) where allowed, else 64 x 64 with 64;
    // the k-slice as deep as half the shared memory allows (the other half is left for
    // occupancy on real GPUs)
    const bool     big = dev->props.limits.maxComputeWorkGroupInvocations >= 256 &&
                     dev->props.limits.maxComputeWorkGroupSize[0] >= 256;
    const int32_t  bm = big ? 128 : 64, bn = bm;
    int32_t        bk = 32;
    const uint32_t shared = dev->props.limits.maxComputeSharedMemorySize;
    while (bk > 4 && (uint32_t) ((bm + bn) * bk * 4) > shared / 2) bk /= 2;
    const int32_t wg = bm * bn / 64;
    const int32_t at = (int32_t) node->src[0]->type;
    const int32_t bt = (int32_t) node->src[1]->type;
    const uint32_t gx = (uint32_t) ((node->ne[0] + bm - 1) / bm);
    const uint32_t gy = (uint32_t) ((node->ne[1] + bn - 1) / bn);
    const uint32_t gz = (uint32_t) (node->ne[2] * node->ne[3]);
    if (r.s.plain_mul_mat || gx > dev->props.limits.maxComputeWorkGroupCount[0] ||
        gy > dev->props.limits.maxComputeWorkGroupCount[1]) {
        // fall back to the plain shader, which loops over any size
        const uint32_t w = wg_size(dev, 256);
        return r.run("mul_mat_naive", {(int32_t) w}, groups_for(dev, (uint64_t) ggml_nelements(node), w));
    }
    const int32_t direct = want == GGML_VK_MUL_MAT_DIRECT   ? 1
                           : want == GGML_VK_MUL_MAT_SHARED ? 0
                                                            : (dev->gemm_direct ? 1 : 0);
    return r.run("mul_mat", {wg, bm, bn, bk, at, bt, direct}, gx, gy, gz);
}

bool record_rope(recorder & r) {
    ggml_tensor * node       = r.node;
    const int     n_dims     = ggml_get_op_params_i32(node, 1);
    const int     mode       = ggml_get_op_params_i32(node, 2);
    const int     n_ctx_orig = ggml_get_op_params_i32(node, 4);
    const int     n_offs     = ggml_get_op_params_i32(node, 15);
    const float   freq_base  = ggml_get_op_params_f32(node, 5);
    const float   freq_scale = ggml_get_op_params_f32(node, 6);
    const float   ext_factor = ggml_get_op_params_f32(node, 7);
    const float   attn       = ggml_get_op_params_f32(node, 8);
    const float   beta_fast  = ggml_get_op_params_f32(node, 9);
    const float   beta_slow  = ggml_get_op_params_f32(node, 10);
    if (n_dims < 0 || n_dims % 2 != 0 || n_offs < 0 || n_offs + n_dims > node->ne[0]) {
        GGML_LOG_ERROR("ggml-vulkan: rope: rotated window exceeds the row\n");
        return false;
    }
    float corr[2] = {0.0f, 0.0f};
    if (ext_factor != 0.0f && n_dims > 0) ggml_rope_yarn_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow, corr);
    double mscale = attn;
    if (ext_factor != 0.0f) mscale *= 1.0 + 0.1 * std::log(1.0 / (double) freq_scale);
    r.p.ip[1] = n_dims;
    r.p.ip[2] = (mode & GGML_ROPE_TYPE_NEOX) ? 1 : 0;
    r.p.ip[3] = n_offs;
    r.p.fp[0] = (float) std::log2((double) freq_base);
    r.p.fp[1] = freq_scale;
    r.p.fp[2] = ext_factor;
    r.p.fp[4] = corr[0];
    r.p.fp[5] = corr[1];
    r.p.fp[6] = (float) mscale;
    return r.set(0, node) && r.set(1, node->src[0]) && r.set(2, node->src[1]) && r.set(3, node->src[2]) &&
           r.plain("rope");
}

// ALiBi slope bases (as the CPU computes them)
void alibi(recorder & r, float max_bias, int64_t n_head, int fp_m0) {
    const uint32_t n_log2 = n_head > 0 ? 1u << (uint32_t) std::floor(std::log2((double) n_head)) : 1u;
    r.p.ip[0]         = (int32_t) n_log2;
    r.p.fp[fp_m0]     = std::pow(2.0f, -max_bias / (float) n_log2);
    r.p.fp[fp_m0 + 1] = std::pow(2.0f, -(max_bias / 2.0f) / (float) n_log2);
}

} // namespace

namespace {

// The loop budget of CPU implementations. lavapipe's gallivm ends all loops of a shader
// invocation, silently, once they have run 65,535 iterations in total (one loop limiter per
// invocation, shared by its loops): the rest of the work is skipped and its outputs are never
// written. Measured on lavapipe: SOFT_MAX over rows of 180000 and FLASH_ATTN_EXT over 65600 keys
// came back wrong. The shaders whose per-invocation loop count grows with a row (rows.comp) or
// with the key count (flash_attn.comp) decline shapes whose estimate passes half the cap, so the
// scheduler runs them elsewhere (the CPU); real model sizes are far below it (e.g. 4096 x 6144
// RMS_NORM: 1,536 iterations per invocation). GPUs have no such cap: no limit there.
constexpr uint64_t LOOP_BUDGET = 32768;

bool within_loop_budget(vk_device * dev, const ggml_tensor * node) {
    if (dev->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU) return true;
    const uint64_t sg     = std::max<uint32_t>(1, dev->subgroup_size);
    const uint64_t per_wg = std::max<uint64_t>(1, wg_size(dev, 4 * dev->subgroup_size) / sg); // per_row's grid
    const uint64_t max_wg = std::min<uint64_t>(65535, dev->props.limits.maxComputeWorkGroupCount[0]);
    // items one subgroup visits in per_row's grid-stride loop
    auto per_subgroup = [&](uint64_t items) { return (items + max_wg * per_wg - 1) / (max_wg * per_wg); };
    switch (node->op) {
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM:
        case GGML_OP_SOFT_MAX: {
            // rows.comp: at most four lane-strided loops over ne0 per row (SOFT_MAX: max, sum,
            // write; an all-masked row a zero fill instead)
            const uint64_t ne0 = (uint64_t) node->src[0]->ne[0];
            return per_subgroup((uint64_t) ggml_nrows(node)) * (4 * ((ne0 + sg - 1) / sg) + 16) <= LOOP_BUDGET;
        }
        case GGML_OP_FLASH_ATTN_EXT: {
            // flash_attn.comp: one iteration per key for each 4-query item (Mesa's NIR unrolls the
            // loops over the head-dimension registers and the 4 queries; measured: 40000 keys
            // exact, 65600 wrong), plus the setup and output loops
            const ggml_tensor * q = node->src[0];
            const uint64_t items = (uint64_t) ((q->ne[1] + 3) / 4) * q->ne[2] * q->ne[3];
            return per_subgroup(items) * ((uint64_t) node->src[1]->ne[1] + 256) <= LOOP_BUDGET;
        }
        default: return true;
    }
}

} // namespace

bool vk_op_supported(vk_device * dev, const ggml_tensor * node) {
    if (ggml_op_is_empty(node->op)) return node->op == GGML_OP_NONE || node->op == GGML_OP_RESHAPE ||
                                           node->op == GGML_OP_VIEW || node->op == GGML_OP_PERMUTE ||
                                           node->op == GGML_OP_TRANSPOSE;
    if (vk_quant_node(node)) return vk_quant_op_supported(dev, node); // vk-ops-quant.cpp
    return op_supported(dev, node) && srcs_addressable(node) && within_loop_budget(dev, node);
}

size_t vk_op_max_dispatches(const ggml_tensor * node) {
    (void) node;
    return 1;
}

bool vk_op_record(vk_stream & s, ggml_tensor * node) {
    if (vk_quant_node(node)) return vk_quant_op_record(s, node); // byte-strided operands: vk-ops-quant.cpp
    recorder r{s, node};
    for (int i = 0; i < 3; i++) {
        if (!r.set(i, i == 0 ? node : node->src[i - 1])) return false;
    }
    switch (node->op) {
        case GGML_OP_DUP:
        case GGML_OP_CONT:
        case GGML_OP_CPY: return r.elementwise(EW_COPY);
        case GGML_OP_ADD: return r.elementwise(EW_ADD);
        case GGML_OP_SUB: return r.elementwise(EW_SUB);
        case GGML_OP_MUL: return r.elementwise(EW_MUL);
        case GGML_OP_DIV: return r.elementwise(EW_DIV);
        case GGML_OP_SCALE:
            r.p.fp[0] = ggml_get_op_params_f32(node, 0);
            r.p.fp[1] = ggml_get_op_params_f32(node, 1);
            return r.elementwise(EW_SCALE);
        case GGML_OP_SQR: return r.elementwise(EW_SQR);
        case GGML_OP_SQRT: return r.elementwise(EW_SQRT);
        case GGML_OP_UNARY: return r.elementwise(EW_UNARY + (int) ggml_get_unary_op(node));
        case GGML_OP_REPEAT: return r.elementwise(EW_REPEAT);
        case GGML_OP_PAD:
            for (int i = 0; i < 8; i++) r.p.ip[i] = ggml_get_op_params_i32(node, i);
            return r.elementwise(EW_PAD);
        case GGML_OP_CONCAT: r.p.ip[0] = ggml_get_op_params_i32(node, 0); return r.elementwise(EW_CONCAT);
        case GGML_OP_ARANGE:
            r.p.fp[0] = ggml_get_op_params_f32(node, 0);
            r.p.fp[2] = ggml_get_op_params_f32(node, 2);
            return r.elementwise(EW_ARANGE);
        case GGML_OP_GET_ROWS: return r.elementwise(EW_GET_ROWS);
        case GGML_OP_TIMESTEP_EMBEDDING:
            r.p.ip[0] = ggml_get_op_params_i32(node, 0);
            r.p.fp[0] = (float) std::log((double) ggml_get_op_params_i32(node, 1));
            return r.elementwise(EW_TIMESTEP);
        case GGML_OP_GLU: {
            r.p.ip[1] = ggml_get_op_params_i32(node, 1);
            r.p.fp[2] = ggml_get_op_params_f32(node, 2);
            r.p.fp[3] = ggml_get_op_params_f32(node, 3);
            const uint32_t wg = wg_size(s.dev, 256);
            return r.run("glu", {(int32_t) wg, (int32_t) ggml_get_glu_op(node)},
                         groups_for(s.dev, (uint64_t) ggml_nelements(node), wg));
        }
        case GGML_OP_NORM:
        case GGML_OP_RMS_NORM:
            r.p.fp[0] = ggml_get_op_params_f32(node, 0);
            return r.per_row("rows", node->op == GGML_OP_NORM ? 0 : 1, (uint64_t) ggml_nrows(node));
        case GGML_OP_SOFT_MAX: {
            const float max_bias = ggml_get_op_params_f32(node, 1);
            r.p.fp[0] = ggml_get_op_params_f32(node, 0);
            r.p.fp[1] = max_bias;
            alibi(r, max_bias, node->src[0]->ne[2], 2);
            if (!r.set(3, node->src[2])) return false;
            return r.per_row("rows", 2, (uint64_t) ggml_nrows(node));
        }
        case GGML_OP_MUL_MAT: return record_mul_mat(r);
        case GGML_OP_ROPE: return record_rope(r);
        case GGML_OP_FLASH_ATTN_EXT: {
            const float max_bias = ggml_get_op_params_f32(node, 1);
            for (int i = 0; i < 5; i++) {
                if (!r.set(i + 1, node->src[i])) return false;
            }
            r.p.fp[0] = ggml_get_op_params_f32(node, 0);
            r.p.fp[1] = max_bias;
            r.p.fp[2] = ggml_get_op_params_f32(node, 2);
            alibi(r, max_bias, node->src[0]->ne[2], 3);
            const ggml_tensor * q  = node->src[0];
            const int64_t       sg = std::max<uint32_t>(1, s.dev->subgroup_size);
            // registers per lane for the wider of the two head dims; NQ queries share each K/V row
            const int32_t maxr = (int32_t) ((std::max(q->ne[0], node->src[2]->ne[0]) + sg - 1) / sg);
            const int32_t nq   = 4;
            const uint32_t wg  = wg_size(s.dev, 4 * s.dev->subgroup_size);
            const uint32_t sgw = std::max<uint32_t>(1, wg / (uint32_t) sg);
            const uint64_t items = (uint64_t) ((q->ne[1] + nq - 1) / nq) * q->ne[2] * q->ne[3];
            return r.run("flash_attn", {(int32_t) wg, std::max(maxr, 1), nq}, groups_for(s.dev, items, sgw));
        }
        default:
            GGML_LOG_ERROR("ggml-vulkan: no shader for %s\n", ggml_op_desc(node));
            return false;
    }
}
