#pragma once

// ops-flash-attn-neon.h — the AArch64 Advanced SIMD (baseline ARMv8-A) FLASH_ATTN_EXT kernel
// (ops-flash-attn-neon.cpp), run by ops-flash-attn.cpp when the active level (cpu-isa.h) is neon or
// above. Internal. On other architectures the functions are stubs the dispatch never reaches.

#include "cpu-ops.h"

#include <cstddef>
#include <cstdint>

// Per-thread scratch of the kernel, in floats (the caller adds 64 bytes of alignment slack).
size_t ggml_neon_flash_attn_floats(int64_t D, int64_t Dv);
// Whole op on this thread's share (same contract as ggml_cpu_op_flash_attn_ext; every node that
// ggml_cpu_flash_attn_ext_supported accepts).
void ggml_neon_flash_attn_ext(const struct ggml_compute_params * params, struct ggml_tensor * dst);
