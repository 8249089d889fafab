// vk-pipelines.cpp — compute pipelines: one shader module per embedded SPIR-V, one pipeline per
// (shader, specialization constants), created on first use and cached for the device's lifetime.
// Drivers such as lavapipe compile each pipeline with LLVM (tens of ms to seconds), so variants
// are specialization constants of a few shaders, never per-shape recompiles.
//
// All pipelines share one layout: no descriptor sets, an 8-byte push constant holding the
// device address of the dispatch's parameter block (see vk-internal.h).

#include "vk-internal.h"
#include "vk-shaders.h"

bool vk_init_pipeline_layout(vk_device * dev) {
    VkPushConstantRange pc{};
    pc.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    pc.offset     = 0;
    pc.size       = sizeof(uint64_t);
    VkPipelineLayoutCreateInfo li{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    li.pushConstantRangeCount = 1;
    li.pPushConstantRanges    = &pc;
    VkResult r = vkCreatePipelineLayout(dev->device, &li, nullptr, &dev->layout);
    if (r != VK_SUCCESS) {
        vk_check_failed(r, "vkCreatePipelineLayout");
        return false;
    }
    VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    if ((r = vkCreatePipelineCache(dev->device, &ci, nullptr, &dev->pipeline_cache)) != VK_SUCCESS) {
        dev->pipeline_cache = VK_NULL_HANDLE; // optional
    }
    return true;
}

VkPipeline vk_get_pipeline(vk_device * dev, const char * name, const std::vector<int32_t> & spec) {
    std::string key = name;
    for (int32_t v : spec) key += ":" + std::to_string(v);

    std::lock_guard<std::mutex> lock(dev->pipe_mtx);
    auto it = dev->pipelines.find(key);
    if (it != dev->pipelines.end()) return it->second;

    VkShaderModule & mod = dev->modules[name];
    if (mod == VK_NULL_HANDLE) {
        const vk_shader_blob * blob = vk_find_shader(name);
        GGML_ASSERT(blob && "ggml-vulkan: shader not embedded");
        VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
        mi.codeSize = blob->size;
        mi.pCode    = blob->words;
        VkResult r  = vkCreateShaderModule(dev->device, &mi, nullptr, &mod);
        if (r != VK_SUCCESS) {
            vk_check_failed(r, "vkCreateShaderModule");
            dev->modules.erase(name);
            return VK_NULL_HANDLE;
        }
    }

    std::vector<VkSpecializationMapEntry> entries(spec.size());
    for (size_t i = 0; i < spec.size(); i++) {
        entries[i].constantID = (uint32_t) i;
        entries[i].offset     = (uint32_t) (i * sizeof(int32_t));
        entries[i].size       = sizeof(int32_t);
    }
    VkSpecializationInfo si{};
    si.mapEntryCount = (uint32_t) entries.size();
    si.pMapEntries   = entries.data();
    si.dataSize      = spec.size() * sizeof(int32_t);
    si.pData         = spec.data();

    VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage.sType               = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage               = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module              = mod;
    ci.stage.pName               = "main";
    ci.stage.pSpecializationInfo = spec.empty() ? nullptr : &si;
    ci.layout                    = dev->layout;
    VkPipeline p                 = VK_NULL_HANDLE;
    VkResult   r = vkCreateComputePipelines(dev->device, dev->pipeline_cache, 1, &ci, nullptr, &p);
    if (r != VK_SUCCESS) {
        vk_check_failed(r, ("vkCreateComputePipelines " + key).c_str());
        return VK_NULL_HANDLE;
    }
    dev->pipelines[key] = p;
    return p;
}

void vk_destroy_pipelines(vk_device * dev) {
    std::lock_guard<std::mutex> lock(dev->pipe_mtx);
    for (auto & kv : dev->pipelines) vkDestroyPipeline(dev->device, kv.second, nullptr);
    for (auto & kv : dev->modules) vkDestroyShaderModule(dev->device, kv.second, nullptr);
    dev->pipelines.clear();
    dev->modules.clear();
    vk_ext_destroy_pipelines(dev); // application pipelines live exactly as long
}
