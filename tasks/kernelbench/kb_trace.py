"""Tracing a KernelBench Model's forward() with torch.fx, with the sizes it reads.

torch.fx's own proxies know nothing of values: `B, C, H, W = x.shape`, `len(x)`, `if x.dim() == 4`
and `math.sqrt(k.size(-1))` stop its trace (under Python 3.11, PyTorch 1.13 fails even the tuple
unpacking). SizeTracer runs every traced operation again on the meta device as it records it,
so that each node knows its value at the timed sizes (node.meta[VALUE]: a meta tensor, an int,
a tuple...). The sizes of the Model's inputs and parameters are Syms (kb_load.py), so arithmetic
on them keeps its expression over the size constants.

- A size is recorded symbolically where it can be: `B, C, H, W = x.shape` becomes `shape =
  x.shape`, `getitem = shape[0]`, ..., and the reference reads them from its argument at run time.
- Where Python needs the number itself (`int(...)`, `range(...)`, `len(...)`, an `if` on a size,
  `math.floor`), the proxy gives its value at the timed sizes: the reference then holds that number,
  and the size constants it came from are noted in Sym.uses (they are fixed) when known; the check
  at other sizes finds the rest.
- An `if` on tensor values stays what it is for torch.fx: control flow it cannot trace.

Some torch.nn modules are traced through functional forms written here (TRACED_MODULES):
MultiheadAttention and the Transformer encoder and decoder layers have no single functional call.
"""
import dis
import inspect
import math
import operator
import traceback

import torch
import torch.fx
from torch.fx.node import map_aggregate, map_arg

from kb_check import first_line
from kb_load import Sym, Unconvertible, e_dims

VALUE = "kf_value"    # node.meta key: the node's value at the timed sizes, or UNKNOWN
SIZES = "kf_sizes"    # node.meta key: a tensor's sizes as Syms where known, else None
DEPS = "kf_deps"      # node.meta key: the size constants a non-tensor value was computed from
PURE = "kf_pure"      # node.meta key: made by a functional form here (no side effects)
OVERWRITTEN = "kf_overwritten"  # node.meta key: a kept tensor forward() overwrites before reading


class _Unknown:
    def __repr__(self):
        return "UNKNOWN"


UNKNOWN = _Unknown()

# Factories run on the meta device when their node is evaluated (no memory at the timed sizes).
FACTORIES = {"zeros", "ones", "empty", "full", "randn", "rand", "randint", "arange", "eye",
             "linspace", "logspace", "tensor", "zeros_like", "ones_like", "empty_like", "full_like",
             "rand_like", "randn_like", "randint_like", "tril_indices", "triu_indices"}
# Methods whose result has the same shape as their input but not the same axes.
AXES_MOVED = {"transpose", "permute", "t", "swapaxes", "swapdims", "movedim", "moveaxis", "flip",
              "rot90", "mT", "T"}


def value_of(p):
    return p.node.meta.get(VALUE, UNKNOWN)


def _record_deps(node):
    """A proxy's number goes into Python: the size constants it came from are fixed."""
    v = node.meta.get(VALUE, UNKNOWN)
    if Sym.uses is not None:
        if isinstance(v, Sym):
            Sym.uses |= e_dims(v.expr)
        Sym.uses |= node.meta.get(DEPS, set())


def _unpack_count(frame):
    """How many values the code in `frame` unpacks here (`a, b = proxy`), else None. torch.fx 1.13
    looks this up by f_lasti // 2, wrong under Python 3.11's inline caches: by offset here."""
    for inst in dis.get_instructions(frame.f_code):
        if inst.offset == frame.f_lasti:
            return inst.argval if inst.opname == "UNPACK_SEQUENCE" else None
    return None


class SizedProxy(torch.fx.Proxy):
    """A torch.fx proxy whose node knows its value at the timed sizes (see the module's doc)."""

    def __getattr__(self, k):
        return SizedAttribute(self, k)

    def __iter__(self):
        v = value_of(self)
        if isinstance(v, (tuple, list)):
            return iter([self[i] for i in range(len(v))])
        if isinstance(v, torch.Tensor) and v.dim() > 0:
            return iter([self[i] for i in range(int(self._sizes()[0]))])
        n = _unpack_count(inspect.currentframe().f_back)
        if n is not None:
            return iter([self[i] for i in range(n)])
        return self.tracer.iter(self)  # raises torch.fx's TraceError

    def __len__(self):
        v = value_of(self)
        if isinstance(v, (tuple, list)):
            return len(v)
        if isinstance(v, torch.Tensor) and v.dim() > 0:
            n = self._sizes()[0]
            if isinstance(n, Sym) and Sym.uses is not None:
                Sym.uses |= e_dims(n.expr)
            return int.__index__(n)
        raise RuntimeError("'len' of a traced value whose length kforge's importer does not know")

    def __bool__(self):
        v = value_of(self)
        if v is UNKNOWN or isinstance(v, torch.Tensor):
            return self.tracer.to_bool(self)  # torch.fx's TraceError: control flow on tensor values
        # A branch on sizes: the reference takes the branch taken at the timed sizes, and the
        # check at other sizes finds the sizes where it would not (a minimum, a divisor).
        return bool(v)

    def _number(self, convert):
        v = value_of(self)
        if v is UNKNOWN or isinstance(v, torch.Tensor) or not isinstance(v, (int, float)):
            return self.tracer.to_bool(self)  # control flow on tensor values, as torch.fx says
        _record_deps(self.node)
        return convert(int.__index__(v) if isinstance(v, Sym) else v)

    def __int__(self):
        return self._number(int)

    def __index__(self):
        return self._number(operator.index)

    def __float__(self):
        return self._number(float)

    def _sizes(self):
        s = self.node.meta.get(SIZES)
        return s if s is not None else list(value_of(self).shape)


class SizedAttribute(torch.fx.proxy.Attribute, SizedProxy):
    """`x.shape`, `x.T`...: torch.fx's lazily made attribute, with SizedProxy's values."""


def _flat(v):
    out = []
    map_aggregate(v, lambda x: out.append(x))
    return out


class SizeTracer(torch.fx.Tracer):
    """torch.fx's Tracer with values (see the module's doc). `inputs`: forward()'s argument name
    -> (meta tensor or UNKNOWN, its sizes as Syms); `shape_of(tensor)`: a parameter's recorded
    shape expressions, or None."""

    def __init__(self, inputs, shape_of):
        super().__init__(autowrap_modules=(math,))
        # math.sqrt of a size stays in the graph (the reference computes it); every other math
        # function gets the number (the proxy's __float__).
        self._autowrap_function_ids = {id(math.sqrt)}
        self.inputs, self.shape_of = inputs, shape_of
        self.evaluating = False
        self.functional = 0  # > 0 inside a TRACED_MODULES form: its nodes have no side effects
        # A buffer is read through a proxy too: `self.mask[:, :T]` with T a traced size is a node.
        self.proxy_buffer_attributes = True
        self.record_stack_traces = True  # the problem's line, for reasons

    def proxy(self, node):
        return SizedProxy(node, self)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, proxy_factory_fn=None):
        # torch.fx's ParameterProxy (param_shapes_constant) is not needed: every proxy has sizes.
        p = super().create_proxy(kind, target, args, kwargs, name, type_expr)
        self._evaluate(p.node)
        if self.functional:
            p.node.meta[PURE] = True
        return p

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        if self.evaluating:  # a leaf module run on meta tensors reads its real parameters
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def call_module(self, m, forward, args, kwargs):
        if self.evaluating:
            return forward(*args, **kwargs)
        traced = TRACED_MODULES.get(type(m).__name__) if type(m).__module__.startswith("torch.nn") else None
        if traced is not None:
            self.functional += 1
            try:
                return traced(m, self.param, *args, **kwargs)
            finally:
                self.functional -= 1
        return super().call_module(m, forward, args, kwargs)

    def param(self, t):
        """A proxy for a parameter or buffer of the Model (for TRACED_MODULES' functional forms)."""
        if t is None or isinstance(t, torch.fx.Proxy):  # read through the module: a proxy already
            return t
        for n, p in list(self.root.named_parameters()) + list(self.root.named_buffers()):
            if p is t:
                return self.create_proxy("get_attr", n, (), {})
        raise Unconvertible("a module reads a tensor that is neither a parameter nor a buffer")

    # ---- values ----------------------------------------------------------------------------------
    def _evaluate(self, node):
        saved, Sym.uses = Sym.uses, None  # running it here uses no size in the reference
        self.evaluating = True
        try:
            value, sizes = self._compute(node)
        except Unconvertible:
            raise
        except Exception:
            value, sizes = UNKNOWN, None
        finally:
            Sym.uses = saved
            self.evaluating = False
        node.meta[VALUE], node.meta[SIZES] = value, sizes
        if not isinstance(value, torch.Tensor) and value is not UNKNOWN:
            deps = set()  # exact for a Sym; what the others were computed from
            for a in _flat((node.args, node.kwargs)):
                if isinstance(a, torch.fx.Node):
                    av = a.meta.get(VALUE)
                    deps |= e_dims(av.expr) if isinstance(av, Sym) else a.meta.get(DEPS, set())
                elif isinstance(a, Sym):
                    deps |= e_dims(a.expr)
            node.meta[DEPS] = deps

    def _sizes_of(self, node):
        s = node.meta.get(SIZES)
        v = node.meta.get(VALUE)
        return tuple(s) if s is not None else tuple(v.shape)

    def _compute(self, node):
        """(value, sizes) of a new node from its arguments' values."""
        if node.op == "placeholder":
            return self.inputs.get(node.target, (UNKNOWN, None))
        if node.op == "get_attr":
            t = self.root
            for part in node.target.split("."):
                t = getattr(t, part)
            exprs = self.shape_of(t) if isinstance(t, torch.Tensor) else None
            return t, _syms(t, exprs)
        values = map_arg((node.args, node.kwargs), lambda n: n.meta.get(VALUE, UNKNOWN))
        if any(x is UNKNOWN for x in _flat(values)):
            return UNKNOWN, None
        args, kwargs = values
        args, kwargs = list(args), dict(kwargs)
        first = node.args[0] if node.args and isinstance(node.args[0], torch.fx.Node) else None
        with torch.no_grad():
            if node.op == "call_function":
                fn = node.target
                if fn is getattr and args[1] == "shape" and isinstance(args[0], torch.Tensor):
                    return self._sizes_of(first), None
                if getattr(fn, "__name__", "") in FACTORIES and getattr(torch, fn.__name__, None) is not None:
                    kwargs["device"] = "meta"
                out = fn(*args, **kwargs)
            elif node.op == "call_method":
                if node.target == "size" and isinstance(args[0], torch.Tensor):
                    sizes = self._sizes_of(first)
                    dim = args[1] if len(args) > 1 else kwargs.get("dim")
                    return (sizes if dim is None else sizes[dim]), None
                out = getattr(args[0], node.target)(*args[1:], **kwargs)
            elif node.op == "call_module":
                out = self.root.get_submodule(node.target)(*args, **kwargs)
            else:
                return UNKNOWN, None
        sizes = None
        # An elementwise result keeps its input's sizes (and so their expressions).
        if (isinstance(out, torch.Tensor) and first is not None and first.meta.get(SIZES) is not None
                and isinstance(args[0], torch.Tensor) and out.shape == args[0].shape
                and node.target not in AXES_MOVED and getattr(node.target, "__name__", "") not in AXES_MOVED):
            sizes = first.meta[SIZES]
        return out, sizes


def _syms(t, exprs):
    """A tensor's sizes as Syms over the size constants (None when its shape is not known)."""
    if exprs is None or not isinstance(t, torch.Tensor) or len(exprs) != t.dim():
        return None
    out = []
    for v, e in zip(t.shape, exprs):
        out.append(Sym(int(v), e) if e[0] != "num" else int(v))
    return out


def at_line(lineno, code):
    """` at line N (`code`)`: where in a problem's file, as kforge's messages say it."""
    return f" at line {lineno} (`{(code or '').strip()[:80]}`)"


def raised_at(e, path):
    """at_line() of the last line of the file `path` on the exception's way up, or "" when the error
    did not pass through it."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == path]
    return at_line(frames[-1].lineno, frames[-1].line) if frames else ""


def why_not_traced(e, path):
    """The reason torch.fx could not trace forward(), with the problem's line where it stopped."""
    where = raised_at(e, path)
    control = isinstance(e, torch.fx.proxy.TraceError) and "control flow" in str(e)
    why = " (control flow on tensor values" + where + ")" if control else where
    return f"torch.fx cannot trace forward(){why}: {type(e).__name__}: {first_line(e)}"


def trace(model, inputs, shape_of, concrete_args=None, random_ok=False):
    """The GraphModule of model.forward traced by SizeTracer. `inputs`: forward()'s argument name
    -> (meta tensor, shape expressions) for the arguments get_inputs() gives. With `random_ok`
    (kforge model profile) a random draw in forward() is marked (`kf_random`: why no reference can
    match it) instead of refused."""
    values = {}
    for name, (t, exprs) in inputs.items():
        values[name] = (t, _syms(t, exprs)) if isinstance(t, torch.Tensor) else (UNKNOWN, None)
    tracer = SizeTracer(values, shape_of)
    before = {(id(m), k): v for m in model.modules() for k, v in vars(m).items()}
    stored = []
    try:
        graph = tracer.trace(model, concrete_args=concrete_args)
    except Exception:
        if _restore(model, before):  # forward() stored a traced value before it failed: say that
            raise Unconvertible(f"forward() sets self.{_restore.last[0]}: the Model keeps state from one call to "
                                "the next, and a kforge reference is a function of its inputs")
        raise
    stored = _restore(model, before)
    gm = torch.fx.GraphModule(tracer.root, graph)
    _merge_attributes(gm)
    for name in stored:
        if not _state_overwritten(gm, name):
            raise Unconvertible(f"forward() sets self.{name} and reads it at the next call: the Model keeps state "
                                "from one call to the next, and a kforge reference is a function of its inputs")
    _merge_sizes(gm)
    _drop_unused(gm)
    gm.kf_state = stored  # kept state forward() overwrites before it reads it
    _refuse_random(gm, model, random_ok)
    return gm


RANDOM_FUNCTIONS = {"randn", "rand", "randint", "normal", "bernoulli", "multinomial", "rand_like", "randn_like",
                    "randint_like", "randperm", "poisson"}
RANDOM_METHODS = {"bernoulli", "bernoulli_", "uniform_", "normal_", "random_", "exponential_", "geometric_",
                  "cauchy_", "log_normal_", "multinomial"}


def _refuse_random(gm, model, mark_only=False):
    """forward() drawing random values (`h0 = torch.randn(...)` when no state is given) has no
    reference: the reason names the call and the problem's line (with `mark_only`, kept on the
    node as meta["kf_random"])."""
    for n in gm.graph.nodes:
        name = n.target if n.op == "call_method" else getattr(n.target, "__name__", "")
        if (n.op == "call_function" and name in RANDOM_FUNCTIONS and n.target in (
                getattr(torch, name, None), getattr(torch._C._VariableFunctions, name, None))) or (
                n.op == "call_method" and name in RANDOM_METHODS):
            where = _line_of(n, type(model))
            draw = f"forward() draws random values ({'torch.' if n.op == 'call_function' else '.'}{name}{where})"
            if mark_only:
                n.meta["kf_random"] = draw
                continue
            raise Unconvertible(f"{draw}: its output differs from call to call, so no reference can match it "
                                "(get_inputs() could draw them and pass them to forward())")


def _line_of(node, model_cls):
    """` at line N (`code`)` where the problem's code made the node, from torch.fx's stack trace."""
    import re
    forward = inspect.unwrap(model_cls.forward)  # under @torch.no_grad() and the like: the model's own
    path = getattr(getattr(forward, "__code__", None), "co_filename", "")
    found = None
    for m in re.finditer(r'File "([^"]+)", line (\d+), in \w+\n\s*(.*)', node.meta.get("stack_trace") or ""):
        if m.group(1) == path:
            found = m
    return at_line(found.group(2), found.group(3)) if found else ""


def _restore(model, before):
    """The module attributes forward() set to traced values, each given back its value."""
    stored = []
    for qual, m in model.named_modules():
        for k, v in list(vars(m).items()):
            if isinstance(v, torch.fx.Proxy):
                if (id(m), k) in before:
                    setattr(m, k, before[(id(m), k)])
                else:
                    delattr(m, k)
                stored.append(f"{qual + '.' if qual else ''}{k}")
    _restore.last = stored
    return stored


def _merge_attributes(gm):
    """One get_attr node for each attribute read: torch.fx makes one for each read of a tensor the
    Model keeps, and an in-place change of one read is then seen by the later reads."""
    seen = {}
    for n in list(gm.graph.nodes):
        if n.op != "get_attr":
            continue
        if n.target in seen:
            n.replace_all_uses_with(seen[n.target])
            gm.graph.erase_node(n)
        else:
            seen[n.target] = n


def _state_overwritten(gm, name):
    """Whether the value forward() finds in self.<name> is never read: forward() reads it only
    after overwriting all of it from its inputs (`self.hidden.copy_(initial_hidden)`), or not at
    all. The read is marked OVERWRITTEN (the Emitter writes the copy as the value copied)."""
    reads = [n for n in gm.graph.nodes if n.op == "get_attr" and n.target == name]
    if not reads:
        return True
    n = reads[0]
    order = {x: i for i, x in enumerate(gm.graph.nodes)}
    first = min(n.users, key=order.get) if n.users else None
    if first is None:
        return True
    if not (first.op == "call_method" and first.target == "copy_" and len(first.args) == 2
            and first.args[0] is n and isinstance(first.args[1], torch.fx.Node) and not first.kwargs):
        return False
    dest, src = gm, first.args[1].meta.get(VALUE)
    for part in name.split("."):  # a read torch.fx made itself (create_arg): no value noted
        dest = getattr(dest, part, None)
    if not (isinstance(dest, torch.Tensor) and isinstance(src, torch.Tensor) and dest.shape == src.shape):
        return False  # a broadcast copy overwrites it too, but kforge checks the simple case only
    n.meta[OVERWRITTEN], n.meta[VALUE] = True, dest
    return True


def _drop_unused(gm):
    """What nothing reads goes, and what only it read: a number Python used itself (`int(x.shape[0]
    / 2)`, an `if` on a size), attention weights nobody reads, a layer whose result forward()
    drops. An operation that changes a value in place stays."""
    for n in reversed(list(gm.graph.nodes)):
        if n.users or n.op not in ("call_function", "call_method", "call_module", "get_attr"):
            continue
        if n.meta.get(PURE) or _number_like(n.meta.get(VALUE, UNKNOWN)) or not _in_place(gm, n):
            gm.graph.erase_node(n)


def _in_place(gm, n):
    """Whether node `n` may change a value in place (x.add_(1), x += 1, x[i] = v, inplace=True)."""
    if n.op == "get_attr":
        return False
    if n.kwargs.get("inplace") or "out" in n.kwargs:
        return True
    if n.op == "call_module":
        return bool(getattr(gm.get_submodule(n.target), "inplace", False))
    if n.op == "call_function" and n.target in IN_PLACE_OPERATORS:
        return True
    name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
    return (name.endswith("_") and not name.endswith("__")) or (name.startswith("__i") and name.endswith("__"))


IN_PLACE_OPERATORS = {operator.setitem, operator.delitem, operator.iadd, operator.isub, operator.imul,
                      operator.itruediv, operator.ifloordiv, operator.imod, operator.ipow, operator.imatmul,
                      operator.iand, operator.ior, operator.ixor, operator.ilshift, operator.irshift}


def _merge_sizes(gm):
    """One node for each size read: `x.shape` read twice is read once."""
    seen = {}
    for n in list(gm.graph.nodes):
        if n.op not in ("call_function", "call_method") or not _number_like(n.meta.get(VALUE, UNKNOWN)):
            continue
        try:
            key = (n.op, n.target, n.args, tuple(sorted(n.kwargs.items())))
            hash(key)
        except TypeError:
            continue
        if key in seen:
            n.replace_all_uses_with(seen[key])
            gm.graph.erase_node(n)
        else:
            seen[key] = n


def _number_like(v):
    """A size, a number, a flag, a device or a dtype, or a tuple of them (no side effects made it)."""
    if isinstance(v, (tuple, list)):
        return all(_number_like(x) for x in v)
    return isinstance(v, (int, float, bool, torch.device, torch.dtype))


# ---- torch.nn modules traced through a functional form ------------------------------------------
# Each gets the module, P (a proxy for one of its parameters) and the call's arguments, and
# computes what the module's forward() computes, with torch functions torch.fx records. Options the
# form does not cover are refused with the reason.

def _dropout(p, training, what):
    if p and training:
        raise Unconvertible(f"{what} with dropout={p} in training mode: the output is random")


def multihead_attention(m, P, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                        average_attn_weights=True, is_causal=False):
    what = "nn.MultiheadAttention"
    if m.bias_k is not None or m.add_zero_attn:
        raise Unconvertible(f"{what} with add_bias_kv or add_zero_attn has no functional translation")
    if key_padding_mask is not None:
        raise Unconvertible(f"{what} with a key_padding_mask has no functional translation in kforge's importer")
    _dropout(m.dropout, m.training, what)
    same = query is key and key is value  # self-attention: one projection
    if m.batch_first:
        if same:
            query = key = value = query.transpose(0, 1)
        else:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
    E, H = m.embed_dim, m.num_heads
    w, b = (P(m.in_proj_weight), P(m.in_proj_bias)) if m._qkv_same_embed_dim else (None, P(m.in_proj_bias))
    if w is not None and same:
        q, k, v = torch.nn.functional.linear(query, w, b).chunk(3, -1)
    else:
        wq, wk, wv = (w[:E], w[E:2 * E], w[2 * E:]) if w is not None else (
            P(m.q_proj_weight), P(m.k_proj_weight), P(m.v_proj_weight))
        bq, bk, bv = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
        q = torch.nn.functional.linear(query, wq, bq)
        k = torch.nn.functional.linear(key, wk, bk)
        v = torch.nn.functional.linear(value, wv, bv)
    shape = query.shape
    L, N, S = shape[0], shape[1], key.shape[0] if key is not query else shape[0]
    hd = shape[2] // H  # read from the input, so the reference's scale follows embed_dim
    q = q.reshape(L, N * H, hd).transpose(0, 1)
    k = k.reshape(S, N * H, hd).transpose(0, 1)
    v = v.reshape(S, N * H, hd).transpose(0, 1)
    attn = torch.bmm(q * (hd ** -0.5), k.transpose(1, 2))
    if is_causal and attn_mask is None:
        raise Unconvertible(f"{what} with is_causal and no attn_mask has no functional translation")
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn = attn.masked_fill(attn_mask, float("-inf"))
        else:
            attn = attn + attn_mask
    attn = torch.softmax(attn, -1)
    out = torch.bmm(attn, v).transpose(0, 1).reshape(L * N, E)
    out = torch.nn.functional.linear(out, P(m.out_proj.weight), P(m.out_proj.bias)).view(L, N, E)
    if m.batch_first:
        out = out.transpose(0, 1)
    if not need_weights:
        return out, None
    weights = attn.view(N, H, L, S)
    return out, (weights.mean(1) if average_attn_weights else weights)


def _activation(m, x):
    act = m.activation
    if isinstance(act, str):
        act = {"relu": torch.nn.functional.relu, "gelu": torch.nn.functional.gelu}[act]
    return act(x)


def transformer_encoder_layer(m, P, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
    what = "nn.TransformerEncoderLayer"
    if src_key_padding_mask is not None:
        raise Unconvertible(f"{what} with a src_key_padding_mask has no functional translation in kforge's importer")
    _dropout(m.dropout.p, m.training, what)

    def sa(x):
        return m.dropout1(m.self_attn(x, x, x, attn_mask=src_mask, need_weights=False)[0])

    def ff(x):
        return m.dropout2(m.linear2(m.dropout(_activation(m, m.linear1(x)))))
    x = src
    if m.norm_first:
        x = x + sa(m.norm1(x))
        return x + ff(m.norm2(x))
    x = m.norm1(x + sa(x))
    return m.norm2(x + ff(x))


def transformer_decoder_layer(m, P, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                              memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
    what = "nn.TransformerDecoderLayer"
    if tgt_key_padding_mask is not None or memory_key_padding_mask is not None:
        raise Unconvertible(f"{what} with a key padding mask has no functional translation in kforge's importer")
    _dropout(m.dropout.p, m.training, what)

    def sa(x):
        return m.dropout1(m.self_attn(x, x, x, attn_mask=tgt_mask, need_weights=False)[0])

    def mha(x):
        return m.dropout2(m.multihead_attn(x, memory, memory, attn_mask=memory_mask, need_weights=False)[0])

    def ff(x):
        return m.dropout3(m.linear2(m.dropout(_activation(m, m.linear1(x)))))
    x = tgt
    if m.norm_first:
        x = x + sa(m.norm1(x))
        x = x + mha(m.norm2(x))
        return x + ff(m.norm3(x))
    x = m.norm1(x + sa(x))
    x = m.norm2(x + mha(x))
    return m.norm3(x + ff(x))


def transformer_encoder(m, P, src, mask=None, src_key_padding_mask=None, is_causal=None):
    x = src
    for layer in m.layers:
        x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
    return m.norm(x) if m.norm is not None else x


def transformer_decoder(m, P, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                        memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
    x = tgt
    for layer in m.layers:
        x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask, tgt_key_padding_mask=tgt_key_padding_mask,
                  memory_key_padding_mask=memory_key_padding_mask)
    return m.norm(x) if m.norm is not None else x


TRACED_MODULES = {
    "MultiheadAttention": multihead_attention,
    "TransformerEncoderLayer": transformer_encoder_layer,
    "TransformerDecoderLayer": transformer_decoder_layer,
    "TransformerEncoder": transformer_encoder,
    "TransformerDecoder": transformer_decoder,
}
