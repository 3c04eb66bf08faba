# A KernelBench-format answer for kforge's level2/linear_bias_relu: ModelNew holds an nn.Linear
# and passes its weight and bias to the wrapper. kforge maps them to the task's inputs after x
# (`weight`, `bias`), in order, since the task has no input named linear_weight.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

linear_relu_source = """
#include <torch/extension.h>

#define TILE 16

// out[m, n] = relu(sum_k x[m, k] * w[n, k] + bias[n]), one TILE x TILE output tile per block.
__global__ void linear_relu_kernel(const float* x, const float* w, const float* bias, float* out,
                                   int M, int N, int K) {
    __shared__ float xs[TILE][TILE];
    __shared__ float ws[TILE][TILE + 1];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int kx = k0 + threadIdx.x;
        xs[threadIdx.y][threadIdx.x] = (row < M && kx < K) ? x[(long long)row * K + kx] : 0.0f;
        int wn = blockIdx.x * TILE + threadIdx.y;
        ws[threadIdx.y][threadIdx.x] = (wn < N && kx < K) ? w[(long long)wn * K + kx] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += xs[threadIdx.y][k] * ws[threadIdx.x][k];
        __syncthreads();
    }
    if (row < M && col < N) out[(long long)row * N + col] = fmaxf(acc + bias[col], 0.0f);
}

torch::Tensor linear_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    const int M = x.size(0), K = x.size(1), N = weight.size(0);
    auto out = torch::empty({M, N}, x.options());
    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    linear_relu_kernel<<<grid, block>>>(x.data_ptr<float>(), weight.data_ptr<float>(),
                                        bias.data_ptr<float>(), out.data_ptr<float>(), M, N, K);
    return out;
}
"""

linear_relu_ext = load_inline(
    name="linear_relu",
    cpp_sources="torch::Tensor linear_relu(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);",
    cuda_sources=linear_relu_source,
    functions=["linear_relu"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int = 4096, out_features: int = 4096):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.ext = linear_relu_ext

    def forward(self, x):
        return self.ext.linear_relu(x, self.linear.weight, self.linear.bias)
