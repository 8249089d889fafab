#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz: JSON parser, safetensors reader, ComfyUI module
# reader, GGUF reader) with clang under AddressSanitizer + UndefinedBehaviorSanitizer and runs each for a
# fixed budget, starting from its committed corpus (tests/fuzz/corpus/<target>, read only; new
# inputs go to a temporary directory). Any crash, sanitizer report, leak, failed check or
# timeout fails the script. The budget is fuzzing effort, not a test assertion.
# Usage: scripts/test-fuzz.sh [SECONDS_PER_TARGET]   (default 25)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-25}

cxx=$(command -v clang++-14 || command -v clang++ || true)
cc=$(command -v clang-14 || command -v clang || true)
if [ -z "$cxx" ] || [ -z "$cc" ]; then
    echo "test-fuzz: clang not found (scripts/install-deps.sh installs clang-14)" >&2
    exit 1
fi

echo "== Fuzz build (clang, address;undefined)"
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
      -DSD_SANITIZE="address;undefined" -DSD_BUILD_FUZZ=ON -DSD_BUILD_TESTS=OFF -DSD_BUILD_BENCH=OFF -DGGML_VULKAN=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz-json fuzz-safetensors fuzz-comfy fuzz-gguf

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for t in json safetensors comfy gguf; do
    echo "== fuzz-$t for ${secs}s"
    mkdir -p "$work/$t"
    dict=()
    [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
    # crashes are written into $work and copied to build-fuzz/artifacts when a run fails
    set +e
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "build-fuzz/tests/fuzz/fuzz-$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$work/" "${dict[@]}" "$work/$t" "tests/fuzz/corpus/$t" \
        >"$work/$t.log" 2>&1
    status=$?
    set -e
    grep -E "^(#[0-9]+[[:space:]]+(INITED|DONE)|stat::number_of_executed_units|stat::peak_rss_mb)" "$work/$t.log" || true
    if [ "$status" != 0 ]; then
        tail -n 60 "$work/$t.log" >&2
        mkdir -p build-fuzz/artifacts
        cp "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* build-fuzz/artifacts/ 2>/dev/null || true
        echo "test-fuzz: fuzz-$t failed (exit $status); reproducers in build-fuzz/artifacts/" >&2
        exit 1
    fi
done
echo "== fuzzing passed"
