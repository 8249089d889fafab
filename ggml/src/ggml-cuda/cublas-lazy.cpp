// cublas-lazy.cpp — the cuBLAS entry points the CUDA backend and the sd CUDA kernels call,
// resolved from libcublas.so on first use instead of at program load.
//
// Why: linking libcublas (and with it the 540 MB libcublasLt) makes the dynamic loader map and
// relocate them in every process that links ggml, device or not: 4 MiB -> 215 MiB peak RSS for
// `sdx --help` in a CUDA build on a machine without a GPU (measured, CUDA 13). The backend calls
// cuBLAS only after a device exists, so the library is loaded then, once per process.
//
// The definitions below have cuBLAS's own prototypes (from cublas_v2.h, so a signature mismatch
// is a compile error) and forward to the library's symbols. A program that links libcublas
// itself keeps working: the forwarders look the real symbols up in the loaded library by handle.
// If the library cannot be loaded every call answers CUBLAS_STATUS_NOT_INITIALIZED and
// cublasGetStatusString says why.

#include <cublas_v2.h>

#include <dlfcn.h>

#include <cstdio>
#include <mutex>

namespace {

#define GGML_CUBLAS_SONAME_(major) "libcublas.so." #major
#define GGML_CUBLAS_SONAME(major)  GGML_CUBLAS_SONAME_(major)

struct cublas_library {
    void * handle = nullptr;
    char   error[512] = {0};
};

cublas_library & library() {
    static cublas_library  lib;
    static std::once_flag  once;
    std::call_once(once, [] {
        // the soname of the major version the headers describe; the unversioned name as a
        // fallback for toolkits installed without the versioned link
        for (const char * name : {GGML_CUBLAS_SONAME(CUBLAS_VER_MAJOR), "libcublas.so"}) {
            lib.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
            if (lib.handle) return;
        }
        const char * why = dlerror();
        snprintf(lib.error, sizeof(lib.error), "cuBLAS could not be loaded (%s): %s",
                 GGML_CUBLAS_SONAME(CUBLAS_VER_MAJOR), why ? why : "unknown reason");
    });
    return lib;
}

template <typename Fn> Fn resolve(const char * name) {
    cublas_library & lib = library();
    if (!lib.handle) return nullptr;
    return reinterpret_cast<Fn>(dlsym(lib.handle, name));
}

// One forwarder per entry point: the real function is looked up once (a function-local static
// per instantiation), a missing library or symbol gives NOT_INITIALIZED.
#define GGML_CUBLAS_FORWARD(name, params, args)                                        \
    cublasStatus_t CUBLASWINAPI name params {                                           \
        using fn_t     = cublasStatus_t(CUBLASWINAPI *) params;                         \
        static fn_t fn = resolve<fn_t>(#name);                                          \
        return fn ? fn args : CUBLAS_STATUS_NOT_INITIALIZED;                            \
    }

} // namespace

extern "C" {

GGML_CUBLAS_FORWARD(cublasCreate_v2, (cublasHandle_t * handle), (handle))
GGML_CUBLAS_FORWARD(cublasDestroy_v2, (cublasHandle_t handle), (handle))
GGML_CUBLAS_FORWARD(cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t stream), (handle, stream))
GGML_CUBLAS_FORWARD(cublasSetPointerMode_v2, (cublasHandle_t handle, cublasPointerMode_t mode), (handle, mode))
GGML_CUBLAS_FORWARD(cublasSetWorkspace_v2, (cublasHandle_t handle, void * workspace, size_t bytes),
                    (handle, workspace, bytes))
GGML_CUBLAS_FORWARD(cublasGemmEx,
                    (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                     const void * alpha, const void * A, cudaDataType Atype, int lda, const void * B,
                     cudaDataType Btype, int ldb, const void * beta, void * C, cudaDataType Ctype, int ldc,
                     cublasComputeType_t computeType, cublasGemmAlgo_t algo),
                    (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                     computeType, algo))
GGML_CUBLAS_FORWARD(cublasGemmStridedBatchedEx,
                    (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                     const void * alpha, const void * A, cudaDataType Atype, int lda, long long int strideA,
                     const void * B, cudaDataType Btype, int ldb, long long int strideB, const void * beta, void * C,
                     cudaDataType Ctype, int ldc, long long int strideC, int batchCount,
                     cublasComputeType_t computeType, cublasGemmAlgo_t algo),
                    (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb, strideB, beta,
                     C, Ctype, ldc, strideC, batchCount, computeType, algo))

const char * CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
    using fn_t     = const char *(CUBLASWINAPI *) (cublasStatus_t);
    static fn_t fn = resolve<fn_t>("cublasGetStatusString");
    if (fn) return fn(status);
    const cublas_library & lib = library();
    return lib.handle ? "cuBLAS status (cublasGetStatusString missing from the library)" : lib.error;
}

} // extern "C"
