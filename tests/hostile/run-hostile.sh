#!/usr/bin/env bash
# Runs sdx over hostile inputs (issue 15): every committed file in tests/hostile/files, the
# model-sized cases make-hostile.py generates, and paths that are not regular files. Each
# `sdx run --weights F` and `sdx quantize F OUT` must exit 1 or 2 with an "sdx: error:" line and
# no raw control character, never by a signal and never blocking; quantize must leave an
# existing OUT byte for byte and no other file. Output paths that must be refused (symlink,
# FIFO, the input itself by another name) are checked the same way.
# Usage: run-hostile.sh SDX_BINARY
set -uo pipefail
sdx=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/sd-hostile.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0 checked=0

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# expect_error WHAT CMD... : rc 1 or 2, an error line, no raw control characters
expect_error() {
    local what=$1; shift
    "$@" >"$work/out" 2>"$work/err" </dev/null
    local rc=$?
    checked=$((checked + 1))
    if [ "$rc" -ne 1 ] && [ "$rc" -ne 2 ]; then
        fail "$what: exit $rc (want 1 or 2$([ "$rc" -gt 128 ] && echo ", died by signal $((rc - 128))")): $(tail -c 300 "$work/err")"
        return
    fi
    grep -q '^sdx: error: ' "$work/err" || fail "$what: no 'sdx: error:' line: $(tail -c 300 "$work/err")"
    if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$work/err"; then fail "$what: raw control character in the message"; fi
}

# expect_quantize_refused WHAT IN: quantize IN over an existing OUT leaves OUT and no debris
expect_quantize_refused() {
    local what=$1 in=$2
    rm -rf "$work/q" && mkdir "$work/q"
    printf 'old output' >"$work/q/out.safetensors"
    expect_error "quantize $what" "$sdx" quantize "$in" "$work/q/out.safetensors"
    [ "$(cat "$work/q/out.safetensors")" = "old output" ] || fail "quantize $what: the old output was changed"
    [ "$(ls -A "$work/q")" = "out.safetensors" ] || fail "quantize $what: debris left: $(ls -A "$work/q" | tr '\n' ' ')"
}

run_args=(--blocks 1 --tokens 8 --threads 1)

python3 "$here/make-hostile.py" --models "$work/models" >/dev/null || { echo "make-hostile.py failed" >&2; exit 1; }
files=("$here"/files/*.safetensors)
models=()
for f in "$work"/models/*.safetensors; do [ "$(basename "$f")" = valid-tiny-model.safetensors ] || models+=("$f"); done

for f in "${files[@]}" "${models[@]}"; do
    name=$(basename "$f")
    expect_error "run $name" "$sdx" run --weights "$f" "${run_args[@]}"
    case "$name" in run-only-* | [0-9][0-9]-run-only-*) ;; *) expect_quantize_refused "$name" "$f" ;; esac
done

# Inputs that are not regular files (a FIFO must not block the open).
mkfifo "$work/fifo.safetensors"
mkdir "$work/dir.safetensors"
for f in "$work/fifo.safetensors" "$work/dir.safetensors" /dev/null; do
    expect_error "run $f" "$sdx" run --weights "$f" "${run_args[@]}"
    expect_quantize_refused "$f" "$f"
done

# Outputs that must be refused: a symlink (its target untouched), a FIFO, the input itself.
valid="$work/models/valid-tiny-model.safetensors"
printf 'precious' >"$work/victim"
ln -s "$work/victim" "$work/link.safetensors"
expect_error "quantize to a symlink" "$sdx" quantize "$valid" "$work/link.safetensors"
[ "$(cat "$work/victim")" = precious ] && [ -L "$work/link.safetensors" ] || fail "quantize to a symlink: link or target changed"
expect_error "quantize to a FIFO" "$sdx" quantize "$valid" "$work/fifo.safetensors"
[ -p "$work/fifo.safetensors" ] || fail "quantize to a FIFO: the FIFO was replaced"
cp "$valid" "$work/in.safetensors"
ln "$work/in.safetensors" "$work/hardlink.safetensors"
before=$(cksum <"$work/in.safetensors")
(cd "$work" && expect_error "quantize in.st ./in.st" "$sdx" quantize in.safetensors ./in.safetensors)
expect_error "quantize to a hard link of the input" "$sdx" quantize "$work/in.safetensors" "$work/hardlink.safetensors"
[ "$(cksum <"$work/in.safetensors")" = "$before" ] || fail "quantize same file: the input was changed"

# The valid model quantizes, and what quantize writes runs.
"$sdx" quantize "$valid" "$work/q.safetensors" >/dev/null 2>"$work/err" || fail "quantize valid model: $(cat "$work/err")"
"$sdx" run --weights "$work/q.safetensors" "${run_args[@]}" >/dev/null 2>"$work/err" || fail "run quantized model: $(tail -c 300 "$work/err")"

# GGUF inputs (the fuzz-gguf seed corpus, hostile ones): run refuses; quantize --to q8_0 refuses
# and leaves an existing OUT (GGUF is recognised by content, so the names carry no extension).
gguf_files=0
for f in "$here"/../fuzz/corpus/gguf/*; do
    name=$(basename "$f")
    case "$name" in valid*) continue ;; esac
    gguf_files=$((gguf_files + 1))
    expect_error "run gguf/$name" "$sdx" run --weights "$f" "${run_args[@]}"
    rm -rf "$work/q" && mkdir "$work/q"
    printf 'old output' >"$work/q/out.gguf"
    expect_error "quantize --to q8_0 gguf/$name" "$sdx" quantize "$f" "$work/q/out.gguf" --to q8_0
    [ "$(cat "$work/q/out.gguf")" = "old output" ] || fail "quantize gguf/$name: the old output was changed"
    [ "$(ls -A "$work/q")" = "out.gguf" ] || fail "quantize gguf/$name: debris left: $(ls -A "$work/q" | tr '\n' ' ')"
done

echo "run-hostile: $gguf_files hostile GGUF files"
echo "run-hostile: $checked refusals checked over ${#files[@]} committed files, ${#models[@]} generated model cases and 3 non-regular inputs; $failures failure(s)"
[ "$failures" -eq 0 ]
