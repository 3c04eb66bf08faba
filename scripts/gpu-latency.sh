#!/usr/bin/env bash
# Issue 6's verdict latency on level-1 work: every level-1 seed judged once (default tunables, no
# tuning), each verdict's judge time and where it went; then the elementwise seeds tuned again
# (their tune space gained an uncapped grid). Stores into an archive carried from an earlier
# call when KFORGE_SEEDS_DB_IN names one, so the results tables take each task's fastest. Run it
# in a call of its own (about 5 minutes with the build; KFORGE_LATENCY_TUNE=0 skips the tuning). Exit status: 0 when every seed was correct.
#
#   device run:  source .device/env.sh && KFORGE_SEEDS_DB_IN=.gpu-in/archive-seeds.db scripts/gpu-latency.sh
set -uo pipefail
source "$(dirname "$0")/gpu-common.sh"
build_kforge || exit 1
DB="$OUT/archive-seeds.db"
if [ -n "${KFORGE_SEEDS_DB_IN:-}" ]; then
  cp "$KFORGE_SEEDS_DB_IN" "$DB" || { echo "cannot copy $KFORGE_SEEDS_DB_IN" >&2; exit 2; }
fi
rc=0
log="$OUT/latency.log"
timeout 200 "$K" corpus tasks/level1/seeds --expect correct --kind seed --db "$DB" --jsonl "$OUT/latency-level1.jsonl" \
  > "$log" 2>&1 || rc=1
tail -3 "$log"
python3 - "$OUT/latency-level1.jsonl" <<'PY' | tee -a "$log"
import json, os, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])] if os.path.exists(sys.argv[1]) else []
if not rows:
    sys.exit('no verdicts were written')
j = sorted(r['judge_ms'] / 1000 for r in rows)
print('level-1 verdict latency (judge only, compile excluded, default tunables): median %.2f s, p10 %.2f, p90 %.2f, '
      'max %.2f over %d' % (st.median(j), j[len(j) // 10], j[9 * len(j) // 10], j[-1], len(j)))
for key in ('phase_ms', 'correctness_split_ms'):
    parts = {}
    for r in rows:
        for k, v in r.get(key, {}).items(): parts.setdefault(k, []).append(v)
    print(key, 'median', {k: round(st.median(v)) for k, v in parts.items()})
PY
if [ "${KFORGE_LATENCY_TUNE:-1}" = 1 ]; then  # 0: the level-1 latency only
  files=$(grep -l '"BLOCKS_PER_SM": \[65536' tasks/level1/seeds/*.md tasks/smoke/seeds/*.md)
  timeout 150 "$K" corpus $files --expect correct --kind seed --tune-points 6 --db "$DB" --jsonl "$OUT/elementwise.jsonl" \
    > "$OUT/elementwise.log" 2>&1 || rc=1
  grep -E "screened|answer\(s\) in|expectation" "$OUT/elementwise.log"
fi
for s in smoke level1; do "$K" archive results "$s" --kind seed --db "$DB" > "$OUT/results-$s.md" 2>&1; done
exit $rc
