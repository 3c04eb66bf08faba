#!/usr/bin/env python3
"""What CUDA needs under Landlock: runs `torch.zeros(1, device='cuda')` in child processes, each
confined (Landlock through ctypes, as kforge confines the KernelBench import's Python) with one
variant of the rule set, and prints which variants work. A GPU-machine diagnostic, no kforge needed.

    python3 scripts/landlock-cuda-probe.py
"""
import ctypes
import os
import subprocess
import sys
import tempfile

READ = (1 << 0) | (1 << 2) | (1 << 3)           # execute, read file, read dir
FILE = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 14) | (1 << 15)  # execute, write, read, truncate, ioctl_dev
ALL = (1 << 16) - 1                              # every filesystem right up to ABI 5+

CHILD = r'''
import ctypes, os, sys, json
libc = ctypes.CDLL(None, use_errno=True)
spec = json.loads(sys.argv[1])
abi = libc.syscall(444, None, 0, 1)
handled = (1 << 16) - 1 if abi >= 5 else (1 << 15) - 1
attr = (ctypes.c_uint64 * 3)(handled, 0, spec["scoped"] if abi >= 6 else 0)
size = 24 if abi >= 6 else 16 if abi >= 4 else 8
rs = libc.syscall(444, ctypes.byref(attr), size, 0)
assert rs >= 0, ("create", ctypes.get_errno())
class Rule(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("fd", ctypes.c_int32)]
for path, rights in spec["rules"]:
    try:
        fd = os.open(path, os.O_PATH)
    except OSError:
        continue
    st = os.fstat(fd)
    import stat
    r = rights & handled if stat.S_ISDIR(st.st_mode) else rights & handled & spec["file"]
    rule = Rule(r, fd)
    assert libc.syscall(445, rs, 1, ctypes.byref(rule), 0) == 0, ("add", path, ctypes.get_errno())
    os.close(fd)
libc.prctl(38, 1, 0, 0, 0)
assert libc.syscall(446, rs, 0) == 0, ("restrict", ctypes.get_errno())
try:
    import torch
    x = torch.zeros(1, device="cuda") + 1
    print("ok", float(x.sum()))
except Exception as e:
    print("FAIL", type(e).__name__, str(e).splitlines()[0][:200])
'''


def base(work):
    reads = [p for p in sys.path if p.startswith("/")] + [sys.prefix, sys.base_prefix, os.path.dirname(sys.executable)]
    reads += ["/lib", "/lib32", "/lib64", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/local/lib", "/etc/ld.so.cache",
              "/dev/urandom", "/sys/devices/system/cpu", "/proc", "/proc/driver/nvidia", "/sys"]
    reads += [e for e in os.environ.get("LD_LIBRARY_PATH", "").split(":") if e.startswith("/")]
    writes = [work, "/dev/null", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    writes += ["/dev/nvidia%d" % i for i in range(8)]
    return [(p, READ) for p in reads] + [(p, ALL) for p in writes]


def main():
    work = tempfile.mkdtemp()
    b = base(work)
    extra_read = lambda *ps: b + [(p, READ) for p in ps]
    extra_write = lambda *ps: b + [(p, ALL) for p in ps]
    kforge_now = extra_read("/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/localtime", "/etc/nvidia",
                            "/usr/share/nvidia", "/usr/local/nvidia", "/run/nvidia-persistenced") + \
        [(p, ALL) for p in ("/dev/zero", "/dev/nvidia-modeset", "/dev/nvidia-caps", "/dev/shm")]
    variants = {
        "base (kforge before)": (b, 3),
        "kforge now": (kforge_now, 3),
        "base + read /": (extra_read("/"), 3),
        "base + write /dev": (extra_write("/dev"), 3),
        "base + read /etc": (extra_read("/etc"), 3),
        "base + read /usr": (extra_read("/usr"), 3),
        "base + read /opt /var /run": (extra_read("/opt", "/var", "/run"), 3),
        "base + write /tmp": (extra_write("/tmp"), 3),
        "base, not scoped": (b, 0),
        "everything, scoped": ([("/", ALL)], 3),
        "everything, not scoped": ([("/", ALL)], 0),
    }
    if "--narrow" in sys.argv:  # which right outside the base rules CUDA needs
        rd = [("/", READ)]
        w = lambda *ps: b + rd + [(p, ALL) for p in ps]
        variants = {
            "read / + write /dev": (w("/dev"), 3),
            "read / + write /proc": (w("/proc"), 3),
            "read / + write /sys": (w("/sys"), 3),
            "read / + write /run /var /tmp": (w("/run", "/var", "/tmp"), 3),
            "read / + write /dev /proc /sys": (w("/dev", "/proc", "/sys"), 3),
            "/ with file rights only": ([("/", READ | FILE)], 3),
            "/ with all but ioctl_dev": ([("/", ALL & ~(1 << 15))], 3),
            "/ with all but make_*": ([("/", ALL & ~(0x1fc0))], 3),
        }
    if "--proc" in sys.argv:  # where beneath /proc (the probe's child makes its own rules: /proc/self is its own)
        rd = [("/", READ)]
        w = lambda *ps: b + rd + [(p, ALL) for p in ps]
        variants = {
            "read / + write /proc/self": (w("/proc/self"), 3),
            "read / + write /proc/driver": (w("/proc/driver"), 3),
            "read / + write /proc/sys": (w("/proc/sys"), 3),
            "read / + file rights /proc": (b + rd + [("/proc", READ | FILE)], 3),
            "read / + ioctl /proc": (b + rd + [("/proc", READ | (1 << 15))], 3),
            "read / + write-file /proc": (b + rd + [("/proc", READ | (1 << 1))], 3),
        }
    if "--self" in sys.argv:  # where beneath /proc/self, and which rights
        rd = [("/", READ)]
        f = lambda path, rights: (b + rd + [(path, rights)], 3)
        variants = {
            "file rights /proc/self/fd": f("/proc/self/fd", READ | FILE),
            "file rights /proc/self/task": f("/proc/self/task", READ | FILE),
            "write+ioctl /proc/self": f("/proc/self", READ | (1 << 1) | (1 << 15)),
            "write+truncate /proc/self": f("/proc/self", READ | (1 << 1) | (1 << 14)),
            "write+truncate+ioctl /proc/self": f("/proc/self", READ | (1 << 1) | (1 << 14) | (1 << 15)),
        }
    import json
    procs = {}
    for name, (rules, scoped) in variants.items():
        spec = json.dumps({"rules": rules, "scoped": scoped, "file": FILE})
        procs[name] = subprocess.Popen([sys.executable, "-c", CHILD, spec], stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)
    for name, p in procs.items():
        out, _ = p.communicate(timeout=300)
        last = [l for l in out.splitlines() if l.startswith(("ok", "FAIL", "Traceback", "AssertionError"))]
        print("%-28s %s" % (name, (last[-1] if last else out.strip().splitlines()[-1:] or ["?"])[:160]))


if __name__ == "__main__":
    main()
