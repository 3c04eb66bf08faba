"""One KernelBench problem file -> one kforge task (docs/task-format.md, "KernelBench problems").

convert() returns the task's fields; it raises Unconvertible with a one-line reason otherwise.
"""
import ast
import inspect
import math

import torch
import torch.fx

import kb_check
import kb_compat
import kb_inputs
import kb_modules
import kb_sizes
import kb_toml
import kb_trace
from kb_check import DTYPES, ConfigFailed, Decl, Real, first_line
from kb_emit import Emitter
from kb_load import HYPERPARAMETER, Sym, Unconvertible, e_dims, e_eval, parse_problem, run_module
from kb_record import Recorder

CPU_CHECK_BYTES = 64 << 20     # configurations the CPU checks: inputs and parameters at most this
TIMED_CPU_BYTES = 32 << 20     # the timed sizes are checked on the CPU below this...
TIMED_CPU_MEMORY = 2 << 30     # ...when the Model and reference need no more memory than this


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


def _plain_init(rec, t):
    """The init of a tensor drawn as kforge draws (a plain draw the Recorder followed), else None."""
    d = rec.draw_of(t)
    if d is None or d.shape is None or t.dtype not in DTYPES:
        return None
    try:
        return _init_of_draw(d, "", False)
    except Unconvertible:
        return None


def _estimate(t):
    """An init from a parameter's values when how it was made is unknown: normal(mean, std)."""
    v = t.detach().double().flatten()
    if v.numel() == 0:
        return ("randn", [])
    if not t.is_floating_point():
        raise Unconvertible("an integer parameter or buffer is made in a way kforge cannot follow")
    lo, hi = float(v.min()), float(v.max())
    if lo == hi or v.numel() == 1:
        return ("uniform", [Real.of(lo - abs(lo) / 2 if lo else -0.2), Real.of(hi + abs(hi) / 2 if hi else 0.2)])
    return ("normal", [Real.of(round(float(v.mean()), 6)), Real.of(float(f"{float(v.std()):.3g}"))])


def _docstring(model_cls):
    # The class's own docstring only: inspect.getdoc falls back to a base class's, and every
    # Model without one got nn.Module's ("Base class for all neural network modules").
    own = model_cls.__dict__.get("__doc__")
    doc = inspect.cleandoc(own) if isinstance(own, str) else ""
    line = " ".join(doc.strip().split("\n\n")[0].split()).rstrip(" .")
    if len(line) > 200:  # a summary is one line: cut at a word
        line = line[:200].rsplit(" ", 1)[0] + "..."
    return line


def _literal_sizes(tree):
    """The module's `name = <int>` assignments that stayed literal (0 and negatives are no sizes)."""
    out = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            v = stmt.value
            if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub) and isinstance(v.operand, ast.Constant):
                if type(v.operand.value) is int:
                    out.append((stmt.targets[0].id, -v.operand.value))
            elif isinstance(v, ast.Constant) and type(v.value) is int:
                out.append((stmt.targets[0].id, v.value))
    return out


class Traced:
    """A problem loaded and its Model traced (trace_problem()): what convert() and kb_model.py
    build on."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def trace_problem(path, prelude, device, whole_model=False):
    """Steps 1 and 2 of convert(): the problem's inputs (how each is drawn, its shape over the size
    constants) and its Model at the timed sizes on the meta device, traced by torch.fx. With
    `whole_model` (kforge model: the graph runs with the Model's own buffers) a buffer computed in a
    way a reference cannot write stays the Model's, and the chains reading it are not written."""
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
    original = source
    kb_compat.install()  # F.rms_norm and co. where this PyTorch lacks them
    tree, constants = parse_problem(source, path)
    timed = dict(constants)
    order = {n: i for i, (n, _) in enumerate(constants)}
    notes = []

    # 1. get_inputs() at small sizes: how each input is drawn, its shape over the constants.
    rec, tracer = Recorder(device="meta"), kb_inputs.Tracer()  # the tracer: computed inputs
    with rec.active(), tracer:
        ns = run_module(tree, path, {n: Sym(kb_sizes.small(v), ("dim", n)) for n, v in timed.items()})
        try:
            inputs, local_names = kb_inputs.call_noting_locals(ns["get_inputs"])
            inputs = list(inputs)
        except Exception as e:
            raise Unconvertible(kb_compat.explain(e) or f"get_inputs() failed: {type(e).__name__}: {first_line(e)}")
    # 2. the Model at the timed sizes, on the meta device (no memory), traced by torch.fx.
    rec_model, init_tracer = Recorder(device="meta"), kb_inputs.Tracer()  # the tracer: computed buffers
    with rec_model.active():
        ns = run_module(tree, path, {n: Sym(v, ("dim", n)) for n, v in timed.items()})
        try:
            init_inputs = list(ns["get_init_inputs"]())
            if any(isinstance(a, torch.Tensor) for a in init_inputs):
                raise Unconvertible("get_init_inputs() returns a tensor; kforge tasks take tensors only as inputs")
            with init_tracer:
                model = ns["Model"](*init_inputs)
        except Unconvertible:
            raise
        except Exception as e:
            raise Unconvertible(kb_compat.explain(e) or f"building the Model failed: {type(e).__name__}: {first_line(e)}")
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
        if 0 in t.shape:
            zero = ", ".join(f"{n} = {v}" for n, v in _literal_sizes(tree) if v <= 0)
            raise Unconvertible(f"{what} has an empty dimension (shape {list(t.shape)}): " +
                                (f"the size constant {zero} must be at least 1" if zero
                                 else "kforge tasks need at least one element"))
        d = rec.draw_of(t)
        if t.dtype not in DTYPES:
            raise Unconvertible(f"{what} is {t.dtype}, which kforge's task format has no dtype for")
        init = _plain_init(rec, t)
        if init is None:  # computed from draws: a draw and a transform (kb_inputs.py)
            args.append(kb_inputs.declare(t, p.name, what, rec, tracer, _plain_init, prelude, timed, local_names))
            continue
        args.append(Decl(p.name, t.dtype, d.shape, init))
    why = kb_inputs.drawing_problem(args, inputs, tracer)
    if why:
        raise Unconvertible(why)
    if any(d.computed is not None for d in args):  # the transforms give what get_inputs() computes
        def run_inputs():
            values = {n: kb_sizes.small(v) for n, v in timed.items()}
            rec_real, tracer_real = Recorder(), kb_inputs.Tracer()
            with rec_real.active(), tracer_real:
                ns_real = run_module(tree, path, {n: Sym(v, ("dim", n)) for n, v in values.items()})
                torch.manual_seed(0)
                try:
                    real, names = kb_inputs.call_noting_locals(ns_real["get_inputs"])
                except Exception as e:
                    raise Unconvertible(kb_compat.explain(e) or f"get_inputs() failed on the CPU: "
                                        f"{type(e).__name__}: {first_line(e)}")
                return list(real), rec_real, tracer_real, values, names
        kb_inputs.check_against(run_inputs, args, _plain_init, prelude,
                                lambda i: f"input {i + 1} ('{sig[i].name}')")

    # forward()'s arguments as meta tensors at the timed sizes, for the values kb_trace gives.
    traced_inputs = {d.name: (None, None) if d.scalar else
                     (torch.empty([e_eval(e, timed) for e in d.shape], dtype=d.dtype, device="meta"), d.shape)
                     for d in args}

    def shape_of(t):
        d = rec_model.draw_of(t)
        return d.shape if d is not None else None
    Sym.uses = set()
    try:
        with rec_model.active():
            gm = kb_trace.trace(model, traced_inputs, shape_of, concrete_args=concrete or None,
                                random_ok=whole_model)
    except Unconvertible:
        raise
    except Exception as e:
        raise Unconvertible(kb_compat.explain(e) or kb_trace.why_not_traced(e, path))
    finally:
        baked, Sym.uses = Sym.uses, None
    for n in [n for n in gm.graph.nodes if n.op == "placeholder"][len(inputs):]:
        _drop_default_argument(gm, n)
    for q in getattr(gm, "kf_state", ()):
        notes.append(f"forward() keeps self.{q} from one call to the next, but overwrites what it kept from its "
                     "inputs before reading it: the output is a function of the inputs")
    kept = {} if whole_model else None
    for q in kb_inputs.computed_buffers(gm, model, rec_model, init_tracer, kept):
        notes.append(f"'{q}' is computed in the reference as __init__ computes it (it is not an input: a "
                     "drawn one would not be what the Model computes)")
    for q, why in (kept or {}).items():
        notes.append(f"'{q}' is {why}, which kforge cannot write into a problem: the chains reading it are "
                     "profiled but not written as problems")
    return Traced(tree=tree, path=path, original=original, timed=timed, order=order, notes=notes, args=args,
                  inputs=inputs, model=model, model_doc=model_doc, rec_model=rec_model, gm=gm, baked=baked)


def convert(path, prelude, prelude_names, device):
    """The task fields of one problem: dict(name=..., summary, reference, dims, check, inputs,
    constraints, notes, checked)."""
    t = trace_problem(path, prelude, device)
    tree, original, timed, order, notes, args = t.tree, t.original, t.timed, t.order, t.notes, t.args
    model, model_doc, rec_model, gm, baked = t.model, t.model_doc, t.rec_model, t.gm, t.baked

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
    final = Emitter(gm, model, [d.name for d in args], leaf, timed, prelude_names)
    reference_source, again = final.emit()
    assert [a[0] for a in again] == [a[0] for a in forward_args]
    if final.compacted is not None:
        notes.append(f"the reference is written compactly ({', '.join(final.compacted['done'])}): written out "
                     f"step by step, as traced, it is over a task's limits ({final.compacted['straight']})")
    try:
        reference = kb_check.Reference(reference_source, prelude, prelude_names)
    except Unconvertible as e:
        if final.compacted is None:
            raise
        raise Unconvertible(f"the converted reference is too large for a kforge task ({final.compacted['straight']}), "
                            f"and written compactly ({', '.join(final.compacted['done'])}) "
                            f"{str(e).replace('the converted reference ', 'it ', 1)} (a kforge bug)")
    problem = kb_check.Problem(tree, path, timed, args, params, reference, device)

    shape_dims = set()
    for d in args + params + [e for a in args for e in a.draws]:
        for e in d.shape:
            shape_dims |= e_dims(e)
    fixed = {n: "an operation hyperparameter" for n in shape_dims & hyper}
    for n in sorted((baked | missing) & shape_dims):
        fixed.setdefault(n, "forward() uses its value" if n in baked else "no input's shape holds it")
    for d in args:  # a transform holds the timed values of the sizes it uses
        for n in sorted(d.computed.uses & shape_dims if d.computed is not None else ()):
            fixed.setdefault(n, f"the computed input '{d.name}' uses its value")

    # Parameters whose init is unknown: estimated from the Model's own values at small sizes.
    base = {n: (timed[n] if n in fixed else kb_sizes.small(timed[n])) for n in sorted(shape_dims, key=order.get)}
    if problem.bytes_at(base) > CPU_CHECK_BYTES:
        base = {n: timed[n] for n in base}
    unknown = [d for d in params if d.init is None]
    if unknown:
        # The small sizes, else larger ones: a Model may require sizes the small ones break
        # (`assert n_embd % n_head == 0`).
        tries = [base] + [{n: min(timed[n], v * k) for n, v in base.items()} for k in (2, 4, 8, 16)]
        model0, failed = None, None
        for cfg in [c for i, c in enumerate(tries) if c not in tries[:i]]:
            if cfg is not base and problem.bytes_at(cfg) > CPU_CHECK_BYTES:
                continue
            try:
                model0, _ = problem.build(cfg)
                break
            except ConfigFailed as e:
                failed = failed or f"at small sizes ({kb_sizes.fmt(cfg)}): {e}"
        if model0 is None:
            raise Unconvertible(failed)
        owned = dict(model0.named_parameters())
        owned.update(dict(model0.named_buffers()))
        for d in unknown:
            d.init = _estimate(owned[d.qualname])
            notes.append(f"the init of '{d.qualname}' is estimated from its values: {kb_toml.init_text(d.init, str)}")

    # 4. a configuration where the reference matches: small sizes, else the timed ones if cheap.
    limit = CPU_CHECK_BYTES if device == "cpu" else (torch.cuda.get_device_properties(0).total_memory // 8)
    # 5. each size on its own: which values work (a minimum, a divisor), or it is fixed. A size
    # found fixed is held at its timed value and the others probed again from there (sizes the
    # Model ties together, e.g. out_channels a multiple of groups=in_channels).
    while True:
        base = {n: timed[n] if n in fixed else v for n, v in base.items()}
        base, _ = kb_sizes.find_base(problem, base, timed, shape_dims, limit)
        rules, newly = {}, False
        for n in sorted(shape_dims, key=order.get):
            if n in fixed:
                continue
            r = kb_check.probe_dim(problem, base, n, limit)
            if r is None:
                fixed[n] = "the Model runs and matches its reference only at this value (of those tried)"
                newly = newly or base[n] != timed[n]
            else:
                rules[n] = r
        if not newly:
            break
    variable = [n for n in sorted(shape_dims, key=order.get) if n not in fixed]
    checks, checked = kb_sizes.check_configs(problem, variable, rules, timed, notes)
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
    return dict(source=reference_source, original=original, doc=model_doc, dims=dims, fixed={n: (timed[n], why_) for n, why_ in fixed.items()},
                checks=checks, constraints=constraints, inputs=args + params, notes=notes, compacted=final.compacted,
                checked=[kb_sizes.fmt(c) for c in checked], timed_checked=timed_checked, timed=timed)


def _drop_default_argument(gm, placeholder):
    """A forward() argument get_inputs() does not give was traced at its default (torch.fx's
    concrete_args): its placeholder and the guards torch.fx put on it go."""
    doomed, frontier = [], [placeholder]
    while frontier:
        for u in frontier.pop().users:
            if u not in doomed:
                doomed.append(u)
                frontier.append(u)
    guards = ("_assert", "_assert_is_none", "eq")
    if any(u.op != "call_function" or getattr(u.target, "__name__", "") not in guards for u in doomed):
        raise Unconvertible(f"forward() computes with its default argument '{placeholder.target}'")
    for n in reversed(list(gm.graph.nodes)):
        if n in doomed:
            gm.graph.erase_node(n)
    gm.graph.erase_node(placeholder)


def _bound_value(f):
    """The value of an init bound written by kb_modules (a text function): evaluated in Python."""
    from kb_load import e_eval

    def value(vals):
        text = f(lambda e: str(e_eval(e, vals)))
        return float(eval(text, {"sqrt": math.sqrt}))
    return value


