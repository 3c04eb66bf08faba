#!/usr/bin/env bash
# A multi-generation `kforge evolve` with the model answering through a batch folder, across GPU
# calls: each call resumes the run, judges the answers that arrived, writes the next generation's
# requests and pauses (--batch-wait 0, exit 75). Between calls the requests are answered on another
# machine (scripts/batch-exchange.py pending/collect) and the state folder travels back.
#
#   first call:  source .device/env.sh && scripts/gpu-llm-batch.sh   ($STATE/run.toml, or TASKS="..." GENERATIONS=N)
#   later calls: source .device/env.sh && scripts/gpu-llm-batch.sh        (carry .gpu-batch)
#   EVOLVE_ARGS: more flags for every call (e.g. --no-max-autotune)
#
# State (git-ignored, carried): .gpu-batch/{bin/, prompts/, docs/answer-format.md, archive.db,
# exchange/, evolve.jsonl, cache/ (torch.compile's packages), tasks/ (suites of the run's own, if any)}. The first call builds kforge and keeps its binaries and a frozen copy of
# the prompts in the state folder, so later calls skip the build and render the same prompts (the
# answers are found by a hash of the request). $OUT gets state.tgz, the log and the report.
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
STATE=${STATE:-.gpu-batch}
mkdir -p "$STATE"
if [ -x "$STATE/bin/kforge" ]; then
  K="$PWD/$STATE/bin/kforge"
else
  build_kforge || exit 1
  mkdir -p "$STATE/bin" "$STATE/docs"
  for b in kforge kforge-core kforge-runner kforge-nvrtc-worker; do strip -o "$STATE/bin/$b" "$BUILD_DIR/$b"; done
  rm -rf "$STATE/prompts" && cp -r prompts "$STATE/prompts" && cp docs/answer-format.md "$STATE/docs/"
  K="$PWD/$STATE/bin/kforge"
fi
export KFORGE_PROMPTS="$PWD/$STATE/prompts" KFORGE_DB="$PWD/$STATE/archive.db"
# A run on suites of its own (imported KernelBench problems): $STATE/tasks, which travels with the state.
[ -d "$STATE/tasks" ] && export KFORGE_TASKS="$PWD/$STATE/tasks"
# torch.compile's packages travel with the state too, so only the first call builds them.
# They travel packed (the carry limit counts bytes): cache.tgz, unpacked here, packed again at the end.
export KFORGE_CACHE_DIR="$PWD/$STATE/cache"
[ -f "$STATE/cache.tgz" ] && [ ! -d "$STATE/cache" ] && tar -C "$STATE" -xzf "$STATE/cache.tgz"
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader >> "$OUT/batch.log" 2>&1
# The run to resume: the newest whose model is a batch folder (an archive imported first has runs too).
run=$(python3 - "$KFORGE_DB" <<'PY'
import json, sqlite3, sys
try:
    rows = sqlite3.connect(sys.argv[1]).execute("SELECT id, config FROM runs").fetchall()
except sqlite3.Error:
    rows = []
ids = [i for i, c in rows if json.loads(c).get("model", "").startswith("batch:")]
print(max(ids) if ids else 0)
PY
)
[ "${NEW_RUN:-0}" = 1 ] && run=0  # start another run (the batch folder should be a fresh one then)
t0=$SECONDS
if [ "$run" = 0 ]; then
  # The run's settings: $STATE/run.toml when there (tasks, generations, the operators' mix), else TASKS.
  args=(${TASKS:-} ${EVOLVE_ARGS:-} --model "batch:$STATE/exchange" --batch-wait 0 ${GENERATIONS:+--generations $GENERATIONS})
  [ -f "$STATE/run.toml" ] && args+=(--config "$STATE/run.toml")
  echo "\$ kforge evolve ${args[*]}" >> "$OUT/batch.log"
  timeout "${EVOLVE_LIMIT:-540}" "$K" evolve "${args[@]}" --log-json "$STATE/evolve.jsonl" >> "$OUT/batch.log" 2>&1
else
  echo "\$ kforge evolve --resume $run --batch-wait 0" >> "$OUT/batch.log"
  timeout "${EVOLVE_LIMIT:-540}" "$K" evolve --resume "$run" ${EVOLVE_ARGS:-} --batch-wait 0 --log-json "$STATE/evolve.jsonl" >> "$OUT/batch.log" 2>&1
fi
echo "evolve rc=$? in $((SECONDS - t0)) s" >> "$OUT/batch.log"
[ "$run" = 0 ] && run=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT max(id) FROM runs').fetchone()[0])" "$KFORGE_DB")
"$K" report "$run" > "$OUT/report.md" 2>&1
# What comes back is limited in size: the state without the packages, and the packages when new.
if [ -d "$STATE/cache" ]; then
  old=$(cat "$STATE/cache.tgz" 2>/dev/null | md5sum)
  tar -C "$STATE" -czf "$STATE/cache.tgz" --sort=name --mtime=@0 cache
  [ "$old" = "$(md5sum < "$STATE/cache.tgz")" ] || cp "$STATE/cache.tgz" "$OUT/cache.tgz"
fi
tar czf "$OUT/state.tgz" --exclude="$STATE/cache" --exclude="$STATE/cache.tgz" \
  --exclude="$STATE/exchange/pending*" "$STATE"
tail -n 25 "$OUT/batch.log"
