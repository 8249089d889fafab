#!/usr/bin/env bash
# The main job: builds the project and runs `sdx run` — two Krea2 DiT blocks at the real width
# (hidden 6144, 48 heads, 1024 tokens) with synthetic INT8 ConvRot weights, extensions and fusion
# on, then the same stack in F32 natively to report the deviation. Extra arguments go to `sdx run`
# (see: build/tools/sdx run --help); e.g. `scripts/run-main.sh --weights model.safetensors`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target sdx
exec build/tools/sdx run "$@"
