#!/usr/bin/env bash
# Issue 8 on the GPU machine: tune (KFORGE_TUNE points screened per seed, default 6), verify and
# time the seed kernels of one or more suites with kforge
# itself, store them in one archive, and write each suite's results table from that archive.
# Each suite runs under its own time limit so that the whole call fits the device's 10-minute
# command limit (the archive keeps whatever finished):
#
#   device run:  source .device/env.sh && scripts/gpu-seeds.sh smoke level1 level2
#
# Writes $OUT/seeds-SUITE.log (the corpus table, then the results table for docs/results.md),
# $OUT/seeds.jsonl (every verdict) and $OUT/archive-seeds.db.
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: scripts/gpu-seeds.sh SUITE..." >&2; exit 2; }
source "$(dirname "$0")/gpu-common.sh"
build_kforge || exit 1
DB="$OUT/archive-seeds.db"
# An archive from an earlier call to build on (the results table takes each task's fastest).
[ -n "${KFORGE_SEEDS_DB_IN:-}" ] && cp "$KFORGE_SEEDS_DB_IN" "$DB"
rc=0
for suite in "$@"; do
  case $suite in smoke) limit=40 ;; level2) limit=150 ;; *) limit=${KFORGE_SEEDS_LIMIT:-330} ;; esac
  tune=${KFORGE_TUNE:-6}
  [ "$suite" = level1 ] && tune=${KFORGE_TUNE_LEVEL1:-$tune}
  log="$OUT/seeds-$suite.log"
  t0=$SECONDS
  timeout "$limit" "$K" corpus "tasks/$suite/seeds" --expect correct --kind seed --tune-points "$tune" --db "$DB" \
    --jsonl "$OUT/seeds-$suite.jsonl.part" > "$log" 2>&1 || rc=1
  cat "$OUT/seeds-$suite.jsonl.part" >> "$OUT/seeds.jsonl" && rm -f "$OUT/seeds-$suite.jsonl.part"
  echo "== $suite: $((SECONDS - t0)) s (limit $limit s) ==" | tee -a "$log"
  tail -4 "$log" | head -3
  { echo; echo "\$ kforge archive results $suite --kind seed"; "$K" archive results "$suite" --kind seed --db "$DB"; } >> "$log" 2>&1
done
grep -hE "^\| " "$OUT"/seeds-*.log | head -100
exit $rc
