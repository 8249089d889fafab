// registration.cpp — the Vulkan half of sd_ggml_register_extensions(): every sd Vulkan kernel
// and fusion rule, registered on one Vulkan device (the Vulkan entry of SD_BACKEND_EXTENSIONS).

#include "int8.h"
#include "rope.h"
#include "vk_service.h"

#include "../ggml_extensions.h"

extern "C" bool sd_register_vulkan_extensions(ggml_backend_dev_t dev) {
    // another device kind, or a Vulkan library without the execution services: nothing to do
    if (dev == nullptr || sd_vk::service(dev) == nullptr) return true;
    if (sd_op_rope_apply() == 0) return false; // schemas missing: the reason was logged
    bool ok = sd_vulkan_register_rope(dev);
    ok      = sd_vulkan_register_int8(dev) && ok;
    return ok;
}
