// The GPU side of kforge's input generator: the same philox.h, compiled by NVRTC, writing straight
// into LibTorch CUDA tensors. Gives the values generate_cpu gives (tests/gpu pins this).
#pragma once

#include <torch/types.h>

#include "kforge/tasks/generator.h"

namespace kforge::verify {

// Input `index` of `task` at `dims`, drawn on CUDA device `device_index`.
// Throws CudaError when no GPU can be used, kforge::Error when LibTorch lacks CUDA.
torch::Tensor generate_cuda(const tasks::Task& task, size_t index, const tasks::Dims& dims,
                            uint64_t seed, int variant, int device_index = 0);

tasks::InputGenerator cuda_generator(int device_index = 0);

}  // namespace kforge::verify
