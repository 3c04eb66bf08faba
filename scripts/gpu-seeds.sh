#!/usr/bin/env bash
# Issue 8 on the GPU machine: verify and time one suite's seed kernels with kforge itself, store
# them in an archive, and write that suite's results table from the archive. One suite per call,
# so each fits the device's 10-minute command limit:
#
#   device run:  source .device/env.sh && scripts/gpu-seeds.sh level1
#
# Writes $OUT/seeds-SUITE.log (the corpus table), $OUT/seeds-SUITE.jsonl, $OUT/results-SUITE.md
# (paste into docs/results.md) and $OUT/archive-SUITE.db.
set -uo pipefail
cd "$(dirname "$0")/.."
SUITE=${1:?usage: scripts/gpu-seeds.sh SUITE}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build-gpu}
export CMAKE_POLICY_VERSION_MINIMUM=3.5
K="$BUILD_DIR/kforge"
if [ ! -x "$K" ]; then
  { cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFORGE_BUILD_TESTS=OFF &&
    cmake --build "$BUILD_DIR" -j"$(nproc)" --target kforge kforge-runner kforge-nvrtc-worker; } > "$OUT/build.log" 2>&1 ||
    { grep -E "error|Error" "$OUT/build.log" | head -30; exit 1; }
fi
DB="$OUT/archive-$SUITE.db"
"$K" corpus "tasks/$SUITE/seeds" --expect correct --kind seed --db "$DB" --jsonl "$OUT/seeds-$SUITE.jsonl" \
  > "$OUT/seeds-$SUITE.log" 2>&1
rc=$?
"$K" archive results "$SUITE" --kind seed --db "$DB" > "$OUT/results-$SUITE.md" 2>&1
tail -5 "$OUT/seeds-$SUITE.log"
cat "$OUT/results-$SUITE.md"
exit $rc
