// ggml-ext-delay.cpp — ggml_ext_graph_delay: moving a producer range later in a graph (so that a
// fusion rule sees it next to its consumer) only when the result is provably the same: no
// crossed node depends on a moved node, every node involved has known effects, and no write of
// one side touches storage the other side reads or writes.

#include "ext/ggml-ext-internal.h"

#include <algorithm>
#include <vector>

namespace {

// A byte range of a base tensor's storage (the base is view_src, or the tensor itself).
struct storage {
    const struct ggml_tensor * base;
    size_t                     begin;
    size_t                     end;
};

storage storage_of(const struct ggml_tensor * t) {
    const struct ggml_tensor * base = t->view_src ? t->view_src : t;
    const size_t               offs = t->view_src ? t->view_offs : 0;
    return {base, offs, offs + ggml_nbytes(t)};
}

bool overlaps(const storage & a, const storage & b) {
    return a.base == b.base && a.begin < b.end && b.begin < a.end;
}

// What a node reads and writes, when that is known. Views write nothing; every other known op
// writes exactly its own storage (its view_src range for in-place ops and CPY destinations).
struct effects {
    bool                 known;
    bool                 writes;
    storage              write;
    std::vector<storage> reads;
};

effects effects_of(const struct ggml_tensor * t) {
    effects e{};
    // Extension nodes are pure by contract; user CUSTOM callbacks may touch anything.
    e.known = !(t->op == GGML_OP_CUSTOM && !ggml_ext_is_ext_node(t)) && !ggml_op_is_map_custom(t->op);
    if (!e.known) return e;
    e.writes = !ggml_op_is_empty(t->op);
    if (e.writes) e.write = storage_of(t);
    for (int s = 0; s < GGML_MAX_SRC; ++s) {
        const struct ggml_tensor * src = t->src[s];
        // ggml_cast lists its own result as a source: that is not a read of prior contents
        if (src != nullptr && src != t) e.reads.push_back(storage_of(src));
    }
    // a view aliases its base: treat its own range as read so writes to it are seen
    if (!e.writes) e.reads.push_back(storage_of(t));
    return e;
}

} // namespace

extern "C" bool ggml_ext_graph_delay(struct ggml_cgraph * graph, int first, int count, int after) {
    if (graph == nullptr) {
        ggml_ext_set_error("ggml_ext_graph_delay: graph is NULL");
        return false;
    }
    if (first < 0 || count < 1 || after < first + count || after >= graph->n_nodes) {
        ggml_ext_set_error("ggml_ext_graph_delay: invalid range first=%d count=%d after=%d (graph has %d nodes)", first,
                           count, after, graph->n_nodes);
        return false;
    }
    struct ggml_tensor ** nodes = graph->nodes;
    const int             mid   = first + count; // crossed nodes: [mid, after]

    std::vector<const struct ggml_tensor *> moved(nodes + first, nodes + mid);
    std::sort(moved.begin(), moved.end());
    auto is_moved = [&](const struct ggml_tensor * t) {
        return t != nullptr && std::binary_search(moved.begin(), moved.end(), t);
    };

    std::vector<effects> moved_fx;
    moved_fx.reserve(count);
    for (int i = first; i < mid; ++i) {
        moved_fx.push_back(effects_of(nodes[i]));
        if (!moved_fx.back().known) {
            ggml_ext_set_error("ggml_ext_graph_delay: moved node %s has unknown side effects", nodes[i]->name);
            return false;
        }
    }

    for (int i = mid; i <= after; ++i) {
        const struct ggml_tensor * c = nodes[i];

        // Dependency: direct use, use through a view of a moved node, or writing into one.
        if (is_moved(c->view_src)) {
            ggml_ext_set_error("ggml_ext_graph_delay: %s uses the storage of moved node %s", c->name, c->view_src->name);
            return false;
        }
        for (int s = 0; s < GGML_MAX_SRC; ++s) {
            const struct ggml_tensor * src = c->src[s];
            if (src == nullptr) continue;
            if (is_moved(src) || is_moved(src->view_src)) {
                ggml_ext_set_error("ggml_ext_graph_delay: %s depends on moved node %s", c->name,
                                   is_moved(src) ? src->name : src->view_src->name);
                return false;
            }
        }

        const effects fx = effects_of(c);
        if (!fx.known) {
            ggml_ext_set_error("ggml_ext_graph_delay: crossed node %s has unknown side effects", c->name);
            return false;
        }

        // Aliasing, both ways: after the move the crossed write happens before the moved nodes
        // read or write, and the moved writes happen after the crossed node read.
        for (size_t k = 0; k < moved_fx.size(); ++k) {
            const effects & mf = moved_fx[k];
            const char *    mn = nodes[first + (int) k]->name;
            if (fx.writes) {
                bool hit = mf.writes && overlaps(fx.write, mf.write);
                for (size_t r = 0; r < mf.reads.size() && !hit; ++r) hit = overlaps(fx.write, mf.reads[r]);
                if (hit) {
                    ggml_ext_set_error("ggml_ext_graph_delay: crossed node %s writes storage that moved node %s reads or writes",
                                       c->name, mn);
                    return false;
                }
            }
            if (mf.writes) {
                bool hit = false;
                for (size_t r = 0; r < fx.reads.size() && !hit; ++r) hit = overlaps(mf.write, fx.reads[r]);
                if (hit) {
                    ggml_ext_set_error("ggml_ext_graph_delay: moved node %s writes storage that crossed node %s reads",
                                       mn, c->name);
                    return false;
                }
            }
        }
    }

    // Only the order changes: sources, flags, metadata and recorded use counts stay as they are.
    std::rotate(nodes + first, nodes + mid, nodes + after + 1);
    return true;
}
