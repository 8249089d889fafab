#!/usr/bin/env bash
# Builds everything and runs every test: first the optimised build, then the same suite under
# AddressSanitizer + UndefinedBehaviorSanitizer. Usage: scripts/test.sh [--no-sanitize | --tsan]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
[ "${1:-}" = "--tsan" ] && exec scripts/test-tsan.sh "$(nproc)" # ThreadSanitizer pass only

jobs=$(nproc)
# ccache (installed by install-deps.sh) lets the option builds of test-options.sh reuse the objects
# of this build whose flags they share
launcher=()
if command -v ccache >/dev/null 2>&1; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
sanitize=1
[ "${1:-}" = "--no-sanitize" ] && sanitize=0

scripts/check-public-includes.sh src/core/vulkan # the sd Vulkan kernels include no private ggml header
# The CUDA backend is compiled (sm_80 and sm_90) and its host tests run (0 devices: the device
# tests skip) wherever the CUDA toolkit is installed; install-deps.sh cannot install it
cuda=()
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -n "$nvcc" ]; then
    cuda=(-DGGML_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" "-DCMAKE_CUDA_ARCHITECTURES=80;90")
    ((${#launcher[@]})) && cuda+=(-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
    echo "== CUDA toolkit found ($nvcc): the Release build includes the CUDA backend"
fi
echo "== Release build and tests"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "${cuda[@]}" >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build -j"$jobs" --output-on-failure --timeout 600
scripts/test-options.sh "$jobs" # every non-default CMake option: builds what it changes, runs its tests
# the CPU unit tests cross-built for aarch64 and run under qemu-aarch64 (-cpu max and cortex-a72),
# right after test-options.sh's emulated AVX2 pass; skipped on non-x86-64 hosts
scripts/test-qemu-aarch64.sh "$jobs"
scripts/test-install.sh
scripts/test-sdcpp.sh # stable-diffusion.cpp (PyPI sdist) on the installed package: builds sd-cli, one 64x64 image
if [ "${SD_TEST_UPSTREAM:-0}" = 1 ]; then scripts/test-upstream.sh; fi

if ((sanitize)); then
    echo "== Sanitizer build (address;undefined) and tests"
    cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSD_SANITIZE="address;undefined" \
          -DSD_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
    cmake --build build-asan -j"$jobs"
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        ctest --test-dir build-asan -j"$jobs" --output-on-failure --timeout 1200 \
              -E '^test-vulkan-(staging|gemm-shared|gemm-direct)$'
    # left out of the sanitizer pass (CI time; all three run in the Release pass): the GEMM reruns of
    # test-vulkan change only which shader runs; its staging rerun's host path (staging copies) runs
    # under the sanitizers in the staging reruns of test-vulkan-sd, test-vulkan-ext and
    # test-ext-differential-vulkan
fi
if ((sanitize)); then scripts/test-fuzz.sh; fi # libFuzzer targets of the file readers, ~25 s each (tests/fuzz)
echo "== all tests passed"
