# A KernelBench-format answer for kforge's level1/softmax: two kernels launched one after the
# other (per-row max and sum of exponentials into a scratch tensor, with a shared-memory
# reduction, then the normalisation on a 2D grid), cuda_sources given inline to load_inline.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

softmax_ext = load_inline(
    name="softmax_two_kernels",
    cpp_sources="torch::Tensor softmax_forward(torch::Tensor x);",
    cuda_sources="""
#include <torch/extension.h>
#include <cfloat>

// One block per row: the row's max, then the sum of exp(x - max), both reduced in shared memory.
__global__ void row_stats(const float* x, float* stats, int cols) {
    extern __shared__ float buf[];
    const float* row = x + (long long)blockIdx.x * cols;
    float m = -FLT_MAX;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    buf[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + s]);
        __syncthreads();
    }
    m = buf[0];
    __syncthreads();
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(row[c] - m);
    buf[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        stats[2 * blockIdx.x] = m;
        stats[2 * blockIdx.x + 1] = buf[0];
    }
}

// x: one block row per grid row, columns across blocks.
__global__ void row_normalize(const float* x, const float* stats, float* out, int cols) {
    long long row = blockIdx.y;
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) {
        float m = stats[2 * row];
        float s = stats[2 * row + 1];
        out[row * cols + c] = expf(x[row * cols + c] - m) / s;
    }
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.dim() == 2, "x must be 2-D");
    const int rows = x.size(0);
    const int cols = x.size(1);
    auto stats = torch::empty({rows, 2}, x.options());
    auto out = torch::empty_like(x);
    const int threads = 256;
    row_stats<<<rows, threads, threads * sizeof(float)>>>(
        x.data_ptr<float>(), stats.data_ptr<float>(), cols);
    dim3 grid((cols + threads - 1) / threads, rows);
    row_normalize<<<grid, threads>>>(
        x.data_ptr<float>(), stats.data_ptr<float>(), out.data_ptr<float>(), cols);
    return out;
}
""",
    functions=["softmax_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.softmax = softmax_ext

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.softmax.softmax_forward(x)
