#!/usr/bin/env bash
# The search loop on the GPU machine: `kforge evolve` killed with SIGKILL mid-run and resumed (the
# records are checked for repeats), then an offline run over level1 under a time budget, with its
# report. Logs and the reports go to $OUT.
#   device run:  source .device/env.sh && scripts/gpu-evolve.sh
#                source .device/env.sh && MINUTES=8 scripts/gpu-evolve.sh levels
#                source .device/env.sh && RESUME=1 LIMIT=300 scripts/gpu-evolve.sh levels
# `levels`: one offline run over level1 and level2 (or TASKS) under a MINUTES budget: its report, each suite's
# seeds and winners tables in $OUT/tables.md (docs/results.md) and the loop's throughput
# (bench/loop_throughput.py).
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
build_kforge || exit 1
K="$PWD/$K"
count() { python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])" "$@"; }

if [ "${1:-}" = llm ]; then  # the LLM proposer end to end, against the replay server on loopback
  DB=/tmp/kforge-llm.db
  rm -f $DB*
  python3 scripts/llm-replay-server.py 8765 & server=$!
  sleep 1
  OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=none timeout 240 "$K" evolve smoke --model openai:replay \
    --generations 2 --db $DB > "$OUT/evolve-llm.log" 2>&1
  echo "evolve rc=$?" >> "$OUT/evolve-llm.log"
  kill $server
  "$K" report 1 --db $DB > "$OUT/evolve-llm-report.md"
  python3 - $DB <<'PY' | tee "$OUT/evolve-llm-kinds.txt"
import sqlite3, sys
q = """SELECT c.prompt_kind, c.model, coalesce(e.outcome, s.outcome, 'compile failed'), count(*) FROM candidates c
       LEFT JOIN screens s ON s.candidate_id = c.id LEFT JOIN evaluations e ON e.candidate_id = c.id GROUP BY 1, 2, 3"""
for row in sqlite3.connect(sys.argv[1]).execute(q):
    print(*row)
PY
  tail -n 12 "$OUT/evolve-llm.log"
  exit 0
fi

if [ "${1:-}" = levels ]; then
  # LIMIT: seconds for evolve (default MINUTES * 60 + 60), or DEADLINE: seconds after this script
  # started by which evolve ends (the build's time taken off); RESUME=1 resumes run 1 of the archive a
  # previous call on this (warm) machine left in /tmp; EVOLVE_ARGS: more flags (--no-max-autotune);
  # GENERATIONS: the tuner's generations per task after the seed (default 50); TASKS: suites, task
  # names or files (default: level1 level2). The machine's torch.compile packages come back as
  # $OUT/compiled-cache.tgz (8 files in all: no room for another).
  DB=/tmp/kforge-levels.db
  limit=${LIMIT:-$(( ${MINUTES:-8} * 60 + 60 ))}
  [ -n "${DEADLINE:-}" ] && limit=$(( DEADLINE - SECONDS ))
  nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv >> "$OUT/levels.log" 2>&1
  if [ "${RESUME:-0}" = 1 ] && [ -f $DB ]; then
    timeout "$limit" "$K" evolve --resume 1 ${EVOLVE_ARGS:-} --db $DB --log-json "$OUT/levels.jsonl" >> "$OUT/levels.log" 2>&1
  else
    rm -f $DB*
    timeout "$limit" "$K" evolve ${TASKS:-level1 level2} --llm none --generations "${GENERATIONS:-50}" \
      --budget-minutes "$(( (limit - 30) / 60 ))" ${EVOLVE_ARGS:-} --db $DB --log-json "$OUT/levels.jsonl" >> "$OUT/levels.log" 2>&1
  fi
  echo "evolve rc=$? after ${SECONDS}s" >> "$OUT/levels.log"
  "$K" report 1 --db $DB > "$OUT/levels-report.md"
  # The tables in one file (the device returns 8 files a call): each suite's seeds, then its winners.
  suites=$(for t in ${TASKS:-level1 level2}; do echo "${t%%/*}"; done | sort -u)  # the tasks' suites
  for suite in $suites; do
    for what in "--kind seed" --winners; do
      echo "\$ kforge archive results $suite $what"
      "$K" archive results $suite $what --db $DB --wide
      echo
    done
  done > "$OUT/tables.md"
  python3 bench/loop_throughput.py "$OUT/levels.jsonl" | tee "$OUT/throughput.md"
  gzip -c $DB > "$OUT/levels.db.gz"
  pack_compiled_cache  # the 8th file: the next session's machine starts with the packages
  tail -n 4 "$OUT/levels.log"; grep -h -e "^\\$ kforge" -e "^Geometric" "$OUT/tables.md"
  exit 0
fi

# 1. kill -9 in the middle of a GPU run, then resume.
DB=/tmp/kforge-kill.db
rm -f $DB*
"$K" evolve smoke --llm none --generations 4 --db $DB > "$OUT/evolve-killed.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  n=$(count $DB "SELECT count(*) FROM screens" 2>/dev/null || echo 0)
  [ "${n:-0}" -ge 30 ] && break
  sleep 0.1
done
kill -9 $pid; wait $pid 2>/dev/null
echo "killed after $(count $DB 'SELECT count(*) FROM screens') screens, $(count $DB 'SELECT count(*) FROM evaluations') judgments" | tee "$OUT/evolve-resume.log"
KFORGE_PROGRESS=always timeout 240 "$K" evolve --resume 1 --db $DB >> "$OUT/evolve-resume.log" 2>&1
echo "after resume: $(count $DB 'SELECT count(*) FROM screens') screens, $(count $DB 'SELECT count(*) FROM evaluations') judgments;" \
  "candidates judged more than once without a new admission: $(count $DB "SELECT count(*) FROM (SELECT candidate_id FROM evaluations GROUP BY candidate_id HAVING count(*) > 1 AND max(admitted) = 0)")" \
  | tee -a "$OUT/evolve-resume.log"
"$K" report 1 --db $DB > "$OUT/evolve-smoke-report.md"

# 2. level1 offline, four minutes (LEVEL1=0 skips it).
[ "${LEVEL1:-1}" = 1 ] || exit 0
DB2=/tmp/kforge-level1.db
rm -f $DB2*
timeout 330 "$K" evolve level1 --llm none --generations 3 --budget-minutes 4 --db $DB2 --log-json "$OUT/level1.jsonl" \
  > "$OUT/evolve-level1.log" 2>&1
"$K" report 1 --db $DB2 > "$OUT/evolve-level1-report.md"
tail -3 "$OUT/evolve-resume.log"
sed -n '/^TASK/,$p' "$OUT/evolve-level1.log" | tail -75
