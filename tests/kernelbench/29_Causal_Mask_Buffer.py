import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """
    Masked self-attention over a sequence. The mask that keeps each position from seeing later
    ones is made once, in __init__, from the longest sequence the Model takes; the heads must split
    the embedding evenly.
    """

    def __init__(self, embed_dim, n_heads, longest):
        super().__init__()
        assert embed_dim % n_heads == 0, "the heads must split the embedding evenly"
        self.n_heads = n_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out = nn.Linear(embed_dim, embed_dim)
        allowed = torch.tril(torch.ones(longest, longest))
        self.register_buffer("allowed", allowed.view(1, 1, longest, longest))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2)
        k = k.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2)
        v = v.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        scores = scores.masked_fill(self.allowed[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.out(y.transpose(1, 2).contiguous().view(b, t, c))


batch_size = 2
seq_len = 32
longest = 64
embed_dim = 96
n_heads = 8


def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim)]


def get_init_inputs():
    return [embed_dim, n_heads, longest]
