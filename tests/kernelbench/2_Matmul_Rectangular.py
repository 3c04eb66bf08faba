import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Multiplies a (M, K) matrix by a (K, N) matrix: two inputs.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


M = 256
K = 512
N = 384


def get_inputs():
    A = torch.randn(M, K)
    B = torch.randn(K, N)
    return [A, B]


def get_init_inputs():
    return []
