#!/usr/bin/env bash
# Runs the CPU unit tests as an AVX2-only x86-64 CPU: Debian's qemu-user with `-cpu Haswell`
# (AVX2, FMA, F16C; CPUID reports no AVX-512, and any AVX-512 instruction stops the program with
# SIGILL), on a GGML_NATIVE=OFF build (baseline x86-64 plus the kernels' own target attributes), so
# an AVX-512 instruction reached without its runtime check fails CI on any machine, and the AVX2
# kernels are checked even where CI lands on an AVX-512 CPU. Unit tests only: emulation is tens of
# times slower than native, so the benchmarks and the sdx/Vulkan tests stay in the native passes.
#   scripts/test-qemu-avx2.sh BUILD_DIR [JOBS]
# Death tests in the "threadsafe" style re-execute the binary; qemu-user does not follow an
# execve of a same-architecture program, so those children run natively (they test option
# parsing, not kernels).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: test-qemu-avx2.sh BUILD_DIR [JOBS]}
jobs=${2:-$(nproc)}
command -v qemu-x86_64 >/dev/null || { echo "test-qemu-avx2: qemu-x86_64 missing (qemu-user)" >&2; exit 1; }
[ "$(uname -m)" = x86_64 ] || { echo "test-qemu-avx2: not an x86-64 host; skipped"; exit 0; }

# the binaries, and how many shards each is split into (1 = whole); test-backend-ops holds
# thousands of small cases, split so the two cores stay busy
tests=(test-cpu-isa:1 test-cpu-rows:2 test-core:1 test-alloc:1 test-kernel-choice:1 test-quants:1 test-quant-dot:1
       test-backend-ops:8 test-int8:2 test-sd-ops:1 test-fusion-norm-quant:1 test-fusion-gate-quant:1
       test-fusion-linear-epilogue:1 test-model:2 test-ext:1 test-graph-access:1)
entries=()
for t in "${tests[@]}"; do
    name=${t%%:*} shards=${t##*:}
    [ -x "$dir/tests/$name" ] || { echo "test-qemu-avx2: $dir/tests/$name not built" >&2; exit 1; }
    for ((i = 0; i < shards; ++i)); do entries+=("$name $shards $i"); done
done

run_one() { # NAME SHARDS INDEX
    local name=$1 shards=$2 index=$3 log
    log=$(mktemp)
    if GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$index SD_EXPECT_ISA_DETECTED=avx2 \
        qemu-x86_64 -cpu Haswell "$dir/tests/$name" --gtest_brief=1 >"$log" 2>&1; then
        echo "-- qemu Haswell: $name [$index/$shards] passed"
        rm -f "$log"
    else
        local rc=$?
        echo "-- qemu Haswell: $name [$index/$shards] FAILED (exit $rc; 132 = SIGILL)"
        grep -v "TCG doesn't support requested feature" "$log" | tail -40
        rm -f "$log"
        return 1
    fi
}
export -f run_one
export dir
start=$SECONDS
printf '%s\n' "${entries[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}'
echo "-- qemu Haswell pass (all passed): ${#entries[@]} runs in $((SECONDS - start)) s"
