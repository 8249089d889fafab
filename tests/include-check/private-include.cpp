// Fixture for scripts/check-public-includes.sh (never compiled): a file that reaches into
// ggml/src, which the check must reject (ctest check-public-includes-rejects).
#include "ggml-ext-vulkan.h"
#include "../../ggml/src/ggml-vulkan/vk-internal.h"
