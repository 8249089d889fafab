#!/usr/bin/env bash
# ThreadSanitizer pass over the threaded code: the persistent thread pool and abort, the
# extension parallel service, the scheduler, the INT8 kernels (threaded GEMM, quantizer,
# fusions) and the Krea2 model (whole blocks on 2 threads, and the sdx tool). Any report fails
# the run. Run by `scripts/test.sh --tsan`, or directly: scripts/test-tsan.sh [JOBS]
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=${1:-$(nproc)}
launcher=()
if command -v ccache >/dev/null 2>&1; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

tests=(test-threadpool test-graph-access test-sched test-int8 test-fusion-linear-epilogue test-model)
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSD_SANITIZE=thread -DSD_BUILD_BENCH=OFF \
      "${launcher[@]}" >/dev/null
cmake --build build-tsan -j"$jobs" --target "${tests[@]}"

# halt_on_error: the first race fails the test binary (exit code 66) instead of a warning in a log
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
for t in "${tests[@]}"; do
    echo "-- tsan: $t"
    build-tsan/tests/"$t" --gtest_brief=1
done
echo "== ThreadSanitizer: no report"
