import torch
import torch.nn as nn
from einops import rearrange


class Model(nn.Module):
    """
    Splits the features into heads with einops and sums each head.
    """

    def __init__(self, heads):
        super(Model, self).__init__()
        self.heads = heads

    def forward(self, x):
        return rearrange(x, "b (h d) -> b h d", h=self.heads).sum(-1)


batch_size = 8
features = 32
heads = 4


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [heads]
