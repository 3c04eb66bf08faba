# Takes 6 GiB, 64 MiB at a time, then lets it go: under the import's memory limit it fails.
import torch

_eaten = [bytearray(64 << 20) for _ in range(96)]
del _eaten
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
