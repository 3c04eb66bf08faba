import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Product of a lower-triangular matrix with a dense one, kept lower-triangular.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, L, B):
        return torch.tril(torch.matmul(L, B))


n = 512


def get_inputs():
    L = torch.rand(n, n)
    L = torch.tril(L)
    B = torch.tril(torch.randn(n, n))
    return [L, B]


def get_init_inputs():
    return []
