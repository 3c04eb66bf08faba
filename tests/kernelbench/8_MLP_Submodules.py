import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, features, hidden):
        super(Block, self).__init__()
        self.up = nn.Linear(features, hidden)
        self.act = nn.GELU()
        self.down = nn.Linear(hidden, features)
        self.norm = nn.LayerNorm(features)

    def forward(self, x):
        return self.norm(x + self.down(self.act(self.up(x))))


# Two residual MLP blocks (submodules) and a learned per-feature scale. No docstring: as many
# upstream problems, the task's summary must come from the problem, not nn.Module's docstring.
class Model(nn.Module):

    def __init__(self, features, hidden):
        super(Model, self).__init__()
        self.blocks = nn.Sequential(Block(features, hidden), Block(features, hidden))
        self.scale = nn.Parameter(torch.randn(features) * 0.02)

    def forward(self, x):
        return self.blocks(x) * self.scale


batch_size = 64
features = 256
hidden = 4 * features


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, hidden]
