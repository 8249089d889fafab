// ggml-ext-fusion.cpp — the central legality check for a fused step. Rules only say how many
// consecutive nodes they would replace; whether eliminating the intermediates is safe is decided
// here, from the graph alone, so every rule gets the same (conservative) answer.

#include "ext/ggml-ext-internal.h"

#include <cstdarg>
#include <cstdio>

namespace {

struct reason {
    char * buf;
    size_t size;

    bool operator()(const char * fmt, ...) const __attribute__((format(printf, 2, 3))) {
        if (buf != nullptr && size > 0) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(buf, size, fmt, ap);
            va_end(ap);
        }
        return false;
    }
};

enum node_kind {
    KIND_OWNING, // computes into storage of its own
    KIND_VIEW,   // metadata only (reshape/view/permute/transpose)
    KIND_WRITE,  // computes into another tensor's storage (in-place op, CPY into a destination)
};

node_kind kind_of(const struct ggml_tensor * t) {
    if (ggml_op_is_empty(t->op)) return KIND_VIEW;
    return t->view_src != nullptr ? KIND_WRITE : KIND_OWNING;
}

struct match_range {
    const struct ggml_cgraph * g;
    int                        first;
    int                        end; // one past the last node

    int pos(const struct ggml_tensor * t) const {
        for (int j = first; j < end; ++j) {
            if (g->nodes[j] == t) return j;
        }
        return -1;
    }

    // Source slots of nodes [from, end) that reference t (a node may use t more than once, and
    // ggml_cast references itself: both are counted in the recorded use counts too).
    int uses_from(const struct ggml_tensor * t, int from) const {
        int n = 0;
        for (int j = from; j < end; ++j) {
            for (int s = 0; s < GGML_MAX_SRC; ++s) {
                if (g->nodes[j]->src[s] == t) ++n;
            }
        }
        return n;
    }

    // Consumers outside the match (anywhere in the full graph, including outside a graph view,
    // since views share the original's counts); -1 when the counts cannot explain the match.
    int external_uses(struct ggml_tensor * t, int at) const {
        const int recorded = ggml_graph_use_count(g, t);
        const int internal = uses_from(t, at);
        return recorded < internal ? -1 : recorded - internal;
    }
};

} // namespace

bool ggml_ext_fusion_is_legal(const struct ggml_cgraph * graph, int first, int n, char * why, size_t why_size) {
    const reason reject{why, why_size};
    if (why != nullptr && why_size > 0) why[0] = '\0';

    if (graph == nullptr) return reject("no graph");
    if (n < 2) return reject("a fused step covers at least two nodes (got %d)", n);
    if (first < 0 || first + n > graph->n_nodes) {
        return reject("nodes [%d, %d) lie outside the graph (%d nodes)", first, first + n, graph->n_nodes);
    }
    const match_range m{graph, first, first + n};

    // Only operators whose effects ggml knows: user CUSTOM callbacks may touch anything.
    for (int j = first; j < m.end; ++j) {
        const struct ggml_tensor * t = graph->nodes[j];
        if (!(t->flags & GGML_TENSOR_FLAG_COMPUTE)) {
            return reject("node %d (%s) is not marked for computation", j, t->name);
        }
        if (t->op == GGML_OP_NONE) return reject("node %d (%s) has op NONE", j, t->name);
        if ((t->op == GGML_OP_CUSTOM && !ggml_ext_is_ext_node(t)) || ggml_op_is_map_custom(t->op)) {
            return reject("node %d (%s) is a user CUSTOM callback with unknown side effects", j, t->name);
        }
    }

    // The final output: owns storage, is a terminal CPY into storage outside the match, or
    // writes back over the whole of an earlier owner of the match.
    struct ggml_tensor * last      = graph->nodes[m.end - 1];
    struct ggml_tensor * wb_owner  = nullptr; // owner written back by the final node
    switch (kind_of(last)) {
        case KIND_OWNING: break;
        case KIND_VIEW: return reject("final node %s is a view and owns no storage", last->name);
        case KIND_WRITE: {
            struct ggml_tensor * owner = last->view_src;
            const int            p     = m.pos(owner);
            if (p < 0) {
                if (last->op == GGML_OP_CPY) break; // terminal CPY: keeps its destination and semantics
                return reject("final node %s writes in place into %s outside the match", last->name, owner->name);
            }
            if (kind_of(owner) != KIND_OWNING) {
                return reject("final node %s writes back into %s, which owns no storage", last->name, owner->name);
            }
            bool same = last->type == owner->type && last->view_offs == 0;
            for (int d = 0; d < GGML_MAX_DIMS && same; ++d) {
                same = last->ne[d] == owner->ne[d] && last->nb[d] == owner->nb[d];
            }
            if (!same) {
                return reject("final node %s does not write back over the full shape, type, strides and offset of %s",
                              last->name, owner->name);
            }
            const int ext = m.external_uses(owner, p + 1);
            if (ext != 0) {
                return reject("writeback owner %s has %s outside the match", owner->name,
                              ext < 0 ? "unrecorded consumers" : "consumers");
            }
            wb_owner = owner;
            break;
        }
    }

    // The intermediates, whose computation disappears into the fused step.
    for (int j = first; j < m.end - 1; ++j) {
        struct ggml_tensor * t = graph->nodes[j];
        const int            ext = m.external_uses(t, j);
        if (ext != 0) {
            if (ext < 0) return reject("intermediate %s has inconsistent recorded use counts", t->name);
            return reject("intermediate %s has %d consumer(s) outside the match", t->name, ext);
        }
        // The writeback owner's final contents are the fused output, so a flag propagated to it
        // (ggml_set_output flags the view_src chain) is honoured; any other flag is not.
        if ((t->flags & GGML_TENSOR_FLAG_OUTPUT) && t != wb_owner) {
            return reject("intermediate %s is flagged as a graph output", t->name);
        }
        switch (kind_of(t)) {
            case KIND_OWNING: break;
            case KIND_VIEW:
            case KIND_WRITE: {
                const struct ggml_tensor * owner = t->view_src;
                const int                  p     = owner ? m.pos(owner) : -1;
                if (p < 0 || p >= j || kind_of(owner) != KIND_OWNING) {
                    // the destination view of the terminal CPY, used by nothing else: pure
                    // metadata naming where the output goes, not storage the step reads
                    if (kind_of(t) == KIND_VIEW && last->op == GGML_OP_CPY && last->src[1] == t &&
                        ggml_graph_use_count(graph, t) == 1) {
                        break;
                    }
                    if (kind_of(t) == KIND_VIEW) {
                        return reject("view %s refers to storage not owned inside the match", t->name);
                    }
                    return reject("in-place %s writes storage outside the match", t->name);
                }
                break;
            }
        }
    }
    return true;
}
