#!/usr/bin/env bash
# Issue 20 on the GPU machine: torch.compile's baseline.
#   scripts/gpu-compiled.sh build SUITE...   # every task's AOTInductor package, KFORGE_JOBS at a time (no timing)
#   scripts/gpu-compiled.sh bench SUITE...   # build cost, kforge's three baselines, torch.compile from Python
# Packages are cached in $KFORGE_CACHE_DIR (default .cache/kforge here, kept while the machine is);
# run `build` beside other work, then `bench` alone (it times). Writes $OUT/compiled-MODE.log and
# the bench's JSON lines to $OUT/compiled-bench.jsonl.
set -uo pipefail
mode=${1:-}; shift || true
[ -n "$mode" ] && [ $# -gt 0 ] || { echo "usage: scripts/gpu-compiled.sh build|bench SUITE..." >&2; exit 2; }
source "$(dirname "$0")/gpu-common.sh"
export KFORGE_CACHE_DIR=${KFORGE_CACHE_DIR:-$PWD/.cache/kforge}
B="$BUILD_DIR/bench/kforge-bench-compiled"
[ -x "$B" ] || cmake --build "$BUILD_DIR" -j"$(nproc)" --target kforge-bench-compiled > "$OUT/compiled-build.log" 2>&1 ||
  { tail -20 "$OUT/compiled-build.log"; exit 1; }
jobs=${KFORGE_JOBS:-6}
if [ "$mode" = build ]; then
  "$B" --build-only --jobs "$jobs" --out /tmp/kforge-compiled "$@" > "$OUT/compiled-build-only.log" 2>&1
else
  "$B" --jobs "$jobs" --out /tmp/kforge-compiled "$@" > "$OUT/compiled-bench.md" 2> "$OUT/compiled-bench.jsonl"
  cat "$OUT/compiled-bench.md"
fi
