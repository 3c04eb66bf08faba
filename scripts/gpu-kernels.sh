#!/usr/bin/env bash
# Issue 39 on the GPU machine: judge answer files (new kernels before they become seeds) with kforge
# itself, each tuned over KFORGE_TUNE points (default 4), into one archive, and print each suite's
# results table from it beside the seeds of the same tasks (judged in the same call, default
# tunables), so every ratio in the tables was measured on this machine in this call:
#
#   device run:  source .device/env.sh && scripts/gpu-kernels.sh tests/gpu/honest/conv2d_implicit_gemm_3xtf32.md
#
# KFORGE_LIMIT: seconds for the new kernels' judging (default 360); KFORGE_CORPUS_ARGS: more corpus
# flags (e.g. --no-compile, which leaves torch.compile's column out). Writes $OUT/kernels.log (the
# GPU, the new kernels' judging), $OUT/seeds.log (the seeds', then the tables) and
# $OUT/archive-kernels.db.gz (every record; `kforge archive export` makes it JSONL): with
# build.log, four files, so two runs fit the 8 files a device call returns. Exits
# non-zero when an answer was not correct (or the judging ran out of time), so a first kernel can
# gate the rest: `OUT=$OUT/a scripts/gpu-kernels.sh A.md && OUT=$OUT/b scripts/gpu-kernels.sh ...`.
# KFORGE_PACKAGES="SUITE...": meanwhile, in the background, build those suites' torch.compile
# packages (default mode, KFORGE_JOBS at a time, for KFORGE_BUILD_LIMIT s) into
# $OUT/compiled-cache.tgz for later calls (scripts/gpu-compiled.sh build); the tasks judged here
# are ms-scale GEMMs and convolutions, whose times the CPU load does not move.
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: scripts/gpu-kernels.sh ANSWER.md..." >&2; exit 2; }
source "$(dirname "$0")/gpu-common.sh"
build_kforge ${KFORGE_PACKAGES:+kforge-bench-compiled} || exit 1
if [ -n "${KFORGE_PACKAGES:-}" ]; then
  KFORGE_BENCH_ARGS=--no-max-autotune scripts/gpu-compiled.sh build $KFORGE_PACKAGES > "$OUT/packages.log" 2>&1 &
  packages=$!
fi
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,driver_version --format=csv | tee "$OUT/kernels.log"
DB="$OUT/archive-kernels.db"
args=(--expect correct --no-max-autotune --db "$DB" --wide ${KFORGE_CORPUS_ARGS:-})
# The seeds of the tasks the answers name, for the side-by-side.
seeds=()
for f in "$@"; do
  task=$(sed -n 's/^<!-- task: \(\S*\) -->.*/\1/p' "$f" | head -1)
  seed="tasks/${task%%/*}/seeds/${task#*/}.md"
  [ -f "$seed" ] && [[ " ${seeds[*]} " != *" $seed "* ]] && seeds+=("$seed")
done
t0=$SECONDS
timeout "${KFORGE_LIMIT:-360}" "$K" corpus "$@" --kind manual --tune-points "${KFORGE_TUNE:-4}" \
  "${args[@]}" >> "$OUT/kernels.log" 2>&1
kernels_rc=$?
echo "== new kernels: rc=$kernels_rc in $((SECONDS - t0)) s"
grep -E "^\| |correct|wrong|error|timeout" "$OUT/kernels.log" | tail -40
t0=$SECONDS
timeout "${KFORGE_SEEDS_LIMIT:-120}" "$K" corpus "${seeds[@]}" --kind seed --tune-points 1 "${args[@]}" \
  > "$OUT/seeds.log" 2>&1
echo "== seeds: rc=$? in $((SECONDS - t0)) s"
for suite in $(printf '%s\n' "${seeds[@]}" | cut -d/ -f2 | sort -u); do
  for kind in manual seed; do
    echo "\$ kforge archive results $suite --kind $kind"
    "$K" archive results "$suite" --kind "$kind" --db "$DB" --wide
  done
done 2>&1 | tee -a "$OUT/seeds.log"
# One file for the archive (the device returns 8 files a call): its WAL folded in, then packed.
python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("PRAGMA wal_checkpoint(TRUNCATE)")' "$DB" &&
  gzip -f "$DB" && rm -f "$DB-wal" "$DB-shm"
if [ -n "${KFORGE_PACKAGES:-}" ]; then
  wait "$packages"
  cat "$OUT/packages.log"
fi
exit "$kernels_rc"
