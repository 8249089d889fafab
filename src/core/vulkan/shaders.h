#pragma once

// shaders.h — the SPIR-V of src/core/vulkan/shaders/*.comp, compiled by glslc at build time and
// embedded by the generated sd-vk-shaders.cpp (kernels.cmake).

#include <cstddef>
#include <cstdint>

struct sd_vk_shader {
    const char *     name; // file name without .comp
    const uint32_t * words;
    size_t           size; // bytes
};

// NULL if there is no such shader
const sd_vk_shader * sd_vk_find_shader(const char * name);
