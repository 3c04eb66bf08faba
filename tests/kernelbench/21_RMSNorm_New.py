import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    RMS normalisation of the features (nn.RMSNorm), a scale, and F.rms_norm again without a
    weight: both came with PyTorch 2.4.
    """

    def __init__(self, features):
        super(Model, self).__init__()
        self.norm = nn.RMSNorm(features, eps=1e-6)

    def forward(self, x):
        y = self.norm(x) * 3.0
        return F.rms_norm(y, (x.shape[-1],))


batch_size = 16
features = 64


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
