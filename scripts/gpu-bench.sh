#!/usr/bin/env bash
# Issue 6's harness benchmark, after scripts/gpu-test.sh built everything in build-gpu:
# verdict latency per candidate (compile excluded: the cache is warm from the first pass),
# repeatability (the same kernel timed by two separate judge processes), and fidelity (kforge's
# eager time against PyTorch's own CUDA-event timing from Python). Output: $OUT/bench.log.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}
BUILD_DIR=${BUILD_DIR:-build-gpu}
K="$BUILD_DIR/kforge"
log="$OUT/bench.log"
{
  echo "== verdict latency (judge only, compile excluded: correctness, then timing, eager and scripted baselines), seed 7 =="
  for f in tests/gpu/honest/*.md; do
    task=$(head -1 "$f" | sed -E 's/.*task: *([^ ]+).*/\1/')
    out=$(timeout 120 "$K" verify --answer "$f" --task "$task" --seed 7 --json 2>/tmp/kforge-verify-err.log)
    echo "$out" | python3 -c "import json,sys
d=json.load(sys.stdin); t=d.get('timing') or {}
print('%-28s %-24s %-10s judged %6.2f s  time %s ms  eager %s ms  scripted %s ms  x%s  roofline %s' % ('$(basename $f)', d['task'], d['outcome'], d['verify_ms']/1000,
  round(t.get('time',{}).get('median_ms',0),4), round(t.get('eager',{}).get('median_ms',0),4), round(t.get('scripted',{}).get('median_ms',0),4),
  round(t.get('speedup_eager',0),2), t.get('roofline_fraction')))" 2>&1 || { echo "$f: $out" | tail -3; tail -3 /tmp/kforge-verify-err.log; }
  done
  echo
  echo "== repeatability: two judge processes, same kernel (softmax_rows), seed 7 =="
  for i in 1 2; do "$K" verify --answer tests/gpu/honest/softmax_rows.md --task smoke/softmax --seed 7 --json > "/tmp/kforge-rep$i.json"; done
  python3 -c "import json
a=json.load(open('/tmp/kforge-rep1.json'))['timing']; b=json.load(open('/tmp/kforge-rep2.json'))['timing']
for k in ('time','eager','scripted'):
  x,y=a[k]['median_ms'],b[k]['median_ms']; print('%-9s %.4f ms vs %.4f ms: %.2f%% apart' % (k,x,y,100*abs(x-y)/min(x,y)))"
  echo
  echo "== fidelity: PyTorch's own event timing (Python) vs kforge's eager =="
  python3 bench/fidelity.py
  for f in relu_vec4 softmax_rows sum_rows_cub; do
    task=$(head -1 "tests/gpu/honest/$f.md" | sed -E 's/.*task: *([^ ]+).*/\1/')
    "$K" verify --answer "tests/gpu/honest/$f.md" --task "$task" --seed 7 --json | python3 -c "import json,sys
d=json.load(sys.stdin); print(json.dumps({'task': d['task'], 'kforge_eager_ms': d['timing']['eager']['median_ms'], 'reps': d['timing']['eager']['reps']}))"
  done
} > "$log" 2>&1
cat "$log"
