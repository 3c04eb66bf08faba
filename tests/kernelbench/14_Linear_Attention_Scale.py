import math

import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Projects queries, scales the scores by 1/sqrt(head_dim) and reshapes with module constants.
    """

    def __init__(self, features, head_dim):
        super(Model, self).__init__()
        self.proj = nn.Linear(features, head_dim)
        self.head_dim = head_dim

    def forward(self, q, k):
        q = self.proj(q).view(batch_size, seq_len, self.head_dim)
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(self.head_dim)
        return torch.softmax(scores, dim=-1)


batch_size = 4
seq_len = 128
features = 256
head_dim = 64


def get_inputs():
    return [torch.randn(batch_size * seq_len, features), torch.randn(batch_size, seq_len, head_dim)]


def get_init_inputs():
    return [features, head_dim]
