import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A linear layer followed by dropout (the module is in training mode, as KernelBench builds it).
    """

    def __init__(self, in_features, out_features, p):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.dropout = nn.Dropout(p)

    def forward(self, x):
        return self.dropout(self.linear(x))


batch_size = 64
in_features = 128
out_features = 128
p = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, p]
