#!/usr/bin/env bash
# Fails, naming each file and the command that fixes it, when a C++ file of the tree is not as
# .clang-format says. The formatter is Debian 12's clang-format 14 (scripts/deps.sh installs it):
# other versions format some constructs differently, so they are not used in its place.
#
#   scripts/check-format.sh            # check every tracked .cpp and .h
#   scripts/check-format.sh FILE...    # check these
set -uo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$CLANG_FORMAT" > /dev/null; then
  echo "check-format: $CLANG_FORMAT not found (scripts/deps.sh installs Debian's clang-format-14)" >&2
  exit 2
fi
if (($#)); then
  files=("$@")
elif git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.h')
else
  mapfile -t files < <(find . -path ./build -prune -o \( -name '*.cpp' -o -name '*.h' \) -print | sed 's|^\./||' | sort)
fi
bad=()
for f in "${files[@]}"; do
  [[ -f "$f" ]] || continue
  "$CLANG_FORMAT" --dry-run --Werror "$f" > /dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]})); then
  echo "check-format: ${#bad[@]} file(s) not formatted as .clang-format says:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "fix: $CLANG_FORMAT -i ${bad[*]}" >&2
  exit 1
fi
echo "check-format: ${#files[@]} C++ files formatted"
