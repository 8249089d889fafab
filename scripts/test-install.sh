#!/usr/bin/env bash
# Install test for the ggml CMake package (issue 13 item 3). Builds the ggml library with
# GGML_MAX_NAME=160 (what stable-diffusion.cpp needs) in build-install/, installs it into a
# temporary prefix, builds tests/install-client against it with find_package(ggml) and runs it
# (numeric checks inside, the sd INT8 ConvRot entry points among them), compiles upstream's
# ggml-impl.h against the installed headers where an sd.cpp sdist provides it. Then checks that a client defining another GGML_MAX_NAME is refused,
# both by the package config and by ggml.h itself. Usage: scripts/test-install.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc)
launcher=()
if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

prefix=$(mktemp -d "${TMPDIR:-/tmp}/ggml-install.XXXXXX")
trap 'rm -rf "$prefix"' EXIT

echo "== ggml install test: build and install ggml (GGML_MAX_NAME=160) into $prefix"
cmake -S . -B build-install -DCMAKE_BUILD_TYPE=Release -DGGML_MAX_NAME=160 -DSD_BUILD_TESTS=OFF \
      -DSD_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build build-install -j"$jobs" --target ggml
cmake --install build-install --prefix "$prefix/usr" >/dev/null

for f in include/ggml.h include/ggml-alloc.h include/ggml-backend.h include/ggml-cpu.h include/ggml-cpp.h include/gguf.h \
         include/ggml-build-config.h include/ggml/src/ggml-impl.h lib/cmake/ggml/ggmlConfig.cmake \
         lib/cmake/ggml/ggmlConfigVersion.cmake; do
    [ -f "$prefix/usr/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done

echo "== build and run the client (find_package(ggml), ggml::ggml and ggml::ggml-base + ggml::ggml-cpu)"
cmake -S tests/install-client -B "$prefix/client" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix/usr" >/dev/null
cmake --build "$prefix/client" -j"$jobs"
"$prefix/client/install-client"
"$prefix/client/install-client-split"
# sd.cpp's INT8 ConvRot entry points run from the package alone (no sd header, no registration)
[ -x "$prefix/client/install-client-int8" ] || { echo "FAIL: the package does not report the sd INT8 kernels (ggml_HAS_SD_INT8)"; exit 1; }
"$prefix/client/install-client-int8"

echo "== upstream's private ggml/src/ggml-impl.h compiles against the installed ggml.h"
# A client may pick up upstream's own copy of that header (stable-diffusion.cpp's vendored ggml);
# every macro, type and inline it takes from ggml.h / gguf.h must be there. Checked with the copy
# in the stable-diffusion.cpp sdist when it is unpacked here (SDCPP_GGML_IMPL overrides the path).
impl=${SDCPP_GGML_IMPL:-/work/sdcpp/stable_diffusion_cpp_python-0.4.7/vendor/stable-diffusion.cpp/ggml/src/ggml-impl.h}
if [ -f "$impl" ]; then
    printf '#include "%s"\nint main(void) { return 0; }\n' "$impl" >"$prefix/impl.c"
    printf '#include "%s"\nint main() { return 0; }\n' "$impl" >"$prefix/impl.cpp"
    "${CC:-cc}" -std=c11 -Wall -Werror=implicit-function-declaration -fsyntax-only -I"$prefix/usr/include" "$prefix/impl.c"
    "${CXX:-c++}" -std=c++17 -Wall -fsyntax-only -I"$prefix/usr/include" "$prefix/impl.cpp"
    echo "ok: $impl"
else
    echo "skipped: $impl not present (unpack the stable-diffusion-cpp-python sdist or set SDCPP_GGML_IMPL)"
fi

echo "== a client defining another GGML_MAX_NAME is refused"
# by the package config (flags seen at find_package time)
if cmake -S tests/install-client -B "$prefix/client-128" -DCMAKE_PREFIX_PATH="$prefix/usr" \
         -DCMAKE_CXX_FLAGS=-DGGML_MAX_NAME=128 >"$prefix/cfg.log" 2>&1; then
    echo "FAIL: find_package(ggml) accepted GGML_MAX_NAME=128 against a 160 build"; exit 1
fi
grep -q "GGML_MAX_NAME=160" "$prefix/cfg.log" || { cat "$prefix/cfg.log"; echo "FAIL: no clear message"; exit 1; }
# by ggml.h (no CMake involved)
if "${CXX:-c++}" -std=c++17 -fsyntax-only -DGGML_MAX_NAME=128 -I"$prefix/usr/include" \
       tests/install-client/main.cpp >"$prefix/cc.log" 2>&1; then
    echo "FAIL: ggml.h accepted GGML_MAX_NAME=128 against a 160 build"; exit 1
fi
grep -q "GGML_MAX_NAME differs" "$prefix/cc.log" || { cat "$prefix/cc.log"; echo "FAIL: no clear message"; exit 1; }
# the same value is accepted
"${CXX:-c++}" -std=c++17 -fsyntax-only -DGGML_MAX_NAME=160 -I"$prefix/usr/include" tests/install-client/main.cpp

echo "== ggml install test passed"
