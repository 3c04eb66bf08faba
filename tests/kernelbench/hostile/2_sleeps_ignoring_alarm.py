# Never ends, and ignores SIGALRM: only a deadline kept outside its process stops it.
import signal
import time
import torch

signal.signal(signal.SIGALRM, signal.SIG_IGN)
time.sleep(10 ** 6)
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
