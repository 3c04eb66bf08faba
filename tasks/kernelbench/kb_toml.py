"""A converted problem as a kforge task file (docs/task-format.md)."""
import json
import os

from kb_check import DTYPES
from kb_load import e_render


def init_text(init, render):
    kind, params = init
    return kind if not params else f"{kind}({', '.join(p.text(render) for p in params)})"


# kforge's limits on a task file (tasks/src/task.cpp; docs/task-format.md, "Rules"): a file over
# them would not load, so a problem whose task would break one is not converted.
MAX_TASK_FILE_BYTES = 1 << 20
MAX_REFERENCE_BYTES = 32 * 1024
MAX_REFERENCE_LINES = 1000
MAX_REFERENCE_LINE_CHARS = 1000
MAX_REFERENCE_DEPTH = 32


def reference_problem(ref):
    """Why the reference breaks kforge's limits, as task.cpp's reference_problem() says it, or None."""
    data = ref.encode()
    if len(data) > MAX_REFERENCE_BYTES:
        return f"{len(data)} bytes; a reference may have at most {MAX_REFERENCE_BYTES}"
    lines = ref.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) > MAX_REFERENCE_LINES:
        return f"{len(lines)} lines; a reference may have at most {MAX_REFERENCE_LINES}"
    depth = 0
    for number, line in enumerate(lines, 1):
        if len(line.encode()) > MAX_REFERENCE_LINE_CHARS:
            return f"line {number} has {len(line.encode())} characters; the limit is {MAX_REFERENCE_LINE_CHARS}"
        quote, i = None, 0
        while i < len(line):
            c = line[i]
            if quote:
                if c == "\\":
                    i += 1
                elif c == quote:
                    quote = None
            elif c in "\"'":
                quote = c
            elif c == "#":
                break
            elif c in "([{":
                depth += 1
                if depth > MAX_REFERENCE_DEPTH:
                    return f"brackets nested more than {MAX_REFERENCE_DEPTH} levels deep (line {number})"
            elif c in ")]}" and depth > 0:
                depth -= 1
            i += 1
    return None


def task_toml(name, path, result, torch_version):
    """The task file's text; Unconvertible where kforge's loader would refuse it."""
    from kb_load import Unconvertible
    why = reference_problem(result["source"])
    if why:
        done = (result.get("compacted") or {}).get("done")
        raise Unconvertible(f"the converted reference is too large for a kforge task: {why} "
                            "(kforge's limits, docs/task-format.md)" +
                            (f", even written compactly ({', '.join(done)})" if done else ""))
    text = _task_toml(name, path, result, torch_version, with_original=True)
    if len(text.encode()) > MAX_TASK_FILE_BYTES:  # the original problem's source, as comments, goes
        text = _task_toml(name, path, result, torch_version, with_original=False)
    if len(text.encode()) > MAX_TASK_FILE_BYTES:
        raise Unconvertible(f"the task file would be {len(text.encode())} bytes; a task file may have at most "
                            f"{MAX_TASK_FILE_BYTES} (kforge's limits, docs/task-format.md)")
    return text


def _task_toml(name, path, result, torch_version, with_original):
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
    if with_original:
        lines.append("# The original problem, for reading:")
        lines += [f"#   {line}".rstrip() for line in result["original"].splitlines()]
    else:
        lines.append(f"# The original problem ({os.path.basename(path)}) is too large to keep here.")
    lines += [f"name = {_q(name)}", f"summary = {_q(summary)}", 'tags = ["kernelbench"]',
              'reference = """', result["source"].replace("\\", "\\\\").replace('"""', '""\\"') + '"""']
    if result["constraints"]:
        lines.append("constraints = [" + ", ".join(_q(c) for c in result["constraints"]) + "]")
    lines += ["", "[dims]"] + [f"{n} = {v}" for n, v in dims.items()]
    for d in result["inputs"]:
        shape = ", ".join(t if t.isdigit() else _q(t) for t in (render(e) for e in d.shape))
        lines += ["", "[[inputs]]", f"name = {_q(d.name)}", f"dtype = {_q(DTYPES[d.dtype])}",
                  f"shape = [{shape}]", f"init = {_q(init_text(d.init, render))}"]
        if d.transform_text is not None:  # a computed input (kb_inputs.py)
            if d.draw_dtype is not None:
                lines.append(f"draw_dtype = {_q(DTYPES[d.draw_dtype])}")
            lines.append(f"transform = {_q(d.transform_text)}")
            for e in d.draws:
                shape = ", ".join(t if t.isdigit() else _q(t) for t in (render(x) for x in e.shape))
                lines += ["[[inputs.draws]]", f"name = {_q(e.name)}", f"dtype = {_q(DTYPES[e.dtype])}",
                          f"shape = [{shape}]", f"init = {_q(init_text(e.init, render))}"]
    if result["checks"]:
        lines += ["", "[check]", "dims = [" + ", ".join(
            "{ " + ", ".join(f"{n} = {v}" for n, v in c.items()) + " }" for c in result["checks"]) + "]"]
    return "\n".join(lines) + "\n"


def _q(s):
    return json.dumps(s, ensure_ascii=False)
