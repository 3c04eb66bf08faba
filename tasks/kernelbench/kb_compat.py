"""PyTorch functions a problem may use that this Python's PyTorch lacks, and what to say when a
problem needs something this Python does not have.

install() gives an older PyTorch (1.13, Debian's) the functions kforge's prelude already has
(tasks/prelude/v1.ts): F.rms_norm, nn.RMSNorm and F.scaled_dot_product_attention, computed as
PyTorch 2 computes them. Inside a traced forward() each is one call the reference writes as
`F.rms_norm(...)`, the prelude's; the Model runs them in Python. explain() turns the errors of a
missing function or module into the reason a problem is not converted.
"""
import re
import sys

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

# The PyTorch release that added a function problems use (torch.X, torch.nn.X or F.X).
ADDED_IN = {"rms_norm": "2.4", "RMSNorm": "2.4", "scaled_dot_product_attention": "2.0", "compile": "2.0",
            "vmap": "2.0", "func": "2.0", "export": "2.1", "CircularPad1d": "2.1", "CircularPad2d": "2.1",
            "CircularPad3d": "2.1", "ZeroPad1d": "2.1", "ZeroPad3d": "2.1", "float8_e4m3fn": "2.1",
            "float8_e5m2": "2.1", "Buffer": "2.5"}

# The package that provides a module, where its name differs (pip install NAME).
PACKAGES = {"cv2": "opencv-python", "sklearn": "scikit-learn", "PIL": "pillow", "yaml": "pyyaml"}


def _proxy(args):
    return next((a for a in args if isinstance(a, torch.fx.Proxy)), None)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """F.rms_norm of PyTorch 2.4, as its math fallback (and kforge's v1 prelude) computes it."""
    shape = [normalized_shape] if isinstance(normalized_shape, int) else normalized_shape
    p = _proxy((input, weight))
    if p is not None:  # traced: one call, the prelude's F.rms_norm
        shape = list(shape) if isinstance(shape, tuple) else shape
        return p.tracer.create_proxy("call_function", rms_norm, (input, shape), {"weight": weight, "eps": eps})
    dims = [-(i + 1) for i in range(len(shape))]
    e = torch.finfo(input.dtype).eps if eps is None else eps
    y = input * torch.rsqrt(torch.mean(input * input, dims, keepdim=True) + e)
    return y * weight if weight is not None else y


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """F.scaled_dot_product_attention of PyTorch 2.0, as its math fallback computes it."""
    from kb_load import Unconvertible
    if dropout_p:
        raise Unconvertible(f"F.scaled_dot_product_attention with dropout_p={dropout_p}: the output is random")
    p = _proxy((query, key, value, attn_mask))
    if p is not None:
        kw = {k: v for k, v in (("attn_mask", attn_mask), ("is_causal", is_causal), ("scale", scale))
              if v is not None and v is not False}
        return p.tracer.create_proxy("call_function", scaled_dot_product_attention, (query, key, value), kw)
    s = query.size(-1) ** -0.5 if scale is None else scale
    attn = torch.matmul(query, key.transpose(-2, -1)) * s
    if is_causal:
        attn = attn.masked_fill(torch.ones_like(attn, dtype=torch.bool).triu(1), float("-inf"))
    if attn_mask is not None:
        attn = attn + attn_mask if attn_mask.is_floating_point() else attn.masked_fill(attn_mask.logical_not(), float("-inf"))
    return torch.matmul(torch.softmax(attn, -1), value)


class RMSNorm(nn.Module):
    """nn.RMSNorm of PyTorch 2.4 (weight ones, eps None: the dtype's epsilon)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def forward(self, x):
        return F.rms_norm(x, list(self.normalized_shape), self.weight, self.eps)


# A torch.nn module to torch.fx (a leaf) and to kb_modules (its functional translation, by name).
RMSNorm.__module__ = "torch.nn.modules.normalization"


def install():
    """Adds what this PyTorch lacks of the above (nothing on PyTorch 2.4 and later)."""
    for owner, name, value in ((F, "rms_norm", rms_norm), (nn, "RMSNorm", RMSNorm),
                               (F, "scaled_dot_product_attention", scaled_dot_product_attention)):
        if not hasattr(owner, name):
            setattr(owner, name, value)


def explain(e):
    """The reason for a problem's error when it is this Python's lack, else None."""
    if isinstance(e, ModuleNotFoundError) and e.name:
        top = e.name.split(".")[0]
        return (f"it imports the Python module '{e.name}', which {sys.executable} lacks: install {top} for that "
                f"Python (pip install {PACKAGES.get(top, top)}), or name a Python that has it with --python")
    if isinstance(e, AttributeError):
        m = re.search(r"module '(torch(?:\.[\w.]+)?)' has no attribute '(\w+)'", str(e))
        if m:
            where, name = m.group(1), m.group(2)
            short = {"torch.nn.functional": "F", "torch.nn": "nn"}.get(where, where)
            need = f"PyTorch {ADDED_IN[name]} or later" if name in ADDED_IN else "a newer PyTorch"
            return (f"it uses {short}.{name}, which PyTorch {torch.__version__} ({sys.executable}) lacks: "
                    f"it needs {need} (name a Python that has it with --python)")
    return None
