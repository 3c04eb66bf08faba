# A KernelBench-format answer for kforge's smoke/vector_add (a + b over float32 vectors): the
# shape of KernelBench's own example, one kernel and a host wrapper, cuda_sources named by a
# module-level string.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

vector_add_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void vector_add_kernel(const float* a, const float* b, float* out, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        out[idx] = a[idx] + b[idx];
    }
}

torch::Tensor vector_add_cuda(torch::Tensor a, torch::Tensor b) {
    auto size = a.numel();
    auto out = torch::empty_like(a);

    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;

    vector_add_kernel<<<num_blocks, block_size>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), size);

    return out;
}
"""

vector_add_cpp_source = "torch::Tensor vector_add_cuda(torch::Tensor a, torch::Tensor b);"

vector_add = load_inline(
    name="vector_add",
    cpp_sources=vector_add_cpp_source,
    cuda_sources=vector_add_source,
    functions=["vector_add_cuda"],
    verbose=True,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.vector_add = vector_add

    def forward(self, a, b):
        return self.vector_add.vector_add_cuda(a, b)
