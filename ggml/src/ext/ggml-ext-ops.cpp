// ggml-ext-ops.cpp — registered operator definitions and the nodes that carry them: the
// operator registry, node creation with output inference, attribute access, the marker that
// identifies an extension node, and the thread-local error of the extension API.

#include "ext/ggml-ext-internal.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

thread_local char t_last_error[GGML_EXT_MAX_ERROR] = "";

struct op_entry {
    std::string  name;
    size_t       attr_size;
    decltype(ggml_ext_op_desc::infer) infer;
    void *       user_data;
};

// Entries are never removed (callbacks outlive every graph by contract), so an id indexes the
// vector for the life of the process and op_entry pointers stay valid.
struct op_registry {
    std::mutex                             mutex;
    std::vector<std::unique_ptr<op_entry>> entries; // id = index + 1
};

op_registry & ops() {
    static op_registry r;
    return r;
}

const op_entry * find_entry(ggml_ext_op_t id) {
    op_registry &               r = ops();
    std::lock_guard<std::mutex> lock(r.mutex);
    if (id <= 0 || (size_t) id > r.entries.size()) return nullptr;
    return r.entries[(size_t) id - 1].get();
}

// Lives in the fun slot of an extension node's op_params. A CPU device never supports extension
// nodes, so reaching this means someone bypassed the capability query: fail loudly rather than
// compute garbage.
void ext_marker(struct ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) ith;
    (void) nth;
    const char * name = ggml_ext_op_name((ggml_ext_op_t) (intptr_t) userdata);
    GGML_ABORT("extension node %s (%s) executed as a CPU callback", name ? name : "<unknown op>", dst ? dst->name : "");
}

} // namespace

void ggml_ext_set_error(const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_last_error, sizeof(t_last_error), fmt, ap);
    va_end(ap);
}

bool ggml_ext_is_ext_node(const struct ggml_tensor * node) {
    if (node == nullptr || node->op != GGML_OP_CUSTOM) return false;
    struct ggml_custom_op_params p;
    memcpy(&p, node->op_params, sizeof(p));
    return p.fun == &ext_marker;
}

extern "C" {

const char * ggml_ext_last_error(void) {
    return t_last_error;
}

ggml_ext_op_t ggml_ext_register_op(const struct ggml_ext_op_desc * desc) {
    if (desc == nullptr || desc->name == nullptr || desc->name[0] == '\0') {
        ggml_ext_set_error("ggml_ext_register_op: a name is required");
        return 0;
    }
    if (desc->infer == nullptr) {
        ggml_ext_set_error("ggml_ext_register_op: %s: infer is required", desc->name);
        return 0;
    }
    if (desc->attr_size > GGML_EXT_MAX_ATTR_SIZE) {
        ggml_ext_set_error("ggml_ext_register_op: %s: attr_size %zu exceeds GGML_EXT_MAX_ATTR_SIZE (%d)", desc->name,
                           desc->attr_size, (int) GGML_EXT_MAX_ATTR_SIZE);
        return 0;
    }
    op_registry &               r = ops();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (const auto & e : r.entries) {
        if (e->name == desc->name) {
            ggml_ext_set_error("ggml_ext_register_op: operator %s is already registered", desc->name);
            return 0;
        }
    }
    auto e       = std::make_unique<op_entry>();
    e->name      = desc->name;
    e->attr_size = desc->attr_size;
    e->infer     = desc->infer;
    e->user_data = desc->user_data;
    r.entries.push_back(std::move(e));
    return (ggml_ext_op_t) r.entries.size();
}

ggml_ext_op_t ggml_ext_find_op(const char * name) {
    if (name == nullptr) return 0;
    op_registry &               r = ops();
    std::lock_guard<std::mutex> lock(r.mutex);
    for (size_t i = 0; i < r.entries.size(); ++i) {
        if (r.entries[i]->name == name) return (ggml_ext_op_t) (i + 1);
    }
    return 0;
}

const char * ggml_ext_op_name(ggml_ext_op_t op) {
    const op_entry * e = find_entry(op);
    return e ? e->name.c_str() : nullptr;
}

struct ggml_tensor * ggml_ext_op_create(struct ggml_context * ctx, ggml_ext_op_t op, struct ggml_tensor ** src,
                                        int n_src, const void * attrs) {
    GGML_ASSERT(ctx != nullptr);
    const op_entry * e = find_entry(op);
    if (e == nullptr) {
        ggml_ext_set_error("ggml_ext_op_create: unknown operator id %d", (int) op);
        return nullptr;
    }
    if (n_src < 0 || n_src >= GGML_MAX_SRC || (n_src > 0 && src == nullptr)) {
        ggml_ext_set_error("%s: n_src must be in [0, %d), got %d", e->name.c_str(), GGML_MAX_SRC, n_src);
        return nullptr;
    }
    for (int i = 0; i < n_src; ++i) {
        if (src[i] == nullptr) {
            ggml_ext_set_error("%s: input %d is NULL", e->name.c_str(), i);
            return nullptr;
        }
    }
    if (e->attr_size > 0 && attrs == nullptr) {
        ggml_ext_set_error("%s: attributes (%zu bytes) are required", e->name.c_str(), e->attr_size);
        return nullptr;
    }

    enum ggml_type type                = GGML_TYPE_COUNT; // unset: caught below
    int64_t        ne[GGML_MAX_DIMS]   = {1, 1, 1, 1};
    char           msg[GGML_EXT_MAX_ERROR] = "";
    if (!e->infer((const struct ggml_tensor * const *) src, n_src, e->attr_size > 0 ? attrs : nullptr, &type, ne, msg,
                  sizeof(msg), e->user_data)) {
        msg[sizeof(msg) - 1] = '\0';
        ggml_ext_set_error("%s: %s", e->name.c_str(), msg[0] ? msg : "inputs rejected");
        return nullptr;
    }
    if ((int) type < 0 || type >= GGML_TYPE_COUNT || ggml_type_size(type) == 0 || ggml_blck_size(type) <= 0) {
        ggml_ext_set_error("%s: infer produced an invalid output type %d", e->name.c_str(), (int) type);
        return nullptr;
    }
    for (int d = 0; d < GGML_MAX_DIMS; ++d) {
        if (ne[d] < 0) {
            ggml_ext_set_error("%s: infer produced a negative extent ne[%d] = %lld", e->name.c_str(), d,
                               (long long) ne[d]);
            return nullptr;
        }
    }
    if (ne[0] % ggml_blck_size(type) != 0) {
        ggml_ext_set_error("%s: ne[0] = %lld is not a multiple of the block size of %s", e->name.c_str(),
                           (long long) ne[0], ggml_type_name(type));
        return nullptr;
    }

    struct ggml_tensor * t = ggml_new_tensor(ctx, type, GGML_MAX_DIMS, ne);
    t->op                  = GGML_OP_CUSTOM;
    for (int i = 0; i < n_src; ++i) {
        t->src[i] = src[i];
    }
    memset(t->op_params, 0, sizeof(t->op_params));
    struct ggml_custom_op_params p;
    memset(&p, 0, sizeof(p));
    p.fun      = &ext_marker;
    p.n_tasks  = 0;
    p.userdata = (void *) (intptr_t) op;
    static_assert(sizeof(p) <= GGML_EXT_ATTR_OFFSET, "marker must fit before the attributes");
    memcpy(t->op_params, &p, sizeof(p));
    if (e->attr_size > 0) {
        memcpy((char *) t->op_params + GGML_EXT_ATTR_OFFSET, attrs, e->attr_size);
    }
    return t;
}

ggml_ext_op_t ggml_ext_get_op(const struct ggml_tensor * node) {
    if (!ggml_ext_is_ext_node(node)) return 0;
    struct ggml_custom_op_params p;
    memcpy(&p, node->op_params, sizeof(p));
    return (ggml_ext_op_t) (intptr_t) p.userdata;
}

void ggml_ext_get_attrs(const struct ggml_tensor * node, void * attrs, size_t size) {
    const ggml_ext_op_t op = ggml_ext_get_op(node);
    GGML_ASSERT(op != 0 && "ggml_ext_get_attrs: not an extension node");
    const op_entry * e = find_entry(op);
    GGML_ASSERT(e != nullptr);
    GGML_ASSERT(size <= e->attr_size && "ggml_ext_get_attrs: size exceeds the operator's attr_size");
    if (size > 0) {
        GGML_ASSERT(attrs != nullptr);
        memcpy(attrs, (const char *) node->op_params + GGML_EXT_ATTR_OFFSET, size);
    }
}

} // extern "C"
