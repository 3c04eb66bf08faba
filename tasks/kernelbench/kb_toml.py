"""A converted problem as a kforge task file (docs/task-format.md)."""
import json
import os

from kb_check import DTYPES
from kb_load import e_render


def init_text(init, render):
    kind, params = init
    return kind if not params else f"{kind}({', '.join(p.text(render) for p in params)})"


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
    lines.append("# The original problem, for reading:")
    lines += [f"#   {line}".rstrip() for line in result["original"].splitlines()]
    lines += [f"name = {_q(name)}", f"summary = {_q(summary)}", 'tags = ["kernelbench"]',
              'reference = """', result["source"].replace("\\", "\\\\").replace('"""', '""\\"') + '"""']
    if result["constraints"]:
        lines.append("constraints = [" + ", ".join(_q(c) for c in result["constraints"]) + "]")
    lines += ["", "[dims]"] + [f"{n} = {v}" for n, v in dims.items()]
    for d in result["inputs"]:
        shape = ", ".join(t if t.isdigit() else _q(t) for t in (render(e) for e in d.shape))
        lines += ["", "[[inputs]]", f"name = {_q(d.name)}", f"dtype = {_q(DTYPES[d.dtype])}",
                  f"shape = [{shape}]", f"init = {_q(init_text(d.init, render))}"]
    if result["checks"]:
        lines += ["", "[check]", "dims = [" + ", ".join(
            "{ " + ", ".join(f"{n} = {v}" for n, v in c.items()) + " }" for c in result["checks"]) + "]"]
    return "\n".join(lines) + "\n"


def _q(s):
    return json.dumps(s, ensure_ascii=False)
