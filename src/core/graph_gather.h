#pragma once

// graph_gather.h — what the sd fusions' graph-delay rules (optimize callbacks) of every GPU
// backend share. A fusion rule matches consecutive nodes only; when independent work sits
// between a chain's nodes (a gate, residual or RoPE table produced late, another projection in
// between), the rule's optimize callback finds the whole chain the match would accept and
// gathers it with ggml_ext_graph_delay, which refuses every move that could change results (a
// crossed node reading a moved one, aliasing writes): such a chain stays unfused. Host code on
// graph metadata only, public ggml headers only.

#include "ggml-backend.h"
#include "ggml-ext.h"
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

// The Krea2 modulated norm feeding a quantizer, found by its readers from the RMS_NORM at
// position i: RMS_NORM -> MUL(w) -> MUL(mod) -> ADD -> ADD(shift) -> quantizer, where MUL(w) has
// exactly two readers (MUL(mod) and the first ADD) and every other node one. n receives the six
// nodes in that order; false when the graph has another shape there.
bool modulation_chain_at(struct ggml_cgraph * g, int i, const struct ggml_tensor * n[6]);

// Gathers every modulation chain the backend's rule accepts (accept(n), n the six nodes).
template <typename Accept> void gather_modulation_chains(struct ggml_cgraph * g, Accept accept) {
    std::vector<std::vector<const struct ggml_tensor *>> chains;
    for (int i = 0; i < ggml_graph_n_nodes(g); ++i) {
        const struct ggml_tensor * n[6];
        if (modulation_chain_at(g, i, n) && accept(n)) chains.push_back({n, n + 6});
    }
    for (const auto & chain : chains) gather_before_last(g, chain);
}

// The INT8 linear's gate/residual epilogue: linear -> MUL(gate) -> ADD(residual) or linear ->
// ADD(residual). chain_of(nodes, count) is the backend's own check of the 3- or 2-node chain.
// The match: how many consecutive nodes from `first` the rule takes (3, 2 or 0).
template <typename ChainOf> int match_linear_epilogue(const struct ggml_cgraph * graph, int first, ChainOf chain_of) {
    struct ggml_cgraph * g = const_cast<struct ggml_cgraph *>(graph); // the accessors are not const; read only
    const int            n = ggml_graph_n_nodes(g);
    if (first + 1 >= n) return 0;
    const struct ggml_tensor * nodes[3] = {ggml_graph_node(g, first), ggml_graph_node(g, first + 1),
                                           first + 2 < n ? ggml_graph_node(g, first + 2) : nullptr};
    if (nodes[2] && chain_of(nodes, 3)) return 3;
    return chain_of(nodes, 2) ? 2 : 0;
}

// The optimize side: each linear (op linear_op) whose sole reader is a MUL(gate) whose sole reader
// is the ADD (or whose sole reader is the ADD) is gathered so the match sees the chain consecutive.
template <typename ChainOf> void gather_linear_epilogues(struct ggml_cgraph * g, ggml_ext_op_t linear_op, ChainOf chain_of) {
    std::vector<std::vector<const struct ggml_tensor *>> chains;
    for (int i = 0; i < ggml_graph_n_nodes(g); ++i) {
        struct ggml_tensor * lin = ggml_graph_node(g, i);
        if (ggml_ext_get_op(lin) != linear_op) continue;
        struct ggml_tensor * c1 = sole_consumer(g, lin, i);
        if (c1 == nullptr) continue;
        struct ggml_tensor *       c2       = c1->op == GGML_OP_MUL ? sole_consumer(g, c1, i) : nullptr;
        const struct ggml_tensor * nodes[3] = {lin, c1, c2};
        if (c2 && chain_of(nodes, 3)) chains.push_back({lin, c1, c2});
        else if (chain_of(nodes, 2)) chains.push_back({lin, c1});
    }
    for (const auto & chain : chains) gather_before_last(g, chain);
}

} // namespace sd_graph
