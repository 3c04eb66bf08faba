# Kills kforge, and the process that started it (kforge's importer): that problem fails, the rest
# convert.
import os
import signal
import torch


def parent_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        after_name = f.read().rsplit(")", 1)[1].split()
    return int(after_name[1])


def name_of(pid):
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


try:  # kforge itself first, found through /proc: beyond the problem's reach when confined
    for pid in (os.getppid(), parent_of(os.getppid())):
        if name_of(pid) == "kforge":
            os.kill(pid, signal.SIGKILL)
except (OSError, ValueError, IndexError):
    pass
os.kill(os.getppid(), signal.SIGKILL)
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
