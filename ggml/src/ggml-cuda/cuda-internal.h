#pragma once

// cuda-internal.h — what the backend's own files share (device objects, buffer-type checks,
// backend construction). Not part of the agreed interface (cuda-backend.h): op kernels and the
// services code do not need it. Private to ggml/src/ggml-cuda.

#include "cuda-backend.h"
#include "ggml-cuda.h"

#include <string>

// One CUDA device as ggml sees it: properties read once at discovery, the ggml device object
// and its device buffer type. Lives until process exit (registries keep pointers to it).
struct ggml_cuda_device {
    int                       ordinal = -1; // CUDA runtime ordinal
    int                       cc      = 0;  // major * 10 + minor
    bool                      mem_pools = false; // cudaMallocAsync usable (stream-ordered pool)
    std::string               name;         // "CUDA0"
    std::string               description;  // the device's marketing name
    cudaDeviceProp            props{};
    ggml_backend_device       gdev{};
    ggml_backend_buffer_type  buft{};       // device memory
};

int                ggml_cuda_device_count();
ggml_cuda_device * ggml_cuda_get_device(int index); // nullptr: out of range
ggml_backend_reg_t ggml_cuda_registry();

// cuda-memory.cu
void                       ggml_cuda_init_buffer_type(ggml_cuda_device * dev);
bool                       ggml_cuda_buft_is_device(ggml_backend_buffer_type_t buft); // any CUDA device's memory
int                        ggml_cuda_buft_device(ggml_backend_buffer_type_t buft);    // its ordinal, -1 if none
ggml_backend_buffer_type_t ggml_cuda_host_buft();                                    // nullptr without devices

// cuda-backend.cu
ggml_backend_t ggml_cuda_backend_new(ggml_cuda_device * dev);
bool           ggml_cuda_node_supported(const ggml_cuda_device * dev, const ggml_tensor * op);
ggml_backend_event_t ggml_cuda_event_new(ggml_backend_dev_t dev);
void                 ggml_cuda_event_free(ggml_backend_dev_t dev, ggml_backend_event_t event);
void                 ggml_cuda_event_synchronize(ggml_backend_dev_t dev, ggml_backend_event_t event);
