// graph_gather.cpp — see graph_gather.h.

#include "graph_gather.h"

#include "ggml-ext.h"
#include "ggml-graph.h"

#include <algorithm>

namespace sd_graph {

int node_index(ggml_cgraph * g, const ggml_tensor * t) {
    const int n = ggml_graph_n_nodes(g);
    for (int i = 0; i < n; ++i) {
        if (ggml_graph_node(g, i) == t) return i;
    }
    return -1;
}

std::vector<ggml_tensor *> consumers(ggml_cgraph * g, const ggml_tensor * t, int from) {
    std::vector<ggml_tensor *> r;
    const int                  n = ggml_graph_n_nodes(g);
    for (int j = from + 1; j < n; ++j) {
        ggml_tensor * c = ggml_graph_node(g, j);
        for (int s = 0; s < GGML_MAX_SRC; ++s) {
            if (c->src[s] == t) {
                r.push_back(c);
                break;
            }
        }
    }
    return r;
}

ggml_tensor * sole_consumer(ggml_cgraph * g, const ggml_tensor * t, int from) {
    if (ggml_graph_get_use_count(g, t) != 1) return nullptr; // also counts readers before `from`
    const std::vector<ggml_tensor *> c = consumers(g, t, from);
    return c.size() == 1 ? c[0] : nullptr;
}

bool gather_before_last(ggml_cgraph * g, const std::vector<const ggml_tensor *> & chain) {
    std::vector<int> pos;
    for (const ggml_tensor * t : chain) {
        pos.push_back(node_index(g, t));
        if (pos.back() < 0) return false;
    }
    std::sort(pos.begin(), pos.end());
    // latest first: each move then crosses only nodes outside the chain (the chain's later nodes
    // already sit after `slot`), so a refusal means a real dependency or alias, not the chain
    int slot = pos.back() - 1;
    for (int i = (int) pos.size() - 2; i >= 0; --i, --slot) {
        if (pos[i] == slot) continue;
        if (!ggml_ext_graph_delay(g, pos[i], 1, slot)) return false;
    }
    return true;
}

bool modulation_chain_at(ggml_cgraph * g, int i, const ggml_tensor * n[6]) {
    ggml_tensor * norm = ggml_graph_node(g, i);
    if (norm->op != GGML_OP_RMS_NORM) return false;
    ggml_tensor * mul1 = sole_consumer(g, norm, i);
    if (mul1 == nullptr || ggml_graph_get_use_count(g, mul1) != 2) return false;
    const std::vector<ggml_tensor *> r = consumers(g, mul1, i);
    if (r.size() != 2) return false;
    ggml_tensor * mul2 = r[0]->op == GGML_OP_MUL ? r[0] : r[1];
    ggml_tensor * add1 = sole_consumer(g, mul2, i);
    ggml_tensor * add2 = add1 ? sole_consumer(g, add1, i) : nullptr;
    ggml_tensor * q    = add2 ? sole_consumer(g, add2, i) : nullptr;
    if (q == nullptr) return false;
    n[0] = norm, n[1] = mul1, n[2] = mul2, n[3] = add1, n[4] = add2, n[5] = q;
    return true;
}

} // namespace sd_graph
