# A KernelBench-format answer for kforge's level1/relu: cuda_sources is a module-level name bound
# to two string constants joined with +, functions= a name too; the wrapper dispatches on the
# dtype (AT_DISPATCH_FLOATING_TYPES), launches a template kernel, and passes it a float that
# forward() gives (a leaky ReLU with slope 0.0, which is a ReLU).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

kernel_part = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

constexpr int kThreads = 512;

template <typename scalar_t>
__global__ void leaky_relu_kernel(const scalar_t* __restrict__ in, scalar_t* __restrict__ out,
                                  float slope, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        scalar_t v = in[i];
        out[i] = v > scalar_t(0) ? v : v * slope;
    }
}
"""

host_part = """
torch::Tensor leaky_relu_forward(torch::Tensor input, float slope) {
    auto output = torch::empty_like(input);
    const int64_t n = input.numel();
    const int blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 65535);
    AT_DISPATCH_FLOATING_TYPES(input.scalar_type(), "leaky_relu_forward", ([&] {
        leaky_relu_kernel<scalar_t><<<blocks, kThreads>>>(
            input.data_ptr<scalar_t>(), output.data_ptr<scalar_t>(), slope, n);
    }));
    return output;
}
"""

leaky_relu_source = kernel_part + host_part
leaky_relu_functions = ["leaky_relu_forward"]

leaky_relu = load_inline(
    name="leaky_relu_dispatch",
    cpp_sources="torch::Tensor leaky_relu_forward(torch::Tensor input, float slope);",
    cuda_sources=leaky_relu_source,
    functions=leaky_relu_functions,
)


class ModelNew(nn.Module):
    def __init__(self, slope: float = 0.0):
        super().__init__()
        self.slope = slope
        self.ext = leaky_relu

    def forward(self, x):
        return self.ext.leaky_relu_forward(x, self.slope)
