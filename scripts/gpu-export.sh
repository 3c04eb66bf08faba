#!/usr/bin/env bash
# Issue 21 on the GPU machine: the level-1 and level-2 winners exported, the package built and installed
# with this machine's LibTorch, its generated C++ and Python tests run, and its benchmark (each op's
# speedup over eager beside the speedup kforge recorded).
#
#   device run:  source .device/env.sh; scripts/gpu-export.sh [ARCHIVE.jsonl.gz]
#
# Writes $OUT/export.log, $OUT/export-ctest.log, $OUT/export-pytest.log, $OUT/export-bench.md.
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
build_kforge || exit 1
from=${1:-docs/results/evolve-level1-level2-2026-12-03.jsonl.gz}
PKG=/tmp/kforge-export/kforge_kernels
rm -rf /tmp/kforge-export
"$K" export --from "$from" --suite level1 --suite level2 --name kforge_kernels --out "$PKG" > "$OUT/export.log" 2>&1
tail -3 "$OUT/export.log"
TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
{ cmake -S "$PKG" -B "$PKG/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX:${CMAKE_PREFIX_PATH:-}" \
    -Dkforge_kernels_BUILD_TESTS=ON -DCMAKE_INSTALL_PREFIX=/tmp/kforge-export/prefix &&
  cmake --build "$PKG/build" -j"$(nproc)" && cmake --install "$PKG/build"; } > "$OUT/export-build.log" 2>&1 ||
  { grep -E "error|Error" "$OUT/export-build.log" | head -30; exit 1; }
echo "package built and installed in ${SECONDS}s"
(cd "$PKG/build" && ctest --output-on-failure -j4) > "$OUT/export-ctest.log" 2>&1; tail -3 "$OUT/export-ctest.log"
python3 -m pip install -q --no-build-isolation --no-deps --target /tmp/kforge-export/site "$PKG" > "$OUT/export-pip.log" 2>&1 ||
  { tail -30 "$OUT/export-pip.log"; exit 1; }
export PYTHONPATH=/tmp/kforge-export/site${PYTHONPATH:+:$PYTHONPATH}
(cd "$PKG" && python3 -m pytest -q -rs tests/test_ops.py) > "$OUT/export-pytest.log" 2>&1; tail -3 "$OUT/export-pytest.log"
python3 "$PKG/bench/bench_ops.py" > "$OUT/export-bench.md" 2>&1; tail -5 "$OUT/export-bench.md"
