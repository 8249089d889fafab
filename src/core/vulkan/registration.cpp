// registration.cpp — the Vulkan half of sd_ggml_register_extensions(): every sd Vulkan kernel
// and fusion rule, registered on one Vulkan device. Compiled only with GGML_VULKAN=ON (the
// X(vulkan) entry of SD_BACKEND_EXTENSIONS, src/CMakeLists.txt), and even then it references no
// Vulkan symbol: the device kind is recognised by its registry's name and the services are
// found through get_proc_address.
//
// The kernel set is empty for now: the RoPE and INT8 kernels (rope.cpp, int8.cpp, issue 12
// items 3 and 4) add their registrars here.

#include "vulkan_kernels.h"

#include "../ggml_extensions.h"

#include <cstring>

extern "C" const struct ggml_ext_vulkan_v1 * sd_vulkan_services(ggml_backend_dev_t dev) {
    ggml_backend_reg_t reg = dev ? ggml_backend_dev_backend_reg(dev) : nullptr;
    if (reg == nullptr || strcmp(ggml_backend_reg_name(reg), "Vulkan") != 0) return nullptr;
    auto * svc = (const ggml_ext_vulkan_v1 *) ggml_backend_reg_get_proc_address(reg, GGML_EXT_VULKAN_V1);
    if (svc == nullptr || svc->version < 1 || svc->size < sizeof(ggml_ext_vulkan_v1)) return nullptr;
    return svc;
}

extern "C" bool sd_register_vulkan_extensions(ggml_backend_dev_t dev) {
    const ggml_ext_vulkan_v1 * svc = sd_vulkan_services(dev);
    if (svc == nullptr) return true; // not a Vulkan device (or no services): nothing to register
    if (sd_op_rope_apply() == 0) return false; // schemas missing: the reason was logged
    bool ok = true;
    // registrars of the sd Vulkan kernels go here, e.g. ok = sd_vulkan_register_rope(dev, svc) && ok;
    return ok;
}
