"""kforge's KernelBench importer: `kforge tasks import-kernelbench` runs this with the Python that
has PyTorch (docs/task-format.md, "KernelBench problems").

    python3 kernelbench_import.py --prelude PRELUDE.ts [--device cpu|cuda] PROBLEM.py...

For each problem it prints one JSON line: {"file", "ok": true, "toml", "notes", ...} or
{"file", "ok": false, "reason"}. The first line describes this Python: {"python", "torch"}.
Without PyTorch it prints {"error": "no_torch", ...} and exits 3.
"""
import json
import os
import re
import signal
import sys
import warnings

TIME_LIMIT = 300  # seconds per problem


class TimeLimit(BaseException):
    """A problem ran past TIME_LIMIT (a BaseException, so no `except Exception` swallows it)."""


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def task_name(path, taken):
    stem = os.path.splitext(os.path.basename(path))[0]
    name = re.sub(r"[^0-9A-Za-z]+", "_", stem).strip("_").lower() or "problem"
    if name[0].isdigit():
        name = "kb_" + name
    base, k = name, 1
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def main(argv):
    args, files, prelude_path, device = list(argv), [], None, "cpu"
    while args:
        a = args.pop(0)
        if a == "--prelude":
            prelude_path = args.pop(0)
        elif a == "--device":
            device = args.pop(0)
        else:
            files.append(a)
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install
        emit({"error": "no_torch", "python": sys.executable, "detail": f"{type(e).__name__}: {e}"})
        return 3
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import kb_convert
    import kb_toml
    from kb_load import Unconvertible

    warnings.filterwarnings("ignore")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    emit({"python": sys.executable, "torch": torch.__version__, "device": device})
    if device == "cuda" and not torch.cuda.is_available():
        emit({"error": "no_cuda", "detail": f"PyTorch {torch.__version__} in {sys.executable} sees no CUDA GPU"})
        return 3
    with open(prelude_path) as f:
        prelude = f.read()
    prelude_names = set(re.findall(r"\ndef F_(\w+)\(", prelude))
    taken = set()

    def on_alarm(*_):
        raise TimeLimit()
    signal.signal(signal.SIGALRM, on_alarm)
    for path in files:
        name = task_name(path, taken)
        signal.alarm(TIME_LIMIT)
        try:
            r = kb_convert.convert(path, prelude, prelude_names, device)
            emit({"file": path, "ok": True, "name": name, "toml": kb_toml.task_toml(name, path, r, torch.__version__),
                  "dims": r["dims"], "fixed": {n: v for n, (v, _) in r["fixed"].items()},
                  "checked": r["checked"], "timed_checked": r["timed_checked"], "notes": r["notes"]})
        except Unconvertible as e:
            emit({"file": path, "ok": False, "name": name, "reason": str(e)})
        except TimeLimit:
            emit({"file": path, "ok": False, "name": name, "reason": f"took more than {TIME_LIMIT} s to convert and check"})
        except RecursionError:
            emit({"file": path, "ok": False, "name": name, "reason": "the Model nests too deeply to trace"})
        except Exception as e:  # a bug in this importer: reported as one, the other problems go on
            import traceback
            where = traceback.extract_tb(e.__traceback__)[-1]
            emit({"file": path, "ok": False, "name": name, "internal": True,
                  "reason": f"kforge's importer failed ({type(e).__name__}: {e} at "
                            f"{os.path.basename(where.filename)}:{where.lineno})"})
        finally:
            signal.alarm(0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
