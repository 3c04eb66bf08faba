#!/usr/bin/env python3
"""The search loop's throughput from `kforge evolve --log-json` lines (docs/benchmarks.md, "The loop").

Each event carries the run's wall clock `t` and GPU time `gpu_s` so far; the time between an event
and the one before it (compile waits, the GPU's work, the loop's bookkeeping) is charged to the
event's task and generation. Prints candidates and evaluations per minute and the GPU busy
fraction: for the whole run, and at steady state (generations >= 1) per suite.

usage: loop_throughput.py RUN.jsonl
"""
import json
import sys
from collections import defaultdict


def main(path):
    events = [json.loads(line) for line in open(path) if line.strip()]
    if not events:
        sys.exit(f"{path}: no events")
    groups = defaultdict(lambda: {"dt": 0.0, "dgpu": 0.0, "events": 0, "candidates": set()})
    prev_t, prev_gpu = 0.0, 0.0
    for e in events:
        suite = e["task"].split("/")[0]
        for key in (("all runs", "all"), (suite, "steady" if e["generation"] >= 1 else "generation 0")):
            g = groups[key]
            g["dt"] += e["t"] - prev_t
            g["dgpu"] += e["gpu_s"] - prev_gpu
            g["events"] += 1
            # A judgment names its candidate; a screen (since the loop screens before it stores)
            # its code's identity.
            g["candidates"].add(e.get("candidate", e.get("identity")))
        prev_t, prev_gpu = e["t"], e["gpu_s"]
    print("| part | events | candidates | seconds | candidates/min | evaluations/min | GPU busy |")
    print("|---|---|---|---|---|---|---|")
    for (suite, part), g in sorted(groups.items()):
        if g["dt"] <= 0:
            continue
        name = "whole run" if suite == "all runs" else f"{suite}, {part}"
        print(f"| {name} | {g['events']} | {len(g['candidates'])} | {g['dt']:.1f} | "
              f"{60 * len(g['candidates']) / g['dt']:.1f} | {60 * g['events'] / g['dt']:.1f} | "
              f"{100 * g['dgpu'] / g['dt']:.0f}% |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
