#pragma once

// ggml-alloc.h — linear tensor allocator and the graph allocator (gallocr).
// Upstream semantics: ../shared/reference/ggml-api-facts.md section 5.

#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ggml_backend_buffer_type * ggml_backend_buffer_type_t;
typedef struct ggml_backend_buffer *      ggml_backend_buffer_t;
typedef struct ggml_backend *             ggml_backend_t;

// Bump allocation inside an existing buffer.
struct ggml_tallocr {
    ggml_backend_buffer_t buffer;
    void *                base;
    size_t                alignment;
    size_t                offset;
};

GGML_API struct ggml_tallocr ggml_tallocr_new(ggml_backend_buffer_t buffer);
GGML_API enum ggml_status    ggml_tallocr_alloc(struct ggml_tallocr * talloc, struct ggml_tensor * tensor);

// Graph allocator: plans the lifetime of every intermediate tensor of a graph inside one
// compute buffer per buffer type, reusing memory of dead tensors and, for ops that allow it,
// letting a node take over the storage of an input whose last consumer it is.
typedef struct ggml_gallocr * ggml_gallocr_t;

GGML_API ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft);
GGML_API ggml_gallocr_t ggml_gallocr_new_n(ggml_backend_buffer_type_t * bufts, int n_bufs);
GGML_API void           ggml_gallocr_free(ggml_gallocr_t galloc);

// Plan the graph without touching its tensors and (re)allocate the buffers if they must grow.
// Returns false if a buffer allocation fails.
GGML_API bool ggml_gallocr_reserve(ggml_gallocr_t galloc, struct ggml_cgraph * graph);
GGML_API bool ggml_gallocr_reserve_n(ggml_gallocr_t galloc, struct ggml_cgraph * graph,
                                     const int * node_buffer_ids, const int * leaf_buffer_ids);
// Only compute the sizes (one per buffer) that reserve_n would need.
GGML_API void ggml_gallocr_reserve_n_size(ggml_gallocr_t galloc, struct ggml_cgraph * graph,
                                          const int * node_buffer_ids, const int * leaf_buffer_ids,
                                          size_t * sizes);

// Assign data/buffer to every tensor of the graph that has none. Re-reserves automatically
// with a single buffer when the graph changed; returns false when it cannot.
GGML_API bool ggml_gallocr_alloc_graph(ggml_gallocr_t galloc, struct ggml_cgraph * graph);

GGML_API size_t ggml_gallocr_get_buffer_size(ggml_gallocr_t galloc, int buffer_id);

// Whether the graph allocator may let `op` write into the storage of one of its inputs.
GGML_API bool ggml_op_can_inplace(enum ggml_op op);

// Utils (upstream declares these here, not in ggml-backend.h)
// Allocate every tensor of a no_alloc context that has no data (views are initialised after).
// Returns NULL if allocation fails or there is nothing to allocate.
GGML_API size_t ggml_backend_alloc_ctx_tensors_from_buft_size(struct ggml_context * ctx,
                                                              ggml_backend_buffer_type_t buft);
GGML_API ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors_from_buft(struct ggml_context * ctx,
                                                                         ggml_backend_buffer_type_t buft);
GGML_API ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors(struct ggml_context * ctx, ggml_backend_t backend);

#ifdef __cplusplus
}
#endif
