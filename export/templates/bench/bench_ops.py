"""Times each op of this package against its task's reference run eagerly, at the op's timed
configuration (manifest.json), and sets the speedup beside the one kforge recorded over eager; the
speedup kforge recorded over its best baseline (the fastest kind it measured, e.g. torch.compile)
is shown beside them.

    python DIR/bench/bench_ops.py [--ops softmax,matmul] [--runs 100] [--json]

Each time is the median of --runs runs (at least 50), each timed with CUDA events after an L2 flush
(a write of twice the L2) and a synchronize; the stream is then held by a short spin so the call is
queued before the start event fires, as kforge's judge times. Inputs are drawn as the tests draw
them. A table in markdown, or with --json one JSON object per op. Exits 2 without a GPU.
"""
import argparse
import importlib
import json
import math
import os
import statistics
import sys
import typing

DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WARMUP = 5
SPIN_CYCLES = 1_000_000  # about half a millisecond: longer than queueing one call


def fail(message):
    print(f"bench_ops.py: {message}", file=sys.stderr)
    sys.exit(2)


def shared(name):
    """python/<name>/testing.py: inputs and references as the tests draw and run them."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(f"{name}_testing", os.path.join(DIR, "python", name, "testing.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def median_ms(torch, fn, inputs, runs, flush):
    """Median CUDA-event time of fn(*inputs) over `runs` runs, each after an L2 flush."""
    for _ in range(WARMUP):
        fn(*inputs)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for run in range(runs):
        flush.fill_(run & 0x7F)
        torch.cuda.synchronize()
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(SPIN_CYCLES)
        start.record()
        fn(*inputs)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def bench(torch, name, entry, runs, flush):
    configs = [c for c in entry["configurations"] if c.get("timed")] or entry["configurations"][-1:]
    config = configs[-1]
    torch.manual_seed(2000)
    testing = shared(name)
    inputs = [testing.draw(i["dtype"], spec, transform=i.get("transform"))
              for i, spec in zip(entry["inputs"], config["inputs"])]
    forward = testing.reference(entry)
    op = getattr(getattr(torch.ops, name), entry["op"])
    allow = bool(entry.get("allow_tf32", False))  # the reference's math mode, as kforge timed eager
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = allow
    eager_ms = median_ms(torch, forward, inputs, runs, flush)
    op_ms = median_ms(torch, op, inputs, runs, flush)
    speedup = eager_ms / op_ms if op_ms > 0 else None
    judged = entry.get("judged") or {}
    recorded = (judged.get("speedup") or {}).get("eager")
    return {"op": entry["op"], "task": entry["task"], "dims": config["dims"], "eager_ms": eager_ms,
            "op_ms": op_ms, "speedup": speedup, "recorded_speedup": recorded,
            "ratio": speedup / recorded if speedup and recorded else None,
            "recorded_best": (judged.get("speedup") or {}).get("best"),
            "best_baseline": judged.get("best_baseline"),
            "fallback": bool(entry.get("fallback"))}


def cell(value, digits=3):
    return "-" if value is None else f"{value:.{digits}f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", nargs="+", default=[], help="ops to time (names, or comma-separated)")
    parser.add_argument("--runs", type=int, default=100, help="timed runs per op and eager (at least 50)")
    parser.add_argument("--json", action="store_true", help="one JSON object per op instead of a table")
    args = parser.parse_args()
    if args.runs < 50:
        fail(f"--runs {args.runs}: at least 50 runs, so the median means something")

    with open(os.path.join(DIR, "manifest.json")) as f:
        manifest = json.load(f)
    name = manifest["name"]
    entries = {entry["op"]: entry for entry in manifest["ops"]}
    wanted = [op for item in args.ops for op in item.split(",") if op] or list(entries)
    unknown = [op for op in wanted if op not in entries]
    if unknown:
        fail(f"no op {', '.join(unknown)} in this package (it has: {', '.join(entries)})")

    try:
        import torch
    except ImportError:
        fail(f"{sys.executable} has no PyTorch")
    if not torch.cuda.is_available():
        fail(f"no CUDA GPU: torch {torch.__version__} sees none; the ops run on CUDA only")
    try:
        importlib.import_module(name)  # registers the ops as torch.ops.<name>
    except ImportError as err:
        fail(f"package {name} does not import: {err}")

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = getattr(props, "L2_cache_size", 128 << 20)  # older torch does not say: assume a large L2
    flush = torch.empty(max(2 * l2, 1 << 20), dtype=torch.uint8, device="cuda")
    rows = [bench(torch, name, entries[op], args.runs, flush) for op in wanted]

    if args.json:
        for row in rows:
            print(json.dumps(row), flush=True)
        return
    print(f"{name} on {torch.cuda.get_device_name()}, torch {torch.__version__}, median of {args.runs} runs\n")
    labels = {k["name"]: k["label"] for k in manifest.get("baseline_kinds", [])}
    print("| op | task | eager ms | op ms | speedup | recorded speedup | ratio | recorded x best |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        op = row["op"] + (" (fallback)" if row["fallback"] else "")
        best = cell(row["recorded_best"], 2)
        if row["best_baseline"]:
            best += f" ({labels.get(row['best_baseline'], row['best_baseline'])})"
        print(f"| {op} | {row['task']} | {cell(row['eager_ms'], 4)} | {cell(row['op_ms'], 4)} | "
              f"{cell(row['speedup'], 2)} | {cell(row['recorded_speedup'], 2)} | {cell(row['ratio'], 2)} | "
              f"{best} |")
    ratios = [row["ratio"] for row in rows if row["ratio"] is not None and not row["fallback"]]
    if ratios:
        within = sum(1 for r in ratios if abs(r - 1) <= 0.10)
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"\n{within} of {len(ratios)} ops within 10 % of the recorded speedup; "
              f"ratio geometric mean {geomean:.3f}, range {min(ratios):.2f}-{max(ratios):.2f}")


if __name__ == "__main__":
    main()
