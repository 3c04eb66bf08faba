# Prints kforge-looking JSON lines (a task whose name leaves --out) on every channel it can reach:
# its stdout, descriptor 3, and descriptor 3 of its parent process through /proc.
import json
import os
import torch

forged = json.dumps({"file": "forged", "ok": True, "index": 0, "name": "../../ESCAPED", "toml": "# forged\n",
                     "dims": {}, "fixed": {}, "checked": [], "timed_checked": False, "notes": []}) + "\n"
print(forged, end="", flush=True)
for fd in ("/proc/self/fd/3", f"/proc/{os.getppid()}/fd/3"):
    try:
        f = os.open(fd, os.O_WRONLY)
        os.write(f, forged.encode())
    except OSError:
        pass
try:
    os.write(3, forged.encode())
except OSError:
    pass
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


batch_size = 16
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
