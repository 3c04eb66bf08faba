"""Inputs drawn and references run as kforge's judge does them: shared by tests/test_ops.py and
bench/bench_ops.py (loaded from this file, so they need no built package to start)."""
import contextlib
import math
import typing

import torch


def draw(dtype_name, spec, device="cuda"):
    """One input: spec {"shape", "init"} drawn from torch's generator (seed it first)."""
    dtype = getattr(torch, dtype_name)
    shape, init = spec["shape"], spec["init"]
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    kind = init["kind"]
    if kind == "normal":
        t = torch.randn(shape, device=device, dtype=wide) * init["std"] + init["mean"]
    elif kind == "uniform":
        t = torch.rand(shape, device=device, dtype=wide) * (init["hi"] - init["lo"]) + init["lo"]
    elif kind == "randint":
        t = torch.randint(int(init["lo"]), int(init["hi"]), shape, device=device, dtype=torch.int64)
    elif kind == "bernoulli":
        t = torch.rand(shape, device=device) < init["p"]
    else:
        raise ValueError(f"manifest.json: unknown init kind {kind!r}")
    return t.to(dtype)


def reference(entry):
    """forward() of the op's task reference, run as Python (as kforge's torch.compile helper does)."""
    scope = {"torch": torch, "F": torch.nn.functional, "Tensor": torch.Tensor, "math": math}
    for name in ("List", "Optional", "Tuple", "Union", "Dict"):
        scope[name] = getattr(typing, name)
    exec(compile(entry["reference"], f"<{entry['task']} reference>", "exec"), scope)
    return scope["forward"]


def as_list(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


@contextlib.contextmanager
def math_mode(entry):
    """TF32 off for the reference unless the task allows it (kforge's eager baseline)."""
    allow = bool(entry.get("allow_tf32", False))
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = allow
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
