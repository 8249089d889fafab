#pragma once

// vulkan_kernels.h — registrars of the sd Vulkan kernels and fusion rules (src/core/vulkan/).
// Everything here uses only public headers: the kernels reach the device through the
// ggml_ext_vulkan_v1 service table (ggml-ext-vulkan.h), never through ggml/src (checked by
// scripts/check-public-includes.sh). registration.cpp collects the registrars behind
// sd_register_vulkan_extensions, the Vulkan entry of SD_BACKEND_EXTENSIONS.

#include "ggml-backend.h"
#include "ggml-ext-vulkan.h"
#include "ggml-ext.h"

#ifdef __cplusplus
extern "C" {
#endif

// The Vulkan entry of SD_BACKEND_EXTENSIONS: registers every sd Vulkan kernel and fusion rule on
// dev when dev is a Vulkan device that offers ggml_ext_vulkan_v1 (true without registering
// anything for other device kinds). Call once per device; the schemas must be registered.
bool sd_register_vulkan_extensions(ggml_backend_dev_t dev);

// The service table of dev's registry, or NULL when it has none (or an older version).
const struct ggml_ext_vulkan_v1 * sd_vulkan_services(ggml_backend_dev_t dev);

#ifdef __cplusplus
}
#endif
