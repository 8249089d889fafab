#!/usr/bin/env bash
# Installs the Debian packages the build and tests need, only those that are missing.
# Safe to run repeatedly; used by both README commands.
set -euo pipefail

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
# libopenblas-dev: the sgemm baseline of bench-ops (optional for the library itself)
for pkg in cmake make g++ libgtest-dev python3 libopenblas-dev pkg-config; do
    have_pkg "$pkg" || need+=("$pkg")
done

if ((${#need[@]})); then
    echo "install-deps: installing ${need[*]}"
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        if command -v sudo >/dev/null; then SUDO=sudo; else
            echo "install-deps: need root (or sudo) to install: ${need[*]}" >&2; exit 1
        fi
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq || echo "install-deps: apt-get update failed; trying install anyway" >&2
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
