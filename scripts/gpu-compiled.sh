#!/usr/bin/env bash
# Issue 20 on the GPU machine: torch.compile's baseline.
#   scripts/gpu-compiled.sh build SUITE...   # every task's AOTInductor package, KFORGE_JOBS at a time (no timing),
#                                            # for at most KFORGE_BUILD_LIMIT s; then the cache packed into $OUT
#   scripts/gpu-compiled.sh bench SUITE...   # build cost, kforge's baselines, torch.compile from Python
# The machine is fresh on every call, so the packages travel: `build` packs the cache into
# $OUT/compiled-cache.tgz; put it in .gpu-in/ (git-ignored, carried) and the next call's scripts
# (gpu-common.sh) unpack it into $KFORGE_CACHE_DIR. Writes $OUT/compiled-MODE.log and the bench's
# JSON lines to $OUT/compiled-bench.jsonl. KFORGE_BENCH_ARGS=--no-max-autotune builds the default
# mode's packages only.
set -uo pipefail
mode=${1:-}; shift || true
[ -n "$mode" ] && [ $# -gt 0 ] || { echo "usage: scripts/gpu-compiled.sh build|bench SUITE..." >&2; exit 2; }
source "$(dirname "$0")/gpu-common.sh"
B="$BUILD_DIR/bench/kforge-bench-compiled"
build_kforge kforge-bench-compiled || exit 1
jobs=${KFORGE_JOBS:-12}
if [ "$mode" = build ]; then
  log="$OUT/compiled-build-only.log"
  timeout "${KFORGE_BUILD_LIMIT:-1800}" "$B" --build-only --jobs "$jobs" ${KFORGE_BENCH_ARGS:-} --out /tmp/kforge-compiled "$@" \
    > "$log" 2>&1
  rc=$?
  echo "build: rc=$rc after ${SECONDS}s; $(grep '^built' "$log" | grep -vc ': absent: ') package(s) built," \
    "$(grep -c '^built.*: absent: ' "$log") absent (the reasons in $(basename "$log"))"
  tail -1 "$log"
  pack_compiled_cache
else
  "$B" --jobs "$jobs" --out /tmp/kforge-compiled "$@" > "$OUT/compiled-bench.md" 2> "$OUT/compiled-bench.jsonl"
  cat "$OUT/compiled-bench.md"
fi
