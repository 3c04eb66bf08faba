#!/usr/bin/env bash
# A user's model end to end on the GPU machine (docs/model.md): the model profiled (each chain timed,
# the top ones written as tasks and imported as a suite), kernels for those tasks judged and admitted
# (answer files named CHAIN.md, and CHAIN.VARIANT.md for more than one, judged in the order of the
# chains' GPU time), the offline tuner on them, the winners exported (a chain without a winner
# faster than eager runs its reference), the package built with this machine's LibTorch, and
# `kforge model check` timing the model with them against eager and torch.compile.
#
#   device run: source .device/env.sh; scripts/gpu-model.sh
#   MODEL (tests/models/transformer_block.py), SUITE (gpt2), ANSWERS (tests/models/answers/$SUITE),
#   TOP (7), GENERATIONS (1; 0: no tuner), MIN_SPEEDUP (1.0), RUNS (50), MAX_AUTOTUNE (1: torch.compile
#   max-autotune timed too; its build takes minutes),
#   DEADLINE (seconds: no step starts that could run past it; 590), CHECK_LIMIT (seconds for `model check`;
#   400: max-autotune's builds can take minutes, so a warm second call may give it the whole call)
#
# It goes on where an earlier call on the same machine stopped (state in $W, kept with the build
# folder; FRESH=1 starts again). Writes, across calls, profile.json and .txt, verify-CHAIN.json,
# evolve.log, export.json, configure.log, build.log, check.json and .txt, archive.jsonl (every
# candidate and verdict), packed into $OUT/model.tgz (the device returns 8 files a call), with
# $OUT/check.txt beside it; a summary prints last.
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
MODEL=${MODEL:-tests/models/transformer_block.py}
SUITE=${SUITE:-gpt2}
ANSWERS=${ANSWERS:-tests/models/answers/$SUITE}
DEADLINE=${DEADLINE:-590}
W=$PWD/$BUILD_DIR/model-$SUITE
D=$W/log
[ "${FRESH:-0}" = 1 ] && rm -rf "$W"
mkdir -p "$W/done" "$D"
export KFORGE_DB=$W/archive.db
summary=()
step() {  # step NAME LIMIT_SECONDS COMMAND...: stdout to $D/NAME, stderr to $D/NAME.err, with a time limit
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  if [ $((SECONDS + limit)) -gt "$DEADLINE" ]; then
    limit=$((DEADLINE - SECONDS))
    [ "$limit" -lt 20 ] && { summary+=("$(printf '%-34s not started: the call'"'"'s deadline' "$name")"); return 124; }
  fi
  echo "\$ $*" > "$D/$name.err"
  timeout "$limit" "$@" > "$D/$name" 2>> "$D/$name.err"
  local rc=$?
  summary+=("$(printf '%-34s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" "$(grep -v '^$' "$D/$name.err" | tail -1 | cut -c1-120)")")
  return $rc
}
finish() {
  "$K" archive export "$D/archive.jsonl" > /dev/null 2>&1
  tar -C "$W" -czf "$OUT/model.tgz" log
  [ -f "$D/check.txt" ] && cp "$D/check.txt" "$OUT/check.txt"
  printf '%s\n' "${summary[@]}"
  exit "${1:-0}"
}

build_kforge || exit 1
if [ ! -f "$W/done/profile" ]; then
  step profile.json 240 "$K" model profile "$MODEL" --device cuda --suite "$SUITE" --top "${TOP:-7}" \
    --tasks-dir "$W/tasks" --json --wide || finish 1
  cp "$D/profile.json" "$W/profile.json" && cp "$D/profile.json.err" "$D/profile.txt" && touch "$W/done/profile"
fi
# The answers in the order of their chains' GPU time, the largest first.
order=$(python3 -c 'import json, sys
print(" ".join(c["name"] for c in sorted(json.load(open(sys.argv[1]))["chains"], key=lambda c: -c.get("gpu_ms", 0))))' "$W/profile.json")
# A chain's answer is CHAIN.md; CHAIN.VARIANT.md are others for it (the export takes the fastest).
for chain in $order; do
  for a in "$ANSWERS/$chain.md" "$ANSWERS/$chain".*.md; do
    v=$(basename "$a" .md)
    [ -f "$a" ] && [ ! -f "$W/done/verify-$v" ] || continue
    step "verify-$v.json" 150 "$K" verify --answer "$a" --task "$SUITE/$chain" --tasks-dir "$W/tasks" \
      --admit --no-compile --json
    [ $? = 124 ] || touch "$W/done/verify-$v"
  done
done
if [ "${GENERATIONS:-1}" -gt 0 ] && [ ! -f "$W/done/evolve" ]; then
  step evolve.log 200 "$K" evolve "$SUITE" --tasks-dir "$W/tasks" --llm none --no-compile \
    --generations "${GENERATIONS:-1}" --budget-minutes 3 && touch "$W/done/evolve"
fi
rm -rf "$W/pkg"
step export.json 60 "$K" export --suite "$SUITE" --tasks-dir "$W/tasks" --fallback \
  --min-speedup "${MIN_SPEEDUP:-1.0}" --name "${SUITE}_kernels" --out "$W/pkg" --json || finish 1
TORCH_CMAKE_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
step configure.log 60 cmake -S "$W/pkg" -B "$W/pkg/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$TORCH_CMAKE_PREFIX" &&
  step build.log 240 cmake --build "$W/pkg/build" -j"$(nproc)" || finish 1
step check.json "${CHECK_LIMIT:-400}" "$K" model check "$MODEL" --package "$W/pkg" --device cuda --runs "${RUNS:-50}" --json \
  $([ "${MAX_AUTOTUNE:-1}" = 1 ] && echo --max-autotune)
# check.txt: the check's own lines (its command, its first line, the table on); Inductor's autotune
# log, which max-autotune's build prints between them, stays in check.json.err.
if grep -q "^package " "$D/check.json.err"; then
  { head -n 2 "$D/check.json.err"; sed -n '/^package /,$p' "$D/check.json.err"; } > "$D/check.txt"
else
  cp "$D/check.json.err" "$D/check.txt"
fi
finish 0
