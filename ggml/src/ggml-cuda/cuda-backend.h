#pragma once

// cuda-backend.h — the CUDA backend's internal interface between its parts: the backend and
// device code (cuda-backend.cu, cuda-device.cu) expose their stream, cuBLAS handle, pool and
// device properties; the services / graph-capture code (cuda-services.cpp, graph-capture.cu)
// provides the registry's extra entry points and the plan hooks. Private to ggml/src/ggml-cuda.

#include "common.cuh"
#include "ggml-backend.h"
#include "backend/ggml-backend-impl.h"

// --- implemented by the backend (cuda-backend.cu / cuda-device.cu) ---
struct ggml_cuda_backend_view {
    int              device;        // physical ordinal
    int              cc;            // major*10+minor
    cudaStream_t     stream;
    cublasHandle_t   cublas;        // host pointer mode, bound to stream
    ggml_cuda_pool * pool;
    void **          capture_state; // a slot owned by the capture code (nullptr at creation)
};
bool ggml_cuda_backend_view_of(ggml_backend_t backend, ggml_cuda_backend_view * out); // false: not CUDA
int  ggml_cuda_dev_physical_ordinal(ggml_backend_dev_t dev);                          // -1: not CUDA
const cudaDeviceProp * ggml_cuda_device_props(int ordinal);                            // nullptr: bad ordinal

// --- implemented by the services/capture helper ---
void * ggml_cuda_get_service(const char * name);  // the CUDA registry's get_proc_address forwards here
enum ggml_backend_plan_action ggml_cuda_plan_begin(ggml_backend_t backend, const struct ggml_backend_plan_info * info);
enum ggml_status ggml_cuda_plan_end(ggml_backend_t backend);
enum ggml_status ggml_cuda_ext_step_end(ggml_backend_t backend);
void ggml_cuda_capture_state_free(void * capture_state); // backend free calls it after synchronizing
