// ggml-graph.cpp — computation graphs (topologically ordered node/leaf lists built by a DFS over
// src[]) and the visited-tensor hash set they use.
//
// A graph lives entirely inside its context's pool as one object: the struct, then nodes[size],
// leafs[size], hash keys, optional grads/grad_accs, use counts and the hash bitset.

#include "ggml-impl.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// ---------------------------------------------------------------------------------------------
// Hash set

namespace {

// Primes roughly doubling, so a table is at most about twice the requested size.
const size_t HASH_PRIMES[] = {
    2,         3,         5,         11,        17,         37,         67,         131,       257,
    521,       1031,      2053,      4099,      8209,       16411,      32771,      65537,     131101,
    262147,    524309,    1048583,   2097169,   4194319,    8388617,    16777259,   33554467,  67108879,
    134217757, 268435459, 536870923, 1073741827, 2147483659,
};

} // namespace

size_t ggml_bitset_size(size_t n) {
    return (n + 31) >> 5;
}

size_t ggml_hash_size(size_t min_sz) {
    const size_t * end = HASH_PRIMES + sizeof(HASH_PRIMES) / sizeof(HASH_PRIMES[0]);
    const size_t * p   = std::lower_bound(HASH_PRIMES, end, min_sz);
    return p != end ? *p : (min_sz | 1); // beyond the table: any odd size still works for probing
}

struct ggml_hash_set ggml_hash_set_new(size_t size) {
    struct ggml_hash_set hs;
    hs.size = ggml_hash_size(size);
    hs.keys = (struct ggml_tensor **) malloc(sizeof(struct ggml_tensor *) * hs.size);
    hs.used = (uint32_t *) calloc(ggml_bitset_size(hs.size), sizeof(uint32_t));
    GGML_ASSERT(hs.keys != nullptr && hs.used != nullptr && "ggml_hash_set_new: out of memory");
    return hs;
}

void ggml_hash_set_free(struct ggml_hash_set * hash_set) {
    free(hash_set->used);
    free(hash_set->keys);
    hash_set->used = nullptr;
    hash_set->keys = nullptr;
    hash_set->size = 0;
}

void ggml_hash_set_reset(struct ggml_hash_set * hash_set) {
    memset(hash_set->used, 0, sizeof(uint32_t) * ggml_bitset_size(hash_set->size));
}

// ---------------------------------------------------------------------------------------------
// Graph memory

namespace {

// Upstream's struct footprint is reserved (ours is smaller) so that ggml_graph_overhead() reports
// the same byte counts as upstream: 82,608 for the default 2048-node graph.
constexpr size_t GRAPH_STRUCT_BYTES = 104;
static_assert(sizeof(struct ggml_cgraph) <= GRAPH_STRUCT_BYTES, "graph struct grew: update GRAPH_STRUCT_BYTES");

// The header the context puts before every pool object, derived from the public tensor overhead.
size_t object_header_bytes() {
    return ggml_tensor_overhead() - sizeof(struct ggml_tensor);
}

size_t graph_nbytes(size_t size, bool grads) {
    const size_t hash_size = ggml_hash_size(size * 2);
    size_t       nbytes    = GRAPH_STRUCT_BYTES;
    nbytes += size * sizeof(struct ggml_tensor *) * 2;      // nodes, leafs
    nbytes += hash_size * sizeof(struct ggml_tensor *);     // hash keys
    if (grads) {
        nbytes += hash_size * sizeof(struct ggml_tensor *) * 2; // grads, grad_accs
    }
    nbytes += hash_size * sizeof(int32_t);                  // use counts
    nbytes += ggml_bitset_size(hash_size) * sizeof(uint32_t); // hash bitset
    return nbytes;
}

} // namespace

extern "C" size_t ggml_graph_overhead_custom(size_t size, bool grads) {
    return object_header_bytes() + GGML_PAD(graph_nbytes(size, grads), GGML_MEM_ALIGN);
}

extern "C" size_t ggml_graph_overhead(void) {
    return ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE, false);
}

extern "C" struct ggml_cgraph * ggml_new_graph_custom(struct ggml_context * ctx, size_t size, bool grads) {
    GGML_ASSERT(size > 0 && size <= (size_t) INT32_MAX && "graph size out of range");
    const size_t hash_size = ggml_hash_size(size * 2);
    char *       mem       = (char *) ggml_new_buffer(ctx, graph_nbytes(size, grads));

    // pointer arrays first (8-byte aligned), then the 4-byte arrays
    struct ggml_cgraph *  cgraph = (struct ggml_cgraph *) mem;
    char *                p      = mem + GRAPH_STRUCT_BYTES;
    struct ggml_tensor ** nodes  = (struct ggml_tensor **) p;
    p += size * sizeof(struct ggml_tensor *);
    struct ggml_tensor ** leafs = (struct ggml_tensor **) p;
    p += size * sizeof(struct ggml_tensor *);
    struct ggml_tensor ** keys = (struct ggml_tensor **) p;
    p += hash_size * sizeof(struct ggml_tensor *);
    struct ggml_tensor ** grads_ptr     = nullptr;
    struct ggml_tensor ** grad_accs_ptr = nullptr;
    if (grads) {
        grads_ptr = (struct ggml_tensor **) p;
        p += hash_size * sizeof(struct ggml_tensor *);
        grad_accs_ptr = (struct ggml_tensor **) p;
        p += hash_size * sizeof(struct ggml_tensor *);
        memset(grads_ptr, 0, hash_size * sizeof(struct ggml_tensor *) * 2);
    }
    int32_t * use_counts = (int32_t *) p;
    p += hash_size * sizeof(int32_t);
    uint32_t * used = (uint32_t *) p;

    memset(cgraph, 0, sizeof(*cgraph));
    cgraph->size                   = (int) size;
    cgraph->n_nodes                = 0;
    cgraph->n_leafs                = 0;
    cgraph->nodes                  = nodes;
    cgraph->grads                  = grads_ptr;
    cgraph->grad_accs              = grad_accs_ptr;
    cgraph->leafs                  = leafs;
    cgraph->use_counts             = use_counts;
    cgraph->visited_hash_set.size  = hash_size;
    cgraph->visited_hash_set.used  = used;
    cgraph->visited_hash_set.keys  = keys;
    cgraph->order                  = GGML_CGRAPH_EVAL_ORDER_LEFT_TO_RIGHT;
    cgraph->uid                    = 0;

    ggml_hash_set_reset(&cgraph->visited_hash_set);
    return cgraph;
}

extern "C" struct ggml_cgraph * ggml_new_graph(struct ggml_context * ctx) {
    return ggml_new_graph_custom(ctx, GGML_DEFAULT_GRAPH_SIZE, false);
}

struct ggml_cgraph ggml_graph_view(struct ggml_cgraph * cgraph, int i0, int i1) {
    GGML_ASSERT(0 <= i0 && i0 <= i1 && i1 <= cgraph->n_nodes && "ggml_graph_view: range out of bounds");
    struct ggml_cgraph view;
    memset(&view, 0, sizeof(view));
    view.size             = 0;
    view.n_nodes          = i1 - i0;
    view.n_leafs          = 0;
    view.nodes            = cgraph->nodes + i0;
    view.grads            = nullptr;
    view.grad_accs        = nullptr;
    view.leafs            = nullptr;
    view.use_counts       = cgraph->use_counts;
    view.visited_hash_set = cgraph->visited_hash_set;
    view.order            = cgraph->order;
    view.uid              = 0;
    return view;
}

// ---------------------------------------------------------------------------------------------
// Building

namespace {

// Appends a tensor whose sources are all in the graph already.
void graph_append(struct ggml_cgraph * cgraph, struct ggml_tensor * t) {
    if (t->op == GGML_OP_NONE && !(t->flags & GGML_TENSOR_FLAG_PARAM)) {
        if (cgraph->n_leafs >= cgraph->size) {
            GGML_ABORT("graph is full: more than %d leafs (create it with ggml_new_graph_custom and a larger size)",
                       cgraph->size);
        }
        if (t->name[0] == '\0') ggml_format_name(t, "leaf_%d", cgraph->n_leafs);
        cgraph->leafs[cgraph->n_leafs++] = t;
    } else {
        if (cgraph->n_nodes >= cgraph->size) {
            GGML_ABORT("graph is full: more than %d nodes (create it with ggml_new_graph_custom and a larger size)",
                       cgraph->size);
        }
        if (t->name[0] == '\0') ggml_format_name(t, "node_%d", cgraph->n_nodes);
        cgraph->nodes[cgraph->n_nodes++] = t;
    }
}

// Marks t visited; false if it was already.
bool graph_visit(struct ggml_cgraph * cgraph, struct ggml_tensor * t) {
    const size_t slot = ggml_hash_insert(&cgraph->visited_hash_set, t);
    if (slot == GGML_HASHSET_ALREADY_EXISTS) return false;
    cgraph->use_counts[slot] = 0; // the slot may hold a stale count from before a clear
    return true;
}

// Post-order DFS with an explicit stack: chains of thousands of ops must not exhaust the C stack.
void graph_expand(struct ggml_cgraph * cgraph, struct ggml_tensor * root) {
    if (root->op != GGML_OP_NONE) root->flags |= GGML_TENSOR_FLAG_COMPUTE;
    if (!graph_visit(cgraph, root)) return;

    struct frame {
        struct ggml_tensor * t;
        int                  next; // number of src slots already handled
    };
    std::vector<frame> stack;
    stack.push_back({root, 0});

    while (!stack.empty()) {
        frame & top = stack.back();
        if (top.next == GGML_MAX_SRC) {
            struct ggml_tensor * t = top.t;
            stack.pop_back();
            graph_append(cgraph, t);
            continue;
        }
        const int k   = top.next++;
        const int idx = cgraph->order == GGML_CGRAPH_EVAL_ORDER_LEFT_TO_RIGHT ? k : GGML_MAX_SRC - 1 - k;
        struct ggml_tensor * src = top.t->src[idx];
        if (src == nullptr) continue;

        if (src->op != GGML_OP_NONE) src->flags |= GGML_TENSOR_FLAG_COMPUTE;
        const bool fresh = graph_visit(cgraph, src);
        cgraph->use_counts[ggml_hash_find(&cgraph->visited_hash_set, src)]++;
        if (fresh) stack.push_back({src, 0}); // invalidates `top`
    }
}

} // namespace

extern "C" void ggml_build_forward_expand(struct ggml_cgraph * cgraph, struct ggml_tensor * tensor) {
    const int n0 = cgraph->n_nodes;
    graph_expand(cgraph, tensor);
    if (cgraph->n_nodes > n0) {
        GGML_ASSERT(cgraph->nodes[cgraph->n_nodes - 1] == tensor);
    }
}

// ---------------------------------------------------------------------------------------------
// Accessors

extern "C" int ggml_graph_size(struct ggml_cgraph * cgraph) {
    return cgraph->size;
}

extern "C" int ggml_graph_n_nodes(struct ggml_cgraph * cgraph) {
    return cgraph->n_nodes;
}

extern "C" struct ggml_tensor * ggml_graph_node(struct ggml_cgraph * cgraph, int i) {
    if (i < 0) {
        GGML_ASSERT(cgraph->n_nodes + i >= 0 && "ggml_graph_node: index out of range");
        return cgraph->nodes[cgraph->n_nodes + i];
    }
    GGML_ASSERT(i < cgraph->n_nodes && "ggml_graph_node: index out of range");
    return cgraph->nodes[i];
}

extern "C" struct ggml_tensor ** ggml_graph_nodes(struct ggml_cgraph * cgraph) {
    return cgraph->nodes;
}

extern "C" void ggml_graph_add_node(struct ggml_cgraph * cgraph, struct ggml_tensor * tensor) {
    if (cgraph->n_nodes >= cgraph->size) {
        GGML_ABORT("graph is full: more than %d nodes", cgraph->size);
    }
    cgraph->nodes[cgraph->n_nodes++] = tensor;
}

extern "C" void ggml_graph_clear(struct ggml_cgraph * cgraph) {
    cgraph->n_leafs = 0;
    cgraph->n_nodes = 0;
    ggml_hash_set_reset(&cgraph->visited_hash_set);
}

extern "C" struct ggml_tensor * ggml_graph_get_tensor(const struct ggml_cgraph * cgraph, const char * name) {
    for (int i = 0; i < cgraph->n_leafs; i++) {
        if (strcmp(cgraph->leafs[i]->name, name) == 0) return cgraph->leafs[i];
    }
    for (int i = 0; i < cgraph->n_nodes; i++) {
        if (strcmp(cgraph->nodes[i]->name, name) == 0) return cgraph->nodes[i];
    }
    return nullptr;
}

// Printed straight to stderr: an explicit request to print should not depend on the log level
// filter of the default logger (which shows only warnings and errors).
extern "C" void ggml_graph_print(const struct ggml_cgraph * cgraph) {
    fprintf(stderr, "=== GRAPH ===\n");
    fprintf(stderr, "n_nodes = %d\n", cgraph->n_nodes);
    for (int i = 0; i < cgraph->n_nodes; i++) {
        const struct ggml_tensor * t = cgraph->nodes[i];
        fprintf(stderr, " - %3d: [ %5lld, %5lld, %5lld, %5lld] %16s %s\n", i, (long long) t->ne[0],
                (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3], ggml_op_desc(t), t->name);
    }
    fprintf(stderr, "n_leafs = %d\n", cgraph->n_leafs);
    for (int i = 0; i < cgraph->n_leafs; i++) {
        const struct ggml_tensor * t = cgraph->leafs[i];
        fprintf(stderr, " - %3d: [ %5lld, %5lld, %5lld, %5lld] %8s %s\n", i, (long long) t->ne[0],
                (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3], ggml_type_name(t->type), t->name);
    }
    fprintf(stderr, "========================================\n");
}
