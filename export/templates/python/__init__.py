"""Kernels exported by kforge (`kforge export`), as PyTorch ops.

    import NS            # NS: this package's name (manifest.json, "name")
    y = NS.softmax(x)    # the same op as torch.ops.NS.softmax(x)

Every op takes CUDA tensors, contiguous, of the dtypes and shapes in its docstring, and returns a
Tensor or a tuple of Tensors. `manifest` is the parsed manifest.json (where each kernel came from,
what kforge measured); `ops` lists the op names.
"""
import importlib.machinery
import json
import os

import torch

_HERE = os.path.dirname(os.path.abspath(__file__))

with open(os.path.join(_HERE, "manifest.json")) as _f:
    manifest = json.load(_f)

_NAME = manifest["name"]


def _build_hint():
    """How to build the package, naming its directory when this file sits in the source tree."""
    root = os.path.dirname(os.path.dirname(_HERE))  # DIR/python/NS -> DIR
    if os.path.exists(os.path.join(root, "setup.py")):
        return f"pip install --no-build-isolation {root}"
    return "pip install --no-build-isolation <the exported package's directory>"


# The ops' library (libNS_torch.so, built by CMake; setup.py puts it here as _C.<suffix>). Loading it
# runs its TORCH_LIBRARY registrations: torch.ops.NS.* exist from then on.
_LIBRARY = next((os.path.join(_HERE, "_C" + suffix) for suffix in importlib.machinery.EXTENSION_SUFFIXES
                 if os.path.exists(os.path.join(_HERE, "_C" + suffix))), None)
if _LIBRARY is None:
    raise ImportError(f"{_NAME}: the ops' library ({_NAME}/_C*.so) is missing; build the package "
                      f"first: {_build_hint()}")
try:
    torch.ops.load_library(_LIBRARY)
except OSError as _e:
    if "libcuda" in str(_e):
        raise ImportError(f"{_NAME}: the ops' library {_LIBRARY} does not load ({_e}): the ops "
                          "need the NVIDIA driver's libcuda.so.1") from _e
    raise ImportError(f"{_NAME}: the ops' library {_LIBRARY} does not load ({_e}); it must be "
                      f"built against the PyTorch that imports it (torch {torch.__version__} here): "
                      f"{_build_hint()}") from _e


def _shape(shape):
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _speedups(judged):
    """'1.55x vs eager, ..., 1.38x vs compile, the best baseline': each kind of baseline in the
    manifest's baseline_kinds, then the best (the fastest kind kforge measured)."""
    speedup = judged.get("speedup") or {}
    kinds = manifest.get("baseline_kinds", [])
    parts = [f"{speedup[k['name']]:.2f}x vs {k['label']}" for k in kinds
             if isinstance(speedup.get(k["name"]), (int, float))]
    best = next((k["label"] for k in kinds if k["name"] == judged.get("best_baseline")), None)
    if best and isinstance(speedup.get("best"), (int, float)):
        parts.append(f"{speedup['best']:.2f}x vs {best}, the best baseline")
    return ", ".join(parts) or "no speedup recorded"


def _docstring(entry):
    lines = [f"{_NAME}.{entry['op']}: kforge task {entry['task']}.", ""]
    if entry.get("fallback"):
        lines += ["No kernel: this op runs the task's reference (exported with --fallback).", ""]
    lines.append("Inputs (CUDA, contiguous):")
    lines += [f"    {i['name']}: {i['dtype']} {_shape(i['shape'])}" for i in entry["inputs"]]
    lines.append("Outputs:")
    lines += [f"    {o['name']}: {o['dtype']} {_shape(o['shape'])}" for o in entry["outputs"]]
    judged = entry.get("judged") or {}
    if judged:
        lines += ["", f"Judged on {judged.get('device', '?')} ({judged.get('arch', '?')}): "
                      f"{_speedups(judged)}."]
    lines += ["", f"Same as torch.ops.{_NAME}.{entry['op']}."]
    return "\n".join(lines)


def _define(entry):
    op = entry["op"]

    def call(*inputs):
        return getattr(getattr(torch.ops, _NAME), op)(*inputs)

    call.__name__ = call.__qualname__ = op
    call.__doc__ = _docstring(entry)
    return call


ops = [entry["op"] for entry in manifest["ops"]]
__all__ = ["manifest", "ops"]

for _entry in manifest["ops"]:
    # An op named like a module attribute (manifest, ops, torch, ...) stays reachable via torch.ops.
    if _entry["op"] not in globals():
        globals()[_entry["op"]] = _define(_entry)
        __all__.append(_entry["op"])
