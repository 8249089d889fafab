#!/usr/bin/env bash
# Checks against a real upstream ggml (issue 13 item 4), run by scripts/test.sh when
# SD_TEST_UPSTREAM=1: the first run needs the network (PyPI) and builds upstream's ggml (measured
# 4 min 34 s on the loaded 2-core machine without ccache); a cached rerun takes ~12 s. Upstream's
# source comes from the PyPI sdist of ggml-python, which vendors it (vendor/ggml); download,
# build and install are cached in build-upstream/.
#   1. tests/install-client (upstream-named API only) builds and passes against upstream's
#      installed package, as it does against ours in scripts/test-install.sh.
#   2. src/ (core + model + io) and sdx configured against upstream's installed package
#      (-DSD_USE_UPSTREAM_GGML=ON: src/core/ggml_compat.cpp instead of the extension
#      registrations), then tests/upstream: the F32 Krea2 stack on upstream's ops against the
#      plain double reference, BF16 near F32, INT8 refused with its reason, sdx run / inspect,
#      and the GGML_MAX_NAME mismatch guard. The build dir is kept (ccache and make make a rerun
#      incremental).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc)
sdist_version=0.0.45
work=$root/build-upstream
src=$work/ggml_python-$sdist_version/vendor
launcher=()
if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
mkdir -p "$work"

if [ ! -f "$src/ggml/CMakeLists.txt" ]; then
    echo "== fetch upstream ggml (ggml-python $sdist_version sdist from PyPI)"
    # --no-binary for this package only: its build dependencies may come as wheels
    python3 -m pip download --no-deps --no-binary ggml-python "ggml-python==$sdist_version" -d "$work/dl"
    tar -xzf "$work/dl/ggml_python-$sdist_version.tar.gz" -C "$work"
fi

if [ ! -f "$work/install/lib/cmake/ggml/ggml-config.cmake" ] && [ ! -f "$work/install/lib/cmake/ggml/ggmlConfig.cmake" ]; then
    echo "== build and install upstream ggml (CPU backend, GGML_MAX_NAME=160)"
    cmake -S "$src/ggml" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
          -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF -DGGML_NATIVE=ON -DGGML_OPENMP=OFF \
          -DCMAKE_C_FLAGS=-DGGML_MAX_NAME=160 -DCMAKE_CXX_FLAGS=-DGGML_MAX_NAME=160 \
          "${launcher[@]}" >/dev/null
    # upstream's build is noisy (GCC 12 warnings in its CPU kernels): keep the log, show its end on failure
    cmake --build "$work/build" -j"$jobs" >"$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
    cmake --install "$work/build" --prefix "$work/install" >/dev/null
fi

echo "== install-client against upstream ggml"
cmake -S tests/install-client -B "$work/client" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$work/install" \
      -DGGML_CLIENT_MAX_NAME=160 -DGGML_CLIENT_EXTRA_INCLUDE="$src" >/dev/null
cmake --build "$work/client" -j"$jobs"
"$work/client/install-client"
"$work/client/install-client-split"

echo "== src/ and sdx against upstream ggml (SD_USE_UPSTREAM_GGML)"
cmake -S . -B "$work/sd" -DCMAKE_BUILD_TYPE=Release -DSD_USE_UPSTREAM_GGML=ON -DCMAKE_PREFIX_PATH="$work/install" \
      -DGGML_MAX_NAME=160 "${launcher[@]}" >/dev/null
cmake --build "$work/sd" -j"$jobs"
ctest --test-dir "$work/sd" -j"$jobs" --output-on-failure
echo "== upstream checks passed"
