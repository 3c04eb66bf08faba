"""Loading a KernelBench problem file.

A problem is a Python module with `class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`
and module-level size constants (`batch_size = 16`). This file finds the constants, re-runs the
module with chosen values for them, and records how each tensor that get_inputs() returns and each
parameter of the Model was made: its shape as expressions over the constants (a `Sym` is an int
that remembers how it was computed from them) and the distribution it was drawn from.
"""
import ast
import contextlib
import re

import torch

# Constants named like these are the operation's own hyperparameters (a 3x3 kernel, 8 groups):
# they keep their values, since changing them changes the operation rather than its size.
HYPERPARAMETER = re.compile(r"kernel|stride|pad|dilation|group|head|window|pool")


class Unconvertible(Exception):
    """The problem cannot become a kforge task; the message is the one-line reason."""


# ---- expressions over the size constants: ("dim", name) | ("num", int) | (op, a, b) | ("neg", a)
PREC = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2, "neg": 3}


def e_dims(e):
    if e[0] == "dim":
        return {e[1]}
    if e[0] == "num":
        return set()
    return set().union(*(e_dims(a) for a in e[1:]))


def e_eval(e, values):
    op = e[0]
    if op == "dim":
        return values[e[1]]
    if op == "num":
        return e[1]
    if op == "neg":
        return -e_eval(e[1], values)
    a, b = e_eval(e[1], values), e_eval(e[2], values)
    return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else 0, "%": a % b if b else 0}[op]


def e_render(e, leaf, values, div="/"):
    """Text of `e`: leaf(name) gives a dim's text, or None to write its value; a subtree with no
    written dims is folded to its value. `div` is how integer division is spelled."""
    if not any(leaf(d) is not None for d in e_dims(e)):
        return str(e_eval(e, values))
    op = e[0]
    if op == "dim":
        return leaf(e[1])
    if op in ("*", "//") and e[2] == ("num", 1):
        return e_render(e[1], leaf, values, div)
    if op == "*" and e[1] == ("num", 1):
        return e_render(e[2], leaf, values, div)
    if op == "neg":
        inner = e_render(e[1], leaf, values, div)
        return "-" + (f"({inner})" if PREC.get(e[1][0], 9) < 3 else inner)
    parts = []
    for i, a in enumerate(e[1:]):
        t = e_render(a, leaf, values, div)
        p = PREC.get(a[0], 9)
        if p < PREC[op] or (i == 1 and p == PREC[op] and op in ("-", "//", "%")):
            t = f"({t})"
        parts.append(t)
    return f" {div if op == '//' else op} ".join(parts)


def e_of(v):
    return v.expr if isinstance(v, Sym) else ("num", int(v))


class Sym(int):
    """An int that remembers its expression over the size constants. Arithmetic keeps it; a use
    as a float or a Python index while `Sym.uses` is a set records the dims there (the traced
    reference then holds that value as a literal)."""
    uses = None

    def __new__(cls, value, expr):
        o = int.__new__(cls, value)
        o.expr = expr
        return o

    def _op(self, other, op, rev):
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        a, b = (e_of(other), self.expr) if rev else (self.expr, e_of(other))
        x, y = (int(other), int.__index__(self)) if rev else (int.__index__(self), int(other))
        v = {"+": x + y, "-": x - y, "*": x * y, "//": x // y if y else 0, "%": x % y if y else 0}[op]
        if op in ("//", "%") and y == 0:
            return int.__floordiv__(x, y)  # raises ZeroDivisionError as int would
        return Sym(v, (op, a, b))

    def __add__(self, o): return self._op(o, "+", False)
    def __radd__(self, o): return self._op(o, "+", True)
    def __sub__(self, o): return self._op(o, "-", False)
    def __rsub__(self, o): return self._op(o, "-", True)
    def __mul__(self, o): return self._op(o, "*", False)
    def __rmul__(self, o): return self._op(o, "*", True)
    def __floordiv__(self, o): return self._op(o, "//", False)
    def __rfloordiv__(self, o): return self._op(o, "//", True)
    def __mod__(self, o): return self._op(o, "%", False)
    def __rmod__(self, o): return self._op(o, "%", True)
    def __neg__(self): return Sym(-int.__index__(self), ("neg", self.expr))
    def __pos__(self): return self

    def _used(self):
        if Sym.uses is not None:
            Sym.uses |= e_dims(self.expr)
        return int.__index__(self)

    def __float__(self): return float(self._used())
    def __int__(self): return self._used()
    def __index__(self): return self._used()
    def __truediv__(self, o): return float(self) / o
    def __rtruediv__(self, o): return o / float(self)
    def __pow__(self, o, m=None): return pow(self._used(), o, m) if m else self._used() ** o
    def __reduce__(self): return (int, (int.__index__(self),))


# ---- the module's size constants ----------------------------------------------------------------
def _int_literal(node):
    """The value of a positive int literal or of an expression of them (`2048 * 2`), else None."""
    ops = {ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y, ast.Mult: lambda x, y: x * y,
           ast.FloorDiv: lambda x, y: x // y if y else None, ast.Pow: lambda x, y: x ** y if 0 <= y <= 64 else None,
           ast.LShift: lambda x, y: x << y if 0 <= y <= 64 else None}

    def value(n):
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return n.value
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            x, y = value(n.left), value(n.right)
            return None if x is None or y is None else ops[type(n.op)](x, y)
        return None
    v = value(node)
    return v if v is not None and 1 <= v < 1 << 62 else None


def _dims_ref(name):
    return ast.Subscript(value=ast.Name(id="__kf_dims__", ctx=ast.Load()), slice=ast.Constant(value=name),
                         ctx=ast.Load())


def parse_problem(source, filename):
    """The problem's syntax tree with its int constants replaced by look-ups of __kf_dims__, and
    the constants in order: [(name, value)]. `n = 3` and `a, b = 3, 4` give one constant per name;
    `shape = (4096, 3)` gives shape_0 and shape_1."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as e:
        raise Unconvertible(f"not a Python file: {e.msg} (line {e.lineno})")
    defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    missing = [w for w in ("Model", "get_inputs", "get_init_inputs") if w not in defined]
    if missing:
        what = {"Model": "class Model", "get_inputs": "get_inputs()", "get_init_inputs": "get_init_inputs()"}
        raise Unconvertible("not a KernelBench problem: it defines no " + ", no ".join(what[m] for m in missing))
    constants = []

    def take(name, value_node):
        v = _int_literal(value_node)
        if v is not None:
            constants.append((name, v))
            return _dims_ref(name)
        if isinstance(value_node, (ast.Tuple, ast.List)):
            elts = []
            for i, elt in enumerate(value_node.elts):
                ev = _int_literal(elt)
                if ev is not None:
                    constants.append((f"{name}_{i}", ev))
                    elts.append(_dims_ref(f"{name}_{i}"))
                else:
                    elts.append(elt)
            value_node.elts = elts
        return value_node

    body = []
    for stmt in tree.body:
        body.append(stmt)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) > 1 and _int_literal(stmt.value) is not None and all(
                isinstance(t, ast.Name) for t in stmt.targets):
            body.pop()  # `height = width = 128`: one constant each
            for t in stmt.targets:
                body.append(ast.copy_location(ast.Assign(targets=[t], value=take(t.id, stmt.value)), stmt))
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            t = stmt.targets[0]
            if isinstance(t, ast.Name):
                stmt.value = take(t.id, stmt.value)
            elif isinstance(t, ast.Tuple) and isinstance(stmt.value, ast.Tuple) and len(t.elts) == len(stmt.value.elts):
                stmt.value.elts = [take(n.id, v) if isinstance(n, ast.Name) else v
                                   for n, v in zip(t.elts, stmt.value.elts)]
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            stmt.value = take(stmt.target.id, stmt.value)
    tree.body = body
    ast.fix_missing_locations(tree)
    seen, unique = set(), []
    for name, v in constants:  # a name assigned twice: the last assignment wins, as in Python
        if name in seen:
            unique = [(n, x) for n, x in unique if n != name]
        seen.add(name)
        unique.append((name, v))
    return tree, unique


def run_module(tree, filename, values):
    """Executes the problem with the given constant values; returns its namespace."""
    ns = {"__name__": "kernelbench_problem", "__file__": filename, "__kf_dims__": values}
    try:
        exec(compile(tree, filename, "exec"), ns)
    except Unconvertible:
        raise
    except Exception as e:
        raise Unconvertible(f"running the module failed: {type(e).__name__}: {e}")
    return ns


# ---- how tensors were made -------------------------------------------------------------------
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

    @contextlib.contextmanager
    def active(self):
        saved = []
        try:
            for n in self.FACTORIES:
                saved.append((torch, n, getattr(torch, n)))
                setattr(torch, n, self._factory(n, getattr(torch, n)))
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
            yield self
        finally:
            for owner, n, real in reversed(saved):
                setattr(owner, n, real)
