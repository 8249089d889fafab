// vk-device.cpp — the Vulkan instance, device discovery, logical devices, the validation
// messenger, and the registry entry / device objects.
//
// The instance is created on the first registry query; logical devices only when a device is
// first used (a backend, a buffer), so processes that never touch Vulkan pay only for the
// instance. Devices live until process exit: pipelines compiled by the driver (seconds on
// lavapipe for large shaders) are then shared by every backend and test of the process.

#include "vk-internal.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

namespace {

struct vk_instance_state {
    VkInstance                              instance  = VK_NULL_HANDLE;
    VkDebugUtilsMessengerEXT                messenger = VK_NULL_HANDLE;
    bool                                    validation = false;
    std::vector<std::unique_ptr<vk_device>> devices;
};

std::atomic<size_t> g_validation_messages{0};
std::atomic<bool>   g_shut_down{false};

VKAPI_ATTR VkBool32 VKAPI_CALL debug_callback(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                              VkDebugUtilsMessageTypeFlagsEXT type,
                                              const VkDebugUtilsMessengerCallbackDataEXT * data, void *) {
    (void) type;
    // informational loader chatter is not a finding; warnings and errors are
    if (severity < VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) return VK_FALSE;
    g_validation_messages.fetch_add(1);
    GGML_LOG_ERROR("vulkan validation: %s\n", data && data->pMessage ? data->pMessage : "(no message)");
    return VK_FALSE;
}

bool env_flag(const char * name) {
    const char * v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

bool has_layer(const char * name) {
    uint32_t n = 0;
    vkEnumerateInstanceLayerProperties(&n, nullptr);
    std::vector<VkLayerProperties> layers(n);
    vkEnumerateInstanceLayerProperties(&n, layers.data());
    for (const auto & l : layers) {
        if (strcmp(l.layerName, name) == 0) return true;
    }
    return false;
}

// The features every shader relies on (see ggml-vulkan.h).
// Which physical devices become ggml devices, in upstream ggml-vulkan's way: by default every
// device except CPU drivers (lavapipe/llvmpipe/SwiftShader): a client that picks "the first GPU"
// (stable-diffusion.cpp, llama.cpp) must not land on a software rasteriser that is slower than the
// CPU backend. GGML_VK_VISIBLE_DEVICES="i,j,..." (raw vkEnumeratePhysicalDevices indices, in that
// order) overrides the default and is how a CPU driver is chosen (our tests set it: tests/vk-env.cmake).
// Malformed or out-of-range entries are reported and skipped.
std::vector<uint32_t> visible_device_order(const std::vector<VkPhysicalDevice> & pds) {
    std::vector<uint32_t> order;
    const char * env = getenv("GGML_VK_VISIBLE_DEVICES");
    if (env && *env) {
        const char * p = env;
        while (*p) {
            char * end = nullptr;
            const long v = strtol(p, &end, 10);
            if (end == p || v < 0 || v >= (long) pds.size()) {
                GGML_LOG_WARN("ggml-vulkan: GGML_VK_VISIBLE_DEVICES=\"%s\": entry at \"%s\" is not a device index "
                              "below %zu; skipped\n", env, p, pds.size());
                while (*p && *p != ',') ++p;
            } else {
                if (std::find(order.begin(), order.end(), (uint32_t) v) == order.end()) order.push_back((uint32_t) v);
                p = end;
            }
            while (*p == ',' || *p == ' ') ++p;
        }
        return order;
    }
    for (uint32_t i = 0; i < (uint32_t) pds.size(); ++i) {
        VkPhysicalDeviceProperties props;
        vkGetPhysicalDeviceProperties(pds[i], &props);
        if (props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
            GGML_LOG_INFO("ggml-vulkan: %s is a CPU driver: not used unless GGML_VK_VISIBLE_DEVICES names it "
                          "(index %u)\n", props.deviceName, i);
            continue;
        }
        order.push_back(i);
    }
    return order;
}

bool device_usable(VkPhysicalDevice pd, uint32_t * queue_family, uint32_t * subgroup_size) {
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    if (props.apiVersion < VK_API_VERSION_1_2) return false;

    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    f11.pNext = &f12;
    VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    f2.pNext = &f11;
    vkGetPhysicalDeviceFeatures2(pd, &f2);
    if (!f12.bufferDeviceAddress || !f11.storageBuffer16BitAccess || !f2.features.shaderInt64) return false;

    VkPhysicalDeviceSubgroupProperties sg{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2        p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext = &sg;
    vkGetPhysicalDeviceProperties2(pd, &p2);
    const VkSubgroupFeatureFlags need = VK_SUBGROUP_FEATURE_BASIC_BIT | VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
    if ((sg.supportedOperations & need) != need || !(sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT)) return false;
    *subgroup_size = sg.subgroupSize;

    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> qs(nq);
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qs.data());
    for (uint32_t i = 0; i < nq; i++) {
        if (qs[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
            *queue_family = i;
            return true;
        }
    }
    return false;
}

vk_instance_state & instance_state();

void init_device_objects(vk_device * dev); // below: ggml device/buffer-type objects

vk_instance_state * create_instance() {
    auto * st = new vk_instance_state();

    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "ggml-sdx";
    app.apiVersion       = VK_API_VERSION_1_2;

    std::vector<const char *> layers, exts;
    const bool want_validation = env_flag("GGML_VK_VALIDATE");
    if (want_validation) {
        if (has_layer("VK_LAYER_KHRONOS_validation")) {
            layers.push_back("VK_LAYER_KHRONOS_validation");
            exts.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
            st->validation = true;
        } else {
            GGML_LOG_ERROR("ggml-vulkan: GGML_VK_VALIDATE is set but VK_LAYER_KHRONOS_validation is not installed\n");
        }
    }

    VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo        = &app;
    ci.enabledLayerCount       = (uint32_t) layers.size();
    ci.ppEnabledLayerNames     = layers.data();
    ci.enabledExtensionCount   = (uint32_t) exts.size();
    ci.ppEnabledExtensionNames = exts.data();
    VkDebugUtilsMessengerCreateInfoEXT mci{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
    mci.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    mci.messageType     = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
    mci.pfnUserCallback = debug_callback;
    if (st->validation) ci.pNext = &mci; // also covers vkCreateInstance / vkDestroyInstance

    VkResult r = vkCreateInstance(&ci, nullptr, &st->instance);
    if (r != VK_SUCCESS) {
        // no loader/driver: the family exists with zero devices
        GGML_LOG_INFO("ggml-vulkan: vkCreateInstance failed (%d); no Vulkan devices\n", (int) r);
        st->instance   = VK_NULL_HANDLE;
        st->validation = false;
        return st;
    }
    if (st->validation) {
        auto create = (PFN_vkCreateDebugUtilsMessengerEXT) vkGetInstanceProcAddr(st->instance, "vkCreateDebugUtilsMessengerEXT");
        if (!create || create(st->instance, &mci, nullptr, &st->messenger) != VK_SUCCESS) {
            GGML_LOG_ERROR("ggml-vulkan: cannot create the validation messenger\n");
            g_validation_messages.fetch_add(1); // a run that asked for validation must not pass without it
        }
    }

    uint32_t n = 0;
    vkEnumeratePhysicalDevices(st->instance, &n, nullptr);
    std::vector<VkPhysicalDevice> pds(n);
    vkEnumeratePhysicalDevices(st->instance, &n, pds.data());
    for (uint32_t raw : visible_device_order(pds)) {
        VkPhysicalDevice pd = pds[raw];
        uint32_t qf = 0, sg = 0;
        if (!device_usable(pd, &qf, &sg)) continue;
        if (st->devices.size() >= GGML_VK_MAX_DEVICES) break;
        auto dev           = std::make_unique<vk_device>();
        dev->index         = (int) st->devices.size();
        dev->name          = std::string(GGML_VK_NAME) + std::to_string(dev->index);
        dev->phys          = pd;
        dev->queue_family  = qf;
        dev->subgroup_size = sg;
        vkGetPhysicalDeviceProperties(pd, &dev->props);
        vkGetPhysicalDeviceMemoryProperties(pd, &dev->mem_props);
        VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
        VkPhysicalDeviceProperties2            p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
        p2.pNext = &m3;
        vkGetPhysicalDeviceProperties2(pd, &p2);
        dev->max_alloc = (size_t) m3.maxMemoryAllocationSize;
        dev->description = dev->props.deviceName;
        dev->gemm_direct = dev->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
        {
            VkPhysicalDeviceSubgroupProperties sgp{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
            VkPhysicalDeviceProperties2        sp2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
            sp2.pNext = &sgp;
            vkGetPhysicalDeviceProperties2(pd, &sp2);
            // the broadcast GEMM is written for 8 lanes (lavapipe's 256-bit vectors of F32)
            dev->gemm_sg = dev->gemm_direct && sg == 8 && (sgp.supportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT);
        }
        if (const char * g = getenv("GGML_VK_GEMM")) {
            if (strcmp(g, "shared") == 0) dev->gemm_direct = dev->gemm_sg = false;
            if (strcmp(g, "direct") == 0) { dev->gemm_direct = true; dev->gemm_sg = false; }
        }
        switch (dev->props.deviceType) {
            case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: dev->type = GGML_BACKEND_DEVICE_TYPE_IGPU; break;
            default: dev->type = GGML_BACKEND_DEVICE_TYPE_GPU; break; // lavapipe (CPU type) is still an offload target
        }
        init_device_objects(dev.get());
        st->devices.push_back(std::move(dev));
    }
    return st;
}

vk_instance_state * g_state = nullptr;

// At process exit: every device, then the instance (leak checkers and the validation layer
// see a clean shutdown). Runs after the static destructors of objects created later.
void destroy_all() {
    vk_instance_state * st = g_state;
    if (!st) return;
    g_shut_down = true;
    for (auto & dp : st->devices) {
        vk_device * dev = dp.get();
        if (!dev->init_ok || !dev->device) continue;
        vkDeviceWaitIdle(dev->device);
        vk_destroy_pipelines(dev);
        if (dev->layout) vkDestroyPipelineLayout(dev->device, dev->layout, nullptr);
        if (dev->pipeline_cache) vkDestroyPipelineCache(dev->device, dev->pipeline_cache, nullptr);
        if (dev->xfer_fence) vkDestroyFence(dev->device, dev->xfer_fence, nullptr);
        if (dev->xfer_pool) vkDestroyCommandPool(dev->device, dev->xfer_pool, nullptr);
        vk_pool_destroy(dev->host_pool);
        vk_pool_destroy(dev->device_pool);
        vkDestroyDevice(dev->device, nullptr);
        dev->device = VK_NULL_HANDLE;
    }
    if (st->messenger) {
        auto destroy = (PFN_vkDestroyDebugUtilsMessengerEXT) vkGetInstanceProcAddr(st->instance, "vkDestroyDebugUtilsMessengerEXT");
        if (destroy) destroy(st->instance, st->messenger, nullptr);
    }
    // The instance itself is left to the OS at exit: destroying it makes the Vulkan loader unload
    // the driver, and Mesa's lavapipe then leaves one 128-byte allocation behind that
    // LeakSanitizer reports with no module to attribute or suppress, so every process that had
    // listed the registry failed the sanitizer pass. Kept, the driver's globals still reach it.
    // The device objects stay allocated too: registries and leaked handles may still point at them.
}

vk_instance_state & instance_state() {
    static vk_instance_state * st = [] {
        g_state = create_instance();
        atexit(destroy_all);
        return g_state;
    }();
    return *st;
}

bool init_logical(vk_device * dev) {
    float                   prio = 1.0f;
    VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    qci.queueFamilyIndex = dev->queue_family;
    qci.queueCount       = 1;
    qci.pQueuePriorities = &prio;

    // optional features application shaders may use (ggml_ext_vulkan_v1 reports them)
    std::vector<const char *> exts;
    bool                      has_coopmat_nv = false;
    {
        uint32_t ne = 0;
        vkEnumerateDeviceExtensionProperties(dev->phys, nullptr, &ne, nullptr);
        std::vector<VkExtensionProperties> avail(ne);
        vkEnumerateDeviceExtensionProperties(dev->phys, nullptr, &ne, avail.data());
        for (const auto & e : avail) {
            if (strcmp(e.extensionName, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME) == 0) dev->feat_int_dot = true;
            if (strcmp(e.extensionName, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME) == 0) {
                dev->feat_subgroup_size_control = true;
            }
            if (strcmp(e.extensionName, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME) == 0) has_coopmat_nv = true;
        }
    }
    VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR qdot{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
    VkPhysicalDeviceVulkan12Features avail12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2        avail2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    avail2.pNext = &avail12;
    qdot.pNext   = has_coopmat_nv ? &cm : nullptr;
    avail12.pNext = dev->feat_int_dot ? (void *) &qdot : (has_coopmat_nv ? (void *) &cm : nullptr);
    vkGetPhysicalDeviceFeatures2(dev->phys, &avail2);
    has_coopmat_nv = has_coopmat_nv && cm.cooperativeMatrix;
    if (has_coopmat_nv) {
        // the configurations the device offers (an instance-level query of the extension)
        auto get = (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV) vkGetInstanceProcAddr(
            instance_state().instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
        uint32_t n = 0;
        if (get && get(dev->phys, &n, nullptr) == VK_SUCCESS && n > 0) {
            dev->coopmat_nv.assign(n, VkCooperativeMatrixPropertiesNV{VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
            if (get(dev->phys, &n, dev->coopmat_nv.data()) != VK_SUCCESS) n = 0;
            dev->coopmat_nv.resize(n);
        }
        has_coopmat_nv = !dev->coopmat_nv.empty();
    }
    dev->feat_int_dot = dev->feat_int_dot && qdot.shaderIntegerDotProduct;
    dev->feat_storage8 = avail12.storageBuffer8BitAccess;
    dev->feat_int8     = avail12.shaderInt8;
    dev->feat_float16  = avail12.shaderFloat16;
    dev->feat_int16    = avail2.features.shaderInt16;
    if (dev->feat_int_dot) exts.push_back(VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    if (has_coopmat_nv) exts.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);

    VkPhysicalDeviceShaderIntegerDotProductFeaturesKHR qdot_on{
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES_KHR};
    qdot_on.shaderIntegerDotProduct = VK_TRUE;
    VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    f12.bufferDeviceAddress     = VK_TRUE;
    f12.storageBuffer8BitAccess = dev->feat_storage8 ? VK_TRUE : VK_FALSE;
    f12.shaderInt8              = dev->feat_int8 ? VK_TRUE : VK_FALSE;
    f12.shaderFloat16           = dev->feat_float16 ? VK_TRUE : VK_FALSE;
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cm_on{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
    cm_on.cooperativeMatrix = VK_TRUE;
    if (has_coopmat_nv) qdot_on.pNext = &cm_on;
    if (dev->feat_int_dot) {
        f12.pNext = &qdot_on;
    } else if (has_coopmat_nv) {
        f12.pNext = &cm_on;
    }
    VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
    f11.storageBuffer16BitAccess = VK_TRUE;
    f11.pNext                    = &f12;
    VkPhysicalDeviceFeatures2 f2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    f2.features.shaderInt64 = VK_TRUE;
    f2.features.shaderInt16 = dev->feat_int16 ? VK_TRUE : VK_FALSE;
    f2.pNext                = &f11;

    VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.pNext                   = &f2;
    dci.enabledExtensionCount   = (uint32_t) exts.size();
    dci.ppEnabledExtensionNames = exts.data();
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos    = &qci;
    VkResult r = vkCreateDevice(dev->phys, &dci, nullptr, &dev->device);
    if (r != VK_SUCCESS) {
        vk_check_failed(r, "vkCreateDevice");
        return false;
    }
    vkGetDeviceQueue(dev->device, dev->queue_family, 0, &dev->queue);

    // memory types: device-local (prefer also host-visible: mapped directly) and host-visible
    uint32_t dl = UINT32_MAX, dl_mapped = UINT32_MAX, hv = UINT32_MAX, hv_cached = UINT32_MAX;
    for (uint32_t i = 0; i < dev->mem_props.memoryTypeCount; i++) {
        const VkMemoryPropertyFlags f = dev->mem_props.memoryTypes[i].propertyFlags;
        const bool host = (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
        if ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && dl == UINT32_MAX) dl = i;
        if ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && host && dl_mapped == UINT32_MAX) dl_mapped = i;
        if (host && hv == UINT32_MAX) hv = i;
        if (host && (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) && hv_cached == UINT32_MAX) hv_cached = i;
    }
    if (hv == UINT32_MAX) {
        GGML_LOG_ERROR("ggml-vulkan: %s has no host-visible coherent memory\n", dev->description.c_str());
        return false;
    }
    if (dl == UINT32_MAX) dl = hv;
    // GGML_VK_FORCE_STAGING=1 exercises the discrete-GPU path (staging copies) on a UMA device
    const bool force_staging = env_flag("GGML_VK_FORCE_STAGING");
    // on a discrete GPU the small host-visible device-local window (BAR) is not used for tensors
    const bool uma = dev->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ||
                     dev->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    if (uma && dl_mapped != UINT32_MAX && !force_staging) {
        dev->device_pool.mem_type = dl_mapped;
        dev->device_pool.map      = true;
        dev->device_mapped        = true;
    } else {
        dev->device_pool.mem_type = dl;
        dev->device_pool.map      = false;
        dev->device_mapped        = false;
    }
    dev->host_pool.mem_type = hv_cached != UINT32_MAX ? hv_cached : hv;
    dev->host_pool.map      = true;

    // blocks of 256 MiB (fewer than the ~4096 allocations drivers allow), never above the limit
    const size_t max_alloc       = dev->max_alloc;
    dev->device_pool.dev         = dev;
    dev->device_pool.block_size  = std::min<size_t>((size_t) 256 << 20, max_alloc);
    dev->host_pool.dev           = dev;
    dev->host_pool.block_size    = std::min<size_t>((size_t) 64 << 20, max_alloc);

    VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.flags            = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = dev->queue_family;
    if ((r = vkCreateCommandPool(dev->device, &pci, nullptr, &dev->xfer_pool)) != VK_SUCCESS) {
        vk_check_failed(r, "vkCreateCommandPool");
        return false;
    }
    VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool        = dev->xfer_pool;
    cai.level              = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    if ((r = vkAllocateCommandBuffers(dev->device, &cai, &dev->xfer_cmd)) != VK_SUCCESS) {
        vk_check_failed(r, "vkAllocateCommandBuffers");
        return false;
    }
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if ((r = vkCreateFence(dev->device, &fci, nullptr, &dev->xfer_fence)) != VK_SUCCESS) {
        vk_check_failed(r, "vkCreateFence");
        return false;
    }
    return vk_init_pipeline_layout(dev);
}

// ---------------------------------------------------------------------------------------------
// ggml device interface

vk_device * dev_of(ggml_backend_dev_t d) { return static_cast<vk_device *>(d->context); }

const char * dev_get_name(ggml_backend_dev_t d) { return dev_of(d)->name.c_str(); }
const char * dev_get_description(ggml_backend_dev_t d) { return dev_of(d)->description.c_str(); }

void dev_get_memory(ggml_backend_dev_t d, size_t * free_mem, size_t * total_mem) {
    vk_device * dev   = dev_of(d);
    size_t      total = 0;
    for (uint32_t i = 0; i < dev->mem_props.memoryHeapCount; i++) {
        if (dev->mem_props.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
            total = std::max<size_t>(total, (size_t) dev->mem_props.memoryHeaps[i].size);
        }
    }
    if (free_mem) *free_mem = total; // VK_EXT_memory_budget is optional; report the heap size
    if (total_mem) *total_mem = total;
}

enum ggml_backend_dev_type dev_get_type(ggml_backend_dev_t d) { return dev_of(d)->type; }

void dev_get_props(ggml_backend_dev_t d, ggml_backend_dev_props * props) {
    memset(props, 0, sizeof(*props));
    props->name        = dev_get_name(d);
    props->description = dev_get_description(d);
    props->type        = dev_get_type(d);
    dev_get_memory(d, &props->memory_free, &props->memory_total);
    props->caps.async                = false;
    props->caps.host_buffer          = true;
    props->caps.buffer_from_host_ptr = false;
    props->caps.events               = false;
    props->caps.mmap_support         = false;
}

ggml_backend_t dev_init_backend(ggml_backend_dev_t d, const char * params) {
    (void) params;
    return vk_backend_new(dev_of(d));
}

ggml_backend_buffer_type_t dev_get_buffer_type(ggml_backend_dev_t d) { return &dev_of(d)->buft; }
ggml_backend_buffer_type_t dev_get_host_buffer_type(ggml_backend_dev_t d) { return &dev_of(d)->host_buft; }

bool dev_supports_op(ggml_backend_dev_t d, const ggml_tensor * op) { return vk_op_supported(dev_of(d), op); }

bool dev_supports_buft(ggml_backend_dev_t d, ggml_backend_buffer_type_t buft) {
    return vk_buft_is_device(buft, dev_of(d));
}

// Big batched ops are worth the copies to the device; the scheduler asks this for weights in
// host memory. Keep upstream's rule of thumb (batch >= 32).
bool dev_offload_op(ggml_backend_dev_t d, const ggml_tensor * op) {
    (void) d;
    return op->ne[1] >= 32 && op->op != GGML_OP_GET_ROWS;
}

const ggml_backend_device_i device_iface = {
    /* .get_name             = */ dev_get_name,
    /* .get_description      = */ dev_get_description,
    /* .get_memory           = */ dev_get_memory,
    /* .get_type             = */ dev_get_type,
    /* .get_props            = */ dev_get_props,
    /* .init_backend         = */ dev_init_backend,
    /* .get_buffer_type      = */ dev_get_buffer_type,
    /* .get_host_buffer_type = */ dev_get_host_buffer_type,
    /* .buffer_from_host_ptr = */ nullptr,
    /* .supports_op          = */ dev_supports_op,
    /* .supports_buft        = */ dev_supports_buft,
    /* .offload_op           = */ dev_offload_op,
    /* .event_new            = */ nullptr,
    /* .event_free           = */ nullptr,
    /* .event_synchronize    = */ nullptr,
};

// ---------------------------------------------------------------------------------------------
// Registry entry

const char * reg_get_name(ggml_backend_reg_t) { return GGML_VK_NAME; }
size_t       reg_get_device_count(ggml_backend_reg_t) { return instance_state().devices.size(); }

ggml_backend_dev_t reg_get_device(ggml_backend_reg_t, size_t index) {
    vk_device * dev = vk_get_device(index);
    GGML_ASSERT(dev && "Vulkan device index out of range");
    return &dev->gdev;
}

void * reg_get_proc_address(ggml_backend_reg_t, const char * name) {
    if (!name) return nullptr;
    if (strcmp(name, "ggml_backend_vk_validation_message_count") == 0) {
        return (void *) ggml_backend_vk_validation_message_count;
    }
    if (strcmp(name, "ggml_ext_vulkan_v1") == 0) return const_cast<void *>(vk_ext_service_table());
    return nullptr;
}

const ggml_backend_reg_i reg_iface = {
    /* .get_name         = */ reg_get_name,
    /* .get_device_count = */ reg_get_device_count,
    /* .get_device       = */ reg_get_device,
    /* .get_proc_address = */ reg_get_proc_address,
};

ggml_backend_reg vk_reg = {
    /* .api_version = */ GGML_BACKEND_API_VERSION,
    /* .iface       = */ reg_iface,
    /* .context     = */ nullptr,
};

void init_device_objects(vk_device * dev) {
    dev->gdev.iface   = device_iface;
    dev->gdev.reg     = &vk_reg;
    dev->gdev.context = dev;
    vk_init_buffer_types(dev);
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Internal API

void vk_check_failed(VkResult r, const char * what) { GGML_LOG_ERROR("ggml-vulkan: %s failed: VkResult %d\n", what, (int) r); }

size_t vk_device_count() { return instance_state().devices.size(); }

bool vk_shut_down() { return g_shut_down.load(); }

vk_device * vk_get_device(size_t index) {
    vk_instance_state & st = instance_state();
    return index < st.devices.size() ? st.devices[index].get() : nullptr;
}

bool vk_device_ready(vk_device * dev) {
    std::call_once(dev->init_once, [dev] { dev->init_ok = init_logical(dev); });
    return dev->init_ok;
}

VkResult vk_submit(vk_device * dev, VkCommandBuffer cmd, VkFence fence) {
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers    = &cmd;
    std::lock_guard<std::mutex> lock(dev->queue_mtx);
    return vkQueueSubmit(dev->queue, 1, &si, fence);
}

VkResult vk_submit_wait(vk_device * dev, VkCommandBuffer cmd, VkFence fence) {
    VkResult r = vk_submit(dev, cmd, fence);
    if (r != VK_SUCCESS) return r;
    r = vkWaitForFences(dev->device, 1, &fence, VK_TRUE, UINT64_MAX);
    if (r != VK_SUCCESS) return r;
    return vkResetFences(dev->device, 1, &fence);
}

// ---------------------------------------------------------------------------------------------
// Public API

extern "C" {

ggml_backend_reg_t ggml_backend_vk_reg(void) {
    (void) instance_state(); // discover devices before the registry lists them
    return &vk_reg;
}

int ggml_backend_vk_get_device_count(void) { return (int) vk_device_count(); }

void ggml_backend_vk_get_device_description(int device, char * description, size_t description_size) {
    vk_device * dev = device >= 0 ? vk_get_device((size_t) device) : nullptr;
    if (!description || description_size == 0) return;
    snprintf(description, description_size, "%s", dev ? dev->description.c_str() : "");
}

void ggml_backend_vk_get_device_memory(int device, size_t * free_mem, size_t * total_mem) {
    vk_device * dev = device >= 0 ? vk_get_device((size_t) device) : nullptr;
    if (!dev) {
        if (free_mem) *free_mem = 0;
        if (total_mem) *total_mem = 0;
        return;
    }
    dev_get_memory(&dev->gdev, free_mem, total_mem);
}

ggml_backend_buffer_type_t ggml_backend_vk_buffer_type(size_t dev_num) {
    vk_device * dev = vk_get_device(dev_num);
    return dev ? &dev->buft : nullptr;
}

ggml_backend_buffer_type_t ggml_backend_vk_host_buffer_type(void) {
    vk_device * dev = vk_get_device(0);
    return dev ? &dev->host_buft : nullptr;
}

bool ggml_backend_vk_validation_enabled(void) { return instance_state().validation; }

size_t ggml_backend_vk_validation_message_count(void) { return g_validation_messages.load(); }

} // extern "C"
