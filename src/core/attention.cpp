// attention.cpp — model-level attention selection (see attention.h).

#include "attention.h"

#include "ggml_extensions.h"

// softmax(scale * k^T q) v from ordinary ops, for devices without flash attention (the
// non-flash path of sd.cpp's attention helper), returned in flash attention's output layout.
static struct ggml_tensor * attention_mul_mat(struct ggml_context * ctx, struct ggml_tensor * q,
                                              struct ggml_tensor * k, struct ggml_tensor * v, float scale) {
    struct ggml_tensor * kq = ggml_mul_mat(ctx, k, q);                   // [Lk, Lq, H, N]
    kq                      = ggml_soft_max_ext(ctx, kq, NULL, scale, 0.0f);
    struct ggml_tensor * vt = ggml_cont(ctx, ggml_permute(ctx, v, 1, 0, 2, 3)); // [Lk, D, Hkv, N]
    struct ggml_tensor * o  = ggml_mul_mat(ctx, vt, kq);                 // [D, Lq, H, N]
    return ggml_cont(ctx, ggml_permute(ctx, o, 0, 2, 1, 3));             // [D, H, Lq, N]
}

extern "C" struct ggml_tensor * sd_attention(struct ggml_context * ctx, ggml_backend_dev_t dev, struct ggml_tensor * q,
                                             struct ggml_tensor * k, struct ggml_tensor * v, float scale,
                                             bool want_sage) {
    if (want_sage && dev != NULL) {
        // the node is built to ask the device; an unused node costs only its metadata
        struct ggml_tensor * sage = ggml_sage_attn(ctx, q, k, v, scale, 0);
        if (sage != NULL && ggml_backend_dev_supports_op(dev, sage)) return sage;
    }
    struct ggml_tensor * fa = ggml_flash_attn_ext(ctx, q, k, v, NULL, scale, 0.0f, 0.0f);
    ggml_flash_attn_ext_set_prec(fa, GGML_PREC_F32);
    if (dev == NULL || ggml_backend_dev_supports_op(dev, fa)) return fa;
    return attention_mul_mat(ctx, q, k, v, scale);
}
