#pragma once

// graph_gather.h — what the sd CUDA fusions' optimize callbacks share: a fusion rule matches
// consecutive nodes only, so when independent work sits between a chain's nodes (a gate or
// residual produced after the linear, the RoPE table computed after the norm) the rule's
// optimize callback finds the whole chain its match would accept and gathers it just before the
// chain's last node with ggml_ext_graph_delay, which refuses every move that could change
// results (a crossed node reading a moved one, aliasing writes): such a chain stays unfused.
// Host code on graph metadata only; header-only (one small helper per kernel file).

#include "ggml-ext.h"
#include "ggml-graph.h"
#include "ggml.h"

#include <algorithm>
#include <vector>

namespace sd_cuda_graph {

// Position of t among the graph's nodes, or -1.
inline int node_index(ggml_cgraph * g, const ggml_tensor * t) {
    const int n = ggml_graph_n_nodes(g);
    for (int i = 0; i < n; ++i)
        if (ggml_graph_node(g, i) == t) return i;
    return -1;
}

// The one node after position `from` that reads t, or nullptr when t has no or several readers
// (the use count also counts readers before `from`).
inline ggml_tensor * sole_consumer(ggml_cgraph * g, const ggml_tensor * t, int from) {
    if (ggml_graph_get_use_count(g, t) != 1) return nullptr;
    ggml_tensor * found = nullptr;
    const int     n     = ggml_graph_n_nodes(g);
    for (int j = from + 1; j < n; ++j) {
        ggml_tensor * c = ggml_graph_node(g, j);
        for (int s = 0; s < GGML_MAX_SRC; ++s) {
            if (c->src[s] != t) continue;
            if (found) return nullptr;
            found = c;
            break;
        }
    }
    return found;
}

// Moves the chain's nodes, in their order, next to each other just before the chain's last node.
// Latest first, so each move crosses only nodes outside the chain; stops at the first refused
// move (every accepted move is safe on its own). Returns whether the chain is gathered.
inline bool gather_before_last(ggml_cgraph * g, const std::vector<const ggml_tensor *> & chain) {
    std::vector<int> pos;
    for (const ggml_tensor * t : chain) {
        pos.push_back(node_index(g, t));
        if (pos.back() < 0) return false;
    }
    std::sort(pos.begin(), pos.end());
    int slot = pos.back() - 1;
    for (int i = (int) pos.size() - 2; i >= 0; --i, --slot) {
        if (pos[i] == slot) continue;
        if (!ggml_ext_graph_delay(g, pos[i], 1, slot)) return false;
    }
    return true;
}

} // namespace sd_cuda_graph
