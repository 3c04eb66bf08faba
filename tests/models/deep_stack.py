"""A deep stack: 300 linear layers with ReLU in one line (a graph 600 operations deep, as deep as
ResNet-101's), and a gate __init__ fills in place (as Swin V2's relative position tables are)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear + ReLU, depth times, then a fixed gate on every other feature."""

    def __init__(self, width, depth):
        super().__init__()
        self.layers = nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())])
        gate = torch.zeros(width)
        gate[::2] = 1.0  # in place: a problem file cannot say how this buffer is made
        self.register_buffer("gate", gate)

    def forward(self, x):
        return self.layers(x) * self.gate


batch_size = 8
width = 64
depth = 300


def get_inputs():
    return [torch.randn(batch_size, width)]


def get_init_inputs():
    return [width, depth]
