#pragma once

// graph_delay.h — shared pieces of the sd Vulkan fusions' graph-delay rules (optimize
// callbacks). A fusion rule matches consecutive nodes only; when independent work sits between a
// chain's nodes (a gate, residual or RoPE table produced late, another projection in between),
// the rule's optimize callback finds the whole chain the match would accept and gathers it with
// ggml_ext_graph_delay, which refuses every move that could change results.

#include "ggml-backend.h"
#include "ggml.h"

#include <vector>

namespace sd_vk {

// Position of t among the graph's nodes, or -1.
int node_index(struct ggml_cgraph * g, const struct ggml_tensor * t);

// The nodes after position `from` that read t, in graph order (each once).
std::vector<struct ggml_tensor *> consumers(struct ggml_cgraph * g, const struct ggml_tensor * t, int from);

// The one node that reads t, or nullptr when t has no or several readers.
struct ggml_tensor * sole_consumer(struct ggml_cgraph * g, const struct ggml_tensor * t, int from);

// Moves the chain's nodes, keeping their order, next to each other just before the chain's last
// node (the one after all others in the graph). Stops at the first refused move (the graph
// stays valid: each accepted move is safe on its own); returns whether the chain is gathered.
bool gather_before_last(struct ggml_cgraph * g, const std::vector<const struct ggml_tensor *> & chain);

} // namespace sd_vk
