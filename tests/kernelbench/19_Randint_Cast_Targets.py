import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Squared hinge loss against targets of -1 and +1, weighted by counts given as floats.
    """

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, scores, signs, counts):
        return (torch.clamp(1 - scores * signs, min=0) ** 2 * counts).mean()


batch = 256
width = 32


def get_inputs():
    signs = torch.randint(0, 2, (batch, 1)).float() * 2 - 1
    counts = torch.randint(1, 5, (batch, width)).to(torch.float32)
    return [torch.rand(batch, width) * 2 - 1, signs, counts]


def get_init_inputs():
    return []
