import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Negative log-likelihood of probability rows: each row of `probs` is a distribution.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, probs, weights):
        return -(torch.log(probs) * weights).sum(dim=-1).mean()


rows = 64
classes = 1000


def get_inputs():
    probs = torch.randn(rows, classes).softmax(dim=-1)
    return [probs, torch.rand(rows, classes)]


def get_init_inputs():
    return []
