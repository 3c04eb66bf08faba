import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Product of two symmetric matrices, one of them scaled by a random factor.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, S, T):
        return torch.matmul(S, T)


size = 256


def get_inputs():
    S = torch.rand(size, size)
    S = (S + S.T) / 2
    factor = torch.rand(())
    T = torch.randn(size, size).abs()
    T = (T + T.mT) * factor
    return [S, T]


def get_init_inputs():
    return []
