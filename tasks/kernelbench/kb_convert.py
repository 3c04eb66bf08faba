"""One KernelBench problem file -> one kforge task (docs/task-format.md, "KernelBench problems").

convert() returns the task's fields; it raises Unconvertible with a one-line reason otherwise.
"""
import inspect
import math
import os
import re

import torch
import torch.fx

import kb_check
import kb_modules
from kb_check import DTYPES, ConfigFailed, Decl, Real
from kb_emit import Emitter
from kb_load import HYPERPARAMETER, Recorder, Sym, Unconvertible, e_dims, e_render, parse_problem, run_module

CPU_CHECK_BYTES = 64 << 20     # configurations the CPU checks: inputs and parameters at most this
CHECK_DIMS_BYTES = 16 << 20    # [check] configurations are kept below this
TIMED_CPU_BYTES = 32 << 20     # the timed sizes are checked on the CPU below this...
TIMED_CPU_MEMORY = 2 << 30     # ...when the Model and reference need no more memory than this


def small(v):
    """A small stand-in for a size that keeps its factors of two: 4096 -> 8, 96 -> 12, 3 -> 3,
    and an odd large one: 8205 -> 17."""
    while v % 2 == 0 and v // 2 >= 8:
        v //= 2
    return v if v <= 64 else 17


class Reference:
    """The converted forward() compiled as kforge's judge compiles it: after kforge's prelude, with
    `F.x(` as `F_x(`, and `torch.x` the aten builtin x."""

    def __init__(self, source, prelude, names):
        body = re.sub(r"(?<![\w.])F\.(\w+)\s*\(", lambda m: f"F_{m.group(1)}(", source)
        aten = _AtenTorch("torch")
        self.unit = torch._C.CompilationUnit()
        try:
            self.unit.define(prelude + "\n" + body, lambda n: aten if n == "torch" else None)
        except Exception as e:
            raise Unconvertible("the converted reference does not compile as TorchScript: " + kb_check._first_line(e))
        self.fn = self.unit.find_function("forward")

    def __call__(self, *args):
        return self.fn(*args)


class _AtenTorch(type(torch)):
    """`torch` as TorchScript compiled from a string sees it (LibTorch's native resolver): the aten
    builtins, and torch's dtypes and other attributes."""

    def __getattr__(self, name):
        if not name.startswith("_"):
            try:
                return getattr(torch.ops.aten, name)
            except (AttributeError, RuntimeError):
                pass
        return getattr(torch, name)


def _init_of_draw(d, what, param):
    """(kind, [Real]) for a Draw; constants get a spread around them so that a kernel cannot
    ignore the tensor (docs/task-format.md)."""
    if d is None or d.kind in ("unknown", "empty"):
        return None
    if d.dtype == torch.bool:
        if d.kind == "randint" and all(isinstance(p, int) for p in d.params) and d.params[1] > d.params[0]:
            lo, hi = int(d.params[0]), int(d.params[1])
            nonzero = (hi - lo) - (1 if lo <= 0 < hi else 0)
            return ("bernoulli", [Real.of(nonzero / (hi - lo))])
        return None
    integer = not (d.dtype.is_floating_point or d.dtype.is_complex)
    if integer != (d.kind == "randint") and d.kind != "const":
        raise Unconvertible(f"{what} holds {DTYPES.get(d.dtype, d.dtype)} values drawn by {d.kind}, "
                            "which kforge's task format cannot draw")
    if d.kind == "const":
        c = float(d.params[0]) if d.params else 0.0
        if integer:
            raise Unconvertible(f"{what} is a constant integer tensor; kforge inputs are drawn")
        lo, hi = (c - abs(c) / 2, c + abs(c) / 2) if c else (-0.2, 0.2)
        return ("uniform", [Real.of(lo), Real.of(hi)])
    if d.kind in ("randn", "rand"):
        return (d.kind, [])
    return (d.kind, [Real.of(p) for p in d.params])


def _estimate(t):
    """An init from a parameter's values when how it was made is unknown: normal(mean, std)."""
    v = t.detach().double().flatten()
    if v.numel() == 0:
        return ("randn", [])
    lo, hi = float(v.min()), float(v.max())
    if lo == hi:
        return ("uniform", [Real.of(lo - abs(lo) / 2 if lo else -0.2), Real.of(hi + abs(hi) / 2 if hi else 0.2)])
    return ("normal", [Real.of(round(float(v.mean()), 6)), Real.of(float(f"{float(v.std()):.3g}"))])


def _docstring(model_cls):
    doc = inspect.getdoc(model_cls) or ""
    line = " ".join(doc.strip().split("\n\n")[0].split())
    return line[:160].rstrip(" .") if line else ""


def convert(path, prelude, prelude_names, device):
    """The task fields of one problem: dict(name=..., summary, reference, dims, check, inputs,
    constraints, notes, checked)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
        source = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Unconvertible("not a Python file: not UTF-8 text")
    except OSError as e:
        raise Unconvertible(f"cannot read: {e.strerror}")
    if "\0" in source:
        raise Unconvertible("not a Python file: it holds NUL bytes")
    tree, constants = parse_problem(source, path)
    timed = dict(constants)
    order = {n: i for i, (n, _) in enumerate(constants)}
    notes = []

    # 1. get_inputs() at small sizes: how each input is drawn, its shape over the constants.
    rec = Recorder(device="meta")
    with rec.active():
        ns = run_module(tree, path, {n: Sym(small(v), ("dim", n)) for n, v in timed.items()})
        try:
            inputs = list(ns["get_inputs"]())
        except Exception as e:
            raise Unconvertible(f"get_inputs() failed: {type(e).__name__}: {kb_check._first_line(e)}")
    # 2. the Model at the timed sizes, on the meta device (no memory), traced by torch.fx.
    rec_model = Recorder(device="meta")
    with rec_model.active():
        ns = run_module(tree, path, {n: Sym(v, ("dim", n)) for n, v in timed.items()})
        try:
            init_inputs = list(ns["get_init_inputs"]())
            if any(isinstance(a, torch.Tensor) for a in init_inputs):
                raise Unconvertible("get_init_inputs() returns a tensor; kforge tasks take tensors only as inputs")
            model = ns["Model"](*init_inputs)
        except Unconvertible:
            raise
        except Exception as e:
            raise Unconvertible(f"building the Model failed: {type(e).__name__}: {kb_check._first_line(e)}")
    model_doc = _docstring(ns["Model"])
    sig = [p for p in inspect.signature(model.forward).parameters.values()]
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig):
        raise Unconvertible("forward() takes *args or **kwargs")
    if len(inputs) > len(sig):
        raise Unconvertible(f"get_inputs() returns {len(inputs)} values but forward() takes {len(sig)}")
    concrete = {}
    for p in sig[len(inputs):]:
        if p.default is inspect.Parameter.empty:
            raise Unconvertible(f"forward() needs '{p.name}', which get_inputs() does not give")
        concrete[p.name] = p.default
    args = []
    for i, (t, p) in enumerate(zip(inputs, sig)):
        what = f"input {i + 1} ('{p.name}')"
        if isinstance(t, float):  # a scalar: a 0-dim float32 input, drawn around its value
            c = float(t)
            lo, hi = (c - abs(c) / 2, c + abs(c) / 2) if c else (-0.2, 0.2)
            args.append(Decl(p.name, torch.float32, [], ("uniform", [Real.of(lo), Real.of(hi)]), scalar=True))
            notes.append(f"{what} is the Python float {c!r}: a 0-dim float32 input drawn from uniform({lo!r}, {hi!r})")
            continue
        if not isinstance(t, torch.Tensor):
            raise Unconvertible(f"{what} is a Python {type(t).__name__}, not a tensor; kforge inputs are tensors")
        d = rec.draw_of(t)
        if t.dtype not in DTYPES:
            raise Unconvertible(f"{what} is {t.dtype}, which kforge's task format has no dtype for")
        init = _init_of_draw(d, what, False)
        if init is None or d.shape is None:
            raise Unconvertible(f"{what} is computed (not a plain torch.randn/rand/randint/normal draw); "
                                "kforge's task format cannot draw it")
        args.append(Decl(p.name, t.dtype, d.shape, init))

    Sym.uses = set()
    try:
        with rec_model.active():
            gm = torch.fx.symbolic_trace(model, concrete_args=concrete or None)
    except Unconvertible:
        raise
    except Exception as e:
        raise Unconvertible(f"torch.fx cannot trace forward() (control flow on tensor values, or an "
                            f"unsupported construct): {type(e).__name__}: {kb_check._first_line(e)}")
    finally:
        baked, Sym.uses = Sym.uses, None
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for n in placeholders[len(inputs):]:
        if n.users:
            raise Unconvertible(f"forward() uses its default argument '{n.target}' as a tensor")
        gm.graph.erase_node(n)

    # 3. which sizes a forward() argument can read: x.size(1) is batch_size...
    readers = {}
    for d in args:
        for axis, e in enumerate(d.shape):
            if e[0] == "dim":
                readers.setdefault(e[1], f"{d.name}.size({axis})")
    hyper = {n for n in timed if HYPERPARAMETER.search(n)}
    missing = set()

    def leaf(dim):
        if dim in hyper:
            return None
        if dim not in readers:
            missing.add(dim)
        return readers.get(dim)

    emitter = Emitter(gm, model, [d.name for d in args], leaf, timed, prelude_names)
    source, forward_args = emitter.emit()
    # Parameters and buffers: after the inputs, in forward()'s order.
    params = []
    for name, t, qual in forward_args[len(args):]:
        owner_name, _, attr = qual.rpartition(".")
        owner = model.get_submodule(owner_name) if owner_name else model
        d = rec_model.draw_of(t)
        shape = d.shape if d is not None and d.shape is not None else [("num", s) for s in t.shape]
        what = f"parameter '{qual}'"
        init = kb_modules.layer_init(owner, attr) if type(owner).__module__.startswith("torch.nn") else None
        if init is not None:
            init = (init[0], [Real(_bound_value(f), f) for f in init[1]])
        else:
            init = _init_of_draw(d, what, True) if d is not None and d.kind != "unknown" else None
        if t.dtype not in DTYPES:
            raise Unconvertible(f"{what} is {t.dtype}, which kforge's task format has no dtype for")
        params.append(Decl(name, t.dtype, shape, init, qualname=qual))
        # Argument names a size can be read from, after the inputs.
        for axis, e in enumerate(shape):
            if e[0] == "dim":
                readers.setdefault(e[1], f"{name}.size({axis})")
    # Sizes only a parameter holds are read from it; sizes no argument holds are written as their
    # values (they cannot vary).
    missing.clear()
    source, again = Emitter(gm, model, [d.name for d in args], leaf, timed, prelude_names).emit()
    assert [a[0] for a in again] == [a[0] for a in forward_args]
    reference = Reference(source, prelude, prelude_names)
    problem = kb_check.Problem(tree, path, timed, args, params, reference, device)

    shape_dims = set()
    for d in args + params:
        for e in d.shape:
            shape_dims |= e_dims(e)
    fixed = {n: "an operation hyperparameter" for n in shape_dims & hyper}
    for n in sorted((baked | missing) & shape_dims):
        fixed.setdefault(n, "forward() uses its value" if n in baked else "no input's shape holds it")

    # Parameters whose init is unknown: estimated from the Model's own values at small sizes.
    base = {n: (timed[n] if n in fixed else small(timed[n])) for n in sorted(shape_dims, key=order.get)}
    if problem.bytes_at(base) > CPU_CHECK_BYTES:
        base = {n: timed[n] for n in base}
    unknown = [d for d in params if d.init is None]
    if unknown:
        try:
            model0, _ = problem.build(base)
        except ConfigFailed as e:
            raise Unconvertible(f"at small sizes ({_fmt(base)}): {e}")
        owned = dict(model0.named_parameters())
        owned.update(dict(model0.named_buffers()))
        for d in unknown:
            d.init = _estimate(owned[d.qualname])
            notes.append(f"the init of '{d.qualname}' is estimated from its values: {_init_text(d.init, str)}")

    # 4. a configuration where the reference matches: small sizes, else the timed ones if cheap.
    limit = CPU_CHECK_BYTES if device == "cpu" else (torch.cuda.get_device_properties(0).total_memory // 8)
    base, why = _find_base(problem, base, timed, shape_dims, limit)
    # 5. each size on its own: which values work (a minimum, a divisor), or it is fixed.
    rules = {}
    for n in sorted(shape_dims, key=order.get):
        if n in fixed:
            continue
        r = kb_check.probe_dim(problem, base, n, limit)
        if r is None:
            fixed[n] = "the Model does not match its reference at other values"
        else:
            rules[n] = r
    variable = [n for n in sorted(shape_dims, key=order.get) if n not in fixed]
    checks, checked = _check_configs(problem, variable, rules, timed, notes)
    if base != {n: timed[n] for n in base} and not checks:
        checks = [{n: base[n] for n in variable}] if variable else []
        checked.append(dict(base))
    timed_checked = False
    timed_limit = TIMED_CPU_BYTES if device == "cpu" else limit
    if problem.bytes_at({}) <= timed_limit:
        try:
            with kb_check.memory_limit(TIMED_CPU_MEMORY if device == "cpu" else None):
                why = problem.try_config({}, check_inputs=False)
        except (ConfigFailed, MemoryError, RuntimeError) as e:
            if not kb_check.out_of_memory(e):
                raise Unconvertible(f"at the timed sizes: {e}")
            why = "memory"
            notes.append(f"not checked against the Model at the timed sizes here (more than {TIMED_CPU_MEMORY >> 30} GB "
                         "of memory); `--device cuda` checks them on a GPU")
        if why and why != "memory":
            raise Unconvertible(f"the converted reference differs from the Model at the timed sizes: {why}")
        timed_checked = why is None
    else:
        notes.append(f"not checked against the Model at the timed sizes here ({problem.bytes_at({}) / 1e6:.0f} MB "
                     "of inputs and parameters); `--device cuda` checks them on a GPU")
    constraints = []
    for n in variable:
        m, q = rules[n]
        if q > 1:
            constraints.append(f"{n} % {q} == 0")
        if m > q:
            constraints.append(f"{n} >= {m}")
    dims = {n: timed[n] for n in variable}
    if not dims:  # kforge tasks need a dim: the first size an input has, held at its value
        for d in args + params:
            named = [e for e in d.shape if e[0] == "dim"]
            if named:
                dims = {named[0][1]: timed[named[0][1]]}
                constraints.append(f"{named[0][1]} == {timed[named[0][1]]}")
                fixed.pop(named[0][1], None)
                break
    return dict(source=source, doc=model_doc, dims=dims, fixed={n: (timed[n], why_) for n, why_ in fixed.items()},
                checks=checks, constraints=constraints, inputs=args + params, notes=notes,
                checked=[_fmt(c) for c in checked], timed_checked=timed_checked, timed=timed)


def _bound_value(f):
    """The value of an init bound written by kb_modules (a text function): evaluated in Python."""
    from kb_load import e_eval

    def value(vals):
        text = f(lambda e: str(e_eval(e, vals)))
        return float(eval(text, {"sqrt": math.sqrt}))
    return value


def _init_text(init, render):
    kind, params = init
    return kind if not params else f"{kind}({', '.join(p.text(render) for p in params)})"


def _fmt(config):
    return ", ".join(f"{k}={v}" for k, v in sorted(config.items())) or "no sizes"


def _find_base(problem, base, timed, shape_dims, limit):
    """A configuration where the reference matches the Model: the small one, else it scaled up
    (pooling and convolutions need room), else the timed sizes; the first that fits `limit` and
    matches."""
    candidates = [base] + [{n: min(timed[n], v * k) for n, v in base.items()} for k in (2, 4, 8, 16, 32, 64)]
    candidates.append({n: timed[n] for n in base})
    tried, model_fails, last = [], False, ""
    for cfg in candidates:
        if cfg in tried or problem.bytes_at(cfg) > limit:
            continue
        tried.append(cfg)
        try:
            why = problem.try_config(cfg, twice=True)
            model_fails = False
        except ConfigFailed as e:
            why, model_fails = str(e), True
        if why is None:
            return cfg, None
        last = f"at {_fmt(cfg)}: {why}"
        if not shape_dims:
            break
    if not tried:
        raise Unconvertible(f"even its smallest sizes move more than {limit / 1e6:.0f} MB; `--device cuda` checks it on a GPU")
    if problem.bytes_at({n: timed[n] for n in base}) > limit:
        last += f"; the timed sizes are too large to check here ({problem.bytes_at({}) / 1e6:.0f} MB): try `--device cuda`"
    if model_fails:
        raise Unconvertible(f"the Model fails at every size checked here, {last}")
    raise Unconvertible("the converted reference differs from the Model " + last)


ODD = [3, 5, 7, 9, 11, 13, 15, 17, 19, 21]
MEDIUM = [37, 31, 41, 29, 43, 23, 47, 53]


def _round_to(v, m, q, top):
    v = max(v, m)
    v = -(-v // q) * q
    return min(v, top)


def _check_configs(problem, variable, rules, timed, notes):
    """[check] configurations: every size at its smallest, small odd sizes, medium ones; each kept
    only where the reference matches the Model."""
    if not variable:
        return [], []
    wanted = [
        {n: _round_to(1, *rules[n], timed[n]) for n in variable},
        {n: _round_to(rules[n][1] * ODD[i % len(ODD)], *rules[n], timed[n]) for i, n in enumerate(variable)},
        {n: _round_to(rules[n][1] * max(1, MEDIUM[i % len(MEDIUM)] // rules[n][1]), *rules[n], timed[n])
         for i, n in enumerate(variable)},
    ]
    out = []
    for cfg in wanted:
        while problem.bytes_at(cfg) > CHECK_DIMS_BYTES:
            big = max(cfg, key=lambda n: cfg[n] if cfg[n] > rules[n][0] else 0)
            if cfg[big] <= rules[big][0]:
                break
            cfg[big] = _round_to(cfg[big] // 2, *rules[big], timed[big])
        if cfg in out or cfg == {n: timed[n] for n in variable} or problem.bytes_at(cfg) > CHECK_DIMS_BYTES:
            continue
        try:
            why = problem.try_config(cfg)
        except ConfigFailed as e:
            why = str(e)
        if why is None:
            out.append(cfg)
        elif cfg is wanted[0] and any(v == 1 for v in cfg.values()):
            wanted.insert(1, {n: _round_to(2, *rules[n], timed[n]) for n in variable})  # size 2 instead
            notes.append(f"check sizes {_fmt(cfg)} left out: {why}")
        else:
            notes.append(f"check sizes {_fmt(cfg)} left out: {why}")
    return out, list(out)


def task_toml(name, path, result, torch_version):
    """The task file's text."""
    dims = result["dims"]
    fixed = {n: v for n, (v, _) in result["fixed"].items()}

    def render(e):
        return e_render(e, lambda n: n if n in dims else None, result["timed"], div="/")

    summary = result["doc"] or f"KernelBench problem {os.path.basename(path)}"
    if fixed:
        summary += " (fixed sizes: " + ", ".join(f"{n}={v}" for n, v in sorted(fixed.items())) + ")"
    lines = [f"# Converted from the KernelBench problem {os.path.basename(path)} by `kforge tasks import-kernelbench`",
             f"# (PyTorch {torch_version}); checked against its Model on: " +
             "; ".join(result["checked"] + (["the timed sizes"] if result["timed_checked"] else []))]
    for n, (v, why) in sorted(result["fixed"].items()):
        lines.append(f"# {n} = {v} cannot vary: {why}")
    for note in result["notes"]:
        lines.append(f"# {note}")
    lines += [f"name = {_q(name)}", f"summary = {_q(summary)}", 'tags = ["kernelbench"]',
              'reference = """', result["source"].replace("\\", "\\\\").replace('"""', '""\\"') + '"""']
    if result["constraints"]:
        lines.append("constraints = [" + ", ".join(_q(c) for c in result["constraints"]) + "]")
    lines += ["", "[dims]"] + [f"{n} = {v}" for n, v in dims.items()]
    for d in result["inputs"]:
        shape = ", ".join(t if t.isdigit() else _q(t) for t in (render(e) for e in d.shape))
        lines += ["", "[[inputs]]", f"name = {_q(d.name)}", f"dtype = {_q(DTYPES[d.dtype])}",
                  f"shape = [{shape}]", f"init = {_q(_init_text(d.init, render))}"]
    if result["checks"]:
        lines += ["", "[check]", "dims = [" + ", ".join(
            "{ " + ", ".join(f"{n} = {v}" for n, v in c.items()) + " }" for c in result["checks"]) + "]"]
    return "\n".join(lines) + "\n"


def _q(s):
    import json
    return json.dumps(s, ensure_ascii=False)
