"""A traced KernelBench Model (torch.fx) as a kforge reference: a TorchScript `forward()` whose
arguments are the Model's inputs and then the parameters and buffers it reads.

Leaf torch.nn modules become their functional form (kb_modules.py); torch functions become the
aten builtins of the same name (`torch.x`), torch.nn.functional calls kforge's prelude (`F.x`),
in-place operations their out-of-place forms (later uses of the mutated value read the result).
"""
import builtins
import inspect
import math
import operator
import re

import torch
import torch.nn.functional as F

import kb_compact
import kb_modules
from kb_compact import TOKEN, Stmt
from kb_load import Sym, Unconvertible, e_render
from kb_trace import OVERWRITTEN, VALUE

RESERVED = {"torch", "F", "Tensor", "List", "Tuple", "Optional", "Union", "Dict", "int", "float",
            "bool", "str", "math", "annotate", "forward", "self", "print", "range", "len"}

BINARY = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
          operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
          operator.and_: "&", operator.or_: "|", operator.xor: "^", operator.lt: "<",
          operator.le: "<=", operator.gt: ">", operator.ge: ">=", operator.eq: "==", operator.ne: "!=",
          operator.iadd: "+", operator.isub: "-", operator.imul: "*", operator.itruediv: "/",
          operator.ifloordiv: "//", operator.imod: "%", operator.ipow: "**", operator.imatmul: "@"}
INPLACE_BINARY = {operator.iadd, operator.isub, operator.imul, operator.itruediv,
                  operator.ifloordiv, operator.imod, operator.ipow, operator.imatmul}
UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~"}
SCALAR_TYPES = {torch.uint8: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3, torch.int64: 4, torch.float16: 5,
                torch.float32: 6, torch.float64: 7, torch.complex64: 9, torch.complex128: 10, torch.bool: 11,
                torch.bfloat16: 15}
MEMORY_FORMATS = {torch.contiguous_format: 0, torch.preserve_format: 1, torch.channels_last: 2,
                  torch.channels_last_3d: 3}
LAYOUTS = {torch.strided: 0}
DROPOUTS = {"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"}


def _namespace(obj):
    """(namespace, name) of a torch function: ("F", n), ("torch", n) or ("torch", "linalg_n")..."""
    for prefix, mod in (("", torch), ("linalg_", torch.linalg), ("special_", torch.special),
                        ("fft_", torch.fft)):
        for name in getattr(mod, "__all__", None) or dir(mod):
            if getattr(mod, name, None) is obj and not name.startswith("_"):
                return "torch", prefix + name
    for name in dir(F):
        if getattr(F, name, None) is obj and not name.startswith("_"):
            return "F", name
    return None, None


def without_defaults(fn, name, kw):
    """`kw` less what torch.fx spells out at its default (torch.nn.functional's deprecated
    size_average/reduce, which kforge's prelude leaves out, among them)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    out = {}
    for k, v in kw.items():
        if k in ("size_average", "reduce"):
            if v is not None:
                raise Unconvertible(f"F.{name} with the deprecated {k}={v!r}")
            continue
        if k == "return_indices":  # F.max_pool2d and co. dispatch on it; the prelude returns values
            if v:
                raise Unconvertible(f"F.{name}(return_indices=True) has no functional translation")
            continue
        default = params[k].default if k in params else inspect.Parameter.empty
        if k == "_stacklevel" or (type(default) is type(v) and default == v):
            continue
        out[k] = v
    return out


def floats_where_float(fn, args, kw):
    """Ints passed where torch.nn.functional's signature has a float default become floats:
    TorchScript does not convert them for kforge's prelude functions (F.hardtanh(x, -2, 2))."""
    try:
        sig = inspect.signature(fn)
        bound = sig.bind_partial(*args, **kw)
    except (TypeError, ValueError):
        return args, kw
    names = list(sig.parameters)

    def fix(name, v):
        d = sig.parameters[name].default
        return float(v) if isinstance(d, float) and isinstance(v, int) and not isinstance(v, bool) else v
    args = [fix(names[i], v) if i < len(names) else v for i, v in enumerate(args)]
    kw = {k: fix(k, v) if k in sig.parameters else v for k, v in kw.items()}
    del bound
    return args, kw


def wrap(line, width=100):
    """A long statement broken after the commas inside its brackets (TorchScript, like Python,
    goes on there): kforge's task files allow lines of at most 1,000 characters."""
    if len(line) <= width:
        return line
    pieces, start, depth, quote = [], 0, 0, None
    for i, c in enumerate(line):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth > 0 and line[i + 1:i + 2] == " ":
            pieces.append(line[start:i + 1])
            start = i + 2
    pieces.append(line[start:])
    indent = " " * (len(line) - len(line.lstrip()) + 8)
    out, current = [], pieces[0]
    for p in pieces[1:]:
        if len(current) + 1 + len(p) > width:
            out.append(current)
            current = indent + p
        else:
            current += " " + p
    out.append(current)
    return "\n".join(out)


def sanitize(name, taken):
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    if not out or out[0].isdigit():
        out = "p_" + out
    if out in RESERVED or out.startswith("F_") or out.startswith("_kf"):
        out = out + "_"
    base, k = out, 1
    while out in taken:
        k += 1
        out = f"{base}_{k}"
    taken.add(out)
    return out


class Emitter:
    """emit() -> (source, inputs): inputs are [(name, tensor or None, qualname or None)] in
    forward() order: the Model's arguments (tensor None), then the parameters/buffers used."""

    def __init__(self, gm, model, arg_names, leaf, timed, prelude_names):
        self.gm, self.model = gm, model
        self.arg_names = arg_names
        self.leaf, self.timed = leaf, timed
        self.prelude = prelude_names
        self.taken = set(RESERVED)
        self.var, self.alias = {}, {}
        self.stmts = []           # forward()'s statements (Stmt), names written as tokens
        self.names = []           # token number -> name (kb_compact.py: TOKEN)
        self.token_of = {}        # name -> token
        self.token_node = {}      # token of a statement's value -> its fx node (its type)
        self.compacted = None     # what kb_compact did to fit the task's limits, or None
        self.comments = []        # notes for the line being written (a dtype's name)
        self.params = []          # [(name, tensor, qualname)]
        self.param_names = {}     # id(tensor) -> name
        self.qualnames = {}
        self.lstm = set()           # nn.LSTM nodes: torch.lstm's flat (output, h_n, c_n)
        for q, t in list(model.named_parameters()) + list(model.named_buffers()):
            self.qualnames.setdefault(id(t), q)

    # ---- values --------------------------------------------------------------------------------
    def tensor_arg(self, t, what):
        if t is None:
            return "None"
        if id(t) not in self.param_names:
            q = self.qualnames.get(id(t))
            if q is None:
                raise Unconvertible(f"{what} reads a tensor that is neither a parameter nor a buffer")
            self.param_names[id(t)] = name = sanitize(q.replace(".", "_"), self.taken)
            self.params.append((name, t, q))
        return self.tok(self.param_names[id(t)])

    def tok(self, name):
        """The token standing for `name` in statements (kb_compact.py renames and moves them)."""
        t = self.token_of.get(name)
        if t is None:
            t = self.token_of[name] = f"\x01{len(self.names)}\x01"
            self.names.append(name)
        return t

    def detok(self, text):
        return TOKEN.sub(lambda m: self.names[int(m.group(1))], text)

    def resolved(self, n):
        while n in self.alias:
            n = self.alias[n]
        return n

    def node(self, n):
        n = self.resolved(n)
        if n in self.lstm:
            raise Unconvertible("forward() uses nn.LSTM's result other than as (output, (h_n, c_n))")
        return self.var[n]

    def val(self, v):
        if isinstance(v, torch.fx.Node):
            return self.node(v)
        if isinstance(v, Sym):
            text = e_render(v.expr, self.leaf, self.timed, div="//")
            # A size read from an argument (`x.size(1)`): the argument as a token.
            text = re.sub(r"(?<![\w.])([A-Za-z_]\w*)(?=\.size\()", lambda m: self.tok(m.group(1)), text)
            return f"({text})" if " " in text else text
        if isinstance(v, bool) or v is None:
            return repr(v)
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            if math.isinf(v):
                return "float('inf')" if v > 0 else "float('-inf')"
            if math.isnan(v):
                return "float('nan')"
            return repr(v)
        if isinstance(v, str):
            return repr(v)
        if isinstance(v, (torch.dtype, torch.layout, torch.memory_format)):
            # TorchScript compiled from a string (LibTorch's resolver) has no torch.float32: the
            # enum's number, named in a comment at the end of the line.
            code = SCALAR_TYPES.get(v) if isinstance(v, torch.dtype) else MEMORY_FORMATS.get(v, LAYOUTS.get(v))
            if code is None:
                raise Unconvertible(f"{v} has no TorchScript form in kforge's importer")
            self.comments.append(f"{code} is {v}")
            return str(code)
        if isinstance(v, torch.device):
            return "torch.device('cpu')"
        if isinstance(v, (tuple, list, torch.Size)):
            return "[" + ", ".join(self.val(x) for x in v) + "]"
        if isinstance(v, torch.Tensor):
            return self.tensor_arg(v, "an argument")
        raise Unconvertible(f"an argument of type {type(v).__name__} ({v!r:.40}) has no TorchScript form")

    def index(self, v):
        if isinstance(v, slice):
            parts = ["" if x is None else self.val(x) for x in (v.start, v.stop, v.step)]
            return ":".join(parts[:2]) + (":" + parts[2] if v.step is not None else "")
        if v is Ellipsis:
            return "..."
        if isinstance(v, tuple):
            return ", ".join(self.index(x) for x in v) if v else "()"
        return self.val(v)

    def call(self, fn, args, kwargs):
        parts = [self.val(a) for a in args] + [f"{k}={self.val(v)}" for k, v in kwargs.items()]
        return f"{fn}({', '.join(parts)})"

    def operand(self, v):
        t = self.val(v)
        plain = self.detok(t)
        return t if plain.replace("_", "").replace(".", "").isalnum() and not plain.startswith("-") else f"({t})"

    # ---- nodes ---------------------------------------------------------------------------------
    def call_function(self, n):
        fn, args, kw = n.target, list(n.args), dict(n.kwargs)
        if fn in BINARY:
            if fn in INPLACE_BINARY and isinstance(args[0], torch.fx.Node):
                self.alias_later = args[0]
            return f"{self.operand(args[0])} {BINARY[fn]} {self.operand(args[1])}"
        if fn in UNARY:
            return f"{UNARY[fn]}{self.operand(args[0])}"
        if fn is operator.getitem:
            if self.resolved(args[0]) in self.lstm and isinstance(args[1], int):  # (output, (h_n, c_n))
                x = self.var[self.resolved(args[0])]
                return f"{x}[0]" if args[1] in (0, -2) else f"({x}[1], {x}[2])"
            return f"{self.operand(args[0])}[{self.index(args[1])}]"
        if fn is builtins.getattr:
            attr = args[1]
            if attr in ("values", "indices"):
                return f"{self.operand(args[0])}[{0 if attr == 'values' else 1}]"
            return f"{self.operand(args[0])}.{attr}"
        if fn is math.sqrt:  # of a size: TorchScript has no math module
            return f"float({self.val(args[0])}) ** 0.5"
        ns, name = _namespace(fn)
        if ns is None:
            what = getattr(fn, "__qualname__", repr(fn))
            raise Unconvertible(f"forward() calls {what}, which kforge cannot express in TorchScript")
        if ns == "F":
            if name in DROPOUTS:
                p = kw.get("p", args[1] if len(args) > 1 else 0.5)
                training = kw.get("training", args[2] if len(args) > 2 else True)
                if p and training:
                    raise Unconvertible(f"F.{name} with p={p} in training mode: the output is random")
                return self.val(args[0])
            if kw.pop("inplace", False) and isinstance(args[0], torch.fx.Node):
                self.alias_later = args[0]
            kw = without_defaults(fn, name, kw)
            args, kw = floats_where_float(fn, args, kw)
            if name == "embedding":
                return self.call("torch.embedding", [args[1], args[0]], {})
            if name == "pad":  # aten::pad's value is a float? (TorchScript converts no int to it)
                if len(args) > 3 and isinstance(args[3], int):
                    args[3] = float(args[3])
                if isinstance(kw.get("value"), int):
                    kw["value"] = float(kw["value"])
            if name in self.prelude:
                return self.call(f"F.{name}", args, kw)
            return self.call(f"torch.{name}", args, kw)
        if fn is torch.norm:
            return self.norm(args, kw)
        for k in ("requires_grad", "pin_memory"):  # a reference computes no gradients
            kw.pop(k, None)
        if name.endswith("_") and not name.endswith("__") and hasattr(torch, name[:-1]):
            if args and isinstance(args[0], torch.fx.Node):
                self.alias_later = args[0]
            name = name[:-1]
        return self.call(f"torch.{name}", args, kw)

    def norm(self, args, kw):
        """torch.norm (Python code in PyTorch, no aten op of its signature) as the vector norm it
        computes for p = 'fro', None or a number."""
        b = inspect.signature(torch.norm).bind(*args, **kw)
        b.apply_defaults()
        p, dim, keepdim, dtype = b.arguments["p"], b.arguments["dim"], b.arguments["keepdim"], b.arguments["dtype"]
        if p in ("fro", None):
            p = 2.0
        if isinstance(p, str) or dtype is not None:
            raise Unconvertible(f"torch.norm with p={p!r} or a dtype has no TorchScript form in kforge's importer")
        x = self.val(b.arguments["input"])
        if dim is None:
            return f"torch.linalg_vector_norm({x}, {self.val(float(p))})"
        dims = dim if isinstance(dim, (list, tuple)) else [dim]
        return f"torch.linalg_vector_norm({x}, {self.val(float(p))}, {self.val(list(dims))}, {self.val(bool(keepdim))})"

    def call_method(self, n):
        m, args, kw = n.target, list(n.args), dict(n.kwargs)
        if m == "copy_" and isinstance(args[0], torch.fx.Node) and args[0].meta.get(OVERWRITTEN):
            x = None  # the value overwritten is never read
        else:
            x = self.operand(args[0])
        device_only = all(isinstance(a, (str, torch.device)) for a in args[1:]) and set(kw) <= {"device"}
        if m in ("cuda", "cpu", "requires_grad_", "detach") or (m == "to" and device_only):
            return x  # the judge places tensors; a reference computes no gradients
        if m == "to":
            args = [args[0]] + [a for a in args[1:] if not isinstance(a, (str, torch.device))]
            kw.pop("device", None)
        if m == "type" and len(args) == 2 and isinstance(args[1], torch.dtype):
            m = "to"
        if m == "copy_":
            self.alias_later = args[0]
            if isinstance(args[0], torch.fx.Node) and args[0].meta.get(OVERWRITTEN):  # state overwritten
                dest, src = args[0].meta.get(VALUE), args[1].meta.get(VALUE)
                same = isinstance(src, torch.Tensor) and src.dtype == dest.dtype
                return self.operand(args[1]) + ("" if same else f".to({self.val(dest.dtype)})")
            return f"{self.operand(args[1])}.to({x}.dtype).expand_as({x})"
        if m.endswith("_") and not m.endswith("__"):
            if not hasattr(torch.Tensor, m[:-1]):
                raise Unconvertible(f"forward() calls Tensor.{m}, which has no out-of-place form")
            self.alias_later = args[0]
            m = m[:-1]
        parts = [self.val(a) for a in args[1:]] + [f"{k}={self.val(v)}" for k, v in kw.items()]
        return f"{x}.{m}({', '.join(parts)})"

    def call_module(self, n):
        mod = self.gm.get_submodule(n.target)
        args, kw = list(n.args), dict(n.kwargs)
        inplace = getattr(mod, "inplace", False)
        text = kb_modules.translate(mod, n.target, [self.val(a) for a in args],
                                    {k: self.val(v) for k, v in kw.items()},
                                    lambda t: self.tensor_arg(t, f"module {n.target}"), self.val)
        if inplace and args and isinstance(args[0], torch.fx.Node):
            self.alias_later = args[0]
        if type(mod).__name__ == "LSTM":
            self.lstm.add(n)
        return text

    def get_attr(self, n):
        if n.meta.get(OVERWRITTEN):  # kept state forward() overwrites before reading it
            return None
        t = self.gm
        for part in n.target.split("."):
            t = getattr(t, part)
        if id(t) in self.qualnames:
            return self.tensor_arg(t, n.target)
        if not isinstance(t, torch.Tensor):
            raise Unconvertible(f"forward() reads {n.target}, a {type(t).__name__} kforge cannot declare")
        if isinstance(t, torch.Tensor) and t.numel() == 1 and t.device.type != "meta":
            return f"torch.tensor({self.val(t.item())}, dtype={self.val(t.dtype)})"
        raise Unconvertible(f"forward() builds a constant tensor ({n.target}, shape {list(t.shape)}) "
                            "from sizes alone; kforge cannot declare it")

    def emit(self):
        inputs, ret = [], None
        for n in self.gm.graph.nodes:
            self.alias_later, self.comments = None, []
            if n.op == "placeholder":
                name = sanitize(n.target, self.taken)
                self.var[n] = self.tok(name)
                inputs.append(name)
                continue
            if n.op == "output":
                ret = n.args[0]
                break
            text = getattr(self, n.op)(n)
            if text is None:  # state overwritten before it is read: no statement, never read
                self.var[n] = None
                continue
            if n.op == "get_attr" and TOKEN.fullmatch(text):
                self.var[n] = text  # a parameter or buffer: forward() reads its argument
                continue
            name = sanitize(n.name.rstrip("_"), self.taken)
            self.var[n] = token = self.tok(name)
            self.token_node[token] = n
            self.stmts.append(Stmt(token, text, list(dict.fromkeys(self.comments))))
            if self.alias_later is not None:
                self.alias[self.alias_later] = n
        if isinstance(ret, torch.fx.Node):
            body, annotation = self.node(ret), "Tensor"
        elif isinstance(ret, (tuple, list)) and ret and all(isinstance(r, torch.fx.Node) for r in ret):
            body = "(" + ", ".join(self.node(r) for r in ret) + ("," if len(ret) == 1 else "") + ")"
            annotation = "Tuple[" + ", ".join(["Tensor"] * len(ret)) + "]"
        else:
            raise Unconvertible("forward() returns something other than a tensor or a flat tuple of tensors")
        args = [(a, None, None) for a in inputs] + list(self.params)
        header, line = [], "def forward("
        for i, (a, _, _) in enumerate(args):  # lines of at most ~100 characters
            part = f"{a}: Tensor" + (", " if i + 1 < len(args) else "")
            if len(line) + len(part) > 100 and line.strip() not in ("def forward(", ""):
                header.append(line.rstrip())
                line = " " * len("def forward(")
            line += part
        header = "\n".join(header + [line + f") -> {annotation}:"])
        arg_tokens = {self.tok(a) for a, _, _ in args}
        source, self.compacted = kb_compact.render(self, header, self.stmts, body, arg_tokens)
        return source, args
