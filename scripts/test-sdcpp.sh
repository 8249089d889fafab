#!/usr/bin/env bash
# A real client (issue 24 item 3): stable-diffusion.cpp, built on our installed ggml package and run.
# Usage: scripts/test-sdcpp.sh          (run by scripts/test.sh after scripts/test-install.sh)
#        SD_TEST_SDCPP=1 scripts/test-sdcpp.sh   also builds sd-cli on its own vendored (upstream) ggml
#                                                and compares images, times and peak RSS
#   1. fetch: the stable-diffusion-cpp-python 0.4.7 sdist from PyPI (pip download, by name), which
#      vendors stable-diffusion.cpp and its ggml submodule; unpacked in build-sdcpp/ (cached).
#   2. our ggml: built with GGML_MAX_NAME=160 (sd.cpp static_asserts >= 128) in build-install/ with the
#      same configuration as scripts/test-install.sh (so after it this is a no-op), installed into
#      build-sdcpp/ggml-prefix.
#   3. sd-cli: sd.cpp configured with only -DSD_USE_SYSTEM_GGML=ON -Dggml_DIR=<prefix>/lib/cmake/ggml
#      (+ Release, ccache); the compiler's dependency files must name our installed headers and none
#      of the vendored ggml's. Then, with the vendored ggml directory absent (a hard-link copy of the
#      tree without it), configure again and compile the two translation units that matter (one reaches "../ggml/src/ggml-impl.h").
#   4. run: a random-weight SD 1.x checkpoint (scripts/sdcpp/make_sd1_model.py, 2.1 GB, cached), txt2img
#      64x64, 2 euler steps, seed 42, 2 threads: the PNG has the right size and is not constant, and the
#      run used our library (a GGML_CPU_ISA value only our CPU backend reads and reports).
#   5. (SD_TEST_SDCPP=1) the same sd-cli on the vendored upstream ggml, both run alternately on one
#      model/prompt/seed (SDCPP_CMP_SIZE, default 256; SDCPP_CMP_STEPS, default 4; SDCPP_CMP_RUNS,
#      default 3) after /work/shared/tools/wait-idle when present: PNG difference (must be <= 3/255),
#      end-to-end / sampling / VAE decode time (best, median) and peak RSS, side by side.
# Environment: SDCPP_WORK (default build-sdcpp), SDCPP_GGML_BUILD (our ggml's build dir, default
# build-install). Each step prints its time; build logs are kept in build-sdcpp/*.log.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
jobs=$(nproc)
version=0.4.7
work=${SDCPP_WORK:-$root/build-sdcpp}
ggml_build=${SDCPP_GGML_BUILD:-build-install}
prefix=$work/ggml-prefix
sdist=$work/stable_diffusion_cpp_python-$version
sd=$sdist/vendor/stable-diffusion.cpp
launcher=()
if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
mkdir -p "$work"

fail() { echo "FAIL (test-sdcpp): $*" >&2; exit 1; }
timings=()
step_name="" step_t0=$SECONDS
step() { # step NAME: closes the previous step's timer, opens the next
    [ -n "$step_name" ] && timings+=("$(printf '%-34s %4ds' "$step_name" $((SECONDS - step_t0)))")
    step_name=$1 step_t0=$SECONDS
    [ -n "$1" ] && echo "== sdcpp: $1"
    return 0
}
# build TARGET DIR LOG: a quiet build (sd.cpp and upstream ggml are noisy); the log's end on failure
build() { cmake --build "$2" -j"$jobs" --target "$1" >"$3" 2>&1 || { tail -40 "$3"; fail "building $1 in $2 (log: $3)"; }; }

python3 -c 'import numpy' 2>/dev/null || fail "python3 numpy missing (scripts/install-deps.sh installs it)"

step "fetch sdist $version"
if [ ! -f "$sd/CMakeLists.txt" ]; then
    tarball=$work/dl/stable_diffusion_cpp_python-$version.tar.gz
    if [ ! -f "$tarball" ]; then
        PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip download --quiet --no-deps --no-binary :all: \
            "stable-diffusion-cpp-python==$version" -d "$work/dl" || fail "pip download of the sdist failed (network?)"
    fi
    rm -rf "$sdist"
    tar -xzf "$tarball" -C "$work"
fi
[ -f "$sd/src/stable-diffusion.cpp" ] || fail "$sd: no stable-diffusion.cpp sources in the sdist"
[ -f "$sd/ggml/CMakeLists.txt" ] || fail "$sd/ggml: the sdist's vendored ggml is missing"

step "build + install our ggml ($ggml_build)"
cmake -S . -B "$ggml_build" -DCMAKE_BUILD_TYPE=Release -DGGML_MAX_NAME=160 -DSD_BUILD_TESTS=OFF \
      -DSD_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
build ggml "$ggml_build" "$work/ggml-build.log"
# into a kept prefix: install copies only what changed, so sd.cpp's objects stay up to date
cmake --install "$ggml_build" --prefix "$prefix" >/dev/null
[ -f "$prefix/lib/cmake/ggml/ggmlConfig.cmake" ] || fail "no ggmlConfig.cmake in $prefix"

step "configure + build sd-cli on our ggml"
ours=$work/ours
cmake -S "$sd" -B "$ours" -DCMAKE_BUILD_TYPE=Release -DSD_BUILD_EXAMPLES=ON -DSD_USE_SYSTEM_GGML=ON \
      -Dggml_DIR="$prefix/lib/cmake/ggml" "${launcher[@]}" >"$work/ours-configure.log" 2>&1 ||
    { cat "$work/ours-configure.log"; fail "configuring sd.cpp on our ggml"; }
build sd-cli "$ours" "$work/ours-build.log"
cli=$ours/bin/sd-cli
[ -x "$cli" ] || fail "$cli not built"
# which headers the compiler read (normalised paths from its dependency files): ggml's public headers
# from our prefix, nothing of the vendored ggml except src/ggml-impl.h, which sd.cpp's
# src/ggml_graph_cut.cpp includes by relative path ("../ggml/src/ggml-impl.h"; it then includes our ggml.h)
python3 - "$ours/CMakeFiles/stable-diffusion.dir" "$sd/ggml" "$prefix/include" <<'PYEOF' || fail "header check"
import os, sys
objdir, vendored, ours = (os.path.realpath(a) for a in sys.argv[1:4])
seen = set()
for d, _, fs in os.walk(objdir):
    for f in fs:
        if f.endswith(".o.d"):
            for tok in open(os.path.join(d, f)).read().replace("\\\n", " ").split():
                if tok.endswith((".h", ".hpp")):
                    seen.add(os.path.realpath(tok))
if not seen:
    sys.exit("FAIL: no compiler dependency files under " + objdir)
bad = sorted(p for p in seen if p.startswith(vendored + "/") and p != vendored + "/src/ggml-impl.h")
if bad:
    sys.exit("FAIL: sd.cpp compiled against vendored ggml headers: " + " ".join(bad))
if os.path.join(ours, "ggml.h") not in seen or os.path.join(ours, "ggml-backend.h") not in seen:
    sys.exit("FAIL: sd.cpp did not include ggml.h / ggml-backend.h from " + ours)
impl = vendored + "/src/ggml-impl.h" in seen
print(f"headers: ggml.h, ggml-backend.h, ... from {ours}; vendored ggml/src/ggml-impl.h {'used' if impl else 'not used'}")
PYEOF
# a symbol only our library has (the instruction-set level parser of our CPU backend)
nm -C "$cli" >"$work/ours.nm" # (not piped into grep -q: SIGPIPE + pipefail)
grep -q "ggml_cpu_isa_parse" "$work/ours.nm" || fail "sd-cli does not contain our CPU backend"

step "without the vendored ggml dir"
# a hard-link copy of the source tree without ggml/ (cheap); configure and compile one TU
noggml=$work/noggml-src
if [ ! -f "$noggml/CMakeLists.txt" ]; then
    rm -rf "$noggml"
    mkdir -p "$noggml"
    for e in "$sd"/* "$sd"/.[!.]*; do
        [ -e "$e" ] || continue
        [ "$(basename "$e")" = ggml ] && continue
        cp -al "$e" "$noggml/"
    done
fi
[ ! -e "$noggml/ggml" ] || fail "$noggml/ggml exists"
cmake -S "$noggml" -B "$work/noggml" -DCMAKE_BUILD_TYPE=Release -DSD_BUILD_EXAMPLES=ON -DSD_USE_SYSTEM_GGML=ON \
      -Dggml_DIR="$prefix/lib/cmake/ggml" "${launcher[@]}" >"$work/noggml-configure.log" 2>&1 ||
    { cat "$work/noggml-configure.log"; fail "configuring sd.cpp without its ggml dir"; }
make -C "$work/noggml" src/util.cpp.o >"$work/noggml-build.log" 2>&1 ||
    { tail -30 "$work/noggml-build.log"; fail "compiling src/util.cpp without the vendored ggml dir"; }
# the one TU that reaches into the ggml dir: src/ggml_graph_cut.cpp includes "../ggml/src/ggml-impl.h"
# (relative to src/, then to each include dir). Our package installs that header as
# <prefix>/include/ggml/src/ggml-impl.h and exports <prefix>/include/ggml as an include dir, so the
# relative path resolves to it.
make -C "$work/noggml" src/ggml_graph_cut.cpp.o >"$work/noggml-build2.log" 2>&1 ||
    { tail -30 "$work/noggml-build2.log"; fail "compiling src/ggml_graph_cut.cpp without the vendored ggml dir"; }
echo "without ggml/: src/util.cpp and src/ggml_graph_cut.cpp compile"

step "random SD 1.x model"
model=$work/models/sd1-random.safetensors
gen=scripts/sdcpp/make_sd1_model.py
stamp=$(sha256sum "$gen" | cut -c1-16)
if [ ! -f "$model" ] || [ "$(cat "$model.stamp" 2>/dev/null)" != "$stamp" ]; then
    mkdir -p "$work/models"
    rm -f "$model" "$model.stamp"
    python3 "$gen" "$model" --seed 1
    echo "$stamp" >"$model.stamp"
fi

step "txt2img 64x64, 2 steps (ours)"
run=$work/run
mkdir -p "$run"
rm -f "$run/ours.png"
prompt="a red cube on a wooden table"
# GGML_CPU_ISA is read only by our CPU backend; an invalid value is reported and ignored (the run
# uses the default level), which proves at run time that sd-cli executed our library.
# CPU runs: like upstream, our Vulkan backend leaves CPU drivers (lavapipe) out unless
# GGML_VK_VISIBLE_DEVICES names them, so sd.cpp does not pick lavapipe as its "GPU".
unset GGML_VK_VISIBLE_DEVICES
GGML_CPU_ISA=sdcpp-probe "$cli" -m "$model" -p "$prompt" -W 64 -H 64 --steps 2 --sampling-method euler \
    -s 42 -t 2 -o "$run/ours.png" >"$run/ours.log" 2>&1 || { tail -30 "$run/ours.log"; fail "sd-cli failed"; }
[ -f "$run/ours.png" ] || { tail -30 "$run/ours.log"; fail "sd-cli wrote no image"; }
python3 scripts/sdcpp/png_check.py check "$run/ours.png" 64 64 || fail "bad image $run/ours.png"
grep -q "GGML_CPU_ISA='sdcpp-probe' ignored" "$run/ours.log" ||
    { tail -30 "$run/ours.log"; fail "no sign of our ggml in sd-cli's output"; }
grep -o "generate_image completed in [0-9.]*s" "$run/ours.log" || true

if [ "${SD_TEST_SDCPP:-0}" = 1 ]; then
    step "build sd-cli on the vendored (upstream) ggml"
    up_cli=${SDCPP_UPSTREAM_CLI:-} # development only: an sd-cli already built the same way elsewhere
    if [ -z "$up_cli" ]; then
        up=$work/upstream
        cmake -S "$sd" -B "$up" -DCMAKE_BUILD_TYPE=Release -DSD_BUILD_EXAMPLES=ON "${launcher[@]}" \
              >"$work/upstream-configure.log" 2>&1 || { cat "$work/upstream-configure.log"; fail "configuring upstream sd.cpp"; }
        build sd-cli "$up" "$work/upstream-build.log"
        up_cli=$up/bin/sd-cli
    fi
    [ -x "$up_cli" ] || fail "$up_cli: no upstream sd-cli"
    nm -C "$up_cli" >"$work/upstream.nm"
    if grep -q "ggml_cpu_isa_parse" "$work/upstream.nm"; then fail "$up_cli contains our library"; fi

    size=${SDCPP_CMP_SIZE:-256} steps=${SDCPP_CMP_STEPS:-4} runs=${SDCPP_CMP_RUNS:-3}
    step "compare: ${size}x$size, $steps steps, $runs runs each"
    if [ ! -x /usr/bin/time ]; then # peak RSS: GNU time (Debian package `time`)
        SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends time >/dev/null ||
            fail "/usr/bin/time missing and apt-get install time failed"
    fi
    if [ -x /work/shared/tools/wait-idle ]; then /work/shared/tools/wait-idle 5 "${SDCPP_IDLE_TIMEOUT:-300}" || echo "(timing on a busy machine)"; fi
    for i in $(seq 1 "$runs"); do
        for v in upstream ours; do
            bin=$cli
            [ $v = upstream ] && bin=$up_cli
            /usr/bin/time -v "$bin" -m "$model" -p "$prompt" -W "$size" -H "$size" --steps "$steps" \
                --sampling-method euler -s 42 -t "$jobs" -o "$run/cmp-$v-$i.png" >"$run/cmp-$v-$i.log" 2>&1 ||
                { tail -30 "$run/cmp-$v-$i.log"; fail "$v sd-cli failed (run $i)"; }
            python3 scripts/sdcpp/png_check.py check "$run/cmp-$v-$i.png" "$size" "$size" >/dev/null ||
                fail "bad image $run/cmp-$v-$i.png"
        done
    done
    python3 - "$run" "$runs" <<'EOF'
import re, statistics, sys
run, n = sys.argv[1], int(sys.argv[2])
pats = {"end-to-end (generate_image)": r"generate_image completed in ([0-9.]+)s",
        "sampling": r"sampling completed, taking ([0-9.]+)s",
        "VAE decode": r"decode_first_stage completed, taking ([0-9.]+)s",
        "process wall clock": r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([0-9:.]+)",
        "peak RSS (MiB)": r"Maximum resident set size \(kbytes\): ([0-9]+)"}
def val(k, s):
    if k.startswith("process"):
        p = [float(x) for x in s.split(":")]
        return sum(v * 60 ** i for i, v in enumerate(reversed(p)))
    return float(s) / 1024 if k.startswith("peak") else float(s)
res = {}
for v in ("upstream", "ours"):
    for k, p in pats.items():
        xs = []
        for i in range(1, n + 1):
            m = re.search(p, open(f"{run}/cmp-{v}-{i}.log").read())
            if not m:
                sys.exit(f"FAIL: no '{k}' line in {run}/cmp-{v}-{i}.log")
            xs.append(val(k, m.group(1)))
        res[v, k] = xs
print(f"{'':30s} {'upstream best/median':>22s} {'ours best/median':>20s} {'upstream/ours (median)':>24s}")
for k in pats:
    u, o = res["upstream", k], res["ours", k]
    fmt = "{:8.0f}" if k.startswith("peak") else "{:8.2f}"
    best = min
    print(f"{k:30s} {fmt.format(best(u))} /{fmt.format(statistics.median(u))}"
          f" {fmt.format(best(o))} /{fmt.format(statistics.median(o))}"
          f" {statistics.median(u) / statistics.median(o):16.2f}x")
EOF
    cmp_fail=0
    for i in $(seq 2 "$runs"); do # each build deterministic across its own runs
        python3 scripts/sdcpp/png_check.py compare "$run/cmp-ours-1.png" "$run/cmp-ours-$i.png" 0 || cmp_fail=1
    done
    echo "ours vs upstream:"
    python3 scripts/sdcpp/png_check.py compare "$run/cmp-upstream-1.png" "$run/cmp-ours-1.png" 3 || cmp_fail=1
    ((cmp_fail == 0)) || fail "images differ beyond the limit"
fi

step ""
echo "== sdcpp: step times"
printf '   %s\n' "${timings[@]}"
echo "== sdcpp test passed"
