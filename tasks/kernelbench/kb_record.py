"""How the tensors of a KernelBench problem were made: a Recorder, active while the problem's
module runs, notes the distribution and the shape (expressions over the size constants) of each
tensor torch's factories make, and follows them through moves, in-place initialisers, scalar
arithmetic and nn.Parameter."""
import contextlib

import torch
import torch.fx

from kb_load import Sym, e_of


class Draw:
    """How a tensor was made: kind is randn, rand, randint, normal, uniform, bernoulli or const
    (params: lo/hi, mean/std, p or the value, as Syms, ints or floats); shape: expressions."""

    def __init__(self, kind, params, shape, dtype):
        self.kind, self.params, self.shape, self.dtype = kind, list(params), shape, dtype


def _shape_exprs(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    out = []
    for s in size:
        if isinstance(s, bool) or not isinstance(s, int):
            return None
        out.append(e_of(s))
    return out


class Recorder:
    """While active: torch's factories (on `device`, e.g. meta) record a Draw for each tensor they
    make, Tensor's dtype/device moves and in-place initialisers keep or update it, and every
    nn.Parameter remembers the Draw of its data."""

    FACTORIES = ("randn", "rand", "randint", "normal", "zeros", "ones", "full", "empty")
    MOVES = ("to", "cuda", "cpu", "half", "float", "double", "bfloat16", "bool", "long", "int",
             "contiguous", "clone", "detach", "requires_grad_")

    def __init__(self, device=None):
        self.device = device
        self.draws = {}   # id(tensor) -> Draw
        self.alive = []   # keeps recorded tensors alive, so ids are not reused
        self.shapes = {}  # a recorded tensor's sizes -> its shape expressions (for x.shape)

    def draw_of(self, t):
        return self.draws.get(id(t))

    def _keep(self, t, d):
        if d is not None and isinstance(t, torch.Tensor):
            self.draws[id(t)] = d
            self.alive.append(t)
            if d.shape is not None and any(e[0] != "num" for e in d.shape):
                self.shapes.setdefault(tuple(t.shape), d.shape)
        return t

    def _factory(self, name, real):
        rec = self

        def wrapper(*args, **kw):
            proxy = next((x for x in list(args) + list(kw.values()) if isinstance(x, torch.fx.Proxy)), None)
            if proxy is not None:  # inside forward(), traced: torch.zeros(..., device=x.device)
                return proxy.tracer.create_proxy("call_function", real, args, kw)
            if rec.device is not None:
                kw["device"] = rec.device
            a = list(args)
            try:
                if name == "randint":
                    size = kw["size"] if "size" in kw else a[-1]
                    pos = a if "size" in kw else a[:-1]
                    if "high" in kw:
                        params = [kw.get("low", pos[0] if pos else 0), kw["high"]]
                    elif len(pos) == 1:
                        params = [kw.get("low", 0), pos[0]]
                    else:
                        params = [pos[0], pos[1]]
                    size = (size,)
                elif name == "normal":
                    if len(a) >= 3 and not isinstance(a[0], torch.Tensor) and not isinstance(a[1], torch.Tensor):
                        params, size = [a[0], a[1]], (a[2],)
                    else:
                        params, size = None, ()
                elif name == "full":
                    size = (a[0] if a else kw["size"],)
                    params = [a[1] if len(a) > 1 else kw["fill_value"]]
                else:
                    size, params = tuple(a), []
            except (IndexError, KeyError):
                params, size = None, ()
            t = real(*args, **kw)
            shape = _shape_exprs(size) if params is not None else None
            if len(size) == 1 and isinstance(size[0], torch.Size) and tuple(size[0]) in rec.shapes:
                shape = rec.shapes[tuple(size[0])]  # torch.randint(0, 2, x.shape): x's sizes
            if shape is None or not isinstance(t, torch.Tensor):
                return t
            kind = {"zeros": "const", "ones": "const", "empty": "empty", "full": "const"}.get(name, name)
            if name == "zeros":
                params = [0.0]
            elif name == "ones":
                params = [1.0]
            return rec._keep(t, Draw(kind, params, shape, t.dtype))
        return wrapper

    def _move(self, real):
        rec = self

        def wrapper(t, *args, **kw):
            # The helper places tensors itself: a problem's .cuda() or .to(device) moves nothing.
            if real.__name__ == "cuda":
                return t
            if real.__name__ == "to":
                args = tuple(a for a in args if not isinstance(a, (str, torch.device)))
                kw.pop("device", None)
                if not args and not kw:
                    return t
            out = real(t, *args, **kw)
            d = rec.draws.get(id(t))
            if d is not None and out is not t and isinstance(out, torch.Tensor):
                rec._keep(out, Draw(d.kind, d.params, d.shape, out.dtype))
            return out
        wrapper.__name__ = real.__name__  # what torch.fx names a method called on a kept tensor
        return wrapper

    def _arith(self, name, real):
        """x * c, x + c, c - x, x / c, -x for a recorded x and a Python number c: the Draw of the
        result (normal and uniform stay so; anything else keeps only its shape)."""
        rec = self

        def wrapper(t, *args):
            out = real(t, *args)
            d = rec.draws.get(id(t))
            if d is None or not isinstance(out, torch.Tensor) or list(out.shape) != list(t.shape):
                return out
            c = args[0] if args else None
            number = isinstance(c, (int, float)) and not isinstance(c, bool) and not isinstance(c, Sym)
            kind, params = "unknown", []
            if d.kind in ("randn", "rand", "normal", "uniform") and (number or name == "__neg__") and out.is_floating_point():
                if d.kind == "randn":
                    kind, a, b = "normal", 0.0, 1.0
                elif d.kind == "rand":
                    kind, a, b = "uniform", 0.0, 1.0
                else:
                    kind, (a, b) = d.kind, (float(d.params[0]), float(d.params[1]))
                scale, shift = {"__mul__": (c, 0.0), "__rmul__": (c, 0.0), "__truediv__": (1.0 / c if c else None, 0.0),
                                "__add__": (1.0, c), "__radd__": (1.0, c), "__sub__": (1.0, -c if number else 0),
                                "__rsub__": (-1.0, c), "__neg__": (-1.0, 0.0)}[name]
                if scale is None:
                    kind = "unknown"
                elif kind == "normal":
                    params = [a * scale + shift, b * abs(scale)]
                else:
                    lo, hi = sorted((a * scale + shift, b * scale + shift))
                    params = [lo, hi]
            return rec._keep(out, Draw(kind, params, d.shape, out.dtype))
        return wrapper

    def _init(self, name, real):
        rec = self

        def wrapper(t, *args, **kw):
            out = real(t, *args, **kw)
            d = rec.draws.get(id(t))
            if d is not None:
                if name == "uniform_":
                    lo = args[0] if args else kw.get("from", 0.0)
                    hi = args[1] if len(args) > 1 else kw.get("to", 1.0)
                    d.kind, d.params = "uniform", [lo, hi]
                elif name == "normal_":
                    mean = args[0] if args else kw.get("mean", 0.0)
                    std = args[1] if len(args) > 1 else kw.get("std", 1.0)
                    d.kind, d.params = "normal", [mean, std]
                elif name == "fill_" and args and not isinstance(args[0], torch.Tensor):
                    d.kind, d.params = "const", [float(args[0])]
                elif name == "zero_":
                    d.kind, d.params = "const", [0.0]
                else:
                    d.kind = "unknown"
            return out
        return wrapper

    def _deepcopy(self, real):
        """A deep copy is drawn as its original was."""
        rec = self

        def wrapper(t, memo):
            out = real(t, memo)
            d = rec.draws.get(id(t))
            return rec._keep(out, d) if d is not None and out is not t else out
        return wrapper

    @contextlib.contextmanager
    def active(self):
        saved = []
        try:
            for n in self.FACTORIES:
                saved.append((torch, n, getattr(torch, n)))
                setattr(torch, n, self._factory(n, getattr(torch, n)))
            saved.append((torch, "tensor", torch.tensor))
            real_tensor = torch.tensor

            def tensor(*args, **kw):  # torch.tensor(v, device=x.device) inside a traced forward()
                proxy = next((x for x in list(args) + list(kw.values()) if isinstance(x, torch.fx.Proxy)), None)
                if proxy is not None:
                    return proxy.tracer.create_proxy("call_function", real_tensor, args, kw)
                return real_tensor(*args, **kw)
            torch.tensor = tensor
            for n in self.MOVES:
                saved.append((torch.Tensor, n, getattr(torch.Tensor, n)))
                setattr(torch.Tensor, n, self._move(getattr(torch.Tensor, n)))
            for n in ("uniform_", "normal_", "fill_", "zero_", "exponential_", "log_normal_", "random_",
                      "bernoulli_", "geometric_", "cauchy_"):
                saved.append((torch.Tensor, n, getattr(torch.Tensor, n)))
                setattr(torch.Tensor, n, self._init(n, getattr(torch.Tensor, n)))
            for n in ("__mul__", "__rmul__", "__truediv__", "__add__", "__radd__", "__sub__", "__rsub__", "__neg__"):
                saved.append((torch.Tensor, n, getattr(torch.Tensor, n)))
                setattr(torch.Tensor, n, self._arith(n, getattr(torch.Tensor, n)))
            param_new = torch.nn.Parameter.__new__
            rec = self

            def new_parameter(cls, data=None, requires_grad=True):
                p = param_new(cls, data, requires_grad)
                d = rec.draws.get(id(data))
                return rec._keep(p, d) if d is not None else p
            saved.append((torch.nn.Parameter, "__new__", param_new))
            torch.nn.Parameter.__new__ = new_parameter
            for cls in (torch.Tensor, torch.nn.Parameter):  # copy.deepcopy: nn.TransformerEncoder's layers
                saved.append((cls, "__deepcopy__", cls.__dict__["__deepcopy__"]))
                setattr(cls, "__deepcopy__", self._deepcopy(cls.__dict__["__deepcopy__"]))
            yield self
        finally:
            for owner, n, real in reversed(saved):
                setattr(owner, n, real)
