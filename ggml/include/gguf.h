// gguf.h — GGUF files (ggml's model file format): upstream ggml's API (names, signatures and
// enum values as in upstream ggml/include/gguf.h), implemented in ggml/src/formats/gguf.cpp.
//
// File layout (little-endian):
//   "GGUF" magic, u32 version (2 or 3), i64 tensor count, i64 key/value count,
//   key/value pairs: string key, i32 gguf_type, value
//     (an array value: i32 element type, u64 count, the elements),
//   tensor infos: string name, u32 n_dims, i64 ne[n_dims], i32 ggml_type, u64 data offset,
//   padding to the alignment, then the tensor data section (each tensor at its offset, aligned).
// A string is a u64 byte length followed by the bytes (no terminator). Bools are one byte.
// The alignment is the u32 value of "general.alignment" if present (a power of two), else 32.
//
// Reading is hardened against hostile files: every count, length, offset and the alignment is
// checked against the file before it is used, so a malformed file makes gguf_init_from_file
// return NULL with a one-line message on stderr (through ggml's log callback) naming the field
// and its byte offset, never an abort or an allocation larger than the file.

#pragma once

#include "ggml.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define GGUF_MAGIC   "GGUF"
#define GGUF_VERSION 3

#define GGUF_KEY_GENERAL_ALIGNMENT "general.alignment"

#define GGUF_DEFAULT_ALIGNMENT 32

#ifdef __cplusplus
extern "C" {
#endif

// value types of key/value pairs (the numbers are the file's encoding)
enum gguf_type {
    GGUF_TYPE_UINT8   = 0,
    GGUF_TYPE_INT8    = 1,
    GGUF_TYPE_UINT16  = 2,
    GGUF_TYPE_INT16   = 3,
    GGUF_TYPE_UINT32  = 4,
    GGUF_TYPE_INT32   = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL    = 7,
    GGUF_TYPE_STRING  = 8,
    GGUF_TYPE_ARRAY   = 9,
    GGUF_TYPE_UINT64  = 10,
    GGUF_TYPE_INT64   = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT, // end of the enum
};

struct gguf_context;

struct gguf_init_params {
    bool no_alloc;

    // if not NULL: *ctx receives a new ggml_context holding one tensor per tensor info, with the
    // data read from the file unless no_alloc is true
    struct ggml_context ** ctx;
};

GGML_API struct gguf_context * gguf_init_empty(void);
GGML_API struct gguf_context * gguf_init_from_file(const char * fname, struct gguf_init_params params);

GGML_API void gguf_free(struct gguf_context * ctx);

GGML_API const char * gguf_type_name(enum gguf_type type);

GGML_API uint32_t gguf_get_version    (const struct gguf_context * ctx);
GGML_API size_t   gguf_get_alignment  (const struct gguf_context * ctx);
GGML_API size_t   gguf_get_data_offset(const struct gguf_context * ctx);

GGML_API int64_t      gguf_get_n_kv(const struct gguf_context * ctx);
GGML_API int64_t      gguf_find_key(const struct gguf_context * ctx, const char * key); // -1 if absent
GGML_API const char * gguf_get_key (const struct gguf_context * ctx, int64_t key_id);

GGML_API enum gguf_type gguf_get_kv_type (const struct gguf_context * ctx, int64_t key_id);
GGML_API enum gguf_type gguf_get_arr_type(const struct gguf_context * ctx, int64_t key_id);

// abort (a programming error) when the key's type is not the one asked for
GGML_API uint8_t      gguf_get_val_u8  (const struct gguf_context * ctx, int64_t key_id);
GGML_API int8_t       gguf_get_val_i8  (const struct gguf_context * ctx, int64_t key_id);
GGML_API uint16_t     gguf_get_val_u16 (const struct gguf_context * ctx, int64_t key_id);
GGML_API int16_t      gguf_get_val_i16 (const struct gguf_context * ctx, int64_t key_id);
GGML_API uint32_t     gguf_get_val_u32 (const struct gguf_context * ctx, int64_t key_id);
GGML_API int32_t      gguf_get_val_i32 (const struct gguf_context * ctx, int64_t key_id);
GGML_API float        gguf_get_val_f32 (const struct gguf_context * ctx, int64_t key_id);
GGML_API uint64_t     gguf_get_val_u64 (const struct gguf_context * ctx, int64_t key_id);
GGML_API int64_t      gguf_get_val_i64 (const struct gguf_context * ctx, int64_t key_id);
GGML_API double       gguf_get_val_f64 (const struct gguf_context * ctx, int64_t key_id);
GGML_API bool         gguf_get_val_bool(const struct gguf_context * ctx, int64_t key_id);
GGML_API const char * gguf_get_val_str (const struct gguf_context * ctx, int64_t key_id);
GGML_API const void * gguf_get_val_data(const struct gguf_context * ctx, int64_t key_id);
GGML_API size_t       gguf_get_arr_n   (const struct gguf_context * ctx, int64_t key_id);

// the first element of a non-string array (bools are one byte each)
GGML_API const void * gguf_get_arr_data(const struct gguf_context * ctx, int64_t key_id);

// the i-th string of a string array
GGML_API const char * gguf_get_arr_str (const struct gguf_context * ctx, int64_t key_id, size_t i);

GGML_API int64_t        gguf_get_n_tensors    (const struct gguf_context * ctx);
GGML_API int64_t        gguf_find_tensor      (const struct gguf_context * ctx, const char * name); // -1 if absent
GGML_API size_t         gguf_get_tensor_offset(const struct gguf_context * ctx, int64_t tensor_id);
GGML_API const char *   gguf_get_tensor_name  (const struct gguf_context * ctx, int64_t tensor_id);
GGML_API enum ggml_type gguf_get_tensor_type  (const struct gguf_context * ctx, int64_t tensor_id);
GGML_API size_t         gguf_get_tensor_size  (const struct gguf_context * ctx, int64_t tensor_id);

// removes the key if present; returns the id it had, or -1
GGML_API int64_t gguf_remove_key(struct gguf_context * ctx, const char * key);

// replace an existing pair or append a new one (a replaced pair moves to the end)
GGML_API void gguf_set_val_u8  (struct gguf_context * ctx, const char * key, uint8_t      val);
GGML_API void gguf_set_val_i8  (struct gguf_context * ctx, const char * key, int8_t       val);
GGML_API void gguf_set_val_u16 (struct gguf_context * ctx, const char * key, uint16_t     val);
GGML_API void gguf_set_val_i16 (struct gguf_context * ctx, const char * key, int16_t      val);
GGML_API void gguf_set_val_u32 (struct gguf_context * ctx, const char * key, uint32_t     val);
GGML_API void gguf_set_val_i32 (struct gguf_context * ctx, const char * key, int32_t      val);
GGML_API void gguf_set_val_f32 (struct gguf_context * ctx, const char * key, float        val);
GGML_API void gguf_set_val_u64 (struct gguf_context * ctx, const char * key, uint64_t     val);
GGML_API void gguf_set_val_i64 (struct gguf_context * ctx, const char * key, int64_t      val);
GGML_API void gguf_set_val_f64 (struct gguf_context * ctx, const char * key, double       val);
GGML_API void gguf_set_val_bool(struct gguf_context * ctx, const char * key, bool         val);
GGML_API void gguf_set_val_str (struct gguf_context * ctx, const char * key, const char * val);

// an array of n elements of `type` copied from data (not GGUF_TYPE_STRING / GGUF_TYPE_ARRAY)
GGML_API void gguf_set_arr_data(struct gguf_context * ctx, const char * key, enum gguf_type type, const void * data, size_t n);

// an array of n strings copied from data
GGML_API void gguf_set_arr_str (struct gguf_context * ctx, const char * key, const char ** data, size_t n);

// sets (or adds) every key/value pair of src in ctx
GGML_API void gguf_set_kv(struct gguf_context * ctx, const struct gguf_context * src);

// adds a tensor info (name, type, shape) after the existing ones; the name must be new. The
// tensor's data pointer (may be NULL) is what gguf_write_to_file writes; it is not copied.
GGML_API void gguf_add_tensor(struct gguf_context * ctx, const struct ggml_tensor * tensor);

// changes a tensor's type; the offsets of the tensors after it are recomputed so that the data
// stays one contiguous (padded) section
GGML_API void gguf_set_tensor_type(struct gguf_context * ctx, const char * name, enum ggml_type type);

// the data written for the tensor: gguf_get_tensor_size bytes read from data at write time
GGML_API void gguf_set_tensor_data(struct gguf_context * ctx, const char * name, const void * data);

// Writing: either the whole file at once (gguf_write_to_file, only_meta = false); or the meta
// data first (only_meta = true) with the tensor data appended by the caller; or
// gguf_get_meta_size bytes reserved, the tensor data written after them, and gguf_get_meta_data
// written into the reserved bytes.
GGML_API bool gguf_write_to_file(const struct gguf_context * ctx, const char * fname, bool only_meta);
// the same bytes written to an open stream at its current position (upstream's API); the stream is
// neither flushed nor closed. gguf_write_to_file replaces fname atomically (a temporary file next
// to it, renamed into place when complete); this one writes where the caller points it.
GGML_API bool gguf_write_to_file_ptr(const struct gguf_context * ctx, FILE * file, bool only_meta);

// bytes of the meta data (header, key/value pairs, tensor infos) including the padding to the
// data section
GGML_API size_t gguf_get_meta_size(const struct gguf_context * ctx);

// writes gguf_get_meta_size bytes to data
GGML_API void   gguf_get_meta_data(const struct gguf_context * ctx, void * data);

// --- beyond upstream's API ---
// The message of the last gguf_init_from_file of this thread that returned NULL ("" after one
// that succeeded): the same line it logs, for callers that report errors themselves.
GGML_API const char * gguf_last_error(void);

#ifdef __cplusplus
}
#endif
