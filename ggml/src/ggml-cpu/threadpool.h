#pragma once

// threadpool.h — internal side of the persistent CPU thread pool (public API in ggml-cpu.h).
//
// A pool owns n_threads - 1 worker threads, created once in ggml_threadpool_new and joined in
// ggml_threadpool_free; the thread calling ggml_threadpool_run is always worker 0. Runs on one
// pool are serialised. A run must not start another run on the same pool from inside its task
// (that would deadlock on the run lock).

#include "ggml-cpu.h"

// Wait until every thread of the current run has arrived. Must be called by all n threads of
// the run the same number of times (it is a collective operation). No-op for a 1-thread run.
void ggml_threadpool_barrier(struct ggml_threadpool * threadpool);
