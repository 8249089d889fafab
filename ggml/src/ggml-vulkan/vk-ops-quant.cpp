// vk-ops-quant.cpp — nodes with a block-quantized operand (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
// Q5_K, Q6_K): mul_mat with quantized weights (shaders/mul_mat_q.comp), get_rows from a quantized
// table and cpy/dup/cont from a quantized tensor to F32/F16 (shaders/dequant.comp). Kept apart
// from vk-ops.cpp (the float/int paths) on purpose: the shaders decode blocks themselves
// (shaders/quant.glsl), so a quantized tensor is described with BYTE strides and a 2-byte aligned
// address instead of element strides, and none of vk-ops.cpp's element-size rules apply.
//
// Weights stay quantized in device memory (4.5-8.5 bits per weight instead of 32); the GEMM
// multiplies them with the activations as given (F32/F16, not quantized to Q8 like the CPU), so
// results match the CPU backend within the activation quantization the CPU adds, not bit for bit.
// get_rows and the copies are bit-identical to the CPU.

#include "vk-internal.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace {

bool quant_type(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q4_0:
        case GGML_TYPE_Q4_1:
        case GGML_TYPE_Q5_0:
        case GGML_TYPE_Q5_1:
        case GGML_TYPE_Q8_0:
        case GGML_TYPE_Q4_K:
        case GGML_TYPE_Q5_K:
        case GGML_TYPE_Q6_K: return true;
        default: return false;
    }
}

bool f32_or_f16(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16; }

// A quantized tensor the shaders can read: whole blocks per row, blocks of a row packed
// (nb[0] == block bytes), every byte stride even (16-bit loads), every byte offset the shader
// forms below 2^32.
bool quant_addressable(const ggml_tensor * t) {
    if (!quant_type(t->type)) return false;
    if (t->ne[0] <= 0 || t->ne[0] % ggml_blck_size(t->type) != 0) return false;
    if (t->nb[0] != ggml_type_size(t->type)) return false;
    if (t->view_src && t->view_offs % 2 != 0) return false;
    uint64_t span = ggml_row_size(t->type, t->ne[0]);
    for (int d = 1; d < GGML_MAX_DIMS; d++) {
        if (t->ne[d] <= 0 || t->nb[d] % 2 != 0) return false;
        span += (uint64_t) (t->ne[d] - 1) * t->nb[d];
    }
    return span <= UINT32_MAX && (uint64_t) ggml_nelements(t) <= UINT32_MAX;
}

// F32/F16/I32 operands and results: element strides below 2^32, aligned to the element size
bool plain_addressable(const ggml_tensor * t) {
    if (t->type != GGML_TYPE_F32 && t->type != GGML_TYPE_F16 && t->type != GGML_TYPE_I32) return false;
    const size_t ts = ggml_type_size(t->type);
    if (t->view_src && t->view_offs % ts != 0) return false;
    uint64_t span = 1;
    for (int d = 0; d < GGML_MAX_DIMS; d++) {
        if (t->ne[d] < 0 || (uint64_t) t->ne[d] > UINT32_MAX || t->nb[d] % ts != 0) return false;
        if (t->ne[d] > 1) span += (uint64_t) (t->ne[d] - 1) * (t->nb[d] / ts);
    }
    return span <= UINT32_MAX && (uint64_t) ggml_nelements(t) <= UINT32_MAX;
}

bool describe_quant(const ggml_tensor * t, vk_tensor_desc & d) {
    memset(&d, 0, sizeof(d));
    d.addr = vk_tensor_address(t);
    if (d.addr % 2 != 0) {
        GGML_LOG_ERROR("ggml-vulkan: quantized tensor %s is not 2-byte aligned\n", t->name);
        return false;
    }
    d.type = (uint32_t) t->type;
    for (int i = 0; i < 4; i++) {
        d.ne[i] = (uint32_t) t->ne[i];
        d.nb[i] = (uint32_t) t->nb[i]; // bytes
    }
    return true;
}

uint32_t limit_groups(vk_device * dev, uint64_t g, int axis) {
    return (uint32_t) std::max<uint64_t>(1, std::min<uint64_t>(g, dev->props.limits.maxComputeWorkGroupCount[axis]));
}

bool dispatch(vk_stream & s, ggml_tensor * node, const char * shader, const std::vector<int32_t> & spec,
              const vk_params & p, uint32_t gx, uint32_t gy, uint32_t gz) {
    std::vector<const ggml_tensor *> reads;
    for (int i = 0; i < GGML_MAX_SRC; i++) {
        if (node->src[i]) reads.push_back(node->src[i]);
    }
    vk_stream_access(s, reads, node);
    return vk_stream_dispatch(s, vk_get_pipeline(s.dev, shader, spec), p, gx, gy, gz);
}

// mul_mat_q_sg.comp (lane-owned columns, broadcast weights, 16-byte activation loads) where it
// pays: CPU drivers with 8-wide subgroups (lavapipe), where loads cost per lane and component.
// Its preconditions: B F32 contiguous along K with 16-byte aligned rows, batches and base.
// GGML_VK_MMQ=generic forces mul_mat_q.comp (tests run both).
bool use_sg_kernel(vk_device * dev, const ggml_tensor * node) {
    static const bool generic = [] {
        const char * e = getenv("GGML_VK_MMQ");
        return e && strcmp(e, "generic") == 0;
    }();
    const ggml_tensor * b = node->src[1];
    if (generic || !dev->gemm_direct || dev->subgroup_size != 8 || b->type != GGML_TYPE_F32) return false;
    if (b->nb[0] != sizeof(float) || vk_tensor_address(b) % 16 != 0) return false;
    return b->nb[1] % 16 == 0 && b->nb[2] % 16 == 0 && b->nb[3] % 16 == 0;
}

// rows of A per invocation, invocations per workgroup (the workgroup covers WG * TM rows)
constexpr int32_t MMQ_TM = 4;
constexpr int32_t MMQ_WG = 64;

} // namespace

bool vk_quant_node(const ggml_tensor * node) {
    switch (node->op) {
        case GGML_OP_MUL_MAT:
        case GGML_OP_GET_ROWS:
        case GGML_OP_DUP:
        case GGML_OP_CONT:
        case GGML_OP_CPY: return node->src[0] && ggml_is_quantized(node->src[0]->type);
        default: return false;
    }
}

bool vk_quant_op_supported(vk_device * dev, const ggml_tensor * node) {
    const ggml_tensor * a = node->src[0];
    const ggml_tensor * b = node->src[1];
    if (!a || !quant_addressable(a) || !plain_addressable(node)) return false;
    switch (node->op) {
        case GGML_OP_MUL_MAT: {
            if (!b || !f32_or_f16(b->type) || node->type != GGML_TYPE_F32 || !plain_addressable(b)) return false;
            if (a->ne[0] != b->ne[0] || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) return false;
            const uint64_t gx = (uint64_t) (a->ne[1] + MMQ_WG * MMQ_TM - 1) / (MMQ_WG * MMQ_TM);
            const auto &   lim = dev->props.limits.maxComputeWorkGroupCount;
            return gx <= lim[0] && (uint64_t) b->ne[1] <= lim[1] && (uint64_t) (node->ne[2] * node->ne[3]) <= lim[2];
        }
        case GGML_OP_GET_ROWS:
            return b && b->type == GGML_TYPE_I32 && plain_addressable(b) && node->type == GGML_TYPE_F32;
        case GGML_OP_DUP:
        case GGML_OP_CONT:
        case GGML_OP_CPY:
            // quantized -> F32/F16 (float -> quantized is declined: the CPU runs it)
            return f32_or_f16(node->type) && ggml_nelements(a) == ggml_nelements(node);
        default: return false;
    }
}

bool vk_quant_op_record(vk_stream & s, ggml_tensor * node) {
    vk_params  p{};
    if (!vk_describe_tensor(node, p.t[0]) || !describe_quant(node->src[0], p.t[1])) return false;
    if (node->op == GGML_OP_MUL_MAT || node->op == GGML_OP_GET_ROWS) {
        if (!vk_describe_tensor(node->src[1], p.t[2])) return false;
    }
    vk_device *   dev = s.dev;
    const int32_t qt  = (int32_t) node->src[0]->type;
    if (node->op == GGML_OP_MUL_MAT) {
        const ggml_tensor * a = node->src[0], * b = node->src[1];
        // 4 activation columns per invocation when there are that many (decoded weights reused 4
        // times); 1 for matrix-vector shapes, where extra columns would only be wasted work
        const int32_t  tn = b->ne[1] >= 4 ? 4 : 1;
        const uint32_t wg = (uint32_t) std::min<uint32_t>({(uint32_t) MMQ_WG, dev->props.limits.maxComputeWorkGroupInvocations,
                                                          dev->props.limits.maxComputeWorkGroupSize[0]});
        const uint64_t gx = ((uint64_t) a->ne[1] + wg * MMQ_TM - 1) / (wg * MMQ_TM);
        const uint64_t gy = ((uint64_t) b->ne[1] + tn - 1) / tn;
        const uint64_t gz = (uint64_t) (node->ne[2] * node->ne[3]);
        if (gx > dev->props.limits.maxComputeWorkGroupCount[0] || gy > dev->props.limits.maxComputeWorkGroupCount[1] ||
            gz > dev->props.limits.maxComputeWorkGroupCount[2]) {
            GGML_LOG_ERROR("ggml-vulkan: %s: quantized mul_mat grid exceeds the device's workgroup counts\n", node->name);
            return false;
        }
        if (use_sg_kernel(dev, node)) {
            // mul_mat_q_sg.comp: 16 weight rows x 32 columns per 8-lane workgroup (the block of
            // the F32 subgroup GEMM: 64 accumulators per lane)
            const int32_t  ra = 2, tns = 4;
            const uint64_t sx = ((uint64_t) a->ne[1] + 8 * ra - 1) / (8 * ra);
            const uint64_t sy = ((uint64_t) b->ne[1] + 8 * tns - 1) / (8 * tns);
            if (sx <= dev->props.limits.maxComputeWorkGroupCount[0] && sy <= dev->props.limits.maxComputeWorkGroupCount[1] &&
                gz <= dev->props.limits.maxComputeWorkGroupCount[2])
                return dispatch(s, node, "mul_mat_q_sg", {ra, tns, qt}, p, (uint32_t) sx, (uint32_t) sy, (uint32_t) gz);
        }
        return dispatch(s, node, "mul_mat_q", {(int32_t) wg, qt, (int32_t) b->type, MMQ_TM, tn}, p, (uint32_t) gx,
                        (uint32_t) gy, (uint32_t) gz);
    }
    const uint32_t wg = std::min<uint32_t>({256u, dev->props.limits.maxComputeWorkGroupInvocations,
                                            dev->props.limits.maxComputeWorkGroupSize[0]});
    const int32_t  op = node->op == GGML_OP_GET_ROWS ? 1 : 0;
    const uint32_t gx = limit_groups(dev, std::min<uint64_t>(65535, ((uint64_t) ggml_nelements(node) + wg - 1) / wg), 0);
    return dispatch(s, node, "dequant", {(int32_t) wg, op, qt}, p, gx, 1, 1);
}
