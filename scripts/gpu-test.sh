#!/usr/bin/env bash
# The GPU machine's whole job in one call (the machine is bare each time): configure and build
# against its LibTorch (CUDA), run every test (GPU ones included), then check every suite's
# references on the GPU at their timed and check dims. Logs go to $OUT; a summary prints last.
#
#   on the dev machine, once:  ../shared/device/prepare.sh
#   device run:                source .device/env.sh && scripts/gpu-test.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build-gpu}
export CMAKE_POLICY_VERSION_MINIMUM=3.5  # LibTorch's bundled Find modules predate CMake 4
JOBS=$(nproc)
summary=()
step() {  # step NAME LIMIT_SECONDS COMMAND...: runs with a time limit, logs to $OUT/NAME.log
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-22s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" "$(tail -1 "$OUT/$name.log")")")
  return $rc
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
step configure 300 cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release || { tail -40 "$OUT/configure.log"; exit 1; }
step build 900 cmake --build "$BUILD_DIR" -j"$JOBS" || { grep -E "error|Error" "$OUT/build.log" | head -40; exit 1; }
"$BUILD_DIR"/kforge doctor > "$OUT/doctor.log" 2>&1
cat "$OUT/doctor.log"
step gpu-tests 60 "$BUILD_DIR"/tests/kforge_gpu_tests
step check-level1 220 "$BUILD_DIR"/kforge tasks check level1 --device cuda --dims all
step check-level2 120 "$BUILD_DIR"/kforge tasks check level2 --device cuda --dims all
step check-smoke 40 "$BUILD_DIR"/kforge tasks check smoke --device cuda --dims all
step compile-on-gpu 60 "$BUILD_DIR"/kforge compile --answer tests/candidates/valid/softmax_rows.md --task smoke/softmax
pushd "$BUILD_DIR" > /dev/null && step ctest-all 80 ctest -j"$JOBS" --output-on-failure; popd > /dev/null
grep -E "FAIL|Failure" "$OUT"/check-*.log "$OUT"/gpu-tests.log | head -40
echo
echo "== summary =="
printf '%s\n' "${summary[@]}"
