// Only ggml-alloc.h: upstream clients call ggml_backend_alloc_ctx_tensors(_from_buft)(_size)
// having included nothing else, so the declarations must live there.
#include "ggml-alloc.h"

using alloc_ctx_fn      = ggml_backend_buffer_t (*)(struct ggml_context *, ggml_backend_t);
using alloc_ctx_buft_fn = ggml_backend_buffer_t (*)(struct ggml_context *, ggml_backend_buffer_type_t);
using alloc_size_fn     = size_t (*)(struct ggml_context *, ggml_backend_buffer_type_t);

alloc_ctx_fn      client_headers_alloc_ctx_tensors() { return &ggml_backend_alloc_ctx_tensors; }
alloc_ctx_buft_fn client_headers_alloc_ctx_tensors_from_buft() { return &ggml_backend_alloc_ctx_tensors_from_buft; }
alloc_size_fn     client_headers_alloc_ctx_tensors_size() { return &ggml_backend_alloc_ctx_tensors_from_buft_size; }
