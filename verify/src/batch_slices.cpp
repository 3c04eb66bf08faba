#include "kforge/verify/batch_slices.h"

#include "kforge/verify/memory.h"

namespace kforge::verify {
namespace {

std::vector<torch::Tensor> run_sliced(const tasks::Task& task, const TensorsFn& run,
                                      const std::vector<torch::Tensor>& inputs, int64_t n,
                                      int64_t slice) {
  std::vector<torch::Tensor> whole;
  for (int64_t start = 0; start < n; start += slice) {
    const int64_t length = std::min(slice, n - start);
    std::vector<torch::Tensor> part;
    for (const torch::Tensor& t : inputs) part.push_back(t.narrow(0, start, length));
    std::vector<torch::Tensor> got = run(part);
    for (size_t o = 0; o < got.size(); ++o) {
      const torch::Tensor& g = got[o];
      if (start == 0 && g.dim() > 0) {
        std::vector<int64_t> shape = g.sizes().vec();
        shape[0] = n;
        whole.push_back(torch::empty(shape, g.options()));
      }
      if (o >= whole.size() || !g.sizes().equals(whole[o].narrow(0, start, length).sizes()))
        throw Error(task.file.string() + ": batch_dim '" + task.batch_dim +
                    "': the reference's output " + std::to_string(o) + " on batch indices " +
                    std::to_string(start) + ".." + std::to_string(start + length - 1) +
                    " has shape " + c10::str(g.sizes()) + ", which does not begin with " +
                    std::to_string(length) +
                    " followed by the first slice's sizes; a reference computed a slice at a "
                    "time must give every output the batch_dim first");
      whole[o].narrow(0, start, length).copy_(g);
    }
    if (got.size() != whole.size())
      throw Error(task.file.string() + ": the reference gave " + std::to_string(got.size()) +
                  " output(s) on one slice and " + std::to_string(whole.size()) + " on another");
  }
  return whole;
}

}  // namespace

SlicedResult run_in_batch_slices(const tasks::Task& task, const TensorsFn& run,
                                 const std::vector<torch::Tensor>& inputs,
                                 const std::function<void()>& release, int64_t start_slice) {
  const int64_t n = batch_length(inputs);
  const bool sliceable = !task.batch_dim.empty() && n >= 2;
  int64_t slice = sliceable && start_slice > 0 ? std::min(start_slice, n) : 0;
  if (slice == 0) {
    try {
      return {run(inputs), 0};
    } catch (const std::exception& e) {
      if (!sliceable || !is_out_of_memory(e)) throw;
    }
    release();
    slice = (n + 1) / 2;
  }
  for (;; slice = (slice + 1) / 2) {
    try {
      return {run_sliced(task, run, inputs, n, slice), slice};
    } catch (const std::exception& e) {
      if (slice == 1 || !is_out_of_memory(e)) throw;
    }
    release();
  }
}

}  // namespace kforge::verify
