import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A linear layer, a sum over the features (keeping the dimension) and a softmax over it.
    """

    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.linear(x)
        x = torch.sum(x, dim=1, keepdim=True)
        return torch.softmax(x, dim=1)


batch_size = 128
in_features = 64
out_features = 32


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
