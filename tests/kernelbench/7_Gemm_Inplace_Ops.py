import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    A linear layer followed by in-place operations: scaling, ReLU, a bias and a residual.
    """

    def __init__(self, in_features, out_features, bias_shape):
        super(Model, self).__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.relu = nn.ReLU(inplace=True)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.gemm(x)
        residual = x.clone()
        x.mul_(2.0)
        x = self.relu(x)
        x += self.bias
        x.sub_(residual)
        F.leaky_relu(x, 0.1, inplace=True)
        return x


batch_size = 128
in_features = 256
out_features = 512
bias_shape = (out_features,)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, bias_shape]
