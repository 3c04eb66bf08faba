import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    """A residual block: a projection without bias, a normalisation without weights, a GELU."""

    def __init__(self, features):
        super().__init__()
        self.proj = nn.Linear(features, features, bias=False)
        self.norm = nn.LayerNorm(features, elementwise_affine=False)

    def forward(self, x):
        return x + F.gelu(self.norm(self.proj(x)))


class Model(nn.Module):
    """
    A deep stack of alike residual blocks, each with its own weights: written out block by block,
    the traced forward() is longer than a task's reference may be.
    """

    def __init__(self, features, depth):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(features) for _ in range(depth)])

    def forward(self, x):
        return self.blocks(x)


batch_size = 4
features = 8
depth = 200


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, depth]
