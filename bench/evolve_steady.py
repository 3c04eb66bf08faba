#!/usr/bin/env python3
"""`kforge evolve` against a live model (issue 37; docs/benchmarks.md, "The loop against a live model").

Runs the real `build/kforge evolve` with
- a loopback model: a real HTTP server on 127.0.0.1 speaking OpenAI chat completions (streamed or
  not, as kforge asks), each request answered after a log-normal latency (median --median s times
  --scale, shape --sigma; the k-th request to arrive gets the k-th draw of a generator seeded with
  --seed + repetition) with the shipped seed kernel of the task the prompt names ("## The
  operation: SUITE/NAME" in the context -> tasks/SUITE/seeds/NAME.md). An ideas request ("List N
  distinct optimisation ideas") is answered with N numbered ideas, distinct per request, as a
  sampled model would. The server records each request's arrival and completion;
- fake GPU workers (build/tests/kforge-fake-gpu-worker --busy-ms --gpu-ms: each screen and
  judgment sleeps that long; the worker still compiles each candidate with NVRTC, as a real one
  does) started by `kforge evolve --workers N --worker-command`;
- the LLM config's endpoint concurrency (--concurrency, default 16) and a run budget of --budget
  answers (`[budget] llm_calls`), --generations high enough that the budget is what stops the run.
--scale scales the model's latencies only; the fake GPU keeps --gpu-ms.

Prints, per repetition (and their mean):
- wall: the `kforge evolve` process, start to exit;
- the lower bound = max(model, GPU): model = the summed latencies of the budget's answers (the
  first --budget requests answered, in the order asked) / concurrency; GPU = measurements (the
  screen and judge events of --log-json) x --gpu-ms; and wall / lower bound (issue 37's aim:
  <= 1.3). Answers past the budget (requests made before the budget was seen spent) are counted
  in "answers", not in the bound;
- requests in flight, time-weighted, while the budget lasted (from kforge's start to the
  completion of the budget's last answer), and as % of the concurrency (aim: >= 80 %);
- the GPU busy share kforge itself reports in its summary (time in the workers' jobs, their
  compiles and the transfers included, over the loop's wall time);
- where the time went: when the loop started (workers ready), the first request, the budget's
  last answer, requests in flight from the first request, the most at once, the seconds with none
  in flight, and the requests by kind.

Every number is measured in the run; nothing is assumed. The model's records, kforge's output
(each line with its time) and --log-json are in each run's folder (--keep).

usage:
  bench/evolve_steady.py                       # the smoke suite, median 2 s, budget 48
  bench/evolve_steady.py --reps 3
  bench/evolve_steady.py --tasks level1 --median 30 --scale 0.1
"""
import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TASK_RE = re.compile(r"## The operation: (\S+)")
IDEAS_RE = re.compile(r"List (\d+) distinct optimisation ideas")
KINDS = [  # the first words of each template's request (prompts/*.md), to say what was asked
    ("Make the kernel below faster", "optimize"),
    ("propose distinct ways to make it faster", "ideas"),
    ("Implement one optimisation idea", "idea"),
    ("Combine what each does well", "crossover"),
    ("Write a fast, correct CUDA kernel", "translate"),
    ("was rejected before it could run", "repair"),
    ("computes the wrong result", "repair"),
]


class Model:
    """The loopback model's state: the latency draws, the seeds, and a record per request."""

    def __init__(self, tasks_root, median, sigma, seed):
        self.tasks_root = Path(tasks_root)
        self.mu, self.sigma = math.log(median), sigma
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.records = []  # dicts: arrival, completion, latency, task, kind, ok
        self.seeds = {}

    def draw(self):
        with self.lock:
            rec = {"index": len(self.records), "arrival": time.monotonic(),
                   "latency": self.rng.lognormvariate(self.mu, self.sigma)}
            self.records.append(rec)
            return rec

    def seed_of(self, task):
        if task not in self.seeds:
            suite, _, name = task.rpartition("/")
            path = self.tasks_root / suite / "seeds" / (name + ".md")
            self.seeds[task] = path.read_text() if path.is_file() else None
        return self.seeds[task]


def request_kind(text):
    at = text.rfind("# The request")
    tail = text[at:] if at >= 0 else text
    for words, kind in KINDS:
        if words in tail[:4000]:
            return kind
    return "other"


def make_handler(model):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the body ends with the connection, streamed or not

        def log_message(self, *args):
            pass

        def do_POST(self):
            rec = model.draw()
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            text = "\n".join(m["content"] if isinstance(m["content"], str)
                             else "".join(p.get("text", "") for p in m["content"])
                             for m in body.get("messages", []))
            task = TASK_RE.search(text)
            rec["task"] = task.group(1) if task else None
            rec["kind"] = request_kind(text)
            ideas = IDEAS_RE.search(text)
            if ideas:
                n = int(ideas.group(1))
                # Distinct per request, as a sampled model's would be (the same list twice would
                # make the same implementation requests, answered from kforge's response cache).
                answer = "\n".join(
                    f"{k}. Idea {k} of answer {rec['index']}: let each thread handle more "
                    f"elements, to keep more bytes in flight." for k in range(1, n + 1))
            else:
                answer = model.seed_of(rec["task"]) if rec["task"] else None
                if answer is None:
                    answer = "No kernel: the prompt names no task with a shipped seed."
            usage = {"prompt_tokens": len(text) // 4, "completion_tokens": len(answer) // 4,
                     "total_tokens": len(text) // 4 + len(answer) // 4}
            stream = body.get("stream") is True
            try:
                if stream:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                    self.end_headers()
                    self.wfile.write(self.event({"role": "assistant", "content": ""}, None))
                    self.wfile.flush()
                time.sleep(rec["latency"])
                if stream:
                    out = self.event({"content": answer}, None) + self.event({}, "stop")
                    if (body.get("stream_options") or {}).get("include_usage"):
                        out += b"data: " + json.dumps(
                            {"id": "chatcmpl-loop", "object": "chat.completion.chunk",
                             "created": int(time.time()), "model": body.get("model", "loop"),
                             "choices": [], "usage": usage}).encode() + b"\n\n"
                    out += b"data: [DONE]\n\n"
                else:
                    out = json.dumps({
                        "id": "chatcmpl-loop", "object": "chat.completion",
                        "created": int(time.time()), "model": body.get("model", "loop"),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": answer}}],
                        "usage": usage}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                self.wfile.write(out)
                self.wfile.flush()
                rec["ok"] = True
            except (BrokenPipeError, ConnectionResetError):
                rec["ok"] = False  # the client went away (a cancelled request)
            rec["completion"] = time.monotonic()

        def event(self, delta, finish):
            return b"data: " + json.dumps({
                "id": "chatcmpl-loop", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": "loop",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).encode() + b"\n\n"

    return Handler


def in_flight(records, t0, t1):
    """Time-weighted mean of requests in flight over [t0, t1], and the most at once."""
    if t1 <= t0:
        return 0.0, 0
    points = []
    for r in records:
        a, c = max(r["arrival"], t0), min(r.get("completion", t1), t1)
        if c > a:
            points += [(a, 1), (c, -1)]
    points.sort()
    area, level, most, prev = 0.0, 0, 0, t0
    for t, d in points:
        area += level * (t - prev)
        level += d
        most = max(most, level)
        prev = t
    return area / (t1 - t0), most


def idle_time(records, t0, t1):
    """Seconds of [t0, t1] with no request in flight."""
    spans = sorted((max(r["arrival"], t0), min(r.get("completion", t1), t1)) for r in records)
    idle, reach = 0.0, t0
    for a, c in spans:
        if c <= a:
            continue  # outside the window
        if a > reach:
            idle += a - reach
        reach = max(reach, c)
    return idle + max(0.0, t1 - reach)


def run_once(args, rep, out_dir):
    model = Model(ROOT / "tasks", args.median * args.scale, args.sigma, args.seed + rep)
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(model))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]

    work = Path(tempfile.mkdtemp(prefix=f"evolve-steady-{rep}-", dir=out_dir))
    (work / "llm.toml").write_text(
        f'[providers.loop]\napi = "openai"\nbase_url = "http://127.0.0.1:{port}/v1"\n'
        f"concurrency = {args.concurrency}\ntimeout = 600\n"
        f'{"stream = false" if args.no_stream else ""}\n'
        f'[[models]]\nmodel = "loop:seed-model"\n')
    (work / "run.toml").write_text(
        f"generations = {args.generations}\n[budget]\nllm_calls = {args.budget}\n")
    worker = (f"'{args.worker}' --connect {{address}} --worker {{worker}} "
              f"--busy-ms {args.gpu_ms}")
    cmd = [str(args.kforge), "evolve", *args.tasks.split(), "--config", str(work / "run.toml"),
           "--llm-config", str(work / "llm.toml"), "--seed", str(args.seed + rep),
           "--db", str(work / "run.db"), "--log-json", str(work / "events.jsonl"),
           "--no-compile"]
    if not args.real_gpu:
        cmd += ["--workers", str(args.workers), "--worker-command", worker]
    env = dict(os.environ, KFORGE_CACHE_DIR=str(work / "cache"))
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines = [(time.monotonic(), line) for line in proc.stdout]  # each line, when it came
    proc.wait()
    t1 = time.monotonic()
    server.shutdown()
    output = "".join(line for _, line in lines)
    (work / "kforge.out").write_text("".join(f"{t - t0:8.2f} {line}" for t, line in lines))
    loop_start = next((t for t, line in lines if re.match(r"kforge evolve: \d+ task\(s\)", line)),
                      t0)
    recs = sorted(model.records, key=lambda r: r["arrival"])
    (work / "requests.jsonl").write_text(
        "".join(json.dumps({**r, "arrival": r["arrival"] - t0,
                            "completion": r.get("completion", t1) - t0}) + "\n" for r in recs))
    if proc.returncode != 0:
        sys.exit(f"kforge evolve exited {proc.returncode}; its output is in {work}/kforge.out\n"
                 + output[-3000:])

    answers = [r for r in recs if r.get("ok")]
    done = sorted(r["completion"] for r in answers)
    budget_end = done[min(args.budget, len(done)) - 1] if done else t1
    events = [json.loads(line) for line in open(work / "events.jsonl") if line.strip()]
    measurements = sum(1 for e in events if e.get("event") in ("screen", "judge"))
    summary = re.search(r"(\d+) evaluation\(s\) measured.*?([\d.]+) s wall, GPU busy (\d+)%",
                        output)
    answered = re.search(r"LLM .*?: (\d+) answer\(s\) \((\d+) from the response cache",
                         output)
    stopped = re.search(r"\nrun \d+: ([^;]+);", output)
    wall = t1 - t0
    # The budget's answers: the first `budget` answered requests in the order they were asked (their
    # latencies are the seeded draws, whatever the loop does); answers past the budget (asked
    # before it was seen spent) are an overrun, work the budget did not ask for.
    budgeted = answers[:args.budget]
    model_bound = sum(r["completion"] - r["arrival"] for r in budgeted) / args.concurrency
    gpu_bound = measurements * args.gpu_ms / 1000
    if args.real_gpu:  # the GPU's own time: the last event's running total
        gpu_bound = max([e.get("gpu_s", 0) for e in events] or [0])
    bound = max(model_bound, gpu_bound)
    mean_all, most = in_flight(recs, t0, budget_end)
    first = recs[0]["arrival"] if recs else budget_end
    mean_first, _ = in_flight(recs, first, budget_end)
    idle = idle_time(recs, first, budget_end)
    last = max((r["completion"] for r in recs), default=t1)
    mean_whole, _ = in_flight(recs, t0, last)
    kinds = {}
    for r in recs:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    return {
        "wall_s": wall, "lower_bound_s": bound, "model_bound_s": model_bound,
        "gpu_bound_s": gpu_bound, "ratio": wall / bound if bound else float("nan"),
        "in_flight": mean_all, "in_flight_pct": 100 * mean_all / args.concurrency,
        "in_flight_from_first": mean_first, "most_in_flight": most,
        "in_flight_whole": mean_whole, "last_answer_s": last - t0,
        "budget_s": budget_end - t0, "first_request_s": first - t0,
        "requests": len(recs), "answers": len(answers),
        "kforge_answers": int(answered.group(1)) if answered else None,
        "kforge_cached": int(answered.group(2)) if answered else None,
        "setup_s": loop_start - t0, "idle_s": idle,
        "measurements": measurements,
        "kforge_measured": int(summary.group(1)) if summary else None,
        "kforge_wall_s": float(summary.group(2)) if summary else None,
        "gpu_busy_pct": int(summary.group(3)) if summary else None,
        "stopped": stopped.group(1) if stopped else "?", "kinds": kinds, "dir": str(work),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", default="smoke", help="suites or tasks for kforge evolve")
    p.add_argument("--median", type=float, default=2.0, help="the model's median latency, s")
    p.add_argument("--scale", type=float, default=1.0, help="multiplies the model's latencies")
    p.add_argument("--sigma", type=float, default=0.5, help="the log-normal's shape")
    p.add_argument("--seed", type=int, default=1, help="latency draws and kforge's --seed (+rep)")
    p.add_argument("--concurrency", type=int, default=16, help="the endpoint's concurrency")
    p.add_argument("--budget", type=int, default=48, help="answers ([budget] llm_calls)")
    p.add_argument("--generations", type=int, default=1000, help="enough for the budget to stop")
    p.add_argument("--gpu-ms", type=int, default=40, help="the fake GPU's time per measurement")
    p.add_argument("--workers", type=int, default=1, help="fake GPU workers")
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--no-stream", action="store_true", help="the provider's stream = false")
    p.add_argument("--kforge", type=Path, default=ROOT / "build" / "kforge")
    p.add_argument("--worker", type=Path,
                   default=ROOT / "build" / "tests" / "kforge-fake-gpu-worker")
    p.add_argument("--keep", action="store_true", help="keep each run's folder (db, logs)")
    p.add_argument("--json", action="store_true", help="also print each run as a JSON line")
    p.add_argument("--real-gpu", action="store_true",
                   help="kforge evolve on this machine's GPU (no fake workers); the GPU bound is "
                        "kforge's GPU seconds")
    args = p.parse_args()
    out_dir = tempfile.mkdtemp(prefix="evolve-steady-")
    print(f"kforge evolve {args.tasks}: model median {args.median * args.scale:g} s "
          f"(sigma {args.sigma}), concurrency {args.concurrency}, budget {args.budget} answers, "
          + ("this machine's GPU" if args.real_gpu else
             f"{args.workers} fake GPU worker(s) at {args.gpu_ms} ms a measurement"))
    head = ("| rep | wall s | lower bound s (model / GPU) | wall / bound | in flight, mean (% of "
            f"{args.concurrency}) | GPU busy (kforge) | answers (cached) | measurements | stopped |")
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    runs = []
    for rep in range(args.reps):
        r = run_once(args, rep, out_dir)
        runs.append(r)
        print(f"| {rep} | {r['wall_s']:.1f} | {r['lower_bound_s']:.1f} ({r['model_bound_s']:.1f} / "
              f"{r['gpu_bound_s']:.1f}) | {r['ratio']:.2f}x | {r['in_flight']:.1f} "
              f"({r['in_flight_pct']:.0f} %) | {r['gpu_busy_pct']} % | {r['kforge_answers']} "
              f"({r['kforge_cached']}) | {r['measurements']} | {r['stopped']} |", flush=True)
    mean = lambda k: sum(r[k] for r in runs) / len(runs)
    if len(runs) > 1:
        print(f"| mean | {mean('wall_s'):.1f} | {mean('lower_bound_s'):.1f} | {mean('ratio'):.2f}x | "
              f"{mean('in_flight'):.1f} ({mean('in_flight_pct'):.0f} %) | "
              f"{mean('gpu_busy_pct'):.0f} % | | | |")
    print()
    head = ("| rep | loop starts s | first request s | budget's last answer s | in flight from the "
            "first request | most in flight | no request in flight s | last answer s | in flight "
            "to the last answer | requests (by kind) |")
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for rep, r in enumerate(runs):
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(r["kinds"].items()))
        print(f"| {rep} | {r['setup_s']:.1f} | {r['first_request_s']:.1f} | {r['budget_s']:.1f} | "
              f"{r['in_flight_from_first']:.1f} | {r['most_in_flight']} | {r['idle_s']:.1f} | "
              f"{r['last_answer_s']:.1f} | {r['in_flight_whole']:.1f} | "
              f"{r['requests']} ({kinds}) |")
    if args.json:
        for r in runs:
            print(json.dumps(r))
    if args.keep:
        print(f"runs kept in {out_dir}")
    else:
        shutil.rmtree(out_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
