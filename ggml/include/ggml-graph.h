#pragma once

// ggml-graph.h — public access to graph structure that upstream keeps internal: leaves,
// recorded use counts, mapped copies and execution of a node range. Workspace measurement,
// graph cuts and evaluation callbacks are built on these.

#include "ggml-backend.h"
#include "ggml.h"

#ifdef __cplusplus
extern "C" {
#endif

// Leaves (tensors with op NONE reached by ggml_build_forward_expand), in insertion order.
GGML_API int                  ggml_graph_n_leafs(const struct ggml_cgraph * graph);
GGML_API struct ggml_tensor * ggml_graph_leaf(const struct ggml_cgraph * graph, int i); // i < 0: from the end

// Appends a leaf (op NONE, not already in the graph, capacity left). Append-only: existing
// nodes and leaves keep their positions. false if it cannot be added.
GGML_API bool ggml_graph_add_leaf(struct ggml_cgraph * graph, struct ggml_tensor * leaf);

// How many graph nodes use tensor as a source, as recorded while building (0 if absent).
GGML_API int ggml_graph_get_use_count(const struct ggml_cgraph * graph, const struct ggml_tensor * tensor);

// Mapped inference-graph copy. `map` gives, for every node of src[i0, i1) and every tensor they
// reference (sources, view sources), the caller-owned copy to use in dst (the caller creates
// the copies and remaps their storage and edges). dst receives the mapped nodes in the same
// order, plus mapped leaves of src that the range uses, and each copy's use count equals the
// original's count in src — including consumers outside [i0, i1). Returns false and leaves dst
// unchanged if a mapping is missing (NULL), maps two tensors to one, or dst lacks capacity.
typedef struct ggml_tensor * (*ggml_graph_map_fn)(struct ggml_tensor * original, void * user_data);
GGML_API bool ggml_graph_copy_mapped(struct ggml_cgraph * dst, const struct ggml_cgraph * src, int i0, int i1,
                                     ggml_graph_map_fn map, void * user_data);

// Copies the recorded use counts of the tensors used by src's nodes [i0, i1) to the same
// tensors in dst (which must already contain them); false if one is missing.
GGML_API bool ggml_graph_copy_use_counts(struct ggml_cgraph * dst, const struct ggml_cgraph * src, int i0, int i1);

// Computes nodes [i0, i1) of an already allocated graph on backend (with single-node extension
// kernels, like ggml_backend_graph_compute), keeping the original graph's use counts.
GGML_API enum ggml_status ggml_backend_graph_compute_range(ggml_backend_t backend, struct ggml_cgraph * graph,
                                                           int i0, int i1);

#ifdef __cplusplus
}
#endif
