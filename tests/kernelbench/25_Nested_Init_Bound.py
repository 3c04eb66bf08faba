import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Concatenates two feature maps along the channels and convolves them (3x3), as a dense
    block does: the convolution's fan-in is a sum of sizes.
    """

    def __init__(self, channels_a, channels_b, out_channels, kernel_size):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(channels_a + channels_b, out_channels, kernel_size, padding=1)

    def forward(self, a, b):
        return self.conv(torch.cat([a, b], dim=1))


batch_size = 2
channels_a = 6
channels_b = 10
out_channels = 8
kernel_size = 3
height = width = 16


def get_inputs():
    return [torch.randn(batch_size, channels_a, height, width), torch.randn(batch_size, channels_b, height, width)]


def get_init_inputs():
    return [channels_a, channels_b, out_channels, kernel_size]
