#!/usr/bin/env bash
# One results table from several runs' archive exports, for a suite that no single GPU call timed
# whole (docs/results.md says which runs each such table combines):
#
#     scripts/results-combined.sh SUITE EXPORT... [-- ARGS]
#
# imports each export (docs/results/*.jsonl.gz) into a fresh archive, its evaluations trusted as
# measured (they were kforge's own, on the GPU named in each row), then prints
# `kforge archive results SUITE ARGS` over all of them: per task the fastest correct kernel of any
# run. Runs on different GPUs should not be combined: every row keeps its own baselines, but the
# geometric means would mix machines.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  echo "usage: scripts/results-combined.sh SUITE EXPORT... [-- ARGS]" >&2
  exit 2
fi
suite=$1
shift
exports=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  exports+=("$1")
  shift
done
[ $# -gt 0 ] && shift
kforge=${KFORGE:-build/kforge}
db=$(mktemp -d)/combined.db
trap 'rm -rf "$(dirname "$db")"' EXIT
for e in "${exports[@]}"; do
  "$kforge" archive --db "$db" import "$e" --trust > /dev/null
  echo "imported $e" >&2
done
"$kforge" archive --db "$db" --wide results "$suite" "$@"
