"""torch.compile's baselines for kforge's judge (docs/decisions.md, "The torch.compile baseline").

A task's reference is Python as much as TorchScript: run as Python (torch, F = torch.nn.functional,
Tensor and typing's names in scope) it is what a PyTorch user would hand to torch.compile. This
script compiles it with TorchInductor ahead of time into an AOTInductor package (.pt2) that the
judge loads from C++ (torch::inductor::AOTIModelPackageLoader) and times the way it times eager.
The spec's mode is torch.compile's: "default", or "max-autotune" (Triton's GEMM templates
autotuned against ATen, coordinate-descent tuning of every kernel) without CUDA graphs, which an
AOTInductor package does not have: its kernels are launched one by one, as a candidate's are.

    kforge_inductor.py build SPEC.json   # writes spec["out"]; prints one JSON line
    kforge_inductor.py time SPEC.json    # torch.compile timed from Python (the fidelity bench)
    kforge_inductor.py check SPECS.json  # a list of specs: each reference run as Python on the CPU

SPEC: {"task": id, "source": the reference, "inputs": [{"name", "shape", "dtype"}],
       "allow_tf32": bool, "mode": "default" | "max-autotune" (absent: "default"), "device": index,
       "out": path, "expect_torch": LibTorch's version,
       "inputs_file": (time) the judge's input set saved by kforge, "reps": (time) repetitions}
The line printed: {"ok": true, "torch": version, "build_s": s} or {"ok": false, "reason": why}.
"""
import json
import math
import os
import sys
import time
import traceback
import typing


class Unusable(Exception):
    """The task's reference cannot be compiled (the reason is the message)."""


def fail(reason):
    print(json.dumps({"ok": False, "reason": reason}), flush=True)
    sys.exit(0)


def first_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def load_torch(spec):
    try:
        import torch
    except ImportError as e:
        fail(f"{sys.executable} has no PyTorch ({first_line(e)})")
    version = torch.__version__.split("+")[0]
    want = spec.get("expect_torch", "")
    if want and version != want:
        fail(f"{sys.executable} has PyTorch {version} but kforge's LibTorch is {want}: an AOTInductor "
             "package is loaded by the PyTorch version that built it")
    return torch


def require_gpu(torch):
    version = torch.__version__.split("+")[0]
    if not torch.cuda.is_available():
        fail(f"PyTorch {version} at {sys.executable} sees no CUDA GPU")
    if not hasattr(torch, "export") or not hasattr(torch._inductor, "aoti_compile_and_package"):
        fail(f"PyTorch {version} has no AOTInductor packages (2.6 or later has them)")


def reference(spec, torch):
    """forward() of the task's reference, defined as Python."""
    scope = {"torch": torch, "F": torch.nn.functional, "Tensor": torch.Tensor, "math": math}
    for name in ("List", "Optional", "Tuple", "Union", "Dict"):
        scope[name] = getattr(typing, name)
    try:
        exec(compile(spec["source"], f"<{spec['task']} reference>", "exec"), scope)
    except Exception as e:
        raise Unusable(f"the reference does not run as Python: {first_line(e)}")
    if "forward" not in scope:
        raise Unusable("the reference defines no forward()")
    return scope["forward"]


def math_mode(torch, allow_tf32):
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    torch.backends.cudnn.allow_tf32 = allow_tf32


def example_inputs(spec, torch, device):
    out = []
    for i in spec["inputs"]:
        dtype = getattr(torch, i["dtype"])
        if dtype.is_floating_point:
            out.append(torch.randn(i["shape"], device=device).to(dtype))
        elif dtype == torch.bool:
            out.append(torch.zeros(i["shape"], dtype=dtype, device=device))
        else:
            out.append(torch.randint(0, 2, i["shape"], dtype=dtype, device=device))
    return out


def on_gpu(spec):
    """PyTorch, the reference's forward() and the spec's GPU, its math mode set."""
    torch = load_torch(spec)
    forward = reference(spec, torch)
    require_gpu(torch)
    device = torch.device("cuda", spec.get("device", 0))
    torch.cuda.set_device(device)
    math_mode(torch, spec.get("allow_tf32", False))
    return torch, forward, device


def inductor_configs(torch, mode):
    """TorchInductor's options for torch.compile's `mode`, as aoti_compile_and_package takes them:
    max-autotune's are torch.compile(mode="max-autotune")'s less "triton.cudagraphs", since
    AOTInductor has no CUDA graphs (a package launches its kernels one by one)."""
    if mode == "default":
        return {}
    if mode != "max-autotune":
        raise ValueError(f"no torch.compile mode {mode!r} (default, max-autotune)")
    list_mode_options = getattr(torch._inductor, "list_mode_options", None)
    if list_mode_options is None:  # an older PyTorch: the options max-autotune has always set
        configs = {"max_autotune": True, "coordinate_descent_tuning": True}
    else:
        configs = dict(list_mode_options("max-autotune"))
    configs.pop("triton.cudagraphs", None)
    return configs


def build(spec):
    torch, forward, device = on_gpu(spec)

    class Reference(torch.nn.Module):
        def forward(self, *inputs):
            return forward(*inputs)

    configs = inductor_configs(torch, spec.get("mode", "default"))
    inputs = tuple(example_inputs(spec, torch, device))
    t0 = time.time()
    try:
        program = torch.export.export(Reference(), inputs)
    except Exception as e:
        fail(f"torch.export failed: {first_line(e)}")
    out = spec["out"]
    partial = f"{out[:-len('.pt2')]}.{os.getpid()}.part.pt2"  # AOTInductor wants the .pt2 ending
    try:
        torch._inductor.aoti_compile_and_package(program, package_path=partial, inductor_configs=configs)
    except Exception as e:
        fail(f"AOTInductor failed: {first_line(e)}")
    os.replace(partial, out)
    print(json.dumps({"ok": True, "torch": torch.__version__.split("+")[0], "build_s": time.time() - t0}),
          flush=True)


def time_compiled(spec):
    """torch.compile(forward) timed from Python as kforge's judge times a baseline (the fidelity
    bench) in the spec's mode, with the package's options (inductor_configs: max-autotune without
    CUDA graphs): the judge's own pool of input sets (saved by kforge), each copied into the same
    tensors before a run, then the stream held by a spin while the host queues the L2 flush (a read
    of twice the L2), the events and the call; the median of as many runs as 100 ms needs
    (10..200)."""
    import statistics
    torch, forward, device = on_gpu(spec)
    flat = torch.load(spec["inputs_file"], weights_only=False)  # kforge wrote it: tensors only
    per_set = len(spec["inputs"])
    pool = [[t.to(device) for t in flat[k:k + per_set]] for k in range(0, len(flat), per_set)]
    fixed = [t.clone() for t in pool[0]]
    t0 = time.time()
    compiled = torch.compile(forward, options=inductor_configs(torch, spec.get("mode", "default")))
    for _ in range(3):
        compiled(*fixed)
    torch.cuda.synchronize()
    compile_s = time.time() - t0
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    flush = torch.ones(max(2 * l2 // 4, 1 << 20), device=device)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def once(rep):
        for dst, src in zip(fixed, pool[rep % len(pool)]):
            dst.copy_(src)
        torch.cuda.synchronize()
        torch.cuda._sleep(1_000_000)
        flush.sum()
        start.record()
        compiled(*fixed)
        stop.record()
        torch.cuda.synchronize()
        return start.elapsed_time(stop)

    warm = [once(r) for r in range(3)]
    reps = int(min(200, max(10, -(-100 // statistics.median(warm)))))
    print(json.dumps({"ok": True, "torch": torch.__version__.split("+")[0], "compile_s": compile_s,
                      "median_ms": statistics.median(once(r) for r in range(reps)), "reps": reps}), flush=True)


def check(specs):
    """Each reference defined and run as Python on the CPU at its spec's shapes (kforge's tests: every
    shipped task must be one torch.compile can take). Half-precision inputs run as float32 (an old
    PyTorch's CPU kernels lack them); a function this PyTorch lacks is reported as `newer`."""
    import torch
    for spec in specs:
        try:
            forward = reference(spec, torch)
            inputs = [t.float() if t.dtype in (torch.float16, torch.bfloat16) else t
                      for t in example_inputs(spec, torch, "cpu")]
            forward(*inputs)
            line = {"task": spec["task"], "ok": True}
        except Unusable as e:
            line = {"task": spec["task"], "ok": False, "reason": str(e)}
        except AttributeError as e:
            line = {"task": spec["task"], "ok": False, "newer": True, "reason": first_line(e)}
        except Exception as e:
            line = {"task": spec["task"], "ok": False, "reason": "forward() fails: " + first_line(e)}
        print(json.dumps(line), flush=True)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("build", "time", "check"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    with open(sys.argv[2]) as f:
        spec = json.load(f)
    try:
        {"build": build, "time": time_compiled, "check": check}[sys.argv[1]](spec)
    except SystemExit:
        raise
    except Unusable as e:
        fail(str(e))
    except Exception as e:  # a kforge bug or an environment problem: the reason, and the trace on stderr
        traceback.print_exc()
        fail(f"the torch.compile helper failed: {first_line(e)}")


if __name__ == "__main__":
    main()
