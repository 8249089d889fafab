# Cross build for 64-bit ARM Linux (Debian's g++-aarch64-linux-gnu), run under qemu-user:
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake \
#         -DGGML_NATIVE=OFF -DGGML_VULKAN=OFF -DSD_BUILD_BENCH=OFF
# scripts/test-qemu-aarch64.sh uses it. CMAKE_CROSSCOMPILING_EMULATOR makes ctest (and gtest's
# test discovery) run the test binaries under qemu-aarch64; the CPU model comes from QEMU_CPU
# (qemu's default for aarch64 is cortex-a57 when it is unset).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(SD_AARCH64_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER   ${SD_AARCH64_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${SD_AARCH64_TRIPLE}-g++)

# the target's libraries and headers: Debian's cross sysroot (libc6-dev-arm64-cross)
set(SD_AARCH64_SYSROOT /usr/${SD_AARCH64_TRIPLE} CACHE PATH "Where the aarch64 libc lives (qemu -L)")
set(CMAKE_FIND_ROOT_PATH ${SD_AARCH64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER) # build tools (python3, glslc) are the host's
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)  # never link an x86-64 library
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(SD_QEMU_AARCH64 qemu-aarch64)
if(SD_QEMU_AARCH64)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${SD_QEMU_AARCH64} -L ${SD_AARCH64_SYSROOT})
endif()
