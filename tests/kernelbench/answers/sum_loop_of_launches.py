# A KernelBench-format answer for kforge's level1/sum_dim that reduces in passes: its wrapper
# launches a kernel in a loop that runs until one value per output is left, so how many launches
# run depends on the sizes. A kforge plan is a fixed list of launches: kforge refuses it, naming
# the loop.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

sum_source = """
#include <torch/extension.h>

// Sums groups of `group` consecutive rows of `in` (outer x len x inner) into `out`.
__global__ void sum_pass(const float* in, float* out, int outer, int len, int inner, int group) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    int parts = (len + group - 1) / group;
    if (i >= (long long)outer * parts * inner) return;
    int d = i % inner;
    int p = (i / inner) % parts;
    int b = i / ((long long)inner * parts);
    float s = 0.0f;
    for (int r = p * group; r < min(len, (p + 1) * group); ++r)
        s += in[((long long)b * len + r) * inner + d];
    out[i] = s;
}

torch::Tensor sum_dim_cuda(torch::Tensor x) {
    int outer = x.size(0), len = x.size(1), inner = x.size(2);
    torch::Tensor cur = x;
    while (len > 1) {
        int parts = (len + 63) / 64;
        auto next = torch::empty({outer, parts, inner}, x.options());
        long long total = (long long)outer * parts * inner;
        sum_pass<<<(total + 255) / 256, 256>>>(cur.data_ptr<float>(), next.data_ptr<float>(),
                                               outer, len, inner, 64);
        cur = next;
        len = parts;
    }
    return cur.view({outer, inner});
}
"""

sum_ext = load_inline(
    name="sum_loop",
    cpp_sources="torch::Tensor sum_dim_cuda(torch::Tensor x);",
    cuda_sources=sum_source,
    functions=["sum_dim_cuda"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.ext = sum_ext

    def forward(self, x):
        return self.ext.sum_dim_cuda(x)
