#!/usr/bin/env bash
# `kforge evolve` on a pool of GPU workers (docs/scale.md) on the GPU machine: builds kforge only,
# then an offline run over the smoke suite with KFORGE_SCALE_GPUS workers (default 0,0: two workers
# sharing GPU 0, which checks the scheduling, not the speed; "all" on a machine with several GPUs).
# Logs and the run's event lines go to $OUT; a summary of who measured what prints last.
#
#   device run:  source .device/env.sh && scripts/gpu-scale.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build-gpu}
GPUS=${KFORGE_SCALE_GPUS:-0,0}
export CMAKE_POLICY_VERSION_MINIMUM=3.5  # LibTorch's bundled Find modules predate CMake 4
t0=$SECONDS
build() {  # build PCH=ON|OFF
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFORGE_BUILD_TESTS=OFF -DKFORGE_PCH="$1" &&
    cmake --build "$BUILD_DIR" -j"$(nproc)" --target kforge kforge-core kforge-runner kforge-nvrtc-worker
}
if ! build ON > "$OUT/build.log" 2>&1; then  # the precompiled LibTorch header failed here: say so, build without
  grep -E "error|Error" "$OUT/build.log" | head -30
  echo "build with KFORGE_PCH=ON failed after $((SECONDS - t0)) s; again without"
  build OFF >> "$OUT/build.log" 2>&1 || { grep -E "error|Error" "$OUT/build.log" | tail -30; exit 1; }
fi
echo "build: $((SECONDS - t0)) s"
db=/tmp/kforge-scale.db
rm -f "$db"
t1=$SECONDS
timeout "${KFORGE_SCALE_LIMIT:-150}" "$BUILD_DIR"/kforge evolve smoke --gpus "$GPUS" --llm none --no-compile \
  --generations "${KFORGE_SCALE_GENERATIONS:-2}" --db "$db" --log-json "$OUT/events.jsonl" > "$OUT/evolve.log" 2>&1
rc=$?
echo "kforge evolve --gpus $GPUS: rc=$rc, $((SECONDS - t1)) s"
cat "$OUT/evolve.log"
python3 - "$db" <<'EOF' | tee "$OUT/summary.txt"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
q = lambda sql: db.execute(sql).fetchall()
print("devices:", q("SELECT id, name, uuid FROM devices"))
print("screens per device:", q("SELECT device_id, count(*) FROM screens GROUP BY device_id"))
print("evaluations per device and outcome:", q("SELECT device_id, outcome, count(*) FROM evaluations GROUP BY 1, 2"))
print("candidates screened twice:", q("SELECT count(*) FROM (SELECT candidate_id FROM screens GROUP BY 1 HAVING count(*) > 1)")[0][0])
print("candidates judged twice:", q("SELECT count(*) FROM (SELECT candidate_id FROM evaluations GROUP BY 1 HAVING count(*) > 1)")[0][0])
print("runs:", q("SELECT id, status, budgets_used FROM runs"))
EOF
