# Builds the CUDA backend into the ggml library (included from ggml/CMakeLists.txt when
# GGML_CUDA is ON). The .cu files compile into an object library of their own: the project's
# directory-wide warning flags are GCC flags that nvcc does not accept, so the CUDA objects get
# their own (host flags through -Xcompiler). C++ files of the backend (cuda-*.cpp) are plain
# ggml sources.

# nvcc, the architectures and CUDAToolkit come from cuda-toolkit.cmake, included by the top-level
# CMakeLists.txt (a language must be enabled in the directory above every target that uses it:
# src/ compiles .cu files too).
if(NOT CMAKE_CUDA_COMPILER OR NOT TARGET CUDA::cudart)
    message(FATAL_ERROR "ggml/src/ggml-cuda/cuda.cmake: include cuda-toolkit.cmake from the top-level CMakeLists.txt first")
endif()

set(GGML_CUDA_DIR ${CMAKE_CURRENT_SOURCE_DIR}/src/ggml-cuda)
file(GLOB GGML_CUDA_CU_SOURCES  CONFIGURE_DEPENDS ${GGML_CUDA_DIR}/*.cu)
file(GLOB GGML_CUDA_CPP_SOURCES CONFIGURE_DEPENDS ${GGML_CUDA_DIR}/*.cpp)

add_library(ggml-cuda-objs OBJECT ${GGML_CUDA_CU_SOURCES})
# not the directory's GCC warning flags (see above): the CUDA objects' own, host and device
set_property(TARGET ggml-cuda-objs PROPERTY COMPILE_OPTIONS "")
target_compile_options(ggml-cuda-objs PRIVATE
    -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter
    --Werror=all-warnings -Xcompiler=-Werror
    # device lambdas and constexpr host functions in kernels (CCCL) without per-call annotations
    --expt-relaxed-constexpr)
if(GGML_NATIVE)
    target_compile_options(ggml-cuda-objs PRIVATE -Xcompiler=-march=native)
endif()
set_target_properties(ggml-cuda-objs PROPERTIES
    CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON POSITION_INDEPENDENT_CODE ON)
target_include_directories(ggml-cuda-objs PRIVATE
    ${CMAKE_CURRENT_SOURCE_DIR}/include ${GGML_GENERATED_INCLUDE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/src ${GGML_CUDA_DIR})
target_compile_definitions(ggml-cuda-objs PRIVATE GGML_USE_CUDA)
target_link_libraries(ggml-cuda-objs PRIVATE CUDA::cudart)

target_sources(ggml PRIVATE $<TARGET_OBJECTS:ggml-cuda-objs> ${GGML_CUDA_CPP_SOURCES})
target_include_directories(ggml PRIVATE ${GGML_CUDA_DIR})
# C++ sources of the backend include the CUDA runtime / cuBLAS headers
target_include_directories(ggml PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
# cuBLAS is not linked: cublas-lazy.cpp loads it when a CUDA backend first calls it (linking it
# costs every process ~210 MiB of resident memory at load, GPU or not)
target_link_libraries(ggml PUBLIC CUDA::cudart ${CMAKE_DL_LIBS})
# GGML_USE_CUDA: the registry adds the CUDA family; tests and tools see it too
target_compile_definitions(ggml PUBLIC GGML_USE_CUDA)
