# Ends its process from forward(), with status 0: that problem fails, the next ones still convert.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        import os
        os._exit(0)


batch_size = 16
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
