// test-vulkan-registration.cpp — sd_register_vulkan_extensions, the Vulkan entry of
// SD_BACKEND_EXTENSIONS (src/core/vulkan/registration.cpp): it recognises Vulkan devices by their
// registry and finds ggml_ext_vulkan_v1 there, registers nothing on other device kinds, and
// sd_ggml_register_extensions() succeeds with the Vulkan device present.

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext-vulkan.h"
#include "ggml-vulkan.h"
#include "ggml_extensions.h"
#include "vulkan/vulkan_kernels.h"

#include <gtest/gtest.h>

TEST(VulkanRegistration, ServicesOnlyOnVulkanDevices) {
    ASSERT_GT(ggml_backend_vk_get_device_count(), 0) << "no Vulkan device";
    ggml_backend_dev_t vk  = ggml_backend_reg_dev_get(ggml_backend_vk_reg(), 0);
    ggml_backend_dev_t cpu = ggml_backend_reg_dev_get(ggml_backend_cpu_reg(), 0);
    const ggml_ext_vulkan_v1 * svc = sd_vulkan_services(vk);
    ASSERT_NE(svc, nullptr);
    EXPECT_EQ(svc, ggml_backend_reg_get_proc_address(ggml_backend_vk_reg(), GGML_EXT_VULKAN_V1));
    EXPECT_EQ(sd_vulkan_services(cpu), nullptr);
    EXPECT_EQ(sd_vulkan_services(nullptr), nullptr);
    // other device kinds: true, nothing registered
    EXPECT_TRUE(sd_register_vulkan_extensions(cpu));
    EXPECT_TRUE(sd_register_vulkan_extensions(nullptr));
}

TEST(VulkanRegistration, RegisterAllWithVulkanPresent) {
    EXPECT_TRUE(sd_ggml_register_extensions()) << ggml_ext_last_error();
    EXPECT_TRUE(sd_ggml_register_extensions()) << "idempotent";
}
