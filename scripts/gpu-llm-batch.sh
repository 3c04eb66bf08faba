#!/usr/bin/env bash
# A multi-generation `kforge evolve` with the model answering through a batch folder, across GPU
# calls: each call resumes the run, judges the answers that arrived, writes the next generation's
# requests and pauses (--batch-wait 0, exit 75). Between calls the requests are answered on another
# machine (scripts/batch-exchange.py pending/collect) and the state folder travels back.
#
#   first call:  source .device/env.sh && TASKS="level1/sdpa ..." GENERATIONS=3 scripts/gpu-llm-batch.sh
#   later calls: source .device/env.sh && scripts/gpu-llm-batch.sh        (carry .gpu-batch)
#
# State (git-ignored, carried): .gpu-batch/{bin/, prompts/, docs/answer-format.md, archive.db,
# exchange/, evolve.jsonl}. The first call builds kforge and keeps its binaries and a frozen copy of
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
  for b in kforge kforge-runner kforge-nvrtc-worker; do strip -o "$STATE/bin/$b" "$BUILD_DIR/$b"; done
  rm -rf "$STATE/prompts" && cp -r prompts "$STATE/prompts" && cp docs/answer-format.md "$STATE/docs/"
  K="$PWD/$STATE/bin/kforge"
fi
export KFORGE_PROMPTS="$PWD/$STATE/prompts" KFORGE_DB="$PWD/$STATE/archive.db"
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader >> "$OUT/batch.log" 2>&1
runs=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM runs').fetchone()[0])" "$KFORGE_DB" 2>/dev/null || echo 0)
t0=$SECONDS
if [ "$runs" = 0 ]; then
  echo "\$ kforge evolve ${TASKS:?TASKS is needed on the first call} --model batch:$STATE/exchange --batch-wait 0 --generations ${GENERATIONS:-3} ${EXTRA:-}" >> "$OUT/batch.log"
  timeout 540 "$K" evolve $TASKS --model "batch:$STATE/exchange" --batch-wait 0 --generations "${GENERATIONS:-3}" \
    ${EXTRA:-} --log-json "$STATE/evolve.jsonl" >> "$OUT/batch.log" 2>&1
else
  echo "\$ kforge evolve --resume 1 --batch-wait 0" >> "$OUT/batch.log"
  timeout 540 "$K" evolve --resume 1 --batch-wait 0 --log-json "$STATE/evolve.jsonl" >> "$OUT/batch.log" 2>&1
fi
echo "evolve rc=$? in $((SECONDS - t0)) s" >> "$OUT/batch.log"
"$K" report 1 > "$OUT/report.md" 2>&1
tar czf "$OUT/state.tgz" "$STATE"
tail -n 25 "$OUT/batch.log"
