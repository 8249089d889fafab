#pragma once

// vk-shaders.h — the SPIR-V of shaders/*.comp, compiled by glslc at build time and embedded by
// the generated vk-shaders.cpp (see vulkan.cmake).

#include <cstddef>
#include <cstdint>

struct vk_shader_blob {
    const char *     name; // file name without .comp
    const uint32_t * words;
    size_t           size; // bytes
};

const vk_shader_blob * vk_find_shader(const char * name);
