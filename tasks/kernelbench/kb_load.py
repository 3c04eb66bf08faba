"""Loading a KernelBench problem file.

A problem is a Python module with `class Model(nn.Module)`, `get_inputs()`, `get_init_inputs()`
and module-level size constants (`batch_size = 16`). This file finds the constants and re-runs the
module with chosen values for them: a `Sym`, an int that remembers its expression over the
constants, makes every shape computed from them an expression (kb_record.py notes the shapes and
distributions of the tensors made).
"""
import ast
import re


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
    return _rendered(e, leaf, values, div)[0]


def _unit_free(e):
    """`e` without its multiplications and divisions by 1 at the top: (a + b) * 1 is a + b."""
    while e[0] in ("*", "//") and (e[2] == ("num", 1) or (e[0] == "*" and e[1] == ("num", 1))):
        e = e[1] if e[2] == ("num", 1) else e[2]
    return e


def _rendered(e, leaf, values, div):
    """(text, precedence) of `e`: the precedence of what the text is at its top (an operator's, 3
    for a negation or a negative number, 9 for a name or a number), for its parent's parentheses."""
    if not any(leaf(d) is not None for d in e_dims(e)):
        v = e_eval(e, values)
        return str(v), (3 if v < 0 else 9)
    e = _unit_free(e)
    op = e[0]
    if op == "dim":
        return leaf(e[1]), 9
    if op == "neg":
        inner, p = _rendered(e[1], leaf, values, div)
        return "-" + (f"({inner})" if p <= 3 else inner), 3
    parts = []
    for i, a in enumerate(e[1:]):
        t, p = _rendered(a, leaf, values, div)
        if p < PREC[op] or (i == 1 and p == PREC[op] and op in ("-", "//", "%")) or (p == 3 and i == 1):
            t = f"({t})"
        parts.append(t)
    return f" {div if op == '//' else op} ".join(parts), PREC[op]


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
    def __copy__(self): return self  # a copied module keeps its sizes' expressions
    def __deepcopy__(self, memo): return self


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
                if ev is not None and ev > 1:  # a 1 in a shape tuple is a broadcast dim, not a size
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
        from kb_compat import explain  # a module or a torch function this Python lacks
        raise Unconvertible(explain(e) or f"running the module failed: {type(e).__name__}: {e}")
    return ns
