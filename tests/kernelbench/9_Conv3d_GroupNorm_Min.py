import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A 3D convolution, group normalisation (8 groups) and a minimum with a constant.
    """

    def __init__(self, in_channels, out_channels, kernel_size, groups, min_value):
        super(Model, self).__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.norm = nn.GroupNorm(groups, out_channels)
        self.min_value = min_value

    def forward(self, x):
        x = self.conv(x)
        x = self.norm(x)
        return torch.clamp(x, max=self.min_value)


batch_size = 4
in_channels = 3
out_channels = 16
depth, height, width = 8, 16, 16
kernel_size = 3
groups = 8
min_value = 0.5


def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups, min_value]
