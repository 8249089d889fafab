// vk-ext-pipelines.cpp — pipelines of application SPIR-V (ggml_ext_vulkan_v1.dispatch).
//
// Application shaders use descriptor bindings, not the native shaders' device-address parameter
// block: set 0 holds n storage buffers at bindings 0..n-1, plus an optional push-constant block.
// Everything derived from the shader's configuration is cached per device for the device's
// lifetime (lavapipe compiles each pipeline with LLVM: tens of ms to seconds):
//   descriptor-set layout   by binding count
//   pipeline layout         by (binding count, push-constant bytes)
//   shader module           by the SPIR-V bytes (the key is the code itself: no hash collisions)
//   pipeline                by SPIR-V + binding count + push bytes + specialization values
// Nothing is created before the first dispatch that needs it (never in a kernel's prepare).

#include "vk-internal.h"

#include <cstring>

namespace {

VkDescriptorSetLayout set_layout(vk_device * dev, uint32_t n_bindings, std::string & err) {
    VkDescriptorSetLayout & l = dev->ext_set_layouts[n_bindings];
    if (l) return l;
    std::vector<VkDescriptorSetLayoutBinding> b(n_bindings);
    for (uint32_t i = 0; i < n_bindings; i++) {
        b[i].binding         = i;
        b[i].descriptorType  = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        b[i].descriptorCount = 1;
        b[i].stageFlags      = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo ci{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    ci.bindingCount = n_bindings;
    ci.pBindings    = b.data();
    const VkResult r = vkCreateDescriptorSetLayout(dev->device, &ci, nullptr, &l);
    if (r != VK_SUCCESS) {
        dev->ext_set_layouts.erase(n_bindings);
        err = "vkCreateDescriptorSetLayout failed (VkResult " + std::to_string((int) r) + ")";
        return VK_NULL_HANDLE;
    }
    return l;
}

VkPipelineLayout pipeline_layout(vk_device * dev, uint32_t n_bindings, uint32_t push_bytes, VkDescriptorSetLayout sl,
                                 std::string & err) {
    const uint64_t     key = ((uint64_t) n_bindings << 32) | push_bytes;
    VkPipelineLayout & l   = dev->ext_layouts[key];
    if (l) return l;
    VkPushConstantRange pc{};
    pc.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    pc.offset     = 0;
    pc.size       = push_bytes;
    VkPipelineLayoutCreateInfo li{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    li.setLayoutCount         = 1;
    li.pSetLayouts            = &sl;
    li.pushConstantRangeCount = push_bytes > 0 ? 1 : 0;
    li.pPushConstantRanges    = push_bytes > 0 ? &pc : nullptr;
    const VkResult r          = vkCreatePipelineLayout(dev->device, &li, nullptr, &l);
    if (r != VK_SUCCESS) {
        dev->ext_layouts.erase(key);
        err = "vkCreatePipelineLayout failed (VkResult " + std::to_string((int) r) + ")";
        return VK_NULL_HANDLE;
    }
    return l;
}

} // namespace

bool vk_ext_get_pipeline(vk_device * dev, const uint32_t * spirv, size_t spirv_bytes, uint32_t n_bindings,
                         const uint32_t * spec, uint32_t n_spec, uint32_t push_bytes, vk_ext_pipeline * out,
                         std::string & err) {
    std::string code((const char *) spirv, spirv_bytes);
    std::string key = code;
    key.append((const char *) &n_bindings, sizeof(n_bindings));
    key.append((const char *) &push_bytes, sizeof(push_bytes));
    key.append((const char *) &n_spec, sizeof(n_spec));
    if (n_spec > 0) key.append((const char *) spec, n_spec * sizeof(uint32_t));

    std::lock_guard<std::mutex> lock(dev->pipe_mtx);
    const VkDescriptorSetLayout sl = set_layout(dev, n_bindings, err);
    if (!sl) return false;
    const VkPipelineLayout pl = pipeline_layout(dev, n_bindings, push_bytes, sl, err);
    if (!pl) return false;
    out->set_layout = sl;
    out->layout     = pl;

    auto it = dev->ext_pipelines.find(key);
    if (it != dev->ext_pipelines.end()) {
        dev->ext_pipeline_hits++;
        out->pipeline = it->second;
        return true;
    }

    VkShaderModule & mod = dev->ext_modules[code];
    if (!mod) {
        VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
        mi.codeSize      = spirv_bytes;
        mi.pCode         = spirv;
        const VkResult r = vkCreateShaderModule(dev->device, &mi, nullptr, &mod);
        if (r != VK_SUCCESS) {
            dev->ext_modules.erase(code);
            err = "vkCreateShaderModule failed (VkResult " + std::to_string((int) r) + ")";
            return false;
        }
    }

    std::vector<VkSpecializationMapEntry> entries(n_spec);
    for (uint32_t i = 0; i < n_spec; i++) {
        entries[i].constantID = i;
        entries[i].offset     = i * (uint32_t) sizeof(uint32_t);
        entries[i].size       = sizeof(uint32_t);
    }
    VkSpecializationInfo si{};
    si.mapEntryCount = n_spec;
    si.pMapEntries   = entries.data();
    si.dataSize      = n_spec * sizeof(uint32_t);
    si.pData         = spec;

    VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage.sType               = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage               = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module              = mod;
    ci.stage.pName               = "main";
    ci.stage.pSpecializationInfo = n_spec > 0 ? &si : nullptr;
    ci.layout                    = pl;
    VkPipeline     p             = VK_NULL_HANDLE;
    const VkResult r             = vkCreateComputePipelines(dev->device, dev->pipeline_cache, 1, &ci, nullptr, &p);
    if (r != VK_SUCCESS) {
        err = "vkCreateComputePipelines failed (VkResult " + std::to_string((int) r) + ")";
        return false;
    }
    dev->ext_pipelines[key] = p;
    dev->ext_pipelines_created++;
    out->pipeline = p;
    return true;
}

void vk_ext_destroy_pipelines(vk_device * dev) {
    for (auto & kv : dev->ext_pipelines) vkDestroyPipeline(dev->device, kv.second, nullptr);
    for (auto & kv : dev->ext_modules) vkDestroyShaderModule(dev->device, kv.second, nullptr);
    for (auto & kv : dev->ext_layouts) vkDestroyPipelineLayout(dev->device, kv.second, nullptr);
    for (auto & kv : dev->ext_set_layouts) vkDestroyDescriptorSetLayout(dev->device, kv.second, nullptr);
    dev->ext_pipelines.clear();
    dev->ext_modules.clear();
    dev->ext_layouts.clear();
    dev->ext_set_layouts.clear();
}
