// ggml-alloc.cpp — the linear tensor allocator (tallocr) and the graph allocator (gallocr).
//
// gallocr works in two phases. Planning (reserve) walks the graph once, simulating the lifetime
// of every tensor it has to place: per-tensor records (consumer count, live views, address) live
// in a hash map keyed by tensor pointer, and addresses come from a best-fit free-block allocator
// per buffer type. The resulting addresses are recorded per node/leaf index. Allocation
// (alloc_graph) then only replays the recorded addresses into real backend buffers, so a graph
// of identical shape can be allocated repeatedly without re-planning.

#include "ggml-alloc.h"
#include "alloc/ggml-alloc-impl.h"
#include "backend/ggml-backend-impl.h"
#include "ggml-impl.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

// =============================================================================================
// tallocr: bump allocation inside an existing buffer

struct ggml_tallocr ggml_tallocr_new(ggml_backend_buffer_t buffer) {
    void * base  = ggml_backend_buffer_get_base(buffer);
    size_t align = ggml_backend_buffer_get_alignment(buffer);
    GGML_ASSERT(align && !(align & (align - 1)) && "buffer alignment must be a power of 2");

    // the first tensor must start on an aligned address even if the base is not
    size_t misalign = (uintptr_t) base % align;
    size_t offset   = misalign ? align - misalign : 0;

    struct ggml_tallocr talloc = {
        /* .buffer    = */ buffer,
        /* .base      = */ base,
        /* .alignment = */ align,
        /* .offset    = */ offset,
    };
    return talloc;
}

enum ggml_status ggml_tallocr_alloc(struct ggml_tallocr * talloc, struct ggml_tensor * tensor) {
    size_t size = ggml_backend_buffer_get_alloc_size(talloc->buffer, tensor);
    size        = GGML_PAD(size, talloc->alignment);

    const size_t buf_size = ggml_backend_buffer_get_size(talloc->buffer);
    if (talloc->offset + size > buf_size) {
        // upstream aborts here: a caller that sized the buffer itself made an error
        GGML_LOG_ERROR("%s: not enough space in the buffer to allocate %s (needed %zu, available %zu)\n", __func__,
                       tensor->name, size, buf_size - talloc->offset);
        GGML_ABORT("not enough space in the buffer");
    }

    void * addr = (char *) talloc->base + talloc->offset;
    talloc->offset += size;

    GGML_ASSERT(((uintptr_t) addr % talloc->alignment) == 0);
    return ggml_backend_tensor_alloc(talloc->buffer, tensor, addr);
}

// =============================================================================================
// Free-block allocator used by the planner (works on offsets only, never touches memory)

namespace {

constexpr int    GALLOC_MAX_CHUNKS = 16;
constexpr size_t ADDR_NONE         = SIZE_MAX; // "not placed by this allocator"

struct buffer_address {
    int    chunk;
    size_t offset;
};

struct free_block {
    size_t offset;
    size_t size;
};

struct alloc_chunk {
    std::vector<free_block> free_blocks; // sorted by offset; the last one is the open tail of the chunk
    size_t                  high_water = 0;
};

class dyn_allocator {
public:
    dyn_allocator(size_t alignment, size_t max_chunk_size)
        : alignment_(alignment), max_chunk_size_(std::min(max_chunk_size, SIZE_MAX / 2)) {}

    void reset() { chunks_.clear(); }

    size_t aligned_size(size_t size) const {
        // empty tensors still get a distinct, non-NULL address
        return std::max(GGML_PAD(size, alignment_), alignment_);
    }

    // false when the 16 chunks are exhausted (only possible with a small buffer max size)
    bool alloc(size_t size, const struct ggml_tensor * tensor, buffer_address * out) {
        size = aligned_size(size);

        // 1. best fit among the interior free blocks of every chunk
        int    best_chunk = -1;
        size_t best_block = 0;
        size_t best_size  = SIZE_MAX;
        for (size_t c = 0; c < chunks_.size(); c++) {
            const auto & blocks = chunks_[c].free_blocks;
            for (size_t i = 0; i + 1 < blocks.size(); i++) {
                if (blocks[i].size >= size && blocks[i].size <= best_size) {
                    best_chunk = (int) c;
                    best_block = i;
                    best_size  = blocks[i].size;
                }
            }
        }

        // 2. otherwise a chunk's tail, preferring the one that grows least (or wastes least)
        if (best_chunk < 0) {
            int64_t best_reuse = INT64_MIN;
            for (size_t c = 0; c < chunks_.size(); c++) {
                const auto & ch = chunks_[c];
                if (ch.free_blocks.empty()) {
                    continue;
                }
                const free_block & tail = ch.free_blocks.back();
                if (tail.size < size) {
                    continue;
                }
                // < 0: bytes the chunk must grow by; >= 0: bytes of already-reached space left unused
                const int64_t reuse = (int64_t) ch.high_water - (int64_t) tail.offset - (int64_t) size;
                const bool better_growth = best_reuse < 0 && reuse > best_reuse;
                const bool better_fit    = reuse >= 0 && reuse < best_reuse;
                if (better_growth || better_fit) {
                    best_chunk = (int) c;
                    best_block = ch.free_blocks.size() - 1;
                    best_reuse = reuse;
                }
            }
        }

        // 3. otherwise a new chunk
        if (best_chunk < 0) {
            if ((int) chunks_.size() >= GALLOC_MAX_CHUNKS) {
                GGML_LOG_ERROR("%s: not enough space to place tensor %s (%zu bytes): all %d chunks are full\n",
                               __func__, tensor ? tensor->name : "?", size, GALLOC_MAX_CHUNKS);
                return false;
            }
            alloc_chunk ch;
            ch.free_blocks.push_back({ 0, std::max(max_chunk_size_, size) });
            chunks_.push_back(std::move(ch));
            best_chunk = (int) chunks_.size() - 1;
            best_block = 0;
        }

        alloc_chunk & ch    = chunks_[best_chunk];
        free_block &  block = ch.free_blocks[best_block];
        out->chunk          = best_chunk;
        out->offset         = block.offset;
        block.offset += size;
        block.size -= size;
        if (block.size == 0) {
            ch.free_blocks.erase(ch.free_blocks.begin() + best_block);
        }
        ch.high_water = std::max(ch.high_water, out->offset + size);
        return true;
    }

    void free(buffer_address addr, size_t size) {
        size = aligned_size(size);
        GGML_ASSERT(addr.chunk >= 0 && addr.chunk < (int) chunks_.size());
        auto & blocks = chunks_[addr.chunk].free_blocks;

        // first block after the freed range
        size_t next = 0;
        while (next < blocks.size() && blocks[next].offset < addr.offset) {
            next++;
        }
        const bool merge_prev = next > 0 && blocks[next - 1].offset + blocks[next - 1].size == addr.offset;
        const bool merge_next = next < blocks.size() && addr.offset + size == blocks[next].offset;

        if (merge_prev && merge_next) {
            blocks[next - 1].size += size + blocks[next].size;
            blocks.erase(blocks.begin() + next);
        } else if (merge_prev) {
            blocks[next - 1].size += size;
        } else if (merge_next) {
            blocks[next].offset = addr.offset;
            blocks[next].size += size;
        } else {
            blocks.insert(blocks.begin() + next, free_block{ addr.offset, size });
        }
    }

    size_t n_chunks() const { return chunks_.size(); }

    size_t chunk_size(size_t c) const { return chunks_[c].high_water; }

    size_t total_size() const {
        size_t total = 0;
        for (const auto & ch : chunks_) {
            total += ch.high_water;
        }
        return total;
    }

private:
    size_t                   alignment_;
    size_t                   max_chunk_size_;
    std::vector<alloc_chunk> chunks_;
};

// One logical compute buffer: one backend buffer per planner chunk.
struct chunked_buffer {
    std::vector<ggml_backend_buffer_t> chunks;

    ~chunked_buffer() {
        for (ggml_backend_buffer_t b : chunks) {
            ggml_backend_buffer_free(b);
        }
    }

    size_t size() const {
        size_t total = 0;
        for (ggml_backend_buffer_t b : chunks) {
            total += ggml_backend_buffer_get_size(b);
        }
        return total;
    }

    void reset() {
        for (ggml_backend_buffer_t b : chunks) {
            ggml_backend_buffer_reset(b);
        }
    }
};

// Planner record of one tensor (valid during a planning walk only).
struct tensor_record {
    int            n_children;
    int            n_views;
    int            buffer_id;
    buffer_address addr;
    bool           allocated; // placed by this planner and not yet freed / handed over
};

// Persistent result of planning for one tensor slot of the graph.
struct tensor_placement {
    int            buffer_id; // -1: not placed by us (external or view)
    buffer_address addr;
    size_t         size_max;
};

struct node_placement {
    tensor_placement dst;
    tensor_placement src[GGML_MAX_SRC];
};


// Owned elsewhere (weights, user-allocated inputs): never placed or freed by the planner.
bool is_external(const struct ggml_tensor * t) {
    return t->data != nullptr || t->buffer != nullptr;
}

} // namespace

// =============================================================================================
// gallocr

struct ggml_gallocr {
    std::vector<ggml_backend_buffer_type_t>      bufts;     // per buffer id
    std::vector<int>                             unique_of; // buffer id -> first id with the same buft
    std::vector<std::unique_ptr<dyn_allocator>>  allocs;    // per id; only set at unique ids
    std::vector<std::unique_ptr<chunked_buffer>> buffers;   // per id; only set at unique ids

    struct ggml_hash_set       hash_set  = { 0, nullptr, nullptr };
    std::vector<tensor_record> records; // indexed by hash slot

    std::vector<node_placement>   node_placements;
    std::vector<tensor_placement> leaf_placements;
    int                           n_nodes  = 0;
    int                           n_leafs  = 0;
    bool                          reserved = false;

    bool plan_failed = false;

    // Extra consumer -> tensor edges (ggml_gallocr_set_extra_uses). The plan replayed by
    // alloc_graph is only valid for the same edges, which are identified by graph position
    // (tensor pointers change whenever the caller rebuilds an identical graph).
    std::vector<std::pair<struct ggml_tensor *, struct ggml_tensor *>> extra_uses; // (consumer, tensor)
    std::vector<int64_t>                                               extra_sig;  // of the reserved plan

    ~ggml_gallocr() {
        if (hash_set.keys != nullptr || hash_set.used != nullptr) {
            ggml_hash_set_free(&hash_set);
        }
    }

    dyn_allocator & allocator(int buffer_id) { return *allocs[unique_of[buffer_id]]; }

    tensor_record & record(struct ggml_tensor * t) {
        size_t slot = ggml_hash_find_or_insert(&hash_set, t);
        return records[slot];
    }

    size_t alloc_size(int buffer_id, const struct ggml_tensor * t) const {
        return ggml_backend_buft_get_alloc_size(bufts[buffer_id], t);
    }

    bool is_allocated(struct ggml_tensor * t) { return is_external(t) || record(t).allocated; }

    void ensure_hash_capacity(const struct ggml_cgraph * graph);
    void plan_tensor(struct ggml_tensor * t, int buffer_id);
    void free_tensor(struct ggml_tensor * t);
    void free_extra_space(struct ggml_tensor * node, struct ggml_tensor * parent);
    void plan_graph(struct ggml_cgraph * graph, const int * node_buffer_ids, const int * leaf_buffer_ids);
    void release_parent(struct ggml_tensor * parent);
    std::vector<int64_t> extra_signature(const struct ggml_cgraph * graph) const;
    tensor_placement placement_of(struct ggml_tensor * t);
    bool needs_replan(struct ggml_cgraph * graph);
    bool placement_valid(struct ggml_tensor * t, const tensor_placement & p) const;
    bool init_tensor(struct ggml_tensor * t, const tensor_placement & p);
};

ggml_gallocr_t ggml_gallocr_new_n(ggml_backend_buffer_type_t * bufts, int n_bufs) {
    GGML_ASSERT(bufts != nullptr && n_bufs > 0);
    auto * galloc = new ggml_gallocr();
    galloc->bufts.assign(bufts, bufts + n_bufs);
    galloc->unique_of.resize(n_bufs);
    galloc->allocs.resize(n_bufs);
    galloc->buffers.resize(n_bufs);
    for (int i = 0; i < n_bufs; i++) {
        GGML_ASSERT(bufts[i] != nullptr);
        galloc->unique_of[i] = i;
        for (int j = 0; j < i; j++) {
            if (bufts[j] == bufts[i]) {
                galloc->unique_of[i] = j;
                break;
            }
        }
        if (galloc->unique_of[i] == i) {
            galloc->allocs[i] = std::make_unique<dyn_allocator>(ggml_backend_buft_get_alignment(bufts[i]),
                                                                ggml_backend_buft_get_max_size(bufts[i]));
        }
    }
    return galloc;
}

ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft) {
    return ggml_gallocr_new_n(&buft, 1);
}

void ggml_gallocr_free(ggml_gallocr_t galloc) {
    delete galloc;
}

bool ggml_op_can_inplace(enum ggml_op op) {
    switch (op) {
        case GGML_OP_SCALE:
        case GGML_OP_ADD:
        case GGML_OP_SUB:
        case GGML_OP_MUL:
        case GGML_OP_DIV:
        case GGML_OP_SQR:
        case GGML_OP_SQRT:
        case GGML_OP_UNARY:
        case GGML_OP_ROPE:
        case GGML_OP_RMS_NORM:
        case GGML_OP_SOFT_MAX:
        case GGML_OP_LOG:           // client ops (issue 13): upstream's list; the kernels are alias-safe
        case GGML_OP_DIAG_MASK_INF:
            return true;
        default:
            return false;
    }
}

// Sized for every tensor the walk can touch (nodes, leafs, their srcs and view bases), so the
// open-addressing table can never fill up.
void ggml_gallocr::ensure_hash_capacity(const struct ggml_cgraph * graph) {
    size_t bound = (size_t) graph->n_nodes + (size_t) graph->n_leafs;
    for (int i = 0; i < graph->n_nodes; i++) {
        const struct ggml_tensor * node = graph->nodes[i];
        bound += node->view_src ? 1 : 0;
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            bound += node->src[j] ? 1 : 0;
        }
    }
    for (int i = 0; i < graph->n_leafs; i++) {
        bound += graph->leafs[i]->view_src ? 1 : 0;
    }
    bound += 2 * extra_uses.size();
    bound += bound / 4 + 1;

    if (hash_set.size < bound) {
        if (hash_set.keys != nullptr || hash_set.used != nullptr) {
            ggml_hash_set_free(&hash_set);
        }
        hash_set = ggml_hash_set_new(bound);
    }
    ggml_hash_set_reset(&hash_set);
    records.assign(hash_set.size, tensor_record{ 0, 0, 0, { 0, 0 }, false });
}

void ggml_gallocr::plan_tensor(struct ggml_tensor * node, int buffer_id) {
    GGML_ASSERT(buffer_id >= 0 && buffer_id < (int) bufts.size() && "buffer id out of range");
    if (is_allocated(node) || ggml_is_view(node)) {
        return;
    }
    // records live in a fixed-size array indexed by hash slot, so this reference stays valid
    // while other tensors are looked up below
    tensor_record & rec = record(node);
    rec.allocated       = true;

    if (ggml_op_can_inplace(node->op)) {
        for (int i = 0; i < GGML_MAX_SRC; i++) {
            struct ggml_tensor * parent = node->src[i];
            if (parent == nullptr) {
                continue;
            }
            // only memory this planner placed may be taken over; views are never placed by
            // the planner (as upstream), so a view parent is never reused either
            if (is_external(parent) || ggml_is_view(parent) || !record(parent).allocated) {
                continue;
            }
            // a graph output must survive the compute
            if ((parent->flags & GGML_TENSOR_FLAG_OUTPUT) ||
                (parent->view_src != nullptr && (parent->view_src->flags & GGML_TENSOR_FLAG_OUTPUT))) {
                continue;
            }
            if (!ggml_are_same_layout(node, parent)) {
                continue;
            }
            tensor_record & prec = record(parent);
            // this node must be the last consumer and no view may still read the parent
            if (prec.n_children != 1 || prec.n_views != 0) {
                continue;
            }
            rec.buffer_id  = prec.buffer_id;
            rec.addr       = prec.addr;
            prec.allocated = false; // ownership moves to the node; the parent is not freed
            free_extra_space(node, parent);
            return;
        }
    }

    rec.buffer_id = buffer_id;
    if (!allocator(buffer_id).alloc(alloc_size(buffer_id, node), node, &rec.addr)) {
        plan_failed   = true;
        rec.allocated = false;
        rec.addr      = { 0, ADDR_NONE };
    }
}

// After an in-place takeover, release the part of the parent's block the node does not need
// (only differs from zero when the buffer type pads sizes per tensor).
void ggml_gallocr::free_extra_space(struct ggml_tensor * node, struct ggml_tensor * parent) {
    tensor_record & prec   = record(parent);
    dyn_allocator & alloc  = allocator(prec.buffer_id);
    const size_t    p_size = alloc.aligned_size(alloc_size(prec.buffer_id, parent));
    const size_t    n_size = alloc.aligned_size(alloc_size(prec.buffer_id, node));
    if (p_size > n_size) {
        alloc.free({ prec.addr.chunk, prec.addr.offset + n_size }, p_size - n_size);
    }
}

void ggml_gallocr::free_tensor(struct ggml_tensor * t) {
    // outputs must stay readable after compute
    if (t->flags & GGML_TENSOR_FLAG_OUTPUT) {
        return;
    }
    tensor_record & rec = record(t);
    if (!rec.allocated || rec.addr.offset == ADDR_NONE) {
        return;
    }
    allocator(rec.buffer_id).free(rec.addr, alloc_size(rec.buffer_id, t));
    rec.allocated = false;
}

static int buffer_id_at(const int * ids, int i) {
    return ids ? ids[i] : 0;
}

// Called once per consumer edge after the consumer is placed: frees the parent when this was its
// last use (a view's last use releases one view of its base instead).
void ggml_gallocr::release_parent(struct ggml_tensor * parent) {
    tensor_record & prec = record(parent);
    prec.n_children -= 1;
    if (prec.n_children != 0 || prec.n_views != 0) {
        return;
    }
    if (ggml_is_view(parent)) {
        struct ggml_tensor * base = parent->view_src;
        tensor_record &      brec = record(base);
        brec.n_views -= 1;
        if (brec.n_views == 0 && brec.n_children == 0 && brec.allocated) {
            free_tensor(base);
        }
    } else if (prec.allocated) {
        free_tensor(parent);
    }
}

void ggml_gallocr::plan_graph(struct ggml_cgraph * graph, const int * node_buffer_ids, const int * leaf_buffer_ids) {
    // extra edges grouped by consumer; empty in the common case
    std::unordered_map<const struct ggml_tensor *, std::vector<struct ggml_tensor *>> extra_of;
    for (const auto & e : extra_uses) {
        extra_of[e.first].push_back(e.second);
    }
    auto extras = [&](const struct ggml_tensor * node) -> const std::vector<struct ggml_tensor *> * {
        if (extra_of.empty()) {
            return nullptr;
        }
        auto it = extra_of.find(node);
        return it == extra_of.end() ? nullptr : &it->second;
    };

    // 1. leafs first: they are live from the start of the graph
    for (int i = 0; i < graph->n_leafs; i++) {
        plan_tensor(graph->leafs[i], buffer_id_at(leaf_buffer_ids, i));
    }

    // 2. count consumers and views; place inputs before any node so they never overlap
    //    memory that is live at the start
    for (int i = 0; i < graph->n_nodes; i++) {
        struct ggml_tensor * node = graph->nodes[i];
        const int buffer_id = buffer_id_at(node_buffer_ids, i);

        // an op NONE node with a view_src is a pure dependency marker, not a consumer of the base
        if (ggml_is_view(node) && node->op != GGML_OP_NONE) {
            record(node->view_src).n_views += 1;
        }
        if (node->flags & GGML_TENSOR_FLAG_INPUT) {
            plan_tensor(node, buffer_id);
        }
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            struct ggml_tensor * src = node->src[j];
            if (src == nullptr) {
                continue;
            }
            record(src).n_children += 1;
            if (src->flags & GGML_TENSOR_FLAG_INPUT) {
                plan_tensor(src, buffer_id);
            }
        }
        // an extra use is a remaining consumer like any other: it also blocks in-place reuse of
        // the tensor by earlier nodes
        if (const auto * ex = extras(node)) {
            for (struct ggml_tensor * t : *ex) {
                record(t).n_children += 1;
            }
        }
    }

    // 3. walk in execution order: place, then release whatever this node was the last user of
    for (int i = 0; i < graph->n_nodes; i++) {
        struct ggml_tensor * node = graph->nodes[i];
        const int buffer_id = buffer_id_at(node_buffer_ids, i);
        const auto * ex = extras(node);

        for (int j = 0; j < GGML_MAX_SRC; j++) {
            if (node->src[j] != nullptr) {
                plan_tensor(node->src[j], buffer_id);
            }
        }
        if (ex) {
            for (struct ggml_tensor * t : *ex) {
                plan_tensor(t, buffer_id);
            }
        }
        plan_tensor(node, buffer_id);

        for (int j = 0; j < GGML_MAX_SRC; j++) {
            if (node->src[j] != nullptr) {
                release_parent(node->src[j]);
            }
        }
        if (ex) {
            for (struct ggml_tensor * t : *ex) {
                release_parent(t);
            }
        }
    }
}

// Positions of the extra edges in graph: (consumer node index, tensor node index or -(leaf
// index + 2), or -1 when the tensor is neither). Empty when there are no extra edges.
std::vector<int64_t> ggml_gallocr::extra_signature(const struct ggml_cgraph * graph) const {
    std::vector<int64_t> sig;
    if (extra_uses.empty()) {
        return sig;
    }
    std::unordered_map<const struct ggml_tensor *, int64_t> pos;
    pos.reserve((size_t) graph->n_nodes + (size_t) graph->n_leafs);
    for (int i = 0; i < graph->n_leafs; i++) {
        pos.emplace(graph->leafs[i], -(int64_t) i - 2);
    }
    for (int i = 0; i < graph->n_nodes; i++) {
        pos[graph->nodes[i]] = i;
    }
    sig.reserve(2 * extra_uses.size());
    for (const auto & e : extra_uses) {
        auto c = pos.find(e.first);
        auto t = pos.find(e.second);
        sig.push_back(c == pos.end() ? -1 : c->second);
        sig.push_back(t == pos.end() ? -1 : t->second);
    }
    return sig;
}

tensor_placement ggml_gallocr::placement_of(struct ggml_tensor * t) {
    if (t == nullptr || t->view_src != nullptr || is_external(t)) {
        return tensor_placement{ -1, { 0, ADDR_NONE }, 0 };
    }
    tensor_record & rec = record(t);
    if (rec.addr.offset == ADDR_NONE) {
        return tensor_placement{ -1, { 0, ADDR_NONE }, 0 };
    }
    return tensor_placement{ rec.buffer_id, rec.addr, alloc_size(rec.buffer_id, t) };
}

static bool gallocr_reserve_impl(ggml_gallocr_t galloc, struct ggml_cgraph * graph, const int * node_buffer_ids,
                                 const int * leaf_buffer_ids, bool allocate, size_t * sizes) {
    GGML_ASSERT(galloc != nullptr && graph != nullptr);

    galloc->ensure_hash_capacity(graph);
    for (size_t i = 0; i < galloc->allocs.size(); i++) {
        if (galloc->allocs[i]) {
            galloc->allocs[i]->reset();
        }
    }
    galloc->plan_failed = false;
    galloc->plan_graph(graph, node_buffer_ids, leaf_buffer_ids);

    const int n_bufs = (int) galloc->bufts.size();
    if (sizes != nullptr) {
        for (int i = 0; i < n_bufs; i++) {
            sizes[i] = galloc->unique_of[i] == i ? galloc->allocs[i]->total_size() : 0;
        }
    }
    if (galloc->plan_failed) {
        GGML_LOG_ERROR("%s: failed to plan the graph's memory\n", __func__);
        if (allocate) {
            galloc->reserved = false; // the recorded plan no longer describes what the caller wants
        }
        return false;
    }
    if (!allocate) {
        // size queries must not disturb the placements the current buffers were sized for
        return true;
    }

    // record the plan per graph slot so alloc_graph can replay it
    galloc->n_nodes = graph->n_nodes;
    galloc->n_leafs = graph->n_leafs;
    galloc->node_placements.resize(graph->n_nodes);
    galloc->leaf_placements.resize(graph->n_leafs);
    for (int i = 0; i < graph->n_nodes; i++) {
        struct ggml_tensor * node = graph->nodes[i];
        node_placement &     np   = galloc->node_placements[i];
        np.dst                    = galloc->placement_of(node);
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            np.src[j] = galloc->placement_of(node->src[j]);
        }
    }
    for (int i = 0; i < graph->n_leafs; i++) {
        galloc->leaf_placements[i] = galloc->placement_of(graph->leafs[i]);
    }
    galloc->extra_sig = galloc->extra_signature(graph);
    galloc->reserved  = false;

    // grow the backend buffers where the plan needs more than they have
    for (int i = 0; i < n_bufs; i++) {
        if (galloc->unique_of[i] != i) {
            continue;
        }
        dyn_allocator &                  alloc = *galloc->allocs[i];
        std::unique_ptr<chunked_buffer> & cur  = galloc->buffers[i];

        bool must_grow = !cur || cur->chunks.size() < alloc.n_chunks();
        for (size_t c = 0; !must_grow && c < alloc.n_chunks(); c++) {
            must_grow = ggml_backend_buffer_get_size(cur->chunks[c]) < alloc.chunk_size(c);
        }
        if (!must_grow) {
            continue;
        }

        // never shrink a chunk: an earlier, larger graph of the same shape may come back
        std::vector<size_t> chunk_sizes(alloc.n_chunks());
        for (size_t c = 0; c < alloc.n_chunks(); c++) {
            chunk_sizes[c] = alloc.chunk_size(c);
            if (cur && c < cur->chunks.size()) {
                chunk_sizes[c] = std::max(chunk_sizes[c], ggml_backend_buffer_get_size(cur->chunks[c]));
            }
        }
        cur.reset();

        auto fresh = std::make_unique<chunked_buffer>();
        for (size_t c = 0; c < chunk_sizes.size(); c++) {
            ggml_backend_buffer_t b = ggml_backend_buft_alloc_buffer(galloc->bufts[i], chunk_sizes[c]);
            if (b == nullptr) {
                GGML_LOG_ERROR("%s: failed to allocate %s buffer of size %zu\n", __func__,
                               ggml_backend_buft_name(galloc->bufts[i]), chunk_sizes[c]);
                return false;
            }
            ggml_backend_buffer_set_usage(b, GGML_BACKEND_BUFFER_USAGE_COMPUTE);
            fresh->chunks.push_back(b);
        }
        cur = std::move(fresh);
    }
    galloc->reserved = true;
    return true;
}

bool ggml_gallocr_reserve_n(ggml_gallocr_t galloc, struct ggml_cgraph * graph, const int * node_buffer_ids,
                            const int * leaf_buffer_ids) {
    return gallocr_reserve_impl(galloc, graph, node_buffer_ids, leaf_buffer_ids, true, nullptr);
}

bool ggml_gallocr_reserve(ggml_gallocr_t galloc, struct ggml_cgraph * graph) {
    return ggml_gallocr_reserve_n(galloc, graph, nullptr, nullptr);
}

void ggml_gallocr_reserve_n_size(ggml_gallocr_t galloc, struct ggml_cgraph * graph, const int * node_buffer_ids,
                                 const int * leaf_buffer_ids, size_t * sizes) {
    GGML_ASSERT(sizes != nullptr);
    gallocr_reserve_impl(galloc, graph, node_buffer_ids, leaf_buffer_ids, false, sizes);
}

// Whether the recorded placement still covers the tensor as it is now.
bool ggml_gallocr::placement_valid(struct ggml_tensor * t, const tensor_placement & p) const {
    if (t->view_src != nullptr || is_external(t)) {
        return true;
    }
    if (p.buffer_id < 0) {
        // it was external or a view when planned, and now needs memory
        return false;
    }
    return p.size_max >= alloc_size(p.buffer_id, t);
}

bool ggml_gallocr::needs_replan(struct ggml_cgraph * graph) {
    if (!reserved || n_nodes != graph->n_nodes || n_leafs != graph->n_leafs) {
        return true;
    }
    // the recorded lifetimes assumed these extra edges
    if ((!extra_uses.empty() || !extra_sig.empty()) && extra_signature(graph) != extra_sig) {
        return true;
    }
    for (int i = 0; i < graph->n_nodes; i++) {
        struct ggml_tensor *   node = graph->nodes[i];
        const node_placement & np   = node_placements[i];
        if (!placement_valid(node, np.dst)) {
            return true;
        }
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            if (node->src[j] != nullptr && !placement_valid(node->src[j], np.src[j])) {
                return true;
            }
        }
    }
    for (int i = 0; i < graph->n_leafs; i++) {
        if (!placement_valid(graph->leafs[i], leaf_placements[i])) {
            return true;
        }
    }
    return false;
}

bool ggml_gallocr::init_tensor(struct ggml_tensor * t, const tensor_placement & p) {
    if (t->view_src != nullptr) {
        if (t->buffer == nullptr && t->view_src->buffer != nullptr && t->view_src->data != nullptr) {
            return ggml_backend_view_init(t) == GGML_STATUS_SUCCESS;
        }
        // a view of memory not managed by ggml-backend is left alone
        return true;
    }
    if (is_external(t)) {
        return true;
    }
    if (p.buffer_id < 0 || p.addr.offset == ADDR_NONE) {
        GGML_LOG_ERROR("%s: tensor %s has no planned placement\n", __func__, t->name);
        return false;
    }
    chunked_buffer * buf  = buffers[unique_of[p.buffer_id]].get();
    const size_t     size = alloc_size(p.buffer_id, t);
    if (buf == nullptr || p.addr.chunk < 0 || (size_t) p.addr.chunk >= buf->chunks.size() ||
        p.addr.offset + size > ggml_backend_buffer_get_size(buf->chunks[p.addr.chunk])) {
        GGML_LOG_ERROR("%s: planned placement of tensor %s lies outside its buffer\n", __func__, t->name);
        return false;
    }
    ggml_backend_buffer_t b    = buf->chunks[p.addr.chunk];
    void *                addr = (char *) ggml_backend_buffer_get_base(b) + p.addr.offset;
    return ggml_backend_tensor_alloc(b, t, addr) == GGML_STATUS_SUCCESS;
}

bool ggml_gallocr_alloc_graph(ggml_gallocr_t galloc, struct ggml_cgraph * graph) {
    GGML_ASSERT(galloc != nullptr && graph != nullptr);
    if (galloc->needs_replan(graph)) {
        if (galloc->bufts.size() == 1) {
            GGML_LOG_DEBUG("%s: graph changed, reserving again\n", __func__);
            if (!ggml_gallocr_reserve(galloc, graph)) {
                return false;
            }
        } else {
            GGML_LOG_DEBUG("%s: cannot re-reserve a multi-buffer graph automatically, call reserve_n first\n",
                           __func__);
            return false;
        }
    }

    for (size_t i = 0; i < galloc->buffers.size(); i++) {
        if (galloc->buffers[i]) {
            galloc->buffers[i]->reset();
        }
    }

    // leafs before nodes, and each node's srcs before the node, so view bases exist before views
    for (int i = 0; i < graph->n_leafs; i++) {
        if (!galloc->init_tensor(graph->leafs[i], galloc->leaf_placements[i])) {
            return false;
        }
    }
    for (int i = 0; i < graph->n_nodes; i++) {
        struct ggml_tensor *   node = graph->nodes[i];
        const node_placement & np   = galloc->node_placements[i];
        for (int j = 0; j < GGML_MAX_SRC; j++) {
            if (node->src[j] != nullptr && !galloc->init_tensor(node->src[j], np.src[j])) {
                return false;
            }
        }
        if (!galloc->init_tensor(node, np.dst)) {
            return false;
        }
    }
    return true;
}

size_t ggml_gallocr_get_buffer_size(ggml_gallocr_t galloc, int buffer_id) {
    GGML_ASSERT(galloc != nullptr && buffer_id >= 0 && buffer_id < (int) galloc->bufts.size());
    if (galloc->unique_of[buffer_id] != buffer_id || !galloc->buffers[buffer_id]) {
        return 0;
    }
    return galloc->buffers[buffer_id]->size();
}

void ggml_gallocr_set_extra_uses(ggml_gallocr_t galloc, struct ggml_tensor * const * consumers,
                                 struct ggml_tensor * const * tensors, int n_pairs) {
    GGML_ASSERT(galloc != nullptr && n_pairs >= 0);
    GGML_ASSERT(n_pairs == 0 || (consumers != nullptr && tensors != nullptr));
    galloc->extra_uses.clear();
    galloc->extra_uses.reserve((size_t) n_pairs);
    for (int k = 0; k < n_pairs; k++) {
        GGML_ASSERT(consumers[k] != nullptr && tensors[k] != nullptr);
        galloc->extra_uses.emplace_back(consumers[k], tensors[k]);
    }
}
