#!/usr/bin/env python3
"""PyTorch's own CUDA-event timing of a smoke task's op, the way kforge times eager (issue 6,
"fidelity"): a pool of 4 input sets copied into the same tensor before each timed run, an L2 flush
by reading a buffer of twice the L2 size, events around the op, a device-wide sync, TF32 off,
median of as many runs as 100 ms needs (10..200). "Held" as kforge does (a spin kernel keeps
the stream busy while the host queues flush, events and op); unheld, the usual way, for contrast
(its events also catch the host's launch gap). Prints one JSON line per op.

    python3 bench/fidelity.py            (on the GPU machine; compare with `kforge verify --json`)
"""
import json
import statistics

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = torch.device("cuda")
l2 = torch.cuda.get_device_properties(dev).L2_cache_size
flush_buf = torch.ones(max(2 * l2 // 4, 1 << 20), device=dev)

OPS = {
    "smoke/relu": (lambda x: torch.relu(x), (4096, 4096)),
    "smoke/softmax": (lambda x: torch.softmax(x, dim=-1), (4096, 4096)),
    "smoke/sum_rows": (lambda x: torch.sum(x, dim=-1), (4096, 4096)),
}


def time_op(fn, shape):
    pool = [torch.randn(shape, device=dev) for _ in range(4)]
    x = torch.empty(shape, device=dev)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def once(rep, held):
        x.copy_(pool[rep % 4])
        torch.cuda.synchronize()
        if held:
            # kforge's timing gate in Python: a spin on the stream while the host queues the
            # flush, the events and the op, so no host launch gap falls between the events.
            torch.cuda._sleep(1_000_000)
        flush_buf.sum()
        start.record()
        fn(x)
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop)

    out = {}
    for held in (True, False):
        warm = [once(r, held) for r in range(3)]
        reps = int(min(200, max(10, -(-100 // statistics.median(warm)))))
        out[held] = (statistics.median(once(r, held) for r in range(reps)), reps)
    return out


for name, (fn, shape) in OPS.items():
    t = time_op(fn, shape)
    print(json.dumps({"task": name, "pytorch_eager_ms": t[True][0], "reps": t[True][1],
                      "pytorch_eager_unheld_ms": t[False][0]}))
