#pragma once

// int8-x86.h — the one place the INT8 kernel files get x86 intrinsics: defines SD_INT8_X86 on
// x86-64 so both files compile their AVX-512 paths under the same condition.

#if defined(__x86_64__) || defined(_M_X64)
// GCC 12 reports its own _mm512_undefined_* placeholders as maybe-uninitialized
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define SD_INT8_X86 1
#endif
