# A KernelBench-format answer for kforge's level1/matmul_rect that calls cuBLAS from its host
# wrapper: no kernel of its own does the work. kforge refuses it, naming the cuBLAS call.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

gemm_source = """
#include <torch/extension.h>
#include <cublas_v2.h>

torch::Tensor gemm_cuda(torch::Tensor a, torch::Tensor b) {
    const int m = a.size(0);
    const int k = a.size(1);
    const int n = b.size(1);
    auto c = torch::empty({m, n}, a.options());
    cublasHandle_t handle;
    cublasCreate(&handle);
    const float one = 1.0f, zero = 0.0f;
    // Row-major C = A B is column-major C^T = B^T A^T.
    cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, b.data_ptr<float>(), n,
                a.data_ptr<float>(), k, &zero, c.data_ptr<float>(), n);
    cublasDestroy(handle);
    return c;
}
"""

gemm = load_inline(
    name="matmul_cublas",
    cpp_sources="torch::Tensor gemm_cuda(torch::Tensor a, torch::Tensor b);",
    cuda_sources=gemm_source,
    functions=["gemm_cuda"],
    extra_ldflags=["-lcublas"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.gemm = gemm

    def forward(self, a, b):
        return self.gemm.gemm_cuda(a, b)
