#pragma once

// attention.h — the model-level attention choice: SageAttention where the device runs the
// sd.sage_attn.v1 node, flash attention otherwise (and the MUL_MAT/SOFT_MAX form where even
// flash is unsupported). The choice is made here, from the device's capability query, while the
// graph is built; a custom attention node never changes its algorithm afterwards.

#include "ggml-backend.h"
#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

// q [D, Lq, H, N], k and v [D, Lk, Hkv, N] (H % Hkv == 0; the layout of ggml_flash_attn_ext,
// with K/V in whatever type the device's flash attention expects). Returns [D, H, Lq, N] F32:
// softmax(scale * q k^T) v, no mask. dev == NULL: no Sage, flash attention.
struct ggml_tensor * sd_attention(struct ggml_context * ctx, ggml_backend_dev_t dev, struct ggml_tensor * q,
                                  struct ggml_tensor * k, struct ggml_tensor * v, float scale, bool want_sage);

#ifdef __cplusplus
}
#endif
