// A reference too large for the GPU, computed a slice of the task's batch_dim at a time
// (docs/task-format.md, "batch_dim"; docs/decisions.md, "A reference in slices"). The float64
// reference of attention at the timed size builds B·H·S·S scores and their softmax in float64,
// more than an 80 GB GPU holds; one batch index at a time needs a quarter of it.
#pragma once

#include <functional>
#include <vector>

#include <torch/torch.h>

#include "kforge/tasks/task.h"

namespace kforge::verify {

using TensorsFn = std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>&)>;

// The batch the inputs share: the first input's first dim (the loader holds every input to begin
// with the batch_dim), 0 without one.
inline int64_t batch_length(const std::vector<torch::Tensor>& inputs) {
  return !inputs.empty() && inputs[0].dim() > 0 ? inputs[0].size(0) : 0;
}

struct SlicedResult {
  std::vector<torch::Tensor> outputs;
  int64_t slice = 0;  // the batch indices each call saw; 0: one call on the whole inputs
};

// `run` on `inputs`. Where it runs out of memory (is_out_of_memory) and `task` declares a
// batch_dim, `release` is called (LibTorch's cache given back) and `run` again on slices of every
// input's first dim, ceil(n/2) indices each, then ceil(n/4), ... down to one; each slice's outputs
// are copied into whole outputs allocated from the first slice's. A slice whose output does not
// begin with the slice's length is an Error naming the task file: its reference is not
// independent along the batch_dim as declared. Any other error, and running out of memory at one
// index a slice, propagates as `run` threw it. `start_slice` > 0 (a slice that fitted before, the
// caller's to remember) skips the whole try and the larger slices.
SlicedResult run_in_batch_slices(const tasks::Task& task, const TensorsFn& run,
                                 const std::vector<torch::Tensor>& inputs,
                                 const std::function<void()>& release, int64_t start_slice = 0);

}  // namespace kforge::verify
