import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Densely connected layers: each layer sees the concatenation of the input and of every earlier
    layer's output, and adds its own few features to it.
    """

    def __init__(self, in_features, growth, depth):
        super().__init__()
        self.layers = nn.ModuleList(
            [nn.Linear(in_features + i * growth, growth) for i in range(depth)])

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            features.append(torch.relu(layer(torch.cat(features, 1))))
        return torch.cat(features, 1)


batch_size = 4
in_features = 8
growth = 4
depth = 80


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, growth, depth]
