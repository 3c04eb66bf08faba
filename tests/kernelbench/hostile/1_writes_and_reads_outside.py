# Writes a file next to itself, reads one there and reads the API key from its environment; the
# import fails it with what it could reach (nothing, when confined).
import os
import torch

here = os.path.dirname(os.path.abspath(__file__))
try:
    open(os.path.join(here, "WRITTEN_BY_PROBLEM"), "w").write("pwned")
    wrote = "yes"
except OSError:
    wrote = "denied"
try:
    secret = open(os.path.join(here, "secret.txt")).read().strip()
except OSError:
    secret = "denied"
raise RuntimeError(f"wrote={wrote} secret={secret} key={os.environ.get('OPENAI_API_KEY', 'none')}")
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


batch_size = 16
dim = 64


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
