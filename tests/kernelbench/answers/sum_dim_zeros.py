# A KernelBench-format answer for kforge's level1/sum_dim: the output is allocated with
# torch::zeros and the kernel adds into it with atomicAdd. kforge fills outputs with NaN before a
# run, so the conversion adds a launch of its own that zeroes the output first.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

sum_source = """
#include <torch/extension.h>

// Each thread sums a chunk of up to 64 rows of one (b, d) column and adds it to out[b, d].
__global__ void sum_middle(const float* x, float* out, int B, int N, int D) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    int chunks = (N + 63) / 64;
    if (i >= (long long)B * chunks * D) return;
    int d = i % D;
    int chunk = (i / D) % chunks;
    int b = i / ((long long)D * chunks);
    float s = 0.0f;
    for (int n = chunk * 64; n < N && n < chunk * 64 + 64; ++n)
        s += x[((long long)b * N + n) * D + d];
    atomicAdd(&out[(long long)b * D + d], s);
}

torch::Tensor sum_dim1(torch::Tensor x) {
    auto B = x.size(0);
    auto N = x.size(1);
    auto D = x.size(2);
    auto out = torch::zeros({B, D}, x.options());
    long long total = B * ((N + 63) / 64) * D;
    sum_middle<<<(total + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), B, N, D);
    return out;
}
"""

sum_ext = load_inline(name="sum_dim_zeros", cpp_sources="torch::Tensor sum_dim1(torch::Tensor x);",
                      cuda_sources=sum_source, functions=["sum_dim1"])


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.sum = sum_ext

    def forward(self, x):
        return self.sum.sum_dim1(x)
