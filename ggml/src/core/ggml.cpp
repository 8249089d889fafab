// ggml.cpp — errors and logging, type/op metadata, tensor predicates, contexts and tensor creation.
//
// A context is a bump allocator over one memory pool. The pool holds a singly linked list of
// objects (header + payload) in creation order; tensors, graphs and raw buffers are objects.
// Nothing is ever freed individually: ggml_reset forgets everything, ggml_free drops the pool.

#include "ggml-impl.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

// ---------------------------------------------------------------------------------------------
// Abort

namespace {
ggml_abort_callback_t g_abort_callback = nullptr;
}

extern "C" ggml_abort_callback_t ggml_set_abort_callback(ggml_abort_callback_t callback) {
    ggml_abort_callback_t prev = g_abort_callback;
    g_abort_callback           = callback;
    return prev;
}

extern "C" void ggml_abort(const char * file, int line, const char * fmt, ...) {
    fflush(stdout); // keep earlier program output ahead of the error message

    char    msg[2048];
    int     n = snprintf(msg, sizeof(msg), "%s:%d: ", file, line);
    va_list args;
    va_start(args, fmt);
    if (n >= 0 && (size_t) n < sizeof(msg)) {
        vsnprintf(msg + n, sizeof(msg) - (size_t) n, fmt, args);
    }
    va_end(args);

    if (g_abort_callback) {
        g_abort_callback(msg);
    } else {
        fprintf(stderr, "%s\n", msg);
        fflush(stderr);
    }
    abort();
}

// ---------------------------------------------------------------------------------------------
// Logging

namespace {

ggml_log_level g_last_level = GGML_LOG_LEVEL_NONE; // for CONT lines of the default logger

void log_callback_default(enum ggml_log_level level, const char * text, void * user_data) {
    (void) user_data;
    // CONT continues the previous message, so it is shown exactly when that message was
    const ggml_log_level eff = level == GGML_LOG_LEVEL_CONT ? g_last_level : level;
    if (level != GGML_LOG_LEVEL_CONT) g_last_level = level;
    if (eff == GGML_LOG_LEVEL_WARN || eff == GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
        fflush(stderr);
    }
}

ggml_log_callback g_log_callback  = log_callback_default;
void *            g_log_user_data = nullptr;

} // namespace

extern "C" void ggml_log_set(ggml_log_callback log_callback, void * user_data) {
    g_log_callback  = log_callback ? log_callback : log_callback_default;
    g_log_user_data = user_data;
}

void ggml_log_internal(enum ggml_log_level level, const char * fmt, ...) {
    char    buf[512];
    va_list args;
    va_start(args, fmt);
    va_list args_copy;
    va_copy(args_copy, args);
    const int len = vsnprintf(buf, sizeof(buf), fmt, args);
    if (len >= 0 && (size_t) len < sizeof(buf)) {
        g_log_callback(level, buf, g_log_user_data);
    } else if (len >= 0) {
        char * big = (char *) malloc((size_t) len + 1);
        if (big) {
            vsnprintf(big, (size_t) len + 1, fmt, args_copy);
            g_log_callback(level, big, g_log_user_data);
            free(big);
        }
    }
    va_end(args_copy);
    va_end(args);
}

// ---------------------------------------------------------------------------------------------
// Misc

extern "C" const char * ggml_version(void) {
    return GGML_VERSION_STRING;
}

extern "C" const char * ggml_status_to_string(enum ggml_status status) {
    switch (status) {
        case GGML_STATUS_ALLOC_FAILED: return "GGML status: error (failed to allocate memory)";
        case GGML_STATUS_FAILED: return "GGML status: error (operation failed)";
        case GGML_STATUS_SUCCESS: return "GGML status: success";
        case GGML_STATUS_ABORTED: return "GGML status: warning (operation aborted)";
    }
    return "GGML status: unknown";
}

// ---------------------------------------------------------------------------------------------
// Op names

namespace {

const char * const OP_NAME[GGML_OP_COUNT] = {
    "NONE",     "DUP",       "ADD",       "SUB",        "MUL",       "DIV",
    "SQR",      "SQRT",      "SCALE",     "NORM",       "RMS_NORM",  "MUL_MAT",
    "CPY",      "CONT",      "RESHAPE",   "VIEW",       "PERMUTE",   "TRANSPOSE",
    "GET_ROWS", "SOFT_MAX",  "ROPE",      "CONCAT",     "PAD",       "REPEAT",
    "ARANGE",   "TIMESTEP_EMBEDDING",     "FLASH_ATTN_EXT",          "UNARY",
    "CUSTOM",   "GLU",
    // issue 13 (diffusion clients)
    "IM2COL",
    "IM2COL_3D",
    "CONV_2D",
    "CONV_2D_DW",
    "CONV_3D",
    "CONV_TRANSPOSE_1D",
    "CONV_TRANSPOSE_2D",
    "POOL_1D",
    "POOL_2D",
    "UPSCALE",
    "GROUP_NORM",
    "L2_NORM",
    "CLAMP",
    "LEAKY_RELU",
    "LOG",
    "SIN",
    "COS",
    "SUM",
    "SUM_ROWS",
    "MEAN",
    "ARGMAX",
    "ARGSORT",
    "TOP_K",
    "DIAG_MASK_INF",
    "ACC",
    "SET",
    "ROLL",
    "ADD_ID",
    "MUL_MAT_ID",
    "WIN_PART",
    "WIN_UNPART",
    "GET_REL_POS",
    "ADD_REL_POS",
    "SET_ROWS",
    "MAP_CUSTOM1",
    "MAP_CUSTOM2",
    "MAP_CUSTOM3",
};
static_assert(GGML_OP_COUNT == 67, "update OP_NAME and OP_SYMBOL");

const char * const OP_SYMBOL[GGML_OP_COUNT] = {
    "none",
    "x",
    "x+y",
    "x-y",
    "x*y",
    "x/y",
    "x^2",
    "√x",
    "x*v",
    "norm(x)",
    "rms_norm(x)",
    "X*Y",
    "x-\\>y",
    "cont(x)",
    "reshape(x)",
    "view(x)",
    "permute(x)",
    "transpose(x)",
    "get_rows(x)",
    "soft_max(x)",
    "rope(x)",
    "concat(x, y)",
    "pad(x)",
    "repeat(x)",
    "arange(start, stop, step)",
    "timestep_embedding(timesteps, dim, max_period)",
    "flash_attn_ext(x)",
    "unary(x)",
    "custom(x)",
    "glu(x)",
    "im2col(x)",
    "im2col_3d(x)",
    "conv_2d(x)",
    "conv_2d_dw(x)",
    "conv_3d(x)",
    "conv_transpose_1d(x)",
    "conv_transpose_2d(x)",
    "pool_1d(x)",
    "pool_2d(x)",
    "upscale(x)",
    "group_norm(x)",
    "l2_norm(x)",
    "clamp(x)",
    "leaky_relu(x)",
    "log(x)",
    "sin(x)",
    "cos(x)",
    "Σx",
    "Σx_k",
    "Σx/n",
    "argmax(x)",
    "argsort(x)",
    "top_k(x)",
    "diag_mask_inf(x)",
    "x+=y",
    "x[i]=y",
    "roll(x)",
    "x+y[ids]",
    "X*Y[ids]",
    "win_part(x)",
    "win_unpart(x)",
    "get_rel_pos(x)",
    "add_rel_pos(x)",
    "set_rows(x)",
    "f(x)",
    "f(x,y)",
    "f(x,y,z)",
};

const char * const UNARY_OP_NAME[GGML_UNARY_OP_COUNT] = {
    "ABS",        "SGN",  "NEG",       "STEP",        "TANH", "ELU",   "RELU",     "SIGMOID",
    "GELU",       "GELU_QUICK", "SILU", "HARDSWISH", "HARDSIGMOID", "EXP", "EXPM1", "SOFTPLUS",
    "GELU_ERF",   "XIELU", "FLOOR",    "CEIL",        "ROUND", "TRUNC",
};
static_assert(GGML_UNARY_OP_COUNT == 22, "update UNARY_OP_NAME");

const char * const GLU_OP_NAME[GGML_GLU_OP_COUNT] = {
    "REGLU", "GEGLU", "SWIGLU", "SWIGLU_OAI", "GEGLU_ERF", "GEGLU_QUICK",
};
static_assert(GGML_GLU_OP_COUNT == 6, "update GLU_OP_NAME");

} // namespace

extern "C" const char * ggml_op_name(enum ggml_op op) {
    return (int) op >= 0 && op < GGML_OP_COUNT ? OP_NAME[op] : "UNKNOWN";
}

extern "C" const char * ggml_op_symbol(enum ggml_op op) {
    return (int) op >= 0 && op < GGML_OP_COUNT ? OP_SYMBOL[op] : "?";
}

extern "C" const char * ggml_unary_op_name(enum ggml_unary_op op) {
    return (int) op >= 0 && op < GGML_UNARY_OP_COUNT ? UNARY_OP_NAME[op] : "UNKNOWN";
}

extern "C" const char * ggml_glu_op_name(enum ggml_glu_op op) {
    return (int) op >= 0 && op < GGML_GLU_OP_COUNT ? GLU_OP_NAME[op] : "UNKNOWN";
}

extern "C" const char * ggml_op_desc(const struct ggml_tensor * t) {
    if (t->op == GGML_OP_UNARY) return ggml_unary_op_name(ggml_get_unary_op(t));
    if (t->op == GGML_OP_GLU) return ggml_glu_op_name(ggml_get_glu_op(t));
    return ggml_op_name(t->op);
}

// ---------------------------------------------------------------------------------------------
// Sizes

extern "C" int64_t ggml_blck_size(enum ggml_type type) {
    return ggml_get_type_traits(type)->blck_size;
}

extern "C" size_t ggml_type_size(enum ggml_type type) {
    return ggml_get_type_traits(type)->type_size;
}

extern "C" size_t ggml_row_size(enum ggml_type type, int64_t ne) {
    const int64_t blck = ggml_blck_size(type);
    GGML_ASSERT(blck > 0 && "ggml_row_size: unsupported type");
    GGML_ASSERT(ne % blck == 0 && "ggml_row_size: row length must be a multiple of the block size");
    return ggml_type_size(type) * (size_t)(ne / blck);
}

extern "C" const char * ggml_type_name(enum ggml_type type) {
    const char * name = ggml_get_type_traits(type)->type_name;
    return name ? name : "NONE"; // never NULL so it is always printable
}

extern "C" bool ggml_is_quantized(enum ggml_type type) {
    return ggml_get_type_traits(type)->is_quantized;
}

extern "C" size_t ggml_element_size(const struct ggml_tensor * tensor) {
    return ggml_type_size(tensor->type);
}

extern "C" int64_t ggml_nelements(const struct ggml_tensor * tensor) {
    return tensor->ne[0] * tensor->ne[1] * tensor->ne[2] * tensor->ne[3];
}

extern "C" int64_t ggml_nrows(const struct ggml_tensor * tensor) {
    return tensor->ne[1] * tensor->ne[2] * tensor->ne[3];
}

extern "C" size_t ggml_nbytes(const struct ggml_tensor * tensor) {
    for (int i = 0; i < GGML_MAX_DIMS; i++) {
        if (tensor->ne[i] <= 0) return 0;
    }
    // span from the first byte to one past the last: right for permuted and strided views too
    const int64_t blck = ggml_blck_size(tensor->type);
    size_t        nbytes;
    if (blck == 1) {
        nbytes = ggml_type_size(tensor->type);
        for (int i = 0; i < GGML_MAX_DIMS; i++) nbytes += (size_t)(tensor->ne[i] - 1) * tensor->nb[i];
    } else {
        nbytes = (size_t) tensor->ne[0] * tensor->nb[0] / (size_t) blck;
        for (int i = 1; i < GGML_MAX_DIMS; i++) nbytes += (size_t)(tensor->ne[i] - 1) * tensor->nb[i];
    }
    return nbytes;
}

extern "C" size_t ggml_nbytes_pad(const struct ggml_tensor * tensor) {
    return GGML_PAD(ggml_nbytes(tensor), GGML_MEM_ALIGN);
}

// ---------------------------------------------------------------------------------------------
// Predicates

extern "C" bool ggml_is_transposed(const struct ggml_tensor * t) {
    return t->nb[0] > t->nb[1];
}

extern "C" bool ggml_is_permuted(const struct ggml_tensor * t) {
    return t->nb[0] > t->nb[1] || t->nb[1] > t->nb[2] || t->nb[2] > t->nb[3];
}

extern "C" bool ggml_is_empty(const struct ggml_tensor * t) {
    for (int i = 0; i < GGML_MAX_DIMS; i++) {
        if (t->ne[i] == 0) return true;
    }
    return false;
}

extern "C" bool ggml_is_view(const struct ggml_tensor * t) {
    return t->view_src != nullptr;
}

extern "C" bool ggml_is_scalar(const struct ggml_tensor * t) {
    return t->ne[0] == 1 && t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1;
}

extern "C" bool ggml_is_vector(const struct ggml_tensor * t) {
    return t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1;
}

extern "C" bool ggml_is_matrix(const struct ggml_tensor * t) {
    return t->ne[2] == 1 && t->ne[3] == 1;
}

extern "C" bool ggml_is_3d(const struct ggml_tensor * t) {
    return t->ne[3] == 1;
}

extern "C" int ggml_n_dims(const struct ggml_tensor * t) {
    for (int i = GGML_MAX_DIMS - 1; i >= 1; --i) {
        if (t->ne[i] > 1) return i + 1;
    }
    return 1;
}

namespace {

// Dims 1..n may have any stride (each restarts the expected stride); dims above n must be packed
// relative to the dim below. Dims of extent 1 never constrain anything.
bool is_contiguous_n(const struct ggml_tensor * t, int n) {
    const int64_t blck = ggml_blck_size(t->type);
    size_t        next = ggml_type_size(t->type);
    if (t->ne[0] != blck && t->nb[0] != next) return false;
    next *= (size_t)(t->ne[0] / blck);
    for (int i = 1; i < GGML_MAX_DIMS; i++) {
        if (t->ne[i] == 1) continue;
        if (i > n) {
            if (t->nb[i] != next) return false;
            next *= (size_t) t->ne[i];
        } else {
            next = (size_t) t->ne[i] * t->nb[i];
        }
    }
    return true;
}

} // namespace

extern "C" bool ggml_is_contiguous(const struct ggml_tensor * t) {
    return is_contiguous_n(t, 0);
}

extern "C" bool ggml_is_contiguous_0(const struct ggml_tensor * t) {
    return is_contiguous_n(t, 0);
}

extern "C" bool ggml_is_contiguous_1(const struct ggml_tensor * t) {
    return is_contiguous_n(t, 1);
}

extern "C" bool ggml_is_contiguous_2(const struct ggml_tensor * t) {
    return is_contiguous_n(t, 2);
}

extern "C" bool ggml_is_contiguously_allocated(const struct ggml_tensor * t) {
    return ggml_nbytes(t) ==
           (size_t) ggml_nelements(t) * ggml_type_size(t->type) / (size_t) ggml_blck_size(t->type);
}

extern "C" bool ggml_is_contiguous_channels(const struct ggml_tensor * t) {
    return t->nb[0] > t->nb[2] && t->nb[1] > t->nb[0] && t->nb[2] == ggml_type_size(t->type);
}

extern "C" bool ggml_is_contiguous_rows(const struct ggml_tensor * t) {
    return t->ne[0] == ggml_blck_size(t->type) || t->nb[0] == ggml_type_size(t->type);
}

bool ggml_is_padded_1d(const struct ggml_tensor * t) {
    return t->nb[0] == ggml_type_size(t->type) && t->nb[2] == t->nb[1] * (size_t) t->ne[1] &&
           t->nb[3] == t->nb[2] * (size_t) t->ne[2];
}

extern "C" bool ggml_are_same_shape(const struct ggml_tensor * t0, const struct ggml_tensor * t1) {
    return t0->ne[0] == t1->ne[0] && t0->ne[1] == t1->ne[1] && t0->ne[2] == t1->ne[2] && t0->ne[3] == t1->ne[3];
}

extern "C" bool ggml_are_same_stride(const struct ggml_tensor * t0, const struct ggml_tensor * t1) {
    return t0->nb[0] == t1->nb[0] && t0->nb[1] == t1->nb[1] && t0->nb[2] == t1->nb[2] && t0->nb[3] == t1->nb[3];
}

extern "C" bool ggml_can_repeat(const struct ggml_tensor * t0, const struct ggml_tensor * t1) {
    if (ggml_is_empty(t0)) return ggml_is_empty(t1);
    for (int i = 0; i < GGML_MAX_DIMS; i++) {
        if (t1->ne[i] % t0->ne[i] != 0) return false;
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// Context

namespace {

enum ggml_object_type {
    GGML_OBJECT_TYPE_TENSOR,
    GGML_OBJECT_TYPE_GRAPH,
    GGML_OBJECT_TYPE_WORK_BUFFER,
};

struct ggml_object {
    size_t               offs; // payload offset from the pool start
    size_t               size; // payload bytes (padded to GGML_MEM_ALIGN)
    struct ggml_object * next;
    ggml_object_type     type;
    char                 padding[4];
};

constexpr size_t GGML_OBJECT_SIZE = sizeof(struct ggml_object);
static_assert(GGML_OBJECT_SIZE == 32, "object header is 32 bytes on LP64");
static_assert(GGML_OBJECT_SIZE % GGML_MEM_ALIGN == 0, "headers must keep payloads aligned");
static_assert(sizeof(struct ggml_tensor) % GGML_MEM_ALIGN == 0, "tensor data follows the struct");

} // namespace

struct ggml_context {
    size_t mem_size;
    void * mem_buffer;
    bool   mem_buffer_owned;
    bool   no_alloc;

    int                  n_objects;
    struct ggml_object * objects_begin;
    struct ggml_object * objects_end;
};

extern "C" size_t ggml_tensor_overhead(void) {
    return GGML_OBJECT_SIZE + sizeof(struct ggml_tensor);
}

extern "C" struct ggml_context * ggml_init(struct ggml_init_params params) {
    if (params.mem_size == 0) params.mem_size = GGML_MEM_ALIGN;

    struct ggml_context * ctx = (struct ggml_context *) malloc(sizeof(struct ggml_context));
    GGML_ASSERT(ctx != nullptr && "ggml_init: out of memory");

    if (params.mem_buffer == nullptr) {
        const size_t size = GGML_PAD(params.mem_size, GGML_MEM_ALIGN);
        void *       buf  = aligned_alloc(GGML_MEM_ALIGN, size);
        if (buf == nullptr) {
            GGML_LOG_ERROR("%s: failed to allocate %zu bytes for the context pool\n", __func__, size);
            free(ctx);
            GGML_ABORT("ggml_init: out of memory");
        }
        ctx->mem_size         = size;
        ctx->mem_buffer       = buf;
        ctx->mem_buffer_owned = true;
    } else {
        GGML_ASSERT(((uintptr_t) params.mem_buffer) % GGML_MEM_ALIGN == 0 &&
                    "ggml_init: mem_buffer must be 16-byte aligned");
        ctx->mem_size         = params.mem_size;
        ctx->mem_buffer       = params.mem_buffer;
        ctx->mem_buffer_owned = false;
    }
    ctx->no_alloc      = params.no_alloc;
    ctx->n_objects     = 0;
    ctx->objects_begin = nullptr;
    ctx->objects_end   = nullptr;
    return ctx;
}

extern "C" void ggml_reset(struct ggml_context * ctx) {
    if (ctx == nullptr) return;
    ctx->n_objects     = 0;
    ctx->objects_begin = nullptr;
    ctx->objects_end   = nullptr;
}

extern "C" void ggml_free(struct ggml_context * ctx) {
    if (ctx == nullptr) return;
    if (ctx->mem_buffer_owned) free(ctx->mem_buffer);
    free(ctx);
}

extern "C" size_t ggml_used_mem(const struct ggml_context * ctx) {
    return ctx->objects_end ? ctx->objects_end->offs + ctx->objects_end->size : 0;
}

extern "C" bool ggml_get_no_alloc(struct ggml_context * ctx) {
    return ctx->no_alloc;
}

extern "C" void ggml_set_no_alloc(struct ggml_context * ctx, bool no_alloc) {
    ctx->no_alloc = no_alloc;
}

extern "C" void * ggml_get_mem_buffer(const struct ggml_context * ctx) {
    return ctx->mem_buffer;
}

extern "C" size_t ggml_get_mem_size(const struct ggml_context * ctx) {
    return ctx->mem_size;
}

namespace {

struct ggml_object * new_object(struct ggml_context * ctx, ggml_object_type type, size_t size) {
    struct ggml_object * cur      = ctx->objects_end;
    const size_t         cur_end  = cur ? cur->offs + cur->size : 0;
    const size_t         size_pad = GGML_PAD(size, GGML_MEM_ALIGN);
    const size_t         needed   = cur_end + GGML_OBJECT_SIZE + size_pad;

    if (needed > ctx->mem_size) {
        GGML_LOG_ERROR("ggml_new_object: not enough space in the context's memory pool (needed %zu, available %zu)\n",
                       needed, ctx->mem_size);
        GGML_ABORT("not enough space in the context's memory pool (needed %zu, available %zu)", needed,
                   ctx->mem_size);
    }

    char *               mem = (char *) ctx->mem_buffer;
    struct ggml_object * obj = (struct ggml_object *) (mem + cur_end);
    obj->offs                = cur_end + GGML_OBJECT_SIZE;
    obj->size                = size_pad;
    obj->next                = nullptr;
    obj->type                = type;
    memset(obj->padding, 0, sizeof(obj->padding));

    if (cur) {
        cur->next = obj;
    } else {
        ctx->objects_begin = obj;
    }
    ctx->objects_end = obj;
    ctx->n_objects++;
    return obj;
}

} // namespace

extern "C" void * ggml_new_buffer(struct ggml_context * ctx, size_t nbytes) {
    struct ggml_object * obj = new_object(ctx, GGML_OBJECT_TYPE_WORK_BUFFER, nbytes);
    return (char *) ctx->mem_buffer + obj->offs;
}

struct ggml_tensor * ggml_new_tensor_impl(struct ggml_context * ctx, enum ggml_type type, int n_dims,
                                          const int64_t * ne, struct ggml_tensor * view_src, size_t view_offs) {
    GGML_ASSERT(ggml_blck_size(type) > 0 && "unsupported tensor type");
    GGML_ASSERT(n_dims >= 1 && n_dims <= GGML_MAX_DIMS);

    // views always point at the ultimate base so that the allocator sees one owner per buffer
    if (view_src != nullptr && view_src->view_src != nullptr) {
        view_offs += view_src->view_offs;
        view_src = view_src->view_src;
    }

    size_t data_size = ggml_row_size(type, ne[0]);
    for (int i = 1; i < n_dims; i++) data_size *= (size_t) ne[i];

    GGML_ASSERT((view_src == nullptr || data_size == 0 || data_size + view_offs <= ggml_nbytes(view_src)) &&
                "view does not fit in its source tensor");

    void * data = view_src != nullptr ? view_src->data : nullptr;
    if (data != nullptr) data = (char *) data + view_offs;

    size_t obj_alloc_size = 0;
    if (view_src == nullptr && !ctx->no_alloc) obj_alloc_size = data_size;

    struct ggml_object * obj = new_object(ctx, GGML_OBJECT_TYPE_TENSOR, sizeof(struct ggml_tensor) + obj_alloc_size);
    struct ggml_tensor * result = (struct ggml_tensor *) ((char *) ctx->mem_buffer + obj->offs);

    memset(result, 0, sizeof(*result));
    result->type      = type;
    result->op        = GGML_OP_NONE;
    result->view_src  = view_src;
    result->view_offs = view_offs;
    result->data      = obj_alloc_size > 0 ? (void *) (result + 1) : data;

    for (int i = 0; i < GGML_MAX_DIMS; i++) result->ne[i] = i < n_dims ? ne[i] : 1;

    result->nb[0] = ggml_type_size(type);
    result->nb[1] = result->nb[0] * (size_t) (result->ne[0] / ggml_blck_size(type));
    for (int i = 2; i < GGML_MAX_DIMS; i++) result->nb[i] = result->nb[i - 1] * (size_t) result->ne[i - 1];

    return result;
}

extern "C" struct ggml_tensor * ggml_new_tensor(struct ggml_context * ctx, enum ggml_type type, int n_dims,
                                                const int64_t * ne) {
    return ggml_new_tensor_impl(ctx, type, n_dims, ne, nullptr, 0);
}

extern "C" struct ggml_tensor * ggml_new_tensor_1d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0) {
    return ggml_new_tensor(ctx, type, 1, &ne0);
}

extern "C" struct ggml_tensor * ggml_new_tensor_2d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0,
                                                   int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return ggml_new_tensor(ctx, type, 2, ne);
}

extern "C" struct ggml_tensor * ggml_new_tensor_3d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0,
                                                   int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return ggml_new_tensor(ctx, type, 3, ne);
}

extern "C" struct ggml_tensor * ggml_new_tensor_4d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0,
                                                   int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return ggml_new_tensor(ctx, type, 4, ne);
}

extern "C" struct ggml_tensor * ggml_dup_tensor(struct ggml_context * ctx, const struct ggml_tensor * src) {
    return ggml_new_tensor(ctx, src->type, GGML_MAX_DIMS, src->ne);
}

extern "C" struct ggml_tensor * ggml_view_tensor(struct ggml_context * ctx, struct ggml_tensor * src) {
    struct ggml_tensor * result = ggml_new_tensor_impl(ctx, src->type, GGML_MAX_DIMS, src->ne, src, 0);
    ggml_format_name(result, "%s (view)", src->name);
    for (int i = 0; i < GGML_MAX_DIMS; i++) result->nb[i] = src->nb[i];
    return result;
}

extern "C" size_t ggml_get_max_tensor_size(const struct ggml_context * ctx) {
    size_t max_size = 0;
    for (struct ggml_tensor * t = ggml_get_first_tensor(ctx); t != nullptr; t = ggml_get_next_tensor(ctx, t)) {
        const size_t bytes = ggml_nbytes(t);
        if (bytes > max_size) max_size = bytes;
    }
    return max_size;
}

extern "C" struct ggml_tensor * ggml_get_first_tensor(const struct ggml_context * ctx) {
    char * mem = (char *) ctx->mem_buffer;
    for (struct ggml_object * obj = ctx->objects_begin; obj != nullptr; obj = obj->next) {
        if (obj->type == GGML_OBJECT_TYPE_TENSOR) return (struct ggml_tensor *) (mem + obj->offs);
    }
    return nullptr;
}

extern "C" struct ggml_tensor * ggml_get_next_tensor(const struct ggml_context * ctx, struct ggml_tensor * tensor) {
    // the tensor's own header sits right before it in the pool
    struct ggml_object * obj = (struct ggml_object *) ((char *) tensor - GGML_OBJECT_SIZE);
    char *               mem = (char *) ctx->mem_buffer;
    for (obj = obj->next; obj != nullptr; obj = obj->next) {
        if (obj->type == GGML_OBJECT_TYPE_TENSOR) return (struct ggml_tensor *) (mem + obj->offs);
    }
    return nullptr;
}

extern "C" struct ggml_tensor * ggml_get_tensor(struct ggml_context * ctx, const char * name) {
    for (struct ggml_tensor * t = ggml_get_first_tensor(ctx); t != nullptr; t = ggml_get_next_tensor(ctx, t)) {
        if (strcmp(t->name, name) == 0) return t;
    }
    return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Tensor accessors

extern "C" void ggml_unravel_index(const struct ggml_tensor * tensor, int64_t i, int64_t * i0, int64_t * i1,
                                   int64_t * i2, int64_t * i3) {
    const int64_t ne0 = tensor->ne[0], ne1 = tensor->ne[1], ne2 = tensor->ne[2];
    const int64_t c3 = i / (ne2 * ne1 * ne0);
    const int64_t c2 = (i - c3 * ne2 * ne1 * ne0) / (ne1 * ne0);
    const int64_t c1 = (i - c3 * ne2 * ne1 * ne0 - c2 * ne1 * ne0) / ne0;
    const int64_t c0 = i - c3 * ne2 * ne1 * ne0 - c2 * ne1 * ne0 - c1 * ne0;
    if (i0) *i0 = c0;
    if (i1) *i1 = c1;
    if (i2) *i2 = c2;
    if (i3) *i3 = c3;
}

extern "C" enum ggml_unary_op ggml_get_unary_op(const struct ggml_tensor * tensor) {
    GGML_ASSERT(tensor->op == GGML_OP_UNARY);
    return (enum ggml_unary_op) ggml_get_op_params_i32(tensor, 0);
}

extern "C" enum ggml_glu_op ggml_get_glu_op(const struct ggml_tensor * tensor) {
    GGML_ASSERT(tensor->op == GGML_OP_GLU);
    return (enum ggml_glu_op) ggml_get_op_params_i32(tensor, 0);
}

extern "C" void * ggml_get_data(const struct ggml_tensor * tensor) {
    return tensor->data;
}

extern "C" float * ggml_get_data_f32(const struct ggml_tensor * tensor) {
    GGML_ASSERT(tensor->type == GGML_TYPE_F32);
    return (float *) tensor->data;
}

extern "C" const char * ggml_get_name(const struct ggml_tensor * tensor) {
    return tensor->name;
}

extern "C" struct ggml_tensor * ggml_set_name(struct ggml_tensor * tensor, const char * name) {
    size_t i = 0;
    for (; i < sizeof(tensor->name) - 1 && name[i] != '\0'; i++) tensor->name[i] = name[i];
    tensor->name[i] = '\0';
    return tensor;
}

extern "C" struct ggml_tensor * ggml_format_name(struct ggml_tensor * tensor, const char * fmt, ...) {
    // format into a scratch buffer: the arguments may alias tensor->name itself
    char    buf[GGML_MAX_NAME];
    va_list args;
    va_start(args, fmt);
    vsnprintf(buf, sizeof(buf), fmt, args);
    va_end(args);
    memcpy(tensor->name, buf, strlen(buf) + 1);
    return tensor;
}

extern "C" void ggml_set_input(struct ggml_tensor * tensor) {
    tensor->flags |= GGML_TENSOR_FLAG_INPUT;
}

extern "C" void ggml_set_output(struct ggml_tensor * tensor) {
    // the memory a view exposes belongs to its base, which must therefore survive as well
    for (struct ggml_tensor * t = tensor; t != nullptr; t = t->view_src) {
        t->flags |= GGML_TENSOR_FLAG_OUTPUT;
    }
}

extern "C" void ggml_set_param(struct ggml_tensor * tensor) {
    GGML_ASSERT(tensor->op == GGML_OP_NONE && "ggml_set_param: only leaf tensors can be parameters");
    tensor->flags |= GGML_TENSOR_FLAG_PARAM;
}
