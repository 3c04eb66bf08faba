#!/usr/bin/env bash
# One device call on a fresh machine that does two jobs which do not disturb each other's numbers:
# GPU tests first, while the CPUs build the torch.compile packages the level run will need, then an
# offline level run over those tasks (the tests are done before anything is timed).
#
#   device run:  source .device/env.sh && tar -m -xf .device/head.tar && \
#                LIMIT=560 TASKS=level2 scripts/gpu-tests-and-levels.sh
#
# LIMIT: seconds this script may take in all (the call's limit less a margin; default 560); TASKS:
# suites or task names for the packages and the run (default level2). Name no more than the window
# builds and the rest of LIMIT judges: the run builds any package still missing at its start (all
# at once) before it times a baseline, and a seed with its baselines takes about 6 s. WINDOW:
# seconds for the tests and, beside them, the package builds (default 240: the model's test takes
# about 2 minutes, a package about 1, KFORGE_JOBS (default 10) at once); GTEST_FILTER: the GPU tests
# (default the model's test and the stop test of the package builds); GENERATIONS: the tuner's
# generations (default 1). Tests that plan by the GPU's free memory (GpuVerify.*) run after the
# builds instead of beside them: session 30 ran them beside the builds and all six failed, the
# builds' processes holding up to 40 GiB of the GPU.
# Returns 8 files: gpu-tests.log and gpu-evolve.sh levels' seven (the tables, the report, the
# archive, the packages; without the level run, the packages alone). Packages already in the cache
# (from .gpu-in) are not built again.
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
limit=${LIMIT:-560}
tasks=${TASKS:-level2}
window=${WINDOW:-240}  # seconds for the tests, and for the packages beside them
build_kforge kforge-bench-compiled kforge_gpu_tests || exit 1
echo "built at ${SECONDS}s"
# The packages build on the CPUs while the tests run: the tests assert correctness and ratios of GPU
# times, which the CPUs' load does not move; nothing is timed for a table until the tests are done.
KFORGE_JOBS=${KFORGE_JOBS:-10} KFORGE_BENCH_ARGS=--no-max-autotune KFORGE_BUILD_LIMIT=$window OUT=/tmp/kforge-packages \
  scripts/gpu-compiled.sh build $tasks > /tmp/kforge-packages.log 2>&1 &
packages=$!
filter=${GTEST_FILTER:-GpuModel.*:GpuCompiled.AStop*}
case "$filter" in -*) ;; *GpuVerify*) wait "$packages" ;; esac  # they need the GPU's memory alone
timeout "$window" "$BUILD_DIR/tests/kforge_gpu_tests" --gtest_filter="$filter" > "$OUT/gpu-tests.log" 2>&1
echo "tests rc=$? at ${SECONDS}s"
grep -E '^\[ *(OK|FAILED|PASSED|SKIPPED) *\]' "$OUT/gpu-tests.log" | tail -20
wait "$packages" 2>/dev/null  # (already waited for when the tests needed the GPU alone)
cat /tmp/kforge-packages.log
deadline=$((limit - 25 - SECONDS))
if [ "$deadline" -lt 60 ]; then
  echo "no level run: ${deadline}s would be left of LIMIT=${limit}s after the tests and builds"
  # The packages built are not lost with the run: the next call carries them in .gpu-in.
  cp /tmp/kforge-packages/compiled-cache.tgz "$OUT/" 2>/dev/null
else
  echo "level run from ${SECONDS}s"
  DEADLINE=$deadline GENERATIONS=${GENERATIONS:-1} EVOLVE_ARGS=--no-max-autotune \
    TASKS="$tasks" scripts/gpu-evolve.sh levels
fi
rm -f "$OUT/build.log"  # the 9th file; the build's errors were printed above if it failed
ls "$OUT"
