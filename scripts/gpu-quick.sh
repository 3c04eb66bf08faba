#!/usr/bin/env bash
# A short GPU session when device time is scarce: builds only kforge and its two helpers, then
# the exploit corpus (correctness only), the timing repeatability check and the honest corpus
# timed. Logs go to $OUT as they are written, so a run cut short still brings back what it did.
#
#   device run:  source .device/env.sh && scripts/gpu-quick.sh
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$OUT/build.log" 2>&1
{ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFORGE_BUILD_TESTS=OFF &&
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target kforge kforge-runner kforge-nvrtc-worker; } >> "$OUT/build.log" 2>&1 ||
  { grep -E "error|Error" "$OUT/build.log" | head -30; exit 1; }
echo "built in ${SECONDS}s"
export KFORGE_DB=/tmp/kforge-quick.db
log="$OUT/quick.log"
{
  for i in 1 2; do
    echo "\$ kforge verify --answer tests/gpu/honest/softmax_rows.md --task smoke/softmax --seed 7 --json --no-store  (session $i)"
    timeout 60 "$K" verify --answer tests/gpu/honest/softmax_rows.md --task smoke/softmax --seed 7 --json --no-store > "$OUT/rep$i.json"
    python3 -c "import json; d=json.load(open('$OUT/rep$i.json')); t=d['timing']; print(d['outcome'], d['verify_ms'], {k: (t[k]['median_ms'], t[k]['iqr_ms'], t[k]['reps'], t[k].get('held')) for k in ('time','eager','scripted')}, d['evidence'].get('phase_ms'))"
  done
  echo "\$ kforge verify --answer tests/gpu/honest/layer_norm.md --task level1/layer_norm --admit --no-timing --no-store"
  timeout 90 "$K" verify --answer tests/gpu/honest/layer_norm.md --task level1/layer_norm --admit --no-timing --no-store
  echo "\$ kforge verify --answer tests/gpu/admission/overfit_shown_dims.md --task smoke/relu --admit --no-timing --no-store"
  timeout 60 "$K" verify --answer tests/gpu/admission/overfit_shown_dims.md --task smoke/relu --admit --no-timing --no-store
  echo "\$ kforge corpus tests/gpu/exploits --no-timing --no-store"
  timeout 150 "$K" corpus tests/gpu/exploits --no-timing --no-store --jsonl "$OUT/exploits.jsonl"
  echo "\$ kforge corpus tests/gpu/honest --expect correct --no-store"
  timeout 240 "$K" corpus tests/gpu/honest --expect correct --no-store --jsonl "$OUT/honest.jsonl"
} > "$log" 2>&1
tail -60 "$log"
