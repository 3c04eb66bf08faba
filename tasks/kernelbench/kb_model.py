"""A user's model (KernelBench's convention: `Model`, `get_inputs()`, `get_init_inputs()`) as the
chains of operations that take its time (`kforge model profile`, docs/model.md).

profile() traces the Model as the importer does (kb_convert.trace_problem: torch.fx on the meta
device, every size an expression over the file's size constants), cuts the graph into chains and,
on a GPU, times one profiled forward of the traced graph with the Model's own weights. Each chain
is also written as a KernelBench problem of its own (problem_text()), which the importer then
converts into a task like any other: sizes from the model's shapes, the layers' weights as inputs
with their inits, the reference checked against the chain's module on the spot.

A chain is an anchor (a GEMM, a convolution, a norm, attention's matmul, or any other operation
that is not a view) and what follows it while each next operation is elementwise, a row softmax or
reduction, a norm after an elementwise tail (norm + residual), or, after a softmax, one more matmul
(attention); its only value used outside it is its last. Views (view, transpose, getitem...) are
not chains of their own: a chain that reads one copies it. Sizes, and tensors computed from sizes
alone (a causal mask built in forward()), are written as expressions in the chains that use them.
"""
import math
import operator

import torch
import torch.fx

import kb_convert
from kb_load import Sym, Unconvertible, e_render
from kb_trace import UNKNOWN, VALUE, raised_at

# Modules and functions that start a chain and never join one (save the exceptions above).
ANCHOR_MODULES = {"Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
                  "ConvTranspose3d", "Embedding", "EmbeddingBag", "LSTM", "GRU", "RNN"}
NORM_MODULES = {"LayerNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "InstanceNorm1d",
                "InstanceNorm2d", "InstanceNorm3d", "RMSNorm", "LocalResponseNorm"}
MATMUL_FUNCTIONS = {"matmul", "mm", "bmm", "baddbmm", "addmm", "einsum", "linear", "bilinear"}
ANCHOR_FUNCTIONS = MATMUL_FUNCTIONS | {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                                       "conv_transpose3d", "embedding", "scaled_dot_product_attention", "lstm"}
NORM_FUNCTIONS = {"layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm", "normalize"}
ROW_FUNCTIONS = {"softmax", "log_softmax"}
VIEWS = {"view", "reshape", "transpose", "permute", "contiguous", "flatten", "unflatten", "unsqueeze", "squeeze",
         "expand", "expand_as", "split", "chunk", "unbind", "getitem", "t", "narrow", "select", "view_as",
         "reshape_as", "movedim", "swapaxes", "swapdims", "mT", "T", "clone", "detach", "float", "to", "type_as"}


def _word(n, modules):
    """The operation's name: a module's class, else the function or method."""
    if n.op == "call_module":
        return type(modules[n.target]).__name__
    if n.op == "call_method":
        return n.target
    return getattr(n.target, "__name__", str(n.target)).lstrip("_")


def _device_attr(n):
    """`x.device` or `x.dtype`: a chain reads it from its own first input."""
    return n.op == "call_function" and n.target is getattr and len(n.args) > 1 and n.args[1] in ("device", "dtype")


def _sizeish(n):
    """A node whose value is a size, a number, a device or a dtype (not a tensor)."""
    if _device_attr(n):
        return True
    v = n.meta.get(VALUE)
    return v is not None and v is not UNKNOWN and not _is_tensorish(v)


def _is_tensorish(v):
    """A tensor, or a tuple or list of them (nested too: an LSTM's (out, (h, c)))."""
    return isinstance(v, torch.Tensor) or (isinstance(v, (tuple, list)) and v and all(_is_tensorish(x) for x in v))


class Graph:
    """The traced Model cut into chains (the module's doc)."""

    def __init__(self, gm, model, timed):
        self.gm, self.model, self.timed = gm, model, timed
        self._sizes, self._pool = {}, None
        self.modules = dict(gm.named_modules())
        self.order = {n: i for i, n in enumerate(gm.graph.nodes)}
        self._data = self._data_nodes()
        self.kind = {n: self._kind(n) for n in gm.graph.nodes}
        self.chains = []
        self._cut()

    # ---- what each node is ---------------------------------------------------------------------
    def _kind(self, n):
        """placeholder, output, param (a tensor attribute), free (a size or other non-tensor value,
        written as an expression), const (a tensor computed from sizes alone: copied where read),
        view, or op."""
        if n.op in ("placeholder", "output"):
            return n.op
        if n.op == "get_attr":
            return "param" if isinstance(self._attr(n.target), torch.Tensor) else "free"
        if _sizeish(n):
            return "free"
        if not self._data[n]:
            return "const"
        return "view" if _word(n, self.modules) in VIEWS else "op"

    def _data_nodes(self):
        """Each node: whether its value depends on the values of an input or a parameter (not only
        sizes). One pass in graph order (every node after its inputs): a deep model (ResNet-101's
        hundreds of layers) needs no recursion."""
        data = {}
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                data[n] = True
            elif n.op == "get_attr":
                data[n] = isinstance(self._attr(n.target), torch.Tensor)
            elif _sizeish(n):
                data[n] = False
            else:
                data[n] = any(data.get(a, False) for a in n.all_input_nodes)
        return data

    # ---- sizes as expressions over the size constants ------------------------------------------
    def sizes(self, n):
        """A tensor node's sizes: Syms (expressions over the constants) where known, else ints."""
        if n in self._sizes:
            return self._sizes[n]
        v = n.meta.get(VALUE)
        if not isinstance(v, torch.Tensor):
            return None
        self._sizes[n] = None  # (no cycles in a graph; a guard all the same)
        got = self._rule(n, v)
        out = []
        for i, d in enumerate(v.shape):
            s = got[i] if got is not None and len(got) == v.dim() else None
            out.append(s if isinstance(s, Sym) and int(s) == int(d) else self._guess(int(d)))
        self._sizes[n] = out
        return out

    def _rule(self, n, v):
        known = n.meta.get("kf_sizes")
        if known is not None:
            return list(known)
        x = n.args[0] if n.args and isinstance(n.args[0], torch.fx.Node) else None
        xs = self.sizes(x) if x is not None else None
        w = _word(n, self.modules) if n.op not in ("placeholder", "get_attr") else ""
        if n.op == "call_module":
            m = self.modules[n.target]
            if w == "Linear" and xs:
                return xs[:-1] + [m.out_features]
            if w.startswith("Conv") and xs:
                return [xs[0], m.out_channels] + [None] * (v.dim() - 2)
            return xs if xs is not None and len(xs) == v.dim() else None
        if w in ("view", "reshape") and n.op == "call_method":
            dims = n.args[1] if len(n.args) == 2 and isinstance(n.args[1], (tuple, list)) else n.args[1:]
            return [a.meta.get(VALUE) if isinstance(a, torch.fx.Node) else a for a in dims]
        if w == "transpose" and xs and len(n.args) == 3:
            a, b = n.args[1] % len(xs), n.args[2] % len(xs)
            out = list(xs)
            out[a], out[b] = xs[b], xs[a]
            return out
        if w == "permute" and xs:
            dims = n.args[1] if len(n.args) == 2 and isinstance(n.args[1], (tuple, list)) else n.args[1:]
            return [xs[d] for d in dims]
        if w in ("matmul", "bmm", "mm") and xs and isinstance(n.args[1], torch.fx.Node):
            ys = self.sizes(n.args[1])
            if ys and len(xs) >= 2 and len(ys) >= 2:
                return (xs[:-2] if len(xs) >= len(ys) else ys[:-2]) + [xs[-2], ys[-1]]
        if w == "getitem" and x is not None and _rnn(self, x) and n.args[1] == 0:
            m, ins = self.modules[x.target], self.sizes(x.args[0])  # output: [B, T, D * H] or [T, B, D * H]
            if ins and len(ins) == 3:
                width = m.hidden_size * (2 if m.bidirectional else 1)
                return [ins[0], ins[1], width]
        if w == "getitem" and x is not None and x.op == "call_method" and x.target in ("split", "chunk"):
            base = self.sizes(x.args[0])
            if base:
                dim = x.kwargs.get("dim", x.args[2] if len(x.args) > 2 else 0) % len(base)
                out = list(base)
                out[dim] = x.args[1] if x.target == "split" and isinstance(x.args[1], int) else None
                return out
        for a in n.all_input_nodes:  # elementwise: an input of the same shape
            av = a.meta.get(VALUE)
            if isinstance(av, torch.Tensor) and av.shape == v.shape:
                return self.sizes(a)
        return None

    def _guess(self, d):
        """A size known only by its value: the first size constant or known size expression with it."""
        if self._pool is None:
            self._pool = {}
            for name, val in self.timed.items():
                self._pool.setdefault(int(val), Sym(int(val), ("dim", name)))
            for n in self.gm.graph.nodes:
                for x in [n.meta.get(VALUE)] + list(n.meta.get("kf_sizes") or []):
                    if isinstance(x, Sym):
                        self._pool.setdefault(int(x), x)
            for m in self.modules.values():
                for x in vars(m).values():
                    for y in (x if isinstance(x, tuple) else (x,)):
                        if isinstance(y, Sym):
                            self._pool.setdefault(int(y), y)
        return self._pool.get(d, d)

    def _attr(self, target):
        t = self.gm
        for part in target.split("."):
            t = getattr(t, part)
        return t

    def tuple_root(self, n):
        """The operation whose tuple n takes a tensor out of, directly or through items (an RNN's
        output, or h_n of its (h_n, c_n)); else None. A chain that reads such an item and not the
        operation starts at the item, as the tuple cannot be a task's input."""
        def item(m):
            return (m.op == "call_function" and _word(m, self.modules) == "getitem"
                    and isinstance(m.args[0], torch.fx.Node))
        if (not item(n) or not isinstance(n.meta.get(VALUE), torch.Tensor)
                or isinstance(n.args[0].meta.get(VALUE), torch.Tensor)):  # the first tensor only
            return None
        x = n.args[0]
        while self.kind[x] == "view" and item(x):
            x = x.args[0]
        return x if self.kind[x] == "op" and not isinstance(x.meta.get(VALUE), torch.Tensor) else None

    def roots(self, n):
        """The non-view nodes a node's value comes from, through views."""
        out, todo = [], [n]
        while todo:
            m = todo.pop()
            if self.kind[m] == "view":
                todo.extend(a for a in m.all_input_nodes if self.kind[a] in ("view", "op", "placeholder", "param"))
            elif m not in out:
                out.append(m)
        return out

    def role(self, n):
        w = _word(n, self.modules)
        if n.op == "call_module":
            m = self.modules[n.target]
            if w in NORM_MODULES:
                return "norm"
            if w in ANCHOR_MODULES or not type(m).__module__.startswith("torch.nn"):
                return "anchor"
            return "row" if w in ("Softmax", "LogSoftmax") else "elementwise"
        if w in MATMUL_FUNCTIONS:
            return "matmul"
        if w in ANCHOR_FUNCTIONS:
            return "anchor"
        if w in NORM_FUNCTIONS:
            return "norm"
        if w in ROW_FUNCTIONS:
            return "row"
        if w in ("sum", "mean", "amax", "amin", "max", "min", "logsumexp", "norm", "var", "std", "prod"):
            return "reduction"
        return "elementwise"

    # ---- chains --------------------------------------------------------------------------------
    def _can_join(self, chain, n):
        roles = [self.role(m) for m in chain]
        r = self.role(n)
        if "reduction" in roles[1:]:
            return False  # a reduction ends a chain
        if r in ("elementwise", "row", "reduction"):
            return True
        if r == "norm":  # conv + batch norm, or a residual add + layer norm
            after_conv = len(chain) == 1 and _word(chain[0], self.modules).lower().startswith("conv")
            return "norm" not in roles and (after_conv or (roles[-1] == "elementwise" and len(chain) > 1))
        if r == "matmul":
            return "row" in roles and roles.count("matmul") < 2 and roles[0] == "matmul"
        return False

    def outputs(self, members):
        """The members whose values are read outside the chain (through views or not)."""
        inside = set(members)
        out = []
        for m in members:
            for u in m.users:
                if u in inside or self.kind[u] == "free":
                    continue
                if self.kind[u] == "view":
                    readers = self._view_readers(u)
                    if all(r in inside for r in readers):
                        continue
                out.append(m)
                break
        return out

    def _view_readers(self, v):
        """The non-view nodes that read view `v` (through more views)."""
        out, todo = [], [v]
        while todo:
            m = todo.pop()
            for u in m.users:
                if self.kind[u] == "view":
                    todo.append(u)
                elif u not in out:
                    out.append(u)
        return out

    def _cut(self):
        ops = [n for n in self.gm.graph.nodes if self.kind[n] == "op"]
        taken = set()
        for i, start in enumerate(ops):
            if start in taken:
                continue
            chain = [start]
            for n in ops[i + 1:]:
                if n in taken:
                    continue
                ins = [r for a in n.all_input_nodes for r in self.roots(a) if self.kind[r] == "op"]
                if not any(a in chain for a in ins):
                    continue
                if self._can_join(chain, n) and all(a in chain or self.order[a] < self.order[start] for a in ins):
                    chain.append(n)
                else:
                    break
            while len(chain) > 1 and (len(self.outputs(chain)) != 1 or self.outputs(chain)[0] is not chain[-1]):
                chain.pop()
            taken.update(chain)
            self.chains.append(Chain(self, chain))


class Chain:
    """A chain of the graph: its members (operations), the views and constants it reads, its inputs."""

    def __init__(self, graph, members):
        self.g = graph
        self.members = members
        self.tail = members[-1]
        mods = graph.modules
        words = []
        for m in members:
            w = _word(m, mods)
            if w not in words or (w in MATMUL_FUNCTIONS and words[-1] != w):
                words.append(w)
        self.words = words
        first = members[0]
        base = first.target if first.op == "call_module" else words[0]
        extra = [w.lower() for w in words[1:]][:3]
        self.base_name = "_".join([str(base).replace(".", "_")] + extra).lower()
        # Every node the chain's code needs, in graph order: members, the views they read, and the
        # parameters and constant tensors those read (sizes are written as expressions).
        need, todo = set(members), list(members)

        def item_input(a):  # an item of another chain's tuple
            root = graph.tuple_root(a)
            return root is not None and root not in members
        while todo:
            for a in todo.pop().all_input_nodes:
                if a not in need and graph.kind[a] in ("view", "param", "const") and not item_input(a):
                    need.add(a)
                    todo.append(a)
        self.nodes = sorted(need, key=graph.order.get)
        self.inputs = []  # outside values the chain reads: placeholders and other chains' tails
        for m in self.nodes:
            for a in m.all_input_nodes:
                if (a not in need and (graph.kind[a] in ("op", "placeholder") or item_input(a))
                        and a not in self.inputs):
                    self.inputs.append(a)
        self.inputs.sort(key=graph.order.get)

    def what(self):
        return " + ".join(self.words)

    def flops(self):
        total = 0
        for m in self.members:
            total += _flops(self.g, m)
        return total

    def bytes(self):
        """Bytes a fused kernel must move at least: the inputs read, the parameters, the output."""
        total = sum(_nbytes(a.meta.get(VALUE)) for a in self.inputs)
        total += _nbytes(self.tail.meta.get(VALUE))
        seen = set()
        for m in self.members:
            if m.op == "call_module":
                for p in self.g.modules[m.target].parameters(recurse=False):
                    if id(p) not in seen:
                        seen.add(id(p))
                        total += p.numel() * p.element_size()
        for m in self.nodes:
            if self.g.kind[m] == "param":
                t = self.g._attr(m.target)
                if isinstance(t, torch.Tensor) and id(t) not in seen:
                    seen.add(id(t))
                    total += t.numel() * t.element_size()
        return total


def _nbytes(v):
    if isinstance(v, torch.Tensor):
        return v.numel() * v.element_size()
    if isinstance(v, (tuple, list)):
        return sum(_nbytes(x) for x in v)
    return 0


def _rnn_flops(m, x):
    """nn.RNN, LSTM or GRU over input x: per step, layer and direction, 2 * gates * hidden *
    (its input + hidden) for the products (the gates' elementwise work is small beside them)."""
    gates = {"LSTM": 4, "GRU": 3}.get(type(m).__name__, 1)
    steps = x.numel() // int(x.shape[-1])  # sequence length x batch
    dirs = 2 if m.bidirectional else 1
    hidden, total = int(m.hidden_size), 0
    for layer in range(int(m.num_layers)):
        inner = int(m.input_size) if layer == 0 else dirs * hidden
        total += dirs * steps * 2 * gates * hidden * (inner + hidden)
    return total


def _flops(g, n):
    out = n.meta.get(VALUE)
    w = _word(n, g.modules)
    if _rnn(g, n):
        x = n.args[0].meta.get(VALUE) if n.args and isinstance(n.args[0], torch.fx.Node) else None
        return _rnn_flops(g.modules[n.target], x) if isinstance(x, torch.Tensor) and x.dim() else 0
    if not isinstance(out, torch.Tensor):
        return 0
    if n.op == "call_module":
        m = g.modules[n.target]
        if w == "Linear":
            return 2 * out.numel() * int(m.in_features)
        if w.startswith("ConvTranspose"):
            x = n.args[0].meta.get(VALUE)
            k = math.prod(int(s) for s in m.kernel_size)
            return 2 * (x.numel() if isinstance(x, torch.Tensor) else 0) * int(m.out_channels) // int(m.groups) * k
        if w.startswith("Conv"):
            k = math.prod(int(s) for s in m.kernel_size)
            return 2 * out.numel() * int(m.in_channels) // int(m.groups) * k
        return 5 * out.numel()
    if w in ("matmul", "mm", "bmm", "baddbmm", "addmm", "linear"):  # 2 * outputs * the inner size
        a = n.args[0].meta.get(VALUE) if n.args and isinstance(n.args[0], torch.fx.Node) else None
        return 2 * out.numel() * (int(a.shape[-1]) if isinstance(a, torch.Tensor) and a.dim() else 1)
    return out.numel()


# ---- a chain as a KernelBench problem ------------------------------------------------------------
class _Text:
    """A value fx writes as this text (a size as its expression over the constants)."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


def _render(v, timed):
    """A Python value of the graph as problem text: sizes over the constants, the rest as fx writes it."""
    if isinstance(v, Sym):
        return _Text(e_render(v.expr, lambda d: d, timed, div="//"))
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, float) and not math.isfinite(v):
        return _Text(("-" if v < 0 else "") + ("math.inf" if math.isinf(v) else "math.nan"))
    if isinstance(v, tuple):
        return tuple(_render(x, timed) for x in v)
    if isinstance(v, list):
        return [_render(x, timed) for x in v]
    return v


def _draw_text(shape, decl, render):
    """get_inputs()'s draw for an input of this shape: the Model's own draw where it is a Model input."""
    s = ", ".join(shape) + ("," if len(shape) == 1 else "")
    if decl is None or decl.init is None or decl.computed is not None:
        return f"torch.randn({s})"
    kind, params = decl.init
    v = [p.text(render) for p in params]
    if kind == "rand":
        return f"torch.rand({s})"
    if kind == "randint" and len(v) == 2:
        return f"torch.randint({v[0]}, {v[1]}, ({s}))"
    if kind == "uniform" and len(v) == 2:
        return f"(torch.rand({s}) * (({v[1]}) - ({v[0]})) + ({v[0]}))"
    if kind == "normal" and len(v) == 2:
        return f"(torch.randn({s}) * ({v[1]}) + ({v[0]}))"
    return f"torch.randn({s})"


def _ctor(m, timed):
    """`nn.X(...)` that builds a module like `m` (its sizes over the constants), or None."""
    import inspect
    cls = type(m)
    if not cls.__module__.startswith("torch.nn"):
        return None
    try:
        params = list(inspect.signature(cls.__init__).parameters.values())[1:]
        if isinstance(m, torch.nn.RNNBase):  # nn.LSTM(*args, **kwargs): RNNBase's, its mode aside
            params = [p for p in list(inspect.signature(torch.nn.RNNBase.__init__).parameters.values())[1:]
                      if p.name != "mode"]
            if isinstance(m, torch.nn.RNN):
                params.append(inspect.Parameter("nonlinearity", inspect.Parameter.KEYWORD_ONLY))
    except (TypeError, ValueError):
        return None
    args = []
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.name in ("device", "dtype"):
            continue
        if p.name in ("bias", "elementwise_affine", "affine") and isinstance(getattr(m, p.name, None),
                                                                             (torch.Tensor, type(None))):
            if p.name == "bias":
                v = getattr(m, "bias", None) is not None
            else:
                v = getattr(m, "weight", None) is not None
        elif p.name == "inplace":
            v = False  # the chain's code reads its input again
        elif hasattr(m, p.name) and not isinstance(getattr(m, p.name), (torch.Tensor, torch.nn.Module)):
            v = getattr(m, p.name)
        elif p.default is not inspect.Parameter.empty:
            continue
        else:
            return None
        args.append(f"{p.name}={_render(v, timed)!r}")
    return f"nn.{cls.__name__}({', '.join(args)})"


def _rnn(g, n):
    """"LSTM", "GRU" or "RNN" where node n calls such a layer, else None."""
    m = g.modules.get(n.target) if n.op == "call_module" else None
    return type(m).__name__ if isinstance(m, torch.nn.RNNBase) else None


def _flat_result(graph, value, rnn):
    """A recurrent layer's result as a flat tuple, the importer's form (an LSTM's (output, (h_n,
    c_n)) as output, h_n, c_n); any other value as it is."""
    if rnn is None:
        return value
    first, state = (graph.call_function(operator.getitem, (value, i)) for i in (0, 1))
    if rnn != "LSTM":
        return (first, state)
    return (first, graph.call_function(operator.getitem, (state, 0)), graph.call_function(operator.getitem, (state, 1)))


def problem_text(chain, traced, model_file, index):
    """The chain as a KernelBench problem file (a string), or raises ValueError why it cannot be."""
    g, timed = chain.g, traced.timed
    for n in chain.nodes:
        if n.meta.get("kf_random"):
            raise ValueError(f"{n.meta['kf_random']}: no reference can match it")
    decls = {d.name: d for d in traced.args}
    sub = torch.fx.Graph()
    env, names, init_lines, shapes = {}, {}, [], []

    def flat(target):
        name = "".join(c if c.isalnum() else "_" for c in target)
        base, k = name, 1
        while name in names.values() and names.get(target) != name:
            k += 1
            name = f"{base}_{k}"
        names[target] = name
        return name

    def arg(a):
        if a in env:
            return env[a]
        v = a.meta.get(VALUE)
        if g.kind[a] == "free" and not _is_tensorish(v):
            if _device_attr(a):
                if not chain.inputs:
                    raise ValueError("it has no input to take a device from")
                env[a] = sub.call_function(getattr, (env[chain.inputs[0]], a.args[1]))
                return env[a]
            if isinstance(v, (int, float, tuple, list, torch.Size)) or v is None:
                return _render(tuple(v) if isinstance(v, torch.Size) else v, timed)
            raise ValueError(f"it reads {a.name}, a {type(v).__name__} kforge cannot write")
        raise ValueError(f"it reads {a.name}, which is computed outside it")

    for a in chain.inputs:
        v = a.meta.get(VALUE)
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"its input {a.name} is not a tensor")
        env[a] = sub.placeholder(a.name)
        shape = [(e_render(s.expr, lambda d: d, timed, div="//") if isinstance(s, Sym) else str(int(s)))
                 for s in g.sizes(a)]
        if v.dtype not in (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.bool):
            raise ValueError(f"its input {a.name} is {v.dtype}")
        decl = decls.get(a.name) if a.op == "placeholder" else None
        draw = _draw_text(shape, decl, lambda e: e_render(e, lambda d: d, timed, div="//"))
        if v.dtype in (torch.float16, torch.bfloat16):
            draw += f".to(torch.{str(v.dtype).split('.')[-1]})"
        elif v.dtype != torch.float32 and decl is None:
            raise ValueError(f"its input {a.name} is {v.dtype}, drawn by the model in a way kforge cannot see")
        shapes.append(draw)
    for n in chain.nodes:
        if n.op == "call_module":
            m = g.modules[n.target]
            text = _ctor(m, timed)
            if text is None:
                raise ValueError(f"its module {n.target} ({type(m).__name__}) cannot be written as a constructor call")
            new = flat(n.target)
            init_lines.append(f"self.{new} = {text}")
            env[n] = sub.call_module(new, _map(n.args, arg, timed), _map(n.kwargs, arg, timed))
        elif n.op == "get_attr":
            t = g._attr(n.target)
            if n.meta.get("kf_uncomputable"):
                raise ValueError(f"it reads {n.target}, {n.meta['kf_uncomputable']}, which kforge cannot write")
            if not isinstance(t, torch.Tensor):
                raise ValueError(f"it reads {n.target}, which is not a tensor")
            new = flat(n.target)
            shape = ", ".join(_shape_text(t, n, timed)) + ("," if t.dim() == 1 else "")
            init_lines.append(f"self.{new} = nn.Parameter(torch.randn({shape}) * 0.02)"
                              if isinstance(t, torch.nn.Parameter) else f"self.register_buffer('{new}', torch.randn({shape}))")
            env[n] = sub.get_attr(new)
        else:
            env[n] = sub.create_node(n.op, n.target, _map(n.args, arg, timed), _map(n.kwargs, arg, timed), name=n.name)
    sub.output(_flat_result(sub, env[chain.tail], _rnn(g, chain.tail)))
    code = sub.python_code("self")
    body = [ln for ln in code.src.splitlines() if ln.strip() and not ln.startswith("torch.fx._symbolic_trace.wrap")]
    imports, defs = _globals({k: v for k, v in code.globals.items() if any(_mentions(ln, k) for ln in body)})
    used = sorted({d for d in timed if any(_mentions(x, d) for x in init_lines + body + shapes)},
                  key=list(timed).index)
    lines = [f'"""{chain.what()}: chain {index} of {model_file} (kforge model profile), nodes '
             f'{", ".join(m.name for m in chain.members)}."""',
             "import math", "", "import torch", "import torch.nn as nn", "import torch.nn.functional as F"]
    lines += imports + [""] + defs + [""]
    lines += [f"{d} = {int(timed[d])}" for d in used] + ["", ""]
    lines += ["class Model(nn.Module):",
              f'    """{chain.what()} from {model_file}."""', "",
              "    def __init__(self):", "        super().__init__()"]
    lines += [f"        {ln}" for ln in init_lines]
    lines += [""] + [f"    {ln}" for ln in body] + ["", ""]
    lines += ["def get_inputs():", f"    return [{', '.join(shapes)}]", "", "",
              "def get_init_inputs():", "    return []", ""]
    return "\n".join(lines)


def _mentions(text, name):
    import re
    return re.search(r"\b" + re.escape(name) + r"\b", text) is not None


def _shape_text(t, n, timed):
    sizes = n.meta.get("kf_sizes") or [int(x) for x in t.shape]
    return [e_render(s.expr, lambda d: d, timed, div="//") if isinstance(s, Sym) else str(int(s)) for s in sizes]


def _map(a, f, timed):
    if isinstance(a, torch.fx.Node):
        return f(a)
    if isinstance(a, tuple):
        return tuple(_map(x, f, timed) for x in a)
    if isinstance(a, list):
        return [_map(x, f, timed) for x in a]
    if isinstance(a, dict):
        return {k: _map(v, f, timed) for k, v in a.items()}
    if isinstance(a, slice):
        return slice(_map(a.start, f, timed), _map(a.stop, f, timed), _map(a.step, f, timed))
    return _render(a, timed)


def _globals(globs):
    """Import lines and definitions for the names fx's code uses."""
    imports, defs = [], []
    for name, obj in sorted(globs.items()):
        if name in ("torch", "fx_pytree", "pytree", "NoneType"):
            continue
        if name in ("inf", "nan"):
            defs.append(f"{name} = math.{name}")
        elif name == "device":
            imports.append("from torch import device")
        elif callable(obj) and getattr(obj, "__module__", None) and getattr(obj, "__qualname__", None):
            mod = obj.__module__
            imports.append(f"from {mod} import {obj.__qualname__} as {name}" if mod not in ("builtins",)
                           else f"{name} = {obj.__qualname__}")
        else:
            raise ValueError(f"its code needs {name} ({type(obj).__name__}), which kforge cannot import")
    return imports, defs


def _shape_of(n):
    v = n.meta.get(VALUE)
    return [int(x) for x in v.shape] if isinstance(v, torch.Tensor) else []


def chain_names(graph):
    """Each chain's name, unique, in graph order: a task's name and a file's (letters, digits, _;
    a letter first); `kforge model check` finds a package's op for a chain by it."""
    out, seen = [], {}
    for i, c in enumerate(graph.chains):
        base = "".join(ch if ch.isalnum() and ch.isascii() else "_" for ch in c.base_name.lower())[:60]
        if not base or not base[0].isalpha():
            base = f"chain{i + 1}" + (f"_{base}" if base else "")
        k = seen.get(base, 0) + 1
        seen[base] = k
        out.append(base if k == 1 else f"{base}_{k}")
    return out


# ---- on the GPU: one profiled forward -------------------------------------------------------------
def _real_model(traced, device):
    """The Model at its timed sizes with its own weights, and its inputs, on `device`."""
    from kb_load import run_module
    ns = run_module(traced.tree, traced.path, {n: int(v) for n, v in traced.timed.items()})
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]())
    model = model.to(device)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in ns["get_inputs"]()]
    return model, inputs


def time_chains(graph, traced, device, runs=3):
    """{chain index: GPU ms per forward}, the traced graph's GPU ms, the Model's own forward ms
    (median of 20, CUDA events) and the GPU's name."""
    model, inputs = _real_model(traced, device)
    gm = torch.fx.GraphModule(model, graph.gm.graph)
    owner = {}
    for i, c in enumerate(graph.chains):
        for n in c.nodes:
            owner.setdefault(n.name, i)

    class Marked(torch.fx.Interpreter):
        def run_node(self, n):
            with torch.profiler.record_function("kf::" + n.name):
                return super().run_node(n)

    with torch.no_grad():
        for _ in range(3):
            model(*inputs)
            Marked(gm).run(*inputs)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(20):
            start.record()
            model(*inputs)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(runs):
                Marked(gm).run(*inputs)
            torch.cuda.synchronize()
    per_chain, other, total = {}, 0.0, 0.0
    from torch.autograd import DeviceType
    for e in prof.events():
        # A mark's CPU event counts the kernels of everything it ran (its children's included); on
        # the GPU's timeline the profiler may repeat the mark, which is not counted again.
        if not e.name.startswith("kf::") or getattr(e, "device_type", DeviceType.CPU) != DeviceType.CPU:
            continue
        us = e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
        ms = us / 1000.0 / runs
        total += ms
        i = owner.get(e.name[4:])
        if i is None:
            other += ms
        else:
            per_chain[i] = per_chain.get(i, 0.0) + ms
    times.sort()
    return per_chain, other, total, times[len(times) // 2], torch.cuda.get_device_name(0)


# ---- the whole profile ---------------------------------------------------------------------------
def profile(path, prelude, device, model_file):
    """The profile as kforge reads it (docs/model.md): the model, its chains, their times on a GPU."""
    traced = kb_convert.trace_problem(path, prelude, device, whole_model=True)
    graph = Graph(traced.gm, traced.model, traced.timed)
    notes = list(traced.notes)
    for n in traced.gm.graph.nodes:
        if n.meta.get("kf_random"):
            notes.append(f"{n.meta['kf_random']}: the profile times it, and the chains that read the draw are not "
                         "written as problems (get_inputs() could draw them and pass them to forward())")
    unknown = [n.name for n in traced.gm.graph.nodes if n.op not in ("placeholder", "output")
               and n.meta.get(VALUE) is UNKNOWN]
    if unknown:  # the meta device could not run them: does the model run at all?
        from kb_check import first_line
        try:
            model, inputs = _real_model(traced, device)
        except Exception as e:  # noqa: BLE001 (the model's own error, said as it is, and where)
            raise Unconvertible(f"the model cannot be built at its sizes{raised_at(e, traced.path)}: "
                                f"{type(e).__name__}: {first_line(e)}")
        try:
            with torch.no_grad():
                model(*inputs)
        except Exception as e:  # noqa: BLE001 (as above)
            raise Unconvertible(f"the model's forward() fails{raised_at(e, traced.path)}: "
                                f"{type(e).__name__}: {first_line(e)}")
        notes.append(f"kforge could not follow the shapes of {len(unknown)} operation(s) ({', '.join(unknown[:5])}"
                     f"{', ...' if len(unknown) > 5 else ''}): the chains holding them may not be written as problems")
    rows = []
    for i, c in enumerate(graph.chains):
        row = {"index": i + 1, "name": c.base_name, "what": c.what(), "ops": len(c.members),
               "nodes": [m.name for m in c.members],
               "inputs": [{"name": a.name, "shape": _shape_of(a)} for a in c.inputs],
               "output": _shape_of(c.tail), "flops": int(c.flops()), "bytes": int(c.bytes())}
        try:
            row["problem"] = problem_text(c, traced, model_file, i + 1)
        except ValueError as e:
            row["why_not"] = str(e)
        rows.append(row)
    for row, name in zip(rows, chain_names(graph)):
        row["name"] = name
    out = {"model": {"file": model_file, "summary": traced.model_doc, "constants": {n: int(v) for n, v in traced.timed.items()},
                     "inputs": [{"name": d.name, "dtype": str(d.dtype).replace("torch.", ""),
                                 "shape": [int(x) for x in d.shape_at(traced.timed)]} for d in traced.args]},
           "nodes": sum(1 for n in traced.gm.graph.nodes if n.op not in ("placeholder", "output")),
           "chains": rows, "device": device, "notes": notes}
    if device == "cuda":
        per_chain, other, total, forward_ms, gpu = time_chains(graph, traced, device)
        for i, row in enumerate(rows):
            row["gpu_ms"] = per_chain.get(i, 0.0)
        out.update({"gpu": gpu, "traced_gpu_ms": total, "other_gpu_ms": other, "forward_ms": forward_ms})
    return out


# ---- kforge model check: the model with a package's ops in place of its chains --------------------
class _Replacement(torch.nn.Module):
    """A chain replaced by a package's op: the op where the sizes are ones kforge judged it at,
    else the chain as the model computes it (counted)."""

    def __init__(self, op, inputs, dims, judged, original, source, rnn=None):
        super().__init__()
        self.op, self.inputs, self.dims, self.judged = op, inputs, dims, judged
        self.rnn = rnn  # a recurrent layer's chain: the op's flat outputs nested as the layer's
        self.original = original  # a GraphModule of the chain over the model
        self.source = source      # how each op input is found: ("input", i) or ("param", tensor)
        self.calls = self.fallbacks = 0

    def forward(self, *args):
        self.calls += 1
        values = [args[i] if kind == "input" else t for kind, i, t in self.source]
        shapes = [[int(n) for n in v.shape] for v in values]
        if not any(all(_shape_at(decl["shape"], dims) == shape for decl, shape in zip(self.inputs, shapes))
                   for dims in self.judged):
            self.fallbacks += 1
            return self.original(*args)
        out = self.op(*[v.contiguous() for v in values])
        if self.rnn == "LSTM":
            return out[0], (out[1], out[2])
        return (out[0], out[1]) if self.rnn else out


def _shape_at(shape, dims):
    """An op input's shape (sizes, dim names or expressions over them, as the manifest writes
    them) at one judged configuration's dims; None where it cannot be evaluated."""
    import ast
    ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.FloorDiv: lambda a, b: a // b if b else None, ast.Mod: lambda a, b: a % b if b else None}

    def value(e):
        if isinstance(e, ast.Constant) and type(e.value) is int:
            return e.value
        if isinstance(e, ast.Name):
            return dims.get(e.id)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            v = value(e.operand)
            return None if v is None else -v
        if isinstance(e, ast.BinOp) and type(e.op) in ops:
            a, b = value(e.left), value(e.right)
            return None if a is None or b is None else ops[type(e.op)](a, b)
        return None
    out = []
    for d in shape:
        if isinstance(d, int):
            out.append(d)
            continue
        try:
            out.append(value(ast.parse(str(d).replace("/", "//").replace("////", "//"), mode="eval").body))
        except (SyntaxError, ValueError):
            return None
    return out


def _chain_module(graph, chain, root):
    """The chain alone as a GraphModule over `root` (the model): placeholders for its inputs."""
    sub = torch.fx.Graph()
    env = {}
    for a in chain.inputs:
        env[a] = sub.placeholder(a.name)

    def arg(a):
        if a in env:
            return env[a]
        v = a.meta.get(VALUE)
        if _device_attr(a):
            env[a] = sub.call_function(getattr, (env[chain.inputs[0]], a.args[1]))
            return env[a]
        return tuple(v) if isinstance(v, torch.Size) else (int(v) if isinstance(v, Sym) else v)

    for n in chain.nodes:
        env[n] = sub.node_copy(n, arg)
    sub.output(env[chain.tail])
    return torch.fx.GraphModule(root, sub)


def _op_sources(op, chain, graph, model):
    """How each of the op's inputs is found in the model: a chain input by its name, a layer's
    parameter by the name the importer gives it (module path with _, then _weight...), or None."""
    by_input = {a.name: i for i, a in enumerate(chain.inputs)}
    params = {}
    for n in chain.nodes:
        if n.op == "call_module":
            flat = "".join(c if c.isalnum() else "_" for c in n.target)
            for pname, p in model.get_submodule(n.target).named_parameters(recurse=False):
                params[f"{flat}_{pname}"] = p
            for pname, b in model.get_submodule(n.target).named_buffers(recurse=False):
                params[f"{flat}_{pname}"] = b
    out = []
    for decl in op["inputs"]:
        name = decl["name"]
        base = name.rstrip("_")
        if name in by_input or base in by_input:
            out.append(("input", by_input.get(name, by_input.get(base)), None))
        elif name in params or base in params:
            out.append(("param", 0, params.get(name, params.get(base))))
        else:
            return None, f"its input '{name}' is neither an input of the chain nor a parameter of its layers"
    return out, None


def _median_ms(fn, runs, flush):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(runs):
        flush.zero_()  # the L2 flushed: every run reads its weights from memory
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def _error(out, ref):
    """max |out - ref| / max(rms(ref), tiny): kforge's error measure (docs/protocol.md)."""
    o, r = out.double(), ref.double()
    rms = float(r.pow(2).mean().sqrt()) if r.numel() else 0.0
    return float((o - r).abs().max()) / max(rms, 1e-30) if r.numel() else 0.0


def check(path, prelude, device, model_file, package, runs=50, compile_modes=("default",)):
    """`kforge model check`: the model with the package's ops in place of its chains (docs/model.md)."""
    traced = kb_convert.trace_problem(path, prelude, device, whole_model=True)
    for n in traced.gm.graph.nodes:
        if n.meta.get("kf_random"):
            raise Unconvertible(f"{n.meta['kf_random']}: its output differs from call to call, so the model cannot "
                                "be compared with its rewrite (get_inputs() could draw them and pass them to forward())")
    graph = Graph(traced.gm, traced.model, traced.timed)
    names = chain_names(graph)
    ops = {}
    for op in package["ops"]:
        ops.setdefault(op["task"].rsplit("/", 1)[-1], op)
    library = package.get("library")
    if library:
        torch.ops.load_library(library)
    model, inputs = _real_model(traced, device)
    copy = torch.fx.Graph()  # the graph rewritten here is a copy: `graph` keeps the model's
    new_of = {}
    copy.output(copy.graph_copy(graph.gm.graph, new_of))
    gm = torch.fx.GraphModule(model, copy)
    rows, replacements = [], []
    for i, (chain, name) in enumerate(zip(graph.chains, names)):
        op = ops.get(name)
        if op is None:
            continue
        row = {"chain": name, "index": i + 1, "what": chain.what(), "op": op["op"], "task": op["task"],
               "speedup_alone": (op.get("judged") or {}).get("speedup")}
        sources, why = _op_sources(op, chain, graph, model)
        if sources is None:
            row["why_not"] = why
            rows.append(row)
            continue
        if library:
            fn = getattr(getattr(torch.ops, package["name"]), op["op"])
        else:  # the task's reference in the op's place: the rewrite checked without the kernels
            fn = _script(op["reference_torchscript"]).forward
            row["stand_in"] = "reference"
        judged = [c.get("dims", {}) for c in op.get("configurations", [])]
        rep = _Replacement(fn, op["inputs"], op.get("dims", []), judged, _chain_module(graph, chain, model), sources,
                           _rnn(graph, chain.tail))
        replacements.append((chain, rep, row))
        rows.append(row)
    # The rewrite: each replaced chain's value comes from its replacement; what only it read goes.
    g = gm.graph
    for k, (chain, rep, row) in enumerate(replacements):
        target = f"kforge_op_{k}"
        gm.add_submodule(target, rep)
        tail = new_of[chain.tail]
        with g.inserting_after(tail):
            new = g.call_module(target, tuple(new_of[a] for a in chain.inputs))
        tail.replace_all_uses_with(new)
        new_of[chain.tail] = new  # a later chain that reads this one reads its replacement
    g.eliminate_dead_code()
    gm.recompile()
    result = {"model": {"file": model_file, "summary": traced.model_doc}, "rows": rows, "device": device,
              "chains": len(graph.chains), "replaced": len(replacements), "library": library or None}
    torch.manual_seed(0)
    with torch.no_grad():
        want = model(*inputs)
        got = gm(*inputs)
        for _, rep, row in replacements:
            row["calls"], row["fallbacks"] = rep.calls, rep.fallbacks
            rep.calls = rep.fallbacks = 0
        ref = _float64(traced, model, inputs)
        if isinstance(want, (tuple, list)):
            want, got, ref = want[0], got[0], (ref[0] if ref is not None else None)
        result["error_vs_model"] = _error(got, want)
        if ref is not None:
            result["error"] = _error(got, ref)
            result["model_error"] = _error(want, ref)
        if device == "cuda":
            flush = torch.empty(64 << 20, dtype=torch.int32, device="cuda")
            for _ in range(3):
                model(*inputs)
                gm(*inputs)
            result["eager_ms"] = _median_ms(lambda: model(*inputs), runs, flush)
            result["kforge_ms"] = _median_ms(lambda: gm(*inputs), runs, flush)
            result["gpu"] = torch.cuda.get_device_name(0)
            result["runs"] = runs
            compiled = {}
            # Inductor compiles here, in this process: its compile workers are new processes started
            # inside kforge's confinement, where Triton finds no GPU ("Could not find an active GPU
            # backend": max-autotune's template choices failed so on an H100 in session 27).
            import torch._inductor.config as inductor_config
            inductor_config.compile_threads = 1
            for mode in compile_modes:
                try:
                    c = torch.compile(model, mode=None if mode == "default" else mode)
                    for _ in range(3):
                        c(*inputs)
                    compiled[mode] = _median_ms(lambda: c(*inputs), runs, flush)
                except Exception as e:  # noqa: BLE001 (Inductor needs a compiler and a cache the sandbox may deny)
                    compiled[mode] = f"failed here: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            result["compiled_ms"] = compiled
            per_chain, _, total, _, _ = time_chains(graph, traced, device)
            for chain, rep, row in replacements:
                i = graph.chains.index(chain)
                row["share"] = per_chain.get(i, 0.0) / total if total else None
    return result


def _script(source):
    """A task's reference (TorchScript, as kforge compiles it) compiled here. kforge's C++ resolves
    `torch.X` among ATen's operators; Python's TorchScript looks X up on the torch module, which
    lacks some (torch.hardtanh): those come from torch._C._nn, F or torch.ops.aten."""
    import re
    import types
    shim = types.ModuleType("torch")
    shim.__dict__.update(torch.__dict__)
    for name in set(re.findall(r"\btorch\.(\w+)", source)):
        if not hasattr(torch, name):
            for ns in (torch._C._nn, torch.nn.functional, torch.ops.aten):
                if getattr(ns, name, None) is not None:
                    setattr(shim, name, getattr(ns, name))
                    break
    names = {"torch": shim, "math": math, "Tensor": torch.Tensor}
    unit = torch.jit.CompilationUnit()
    unit.define(source, rcb=names.get)
    return unit


def _float64(traced, model, inputs):
    """The model's output in float64 (a copy of it, on the same device), or None if it will not run so."""
    import copy
    try:
        m64 = copy.deepcopy(model).double()
        return m64(*[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs])
    except Exception:  # noqa: BLE001 (a model with float32-only code)
        return None
