#!/usr/bin/env bash
# Builds if needed and runs every test (GPU tests skip, saying why, without a GPU); prints CTest's
# summary line. Extra arguments go to ctest (e.g. -L cpu, -R Generator).
set -euo pipefail
cd "$(dirname "$0")/.."
# The formatter first: an unformatted file fails the run (after the tests, which still run).
format_rc=0
scripts/check-format.sh || format_rc=$?
BUILD_DIR=${BUILD_DIR:-build}
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  # KFORGE_CXX_FLAGS_RELEASE: the Release build's optimization flags (CI's own, .ci/run).
  flags=()
  [[ -n "${KFORGE_CXX_FLAGS_RELEASE:-}" ]] && flags+=("-DCMAKE_CXX_FLAGS_RELEASE=$KFORGE_CXX_FLAGS_RELEASE")
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} "${flags[@]}"
fi
cmake --build "$BUILD_DIR" -j"$(nproc)"
cd "$BUILD_DIR"
# Passing tests are counted, not listed; failures come with their output, skips with their reason.
# The CPU tests run a GoogleTest suite per CTest test (cmake/GroupedTests.cmake), each writing its
# XML report into tests/results/: the cases are counted from those.
rm -rf tests/results
set +e
ctest -j"$(nproc)" --output-on-failure "$@" 2>&1 | tee ctest.log | grep -vE "^ *Start +[0-9]+:|Passed +[0-9.]+ sec" \
  | sed 's/  # GetParam() = .*//'
rc=${PIPESTATUS[0]}
# The CPU cases, and those that skipped with their reasons (a missing tool: Chromium, Slurm, a
# Python with PyTorch).
if compgen -G "tests/results/*.xml" > /dev/null; then
  cases=$(cat tests/results/*.xml | grep -c "<testcase ")
  skipped=$(cat tests/results/*.xml | grep -c 'result="skipped"')
  echo "CPU test cases: $cases, $skipped skipped (a CTest test runs a GoogleTest suite, or a part of a large one)"
  cat tests/results/*.xml | grep -oE '<skipped message="[^"]*' | sed 's/<skipped message="/  skipped: /' | sort | uniq -c | head -20
fi
# Why GPU tests skipped (GTEST_SKIP's reason), then CTest's summary line last.
if grep -q "\*\*\*Skipped" ctest.log; then
  reason=$(./tests/kforge_gpu_tests --gtest_filter='GpuTasks.*' 2>&1 | grep -m1 -oE "no GPU: .*" || true)
  echo "skipped: $(grep -c '\*\*\*Skipped' ctest.log) GPU test(s): ${reason:-see ctest.log}"
fi
grep -E "tests passed" ctest.log
((format_rc)) && echo "check-format failed: see its message above (the fix is clang-format-14 -i on the files it names)"
((rc)) && exit $rc
exit $format_rc
