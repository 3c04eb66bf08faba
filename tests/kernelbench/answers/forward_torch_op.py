# A KernelBench-format answer for kforge's level1/relu whose forward() does part of the work in
# PyTorch before calling its kernel: kforge converts a forward() that only calls the extension's
# functions, and refuses this one, naming the Python line.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

clamp_source = """
#include <torch/extension.h>

__global__ void clamp_min_zero(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}

torch::Tensor clamp_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    clamp_min_zero<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

clamp = load_inline(name="clamp_ext", cpp_sources="torch::Tensor clamp_cuda(torch::Tensor x);",
                    cuda_sources=clamp_source, functions=["clamp_cuda"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.clamp = clamp

    def forward(self, x):
        x = torch.abs(x) * torch.sign(x)
        return self.clamp.clamp_cuda(x)
