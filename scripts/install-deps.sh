#!/usr/bin/env bash
# Installs the Debian packages the build and tests need, only those that are missing.
# Safe to run repeatedly; used by both README commands.
set -euo pipefail

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
# libopenblas-dev: the sgemm baseline of bench-ops (optional for the library itself)
# libdnnl-dev: oneDNN, the s8 matmul baseline of bench-int8 (optional for the library itself)
# python3-numpy, python3-pip: the Python side of test-io (tests/io_roundtrip.py)
# libvulkan-dev, glslc: the Vulkan backend (GGML_VULKAN builds where both are present)
# mesa-vulkan-drivers: lavapipe, the CPU Vulkan driver test-vulkan runs on; vulkan-validationlayers:
#   the Khronos validation layer test-vulkan turns on (any message fails a test)
for pkg in cmake make g++ libgtest-dev python3 python3-numpy python3-pip libopenblas-dev libdnnl-dev pkg-config \
           libvulkan-dev glslc mesa-vulkan-drivers vulkan-validationlayers; do
    have_pkg "$pkg" || need+=("$pkg")
done
# qemu-user: scripts/test-qemu-avx2.sh runs the unit tests as an AVX2-only CPU (qemu-x86_64 -cpu Haswell)
# g++-aarch64-linux-gnu (with its libc6-dev-arm64-cross): scripts/test-qemu-aarch64.sh cross-builds the
# unit tests for aarch64 and runs them under qemu-user (qemu-aarch64 -cpu max / cortex-a72)
if [ "$(uname -m)" = x86_64 ]; then
    for pkg in qemu-user g++-aarch64-linux-gnu; do have_pkg "$pkg" || need+=("$pkg"); done
fi
# ccache: the option builds of scripts/test-options.sh reuse the default build's objects
have_pkg ccache || need+=(ccache)
# clang-14, libclang-rt-14-dev: libFuzzer for scripts/test-fuzz.sh (tests/fuzz)
for pkg in clang-14 libclang-rt-14-dev; do have_pkg "$pkg" || need+=("$pkg"); done

if ((${#need[@]})); then
    echo "install-deps: installing ${need[*]}"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null; then SUDO=sudo; else
            echo "install-deps: need root (or sudo) to install: ${need[*]}" >&2; exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq || echo "install-deps: apt-get update failed; trying install anyway" >&2
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

# test-io checks our safetensors files against the reference implementation, the `safetensors`
# Python package, and the GGUF tests check ours against the `gguf` package (neither packaged by
# Debian 12), with numpy, in whichever python3 is first on PATH (which may not be Debian's). pip runs
# only when an import is missing.
if ! python3 -c 'import numpy, safetensors, gguf' >/dev/null 2>&1; then
    echo "install-deps: installing numpy, safetensors and gguf for $(command -v python3) with pip"
    export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
    python3 -m pip install --quiet numpy safetensors gguf >/dev/null 2>&1 ||
        python3 -m pip install --quiet --break-system-packages numpy safetensors gguf ||
        echo "install-deps: could not install numpy/safetensors/gguf; the Python cross-checks will fail" >&2
fi
