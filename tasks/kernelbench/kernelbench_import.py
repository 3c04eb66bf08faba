"""kforge's KernelBench importer: `kforge tasks import-kernelbench` runs this, confined, with the
Python that has PyTorch (docs/task-format.md, "KernelBench problems"; docs/security.md).

    python3 kernelbench_import.py --reply-fd N --job JOB.json [--layer-fd M]

JOB.json (kforge's): {"prelude": PATH, "device": "cpu"|"cuda", "sys_path": [...],
"problems": [{"name": TASK_NAME, "path": ABSOLUTE_PATH, "file": NAME, "package": {...}}, ...],
"mode": "convert"|"profile"|"check"}. With "profile" or "check" (`kforge model profile`, `kforge
model check`), each problem is a user's model and its result is {"index": I, "ok": true,
"result": {...}} (kb_model.py's profile() or check(), with the problem's "package") instead of a
task.

A problem is Python code: it runs in a process of its own, forked from this one, which holds
nothing but a pipe for its one result. kforge runs this process under Landlock (on the CPU; with
CUDA, whose driver writes beneath /proc/PID/task, it does not, as PIDs differ) and passes its rule
set as fd M: each problem's process enters one more layer of it (landlock_restrict_self), with its
own /proc/PID/task writable, so it
cannot trace this process nor open its descriptors through /proc, even as root, nor (Landlock ABI
6) signal it. Without Landlock, this process only makes itself untraceable (PR_SET_DUMPABLE 0). Only this process writes on fd N (kforge's channel; the
problems' print() goes to a pipe of each problem's own, which this process sends on in order), one
JSON line each:
  {"python", "torch", "device"}         first: this Python
  {"error": "no_torch"|"no_cuda", "detail"}   and exit 3
  {"start": I}                          problem I (0-based, in the job's order) begins
  {"output": I, "text"}                 what its process printed (stdout, stderr), as it comes
  {"output": I, "dropped": N}           N more bytes it printed, past MAX_OUTPUT_BYTES
  {"index": I, "ok": true, "toml", "dims", "fixed", "checked", "timed_checked", "notes"}
  {"index": I, "ok": false, "reason"[, "importer": true]}
  {"done": true}                        last
kforge keeps the deadline: a problem that never ends is killed with this process.
"""
import codecs
import json
import os
import select
import sys

MAX_RESULT_BYTES = 64 << 20
MAX_OUTPUT_BYTES = 1 << 20  # of a problem's output sent to kforge; the rest is counted
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
# the same numbers on every Linux architecture
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446


def prctl(option, value):
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def allow_own_threads(libc, fd):
    """Adds to kforge's rule set: this process may write beneath its own /proc/PID/task (the CUDA
    driver names its threads there: without it, CUDA fails to start, as seen on an H100)."""
    import ctypes

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    abi = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    rights = (1 << 1) | (1 << 2) | (1 << 3) | ((1 << 14) if abi >= 3 else 0)  # write, read, read dir, truncate
    task = os.open("/proc/self/task", os.O_PATH | os.O_CLOEXEC)
    try:
        rule = PathBeneath(rights, task)
        if libc.syscall(SYS_LANDLOCK_ADD_RULE, fd, 1, ctypes.byref(rule), 0) != 0:  # LANDLOCK_RULE_PATH_BENEATH
            raise OSError(ctypes.get_errno(), "landlock_add_rule for /proc/self/task failed")
    finally:
        os.close(task)


def enter_layer(fd):
    """One more Landlock layer, kforge's rule set again, with this process's own threads."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    prctl(PR_SET_NO_NEW_PRIVS, 1)  # set already where kforge confined this helper
    allow_own_threads(libc, fd)
    if libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, fd, 0) != 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    os.close(fd)


class Channel:
    """kforge's channel: unbuffered writes of whole lines, so a fork never copies pending output."""

    def __init__(self, fd):
        self.fd = fd

    def emit(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        while data:
            data = data[os.write(self.fd, data):]


def result_of_child(convert, problem, device, torch):
    """In the forked child: one problem's result (a dict), every failure included."""
    from kb_load import Unconvertible
    try:
        r, toml = convert(problem)
        if toml is None:  # a model's profile or check (kb_model.py)
            return {"ok": True, "result": r}
        return {"ok": True, "toml": toml, "dims": r["dims"],
                "fixed": {n: int(v) for n, (v, _) in r["fixed"].items()},
                "checked": [str(c) for c in r["checked"]], "timed_checked": bool(r["timed_checked"]),
                "notes": [str(n) for n in r["notes"]]}
    except Unconvertible as e:
        return {"ok": False, "reason": str(e)}
    except RecursionError:
        return {"ok": False, "reason": "the Model nests too deeply to trace"}
    except MemoryError:
        return {"ok": False, "reason": "it ran out of memory (kforge's limit for the import)"}
    except (SystemExit, KeyboardInterrupt) as e:
        return {"ok": False, "reason": f"its code raised {type(e).__name__}({e})"}
    except Exception as e:  # an importer bug, or the problem's code breaking the importer
        import traceback
        where = traceback.extract_tb(e.__traceback__)[-1]
        return {"ok": False, "importer": True,
                "reason": f"kforge's importer failed on it ({type(e).__name__}: {e} at "
                          f"{os.path.basename(where.filename)}:{where.lineno})"}


def valid_result(r):
    """The child's result as kforge may read it, or None. The problem's code could have written
    it (only for itself): the fields must have their types."""
    if not isinstance(r, dict) or not isinstance(r.get("ok"), bool):
        return None
    if not r["ok"]:
        return {"ok": False, "reason": str(r.get("reason", ""))[:2000], "importer": bool(r.get("importer", False))}
    if "result" in r:  # kforge reads every field of a model's result defensively
        return {"ok": True, "result": r["result"]} if isinstance(r["result"], dict) else None
    ok = (isinstance(r.get("toml"), str) and isinstance(r.get("dims"), dict)
          and all(isinstance(k, str) for k in r["dims"])
          and isinstance(r.get("fixed"), dict)
          and all(isinstance(k, str) and type(v) is int for k, v in r["fixed"].items())
          and isinstance(r.get("checked"), list) and all(isinstance(c, str) for c in r["checked"])
          and isinstance(r.get("timed_checked"), bool)
          and isinstance(r.get("notes"), list) and all(isinstance(n, str) for n in r["notes"]))
    if not ok:
        return None
    return {k: r[k] for k in ("ok", "toml", "dims", "fixed", "checked", "timed_checked", "notes")}


def describe(status):
    if os.WIFSIGNALED(status):
        import signal
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"killed by {name}" + (" (its CPU-time limit)" if name == "SIGXCPU" else "")
    return f"exited with status {os.WEXITSTATUS(status)}"


class OutputRelay:
    """A problem's output, sent on kforge's channel as it comes: kforge gets it in order with the
    problem's start and result, and shows it labelled."""

    def __init__(self, channel, index):
        self.channel, self.index = channel, index
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.sent = self.dropped = 0

    def take(self, data):
        room = max(0, MAX_OUTPUT_BYTES - self.sent)
        self.dropped += max(0, len(data) - room)
        text = self.decoder.decode(data[:room])
        self.sent += min(room, len(data))
        if text:
            self.channel.emit({"output": self.index, "text": text})

    def finish(self):
        text = self.decoder.decode(b"", final=True)
        if text:
            self.channel.emit({"output": self.index, "text": text})
        if self.dropped:
            self.channel.emit({"output": self.index, "dropped": self.dropped})


def drain(fd, relay, limit):
    """Reads what `fd` holds without waiting (at most `limit` bytes: a process the problem left
    behind may go on printing), then closes it."""
    os.set_blocking(fd, False)
    try:
        while limit > 0:
            data = os.read(fd, 1 << 16)
            if not data:
                break
            relay.take(data)
            limit -= len(data)
    except BlockingIOError:
        pass
    os.close(fd)


def run_problem(channel, layer_fd, convert, problem, index, device, torch):
    """Forks a child for `problem`; its result, or why there is none. What the child prints goes to
    kforge before the result."""
    r, w = os.pipe()
    out_r, out_w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: from here on, the problem's code may run
        try:
            os.close(r)
            os.close(out_r)
            os.close(channel.fd)
            os.dup2(out_w, 1)
            os.dup2(out_w, 2)
            os.close(out_w)
            prctl(PR_SET_PDEATHSIG, 9)
            if layer_fd is not None:
                enter_layer(layer_fd)
            prctl(PR_SET_DUMPABLE, 1)  # its own /proc files, for PyTorch; this process stays closed
            result = result_of_child(convert, problem, device, torch)
        except OSError as e:
            result = {"ok": False, "reason": f"kforge could not confine its process: {e}"}
        try:
            out = json.dumps(result).encode()
            while out:
                out = out[os.write(w, out):]
        except BaseException:
            os._exit(70)
        os._exit(0)
    os.close(w)
    os.close(out_w)
    relay = OutputRelay(channel, index)
    chunks, size, printing = [], 0, True
    while True:
        ready, _, _ = select.select([r, out_r] if printing else [r], [], [])
        if printing and out_r in ready:
            data = os.read(out_r, 1 << 16)
            if data:
                relay.take(data)
            else:  # every writer closed it
                os.close(out_r)
                printing = False
        if r in ready:
            data = os.read(r, 1 << 16)
            if not data:
                break
            size += len(data)
            if size > MAX_RESULT_BYTES:
                os.kill(pid, 9)
                break
            chunks.append(data)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if printing:  # the process has ended: what it printed is in the pipe
        drain(out_r, relay, 4 * MAX_OUTPUT_BYTES)
    relay.finish()
    if size > MAX_RESULT_BYTES:
        return {"ok": False, "reason": f"its process sent more than {MAX_RESULT_BYTES >> 20} MiB"}
    data = b"".join(chunks)
    if not data:
        return {"ok": False, "reason": f"its process {describe(status)} without a result "
                                       "(the problem's code ended it)"}
    try:
        result = valid_result(json.loads(data.decode()))
    except ValueError:
        result = None
    if result is None:
        return {"ok": False, "reason": f"its process ({describe(status)}) sent a malformed result "
                                       "(the problem's code wrote on kforge's pipe)"}
    return result


def cuda_usable():
    """Whether PyTorch sees a CUDA GPU, asked in a child so that this process never starts CUDA
    (a forked child could not use it then)."""
    pid = os.fork()
    if pid == 0:
        try:
            import torch
            os._exit(0 if torch.cuda.is_available() else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def main(argv):
    channel_fd, job_path, layer_fd = None, None, None
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--reply-fd":
            channel_fd = int(args.pop(0))
        elif a == "--job":
            job_path = args.pop(0)
        elif a == "--layer-fd":
            layer_fd = int(args.pop(0))
    channel = Channel(channel_fd)
    with open(job_path) as f:
        job = json.load(f)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [here] + [p for p in job["sys_path"] if p]
    device = job["device"]
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install
        channel.emit({"error": "no_torch", "python": sys.executable, "detail": f"{type(e).__name__}: {e}"})
        return 3
    import warnings

    import kb_convert
    import kb_toml
    with open(job["prelude"]) as f:
        prelude = f.read()
    import re
    prelude_names = set(re.findall(r"\ndef F_(\w+)\(", prelude))
    prctl(PR_SET_DUMPABLE, 0)  # the problems' processes can neither trace nor open this one's files
    channel.emit({"python": sys.executable, "torch": torch.__version__, "device": device})
    if device == "cuda" and not cuda_usable():
        channel.emit({"error": "no_cuda", "detail": f"PyTorch {torch.__version__} in {sys.executable} sees no CUDA GPU"})
        return 3

    def convert(problem):
        warnings.filterwarnings("ignore")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
        if job.get("mode") in ("profile", "check"):
            import kb_model
            file = problem.get("file", problem["name"])
            if job["mode"] == "check":
                package = problem["package"]
                return kb_model.check(problem["path"], prelude, device, file, package, runs=int(package.get("runs", 50)),
                                      compile_modes=tuple(package.get("compile_modes", ["default"]))), None
            return kb_model.profile(problem["path"], prelude, device, file), None
        r = kb_convert.convert(problem["path"], prelude, prelude_names, device)
        return r, kb_toml.task_toml(problem["name"], problem["path"], r, torch.__version__)

    for i, problem in enumerate(job["problems"]):
        channel.emit({"start": i})
        result = run_problem(channel, layer_fd, convert, problem, i, device, torch)
        result["index"] = i
        channel.emit(result)
    channel.emit({"done": True})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
