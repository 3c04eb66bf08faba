import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Maximum over one dimension: returns the values and their (int64) indices as a tuple.
    """

    def __init__(self, dim: int):
        super(Model, self).__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor):
        result = torch.max(x, dim=self.dim)
        return result.values, result.indices


batch_size = 16
dim1 = 256
dim2 = 255
reduce_dim = 1


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
