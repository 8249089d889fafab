// ggml-graph-access.cpp — the public graph access of ggml-graph.h: leaves, recorded use counts,
// mapped copies of a node range and execution of a node range.
//
// Use counts live in the graph's visited hash set (one slot per tensor the builder reached), so
// every function here goes through that set rather than scanning node lists: a copied or cut
// graph must report the consumer counts of the graph it came from, which a rescan of its own
// nodes cannot know (consumers outside the copied range are not in it).
//
// Mutating functions validate completely before their first write, so a false return always
// means "nothing changed"; callers build graph cuts speculatively and rely on that.

#include "backend/ggml-backend-impl.h"
#include "ext/ggml-ext-impl.h"
#include "ggml-graph.h"
#include "ggml-impl.h"

#include <new>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace {

// Tensors the builder files as leaves; a PARAM tensor with op NONE is a node there, so it is
// not accepted as a leaf here either.
bool is_leaf_tensor(const ggml_tensor * t) {
    return t->op == GGML_OP_NONE && !(t->flags & GGML_TENSOR_FLAG_PARAM);
}

bool graph_contains(const ggml_cgraph * g, const ggml_tensor * t) {
    return ggml_hash_contains(&g->visited_hash_set, const_cast<ggml_tensor *>(t));
}

size_t hash_set_occupied(const ggml_hash_set & hs) {
    size_t n = 0;
    const size_t words = ggml_bitset_size(hs.size);
    for (size_t i = 0; i < words; ++i) n += (size_t) __builtin_popcount(hs.used[i]);
    return n;
}

// The tensors a mapped copy must know about: the range's nodes, then what they reference
// (sources and view sources) in first-reference order, each once.
void collect_referenced(const ggml_cgraph * src, int i0, int i1, std::vector<ggml_tensor *> & out,
                        std::unordered_set<const ggml_tensor *> & seen) {
    auto add = [&](ggml_tensor * t) {
        if (t && seen.insert(t).second) out.push_back(t);
    };
    for (int i = i0; i < i1; ++i) add(src->nodes[i]);
    for (int i = i0; i < i1; ++i) {
        ggml_tensor * node = src->nodes[i];
        for (int j = 0; j < GGML_MAX_SRC; ++j) add(node->src[j]);
        add(node->view_src);
    }
}

void copy_compute_flag(ggml_tensor * copy, const ggml_tensor * original) {
    copy->flags = (copy->flags & ~(int32_t) GGML_TENSOR_FLAG_COMPUTE) | (original->flags & GGML_TENSOR_FLAG_COMPUTE);
}

} // namespace

extern "C" {

int ggml_graph_n_leafs(const struct ggml_cgraph * graph) {
    GGML_ASSERT(graph != nullptr);
    return graph->n_leafs;
}

struct ggml_tensor * ggml_graph_leaf(const struct ggml_cgraph * graph, int i) {
    GGML_ASSERT(graph != nullptr);
    if (i < 0) i += graph->n_leafs;
    GGML_ASSERT(i >= 0 && i < graph->n_leafs && "ggml_graph_leaf: index out of range");
    return graph->leafs[i];
}

bool ggml_graph_add_leaf(struct ggml_cgraph * graph, struct ggml_tensor * leaf) {
    if (!graph || !leaf) return false;
    if (graph->size <= 0 || graph->leafs == nullptr) return false; // a graph view has no leaf storage
    if (!is_leaf_tensor(leaf)) return false;
    if (graph->n_leafs >= graph->size) return false;

    const size_t slot = ggml_hash_find(&graph->visited_hash_set, leaf);
    if (slot == GGML_HASHSET_FULL) return false;
    if (ggml_bitset_get(graph->visited_hash_set.used, slot)) return false; // already a leaf or node

    ggml_bitset_set(graph->visited_hash_set.used, slot);
    graph->visited_hash_set.keys[slot] = leaf;
    graph->use_counts[slot]            = 0; // the slot may hold a stale count from before a clear
    // same naming as the builder, so ggml_graph_get_tensor finds added leaves the same way
    if (leaf->name[0] == '\0') ggml_format_name(leaf, "leaf_%d", graph->n_leafs);
    graph->leafs[graph->n_leafs++] = leaf;
    return true;
}

int ggml_graph_get_use_count(const struct ggml_cgraph * graph, const struct ggml_tensor * tensor) {
    if (!graph || !tensor || graph->visited_hash_set.size == 0) return 0;
    return (int) ggml_graph_use_count(graph, const_cast<ggml_tensor *>(tensor));
}

bool ggml_graph_copy_mapped(struct ggml_cgraph * dst, const struct ggml_cgraph * src, int i0, int i1,
                            ggml_graph_map_fn map, void * user_data) {
    if (!dst || !src || !map || dst == src) return false;
    if (i0 < 0 || i0 > i1 || i1 > src->n_nodes) return false;
    if (dst->size <= 0 || dst->leafs == nullptr) return false; // cannot append to a graph view

    try {
        // ---- validation: nothing is written to dst (or to any tensor) in this part
        std::vector<ggml_tensor *>              originals;
        std::unordered_set<const ggml_tensor *> referenced;
        collect_referenced(src, i0, i1, originals, referenced);

        std::unordered_map<const ggml_tensor *, ggml_tensor *> copy_of;  // original -> copy
        std::unordered_map<const ggml_tensor *, ggml_tensor *> origin_of; // copy -> original
        copy_of.reserve(originals.size());
        origin_of.reserve(originals.size());
        for (ggml_tensor * t : originals) {
            ggml_tensor * c = map(t, user_data);
            if (!c) {
                GGML_LOG_ERROR("%s: no copy for tensor '%s'\n", __func__, t->name);
                return false;
            }
            if (!origin_of.emplace(c, t).second) {
                GGML_LOG_ERROR("%s: tensors '%s' and '%s' map to the same copy\n", __func__, origin_of[c]->name,
                               t->name);
                return false;
            }
            copy_of.emplace(t, c);
        }

        const int n_new_nodes = i1 - i0;
        if (dst->n_nodes + n_new_nodes > dst->size) return false;

        // a node copy already in dst would run twice
        for (int i = i0; i < i1; ++i) {
            if (graph_contains(dst, copy_of[src->nodes[i]])) return false;
        }

        // leaves in src leaf order; a graph view has no leaf list, so fall back to the order of
        // first reference for the leaf tensors it uses
        std::vector<ggml_tensor *> new_leafs;
        std::unordered_set<const ggml_tensor *> leaf_added;
        auto consider_leaf = [&](ggml_tensor * original) {
            if (!is_leaf_tensor(original) || !referenced.count(original)) return;
            if (!leaf_added.insert(original).second) return;
            ggml_tensor * c = copy_of[original];
            if (!graph_contains(dst, c)) new_leafs.push_back(c);
        };
        if (src->leafs) {
            for (int i = 0; i < src->n_leafs; ++i) consider_leaf(src->leafs[i]);
        } else {
            for (ggml_tensor * t : originals) consider_leaf(t);
        }
        if (dst->n_leafs + (int) new_leafs.size() > dst->size) return false;

        size_t n_new_entries = 0;
        for (ggml_tensor * t : originals) {
            if (!graph_contains(dst, copy_of[t])) n_new_entries++;
        }
        // keep one slot free: probing for an absent key needs an empty slot to stop at
        if (hash_set_occupied(dst->visited_hash_set) + n_new_entries >= dst->visited_hash_set.size) return false;

        // ---- commit (nothing below can fail)
        for (ggml_tensor * t : originals) {
            ggml_tensor * c    = copy_of[t];
            const size_t slot  = ggml_hash_find_or_insert(&dst->visited_hash_set, c);
            dst->use_counts[slot] = ggml_graph_use_count(src, t);
            copy_compute_flag(c, t);
        }
        for (int i = i0; i < i1; ++i) dst->nodes[dst->n_nodes++] = copy_of[src->nodes[i]];
        for (ggml_tensor * c : new_leafs) dst->leafs[dst->n_leafs++] = c;
        return true;
    } catch (const std::bad_alloc &) {
        GGML_LOG_ERROR("%s: out of memory\n", __func__);
        return false;
    } catch (...) {
        return false;
    }
}

bool ggml_graph_copy_use_counts(struct ggml_cgraph * dst, const struct ggml_cgraph * src, int i0, int i1) {
    if (!dst || !src) return false;
    if (i0 < 0 || i0 > i1 || i1 > src->n_nodes) return false;

    try {
        std::vector<ggml_tensor *>              tensors;
        std::unordered_set<const ggml_tensor *> seen;
        auto add = [&](ggml_tensor * t) {
            if (t && seen.insert(t).second) tensors.push_back(t);
        };
        for (int i = i0; i < i1; ++i) {
            ggml_tensor * node = src->nodes[i];
            add(node);
            for (int j = 0; j < GGML_MAX_SRC; ++j) add(node->src[j]);
        }

        std::vector<size_t> slots;
        slots.reserve(tensors.size());
        for (ggml_tensor * t : tensors) {
            const size_t slot = ggml_hash_find(&dst->visited_hash_set, t);
            if (slot == GGML_HASHSET_FULL || !ggml_bitset_get(dst->visited_hash_set.used, slot)) return false;
            slots.push_back(slot);
        }
        if (dst->use_counts == src->use_counts) return true; // a view of the same graph: already equal
        for (size_t k = 0; k < tensors.size(); ++k) dst->use_counts[slots[k]] = ggml_graph_use_count(src, tensors[k]);
        return true;
    } catch (...) {
        return false;
    }
}

enum ggml_status ggml_backend_graph_compute_range(ggml_backend_t backend, struct ggml_cgraph * graph, int i0, int i1) {
    if (!backend || !graph) {
        GGML_LOG_ERROR("%s: NULL backend or graph\n", __func__);
        return GGML_STATUS_FAILED;
    }
    if (i0 < 0 || i0 > i1 || i1 > graph->n_nodes) {
        GGML_LOG_ERROR("%s: range [%d, %d) outside the graph's %d nodes\n", __func__, i0, i1, graph->n_nodes);
        return GGML_STATUS_FAILED;
    }
    if (i0 == i1) return GGML_STATUS_SUCCESS;
    // synchronous like ggml_backend_graph_compute: the caller reads results right after
    const enum ggml_status status = ggml_ext_compute_direct(backend, graph, i0, i1);
    ggml_backend_synchronize(backend);
    return status;
}

} // extern "C"
