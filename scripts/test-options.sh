#!/usr/bin/env bash
# Builds and tests every non-default value of the project's CMake options, each in its own build
# directory, building only the targets that the option changes (the default build covers the
# rest). Called by scripts/test.sh after the default Release pass. Usage:
#   scripts/test-options.sh [JOBS]
#
#   option                    default  checked here (build dir)
#   SD_CPU_EXTENSIONS=OFF     ON       sd-core without src/core/cpu: sdx, test-io, test-model
#                                      (INT8 is a clear error, RoPE falls back to the native chain);
#                                      the CPU-kernel tests and benchmarks must not exist (build-opt-noext)
#   SD_BUILD_BENCH=OFF        ON       no bench targets (same dir as above)
#   GGML_VULKAN=OFF           ON*      the CPU-only library: no Vulkan targets, scheduler tests
#                                      (same dir as above; *ON where libvulkan-dev and glslc exist)
#   GGML_NATIVE=OFF           ON       no -march=native: the kernels' portable and runtime-dispatched
#                                      paths against their references (build-opt-portable); the same
#                                      binaries then run as an AVX2-only CPU under qemu
#                                      (scripts/test-qemu-avx2.sh)
#   SD_BUILD_TESTS=OFF        ON       everything else still builds: sdx and every benchmark, each
#                                      run with --smoke (build-opt-notests)
#   GGML_CUDA=ON              OFF      scripts/test.sh's Release pass where nvcc exists (sm_80;sm_90, host
#                                      tests; no device: device tests skip); scripts/test-cuda.sh on a GPU
#   SD_SANITIZE               ""       address;undefined: scripts/test.sh; thread: scripts/test-tsan.sh
#   SD_BUILD_FUZZ             OFF      scripts/test-fuzz.sh (clang, libFuzzer)
#   GGML_MAX_NAME             64       160, as stable-diffusion.cpp defines it: scripts/test-install.sh
#
# ccache is used when installed (not required).
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=${1:-$(nproc)}
launcher=()
if command -v ccache >/dev/null 2>&1; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

configure() { # DIR OPTIONS...
    local dir=$1
    shift
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@" >/dev/null
}

build() { # DIR TARGETS...
    local dir=$1
    shift
    cmake --build "$dir" -j"$jobs" --target "$@"
}

has_target() { # DIR TARGET
    cmake --build "$1" --target help 2>/dev/null | grep -qE "^\.\.\. $2( |\$)"
}

expect_no_targets() { # DIR WHY TARGETS...
    local dir=$1 why=$2
    shift 2
    for t in "$@"; do
        if has_target "$dir" "$t"; then
            echo "test-options: target $t exists with $why" >&2
            exit 1
        fi
    done
}

run_tests() { # DIR TESTS...
    local dir=$1
    shift
    for t in "$@"; do
        echo "-- $dir: $t"
        "$dir/tests/$t" --gtest_brief=1
    done
}

echo "== option SD_CPU_EXTENSIONS=OFF (with SD_BUILD_BENCH=OFF, GGML_VULKAN=OFF)"
d=build-opt-noext
configure "$d" -DSD_CPU_EXTENSIONS=OFF -DSD_BUILD_BENCH=OFF -DGGML_VULKAN=OFF
expect_no_targets "$d" GGML_VULKAN=OFF test-vulkan test-sdx-vulkan bench-vulkan test-vulkan-ext test-vulkan-registration
expect_no_targets "$d" SD_CPU_EXTENSIONS=OFF test-int8 test-sd-ops test-fusion-norm-quant \
    test-fusion-gate-quant test-fusion-linear-epilogue
expect_no_targets "$d" SD_BUILD_BENCH=OFF bench-ops bench-sched bench-int8 bench-sd-ops
build "$d" sdx test-io test-model test-sched
run_tests "$d" test-io test-model test-sched

echo "== option GGML_NATIVE=OFF"
d=build-opt-portable
configure "$d" -DGGML_NATIVE=OFF -DSD_BUILD_BENCH=OFF
portable_tests=(test-core test-backend-ops test-sd-ops test-fusion-norm-quant test-fusion-gate-quant
                test-fusion-linear-epilogue test-int8 test-model test-cpu-isa)
# built for the emulated AVX2 pass only (their native runs are in the default build's ctest)
qemu_only=(test-cpu-rows test-alloc test-kernel-choice test-quants test-quant-dot test-ext test-graph-access)
build "$d" "${portable_tests[@]}" "${qemu_only[@]}"
run_tests "$d" "${portable_tests[@]}"
echo "== the unit tests as an AVX2-only CPU (qemu-x86_64 -cpu Haswell, $d)"
scripts/test-qemu-avx2.sh "$d" "$jobs"

echo "== option SD_BUILD_TESTS=OFF"
d=build-opt-notests
configure "$d" -DSD_BUILD_TESTS=OFF
benches=(bench-ops bench-sched bench-int8 bench-sd-ops)
build "$d" sdx "${benches[@]}"
for b in "${benches[@]}"; do
    echo "-- $d: $b --smoke"
    "$d/bench/$b" --smoke >/dev/null
done
"$d/tools/sdx" --help >/dev/null

echo "== every option built and tested"
