#pragma once

// graph_gather.h — what the sd fusions' graph-delay rules (optimize callbacks) of every GPU
// backend share. A fusion rule matches consecutive nodes only; when independent work sits
// between a chain's nodes (a gate, residual or RoPE table produced late, another projection in
// between), the rule's optimize callback finds the whole chain the match would accept and
// gathers it with ggml_ext_graph_delay, which refuses every move that could change results (a
// crossed node reading a moved one, aliasing writes): such a chain stays unfused. Host code on
// graph metadata only, public ggml headers only.

#include "ggml-backend.h"
#include "ggml-graph.h"
#include "ggml.h"

#include <vector>

namespace sd_graph {

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

// Starting at every node of op `head`, follows sole consumers up to max_len nodes and asks
// chain_length(nodes, available) how many of them the backend's fusion would take; chains of at
// least min_len nodes are gathered (gather_before_last). chain_length is the rule's own match.
template <typename ChainLength>
void gather_sole_consumer_chains(struct ggml_cgraph * g, enum ggml_op head, int max_len, int min_len,
                                 ChainLength chain_length) {
    std::vector<std::vector<const struct ggml_tensor *>> chains;
    std::vector<const struct ggml_tensor *>              n((size_t) max_len);
    for (int i = 0; i < ggml_graph_n_nodes(g); ++i) {
        struct ggml_tensor * t = ggml_graph_node(g, i);
        if (t->op != head) continue;
        n[0]      = t;
        int avail = 1;
        while (avail < max_len) {
            struct ggml_tensor * c = sole_consumer(g, n[avail - 1], i);
            if (c == nullptr) break;
            n[avail++] = c;
        }
        const int len = chain_length(n.data(), avail);
        if (len >= min_len) chains.emplace_back(n.begin(), n.begin() + len);
    }
    for (const auto & chain : chains) gather_before_last(g, chain);
}

} // namespace sd_graph
