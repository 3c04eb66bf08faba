"""Checking a converted reference against the original Model, and finding the sizes it can vary.

try_config() re-runs the problem module with given constant values, builds the Model, draws the
task's declared inputs and parameters (the same tensors go to both), and compares the Model's
output with the reference's. probe_dims() uses it to find, for each size, the values the Model
accepts (a minimum and a divisor), from which the [check] configurations are built.
"""
import contextlib
import math
import re
import resource

import torch

from kb_load import Unconvertible, e_eval, run_module
from kb_record import Recorder

DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
          torch.float64: "float64", torch.int32: "int32", torch.int64: "int64", torch.bool: "bool"}


class Real:
    """A real-valued init parameter: its value at given constants, and its kforge text given a
    renderer of integer expressions."""

    def __init__(self, value, text):
        self.value, self.text = value, text

    @staticmethod
    def of(v):
        """From a Draw parameter: a Sym/int (an expression) or a float."""
        from kb_load import Sym, e_of
        if isinstance(v, (Sym, int)) and not isinstance(v, bool):
            e = e_of(v)
            return Real(lambda vals: e_eval(e, vals), lambda r: r(e))
        f = float(v)
        return Real(lambda vals: f, lambda r: repr(f))


class Decl:
    """A declared input of the task: name, dtype, shape (expressions), init (kind, [Real])."""

    def __init__(self, name, dtype, shape, init, qualname=None, scalar=False):
        self.name, self.dtype, self.shape, self.init, self.qualname = name, dtype, shape, init, qualname
        self.scalar = scalar  # the Model takes a Python float here
        # A computed input (kb_inputs.py): its own draw's dtype when not `dtype`, its further draws
        # (Decls), its transform (compiled) and the transform's text.
        self.draw_dtype, self.draws, self.transform, self.transform_text, self.computed = None, [], None, None, None

    def shape_at(self, vals):
        return [e_eval(e, vals) for e in self.shape]

    def draw(self, vals, gen, dtype=None):
        if self.transform is not None and dtype is None:  # drawn, then computed, as kforge does
            own = self.draw(vals, gen, self.draw_dtype or self.dtype)
            return self.transform(own, *[e.draw(vals, gen, e.dtype) for e in self.draws])
        shape = self.shape_at(vals)
        kind, params = self.init
        p = [x.value(vals) for x in params]
        if kind == "randn":
            t = torch.randn(shape, generator=gen, dtype=torch.float64)
        elif kind == "normal":
            t = p[0] + p[1] * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif kind == "rand":
            t = torch.rand(shape, generator=gen, dtype=torch.float64)
        elif kind == "uniform":
            t = p[0] + (p[1] - p[0]) * torch.rand(shape, generator=gen, dtype=torch.float64)
        elif kind == "randint":
            t = torch.randint(int(p[0]), int(p[1]), shape, generator=gen)
        elif kind == "bernoulli":
            t = torch.rand(shape, generator=gen) < p[0]
        else:
            raise Unconvertible(f"input '{self.name}': no way to draw '{kind}'")
        return t.to(dtype or self.dtype)


def _flat(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and all(isinstance(o, torch.Tensor) for o in out):
        return list(out)
    raise Unconvertible(f"the Model returns {type(out).__name__}, not a tensor or a tuple of tensors")


def compare(ref, got):
    """None when the reference's outputs match the Model's, else what differs."""
    if len(ref) != len(got):
        return f"the reference returns {len(ref)} output(s), the Model {len(got)}"
    for i, (a, b) in enumerate(zip(ref, got)):
        if list(a.shape) != list(b.shape):
            return f"output {i}: shape {list(a.shape)} but the Model's is {list(b.shape)}"
        if a.dtype != b.dtype:
            return f"output {i}: dtype {a.dtype} but the Model's is {b.dtype}"
        if not (a.is_floating_point() or b.is_floating_point()):
            if not torch.equal(a.cpu(), b.cpu()):
                return f"output {i}: {int((a != b).sum())} of {a.numel()} values differ"
            continue
        x, y = a.detach().double().cpu(), b.detach().double().cpu()
        if not torch.equal(torch.isnan(x), torch.isnan(y)):
            return f"output {i}: NaN at different places"
        ok = ~torch.isnan(y)
        x, y = x[ok], y[ok]
        if x.numel() == 0:
            continue
        low = a.dtype in (torch.float16, torch.bfloat16)
        rtol, atol = (1e-2, 1e-2) if low else (1e-4, 1e-5)
        scale = max(float(y.abs().max()), 1.0) if torch.isfinite(y).all() else 1.0
        err = (x - y).abs()
        bad = err > rtol * y.abs() + atol * scale
        if bool(bad.any()):
            return f"output {i}: max difference {float(err.max()):.3g} (values up to {float(y.abs().max()):.3g})"
    return None


class Problem:
    """What try_config() needs: the parsed module, the timed constants, the declared inputs (the
    Model's arguments first, then parameters/buffers) and the compiled reference."""

    def __init__(self, tree, filename, timed, args, params, reference, device):
        self.tree, self.filename, self.timed = tree, filename, timed
        self.args, self.params = args, params
        self.reference, self.device = reference, device

    def values(self, config):
        vals = dict(self.timed)
        vals.update(config)
        return vals

    def bytes_at(self, config):
        vals = self.values(config)
        total = 0
        for d in self.args + self.params:
            total += math.prod(d.shape_at(vals)) * torch.tensor([], dtype=d.dtype).element_size()
        return total

    def build(self, config, seed=0):
        """The Model at `config` (its own init), and the tensors get_inputs() returns there."""
        vals = self.values(config)
        with Recorder().active():  # a problem's .cuda() moves nothing: the helper places tensors
            ns = run_module(self.tree, self.filename, vals)
            torch.manual_seed(seed)
            try:
                model = ns["Model"](*ns["get_init_inputs"]())
                inputs = ns["get_inputs"]()
            except Exception as e:
                raise ConfigFailed(f"building the Model failed: {type(e).__name__}: {first_line(e)}")
        return model, list(inputs)

    def try_config(self, config, check_inputs=True, twice=False):
        """None when the reference matches the Model at `config`, else why not (ConfigFailed is
        raised for a Model that fails there by itself)."""
        vals = self.values(config)
        model, real_inputs = self.build(config)
        if check_inputs:
            for d, t in zip(self.args, real_inputs):
                if isinstance(t, torch.Tensor) and list(t.shape) != d.shape_at(vals):
                    return f"get_inputs() gives '{d.name}' shape {list(t.shape)}, not {d.shape_at(vals)}"
        owned = dict(model.named_parameters())
        owned.update(dict(model.named_buffers()))
        gen = torch.Generator().manual_seed(1234)
        inputs = [d.draw(vals, gen).to(self.device) for d in self.args]
        params = []
        for d in self.params:
            t = owned.get(d.qualname)
            if t is None or list(t.shape) != d.shape_at(vals):
                return f"the Model's '{d.qualname}' has shape {None if t is None else list(t.shape)}, not {d.shape_at(vals)}"
            params.append(d.draw(vals, gen))
        model = model.to(self.device)
        owned = dict(model.named_parameters())
        owned.update(dict(model.named_buffers()))
        with torch.no_grad():
            for d, v in zip(self.params, params):
                owned[d.qualname].copy_(v)
            params = [owned[d.qualname].detach().clone() for d in self.params]
            try:
                args = [t.item() if d.scalar else t.clone() for d, t in zip(self.args, inputs)]
                got = _flat(model(*args))
                again = _flat(model(*[t.item() if d.scalar else t.clone() for d, t in zip(self.args, inputs)])) if twice else None
            except Unconvertible:
                raise
            except Exception as e:
                raise ConfigFailed(f"the Model fails: {type(e).__name__}: {first_line(e)}")
            if again is not None and compare(again, got) is not None:
                raise Unconvertible("the Model is not deterministic: two runs on the same inputs differ")
            try:
                ref = _flat(self.reference(*inputs, *params))
            except Exception as e:
                if out_of_memory(e):
                    raise ConfigFailed(f"the reference fails: {first_line(e)}")
                return f"the reference fails: {first_line(e)}"
        return compare(ref, got)


@contextlib.contextmanager
def memory_limit(extra):
    """At most `extra` more bytes of data memory (RLIMIT_DATA) inside (None: no limit)."""
    if extra is None:
        yield
        return
    used = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmData:"):
                used = int(line.split()[1]) * 1024
    old = resource.getrlimit(resource.RLIMIT_DATA)
    new = used + extra if old[0] == resource.RLIM_INFINITY else min(old[0], used + extra)
    resource.setrlimit(resource.RLIMIT_DATA, (new, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, old)


def out_of_memory(e):
    text = str(e).lower()
    return isinstance(e, MemoryError) or "allocate" in text or "out of memory" in text


class ConfigFailed(Exception):
    """The Model itself does not run at a configuration."""


def first_line(e):
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    if lines and lines[0].startswith("The following operation failed in the TorchScript interpreter"):
        lines = lines[-1:]  # the error itself is last
    return lines[0][:300] if lines else type(e).__name__


def ok_at(problem, config):
    try:
        return problem.try_config(config) is None
    except ConfigFailed:
        return False


PROBES = [1, 2, 3, 5, 7, 8, 13, 16]


def probe_dim(problem, base, d, limit):
    """(minimum, divisor) of the values of `d` at which the reference matches the Model (the other
    sizes at `base`), or None when only its base value works."""
    good, tried = {base[d]}, {}
    timed = problem.timed[d]
    near = [base[d] // 2, base[d] - 1, base[d] + 1] if base[d] > 16 else []  # for sizes small ones break
    for v in PROBES + near:
        if v == base[d] or v > timed:
            continue
        cfg = dict(base, **{d: v})
        if problem.bytes_at(cfg) > limit:
            continue
        tried[v] = ok_at(problem, cfg)
        if tried[v]:
            good.add(v)
        if v == 5 and tried.get(1) and tried.get(3) and tried[5]:
            return 1, 1  # 1, 3 and 5 all work: any size does
    if good == {base[d]}:  # a multiple of something fixed (n_embd of 12 heads): its multiples
        for v in (2 * base[d], 3 * base[d]):
            cfg = dict(base, **{d: v})
            if v <= timed and problem.bytes_at(cfg) <= limit:
                tried[v] = ok_at(problem, cfg)
                if tried[v]:
                    good.add(v)
    if good == {base[d]}:
        return None
    q = 0
    for v in good | {timed}:
        q = math.gcd(q, v)
    m = min(good)
    if any(not okv for v, okv in tried.items() if v % q == 0 and v >= m):
        return None  # the values that work follow no rule kforge can state
    return m, q


def compile_like_judge(source, prelude, failed):
    """TorchScript `source` compiled as kforge's judge compiles it: after kforge's prelude, with
    `F.x(` as `F_x(`, and `torch.x` the aten builtin x. Unconvertible(failed + the reason) if not."""
    body = re.sub(r"(?<![\w.])F\.(\w+)\s*\(", lambda m: f"F_{m.group(1)}(", source)
    aten = _AtenTorch("torch")
    unit = torch._C.CompilationUnit()
    try:
        unit.define(prelude + "\n" + body, lambda n: aten if n == "torch" else None)
    except Exception as e:
        raise Unconvertible(failed + first_line(e))
    return unit


class Reference:
    """The converted forward() compiled as kforge's judge compiles it (compile_like_judge)."""

    def __init__(self, source, prelude, names):
        self.unit = compile_like_judge(source, prelude,
                                       "the converted reference does not compile as TorchScript: ")
        self.fn = self.unit.find_function("forward")

    def __call__(self, *args):
        return self.fn(*args)


class _AtenTorch(type(torch)):
    """`torch` as TorchScript compiled from a string sees it (LibTorch's native resolver): the aten
    builtins only."""

    def __getattr__(self, name):
        try:  # only the ops: LibTorch's resolver has no torch.float32 (dtypes are written as ints)
            return getattr(torch.ops.aten, name)
        except (AttributeError, RuntimeError):
            raise AttributeError(f"torch.{name} is not an aten builtin")
