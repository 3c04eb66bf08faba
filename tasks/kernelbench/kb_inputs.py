"""Computed inputs (docs/task-format.md, "Computed inputs"): a value get_inputs() computes from
draws -- `torch.randn(b, n).softmax(dim=-1)`, `torch.tril(torch.rand(n, n))`, `(a + a.T) / 2`,
`torch.randint(0, 2, (b,)).float() * 2 - 1`, `torch.rand(b, n) * scale` with
`scale = torch.rand(())` -- becomes a declared draw (the draw with the input's shape, named by the
input), further named draws, and a transform: the computation as a one-line TorchScript expression,
which kforge's harness applies after drawing, at every seed and size.

A Tracer (a TorchFunctionMode, active with the Recorder while get_inputs() runs) notes how each
tensor was computed; computed() walks back from a returned tensor to the draws the Recorder knows
and writes the expression. check_against() runs get_inputs() for real once and applies the
compiled transforms to the very draws it made: a transform that does not reproduce the problem's
values is not written.
"""
import keyword
import math
import re
import sys

import torch
from torch.overrides import TorchFunctionMode

from kb_load import Sym, Unconvertible, e_dims, e_eval

MAX_DRAWS = 8          # kforge's limit on an input's further draws (tasks/src/transform.h)
MAX_TRANSFORM_CHARS = 1000
FUNCTION = "kforge_input_transform"
LOW = (torch.float16, torch.bfloat16)

# Python's operators, as the Tensor methods a TorchFunctionMode sees them: (text, precedence).
BINARY = {"add": ("+", 5), "__add__": ("+", 5), "sub": ("-", 5), "__sub__": ("-", 5),
          "mul": ("*", 6), "__mul__": ("*", 6), "div": ("/", 6), "__div__": ("/", 6),
          "__truediv__": ("/", 6), "true_divide": ("/", 6), "pow": ("**", 8), "__pow__": ("**", 8),
          "gt": (">", 3), "lt": ("<", 3), "ge": (">=", 3), "le": ("<=", 3), "eq": ("==", 3),
          "ne": ("!=", 3), "__gt__": (">", 3), "__lt__": ("<", 3), "__ge__": (">=", 3),
          "__le__": ("<=", 3), "__eq__": ("==", 3), "__ne__": ("!=", 3)}
REFLECTED = {"__radd__": ("+", 5), "__rsub__": ("-", 5), "__rmul__": ("*", 6), "__rdiv__": ("/", 6),
             "__rtruediv__": ("/", 6)}
NO_OPS = {"contiguous", "clone", "detach", "requires_grad_", "cpu", "cuda"}  # values unchanged
CASTS = {torch.float32: "float", torch.float64: "double", torch.float16: "half",
         torch.bfloat16: "bfloat16", torch.int64: "long", torch.int32: "int", torch.bool: "bool"}
INITIALISERS = {"uniform_", "normal_", "fill_", "zero_"}  # the Recorder follows these


class Tracer(TorchFunctionMode):
    """While active: each tensor a torch function or Tensor method returns is noted with how it was
    made; tensors changed in place are noted too (their notes no longer tell their values)."""

    def __init__(self):
        super().__init__()
        self.made = {}      # id(tensor) -> (func, args, kwargs)
        self.items = {}     # id(tensor) -> (func, args, kwargs, i): item i of what func returned
        self.changed = {}   # id(tensor) -> the in-place operation's name
        self.bases = {}     # id(tensor) -> the in-place operation's name on a view of it
        self.alive = []     # keeps noted tensors alive, so ids are not reused

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        func = _unwrapped(func)
        name = _name(func)
        inplace = name.endswith("_") and not name.startswith("__") or name in (
            "__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__idiv__", "__ipow__")
        if inplace and args and isinstance(args[0], torch.Tensor):
            # initialisers the Recorder follows (torch.nn.init's call them)
            if name not in INITIALISERS and name not in NO_OPS and getattr(func, "__module__", None) != "torch.nn.init":
                self.changed.setdefault(id(args[0]), name)
                base = getattr(args[0], "_base", None)
                if base is not None:  # a view changed in place changes what it views
                    self.bases.setdefault(id(base), name)
                    self.alive.append(base)
            self.alive.append(args[0])
        elif isinstance(out, torch.Tensor) and not any(out is a for a in args):
            self.made[id(out)] = (func, args, kwargs)
            self.alive.append(out)
        elif isinstance(out, (tuple, list)) and out and all(isinstance(o, torch.Tensor) for o in out):
            for i, o in enumerate(out):  # torch.meshgrid, split, chunk: each tensor an item
                self.items[id(o)] = (func, args, kwargs, i)
                self.alive.append(o)
        return out


def _unwrapped(func):
    """The torch function behind a Recorder's wrapper (torch finds Tensor methods on the class, where
    the Recorder put its wrappers): the callable its closure holds."""
    for _ in range(4):
        if not getattr(func, "__qualname__", "").startswith("Recorder."):
            break
        inner = getattr(func, "__wrapped__", None) or next(
            (c.cell_contents for c in (func.__closure__ or ()) if callable(c.cell_contents)
             and not isinstance(c.cell_contents, type)), None)
        if inner is None:
            break
        func = inner
    return func


def _name(func):
    if getattr(func, "__name__", "") == "__get__":  # a property, e.g. Tensor.T
        return getattr(getattr(func, "__self__", None), "__name__", "__get__")
    return getattr(func, "__name__", "?")


def _kind(func):
    """'method', 'property', 'torch', 'F' or None: how a traced function is written."""
    q = getattr(func, "__qualname__", "")
    if q == "getset_descriptor.__get__":
        return "property"
    if q.startswith(("_TensorBase.", "TensorBase.", "Tensor.")):  # PyTorch 1.x, 2.x
        return "method"
    if getattr(func, "__module__", None) == "torch.nn.functional":
        return "F"
    if q.startswith("_VariableFunctionsClass.") or getattr(torch, _name(func), None) is func:
        return "torch"
    return None


class Computed:
    """A computed input: the draw with its shape (`own`), its further draws, the transform text and
    the size constants whose values the text holds."""

    def __init__(self, own, draws, text, syms, leaves):
        self.own, self.draws, self.text, self.syms, self.leaves = own, draws, text, syms, leaves
        self.uses = set().union(*(e_dims(e) for e in syms)) if syms else set()

    def text_at(self, values):
        """The transform with the size constants it holds at `values` (the timed ones, in the task)."""
        return re.sub("\1(\\d+)\1", lambda m: str(e_eval(self.syms[int(m.group(1))], values)), self.text)


def call_noting_locals(fn):
    """fn() and the names its frame gave tensors when it returned ({id(tensor): name}): a draw
    named `scale` in get_inputs() keeps its name in the task."""
    names, code = {}, getattr(fn, "__code__", None)

    def profile(frame, event, arg):
        if event == "return" and frame.f_code is code:
            for k, v in frame.f_locals.items():
                if isinstance(v, torch.Tensor):
                    names.setdefault(id(v), k)
    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        out = fn()
    finally:
        sys.setprofile(old)
    return out, names


def computed(t, name, rec, tracer, plain, what, local_names=None):
    """How the returned tensor `t` (forward() argument `name`) was computed from draws: a Computed
    with `own` = the leaf tensor drawn with t's shape, `draws` = [(name, leaf tensor)] for the
    others; `plain(leaf)` says whether a tensor is a plain draw kforge can declare. Raises
    Unconvertible with the reason otherwise."""
    leaves, syms = [], []

    def leaf_index(x):
        for i, y in enumerate(leaves):
            if y is x:
                return i
        leaves.append(x)
        return len(leaves) - 1

    def literal(v):
        if isinstance(v, Sym):  # a size constant: its value, written in at the end
            syms.append(v.expr)
            return f"\1{len(syms) - 1}\1", (9 if int.__index__(v) >= 0 else 7)
        if isinstance(v, bool) or v is None:
            return repr(v), 9
        if isinstance(v, int):
            return str(v), (9 if v >= 0 else 7)
        if isinstance(v, float):
            if not math.isfinite(v):
                raise Unconvertible(f"{what} is computed with {v!r}, which a transform cannot write")
            return repr(v), (9 if v >= 0 else 7)
        if isinstance(v, str):
            return repr(v), 9
        if isinstance(v, torch.dtype):
            from kb_emit import SCALAR_TYPES
            if v not in SCALAR_TYPES:
                raise Unconvertible(f"{what} is computed with dtype {v}")
            return str(SCALAR_TYPES[v]), 9
        if isinstance(v, (list, tuple, torch.Size)):
            return "[" + ", ".join(operand(x)[0] for x in v) + "]", 9
        raise Unconvertible(f"{what} is computed with a {type(v).__name__} argument, which a transform cannot write")

    def operand(v, depth=0):
        if isinstance(v, torch.Tensor):
            return tensor(v, depth + 1)
        return literal(v)

    def tensor(x, depth):
        if depth > 30:
            raise Unconvertible(f"{what} is computed in more steps than a transform holds")
        if x is not t and plain(x):
            if id(x) in tracer.changed:
                raise Unconvertible(f"{what} is computed from a draw changed in place "
                                    f"({tracer.changed[id(x)]}), which kforge cannot follow")
            return f"\0{leaf_index(x)}\0", 9
        if id(x) in tracer.changed:
            raise Unconvertible(f"{what} is computed in place ({tracer.changed[id(x)]}), which kforge cannot follow")
        if id(x) not in tracer.made:
            raise Unconvertible(f"{what} is computed from a tensor kforge cannot draw")
        func, args, kwargs = tracer.made[id(x)]
        return op(func, list(args), dict(kwargs), depth)

    def wrap(part, prec, need, right=False, chain=False):
        text, p = part
        return f"({text})" if p < need or (right and p == need and not chain) else text

    def op(func, args, kwargs, depth):
        name, kind = _name(func), _kind(func)
        kwargs.pop("_stacklevel", None)
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        if kind in ("method", "property") and not args:
            raise Unconvertible(f"{what} is computed by {name} without a tensor")
        if kind == "method" and name in NO_OPS and len(args) == 1 and not kwargs:
            return operand(args[0], depth)
        if kind == "method" and name in BINARY and len(args) == 2 and not kwargs:
            sym, prec = BINARY[name]
            left, right = operand(args[0], depth), operand(args[1], depth)
            if sym == "**":  # right-associative
                return f"{wrap(left, prec, prec + 1)} ** {wrap(right, prec, prec)}", prec
            left_need = prec + 1 if prec == 3 else prec  # comparisons chain in Python: (a < b) < c
            return (f"{wrap(left, prec, left_need)} {sym} "
                    f"{wrap(right, prec, prec, right=True, chain=sym in '+*')}"), prec
        if kind == "method" and name in REFLECTED and len(args) == 2 and not kwargs:
            sym, prec = REFLECTED[name]
            left, right = operand(args[1], depth), operand(args[0], depth)
            return f"{wrap(left, prec, prec)} {sym} {wrap(right, prec, prec, right=True, chain=sym in '+*')}", prec
        if kind == "method" and name in ("neg", "__neg__") and len(args) == 1:
            return "-" + wrap(operand(args[0], depth), 7, 8), 7
        if kind == "method" and name == "to" and len(args) == 2 and isinstance(args[1], torch.dtype) and not kwargs:
            if args[1] in CASTS:
                return f"{wrap(operand(args[0], depth), 9, 9)}.{CASTS[args[1]]}()", 9
        if kind == "property":
            x = args[0]
            inner = wrap(operand(x, depth), 9, 9)
            if name == "T" and x.dim() == 2:
                return f"{inner}.t()", 9
            if name == "T":
                return f"{inner}.permute({list(range(x.dim() - 1, -1, -1))})", 9
            if name == "mT":
                return f"{inner}.transpose(-2, -1)", 9
            if name == "data":
                return operand(x, depth)
            raise Unconvertible(f"{what} is computed with the property .{name}, which a transform cannot write")
        parts = [operand(a, depth)[0] for a in (args[1:] if kind == "method" else args)]
        parts += [f"{k}={operand(v, depth)[0]}" for k, v in kwargs.items() if k not in ("device", "layout",
                                                                                        "pin_memory")]
        if kind == "method":
            return f"{wrap(operand(args[0], depth), 9, 9)}.{name}({', '.join(parts)})", 9
        if kind == "torch":
            return f"torch.{name}({', '.join(parts)})", 9
        if kind == "F":
            return f"F.{name}({', '.join(parts)})", 9
        raise Unconvertible(f"{what} is computed by {getattr(func, '__qualname__', name)}, "
                            "which a transform cannot write")

    text, _ = tensor(t, 0)
    if not leaves:
        raise Unconvertible(f"{what} is computed from no draw (a constant); kforge inputs are drawn")
    own = next((i for i, x in enumerate(leaves) if list(x.shape) == list(t.shape)), None)
    if own is None:
        raise Unconvertible(f"{what} is computed from draws none of which has its shape")
    if len(leaves) - 1 > MAX_DRAWS:
        raise Unconvertible(f"{what} is computed from {len(leaves)} draws; kforge takes at most {MAX_DRAWS + 1}")
    from kb_emit import RESERVED
    names, k = {own: name}, 1
    for i in range(len(leaves)):
        if i == own:
            continue
        local = (local_names or {}).get(id(leaves[i]))
        if (local and local.isidentifier() and not keyword.iskeyword(local) and local not in RESERVED
                and not local.startswith("F_") and local not in names.values()):
            names[i] = local
            continue
        while f"draw{k}" in names.values():
            k += 1
        names[i] = f"draw{k}"
    text = re.sub("\0(\\d+)\0", lambda m: names[int(m.group(1))], text)
    if len(text) > MAX_TRANSFORM_CHARS:
        raise Unconvertible(f"{what} is computed by an expression of {len(text)} characters; "
                            f"a transform may have at most {MAX_TRANSFORM_CHARS}")
    draws = [(names[i], x) for i, x in enumerate(leaves) if i != own]
    return Computed(leaves[own], draws, text, syms, [leaves[own]] + [x for _, x in draws])


class Transform:
    """A transform compiled as kforge's harness compiles it: kforge's prelude, `F.x(` as `F_x(`,
    `torch.x` the aten builtin; called on the draws as the harness gives them (float16/bfloat16 as
    float32), it returns the input (rounded to float16/bfloat16 where that is its dtype)."""

    def __init__(self, text, names, dtype, prelude, what):
        from kb_check import compile_like_judge
        body = f"def {FUNCTION}({', '.join(n + ': Tensor' for n in names)}) -> Tensor:\n    return {text}\n"
        self.unit = compile_like_judge(
            body, prelude, f"{what}: its computation ({text}) does not compile as TorchScript: ")
        self.fn = self.unit.find_function(FUNCTION)
        self.dtype, self.what, self.text = dtype, what, text

    def __call__(self, *draws):
        out = self.fn(*[d.float() if d.dtype in LOW else d for d in draws])
        want = torch.float32 if self.dtype in LOW else self.dtype
        if out.dtype != want:
            raise Unconvertible(f"{self.what}: its transform ({self.text}) gives {out.dtype}, not {want}")
        return out.to(self.dtype).contiguous()


def declare(t, name, what, rec, tracer, init_of, prelude, timed, local_names=None):
    """The Decl of a computed input: its own draw's dtype, shape and init, its further draws, and
    its transform (compiled, at the timed values of the size constants it holds)."""
    from kb_check import DTYPES, Decl
    c = computed(t, name, rec, tracer, lambda x: init_of(rec, x) is not None, what, local_names)
    d = Decl(name, t.dtype, rec.draw_of(c.own).shape, init_of(rec, c.own))
    if c.own.dtype != t.dtype:
        d.draw_dtype = c.own.dtype
    for n, x in c.draws:
        if x.dtype not in DTYPES:
            raise Unconvertible(f"{what} is computed from a {x.dtype} draw, which kforge's task format has no dtype for")
        d.draws.append(Decl(n, x.dtype, rec.draw_of(x).shape, init_of(rec, x)))
    d.computed, d.transform_text = c, c.text_at(timed)
    if len(d.transform_text) > MAX_TRANSFORM_CHARS:
        raise Unconvertible(f"{what} is computed by an expression of {len(d.transform_text)} characters; "
                            f"a transform may have at most {MAX_TRANSFORM_CHARS}")
    d.transform = Transform(d.transform_text, [name] + [n for n, _ in c.draws], t.dtype, prelude, what)
    return d


def drawing_problem(decls, tensors, tracer):
    """Why the inputs cannot be drawn as declared, or None: two computed from one draw (kforge draws
    each input on its own), or a draw changed in place after the Recorder saw it made."""
    owner = {}
    for i, (d, t) in enumerate(zip(decls, tensors)):
        if getattr(d, "computed", None) is None and isinstance(t, torch.Tensor) and id(t) in tracer.changed:
            return (f"input {i + 1} ('{d.name}') is changed in place ({tracer.changed[id(t)]}) after it is drawn, "
                    "which kforge cannot follow")
        leaves = d.computed.leaves if getattr(d, "computed", None) is not None else [t]
        for x in (x for x in leaves if isinstance(x, torch.Tensor)):  # a Python float is no draw
            j = owner.setdefault(id(x), i)
            if j != i:
                return (f"inputs {j + 1} and {i + 1} are computed from the same draw; kforge draws each input "
                        "on its own")
    return None


def check_against(run_inputs, decls, init_of, prelude, what_of):
    """Runs get_inputs() for real (`run_inputs()` -> (tensors, Recorder, Tracer, size values, local
    names)) and
    applies each computed input's transform to the draws that run made: it must give the value
    get_inputs() computed."""
    tensors, rec, tracer, values, local_names = run_inputs()
    with torch.no_grad():
        for i, (d, t) in enumerate(zip(decls, tensors)):
            if getattr(d, "computed", None) is None:
                continue
            what = what_of(i)
            c = computed(t, d.name, rec, tracer, lambda x: init_of(rec, x) is not None, what, local_names)
            if c.text != d.computed.text:
                raise Unconvertible(f"{what} is computed differently at other sizes ({d.transform_text})")
            fn = d.transform
            if c.syms:  # the size constants at this run's values
                fn = Transform(c.text_at(values), [d.name] + [e.name for e in d.draws], d.dtype, prelude, what)
            got = fn(*c.leaves)
            if got.dtype in LOW:  # get_inputs() computed in its own dtype, kforge in float32
                close = torch.allclose(got.double(), t.double(), rtol=1e-2, atol=1e-2)
            elif got.is_floating_point():
                close = torch.allclose(got.double(), t.double(), rtol=1e-5, atol=1e-6, equal_nan=True)
            else:
                close = torch.equal(got, t)
            if list(got.shape) != list(t.shape) or got.dtype != t.dtype or not close:
                raise Unconvertible(f"{what}: the transform kforge wrote for it ({d.transform_text}) does not give "
                                    "the values get_inputs() computes (a kforge bug)")


# ---- buffers computed in __init__ -----------------------------------------------------------------
# A buffer (or a tensor the Model keeps) made in __init__ from sizes alone, e.g. a causal mask
# `torch.tril(torch.ones(n, n)).view(1, 1, n, n)`, is computed by the reference (at the start of
# forward(), each call) rather than drawn: a drawn mask would no longer mask.
DETERMINISTIC = {"ones", "zeros", "full", "arange", "eye", "linspace", "logspace", "tensor", "ones_like",
                 "zeros_like", "full_like", "tril_indices", "triu_indices", "as_tensor"}
RANDOM = {"randn", "rand", "randint", "normal", "bernoulli", "multinomial", "rand_like", "randn_like",
          "randint_like", "randperm", "poisson", "empty", "empty_like"}
OPERATORS = {"__add__": "add", "__sub__": "sub", "__mul__": "mul", "__truediv__": "truediv",
             "__floordiv__": "floordiv", "__mod__": "mod", "__pow__": "pow", "__matmul__": "matmul",
             "__and__": "and_", "__or__": "or_", "__xor__": "xor", "__eq__": "eq", "__ne__": "ne",
             "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge", "__getitem__": "getitem",
             "__radd__": "add", "__rsub__": "sub", "__rmul__": "mul", "__rtruediv__": "truediv",
             "__rpow__": "pow", "__rmatmul__": "matmul"}
UNARY_OPERATORS = {"__neg__": "neg", "__invert__": "invert", "__pos__": "pos"}
RANDOM_CHANGES = {"uniform_", "normal_", "random_", "exponential_", "geometric_", "cauchy_", "log_normal_"}


class NotComputed(Exception):
    """The tensor is not computed from sizes alone: random (args[0] True) or made in a way the
    reference cannot follow (the message says how)."""


def computed_buffers(gm, model, rec, tracer, kept=None):
    """Each get_attr node of `gm` reading a buffer (or a tensor the Model keeps) that __init__
    computed from sizes alone becomes the nodes computing it: [qualified name]. A buffer drawn at
    random stays a drawn input; one computed in a way kforge cannot follow fails the problem, or,
    given `kept` (a dict: kforge model, where the model's own buffers are at hand), stays the
    model's attribute, its node marked `kf_uncomputable` and kept[name] = why."""
    import builtins
    import operator

    import torch.fx
    params = {id(p) for p in model.parameters()}
    buffers = {id(b): q for q, b in model.named_buffers()}
    placeholder = next((n for n in gm.graph.nodes if n.op == "placeholder"), None)
    done, device = [], None
    for node in [n for n in gm.graph.nodes if n.op == "get_attr" and not n.meta.get("kf_overwritten")]:
        t = gm
        for part in node.target.split("."):
            t = getattr(t, part, None)
        if not isinstance(t, torch.Tensor) or id(t) in params or placeholder is None:
            continue
        d = rec.draw_of(t)
        change = tracer.changed.get(id(t)) or tracer.bases.get(id(t))  # `pattern[::2] = 1.0`
        if change is not None and (change.rstrip("_") in RANDOM or change in RANDOM_CHANGES):
            continue  # filled at random in place: drawn, as before
        if d is not None and d.kind != "unknown" and change is None:
            continue  # drawn as its factory draws (a running mean's zeros are spread, as ever)
        if id(t) not in tracer.made and id(t) not in tracer.items and change is None:
            continue  # not made in __init__ (a constant forward() makes: the Emitter's business)
        what = f"the buffer '{buffers.get(id(t), node.target)}'"
        memo = {}
        with gm.graph.inserting_before(node):
            if device is None:
                device = gm.graph.call_function(builtins.getattr, (placeholder, "device"))
            try:
                value = _buffer_node(gm.graph, t, tracer, memo, device, operator)
            except NotComputed as e:
                if e.args[0] is True:
                    continue  # random: drawn, as before
                if kept is not None:
                    node.meta["kf_uncomputable"] = kept[buffers.get(id(t), node.target)] = \
                        f"computed in __init__ {e.args[0]}"
                    continue
                raise Unconvertible(f"{what} is computed in __init__ {e.args[0]}, which kforge cannot write into "
                                    "the reference (and a drawn one would not be what the Model computes)")
        node.replace_all_uses_with(value)
        gm.graph.erase_node(node)
        done.append(buffers.get(id(t), node.target))
    if device is not None and not device.users:
        gm.graph.erase_node(device)
    gm.recompile()
    return done


def _buffer_node(graph, x, tracer, memo, device, operator):
    """The fx node computing tensor x from the calls the Tracer noted (NotComputed if it cannot)."""
    if id(x) in memo:
        return memo[id(x)]
    if id(x) in tracer.changed or id(x) in tracer.bases:
        name = tracer.changed.get(id(x)) or tracer.bases.get(id(x))
        raise NotComputed(f"with an in-place operation ({name})")
    base = getattr(x, "_base", None)
    if base is not None and (id(base) in tracer.changed or id(base) in tracer.bases):
        raise NotComputed(f"with an in-place operation ({tracer.changed.get(id(base)) or tracer.bases.get(id(base))})")

    def arg(v):
        if isinstance(v, torch.Tensor):
            return _buffer_node(graph, v, tracer, memo, device, operator)
        if isinstance(v, (list, tuple)):
            return type(v)(arg(a) for a in v) if not isinstance(v, torch.Size) else list(v)
        if isinstance(v, (torch.device, str)) and str(v) == "meta":
            return device
        return v

    if id(x) in tracer.items:
        func, args, kwargs, i = tracer.items[id(x)]
        whole = _call_node(graph, func, args, kwargs, arg, device, operator)
        out = graph.call_function(operator.getitem, (whole, i))
    elif id(x) in tracer.made:
        func, args, kwargs = tracer.made[id(x)]
        out = _call_node(graph, func, args, kwargs, arg, device, operator)
    else:
        raise NotComputed("from a tensor made outside torch's functions")
    memo[id(x)] = out
    return out


def _call_node(graph, func, args, kwargs, arg, device, operator):
    name, kind = _name(func), _kind(func)
    if name in RANDOM or name.rstrip("_") in RANDOM:
        raise NotComputed(True)
    kwargs = {k: v for k, v in kwargs.items() if k not in ("device", "layout", "pin_memory", "requires_grad",
                                                           "_stacklevel", "out")}
    if kind == "torch" and name in DETERMINISTIC:
        sizes = list(args)
        if name in ("ones", "zeros") and sizes and all(isinstance(a, int) for a in sizes):
            sizes = [list(sizes)]  # torch.ones(n, n): TorchScript takes the sizes as a list
        if name == "full" and sizes and isinstance(sizes[0], (tuple, list, torch.Size)):
            sizes[0] = list(sizes[0])
        if sizes and isinstance(sizes[0], torch.Size):
            sizes[0] = list(sizes[0])
        if not name.endswith("_like"):
            kwargs["device"] = device
        return graph.call_function(func, tuple(arg(a) for a in sizes), {k: arg(v) for k, v in kwargs.items()})
    args = [arg(a) for a in args]
    kwargs = {k: arg(v) for k, v in kwargs.items()}
    if kind == "method" and name in OPERATORS:
        op = getattr(operator, OPERATORS[name])
        if name.startswith("__r") and name != "__rshift__":
            args = [args[1], args[0]] + args[2:]
        return graph.call_function(op, tuple(args), kwargs)
    if kind == "method" and name in UNARY_OPERATORS:
        return graph.call_function(getattr(operator, UNARY_OPERATORS[name]), tuple(args), kwargs)
    if kind == "method" and (not name.startswith("__") or name == "__abs__"):
        return graph.call_method(name.strip("_"), tuple(args), kwargs)
    if kind in ("torch", "F"):
        return graph.call_function(func, tuple(args), kwargs)
    if kind == "property" and name == "data":
        return args[0]
    raise NotComputed(f"by {getattr(func, '__qualname__', name)}")
