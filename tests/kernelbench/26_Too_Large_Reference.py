import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A very deep stack of small linear layers with residual connections: its converted
    reference is larger than a kforge task may hold.
    """

    def __init__(self, features, depth):
        super(Model, self).__init__()
        self.layers = nn.ModuleList([nn.Linear(features, features) for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = x + torch.relu(layer(x))
        return x


batch_size = 4
features = 8
depth = 400


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, depth]
