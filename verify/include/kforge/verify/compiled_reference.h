// torch.compile's baseline (docs/decisions.md, "The torch.compile baseline"): a task's reference
// compiled ahead of time by TorchInductor into an AOTInductor package (.pt2) by a Python helper
// (verify/inductor/kforge_inductor.py) run with the user's PyTorch, cached per task version, input
// shapes, math mode, GPU kind and PyTorch version, and loaded into the judge from C++ so it is
// timed exactly as eager is. Where no Python with the same PyTorch as kforge's LibTorch is found,
// or LibTorch is too old to load packages, there is no such baseline and the reason says why.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kforge/tasks/task.h"

namespace kforge::verify {

struct CompiledOptions {
  bool enabled = true;
  std::string python;  // default: python_candidates() (common/paths.h)
  std::chrono::seconds build_timeout{1200};
  int build_jobs =
      0;  // compiled_packages' builds at a time; 0: one per CPU (each build uses one thread)
  std::string off_reason =
      "turned off";  // the absent reason when !enabled (a command names its flag)
};

// "" when this LibTorch can load AOTInductor packages, else why it cannot.
std::string compiled_unsupported();

// A package, or why there is none.
struct CompiledPackage {
  std::string path;    // the .pt2; "" when absent
  std::string absent;  // why there is no package ("" when there is)
  std::string log;     // the helper's log (warnings, a traceback)
  double build_s = 0;  // seconds the helper spent building it now (0: from the cache)
};

// The package of `task`'s reference for inputs shaped as `inputs` (on `device`, whose GPU kind
// is part of the key): from the cache (cache_dir()/compiled), else built now (which takes from
// seconds to minutes). A failed build is cached too, with its reason, until the task, the
// helper or PyTorch changes.
CompiledPackage compiled_package(const tasks::Task& task, const std::vector<torch::Tensor>& inputs,
                                 int device, const CompiledOptions& options = {});

// compiled_package for each task at its timed dims (its declared shapes and dtypes),
// options.build_jobs builds at a time, before a judge needs them: the judge builds a missing one
// when it first times a task and waits for it, one task at a time. `done` (when given) hears of
// each package as it is ready, from the building thread (one call at a time).
std::vector<CompiledPackage> compiled_packages(
    const std::vector<const tasks::Task*>& tasks, int device, const CompiledOptions& options = {},
    const std::function<void(const tasks::Task&, const CompiledPackage&)>& done = {});

// A package loaded into this process; run() enqueues it on the current CUDA stream.
class CompiledReference {
 public:
  CompiledReference(const std::string& package, int device);  // throws kforge::Error
  ~CompiledReference();
  CompiledReference(const CompiledReference&) = delete;
  CompiledReference& operator=(const CompiledReference&) = delete;
  std::vector<torch::Tensor> run(const std::vector<torch::Tensor>& inputs) const;

 private:
  struct Loaded;
  std::unique_ptr<Loaded> loaded_;
};

}  // namespace kforge::verify
