// ReLU for the task smoke/relu (tasks/smoke/relu.toml): out = relu(x), x a float32 [B, N] tensor.
// Device code only: kforge writes the host code and launches the kernel as relu.json says.
//
// Each thread handles one element of the B * N contiguous floats. BLOCK is a tunable: kforge puts
// `#define BLOCK <value>` before this file, one value of relu.json's "tune" at a time.

__global__ void __launch_bounds__(BLOCK)
    relu(const float* __restrict__ x, float* __restrict__ out, long long n) {
  const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) {
    const float v = x[i];
    out[i] = v < 0.0f ? 0.0f : v;  // keeps NaN as NaN, like torch.relu
  }
}
