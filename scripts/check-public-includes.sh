#!/usr/bin/env bash
# check-public-includes.sh DIR... — fails (exit 1, naming each offender) when a source or header
# under DIR includes anything private to ggml: a path that resolves into ggml/src, or a header
# whose name exists in ggml/src but not in ggml/include (found through an include path). The sd
# Vulkan kernels (src/core/vulkan) must use only the public headers: ggml-ext-vulkan.h and
# friends (issue 12; spec "Vulkan execution services"). Default DIR: src/core/vulkan.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[ $# -eq 0 ] && set -- "$root/src/core/vulkan"

# header names that only ggml/src has
declare -A private=()
while IFS= read -r f; do
    name=$(basename "$f")
    [ -e "$root/ggml/include/$name" ] || private[$name]=1
done < <(find "$root/ggml/src" -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.inc' \))

bad=0
for dir in "$@"; do
    if [ ! -d "$dir" ]; then
        echo "check-public-includes: $dir is not a directory" >&2
        exit 2
    fi
    while IFS= read -r -d '' file; do
        fdir=$(cd "$(dirname "$file")" && pwd)
        n=0
        while IFS= read -r line; do
            n=$((n + 1))
            [[ "$line" =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"\<]([^\"\>]+)[\"\>] ]] || continue
            inc="${BASH_REMATCH[1]}"
            resolved=$(realpath -m "$fdir/$inc")
            # a header of the checked tree itself (next to the file) is fine unless it is in ggml/src
            if [[ -e "$resolved" && "$resolved" != "$root/ggml/src/"* && "$resolved" != "$root/ggml/"* ]]; then
                continue
            fi
            if [[ "$resolved" == "$root/ggml/src/"* || "$inc" == *ggml/src/* || -n "${private[$(basename "$inc")]:-}" ]]; then
                echo "$file:$n: includes a private ggml header: $inc" >&2
                bad=1
            fi
        done < "$file"
    done < <(find "$dir" -type f \( -name '*.c' -o -name '*.cpp' -o -name '*.h' -o -name '*.hpp' -o -name '*.comp' -o -name '*.glsl' -o -name '*.cu' -o -name '*.cuh' \) -print0)
done
if ((bad)); then
    echo "check-public-includes: FAIL (use the public headers in ggml/include only)" >&2
    exit 1
fi
echo "check-public-includes: ok ($*)"
