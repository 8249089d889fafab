#pragma once

// ggml.h — tensors, contexts, graphs and op constructors.
//
// A compatible subset of upstream ggml's public C API (version 0.21 semantics, see
// ../shared/reference/ggml-api-facts.md), re-implemented here. Names, argument meaning, tensor
// layout, broadcast rules and op_params layouts follow upstream so model code reads the same.
//
// Deliberate differences from upstream (precision quirks, not contracts):
//   * gelu / gelu_quick are computed from the exact formula, not through an FP16 lookup table.
//   * ggml_mul_mat_set_prec is recorded in op_params; the CPU backend always accumulates in F32.
//   * Op enum numeric values are our own (upstream's are not stable either); use the names.

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h> // as upstream: clients (and upstream's ggml-impl.h / gguf.h users) get FILE from here

// ---------------------------------------------------------------------------------------------
// Macros upstream's ggml.h defines for its clients and for its private headers. A client that
// compiles upstream's ggml/src/ggml-impl.h against this ggml.h needs every one of them
// (scripts/test-install.sh compiles the vendored sd.cpp copy of that header against the
// installed package).

#ifdef __GNUC__
#define GGML_DEPRECATED(func, hint) func __attribute__((deprecated(hint)))
#else
#define GGML_DEPRECATED(func, hint) func
#endif

#ifndef __GNUC__
#define GGML_ATTRIBUTE_FORMAT(...)
#elif defined(__MINGW32__) && !defined(__clang__)
#define GGML_ATTRIBUTE_FORMAT(...) __attribute__((format(gnu_printf, __VA_ARGS__)))
#else
#define GGML_ATTRIBUTE_FORMAT(...) __attribute__((format(printf, __VA_ARGS__)))
#endif

#ifdef __cplusplus
#define GGML_NORETURN [[noreturn]]
#else
#define GGML_NORETURN _Noreturn
#endif

#ifndef NDEBUG
#define GGML_UNREACHABLE()                                                                         \
    do {                                                                                           \
        fprintf(stderr, "statement should be unreachable\n");                                     \
        abort();                                                                                   \
    } while (0)
#else
#define GGML_UNREACHABLE() __builtin_unreachable()
#endif

// evaluates nothing; marks every listed variable used
#define GGML_UNUSED_VARS(...)                                                                      \
    do {                                                                                           \
        (void) sizeof((__VA_ARGS__, 0));                                                           \
    } while (0)

#define GGML_FILE_MAGIC   0x67676d6c // "ggml"
#define GGML_FILE_VERSION 2
#define GGML_QNT_VERSION        2    // bump this on quantization format changes
#define GGML_QNT_VERSION_FACTOR 1000 // do not change this
#define GGML_MAX_PARAMS         2048

// Local copies of a tensor's ne/nb (upstream's kernel-writing helpers, used by ggml-impl.h users)
#define GGML_TENSOR_LOCALS_1(type, prefix, pointer, array)                                         \
    const type prefix##0 = (pointer) ? (pointer)->array[0] : 0;                                    \
    GGML_UNUSED(prefix##0);
#define GGML_TENSOR_LOCALS_2(type, prefix, pointer, array)                                         \
    GGML_TENSOR_LOCALS_1(type, prefix, pointer, array)                                             \
    const type prefix##1 = (pointer) ? (pointer)->array[1] : 0;                                    \
    GGML_UNUSED(prefix##1);
#define GGML_TENSOR_LOCALS_3(type, prefix, pointer, array)                                         \
    GGML_TENSOR_LOCALS_2(type, prefix, pointer, array)                                             \
    const type prefix##2 = (pointer) ? (pointer)->array[2] : 0;                                    \
    GGML_UNUSED(prefix##2);
#define GGML_TENSOR_LOCALS(type, prefix, pointer, array)                                           \
    GGML_TENSOR_LOCALS_3(type, prefix, pointer, array)                                             \
    const type prefix##3 = (pointer) ? (pointer)->array[3] : 0;                                    \
    GGML_UNUSED(prefix##3);
#define GGML_TENSOR_UNARY_OP_LOCALS                                                                \
    GGML_TENSOR_LOCALS(int64_t, ne0, src0, ne)                                                     \
    GGML_TENSOR_LOCALS(size_t, nb0, src0, nb)                                                      \
    GGML_TENSOR_LOCALS(int64_t, ne, dst, ne)                                                       \
    GGML_TENSOR_LOCALS(size_t, nb, dst, nb)
#define GGML_TENSOR_BINARY_OP_LOCALS                                                               \
    GGML_TENSOR_LOCALS(int64_t, ne0, src0, ne)                                                     \
    GGML_TENSOR_LOCALS(size_t, nb0, src0, nb)                                                      \
    GGML_TENSOR_LOCALS(int64_t, ne1, src1, ne)                                                     \
    GGML_TENSOR_LOCALS(size_t, nb1, src1, nb)                                                      \
    GGML_TENSOR_LOCALS(int64_t, ne, dst, ne)                                                       \
    GGML_TENSOR_LOCALS(size_t, nb, dst, nb)
#define GGML_TENSOR_TERNARY_OP_LOCALS                                                              \
    GGML_TENSOR_BINARY_OP_LOCALS                                                                   \
    GGML_TENSOR_LOCALS(int64_t, ne2, src2, ne)                                                     \
    GGML_TENSOR_LOCALS(size_t, nb2, src2, nb)
#define GGML_TENSOR_BINARY_OP_LOCALS01                                                             \
    GGML_TENSOR_LOCALS(int64_t, ne0, src0, ne)                                                     \
    GGML_TENSOR_LOCALS(size_t, nb0, src0, nb)                                                      \
    GGML_TENSOR_LOCALS(int64_t, ne1, src1, ne)                                                     \
    GGML_TENSOR_LOCALS(size_t, nb1, src1, nb)

#ifdef __cplusplus
extern "C" {
#endif

#ifndef GGML_API
#define GGML_API __attribute__((visibility("default")))
#endif

#define GGML_VERSION_STRING "0.21.0-sdx"

#define GGML_MAX_DIMS 4
#define GGML_MAX_SRC 10
#define GGML_MAX_OP_PARAMS 64

// GGML_MAX_NAME sizes ggml_tensor::name, so it is part of the ABI. The library is built with the
// value of the CMake cache variable GGML_MAX_NAME (upstream's 64 by default), recorded in the
// generated ggml-build-config.h. A client that does not define it gets the library's value; a
// client that defines a different value is stopped here instead of corrupting memory at run time
// (stable-diffusion.cpp requires >= 128: install with -DGGML_MAX_NAME=160).
#include "ggml-build-config.h"
#ifndef GGML_MAX_NAME
#define GGML_MAX_NAME GGML_BUILD_MAX_NAME
#endif
#if GGML_MAX_NAME != GGML_BUILD_MAX_NAME
#error "GGML_MAX_NAME differs from the value this ggml library was built with (GGML_BUILD_MAX_NAME in ggml-build-config.h); rebuild ggml with -DGGML_MAX_NAME=<your value>"
#endif
#define GGML_MAX_N_THREADS 512
#define GGML_DEFAULT_N_THREADS 4
#define GGML_DEFAULT_GRAPH_SIZE 2048
#define GGML_MEM_ALIGN 16
#define GGML_N_TASKS_MAX (-1)

#define GGML_ROPE_TYPE_NORMAL 0
#define GGML_ROPE_TYPE_NEOX 2

#define GGML_EXIT_SUCCESS 0
#define GGML_EXIT_ABORTED 1

#define GGML_PAD(x, n) (((x) + (n) - 1) & ~((n) - 1))

#define GGML_UNUSED(x) (void) (x)

// ---------------------------------------------------------------------------------------------
// Errors

GGML_API void ggml_abort(const char * file, int line, const char * fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

#define GGML_ABORT(...) ggml_abort(__FILE__, __LINE__, __VA_ARGS__)
#define GGML_ASSERT(x)                                                                             \
    do {                                                                                           \
        if (!(x)) ggml_abort(__FILE__, __LINE__, "GGML_ASSERT(%s) failed", #x);                   \
    } while (0)

// Hook called with the formatted message before abort(). Returns the previous hook; NULL
// restores the default (print to stderr).
typedef void (*ggml_abort_callback_t)(const char * error_message);
GGML_API ggml_abort_callback_t ggml_set_abort_callback(ggml_abort_callback_t callback);

enum ggml_status {
    GGML_STATUS_ALLOC_FAILED = -2,
    GGML_STATUS_FAILED       = -1,
    GGML_STATUS_SUCCESS      = 0,
    GGML_STATUS_ABORTED      = 1,
};
GGML_API const char * ggml_status_to_string(enum ggml_status status);

// Logging: the default callback prints WARN and ERROR to stderr.
enum ggml_log_level {
    GGML_LOG_LEVEL_NONE  = 0,
    GGML_LOG_LEVEL_DEBUG = 1,
    GGML_LOG_LEVEL_INFO  = 2,
    GGML_LOG_LEVEL_WARN  = 3,
    GGML_LOG_LEVEL_ERROR = 4,
    GGML_LOG_LEVEL_CONT  = 5,
};
typedef void (*ggml_log_callback)(enum ggml_log_level level, const char * text, void * user_data);
GGML_API void ggml_log_set(ggml_log_callback log_callback, void * user_data);

// Abort callback for compute: returning true stops the computation (GGML_STATUS_ABORTED).
typedef bool (*ggml_abort_callback)(void * data);

// ---------------------------------------------------------------------------------------------
// Scalar types

typedef uint16_t ggml_fp16_t;
typedef struct { uint16_t bits; } ggml_bf16_t;

// IEEE binary16 <-> binary32, round-to-nearest-even, subnormals kept, NaN -> 0x7E00 (sign kept).
GGML_API float       ggml_fp16_to_fp32(ggml_fp16_t h);
GGML_API ggml_fp16_t ggml_fp32_to_fp16(float f);
GGML_API void        ggml_fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n);
GGML_API void        ggml_fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n);

// bfloat16: widening is exact; narrowing is round-to-nearest-even, NaN keeps sign and is quieted.
GGML_API float       ggml_bf16_to_fp32(ggml_bf16_t h);
GGML_API ggml_bf16_t ggml_fp32_to_bf16(float f);
GGML_API void        ggml_bf16_to_fp32_row(const ggml_bf16_t * x, float * y, int64_t n);
GGML_API void        ggml_fp32_to_bf16_row_ref(const float * x, ggml_bf16_t * y, int64_t n);
GGML_API void        ggml_fp32_to_bf16_row(const float * x, ggml_bf16_t * y, int64_t n);

enum ggml_type {
    GGML_TYPE_F32   = 0,
    GGML_TYPE_F16   = 1,
    GGML_TYPE_Q4_0  = 2, // block-quantized types, upstream's values (block layouts: src/ggml-common.h);
    GGML_TYPE_Q4_1  = 3, // a type whose traits report type_name NULL is declared but not implemented
    GGML_TYPE_Q5_0  = 6,
    GGML_TYPE_Q5_1  = 7,
    GGML_TYPE_Q8_0  = 8,
    GGML_TYPE_Q8_1  = 9,
    GGML_TYPE_Q2_K  = 10,
    GGML_TYPE_Q3_K  = 11,
    GGML_TYPE_Q4_K  = 12,
    GGML_TYPE_Q5_K  = 13,
    GGML_TYPE_Q6_K  = 14,
    GGML_TYPE_Q8_K  = 15,
    GGML_TYPE_I8    = 24,
    GGML_TYPE_I16   = 25,
    GGML_TYPE_I32   = 26,
    GGML_TYPE_I64   = 27,
    GGML_TYPE_F64   = 28,
    GGML_TYPE_BF16  = 30,
    // stable-diffusion.cpp's pinned ggml (leejet/ggml) adds the FP8 formats after upstream's 42:
    // one byte per element; E4M3 (bias 7, no inf, max 448) and E5M2 (bias 15, IEEE-like)
    GGML_TYPE_F8_E4M3 = 43,
    GGML_TYPE_F8_E5M2 = 44,
    GGML_TYPE_COUNT = 45,
};

enum ggml_prec {
    GGML_PREC_DEFAULT = 0,
    GGML_PREC_F32     = 10,
};

typedef void (*ggml_to_float_t)(const void * x, float * y, int64_t k);
typedef void (*ggml_from_float_t)(const float * x, void * y, int64_t k);

struct ggml_type_traits {
    const char *      type_name;   // NULL for values that are not a supported type
    int64_t           blck_size;
    int64_t           blck_size_interleave;
    size_t            type_size;
    bool              is_quantized;
    ggml_to_float_t   to_float;       // NULL for F32 and integer types
    ggml_from_float_t from_float_ref; // NULL for F32 and integer types
};
GGML_API const struct ggml_type_traits * ggml_get_type_traits(enum ggml_type type);

// Q8_0: 32 values per block, half scale then 32 int8 quants.
#define QK8_0 32
typedef struct {
    ggml_fp16_t d;
    int8_t      qs[QK8_0];
} block_q8_0;

// Quantize nrows rows of n_per_row values starting at row `start`; returns bytes written.
GGML_API size_t ggml_quantize_chunk(enum ggml_type type, const float * src, void * dst, int64_t start,
                                    int64_t nrows, int64_t n_per_row, const float * imatrix);
// Upstream's companions of ggml_quantize_chunk: no type implemented here needs an importance matrix,
// and the reference quantizers need no tables (init/free do nothing). ggml_validate_row_data: false
// (and the reason logged) when nbytes is not a multiple of the type size, an F32/F16/BF16 value or a
// block's scale (d, m, dmin, s) is NaN or Inf, or the type is not implemented.
GGML_API bool ggml_quantize_requires_imatrix(enum ggml_type type);
GGML_API void ggml_quantize_init(enum ggml_type type);
GGML_API void ggml_quantize_free(void);
GGML_API bool ggml_validate_row_data(enum ggml_type type, const void * data, size_t nbytes);

// ---------------------------------------------------------------------------------------------
// Ops

enum ggml_op {
    GGML_OP_NONE = 0,

    GGML_OP_DUP,
    GGML_OP_ADD,
    GGML_OP_SUB,
    GGML_OP_MUL,
    GGML_OP_DIV,
    GGML_OP_SQR,
    GGML_OP_SQRT,
    GGML_OP_SCALE,
    GGML_OP_NORM,
    GGML_OP_RMS_NORM,
    GGML_OP_MUL_MAT,
    GGML_OP_CPY,
    GGML_OP_CONT,
    GGML_OP_RESHAPE,
    GGML_OP_VIEW,
    GGML_OP_PERMUTE,
    GGML_OP_TRANSPOSE,
    GGML_OP_GET_ROWS,
    GGML_OP_SOFT_MAX,
    GGML_OP_ROPE,
    GGML_OP_CONCAT,
    GGML_OP_PAD,
    GGML_OP_REPEAT,
    GGML_OP_ARANGE,
    GGML_OP_TIMESTEP_EMBEDDING,
    GGML_OP_FLASH_ATTN_EXT,
    GGML_OP_UNARY,
    GGML_OP_CUSTOM,
    GGML_OP_GLU,

    // ops for diffusion clients (issue 13); appended so earlier values stay put
    GGML_OP_IM2COL,
    GGML_OP_IM2COL_3D,
    GGML_OP_CONV_2D,
    GGML_OP_CONV_2D_DW,
    GGML_OP_CONV_3D,
    GGML_OP_CONV_TRANSPOSE_1D,
    GGML_OP_CONV_TRANSPOSE_2D,
    GGML_OP_POOL_1D,
    GGML_OP_POOL_2D,
    GGML_OP_UPSCALE,
    GGML_OP_GROUP_NORM,
    GGML_OP_L2_NORM,
    GGML_OP_CLAMP,
    GGML_OP_LEAKY_RELU,
    GGML_OP_LOG,
    GGML_OP_SIN,
    GGML_OP_COS,
    GGML_OP_SUM,
    GGML_OP_SUM_ROWS,
    GGML_OP_MEAN,
    GGML_OP_ARGMAX,
    GGML_OP_ARGSORT,
    GGML_OP_TOP_K,
    GGML_OP_DIAG_MASK_INF,
    GGML_OP_ACC,
    GGML_OP_SET,
    GGML_OP_ROLL,
    GGML_OP_ADD_ID,
    GGML_OP_MUL_MAT_ID,
    GGML_OP_WIN_PART,
    GGML_OP_WIN_UNPART,
    GGML_OP_GET_REL_POS,
    GGML_OP_ADD_REL_POS,
    GGML_OP_SET_ROWS,
    GGML_OP_MAP_CUSTOM1,
    GGML_OP_MAP_CUSTOM2,
    GGML_OP_MAP_CUSTOM3,

    GGML_OP_COUNT,
};

enum ggml_unary_op {
    GGML_UNARY_OP_ABS,
    GGML_UNARY_OP_SGN,
    GGML_UNARY_OP_NEG,
    GGML_UNARY_OP_STEP,
    GGML_UNARY_OP_TANH,
    GGML_UNARY_OP_ELU,
    GGML_UNARY_OP_RELU,
    GGML_UNARY_OP_SIGMOID,
    GGML_UNARY_OP_GELU,
    GGML_UNARY_OP_GELU_QUICK,
    GGML_UNARY_OP_SILU,
    GGML_UNARY_OP_HARDSWISH,
    GGML_UNARY_OP_HARDSIGMOID,
    GGML_UNARY_OP_EXP,
    GGML_UNARY_OP_EXPM1,
    GGML_UNARY_OP_SOFTPLUS,
    GGML_UNARY_OP_GELU_ERF,
    GGML_UNARY_OP_XIELU, // declared for numbering compatibility; not implemented
    GGML_UNARY_OP_FLOOR,
    GGML_UNARY_OP_CEIL,
    GGML_UNARY_OP_ROUND,
    GGML_UNARY_OP_TRUNC,

    GGML_UNARY_OP_COUNT,
};

enum ggml_glu_op {
    GGML_GLU_OP_REGLU,
    GGML_GLU_OP_GEGLU,
    GGML_GLU_OP_SWIGLU,
    GGML_GLU_OP_SWIGLU_OAI,
    GGML_GLU_OP_GEGLU_ERF,
    GGML_GLU_OP_GEGLU_QUICK,

    GGML_GLU_OP_COUNT,
};

enum ggml_tensor_flag {
    GGML_TENSOR_FLAG_INPUT   = 1,
    GGML_TENSOR_FLAG_OUTPUT  = 2,
    GGML_TENSOR_FLAG_PARAM   = 4,
    GGML_TENSOR_FLAG_LOSS    = 8,
    GGML_TENSOR_FLAG_COMPUTE = 16,
};

// ---------------------------------------------------------------------------------------------
// Tensor

struct ggml_backend_buffer;

struct ggml_tensor {
    enum ggml_type type;

    struct ggml_backend_buffer * buffer;

    int64_t ne[GGML_MAX_DIMS]; // number of elements
    size_t  nb[GGML_MAX_DIMS]; // stride in bytes

    enum ggml_op op;

    // op parameters, allocated as int32_t for alignment
    int32_t op_params[GGML_MAX_OP_PARAMS / sizeof(int32_t)];

    int32_t flags;

    struct ggml_tensor * src[GGML_MAX_SRC];

    // views: the ultimate non-view base tensor and the byte offset into it
    struct ggml_tensor * view_src;
    size_t               view_offs;

    void * data;

    char name[GGML_MAX_NAME];

    void * extra; // backend private

    char padding[8];
};

static const size_t GGML_TENSOR_SIZE = sizeof(struct ggml_tensor);

struct ggml_context;
struct ggml_cgraph;
// the CPU backend's thread pool (ggml-cpu.h has its functions); declared here as upstream does,
// where clients such as stable-diffusion.cpp use the handle type without including ggml-cpu.h
struct ggml_threadpool;
typedef struct ggml_threadpool * ggml_threadpool_t;

// Backend identifiers (upstream keeps these in ggml.h).
typedef uint8_t     ggml_guid[16];
typedef ggml_guid * ggml_guid_t;
GGML_API bool ggml_guid_matches(ggml_guid_t guid_a, ggml_guid_t guid_b);

struct ggml_init_params {
    size_t mem_size;   // bytes
    void * mem_buffer; // if NULL, memory is allocated internally
    bool   no_alloc;   // don't allocate memory for tensor data
};

// ---------------------------------------------------------------------------------------------
// Misc

GGML_API const char * ggml_version(void);

GGML_API int64_t ggml_nelements(const struct ggml_tensor * tensor);
GGML_API int64_t ggml_nrows(const struct ggml_tensor * tensor);
GGML_API size_t  ggml_nbytes(const struct ggml_tensor * tensor);
GGML_API size_t  ggml_nbytes_pad(const struct ggml_tensor * tensor);

GGML_API int64_t ggml_blck_size(enum ggml_type type);
GGML_API size_t  ggml_type_size(enum ggml_type type);
GGML_API size_t  ggml_row_size(enum ggml_type type, int64_t ne);
GGML_API const char * ggml_type_name(enum ggml_type type);
GGML_API bool    ggml_is_quantized(enum ggml_type type);
GGML_API size_t  ggml_element_size(const struct ggml_tensor * tensor);

GGML_API const char * ggml_op_name(enum ggml_op op);
GGML_API const char * ggml_op_symbol(enum ggml_op op);
GGML_API const char * ggml_unary_op_name(enum ggml_unary_op op);
GGML_API const char * ggml_glu_op_name(enum ggml_glu_op op);
GGML_API const char * ggml_op_desc(const struct ggml_tensor * t); // unary/glu sub-op name, else op name

GGML_API bool ggml_is_transposed(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_permuted(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_empty(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_view(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_scalar(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_vector(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_matrix(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_3d(const struct ggml_tensor * tensor);
GGML_API int  ggml_n_dims(const struct ggml_tensor * tensor);

GGML_API bool ggml_is_contiguous(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_contiguous_0(const struct ggml_tensor * tensor); // same as ggml_is_contiguous
GGML_API bool ggml_is_contiguous_1(const struct ggml_tensor * tensor); // dim 1 stride free
GGML_API bool ggml_is_contiguous_2(const struct ggml_tensor * tensor); // dims 1, 2 strides free
GGML_API bool ggml_is_contiguously_allocated(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_contiguous_channels(const struct ggml_tensor * tensor);
GGML_API bool ggml_is_contiguous_rows(const struct ggml_tensor * tensor);

GGML_API bool ggml_are_same_shape(const struct ggml_tensor * t0, const struct ggml_tensor * t1);
GGML_API bool ggml_are_same_stride(const struct ggml_tensor * t0, const struct ggml_tensor * t1);
GGML_API bool ggml_can_repeat(const struct ggml_tensor * t0, const struct ggml_tensor * t1);

GGML_API size_t ggml_tensor_overhead(void);

// ---------------------------------------------------------------------------------------------
// Context

GGML_API struct ggml_context * ggml_init(struct ggml_init_params params);
GGML_API void                  ggml_reset(struct ggml_context * ctx);
GGML_API void                  ggml_free(struct ggml_context * ctx);

GGML_API size_t ggml_used_mem(const struct ggml_context * ctx);
GGML_API bool   ggml_get_no_alloc(struct ggml_context * ctx);
GGML_API void   ggml_set_no_alloc(struct ggml_context * ctx, bool no_alloc);
GGML_API void * ggml_get_mem_buffer(const struct ggml_context * ctx);
GGML_API size_t ggml_get_mem_size(const struct ggml_context * ctx);
GGML_API size_t ggml_get_max_tensor_size(const struct ggml_context * ctx);

GGML_API struct ggml_tensor * ggml_new_tensor(struct ggml_context * ctx, enum ggml_type type, int n_dims,
                                              const int64_t * ne);
GGML_API struct ggml_tensor * ggml_new_tensor_1d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0);
GGML_API struct ggml_tensor * ggml_new_tensor_2d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0,
                                                 int64_t ne1);
GGML_API struct ggml_tensor * ggml_new_tensor_3d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0,
                                                 int64_t ne1, int64_t ne2);
GGML_API struct ggml_tensor * ggml_new_tensor_4d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0,
                                                 int64_t ne1, int64_t ne2, int64_t ne3);
GGML_API void * ggml_new_buffer(struct ggml_context * ctx, size_t nbytes);

GGML_API struct ggml_tensor * ggml_dup_tensor(struct ggml_context * ctx, const struct ggml_tensor * src);
GGML_API struct ggml_tensor * ggml_view_tensor(struct ggml_context * ctx, struct ggml_tensor * src);

GGML_API struct ggml_tensor * ggml_get_first_tensor(const struct ggml_context * ctx);
GGML_API struct ggml_tensor * ggml_get_next_tensor(const struct ggml_context * ctx, struct ggml_tensor * tensor);
GGML_API struct ggml_tensor * ggml_get_tensor(struct ggml_context * ctx, const char * name);

// flat index -> coordinates (ne0 fastest)
GGML_API void ggml_unravel_index(const struct ggml_tensor * tensor, int64_t i, int64_t * i0, int64_t * i1,
                                 int64_t * i2, int64_t * i3);

GGML_API enum ggml_unary_op ggml_get_unary_op(const struct ggml_tensor * tensor);
GGML_API enum ggml_glu_op   ggml_get_glu_op(const struct ggml_tensor * tensor);

GGML_API void *  ggml_get_data(const struct ggml_tensor * tensor);
GGML_API float * ggml_get_data_f32(const struct ggml_tensor * tensor);

GGML_API const char *         ggml_get_name(const struct ggml_tensor * tensor);
GGML_API struct ggml_tensor * ggml_set_name(struct ggml_tensor * tensor, const char * name);
GGML_API struct ggml_tensor * ggml_format_name(struct ggml_tensor * tensor, const char * fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Tensor flags. ggml_set_output also flags every tensor along the view_src chain.
GGML_API void ggml_set_input(struct ggml_tensor * tensor);
GGML_API void ggml_set_output(struct ggml_tensor * tensor);
GGML_API void ggml_set_param(struct ggml_tensor * tensor);

// ---------------------------------------------------------------------------------------------
// Operations on tensors (graph construction; nothing is computed here)

GGML_API struct ggml_tensor * ggml_dup(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_dup_inplace(struct ggml_context * ctx, struct ggml_tensor * a);

// Elementwise binary ops; b is tiled over a (modulo broadcasting), result has a's type and shape.
GGML_API struct ggml_tensor * ggml_add(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_add_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_sub(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_sub_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_mul(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_mul_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_div(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_div_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b);

GGML_API struct ggml_tensor * ggml_sqr(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sqr_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sqrt(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sqrt_inplace(struct ggml_context * ctx, struct ggml_tensor * a);

// out = s*a ; out = s*a + b
GGML_API struct ggml_tensor * ggml_scale(struct ggml_context * ctx, struct ggml_tensor * a, float s);
GGML_API struct ggml_tensor * ggml_scale_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float s);
GGML_API struct ggml_tensor * ggml_scale_bias(struct ggml_context * ctx, struct ggml_tensor * a, float s, float b);
GGML_API struct ggml_tensor * ggml_scale_bias_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float s,
                                                      float b);

// Unary (op GGML_OP_UNARY, int32 slot 0 = ggml_unary_op)
GGML_API struct ggml_tensor * ggml_unary(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_unary_op op);
GGML_API struct ggml_tensor * ggml_unary_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                 enum ggml_unary_op op);
GGML_API struct ggml_tensor * ggml_abs(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_abs_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sgn(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_neg(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_neg_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_step(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_tanh(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_tanh_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_elu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_relu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_relu_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sigmoid(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sigmoid_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_gelu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_gelu_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_gelu_erf(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_gelu_erf_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_gelu_quick(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_gelu_quick_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_silu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_silu_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_hardswish(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_hardsigmoid(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_exp(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_exp_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_expm1(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_softplus(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_floor(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_ceil(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_round(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_trunc(struct ggml_context * ctx, struct ggml_tensor * a);

// Gated linear units (op GGML_OP_GLU; int32 slot 0 = ggml_glu_op, slot 1 = swapped).
// Packed form: a has 2n columns, out = act(a[0:n]) * a[n:2n] (swapped: act(a[n:2n]) * a[0:n]).
// Split form: out = act(a) * b.
GGML_API struct ggml_tensor * ggml_glu(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_glu_op op,
                                       bool swapped);
GGML_API struct ggml_tensor * ggml_glu_split(struct ggml_context * ctx, struct ggml_tensor * a,
                                             struct ggml_tensor * b, enum ggml_glu_op op);
GGML_API struct ggml_tensor * ggml_reglu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_reglu_swapped(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_geglu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_geglu_swapped(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_swiglu(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_swiglu_swapped(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_geglu_erf(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_geglu_erf_swapped(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_geglu_quick(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_geglu_quick_swapped(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_reglu_split(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_geglu_split(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_swiglu_split(struct ggml_context * ctx, struct ggml_tensor * a,
                                                struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_geglu_erf_split(struct ggml_context * ctx, struct ggml_tensor * a,
                                                   struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_geglu_quick_split(struct ggml_context * ctx, struct ggml_tensor * a,
                                                     struct ggml_tensor * b);
// x = min(a, limit); y = clamp(b, -limit, limit); out = x * sigmoid(alpha * x) * (y + 1)
GGML_API struct ggml_tensor * ggml_swiglu_oai(struct ggml_context * ctx, struct ggml_tensor * a,
                                              struct ggml_tensor * b, float alpha, float limit);

// Row normalisations over ne0 (float slot 0 = eps).
GGML_API struct ggml_tensor * ggml_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
GGML_API struct ggml_tensor * ggml_norm_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
GGML_API struct ggml_tensor * ggml_rms_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
GGML_API struct ggml_tensor * ggml_rms_norm_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float eps);

// a: [K, N, A2, A3] (weights), b: [K, M, B2, B3] -> F32 [N, M, B2, B3]; dims 2/3 of a are
// broadcast by division (a's matrix j serves b's matrices j*r .. j*r+r-1).
GGML_API struct ggml_tensor * ggml_mul_mat(struct ggml_context * ctx, struct ggml_tensor * a,
                                           struct ggml_tensor * b);
GGML_API void ggml_mul_mat_set_prec(struct ggml_tensor * a, enum ggml_prec prec);

// INT8 ConvRot linear (the declarations of stable-diffusion.cpp's pinned ggml, which its
// ggml_extend.hpp calls). Both build nodes of the sd operators sd.quantize_i8_convrot.v1 and
// sd.linear_i8.v1, which are part of this library (src/core, built into libggml): the first call
// registers those operators and their CPU/Vulkan kernels on every device in the registry, so a
// client needs no other set-up. Semantics (int8-convrot-facts.md; docs/architecture.md):
//
// ggml_quantize_i8_convrot: a F32 contiguous [K, rows...]; group_size a power of 4 dividing K
// (1 = no rotation). Each row is rotated per group (normalised H4 Kronecker power: values * (1 /
// sqrt(G)), then butterflies), s = max|row| / 127, q = clamp(round_half_even(v * (1/s)), +-127)
// (0 when s is 0). Packs row-wise I8 activations followed by one F32 scale per row: one I8
// tensor [K, pad4(rows) + ceil(4 rows / K)], rows of K bytes, zero rows up to pad4(rows), then
// the rows' F32 scales at byte offset K * pad4(rows).
//
// ggml_mul_mat_i8_tensorwise: weight I8 [K, N] contiguous, one F32 scale per output row
// (weight_scale [N], [1, N] or [N, 1], may be NULL = 1), bias F32 [N] or NULL. input: F32 [K,
// rows...] (quantized as above with convrot_group_size; 0 or 1 = no rotation) or the packed
// output of ggml_quantize_i8_convrot made with the same group size. Result F32 [N, rows...]
// (the activation's row shape): y = ((float(sum_i q_x * q_w) * s_x) * s_w) + b, the integer sum
// exact. Malformed arguments: NULL, the reason in ggml_ext_last_error() (ggml-ext.h); upstream's fork
// asserts instead (sd.cpp validates group and shapes when it loads the checkpoint).
GGML_API struct ggml_tensor * ggml_mul_mat_i8_tensorwise(struct ggml_context * ctx, struct ggml_tensor * weight,
                                                         struct ggml_tensor * input, struct ggml_tensor * weight_scale,
                                                         struct ggml_tensor * bias, int convrot_group_size);
GGML_API struct ggml_tensor * ggml_quantize_i8_convrot(struct ggml_context * ctx, struct ggml_tensor * a,
                                                       int group_size);

// Copies. cpy: converts a into b's memory, result is a view of b (must be in the graph).
// cast: new tensor of `type`, src[1] is the result itself.
GGML_API struct ggml_tensor * ggml_cpy(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_cast(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_type type);
GGML_API struct ggml_tensor * ggml_cont(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_cont_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0);
GGML_API struct ggml_tensor * ggml_cont_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                           int64_t ne1);
GGML_API struct ggml_tensor * ggml_cont_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                           int64_t ne1, int64_t ne2);
GGML_API struct ggml_tensor * ggml_cont_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                           int64_t ne1, int64_t ne2, int64_t ne3);

// Reshapes and views (no data movement). Offsets and strides in bytes.
GGML_API struct ggml_tensor * ggml_reshape(struct ggml_context * ctx, struct ggml_tensor * a,
                                           struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_reshape_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0);
GGML_API struct ggml_tensor * ggml_reshape_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                              int64_t ne1);
GGML_API struct ggml_tensor * ggml_reshape_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                              int64_t ne1, int64_t ne2);
GGML_API struct ggml_tensor * ggml_reshape_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                              int64_t ne1, int64_t ne2, int64_t ne3);
GGML_API struct ggml_tensor * ggml_view_1d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                           size_t offset);
GGML_API struct ggml_tensor * ggml_view_2d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                           int64_t ne1, size_t nb1, size_t offset);
GGML_API struct ggml_tensor * ggml_view_3d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                           int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset);
GGML_API struct ggml_tensor * ggml_view_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                           int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1, size_t nb2,
                                           size_t nb3, size_t offset);
// axisK = where source dimension K goes: result.ne[axisK] = a.ne[K].
GGML_API struct ggml_tensor * ggml_permute(struct ggml_context * ctx, struct ggml_tensor * a, int axis0, int axis1,
                                           int axis2, int axis3);
GGML_API struct ggml_tensor * ggml_transpose(struct ggml_context * ctx, struct ggml_tensor * a);

// a: [E, R, A2, A3], b: I32 [n, A2, A3] -> F32 [E, n, A2, A3] (I32 if a is I32)
GGML_API struct ggml_tensor * ggml_get_rows(struct ggml_context * ctx, struct ggml_tensor * a,
                                            struct ggml_tensor * b);

// out = softmax(a*scale + slope*mask) over ne0. mask F16/F32 [ne0, >=ne1, broadcast by modulo].
GGML_API struct ggml_tensor * ggml_soft_max(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_soft_max_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_soft_max_ext(struct ggml_context * ctx, struct ggml_tensor * a,
                                                struct ggml_tensor * mask, float scale, float max_bias);
GGML_API struct ggml_tensor * ggml_soft_max_ext_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                        struct ggml_tensor * mask, float scale, float max_bias);

// a: [head_dim, n_head, n_tokens, n_seq]; b: I32 positions [n_tokens]; c: optional F32 freq factors.
GGML_API struct ggml_tensor * ggml_rope(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                        int n_dims, int mode);
GGML_API struct ggml_tensor * ggml_rope_ext(struct ggml_context * ctx, struct ggml_tensor * a,
                                            struct ggml_tensor * b, struct ggml_tensor * c, int n_dims, int mode,
                                            int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
                                            float attn_factor, float beta_fast, float beta_slow);
GGML_API struct ggml_tensor * ggml_rope_ext_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                    struct ggml_tensor * b, struct ggml_tensor * c, int n_dims,
                                                    int mode, int n_ctx_orig, float freq_base, float freq_scale,
                                                    float ext_factor, float attn_factor, float beta_fast,
                                                    float beta_slow);
GGML_API void ggml_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast,
                                       float beta_slow, float dims[2]);

// q: [D, n_q, n_head, S]; k: [D, n_kv, n_head_kv, S]; v: [Dv, n_kv, n_head_kv, S];
// mask: F16 [n_kv, >=n_q, ...] or NULL. Result F32 [Dv, n_head, n_q, S] (permuted).
GGML_API struct ggml_tensor * ggml_flash_attn_ext(struct ggml_context * ctx, struct ggml_tensor * q,
                                                  struct ggml_tensor * k, struct ggml_tensor * v,
                                                  struct ggml_tensor * mask, float scale, float max_bias,
                                                  float logit_softcap);
GGML_API void           ggml_flash_attn_ext_set_prec(struct ggml_tensor * a, enum ggml_prec prec);
GGML_API enum ggml_prec ggml_flash_attn_ext_get_prec(const struct ggml_tensor * a);

// SageAttention (stable-diffusion.cpp's pinned ggml): q [D, Lq, H, N], k/v [D, Lk, Hkv, N] as for
// ggml_flash_attn_ext, result F32 [D, H, Lq, N] = softmax(scale q k^T) v with quantized Q/K. Builds
// an sd.sage_attn.v1 node; no backend here runs it yet (supports_op is false, so a scheduler
// refuses the graph): ask ggml_backend_dev_supports_op first and fall back to flash attention.
GGML_API struct ggml_tensor * ggml_sage_attn(struct ggml_context * ctx, struct ggml_tensor * q, struct ggml_tensor * k,
                                             struct ggml_tensor * v, float scale, int mode);

// Concatenate along dim (a's elements first).
GGML_API struct ggml_tensor * ggml_concat(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                          int dim);

// Zero padding at the end (pad) or at both ends (pad_ext) of each dim.
GGML_API struct ggml_tensor * ggml_pad(struct ggml_context * ctx, struct ggml_tensor * a, int p0, int p1, int p2,
                                       int p3);
GGML_API struct ggml_tensor * ggml_pad_ext(struct ggml_context * ctx, struct ggml_tensor * a, int lp0, int rp0,
                                           int lp1, int rp1, int lp2, int rp2, int lp3, int rp3);

// Tile a to b's shape (modulo indexing).
GGML_API struct ggml_tensor * ggml_repeat(struct ggml_context * ctx, struct ggml_tensor * a,
                                          struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_repeat_4d(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                             int64_t ne1, int64_t ne2, int64_t ne3);

// F32 [ceil((stop-start)/step)], element i = start + i*step
GGML_API struct ggml_tensor * ggml_arange(struct ggml_context * ctx, float start, float stop, float step);

// timesteps F32 [N] -> F32 [dim, N]: cos(t*f_j) for j < dim/2, then sin; odd dim: last column 0.
GGML_API struct ggml_tensor * ggml_timestep_embedding(struct ggml_context * ctx, struct ggml_tensor * timesteps,
                                                      int dim, int max_period);

// Custom CPU callbacks (op GGML_OP_CUSTOM). The callback runs once per worker thread with
// ith in [0, nth) and must split the work itself.
typedef void (*ggml_custom_op_t)(struct ggml_tensor * dst, int ith, int nth, void * userdata);

GGML_API struct ggml_tensor * ggml_custom_4d(struct ggml_context * ctx, enum ggml_type type, int64_t ne0,
                                             int64_t ne1, int64_t ne2, int64_t ne3, struct ggml_tensor ** args,
                                             int n_args, ggml_custom_op_t fun, int n_tasks, void * userdata);
GGML_API struct ggml_tensor * ggml_custom_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                  struct ggml_tensor ** args, int n_args, ggml_custom_op_t fun,
                                                  int n_tasks, void * userdata);


// ---------------------------------------------------------------------------------------------
// Ops used by diffusion clients (stable-diffusion.cpp class; issue 13). Upstream's names,
// argument order, op_params layouts and result shapes (see docs/architecture.md for where our
// numerics deliberately differ). Image tensors are [W, H, C, N].

#define GGML_ROPE_TYPE_MROPE  8
#define GGML_ROPE_TYPE_VISION 24
#define GGML_ROPE_TYPE_IMROPE 40
#define GGML_MROPE_SECTIONS   4

// Timers (monotonic clock). ggml_time_init is optional (kept for upstream compatibility).
GGML_API void    ggml_time_init(void);
GGML_API int64_t ggml_time_ms(void);
GGML_API int64_t ggml_time_us(void);
GGML_API int64_t ggml_cycles(void);
GGML_API int64_t ggml_cycles_per_ms(void);

// im2col: a = kernel (shape only), b = data. 2D: b [W, H, C, N], a [KW, KH, C, OC] ->
// [C*KH*KW, OW, OH, N]; 1D: b [W, C, N], a [KW, C, OC] -> [C*KW, OW, N]. Element order within a
// row: channel, then kernel row, then kernel column. Out-of-range taps read 0.
// int32 slots 0..6 = s0, s1, p0, p1, d0, d1, is_2D. src = {a, b}.
GGML_API struct ggml_tensor * ggml_im2col(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                          int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D,
                                          enum ggml_type dst_type);
// conv_1d / conv_2d: upstream's compositions im2col + mul_mat (+ permute/cont for 2D).
// conv_1d: a [K, IC, OC], b [L, IC, N] -> [OL, OC, N] (im2col in F16, as upstream).
// conv_2d: a [KW, KH, IC, OC], b [W, H, IC, N] -> [OW, OH, OC, N] (im2col in a's type).
GGML_API struct ggml_tensor * ggml_conv_1d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                           int s0, int p0, int d0);
GGML_API struct ggml_tensor * ggml_conv_1d_ph(struct ggml_context * ctx, struct ggml_tensor * a,
                                              struct ggml_tensor * b, int s, int d);
GGML_API struct ggml_tensor * ggml_conv_2d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                           int s0, int s1, int p0, int p1, int d0, int d1);
GGML_API struct ggml_tensor * ggml_conv_2d_sk_p0(struct ggml_context * ctx, struct ggml_tensor * a,
                                                 struct ggml_tensor * b);
GGML_API struct ggml_tensor * ggml_conv_2d_s1_ph(struct ggml_context * ctx, struct ggml_tensor * a,
                                                 struct ggml_tensor * b);
// Primitive CONV_2D (int32 slots 0..5 = s0, s1, p0, p1, d0, d1): a [KW, KH, IC, OC],
// b [W, H, IC, N] -> [OW, OH, OC, N] of b's type. CPU: im2col tiles fed to the packed GEMM.
GGML_API struct ggml_tensor * ggml_conv_2d_direct(struct ggml_context * ctx, struct ggml_tensor * a,
                                                  struct ggml_tensor * b, int s0, int s1, int p0, int p1, int d0,
                                                  int d1);
// Depthwise: a [KW, KH, 1, C], b [W, H, C, N] -> [OW, OH, C, N]. conv_2d_dw is the im2col +
// mul_mat composition; conv_2d_dw_direct the primitive CONV_2D_DW (slots as CONV_2D).
GGML_API struct ggml_tensor * ggml_conv_2d_dw(struct ggml_context * ctx, struct ggml_tensor * a,
                                              struct ggml_tensor * b, int s0, int s1, int p0, int p1, int d0, int d1);
GGML_API struct ggml_tensor * ggml_conv_2d_dw_direct(struct ggml_context * ctx, struct ggml_tensor * a,
                                                     struct ggml_tensor * b, int stride0, int stride1, int pad0,
                                                     int pad1, int dilation0, int dilation1);
// Depthwise 1D: a [K, 1, C], b [L, C, N] -> [OL, C, N] (composition, as upstream).
GGML_API struct ggml_tensor * ggml_conv_1d_dw(struct ggml_context * ctx, struct ggml_tensor * a,
                                              struct ggml_tensor * b, int s0, int p0, int d0);
GGML_API struct ggml_tensor * ggml_conv_1d_dw_ph(struct ggml_context * ctx, struct ggml_tensor * a,
                                                 struct ggml_tensor * b, int s0, int d0);
// Transposed: 1D a [K, OC, IC], b [L, IC] -> [(L-1)*s0 + K, OC] (p0 must be 0, d0 1; slots
// s0, p0, d0). 2D a [KW, KH, OC, IC], b [W, H, IC, N] -> [(W-1)*s + KW, (H-1)*s + KH, OC, N]
// (slot 0 = stride). F32 result.
GGML_API struct ggml_tensor * ggml_conv_transpose_1d(struct ggml_context * ctx, struct ggml_tensor * a,
                                                     struct ggml_tensor * b, int s0, int p0, int d0);
GGML_API struct ggml_tensor * ggml_conv_transpose_2d_p0(struct ggml_context * ctx, struct ggml_tensor * a,
                                                        struct ggml_tensor * b, int stride);

// 3-D: a [KW, KH, KD, IC*OC], b [W, H, D, IC*N]. im2col_3d -> [IC*KD*KH*KW, OW, OH, OD*N]
// (int32 slots 0..9 = s0, s1, s2, p0, p1, p2, d0, d1, d2, IC); conv_3d is upstream's
// im2col_3d + mul_mat composition; conv_3d_direct the primitive CONV_3D (slots 0..11 = s0..d2,
// IC, N, OC). Both give [OW, OH, OD, OC*N] (channel index oc + OC*n).
GGML_API struct ggml_tensor * ggml_im2col_3d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                             int64_t IC, int s0, int s1, int s2, int p0, int p1, int p2, int d0,
                                             int d1, int d2, enum ggml_type dst_type);
GGML_API struct ggml_tensor * ggml_conv_3d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                           int64_t IC, int s0, int s1, int s2, int p0, int p1, int p2, int d0, int d1,
                                           int d2);
GGML_API struct ggml_tensor * ggml_conv_3d_direct(struct ggml_context * ctx, struct ggml_tensor * a,
                                                  struct ggml_tensor * b, int s0, int s1, int s2, int p0, int p1,
                                                  int p2, int d0, int d1, int d2, int n_channels, int n_batch,
                                                  int n_channels_out);

enum ggml_op_pool {
    GGML_OP_POOL_MAX,
    GGML_OP_POOL_AVG,
    GGML_OP_POOL_COUNT,
};
// Pools over dim 0 (1D) or dims 0 and 1 (2D); F32 result. Padded taps are skipped by MAX and
// count as zeros for AVG (divisor k0*k1). int32 slots: op, k0, (k1,) s0, (s1,) p0 (, p1).
GGML_API struct ggml_tensor * ggml_pool_1d(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_op_pool op,
                                           int k0, int s0, int p0);
GGML_API struct ggml_tensor * ggml_pool_2d(struct ggml_context * ctx, struct ggml_tensor * a, enum ggml_op_pool op,
                                           int k0, int k1, int s0, int s1, float p0, float p1);

enum ggml_scale_mode {
    GGML_SCALE_MODE_NEAREST  = 0,
    GGML_SCALE_MODE_BILINEAR = 1,
    GGML_SCALE_MODE_BICUBIC  = 2,

    GGML_SCALE_MODE_COUNT
};
enum ggml_scale_flag {
    GGML_SCALE_FLAG_ALIGN_CORNERS = (1 << 8)
};
// Resize (op UPSCALE, int32 slot 0 = mode | flags). Nearest applies to all four dims; bilinear
// and bicubic interpolate dims 0 and 1 and take dims 2/3 by nearest. upscale multiplies ne0
// and ne1 by scale_factor.
GGML_API struct ggml_tensor * ggml_upscale(struct ggml_context * ctx, struct ggml_tensor * a, int scale_factor,
                                           enum ggml_scale_mode mode);
GGML_API struct ggml_tensor * ggml_upscale_ext(struct ggml_context * ctx, struct ggml_tensor * a, int ne0, int ne1,
                                               int ne2, int ne3, enum ggml_scale_mode mode);
GGML_API struct ggml_tensor * ggml_interpolate(struct ggml_context * ctx, struct ggml_tensor * a, int64_t ne0,
                                               int64_t ne1, int64_t ne2, int64_t ne3, uint32_t mode);

// group_norm: per dim-3 index, groups of ceil(ne2/n_groups) channels along dim 2; mean/var over
// ne0*ne1*channels (int32 slot 0 = n_groups, float slot 1 = eps).
GGML_API struct ggml_tensor * ggml_group_norm(struct ggml_context * ctx, struct ggml_tensor * a, int n_groups,
                                              float eps);
GGML_API struct ggml_tensor * ggml_group_norm_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                      int n_groups, float eps);
// l2_norm: per row x / max(||x||, eps) (float slot 0 = eps).
GGML_API struct ggml_tensor * ggml_l2_norm(struct ggml_context * ctx, struct ggml_tensor * a, float eps);
GGML_API struct ggml_tensor * ggml_l2_norm_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float eps);

// Zero padding on both ends of each dim; the _circular forms wrap around (int32 slot 8 = 1).
GGML_API struct ggml_tensor * ggml_pad_circular(struct ggml_context * ctx, struct ggml_tensor * a, int p0, int p1,
                                                int p2, int p3);
GGML_API struct ggml_tensor * ggml_pad_ext_circular(struct ggml_context * ctx, struct ggml_tensor * a, int lp0,
                                                    int rp0, int lp1, int rp1, int lp2, int rp2, int lp3, int rp3);

// Elementwise (same type and shape as a; _inplace variants return a view of a).
// clamp is always in place, as upstream (float slots 0, 1 = min, max).
GGML_API struct ggml_tensor * ggml_clamp(struct ggml_context * ctx, struct ggml_tensor * a, float min, float max);
// out = x > 0 ? x : slope * x (op LEAKY_RELU, float slot 0 = slope)
GGML_API struct ggml_tensor * ggml_leaky_relu(struct ggml_context * ctx, struct ggml_tensor * a, float negative_slope,
                                              bool inplace);
GGML_API struct ggml_tensor * ggml_log(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_log_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sin(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sin_inplace(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_cos(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_cos_inplace(struct ggml_context * ctx, struct ggml_tensor * a);

// Reductions: sum -> [1] (a's type); sum_rows -> [1, ne1, ne2, ne3] (a's type); mean -> same
// shape, F32; argmax (a matrix) -> I32 [ne1].
GGML_API struct ggml_tensor * ggml_sum(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_sum_rows(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_mean(struct ggml_context * ctx, struct ggml_tensor * a);
GGML_API struct ggml_tensor * ggml_argmax(struct ggml_context * ctx, struct ggml_tensor * a);

// Row sorting: argsort -> I32 indices of a's shape (int32 slot 0 = order; ties keep index
// order). argsort_top_k = the first k columns of a descending argsort (a view); top_k -> I32
// [k, ne1, ne2, ne3], the indices of the k largest per row, largest first.
enum ggml_sort_order {
    GGML_SORT_ORDER_ASC,
    GGML_SORT_ORDER_DESC,
};
GGML_API struct ggml_tensor * ggml_argsort(struct ggml_context * ctx, struct ggml_tensor * a,
                                           enum ggml_sort_order order);
GGML_API struct ggml_tensor * ggml_argsort_top_k(struct ggml_context * ctx, struct ggml_tensor * a, int k);
GGML_API struct ggml_tensor * ggml_top_k(struct ggml_context * ctx, struct ggml_tensor * a, int k);

// Elements with i0 > n_past + i1 become -inf (int32 slot 0 = n_past).
GGML_API struct ggml_tensor * ggml_diag_mask_inf(struct ggml_context * ctx, struct ggml_tensor * a, int n_past);
GGML_API struct ggml_tensor * ggml_diag_mask_inf_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                         int n_past);

// dst = a; view(dst, nb1, nb2, nb3, offset) += b (acc) or = b (set). Strides and offset in bytes
// (int32 slots 0..4 = nb1, nb2, nb3, offset, inplace).
GGML_API struct ggml_tensor * ggml_acc(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                       size_t nb1, size_t nb2, size_t nb3, size_t offset);
GGML_API struct ggml_tensor * ggml_acc_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3,
                                               size_t offset);
GGML_API struct ggml_tensor * ggml_set(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                       size_t nb1, size_t nb2, size_t nb3, size_t offset);
GGML_API struct ggml_tensor * ggml_set_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3,
                                               size_t offset);
GGML_API struct ggml_tensor * ggml_set_1d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                          size_t offset);
GGML_API struct ggml_tensor * ggml_set_1d_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                  struct ggml_tensor * b, size_t offset);
GGML_API struct ggml_tensor * ggml_set_2d(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                          size_t nb1, size_t offset);
GGML_API struct ggml_tensor * ggml_set_2d_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                  struct ggml_tensor * b, size_t nb1, size_t offset);

// out[i] = a[(i - shift) mod ne] per dim (int32 slots 0..3 = shifts).
GGML_API struct ggml_tensor * ggml_roll(struct ggml_context * ctx, struct ggml_tensor * a, int shift0, int shift1,
                                        int shift2, int shift3);

// dst[i0, i1, i2] = a[i0, i1, i2] + b[i0, ids[i1, i2]] (ids I32)
GGML_API struct ggml_tensor * ggml_add_id(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                          struct ggml_tensor * ids);
// as [K, N, n_expert], b [K, n_b, n_tokens] (n_b 1 or n_used), ids I32 [n_used, n_tokens] ->
// F32 [N, n_used, n_tokens]: out[:, e, t] = as[:, :, ids[e, t]] x b[:, e % n_b, t]
GGML_API struct ggml_tensor * ggml_mul_mat_id(struct ggml_context * ctx, struct ggml_tensor * as,
                                              struct ggml_tensor * b, struct ggml_tensor * ids);

// Writes the rows of b into a at row indices c (I64 or I32, broadcast over dims 2/3 by modulo);
// returns a view of a. src = {b, c, a}.
GGML_API struct ggml_tensor * ggml_set_rows(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                            struct ggml_tensor * c);

// Sinks (F32 [n_head]): an extra logit per head in the softmax normaliser (src[2] / src[4]).
// Multi-section RoPE (mode GGML_ROPE_TYPE_MROPE / IMROPE / VISION): b holds 4*a.ne2 positions
// (t, h, w, e blocks); sections[k] counts the rotated pairs that take component k's position
// (MROPE: contiguous runs, IMROPE: interleaved t,h,w; VISION: contiguous runs whose frequency
// index restarts in each section and pairs (i, i + n_dims), n_dims = head_dim/2). NEOX pairing
// otherwise. int32 slots as rope_ext plus 11..14 = sections.
GGML_API struct ggml_tensor * ggml_rope_multi(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * b,
                                              struct ggml_tensor * c, int n_dims, int sections[GGML_MROPE_SECTIONS],
                                              int mode, int n_ctx_orig, float freq_base, float freq_scale,
                                              float ext_factor, float attn_factor, float beta_fast, float beta_slow);
GGML_API struct ggml_tensor * ggml_rope_multi_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                      struct ggml_tensor * b, struct ggml_tensor * c, int n_dims,
                                                      int sections[GGML_MROPE_SECTIONS], int mode, int n_ctx_orig,
                                                      float freq_base, float freq_scale, float ext_factor,
                                                      float attn_factor, float beta_fast, float beta_slow);

// SAM-style windows (F32): win_part pads a [C, W, H, 1] with zeros to multiples of w and cuts it
// into [C, w, w, npx*npy] (int32 slots npx, npy, w); win_unpart reverses it to [C, w0, h0, 1].
GGML_API struct ggml_tensor * ggml_win_part(struct ggml_context * ctx, struct ggml_tensor * a, int w);
GGML_API struct ggml_tensor * ggml_win_unpart(struct ggml_context * ctx, struct ggml_tensor * a, int w0, int h0, int w);
// get_rel_pos: a [C, 2*qh - 1] -> F16 [C, kh, qh], out[c, k, q] = a[c, (kh - 1 - k) + q] (qh == kh).
// add_rel_pos: a [K*K, q, B] += ph[kh, q, B] + pw[kw, q, B] at element kh*K + kw (F32, contiguous).
GGML_API struct ggml_tensor * ggml_get_rel_pos(struct ggml_context * ctx, struct ggml_tensor * a, int qh, int kh);
GGML_API struct ggml_tensor * ggml_add_rel_pos(struct ggml_context * ctx, struct ggml_tensor * a, struct ggml_tensor * pw,
                                               struct ggml_tensor * ph);
GGML_API struct ggml_tensor * ggml_add_rel_pos_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                       struct ggml_tensor * pw, struct ggml_tensor * ph);

GGML_API void ggml_soft_max_add_sinks(struct ggml_tensor * a, struct ggml_tensor * sinks);
GGML_API void ggml_flash_attn_ext_add_sinks(struct ggml_tensor * a, struct ggml_tensor * sinks);

// Custom CPU maps (ops MAP_CUSTOM1..3): result = dup of a (or a view of a); op_params hold
// {fun, n_tasks, userdata} like ggml_custom_4d. The callback runs once per worker thread.
typedef void (*ggml_custom1_op_t)(struct ggml_tensor * dst, const struct ggml_tensor * a, int ith, int nth,
                                  void * userdata);
typedef void (*ggml_custom2_op_t)(struct ggml_tensor * dst, const struct ggml_tensor * a,
                                  const struct ggml_tensor * b, int ith, int nth, void * userdata);
typedef void (*ggml_custom3_op_t)(struct ggml_tensor * dst, const struct ggml_tensor * a,
                                  const struct ggml_tensor * b, const struct ggml_tensor * c, int ith, int nth,
                                  void * userdata);
GGML_API struct ggml_tensor * ggml_map_custom1(struct ggml_context * ctx, struct ggml_tensor * a,
                                               ggml_custom1_op_t fun, int n_tasks, void * userdata);
GGML_API struct ggml_tensor * ggml_map_custom1_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                       ggml_custom1_op_t fun, int n_tasks, void * userdata);
GGML_API struct ggml_tensor * ggml_map_custom2(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b, ggml_custom2_op_t fun, int n_tasks,
                                               void * userdata);
GGML_API struct ggml_tensor * ggml_map_custom2_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                       struct ggml_tensor * b, ggml_custom2_op_t fun, int n_tasks,
                                                       void * userdata);
GGML_API struct ggml_tensor * ggml_map_custom3(struct ggml_context * ctx, struct ggml_tensor * a,
                                               struct ggml_tensor * b, struct ggml_tensor * c,
                                               ggml_custom3_op_t fun, int n_tasks, void * userdata);
GGML_API struct ggml_tensor * ggml_map_custom3_inplace(struct ggml_context * ctx, struct ggml_tensor * a,
                                                       struct ggml_tensor * b, struct ggml_tensor * c,
                                                       ggml_custom3_op_t fun, int n_tasks, void * userdata);

// ---------------------------------------------------------------------------------------------
// Graphs

GGML_API struct ggml_cgraph * ggml_new_graph(struct ggml_context * ctx); // size GGML_DEFAULT_GRAPH_SIZE
GGML_API struct ggml_cgraph * ggml_new_graph_custom(struct ggml_context * ctx, size_t size, bool grads);
GGML_API size_t               ggml_graph_overhead(void);
GGML_API size_t               ggml_graph_overhead_custom(size_t size, bool grads);

// Depth-first post-order walk from tensor over src[0..]; appends new nodes in topological order.
GGML_API void ggml_build_forward_expand(struct ggml_cgraph * cgraph, struct ggml_tensor * tensor);

GGML_API int                   ggml_graph_size(struct ggml_cgraph * cgraph);
GGML_API int                   ggml_graph_n_nodes(struct ggml_cgraph * cgraph);
GGML_API struct ggml_tensor *  ggml_graph_node(struct ggml_cgraph * cgraph, int i); // i < 0: from the end
GGML_API struct ggml_tensor ** ggml_graph_nodes(struct ggml_cgraph * cgraph);
GGML_API void                  ggml_graph_add_node(struct ggml_cgraph * cgraph, struct ggml_tensor * tensor);
GGML_API void                  ggml_graph_clear(struct ggml_cgraph * cgraph);
// searches leafs first, then nodes
GGML_API struct ggml_tensor *  ggml_graph_get_tensor(const struct ggml_cgraph * cgraph, const char * name);
GGML_API void                  ggml_graph_print(const struct ggml_cgraph * cgraph);

#ifdef __cplusplus
}
#endif
