#!/usr/bin/env bash
# The offline tuner's efficiency (docs/benchmarks.md, "The tuner"): every point of five seeds' tune spaces (59-122
# points each) screened on the GPU, then the loop's tuner replayed against those tables.
#   device run:  source .device/env.sh && scripts/gpu-bench-tuner.sh
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
B="$BUILD_DIR/bench/kforge-bench-tuner"
if [ ! -x "$B" ]; then
  { cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release &&
    cmake --build "$BUILD_DIR" -j"$(nproc)" --target kforge-bench-tuner kforge-runner kforge-nvrtc-worker; } >> "$OUT/build.log" 2>&1 || exit 1
fi
SEEDS=${SEEDS:-"level2/conv2d_relu_maxpool level2/matmul_softmax level1/conv1d level1/matmul_large_k level1/conv2d"}
# shellcheck disable=SC2086
timeout "${TUNER_LIMIT:-240}" "$B" measure $SEEDS --out "$OUT/tuner-tables.json" 2> "$OUT/tuner-measure.log"
"$B" replay "$OUT/tuner-tables.json" | tee "$OUT/tuner.md"
