#!/usr/bin/env bash
# The main job. Until the `sdx` program exists this builds the runtime and runs the op
# benchmark on its default (DiT-sized) shapes, printing a table. Extra arguments go to the
# benchmark (see: build/bench/bench-ops --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target bench-ops
exec build/bench/bench-ops "$@"
