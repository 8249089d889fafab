#pragma once

// bench-vulkan-krea2.h — the sd rows of bench-vulkan (built when sd-core is): the INT8 ConvRot
// linear and the Krea2 DiT block, on a Vulkan device against our CPU backend and the previous
// Vulkan kernel, and the INT8 block against the F32 block on the same device, all in one run.

#include "bench-util.h"

#include <cstdint>
#include <string>
#include <vector>

namespace bench_vk_sd {

struct options {
    bool    smoke   = false;
    int     threads = 0;    // CPU backend threads (0: its default)
    int     device  = 0;    // Vulkan device index
    int64_t hidden  = 6144; // the block's hidden width (heads = hidden / 128, KV heads = heads / 4)
    int64_t tokens  = 64;   // the block's token count (text tokens: a quarter)
    int     rounds  = 3;    // interleaved timing rounds per variant
};

// The INT8 ConvRot linear (F32 activations quantized in the graph, G = 256) at K = N = 3072 x
// 256 tokens (--smoke: 256 x 32): Vulkan vs the CPU backend and vs the previous Vulkan INT8
// kernel (SD_VK_LINEAR_I8=tile4). Appends rows; false when a variant could not run.
bool int8_linear_rows(const options & o, std::vector<bench::row> & out);

// One Krea2 block (krea2::build_block through krea2::runner, weights in device memory on Vulkan)
// in F32 and INT8 ConvRot: the Vulkan INT8 block vs the Vulkan F32 block, vs the CPU backend's
// INT8 block and vs the previous Vulkan INT8 kernel; the Vulkan F32 block vs the CPU backend's.
// Appends rows; false (with a message on stderr) when a configuration could not run.
bool krea2_block_rows(const options & o, std::vector<bench::row> & out);

} // namespace bench_vk_sd
