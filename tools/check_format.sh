#!/usr/bin/env bash
# Checks that the C++ and CUDA sources follow the repository's .clang-format (clang-format --dry-run
# --Werror): generator/, runtime/, tools/, tests/ and kernels_generated/examples/, without the fuzz
# corpus and generated output. templates/ is left out: the emitters copy the templates' text into every
# kernel they write, and the kernels' text is pinned byte for byte (tests/data/emit_golden.json).
# Lists the files that need formatting and exits 1 when any do.
#   tools/check_format.sh            check every tracked source
#   tools/check_format.sh FILE...    check these files only
# CLANG_FORMAT names the program (default: clang-format-14, else clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."

clang_format=${CLANG_FORMAT:-}
if [[ -z $clang_format ]]; then
  for candidate in clang-format-14 clang-format; do
    if command -v "$candidate" >/dev/null; then
      clang_format=$candidate
      break
    fi
  done
fi
[[ -n $clang_format ]] || { echo "check_format: clang-format not found (install clang-format-14)" >&2; exit 2; }

if (($#)); then
  files=("$@")
else
  mapfile -t files < <(git ls-files -- generator runtime tools tests kernels_generated/examples |
    grep -E '\.(c|cc|cpp|cxx|h|hh|hpp|hxx|cu|cuh|inc)$' |
    grep -vE '^tests/fuzz/corpus/|(^|/)generated/')
fi

bad=()
for f in "${files[@]}"; do
  "$clang_format" --style=file --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  printf '%s\n' "${bad[@]}"
  echo "check_format: ${#bad[@]} of ${#files[@]} files need formatting ($clang_format -i FILE)" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files follow .clang-format"
