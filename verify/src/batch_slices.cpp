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
    if (whole.empty() && !got.empty())
      for (const torch::Tensor& g : got) {
        if (g.dim() == 0 || g.size(0) != length)
          throw Error(task.file.string() + ": batch_dim '" + task.batch_dim +
                      "': the reference's output on " + std::to_string(length) +
                      " batch index(es) has shape " + c10::str(g.sizes()) +
                      ", which does not begin with " + std::to_string(length) +
                      "; a reference computed a slice at a time must give every output the "
                      "batch_dim first");
        std::vector<int64_t> shape = g.sizes().vec();
        shape[0] = n;
        whole.push_back(torch::empty(shape, g.options()));
      }
    if (got.size() != whole.size())
      throw Error(task.file.string() + ": the reference gave " + std::to_string(got.size()) +
                  " output(s) on one slice and " + std::to_string(whole.size()) + " on another");
    for (size_t o = 0; o < got.size(); ++o) {
      torch::Tensor into = whole[o].narrow(0, start, length);
      if (!got[o].sizes().equals(into.sizes()))
        throw Error(task.file.string() + ": batch_dim '" + task.batch_dim +
                    "': the reference's output " + std::to_string(o) + " has shape " +
                    c10::str(got[o].sizes()) + " on batch indices " + std::to_string(start) + ".." +
                    std::to_string(start + length - 1) + ", not " + c10::str(into.sizes()));
      into.copy_(got[o]);
    }
  }
  return whole;
}

}  // namespace

SlicedResult run_in_batch_slices(const tasks::Task& task, const TensorsFn& run,
                                 const std::vector<torch::Tensor>& inputs,
                                 const std::function<void()>& release) {
  const int64_t n = !inputs.empty() && inputs[0].dim() > 0 ? inputs[0].size(0) : 0;
  try {
    return {run(inputs), 0};
  } catch (const std::exception& e) {
    if (task.batch_dim.empty() || n < 2 || !is_out_of_memory(e)) throw;
  }
  for (int64_t slice = (n + 1) / 2;; slice = (slice + 1) / 2) {
    release();
    try {
      return {run_sliced(task, run, inputs, n, slice), slice};
    } catch (const std::exception& e) {
      if (slice == 1 || !is_out_of_memory(e)) throw;
    }
  }
}

}  // namespace kforge::verify
