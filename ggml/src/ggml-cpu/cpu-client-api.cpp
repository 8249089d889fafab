// cpu-client-api.cpp — upstream ggml-cpu.h functions that clients call outside of graphs:
// whole-tensor fills and n-d element access on host tensors, ggml_graph_compute_with_ctx, and
// the CPU feature queries beyond the ones the kernels use.

#include "cpu-features.h"
#include "cpu-ops.h"

#include "ggml-cpu.h"

namespace {

void * element_nd(const ggml_tensor * t, int i0, int i1, int i2, int i3) {
    GGML_ASSERT(t != nullptr && t->data != nullptr && "tensor has no data");
    const ggml_backend_buffer * buf = t->buffer ? t->buffer : (t->view_src ? t->view_src->buffer : nullptr);
    GGML_ASSERT((buf == nullptr || ggml_backend_buffer_is_host(const_cast<ggml_backend_buffer *>(buf))) &&
                "tensor is not in host memory");
    const int idx[4] = {i0, i1, i2, i3};
    for (int d = 0; d < 4; ++d) {
        if (idx[d] < 0 || idx[d] >= t->ne[d]) {
            GGML_ABORT("element index %d of dim %d out of range [0, %lld)", idx[d], d, (long long) t->ne[d]);
        }
    }
    GGML_ASSERT(ggml_blck_size(t->type) == 1 && "element access on a block-quantized tensor");
    return (char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

int32_t load_i32(ggml_type type, const void * p) {
    switch (type) {
        case GGML_TYPE_I8: return *(const int8_t *) p;
        case GGML_TYPE_I16: return *(const int16_t *) p;
        case GGML_TYPE_I32: return *(const int32_t *) p;
        default: return (int32_t) ggml_load_f32(type, p);
    }
}

void store_i32(ggml_type type, void * p, int32_t v) {
    switch (type) {
        case GGML_TYPE_I8: *(int8_t *) p = (int8_t) v; break;
        case GGML_TYPE_I16: *(int16_t *) p = (int16_t) v; break;
        case GGML_TYPE_I32: *(int32_t *) p = v; break;
        default: ggml_store_f32(type, p, (float) v); break;
    }
}

template <class F> void for_each_element(const ggml_tensor * t, F f) {
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) f(element_nd(t, (int) i0, (int) i1, (int) i2, (int) i3));
}


} // namespace

extern "C" {

struct ggml_tensor * ggml_set_i32(struct ggml_tensor * tensor, int32_t value) {
    if (!ggml_is_empty(tensor)) for_each_element(tensor, [&](void * p) { store_i32(tensor->type, p, value); });
    return tensor;
}

struct ggml_tensor * ggml_set_f32(struct ggml_tensor * tensor, float value) {
    if (!ggml_is_empty(tensor)) for_each_element(tensor, [&](void * p) { ggml_store_f32(tensor->type, p, value); });
    return tensor;
}

int32_t ggml_get_i32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3) {
    return load_i32(tensor->type, element_nd(tensor, i0, i1, i2, i3));
}

void ggml_set_i32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3, int32_t value) {
    store_i32(tensor->type, element_nd(tensor, i0, i1, i2, i3), value);
}

float ggml_get_f32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3) {
    return ggml_load_f32(tensor->type, element_nd(tensor, i0, i1, i2, i3));
}

void ggml_set_f32_nd(const struct ggml_tensor * tensor, int i0, int i1, int i2, int i3, float value) {
    ggml_store_f32(tensor->type, element_nd(tensor, i0, i1, i2, i3), value);
}

enum ggml_status ggml_graph_compute_with_ctx(struct ggml_context * ctx, struct ggml_cgraph * cgraph, int n_threads) {
    (void) ctx; // upstream takes its work buffer from ctx; the backend keeps its own
    ggml_backend_t backend = ggml_backend_cpu_init();
    if (!backend) return GGML_STATUS_FAILED;
    if (n_threads > 0) ggml_backend_cpu_set_n_threads(backend, n_threads);
    const enum ggml_status st = ggml_backend_graph_compute(backend, cgraph);
    ggml_backend_free(backend);
    return st;
}

int ggml_cpu_has_sse3(void) { return ggml_cpu_get_features().sse3 ? 1 : 0; }
int ggml_cpu_has_ssse3(void) { return ggml_cpu_get_features().ssse3 ? 1 : 0; }
int ggml_cpu_has_avx(void) { return ggml_cpu_get_features().avx ? 1 : 0; }
int ggml_cpu_has_avx_vnni(void) { return ggml_cpu_get_features().avx_vnni ? 1 : 0; }
int ggml_cpu_has_bmi2(void) { return ggml_cpu_get_features().bmi2 ? 1 : 0; }
int ggml_cpu_has_f16c(void) { return ggml_cpu_get_features().f16c ? 1 : 0; }
int ggml_cpu_has_fma(void) { return ggml_cpu_get_features().fma ? 1 : 0; }
int ggml_cpu_has_avx512_vbmi(void) { return ggml_cpu_get_features().avx512_vbmi ? 1 : 0; }
// AArch64: what the CPU has (HWCAP), as upstream reports it; Advanced SIMD always includes FMA
int ggml_cpu_has_neon(void) { return ggml_cpu_get_features().neon ? 1 : 0; }
int ggml_cpu_has_arm_fma(void) { return ggml_cpu_get_features().neon ? 1 : 0; }
int ggml_cpu_has_fp16_va(void) { return ggml_cpu_get_features().fp16_va ? 1 : 0; }
int ggml_cpu_has_dotprod(void) { return ggml_cpu_get_features().dotprod ? 1 : 0; }
int ggml_cpu_has_matmul_int8(void) { return ggml_cpu_get_features().i8mm ? 1 : 0; }
int ggml_cpu_has_sve(void) { return ggml_cpu_get_features().sve ? 1 : 0; }
int ggml_cpu_get_sve_cnt(void) { return ggml_cpu_get_features().sve_bytes; }
int ggml_cpu_has_sme(void) { return ggml_cpu_get_features().sme ? 1 : 0; }
int ggml_cpu_has_riscv_v(void) { return 0; }
int ggml_cpu_get_rvv_vlen(void) { return 0; }
int ggml_cpu_has_vsx(void) { return 0; }
int ggml_cpu_has_vxe(void) { return 0; }
int ggml_cpu_has_wasm_simd(void) { return 0; }
int ggml_cpu_has_llamafile(void) { return 0; }

} // extern "C"
