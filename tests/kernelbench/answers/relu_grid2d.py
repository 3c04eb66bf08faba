# A KernelBench-format answer for kforge's level1/relu: a 2D grid of 2D blocks over the rows and
# columns, sizes read with x.size(0) and x.size(1), the input pointer not const (kforge makes it
# const: its inputs are read-only).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_source = r"""
#include <torch/extension.h>

#define TILE_X 32
#define TILE_Y 8

__global__ void relu_2d(float* x, float* y, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {
        float v = x[(long long)r * cols + c];
        y[(long long)r * cols + c] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor relu_cuda(torch::Tensor x) {
    int64_t rows = x.size(0);
    int64_t cols = x.size(1);
    torch::Tensor y = torch::empty({rows, cols}, x.options());
    dim3 block(TILE_X, TILE_Y);
    dim3 grid((cols + TILE_X - 1) / TILE_X, (rows + TILE_Y - 1) / TILE_Y);
    relu_2d<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

relu = load_inline(
    name="relu_grid2d",
    cpp_sources=["torch::Tensor relu_cuda(torch::Tensor x);"],
    cuda_sources=[relu_source],
    functions=["relu_cuda"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = relu

    def forward(self, x):
        return self.relu.relu_cuda(x.contiguous())
