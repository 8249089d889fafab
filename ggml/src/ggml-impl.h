#pragma once

// ggml-impl.h — internals shared by the runtime's own translation units (never included from
// src/, tools/ or an application): graph layout, the visited-tensor hash set, op_params access.

#include "ggml.h"

#include <cstdint>
#include <cstring>

// ---------------------------------------------------------------------------------------------
// Logging (printf-style; routed through ggml_log_set's callback)

void ggml_log_internal(enum ggml_log_level level, const char * fmt, ...) __attribute__((format(printf, 2, 3)));
#define GGML_LOG_DEBUG(...) ggml_log_internal(GGML_LOG_LEVEL_DEBUG, __VA_ARGS__)
#define GGML_LOG_INFO(...)  ggml_log_internal(GGML_LOG_LEVEL_INFO, __VA_ARGS__)
#define GGML_LOG_WARN(...)  ggml_log_internal(GGML_LOG_LEVEL_WARN, __VA_ARGS__)
#define GGML_LOG_ERROR(...) ggml_log_internal(GGML_LOG_LEVEL_ERROR, __VA_ARGS__)

// ---------------------------------------------------------------------------------------------
// op_params access (slot-wise int32/float, or a raw struct at byte 0)

static inline void ggml_set_op_params(struct ggml_tensor * t, const void * params, size_t size) {
    GGML_ASSERT(t && size <= GGML_MAX_OP_PARAMS);
    memcpy(t->op_params, params, size);
}
static inline int32_t ggml_get_op_params_i32(const struct ggml_tensor * t, int i) {
    return t->op_params[i];
}
static inline float ggml_get_op_params_f32(const struct ggml_tensor * t, int i) {
    float v;
    memcpy(&v, &t->op_params[i], sizeof(float));
    return v;
}
static inline void ggml_set_op_params_i32(struct ggml_tensor * t, int i, int32_t v) {
    t->op_params[i] = v;
}
static inline void ggml_set_op_params_f32(struct ggml_tensor * t, int i, float v) {
    memcpy(&t->op_params[i], &v, sizeof(float));
}

// User callbacks whose side effects are unknown (ggml_map_custom1..3); GGML_OP_CUSTOM nodes are
// such callbacks unless they are extension nodes.
static inline bool ggml_op_is_map_custom(enum ggml_op op) {
    return op == GGML_OP_MAP_CUSTOM1 || op == GGML_OP_MAP_CUSTOM2 || op == GGML_OP_MAP_CUSTOM3;
}

// Custom-op parameters stored at byte 0 of op_params (upstream layout: fn, n_tasks, userdata).
// MAP_CUSTOM1..3 use the same layout with their own callback type in `fun`.
struct ggml_custom_op_params {
    ggml_custom_op_t fun;
    int              n_tasks;
    void *           userdata;
};

// ---------------------------------------------------------------------------------------------
// Hash set of tensor pointers (open addressing, linear probing). Size is a prime >= 2*capacity.

struct ggml_hash_set {
    size_t                size;
    uint32_t *            used; // bitset, size bits
    struct ggml_tensor ** keys;
};

static const size_t GGML_HASHSET_FULL          = SIZE_MAX;
static const size_t GGML_HASHSET_ALREADY_EXISTS = SIZE_MAX - 1;

size_t               ggml_hash_size(size_t min_sz); // smallest tabulated prime >= min_sz
struct ggml_hash_set ggml_hash_set_new(size_t size); // heap-allocated (free with ggml_hash_set_free)
void                 ggml_hash_set_free(struct ggml_hash_set * hash_set);
void                 ggml_hash_set_reset(struct ggml_hash_set * hash_set);
size_t               ggml_bitset_size(size_t n); // number of uint32 words for n bits

static inline bool ggml_bitset_get(const uint32_t * bitset, size_t i) {
    return (bitset[i >> 5] >> (i & 31)) & 1u;
}
static inline void ggml_bitset_set(uint32_t * bitset, size_t i) { bitset[i >> 5] |= (1u << (i & 31)); }
static inline void ggml_bitset_clear(uint32_t * bitset, size_t i) { bitset[i >> 5] &= ~(1u << (i & 31)); }

static inline size_t ggml_hash(const struct ggml_tensor * p) {
    // tensors are at least 16-byte aligned: drop the always-zero low bits
    return (size_t)(uintptr_t)p >> 4;
}

// slot of key, or the first free slot where it would go; GGML_HASHSET_FULL if absent and full
static inline size_t ggml_hash_find(const struct ggml_hash_set * hs, const struct ggml_tensor * key) {
    size_t h = ggml_hash(key) % hs->size;
    size_t i = h;
    while (ggml_bitset_get(hs->used, i) && hs->keys[i] != key) {
        i = (i + 1) % hs->size;
        if (i == h) return GGML_HASHSET_FULL;
    }
    return i;
}
static inline bool ggml_hash_contains(const struct ggml_hash_set * hs, struct ggml_tensor * key) {
    size_t i = ggml_hash_find(hs, key);
    return i != GGML_HASHSET_FULL && ggml_bitset_get(hs->used, i);
}
// returns the slot, or GGML_HASHSET_ALREADY_EXISTS
static inline size_t ggml_hash_insert(struct ggml_hash_set * hs, struct ggml_tensor * key) {
    size_t i = ggml_hash_find(hs, key);
    GGML_ASSERT(i != GGML_HASHSET_FULL && "hash set full");
    if (ggml_bitset_get(hs->used, i)) return GGML_HASHSET_ALREADY_EXISTS;
    ggml_bitset_set(hs->used, i);
    hs->keys[i] = key;
    return i;
}
// slot of key, inserting it if absent
static inline size_t ggml_hash_find_or_insert(struct ggml_hash_set * hs, struct ggml_tensor * key) {
    size_t i = ggml_hash_find(hs, key);
    GGML_ASSERT(i != GGML_HASHSET_FULL && "hash set full");
    ggml_bitset_set(hs->used, i);
    hs->keys[i] = key;
    return i;
}

// ---------------------------------------------------------------------------------------------
// Graph

enum ggml_cgraph_eval_order {
    GGML_CGRAPH_EVAL_ORDER_LEFT_TO_RIGHT = 0,
    GGML_CGRAPH_EVAL_ORDER_RIGHT_TO_LEFT,
};

struct ggml_cgraph {
    int size;    // capacity of nodes and (separately) of leafs; 0 for a graph view
    int n_nodes;
    int n_leafs;

    struct ggml_tensor ** nodes;     // topological order
    struct ggml_tensor ** grads;     // unused (no training); NULL
    struct ggml_tensor ** grad_accs; // unused; NULL
    struct ggml_tensor ** leafs;

    int32_t * use_counts; // indexed by visited_hash_set slot: how many graph nodes use the tensor as a src

    struct ggml_hash_set visited_hash_set;

    enum ggml_cgraph_eval_order order;

    uint64_t uid; // 0 = unset
};

// A by-value view of nodes [i0, i1): shares the original's node array, hash set and use counts;
// no leafs, size 0, uid 0. Used to compute a slice of a graph.
struct ggml_cgraph ggml_graph_view(struct ggml_cgraph * cgraph, int i0, int i1);

// recorded use count of t in cgraph (0 if t is not in the graph)
static inline int32_t ggml_graph_use_count(const struct ggml_cgraph * g, struct ggml_tensor * t) {
    size_t i = ggml_hash_find(&g->visited_hash_set, t);
    if (i == GGML_HASHSET_FULL || !ggml_bitset_get(g->visited_hash_set.used, i)) return 0;
    return g->use_counts[i];
}

// Nodes that backends do no work for (pure metadata).
static inline bool ggml_op_is_empty(enum ggml_op op) {
    return op == GGML_OP_NONE || op == GGML_OP_RESHAPE || op == GGML_OP_VIEW || op == GGML_OP_PERMUTE ||
           op == GGML_OP_TRANSPOSE;
}

// ---------------------------------------------------------------------------------------------
// Misc shared helpers

// Same type, extents and strides (what a raw byte copy or in-place reuse requires).
static inline bool ggml_are_same_layout(const struct ggml_tensor * a, const struct ggml_tensor * b) {
    return a->type == b->type && ggml_are_same_shape(a, b) && ggml_are_same_stride(a, b);
}

// Padded-1d: rows packed, dims 2/3 packed relative to dim 1 (row stride free).
bool ggml_is_padded_1d(const struct ggml_tensor * t);

// FP8 (GGML_TYPE_F8_E4M3 / GGML_TYPE_F8_E5M2, one byte per element, ggml-types.cpp).
// Widening is exact (a 256-entry table): E4M3 bias 7, no infinities, S.1111.111 is NaN, max 448,
// subnormals m * 2^-9; E5M2 bias 15, IEEE-like (exponent 31: inf / NaN), subnormals m * 2^-16.
// Narrowing rounds to nearest even on the exact value; E4M3 saturates (finite overflow and +-inf
// give +-448, OCP's saturating conversion), E5M2 overflows to +-inf (IEEE); NaN stays NaN (sign
// kept: E4M3 0x7F/0xFF, E5M2 0x7E/0xFE).
extern const float ggml_f8_e4m3_to_f32_table[256];
extern const float ggml_f8_e5m2_to_f32_table[256];
static inline float ggml_f8_e4m3_to_fp32(uint8_t b) { return ggml_f8_e4m3_to_f32_table[b]; }
static inline float ggml_f8_e5m2_to_fp32(uint8_t b) { return ggml_f8_e5m2_to_f32_table[b]; }
uint8_t ggml_fp32_to_f8_e4m3(float v);
uint8_t ggml_fp32_to_f8_e5m2(float v);
void    ggml_f8_e4m3_to_fp32_row(const uint8_t * x, float * y, int64_t n);
void    ggml_f8_e5m2_to_fp32_row(const uint8_t * x, float * y, int64_t n);
void    ggml_fp32_to_f8_e4m3_row(const float * x, uint8_t * y, int64_t n);
void    ggml_fp32_to_f8_e5m2_row(const float * x, uint8_t * y, int64_t n);

// Element access by type through float (F32/F16/BF16/F8/I8/I16/I32). Used by portable kernels.
static inline float ggml_load_f32(enum ggml_type type, const void * p) {
    switch (type) {
        case GGML_TYPE_F8_E4M3: return ggml_f8_e4m3_to_fp32(*(const uint8_t *) p);
        case GGML_TYPE_F8_E5M2: return ggml_f8_e5m2_to_fp32(*(const uint8_t *) p);
        case GGML_TYPE_F32: return *(const float *) p;
        case GGML_TYPE_F16: return ggml_fp16_to_fp32(*(const ggml_fp16_t *) p);
        case GGML_TYPE_BF16: return ggml_bf16_to_fp32(*(const ggml_bf16_t *) p);
        case GGML_TYPE_I8: return (float) *(const int8_t *) p;
        case GGML_TYPE_I16: return (float) *(const int16_t *) p;
        case GGML_TYPE_I32: return (float) *(const int32_t *) p;
        default: GGML_ABORT("ggml_load_f32: unsupported type %d", (int) type);
    }
}
// F32 -> F16/BF16 round to nearest even; -> integer types truncates toward zero (saturating for I8/I16).
void ggml_store_f32(enum ggml_type type, void * p, float v);

// ---------------------------------------------------------------------------------------------
// Added by core (ggml.cpp): the tensor constructor behind ggml_new_tensor and every view op.
// With view_src set, no data is allocated: view_src is resolved to its ultimate base (offsets
// accumulate), data = base data + offset when the base has data, and the contiguous size of the
// new shape plus the offset must fit in ggml_nbytes(base).
struct ggml_tensor * ggml_new_tensor_impl(struct ggml_context * ctx, enum ggml_type type, int n_dims,
                                          const int64_t * ne, struct ggml_tensor * view_src, size_t view_offs);
