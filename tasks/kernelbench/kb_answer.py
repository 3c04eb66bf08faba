"""Reads a KernelBench answer without running it: `kforge compile/verify --kernelbench` run this,
confined, with any Python 3 (no PyTorch needed: it only parses).

    python3 -I -S -B kb_answer.py ANSWER.py

A KernelBench answer is a Python file whose `ModelNew(nn.Module)` calls host functions of a CUDA
extension built with torch.utils.cpp_extension.load_inline(). This reads it with `ast` (never
`exec`, never `import`): the extension's CUDA source (`cuda_sources=`, a string or a module-level
string constant), its `functions=[...]`, and what ModelNew.forward() passes to each function. It
prints one JSON line on stdout:

  {"ok": true, "extension": {"name", "line", "functions": [...], "pieces": [{"text", "line"}],
                             "flags": [...]},
   "model": {"line", "inputs": [forward()'s parameter names], "steps": [STEP...],
             "returns": [NAME...], "return_line"}}
  {"ok": false, "line": N or null, "reason": "..."}

STEP: {"line", "function", "args": [ARG...], "result": NAME}, in forward()'s order.
ARG: {"input": I} (forward()'s I-th parameter), {"value": NAME} (an earlier step's result),
{"param": "linear.weight"} (a parameter or buffer of ModelNew, by its path), {"int": N},
{"float": X}, {"size": ARG, "dim": D}, {"numel": ARG}.
kforge (compile/src/kernelbench/) maps these to the task's tensors and reads the CUDA host code.
"""
import ast
import json
import sys

LOAD_INLINE = "load_inline"
# Calls on a tensor that leave its values and layout as kforge passes them (contiguous, on the GPU).
SAME_TENSOR = {"contiguous", "cuda"}
# nn modules whose parameters and buffers forward() may pass by attribute (self.linear.weight).
MODULE_TENSORS = {"weight", "bias", "running_mean", "running_var"}


class Refused(Exception):
    """The answer cannot be read as kforge needs it; the message says why, at `line`."""

    def __init__(self, line, reason):
        super().__init__(reason)
        self.line = line


def code(node):
    """The node's source text, short, for messages."""
    try:
        text = ast.unparse(node)
    except Exception:  # ast.unparse is Python 3.9+
        return type(node).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def dotted(node):
    """'torch.utils.cpp_extension.load_inline' for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


# ---- module-level constants -----------------------------------------------------------------


class Module:
    """The module's top-level assignments of constants: strings (the CUDA source, kept as pieces
    with the line each starts on), lists of strings (functions=) and numbers."""

    def __init__(self, tree):
        self.values = {}  # name -> ast node assigned (the last assignment wins, as when it runs)
        for node in tree.body:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.values[target.id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                self.values[node.target.id] = node.value

    def pieces(self, node, what, depth=0):
        """A string expression as [{"text", "line"}]: constants, names of constants, `+`."""
        if depth > 32:
            raise Refused(node.lineno, f"{what} nests names too deeply")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [{"text": node.value, "line": node.lineno}]
        if isinstance(node, ast.Name) and node.id in self.values:
            return self.pieces(self.values[node.id], what, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.pieces(node.left, what, depth + 1) + self.pieces(node.right, what, depth + 1)
        if isinstance(node, (ast.List, ast.Tuple)):  # load_inline joins a list with newlines
            out = []
            for i, e in enumerate(node.elts):
                if i:
                    out.append({"text": "\n", "line": None})
                out += self.pieces(e, what, depth + 1)
            return out
        if isinstance(node, ast.JoinedStr):
            raise Refused(node.lineno, f"{what} is an f-string; kforge reads string constants only")
        if isinstance(node, ast.Name):
            raise Refused(node.lineno, f"{what} names `{node.id}`, which is not a module-level "
                          "string constant of the answer")
        raise Refused(node.lineno, f"{what} is computed (`{code(node)}`); kforge reads string "
                      "constants, names of them and `+` only, without running the answer")

    def names(self, node, what):
        """functions=: a list, tuple or dict of string constants, or the name of one."""
        if isinstance(node, ast.Name) and node.id in self.values:
            return self.names(self.values[node.id], what)
        if isinstance(node, ast.Dict):
            node = ast.List(elts=node.keys, ctx=ast.Load(), lineno=node.lineno)
        if isinstance(node, (ast.List, ast.Tuple)):
            out = []
            for e in node.elts:
                if not (isinstance(e, ast.Constant) and isinstance(e.value, str)):
                    raise Refused(node.lineno, f"{what} holds `{code(e)}`, not a string constant")
                out.append(e.value)
            return out
        raise Refused(node.lineno, f"{what} is `{code(node)}`; kforge needs a list of the "
                      "function names")

    def number(self, node):
        """An int/float/bool constant (or the name of a module-level one), else None."""
        if isinstance(node, ast.Name) and node.id in self.values:
            node = self.values[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self.number(node.operand)
            return None if v is None else -v
        if isinstance(node, ast.Constant) and type(node.value) in (int, float, bool):
            return node.value
        return None


# ---- the extension ----------------------------------------------------------------------------


def is_load_inline(node):
    if not isinstance(node, ast.Call):
        return False
    name = dotted(node.func)
    return name is not None and name.split(".")[-1] == LOAD_INLINE


def extension(call, module):
    """load_inline(...)'s arguments, as the JSON's "extension"."""
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    # load_inline(name, cpp_sources, cuda_sources=None, functions=None, ...) by position too.
    for i, key in enumerate(["name", "cpp_sources", "cuda_sources", "functions"]):
        if i < len(call.args):
            kw.setdefault(key, call.args[i])
    if "cuda_sources" not in kw:
        raise Refused(call.lineno, "load_inline() has no cuda_sources: no CUDA for kforge to judge")
    if "functions" not in kw:
        raise Refused(call.lineno, "load_inline() has no functions=[...]: kforge finds the host "
                      "functions ModelNew calls through that list")
    pieces = module.pieces(kw["cuda_sources"], "cuda_sources")
    name = kw.get("name")
    flags = []
    for key in ("extra_cuda_cflags", "extra_cflags", "extra_ldflags"):
        if key in kw:
            try:
                flags += [f for f in module.names(kw[key], key) if f.strip()]
            except Refused:
                flags.append(f"{key}={code(kw[key])}")
    return {"name": name.value if isinstance(name, ast.Constant) else None, "line": call.lineno,
            "functions": module.names(kw["functions"], "functions"), "pieces": pieces,
            "flags": flags}


# ---- ModelNew ---------------------------------------------------------------------------------


def method(cls, name):
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


def self_attribute(node):
    """'a' for self.a, 'a.b' for self.a.b, else None."""
    name = dotted(node)
    if name is None or not name.startswith("self.") or name.count(".") < 1:
        return None
    return name[len("self."):]


def body_without_docstring(fn):
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return body


class Model:
    """What ModelNew's __init__ sets up: which attributes are the extension (or one of its
    functions), which hold parameters, buffers, modules or numbers."""

    def __init__(self, cls, module, extensions):
        self.cls, self.module, self.extensions = cls, module, extensions
        self.ext_attrs = set()  # self.x is the extension
        self.fn_attrs = {}      # self.x is the extension's function f
        self.tensors = set()    # self.x holds a parameter or a buffer
        self.modules = {}       # self.x is nn.Module type name
        self.numbers = {}       # self.x is a number
        self.unknown = {}       # self.x = something else: line
        self.defaults = {}
        init = method(cls, "__init__")
        if init is not None:
            self.read_init(init)

    def read_init(self, init):
        args = init.args
        for a, d in zip(args.args[len(args.args) - len(args.defaults):], args.defaults):
            v = self.module.number(d)
            if v is not None:
                self.defaults[a.arg] = v
        for node in ast.walk(init):
            if isinstance(node, ast.Call) and dotted(node.func) == "self.register_buffer":
                if node.args and isinstance(node.args[0], ast.Constant):
                    self.tensors.add(str(node.args[0].value))
            if not isinstance(node, ast.Assign):
                continue
            for target in node.targets:
                attr = self_attribute(target)
                if attr is not None and "." not in attr:
                    self.assign(attr, node.value)

    def assign(self, attr, value):
        name = dotted(value)
        if is_load_inline(value):
            self.ext_attrs.add(attr)
            self.extensions.setdefault("self." + attr, value)
        elif isinstance(value, ast.Name) and value.id in self.extensions:
            self.ext_attrs.add(attr)
        elif name and "." in name and name.rsplit(".", 1)[0] in self.extensions:
            self.fn_attrs[attr] = name.rsplit(".", 1)[1]
        elif isinstance(value, ast.Call) and (dotted(value.func) or "").split(".")[-1] == "Parameter":
            self.tensors.add(attr)
        elif isinstance(value, ast.Call) and (dotted(value.func) or "").split(".")[0] in ("nn", "torch"):
            self.modules[attr] = dotted(value.func).split(".")[-1]
        else:
            v = self.module.number(value)
            if v is None and isinstance(value, ast.Name):
                v = self.defaults.get(value.id)
            if v is not None:
                self.numbers[attr] = v
            else:
                self.unknown[attr] = value.lineno


class Forward:
    """ModelNew.forward() as steps: each a call of one of the extension's functions."""

    def __init__(self, model, module, extensions):
        self.model, self.module, self.extensions = model, module, extensions
        self.used = None  # the extension forward() calls (its key in `extensions`)
        self.steps, self.locals, self.returns, self.return_line = [], {}, [], None

    def read(self, fn):
        args = fn.args
        if args.vararg or args.kwarg or args.kwonlyargs:
            raise Refused(fn.lineno, "forward() takes *args, **kwargs or keyword-only arguments; "
                          "kforge maps forward()'s parameters to the task's inputs by position")
        self.inputs = [a.arg for a in args.args[1:]]
        for stmt in body_without_docstring(fn):
            self.statement(stmt)
        if self.return_line is None:
            raise Refused(fn.lineno, "forward() returns nothing kforge can follow")

    def statement(self, stmt):
        if self.return_line is not None:
            raise Refused(stmt.lineno, "code after forward()'s return")
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            self.assign(stmt.targets[0].id, stmt.value, stmt.lineno)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
            self.assign(stmt.target.id, stmt.value, stmt.lineno)
        elif isinstance(stmt, ast.Return) and stmt.value is not None:
            values = stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]
            for i, v in enumerate(values):
                name = f"__return{i}__"
                self.assign(name, v, stmt.lineno)
                self.returns.append(self.locals[name]["value"])
            self.return_line = stmt.lineno
        elif isinstance(stmt, ast.Pass):
            pass
        else:
            raise Refused(stmt.lineno, f"forward() runs `{code(stmt)}`; kforge converts a forward() "
                          "whose statements are calls of the extension's functions "
                          "(`x = self.ext.f(a, b)`, `return self.ext.f(x)`)")

    def assign(self, name, value, line):
        call_fn = self.function_called(value)
        if call_fn is not None:
            args = [self.argument(a, line) for a in value.args]
            if value.keywords:
                raise Refused(line, f"forward() passes keyword arguments to {call_fn}(); the "
                              "extension's functions take theirs by position")
            result = f"{name}#{len(self.steps)}"
            self.steps.append({"line": line, "function": call_fn, "args": args, "result": result})
            self.locals[name] = {"value": result}
            return
        a = self.argument(value, line)
        if "value" not in a:
            raise Refused(line, f"forward() computes `{code(value)}` in Python; kforge converts "
                          "a forward() that only calls the extension's functions")
        self.locals[name] = a

    def function_called(self, node):
        """The extension function `node` calls (self.ext.f(...), ext.f(...), self.f(...)), or
        None when it calls something else. Refuses a call of another extension."""
        if not isinstance(node, ast.Call):
            return None
        f = node.func
        if isinstance(f, ast.Attribute):
            owner = f.value
            key = None
            attr = self_attribute(owner)
            if attr is not None and attr in self.model.ext_attrs:
                key = self.extension_of_attr(attr)
            elif isinstance(owner, ast.Name) and owner.id in self.extensions:
                key = owner.id
            if key is not None:
                self.use(key, node.lineno)
                return f.attr
            attr = self_attribute(f)
            if attr is not None and attr in self.model.fn_attrs:
                self.use(self.extension_of_fn(attr), node.lineno)
                return self.model.fn_attrs[attr]
        if isinstance(f, ast.Name) and f.id in self.module.values:
            target = dotted(self.module.values[f.id])
            if target and target.rsplit(".", 1)[0] in self.extensions:
                self.use(target.rsplit(".", 1)[0], node.lineno)
                return target.rsplit(".", 1)[1]
        return None

    def extension_of_attr(self, attr):
        if "self." + attr in self.extensions:
            return "self." + attr
        for node in ast.walk(self.model.cls):
            if isinstance(node, ast.Assign) and any(self_attribute(t) == attr for t in node.targets):
                if isinstance(node.value, ast.Name) and node.value.id in self.extensions:
                    return node.value.id
        return None

    def extension_of_fn(self, attr):
        for node in ast.walk(self.model.cls):
            if isinstance(node, ast.Assign) and any(self_attribute(t) == attr for t in node.targets):
                name = dotted(node.value)
                if name:
                    return name.rsplit(".", 1)[0]
        return None

    def use(self, key, line):
        if key is None or key not in self.extensions:
            raise Refused(line, "forward() calls an extension kforge cannot find")
        if self.used is not None and self.used != key:
            raise Refused(line, f"forward() calls two extensions ({self.used} and {key}); kforge "
                          "judges one CUDA source: put the kernels in one load_inline()")
        self.used = key

    def argument(self, node, line):
        if isinstance(node, ast.Name):
            if node.id in self.inputs:
                return {"input": self.inputs.index(node.id)}
            if node.id in self.locals:
                return self.locals[node.id]
            v = self.module.number(node)
            if v is not None:
                return self.number(v)
            raise Refused(line, f"forward() passes `{node.id}`, which is neither one of its "
                          "arguments, an earlier result nor a module-level number")
        v = self.module.number(node)
        if v is not None:
            return self.number(v)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method_name = node.func.attr
            if method_name in SAME_TENSOR and not node.args and not node.keywords:
                return self.argument(node.func.value, line)
            if method_name == "numel" and not node.args:
                return {"numel": self.argument(node.func.value, line)}
            if method_name == "size" and len(node.args) == 1:
                d = self.module.number(node.args[0])
                if isinstance(d, int):
                    return {"size": self.argument(node.func.value, line), "dim": d}
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            index = node.slice
            if isinstance(index, getattr(ast, "Index", ())):  # Python 3.8 wraps it
                index = index.value
            d = self.module.number(index)
            if isinstance(d, int):
                return {"size": self.argument(node.value.value, line), "dim": d}
        attr = self_attribute(node)
        if attr is not None:
            head = attr.split(".")[0]
            if attr in self.model.numbers:
                return self.number(self.model.numbers[attr])
            if attr in self.model.tensors:
                return {"param": attr}
            if head in self.model.modules and attr.count(".") == 1 and attr.split(".")[1] in MODULE_TENSORS:
                return {"param": attr}
            if head in self.model.unknown:
                raise Refused(line, f"forward() passes self.{attr}, which __init__ sets at line "
                              f"{self.model.unknown[head]} to a value kforge cannot read "
                              "without running it")
            raise Refused(line, f"forward() passes self.{attr}, which __init__ does not set to a "
                          "parameter, a buffer or a number")
        raise Refused(line, f"forward() computes `{code(node)}` in Python; kforge converts a "
                      "forward() that only calls the extension's functions")

    @staticmethod
    def number(v):
        if isinstance(v, bool):
            return {"int": int(v)}
        return {"int": v} if isinstance(v, int) else {"float": v}


# ---- the answer -------------------------------------------------------------------------------


def read_answer(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise Refused(None, f"not UTF-8 text ({e})")
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        raise Refused(e.lineno, f"not Python kforge can parse: {e.msg}")
    module = Module(tree)
    extensions = {}  # key ("name" or "self.attr") -> the load_inline call
    for node in tree.body:
        if isinstance(node, ast.Assign) and is_load_inline(node.value):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    extensions[target.id] = node.value
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    if cls is None:
        raise Refused(None, "no `class ModelNew` at the top level: a KernelBench answer defines "
                      "ModelNew(nn.Module)")
    model = Model(cls, module, extensions)
    if not extensions:
        other = next((n for n in ast.walk(tree) if is_load_inline(n)), None)
        if other is not None:
            raise Refused(other.lineno, "load_inline() is called where kforge cannot follow it; "
                          "assign its result to a module-level name or to self.NAME in __init__")
        loads = next((n for n in ast.walk(tree) if isinstance(n, ast.Call) and
                      (dotted(n.func) or "").split(".")[-1] == "load"), None)
        if loads is not None:
            raise Refused(loads.lineno, "the CUDA is built with cpp_extension.load() from files; "
                          "kforge reads load_inline()'s cuda_sources only")
        raise Refused(None, "no load_inline(...) call: kforge converts answers whose CUDA is "
                      "compiled with torch.utils.cpp_extension.load_inline")
    fwd = method(cls, "forward")
    if fwd is None:
        raise Refused(cls.lineno, "ModelNew has no forward()")
    forward = Forward(model, module, extensions)
    forward.read(fwd)
    if not forward.steps:
        raise Refused(fwd.lineno, "forward() calls none of the extension's functions")
    ext = extension(extensions[forward.used], module)
    for step in forward.steps:
        if step["function"] not in ext["functions"]:
            raise Refused(step["line"], f"forward() calls {step['function']}(), which is not in "
                          f"load_inline()'s functions={ext['functions']}")
    return {"ok": True, "extension": ext,
            "model": {"line": cls.lineno, "inputs": forward.inputs, "steps": forward.steps,
                      "returns": forward.returns, "return_line": forward.return_line}}


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: kb_answer.py ANSWER.py\n")
        return 2
    try:
        result = read_answer(sys.argv[1])
    except Refused as e:
        result = {"ok": False, "line": e.line, "reason": str(e)}
    except RecursionError:
        result = {"ok": False, "line": None, "reason": "the answer nests too deeply to parse"}
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
