// Task inputs drawn by kforge's counter-based generator (philox.h): the same values on the CPU
// (here) and the GPU (verify/gpu_generator.h).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <functional>

#include "kforge/tasks/task.h"

namespace kforge::tasks {

// An input's distribution with its bounds evaluated for one dims configuration and variant
// (0: the declared distribution, 1: the second one, range_shift applied).
struct ResolvedInit {
  int kind = 0;            // kforge_gen::Kind
  double p0 = 0, p1 = 0;   // normal: mean, std; uniform: lo, hi; bernoulli: p
  int64_t lo = 0, hi = 0;  // randint
};
ResolvedInit resolve_init(const InputSpec& in, const Dims& dims, int variant);

torch::ScalarType to_scalar_type(Dtype d);
std::optional<Dtype> from_scalar_type(torch::ScalarType t);

// Input `index` of `task` at `dims`: element i is a function of (seed, index, i, variant) only.
// variant 0 is the declared distribution, 1 the second one (docs/task-format.md).
torch::Tensor generate_cpu(const Task& task, size_t index, const Dims& dims, uint64_t seed,
                           int variant);

// Produces one input tensor on some device; the CPU and GPU generators both fit.
using InputGenerator = std::function<torch::Tensor(const Task&, size_t index, const Dims&,
                                                   uint64_t seed, int variant)>;

}  // namespace kforge::tasks
