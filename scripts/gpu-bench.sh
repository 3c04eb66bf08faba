#!/usr/bin/env bash
# Issues 6 and 7 on the GPU machine, after scripts/gpu-test.sh built everything in build-gpu:
# the exploit and honest corpora judged by `kforge corpus` (their tables, each verdict's judge
# time and where it went), repeatability (the same kernel timed by two separate judge processes)
# and fidelity (kforge's eager time against PyTorch's own CUDA-event timing from Python).
# Output: $OUT/bench.log, $OUT/corpora.jsonl.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
BUILD_DIR=${BUILD_DIR:-build-gpu}
K="$BUILD_DIR/kforge"
log="$OUT/bench.log"
{
  echo "== exploit corpus (correctness only) =="
  timeout 150 "$K" corpus tests/gpu/exploits --no-timing --no-store --jsonl /tmp/exploits.jsonl | sed -n '/^FILE/,$p'
  echo
  echo "== honest corpus, timed =="
  timeout 200 "$K" corpus tests/gpu/honest --expect correct --no-store --jsonl /tmp/honest.jsonl | sed -n '/^FILE/,$p'
  cat /tmp/exploits.jsonl /tmp/honest.jsonl > "$OUT/corpora.jsonl"
  python3 - <<'PY'
import json, statistics as st
rows = [json.loads(l) for l in open('/tmp/honest.jsonl')]
j = sorted(r['judge_ms'] / 1000 for r in rows)
print('honest verdict latency (judge only, compile excluded): median %.2f s, min %.2f, max %.2f over %d' % (st.median(j), j[0], j[-1], len(j)))
PY
  echo
  echo "== repeatability: two judge processes, same kernel (softmax_rows), seed 7 =="
  for i in 1 2; do "$K" verify --answer tests/gpu/honest/softmax_rows.md --task smoke/softmax --seed 7 --json --no-store > "/tmp/kforge-rep$i.json"; done
  python3 -c "import json
a=json.load(open('/tmp/kforge-rep1.json'))['timing']; b=json.load(open('/tmp/kforge-rep2.json'))['timing']
for k in ('time','eager','scripted'):
  x,y=a[k]['median_ms'],b[k]['median_ms']; print('%-9s %.4f ms vs %.4f ms: %.2f%% apart' % (k,x,y,100*abs(x-y)/min(x,y)))"
  echo
  echo "== fidelity: PyTorch's own event timing (Python) vs kforge's eager =="
  python3 bench/fidelity.py
  for f in relu_vec4 softmax_rows sum_rows_cub; do
    task=$(head -1 "tests/gpu/honest/$f.md" | sed -E 's/.*task: *([^ ]+).*/\1/')
    "$K" verify --answer "tests/gpu/honest/$f.md" --task "$task" --seed 7 --json --no-store | python3 -c "import json,sys
d=json.load(sys.stdin); print(json.dumps({'task': d['task'], 'kforge_eager_ms': d['timing']['eager']['median_ms'], 'reps': d['timing']['eager']['reps']}))"
  done
} > "$log" 2>&1
cat "$log"
