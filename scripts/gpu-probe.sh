#!/usr/bin/env bash
# Issue 5's first GPU call: builds and runs kforge-probe-ipc (bench/probe_ipc.cpp), the experiment
# behind verify/'s process model. Output in $OUT/probe.log; results are in docs/gpu-runs/.
#   device run:  source .device/env.sh && scripts/gpu-probe.sh
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
t0=$SECONDS
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFORGE_BUILD_TESTS=OFF > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
cmake --build "$BUILD_DIR" -j"$(nproc)" --target kforge-probe-ipc > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -30; exit 1; }
echo "build: $((SECONDS - t0)) s"
which compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer
export KFORGE_COMPUTE_SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 400 "$BUILD_DIR"/bench/kforge-probe-ipc 2>&1 | tee "$OUT/probe.log"
echo "probe rc=${PIPESTATUS[0]} total $((SECONDS - t0)) s"
