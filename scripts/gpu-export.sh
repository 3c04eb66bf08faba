#!/usr/bin/env bash
# Issue 21 on the GPU machine: the level-1 and level-2 winners exported, the package built and installed
# with this machine's LibTorch, its generated C++ and Python tests run, and its benchmark (each op's
# speedup over eager beside the speedup kforge recorded). With KFORGE_GPU_TESTS=1, kforge's own GPU
# tests run after it in what is left of the call (kforge_gpu_tests, built with kforge).
#
#   on the dev machine, once:  ../shared/device/prepare.sh python3-pytest python3-pluggy python3-iniconfig \
#                                python3-packaging python3-py python3-attr python3-setuptools python3-wheel
#   device run:                source .device/env.sh; scripts/gpu-export.sh [ARCHIVE.jsonl.gz]
#   a package exported here:   KFORGE_EXPORTED=.gpu-in/kforge_kernels (carry .gpu-in): only built and checked
#
# Writes $OUT/export.log, export-build.log (CMake and pip), export-ctest.log, export-pytest.log,
# export-bench.md (and gpu-tests.log); a summary prints last.
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
summary=()
step() {  # step NAME LIMIT_SECONDS COMMAND...: runs with a time limit, output appended to $OUT/NAME
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "\$ $*" >> "$OUT/$name"
  timeout "$limit" "$@" >> "$OUT/$name" 2>&1
  local rc=$?
  summary+=("$(printf '%-18s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" "$(grep -v '^$' "$OUT/$name" | tail -1)")")
  return $rc
}
finish() { printf '%s\n' "${summary[@]}"; exit "${1:-0}"; }

ROOT=/tmp/kforge-export
PKG=$ROOT/kforge_kernels
rm -rf "$ROOT" && mkdir -p "$ROOT"
if [ -n "${KFORGE_EXPORTED:-}" ]; then
  # A package exported on another machine (the export needs no GPU): built and checked here, no kforge build.
  cp -r "$KFORGE_EXPORTED" "$PKG" || finish 1
  summary+=("export: none here; the package exported elsewhere, $KFORGE_EXPORTED ($(grep -c '"candidate": {' "$PKG/manifest.json") ops)")
else
  targets=()
  [ "${KFORGE_GPU_TESTS:-0}" = 1 ] && targets+=(kforge_gpu_tests)
  build_kforge "${targets[@]}" || exit 1
  from=${1:-docs/results/evolve-level1-level2-2026-12-03.jsonl.gz}
  if ! step export.log 120 "$K" export --harness 2 --from "$from" --suite level1 --suite level2 --name kforge_kernels --out "$PKG"; then
    # A crash report's kforge-core frames named (they print as offsets).
    grep -oE 'kforge(-core)?\(\+0x[0-9a-f]+\)' "$OUT/export.log" | grep -oE '0x[0-9a-f]+' |
      xargs -r addr2line -fCe "$BUILD_DIR/kforge-core" | paste - - >> "$OUT/export.log"
    tail -40 "$OUT/export.log"
    finish 1
  fi
fi
# pytest (for the tests), setuptools and wheel (for pip's build) where this machine's Python lacks
# them: Debian's, carried in .device (prepare.sh above); only then, as PYTHONPATH comes before the
# machine's own site-packages and would shadow its copies (and their plugins).
export PYTHONPATH=$ROOT/site${PYTHONPATH:+:$PYTHONPATH}
DEBIAN_PY=$PWD/.device/root/usr/lib/python3/dist-packages
py_with() {  # py_with MODULES: prints `env PYTHONPATH=...` (Debian's modules added) if one is missing
  python3 -c "import $1" 2> /dev/null || echo env "PYTHONPATH=$PYTHONPATH:$DEBIAN_PY"
}
TORCH_CMAKE_PREFIX=${TORCH_CMAKE_PREFIX:-$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')}
step export-build.log 60 cmake -S "$PKG" -B "$PKG/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$TORCH_CMAKE_PREFIX:${CMAKE_PREFIX_PATH:-}" \
  -Dkforge_kernels_BUILD_TESTS=ON -DCMAKE_INSTALL_PREFIX=$ROOT/prefix &&
  step export-build.log 300 cmake --build "$PKG/build" -j"$(nproc)" &&
  step export-build.log 60 cmake --install "$PKG/build" ||
  { grep -E "error|Error" "$OUT/export-build.log" | head -30; finish 1; }
pushd "$PKG/build" > /dev/null && step export-ctest.log 240 ctest -V; popd > /dev/null
# pip builds the extension again (setup.py), in parallel through torch's ninja build.
export MAX_JOBS=$(nproc)
step export-build.log 300 $(py_with "setuptools, wheel") python3 -m pip install --no-build-isolation --no-deps --target "$ROOT/site" "$PKG" ||
  { tail -30 "$OUT/export-build.log"; finish 1; }
# A crash inside an op prints its native backtrace (scripts/crash-report.c; faulthandler off for it).
preload=()
cc -shared -fPIC -o "$ROOT/crash-report.so" scripts/crash-report.c && preload=(env LD_PRELOAD="$ROOT/crash-report.so")
pushd "$PKG" > /dev/null && step export-pytest.log 300 "${preload[@]}" $(py_with pytest) python3 -m pytest -v -rs -p no:cacheprovider \
  -p no:faulthandler tests/test_ops.py; popd > /dev/null
bench_ops=()  # KFORGE_EXPORT_BENCH_OPS=a,b: only those ops
[ -n "${KFORGE_EXPORT_BENCH_OPS:-}" ] && bench_ops=(--ops "$KFORGE_EXPORT_BENCH_OPS")
[ "${KFORGE_EXPORT_BENCH:-1}" = 1 ] && step export-bench.md 240 python3 -u "$PKG/bench/bench_ops.py" "${bench_ops[@]}"
if [ "${KFORGE_GPU_TESTS:-0}" = 1 ]; then
  step gpu-tests.log "${KFORGE_GPU_TESTS_LIMIT:-300}" "$BUILD_DIR"/tests/kforge_gpu_tests --gtest_filter="${KFORGE_GPU_TESTS_FILTER:-*}"
  grep -E "^\[  (FAILED|SKIPPED) " "$OUT/gpu-tests.log" | head -20
fi
grep -E "FAIL|Error" "$OUT/export-ctest.log" | head -10
grep -E "FAILED|Error" "$OUT/export-pytest.log" | head -10
finish 0
