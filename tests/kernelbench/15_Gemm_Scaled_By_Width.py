import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A linear layer scaled by 1/sqrt(features), computed once as a Python float in __init__.
    """

    def __init__(self, features):
        super(Model, self).__init__()
        self.linear = nn.Linear(features, features)
        self.scale = float(features) ** 0.5

    def forward(self, x):
        return self.linear(x) / self.scale


batch_size = 32
features = 256


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
