#pragma once

// ggml-cpp.h — std::unique_ptr aliases that free ggml objects with the matching ggml call
// (upstream's C++ convenience header; same names). C++ only.
//
// Not here yet: gguf_context_ptr (upstream's header also includes gguf.h; this runtime has no
// gguf.h until the GGUF issue lands).

#ifndef __cplusplus
#error "ggml-cpp.h is a C++ header"
#endif

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"

#include <memory>

struct ggml_context_deleter {
    void operator()(ggml_context * ctx) { ggml_free(ctx); }
};
typedef std::unique_ptr<ggml_context, ggml_context_deleter> ggml_context_ptr;

struct ggml_gallocr_deleter {
    void operator()(ggml_gallocr_t galloc) { ggml_gallocr_free(galloc); }
};
typedef std::unique_ptr<ggml_gallocr, ggml_gallocr_deleter> ggml_gallocr_ptr;

struct ggml_backend_deleter {
    void operator()(ggml_backend_t backend) { ggml_backend_free(backend); }
};
typedef std::unique_ptr<ggml_backend, ggml_backend_deleter> ggml_backend_ptr;

struct ggml_backend_buffer_deleter {
    void operator()(ggml_backend_buffer_t buffer) { ggml_backend_buffer_free(buffer); }
};
typedef std::unique_ptr<ggml_backend_buffer, ggml_backend_buffer_deleter> ggml_backend_buffer_ptr;

struct ggml_backend_event_deleter {
    void operator()(ggml_backend_event_t event) { ggml_backend_event_free(event); }
};
typedef std::unique_ptr<ggml_backend_event, ggml_backend_event_deleter> ggml_backend_event_ptr;

struct ggml_backend_sched_deleter {
    void operator()(ggml_backend_sched_t sched) { ggml_backend_sched_free(sched); }
};
typedef std::unique_ptr<ggml_backend_sched, ggml_backend_sched_deleter> ggml_backend_sched_ptr;
