# The CUDA toolchain for GGML_CUDA=ON: nvcc, the target architectures, the CUDA language and the
# toolkit's imported targets (CUDA::cudart, CUDA::cublas, CUDA::cublasLt). Included from the
# top-level CMakeLists.txt: a language must be enabled in the directory above every target that
# compiles it (ggml/ and src/ both have .cu files). The backend itself: cuda.cmake.

# nvcc: CMAKE_CUDA_COMPILER or CUDACXX when given, else nvcc on PATH, else the toolkit's default
# location /usr/local/cuda/bin (not on PATH after a plain toolkit install)
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(GGML_NVCC nvcc PATHS /usr/local/cuda/bin)
    if(GGML_NVCC)
        set(CMAKE_CUDA_COMPILER ${GGML_NVCC} CACHE FILEPATH "CUDA compiler")
    endif()
endif()
if(NOT CMAKE_CUDA_COMPILER)
    include(CheckLanguage)
    check_language(CUDA) # CUDACXX
endif()
if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "GGML_CUDA=ON needs the CUDA toolkit's nvcc (not found on PATH or at /usr/local/cuda/bin; "
                        "set CMAKE_CUDA_COMPILER=/path/to/nvcc or configure with -DGGML_CUDA=OFF)")
endif()
# Ampere (sm_80: A100, RTX 30) and Hopper (sm_90: H100/H200) unless the caller chooses
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
    set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures to compile for" FORCE)
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
