#!/usr/bin/env bash
# The GPU machine's whole job in one call (the machine is bare each time): scripts/setup.sh
# (configure and build against its PyTorch's CUDA LibTorch, the smoke suite judged), the GPU tests, `kforge verify` on an honest and a cheating
# candidate, and every CPU test; with KFORGE_GPU_CHECK_TASKS=1 also check every suite's references
# on the GPU. Logs go to $OUT (at most 8 files come back); a summary prints last.
#
#   on the dev machine, once:  ../shared/device/prepare.sh
#   device run:                source .device/env.sh && scripts/gpu-test.sh
set -uo pipefail
cd "$(dirname "$0")/.."
# KFORGE_GPU_SNAPSHOT=1: build the commit scripts/gpu-snapshot.sh packed, not the working tree as
# it came. Unpacked with -m: every file newer than the objects an earlier run left in the build.
if [ "${KFORGE_GPU_SNAPSHOT:-0}" = 1 ]; then
  tar -m -xf .device/head.tar || { echo "gpu-test: no .device/head.tar (run scripts/gpu-snapshot.sh first)"; exit 1; }
fi
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build-gpu}
export CMAKE_POLICY_VERSION_MINIMUM=3.5  # LibTorch's bundled Find modules predate CMake 4
JOBS=$(nproc)
summary=()
step() {  # step NAME LIMIT_SECONDS COMMAND...: runs with a time limit, appends to $OUT/NAME.log
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "\$ $*" >> "$OUT/$name.log"
  timeout "$limit" "$@" >> "$OUT/$name.log" 2>&1
  local rc=$?
  summary+=("$(printf '%-22s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" "$(tail -1 "$OUT/$name.log")")")
  return $rc
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv > "$OUT/build.log" 2>&1
# The README's set-up command, as a user runs it: it finds the CUDA LibTorch inside this machine's
# PyTorch by itself, builds everything, and judges the smoke suite's seeds and a cheat.
export BUILD_DIR CMAKE_BUILD_TYPE=Release
if [ "${KFORGE_GPU_SETUP:-1}" = 0 ]; then  # 0: only kforge, its helpers and the test programs (saves ~4 min)
  step build 300 cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release || exit 1
  step build 600 cmake --build "$BUILD_DIR" -j"$JOBS" --target kforge kforge-core kforge-runner kforge-nvrtc-worker kforge_gpu_tests kforge_tests ||
    { grep -E "error|Error" "$OUT/build.log" | head -40; exit 1; }
elif ! step setup 1200 scripts/setup.sh; then
  grep -E "error|Error|kforge:" "$OUT/setup.log" | head -40
  # Still run the GPU tests below: build the way this script did before setup.sh could.
  step build 300 cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release || exit 1
  step build 900 cmake --build "$BUILD_DIR" -j"$JOBS" || { grep -E "error|Error" "$OUT/build.log" | head -40; exit 1; }
fi
"$BUILD_DIR"/kforge doctor > "$OUT/doctor.log" 2>&1
cat "$OUT/doctor.log"
# GpuLoop.* (the loop against the exploit corpus) adds ~2 min; KFORGE_GPU_FILTER picks tests.
step gpu-tests 480 "$BUILD_DIR"/tests/kforge_gpu_tests --gtest_filter="${KFORGE_GPU_FILTER:-*}"
# KFORGE_GPU_STEADY=1: `kforge evolve smoke` on this GPU against a loopback model with a 2 s median
# (bench/evolve_steady.py --real-gpu, issue 37): wall against the model's bound, requests in flight,
# the GPU busy figure.
if [ "${KFORGE_GPU_STEADY:-0}" = 1 ]; then
  step steady 240 python3 bench/evolve_steady.py --real-gpu --kforge "$BUILD_DIR"/kforge --json
fi
# KFORGE_GPU_EXTRAS=0: the GPU tests only (a session short of device time), none of the steps below.
if [ "${KFORGE_GPU_EXTRAS:-1}" = 0 ]; then
  grep -E "FAIL|Failure" "$OUT"/gpu-tests.log | head -40
  printf '%s\n' "== summary ==" "${summary[@]}"
  exit 0
fi
# Untrusted input on this machine's kernel (Landlock or not) and toolkit: always, they are quick.
[ -x "$BUILD_DIR"/tests/kforge_tests ] && step security 300 "$BUILD_DIR"/tests/kforge_tests --gtest_filter='SourceCheck.*:Sandbox.*:Secrets.*:Cli.NoRoute*:Fuzz.*:WorkerProtocol.*'
# The first verify builds smoke/softmax's torch.compile package (48-60 s cold).
step verify-cli 150 "$BUILD_DIR"/kforge verify --answer tests/gpu/honest/softmax_rows.md --task smoke/softmax
step verify-cli 60 "$BUILD_DIR"/kforge verify --answer tests/gpu/exploits/oob_write.md --task smoke/relu
step verify-cli 60 "$BUILD_DIR"/kforge verify --answer tests/gpu/exploits/input_mutator.md --task smoke/relu --json
step verify-cli 120 "$BUILD_DIR"/kforge baseline smoke --db /tmp/kforge-gpu-test.db $([ "${KFORGE_GPU_SETUP:-1}" = 0 ] && echo --no-compile)
# The export (issue 21) on this machine's LibTorch, which once crashed in its std::filesystem copies.
step export 180 "$BUILD_DIR"/kforge export --harness 2 --from docs/results/evolve-level1-level2-2026-12-03.jsonl.gz \
  --suite level1 --suite level2 --name kforge_kernels --out /tmp/kforge-gpu-export/kforge_kernels
# KernelBench-format problems (tests/kernelbench) converted and each checked against its original
# Model on the GPU at the timed sizes; those the tests keep unconvertible (dropout, control flow on
# tensors, a missing module, an oversized reference) are listed and two are degenerate (exit 1).
if [ "${KFORGE_GPU_KB:-1}" = 1 ]; then  # 0 saves ~30 s of device time
  step kernelbench 600 "$BUILD_DIR"/kforge tasks import-kernelbench tests/kernelbench --suite kb --out /tmp/kb-gpu --device cuda
  step kernelbench 300 "$BUILD_DIR"/tests/kforge_tests --gtest_filter='KernelBench*'
fi
if [ "${KFORGE_GPU_CHECK_TASKS:-0}" = 1 ]; then
  for suite in smoke level1 level2; do
    step check-tasks 240 "$BUILD_DIR"/kforge tasks check "$suite" --device cuda --dims all
  done
fi
if [ "${KFORGE_CPU_TESTS:-1}" = 1 ]; then  # CI runs them too; 0 saves device time
  pushd "$BUILD_DIR" > /dev/null && step ctest-cpu 120 ctest -j"$JOBS" -LE gpu --output-on-failure; popd > /dev/null
fi
grep -E "FAIL|Failure" "$OUT"/gpu-tests.log | head -40
echo
echo "== summary =="
printf '%s\n' "${summary[@]}"
