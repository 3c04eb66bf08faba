# A KernelBench-format answer for kforge's level1/matmul_rect whose host wrapper calls
# torch::matmul: PyTorch does the work, not a kernel of the answer's. kforge refuses it, naming
# the line.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

matmul_source = """
#include <torch/extension.h>

__global__ void scale_kernel(float* c, float alpha, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] *= alpha;
}

torch::Tensor matmul_cuda(torch::Tensor a, torch::Tensor b) {
    auto c = torch::matmul(a, b);
    int n = c.numel();
    scale_kernel<<<(n + 255) / 256, 256>>>(c.data_ptr<float>(), 1.0f, n);
    return c;
}
"""

matmul = load_inline(
    name="matmul_torch_op",
    cpp_sources="torch::Tensor matmul_cuda(torch::Tensor a, torch::Tensor b);",
    cuda_sources=matmul_source,
    functions=["matmul_cuda"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.matmul = matmul

    def forward(self, a, b):
        return self.matmul.matmul_cuda(a, b)
