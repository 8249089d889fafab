# upstream-ggml.cmake — SD_USE_UPSTREAM_GGML: the target `ggml` that src/, tools/ and
# tests/upstream link is an installed upstream ggml (find_package(ggml); CMAKE_PREFIX_PATH names
# its prefix) instead of ggml/.
#
# Upstream records no GGML_MAX_NAME in its package, yet the value sets sizeof(ggml_tensor): this
# build must be told the one the library was built with (GGML_MAX_NAME, default upstream's 64).
# sd_ggml_register_extensions() (src/core/ggml_compat.cpp) refuses to run on a mismatch.

find_package(ggml REQUIRED)
set(GGML_MAX_NAME 64 CACHE STRING "GGML_MAX_NAME the installed upstream ggml was built with")
add_library(ggml INTERFACE)
target_link_libraries(ggml INTERFACE ggml::ggml)
target_compile_definitions(ggml INTERFACE GGML_MAX_NAME=${GGML_MAX_NAME})
message(STATUS "SD_USE_UPSTREAM_GGML: ggml ${GGML_VERSION} from ${ggml_DIR}, GGML_MAX_NAME ${GGML_MAX_NAME}")
