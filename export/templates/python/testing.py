"""Inputs drawn and references run as kforge's judge does them: shared by tests/test_ops.py and
bench/bench_ops.py (loaded from this file, so they need no built package to start)."""
import contextlib
import math
import typing

import torch


_TRANSFORMS = {}


def draw(dtype_name, spec, device="cuda", transform=None):
    """One input: spec {"shape", "init"} drawn from torch's generator (seed it first). A computed
    input (`transform`, the manifest input's): its draw and spec["draws"], then the transform."""
    if transform is not None:
        low = dtype_name in ("float16", "bfloat16")  # the transform runs in float32, then rounds
        drawn = [_draw(transform["draw_dtype"], spec, device, keep_float32=True)]
        drawn += [_draw(d["dtype"], d, device, keep_float32=True) for d in spec.get("draws", [])]
        source = transform["torchscript"]
        if source not in _TRANSFORMS:
            _TRANSFORMS[source] = _compiled(source, transform["function"])
        with torch.no_grad():
            t = _TRANSFORMS[source](*drawn)
        return (t.to(getattr(torch, dtype_name)) if low else t).contiguous()
    return _draw(dtype_name, spec, device)


class _AtenTorch(type(torch)):
    """`torch` as TorchScript compiled from a string sees it in C++ (LibTorch's resolver): the aten
    builtins, as kforge compiled the transform."""

    def __getattr__(self, name):
        try:
            return getattr(torch.ops.aten, name)
        except (AttributeError, RuntimeError):
            raise AttributeError(f"torch.{name} is not an aten builtin")


def _compiled(source, function):
    unit = torch._C.CompilationUnit()
    aten = _AtenTorch("torch")
    unit.define(source, lambda n: aten if n == "torch" else None)
    fn = unit.find_function(function)
    return lambda *args, _unit=unit: fn(*args)  # the unit lives as long as its function


def _draw(dtype_name, spec, device="cuda", keep_float32=False):
    dtype = getattr(torch, dtype_name)
    if keep_float32 and dtype in (torch.float16, torch.bfloat16):
        dtype = torch.float32
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
