// cuda-services.cpp — the CUDA registry's execution services (ggml-ext-cuda.h; spec, "Backend
// services"): borrow the backend's device, stream and cuBLAS handle, and query a ggml device's
// physical ordinal and capabilities. Everything is answered from the backend's own objects
// (cuda-backend.h); nothing here creates, retains or configures a runtime object, so what an
// extension borrows stays exactly as the backend set it up (stream, host pointer mode, fixed
// cuBLAS workspace).

#include "cuda-backend.h"

#include "ggml-ext-cuda.h"

#include <cstring>

namespace {

// The backend's view with its device made current on the calling thread ("ordered with native
// work": the extension launches on the same device and stream as the backend's own kernels).
bool current_view(ggml_backend_t backend, ggml_cuda_backend_view * view) {
    if (backend == nullptr || !ggml_cuda_backend_view_of(backend, view)) return false;
    if (cudaSetDevice(view->device) != cudaSuccess) {
        (void) cudaGetLastError(); // do not leave the error for the backend's next check
        return false;
    }
    return true;
}

// --- ggml_ext_cuda_context_v1 / ggml_ext_gpu_context_v1 -------------------------------------

bool cuda_context_get(ggml_backend_t backend, int * device, void ** stream) {
    ggml_cuda_backend_view view;
    if (!current_view(backend, &view)) return false;
    if (device != nullptr) *device = view.device;
    if (stream != nullptr) *stream = (void *) view.stream;
    return true;
}

bool gpu_context_get(ggml_backend_t backend, ggml_ext_gpu_runtime * runtime, int * device, void ** stream) {
    if (!cuda_context_get(backend, device, stream)) return false;
    if (runtime != nullptr) *runtime = GGML_EXT_GPU_RUNTIME_CUDA;
    return true;
}

// --- ggml_ext_cuda_blas_v1 / ggml_ext_gpu_blas_v1 --------------------------------------------

bool cuda_blas_get(ggml_backend_t backend, void ** cublas_handle) {
    ggml_cuda_backend_view view;
    if (!current_view(backend, &view) || view.cublas == nullptr) return false;
    if (cublas_handle != nullptr) *cublas_handle = (void *) view.cublas;
    return true;
}

bool gpu_blas_get(ggml_backend_t backend, ggml_ext_gpu_runtime * runtime, void ** blas_handle) {
    if (!cuda_blas_get(backend, blas_handle)) return false;
    if (runtime != nullptr) *runtime = GGML_EXT_GPU_RUNTIME_CUDA;
    return true;
}

// --- ggml_ext_cuda_device_v1 / ggml_ext_gpu_device_v1 ----------------------------------------

int cuda_device_physical_ordinal(ggml_backend_dev_t dev) {
    return dev != nullptr ? ggml_cuda_dev_physical_ordinal(dev) : -1;
}

// cuBLAS runs I8 x I8 -> I32 GEMM (cublasGemmEx with CUDA_R_8I / CUBLAS_COMPUTE_32I) on the
// integer tensor-core path from Turing (sm_75) on.
constexpr int k_int8_blas_min_cc = 75;

bool gpu_device_get_info(ggml_backend_dev_t dev, ggml_ext_gpu_device_info * info) {
    if (info == nullptr) return false;
    const int ordinal = cuda_device_physical_ordinal(dev);
    if (ordinal < 0) return false;
    const cudaDeviceProp * props = ggml_cuda_device_props(ordinal);
    if (props == nullptr) return false;
    std::memset(info, 0, sizeof(*info));
    info->runtime                    = GGML_EXT_GPU_RUNTIME_CUDA;
    info->physical_ordinal           = ordinal;
    info->compute_capability         = props->major * 10 + props->minor;
    info->shared_mem_per_block       = props->sharedMemPerBlock;
    info->shared_mem_per_block_optin = props->sharedMemPerBlockOptin;
    info->warp_size                  = props->warpSize;
    info->multiprocessor_count       = props->multiProcessorCount;
    info->int8_blas                  = info->compute_capability >= k_int8_blas_min_cc;
    return true;
}

const ggml_ext_cuda_context_v1 cuda_context_v1 = { 1, cuda_context_get };
const ggml_ext_cuda_device_v1  cuda_device_v1  = { 1, cuda_device_physical_ordinal };
const ggml_ext_cuda_blas_v1    cuda_blas_v1    = { 1, cuda_blas_get };
const ggml_ext_gpu_device_v1   gpu_device_v1   = { 1, gpu_device_get_info };
const ggml_ext_gpu_context_v1  gpu_context_v1  = { 1, gpu_context_get };
const ggml_ext_gpu_blas_v1     gpu_blas_v1     = { 1, gpu_blas_get };

struct named_service {
    const char * name;
    const void * table;
};

const named_service services[] = {
    { GGML_EXT_CUDA_CONTEXT_V1, &cuda_context_v1 }, { GGML_EXT_CUDA_DEVICE_V1, &cuda_device_v1 },
    { GGML_EXT_CUDA_BLAS_V1, &cuda_blas_v1 },       { GGML_EXT_GPU_DEVICE_V1, &gpu_device_v1 },
    { GGML_EXT_GPU_CONTEXT_V1, &gpu_context_v1 },   { GGML_EXT_GPU_BLAS_V1, &gpu_blas_v1 },
};

} // namespace

void * ggml_cuda_get_service(const char * name) {
    if (name == nullptr) return nullptr;
    for (const named_service & s : services) {
        if (std::strcmp(s.name, name) == 0) return const_cast<void *>(s.table);
    }
    return nullptr;
}
