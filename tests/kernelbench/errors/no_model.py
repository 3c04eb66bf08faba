import torch

batch_size = 16


def get_inputs():
    return [torch.randn(batch_size, 8)]


def get_init_inputs():
    return []
