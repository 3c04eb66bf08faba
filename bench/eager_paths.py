#!/usr/bin/env python3
"""Three ways of running a task's reference, timed side by side the way kforge times eager: as Python
(what a PyTorch user runs), as TorchScript with the graph optimizer off (kforge's "eager" baseline)
and with it on (kforge's "scripted"). Reads the tasks from a package `kforge export` wrote (its
manifest holds each op's reference, inputs and timed configuration).

    python3 bench/eager_paths.py PACKAGE_DIR [--ops hinge_loss,softmax] [--json]

Each figure is the median of as many runs as 100 ms needs (20..200), each after an L2 flush, with
the stream held by a spin while the host queues the op (kforge's timing gate), inputs copied in
from a pool of two drawn sets before each run. Exits 2 without a GPU.
"""
import argparse
import importlib.util
import json
import os
import statistics
import sys


def fail(message):
    print(f"eager_paths.py: {message}", file=sys.stderr)
    sys.exit(2)


def load_testing(package):
    with open(os.path.join(package, "manifest.json")) as f:
        manifest = json.load(f)
    path = os.path.join(package, "python", manifest["name"], "testing.py")
    spec = importlib.util.spec_from_file_location("kforge_export_testing", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return manifest, module


def scripted(torch, entry):
    """forward() compiled from the TorchScript kforge compiles (the manifest keeps prelude and reference).
    LibTorch's compiler resolves `torch.` to every ATen builtin; from Python, `torch` is the Python
    module, which lacks some (torch.hardtanh lives in torch._C._nn): a module holding both stands in."""
    import math
    import types
    import typing
    shim = types.ModuleType("torch")
    shim.__dict__.update(torch.__dict__)
    for name in dir(torch._C._nn):
        if not name.startswith("_") and not hasattr(shim, name):
            setattr(shim, name, getattr(torch._C._nn, name))
    scope = {"torch": shim, "Tensor": torch.Tensor, "math": math}
    scope.update({name: getattr(typing, name) for name in ("List", "Optional", "Tuple", "Union", "Dict")})
    unit = torch.jit.CompilationUnit()
    unit.define(entry["reference_torchscript"], rcb=scope.get)
    return unit.forward


def median_ms(torch, fn, pool, slots, flush, optimize=None):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def once(run):
        for slot, value in zip(slots, pool[run % len(pool)]):
            slot.copy_(value)
        flush.fill_(run & 0x7F)
        torch.cuda.synchronize()
        torch.cuda._sleep(1_000_000)
        start.record()
        fn(*slots)
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop)

    def series():
        warm = [once(run) for run in range(5)]
        runs = int(min(200, max(20, -(-100 // max(statistics.median(warm), 1e-3)))))
        return statistics.median(once(run) for run in range(runs)), runs

    if optimize is None:
        return series()
    with torch.jit.optimized_execution(optimize):
        return series()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", help="a folder `kforge export` wrote")
    parser.add_argument("--ops", nargs="+", default=[], help="ops (names, or comma-separated); default all")
    parser.add_argument("--json", action="store_true", help="one JSON object per op")
    args = parser.parse_args()
    import torch
    if not torch.cuda.is_available():
        fail(f"no CUDA GPU: torch {torch.__version__} sees none")
    manifest, testing = load_testing(args.package)
    entries = {e["op"]: e for e in manifest["ops"]}
    wanted = [op for item in args.ops for op in item.split(",") if op] or list(entries)
    unknown = [op for op in wanted if op not in entries]
    if unknown:
        fail(f"no op {', '.join(unknown)} in {args.package}")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")

    if not args.json:
        print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}\n")
        print("| task | Python eager ms | TorchScript, optimizer off ms (kforge eager) | TorchScript, optimizer on ms "
              "| kforge eager / Python eager | eager kforge recorded ms |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for op in wanted:
        entry = entries[op]
        config = ([c for c in entry["configurations"] if c.get("timed")] or entry["configurations"][-1:])[-1]
        torch.manual_seed(2000)
        pool = [[testing.draw(i["dtype"], spec) for i, spec in zip(entry["inputs"], config["inputs"])]
                for _ in range(2)]
        slots = [t.clone() for t in pool[0]]
        with testing.math_mode(entry):
            python_ms, runs = median_ms(torch, testing.reference(entry), pool, slots, flush)
            script = scripted(torch, entry)
            plain_ms, _ = median_ms(torch, script, pool, slots, flush, optimize=False)
            optimized_ms, _ = median_ms(torch, script, pool, slots, flush, optimize=True)
        judged = entry.get("judged") or {}
        recorded = (judged.get("baselines") or {}).get("eager")
        row = {"task": entry["task"], "dims": config["dims"], "runs": runs, "python_eager_ms": python_ms,
               "script_unoptimized_ms": plain_ms, "script_optimized_ms": optimized_ms,
               "recorded_eager_ms": recorded}
        del pool, slots
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            rec = "-" if recorded is None else f"{recorded:.4f}"
            print(f"| {entry['task']} | {python_ms:.4f} | {plain_ms:.4f} | {optimized_ms:.4f} | "
                  f"{plain_ms / python_ms:.3f} | {rec} |", flush=True)


if __name__ == "__main__":
    main()
