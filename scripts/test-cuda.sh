#!/usr/bin/env bash
# The CUDA checks for a machine with an NVIDIA GPU (issue 26): one script, no network needed.
#   1. configure build-cuda with -DGGML_CUDA=ON for this GPU's architecture only (default 90:
#      H100/H200; CUDA_ARCH=80 for an A100), Release, ccache when present;
#   2. build only ggml, the CUDA test programs and sdx (a few minutes on 16 cores);
#   3. run every CUDA ctest entry (test-cuda: every backend-ops case on the device, and the
#      other CUDA tests that exist: sd kernels, services, CUDA Graphs);
#   4. `sdx run --device cuda` at the real width (2 blocks x 1024 tokens, hidden 6144) in the
#      default INT8 and in BF16, and `sdx bench --device cuda`;
#   5. print a summary (exit 1 if any step failed). Logs go to build-cuda/test-cuda-logs and,
#      when $OUT is set (the device runner), are copied there too.
# Usage: scripts/test-cuda.sh [--no-build] [--skip-sdx]
set -uo pipefail
cd "$(dirname "$0")/.."

build=1 sdx_runs=1
for a in "$@"; do
    case "$a" in
        --no-build) build=0 ;;
        --skip-sdx) sdx_runs=0 ;;
        *) echo "usage: $0 [--no-build] [--skip-sdx]" >&2; exit 2 ;;
    esac
done

jobs=$(nproc)
arch=${CUDA_ARCH:-90}
nvcc=${CUDACXX:-}
[ -z "$nvcc" ] && nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc" ]; then
    echo "test-cuda.sh: nvcc not found (PATH, CUDACXX, /usr/local/cuda/bin)" >&2
    exit 1
fi
launcher=()
if command -v ccache >/dev/null 2>&1; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
logs=build-cuda/test-cuda-logs
mkdir -p "$logs"
summary=()
failed=0
# step NAME CMD...: runs CMD with its output in $logs/NAME.log (and on the console), records the result
step() {
    local name=$1
    shift
    local t0=$SECONDS
    echo "== $name: $*"
    "$@" 2>&1 | tee "$logs/$name.log"
    local rc=${PIPESTATUS[0]}
    local dt=$((SECONDS - t0))
    if [ "$rc" -eq 0 ]; then
        summary+=("ok      $name (${dt} s)")
    else
        summary+=("FAILED  $name (exit $rc, ${dt} s; $logs/$name.log)")
        failed=1
    fi
    return "$rc"
}

nvidia-smi -L 2>/dev/null || echo "(nvidia-smi not available)"
if ((build)); then
    step configure cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
        -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" -DSD_BUILD_BENCH=OFF "${launcher[@]}" ||
        { printf '%s\n' "${summary[@]}"; exit 1; }
    # ggml, sdx and every CUDA program the tree has (test-cuda, and test-cuda-sd, test-cuda-graphs
    # ... as those parts land): the targets with "cuda" in their name
    targets=(ggml sdx)
    while read -r t; do targets+=("$t"); done < <(cmake --build build-cuda --target help 2>/dev/null |
        sed -n 's/^\.\.\. \([A-Za-z0-9_.-]*cuda[A-Za-z0-9_.-]*\).*/\1/p' | sort -u)
    echo "targets: ${targets[*]}"
    step build cmake --build build-cuda -j"$jobs" --target "${targets[@]}" || { printf '%s\n' "${summary[@]}"; exit 1; }
fi

# every ctest entry of the CUDA parts: names containing "cuda" in any case (test-cuda, and the
# discovered CudaGraphs.*, CudaSd.*, ... cases of the other CUDA programs)
step ctest ctest --test-dir build-cuda -R '[Cc][Uu][Dd][Aa]' -j1 --output-on-failure --timeout 1200
grep -E "backend-ops cases on CUDA|declined:" "$logs/ctest.log" | head -80

if ((sdx_runs)); then
    sdx=build-cuda/tools/sdx
    step sdx-run-int8 "$sdx" run --device cuda
    step sdx-run-bf16 "$sdx" run --device cuda --dtype bf16
    step sdx-bench "$sdx" bench --device cuda --runs 2 --json "$logs/sdx-bench.json" --html "$logs/sdx-bench.html"
fi

echo
echo "== test-cuda.sh summary ($(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), sm_$arch)"
printf '  %s\n' "${summary[@]}"
grep -hE "tests passed|tests failed" "$logs/ctest.log" 2>/dev/null | sed 's/^/  ctest: /'
grep -hE "tokens/s|deviation" "$logs"/sdx-run-*.log 2>/dev/null | sed 's/^/  sdx: /'
if [ -n "${OUT:-}" ]; then cp -r "$logs" "$OUT/" 2>/dev/null || true; fi
exit "$failed"
