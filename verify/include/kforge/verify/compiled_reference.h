// torch.compile's baselines (docs/decisions.md, "The torch.compile baseline"): a task's reference
// compiled ahead of time by TorchInductor into an AOTInductor package (.pt2) by a Python helper
// (verify/inductor/kforge_inductor.py) run with the user's PyTorch, cached per task version, input
// shapes, math mode, torch.compile mode, GPU kind and PyTorch version, and loaded into the judge
// from C++ so it is timed exactly as eager is. One package per compiled kind of baseline
// (common/baseline.h): BaselineKind::Compiled in torch.compile's default mode,
// BaselineKind::CompiledMaxAutotune with max-autotune's options (without CUDA graphs, which
// AOTInductor has not). Where no Python with the same PyTorch as kforge's LibTorch is found, or
// LibTorch is too old to load packages, there is no such baseline and the reason says why.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/baseline.h"
#include "kforge/tasks/task.h"

namespace kforge::verify {

struct CompiledOptions {
  bool enabled = true;  // false: every compiled kind absent, `off_reason` saying why
  // false: BaselineKind::CompiledMaxAutotune absent, `max_autotune_off_reason` saying why (its
  // builds take several times the default mode's: it autotunes every GEMM and reduction)
  bool max_autotune = true;
  std::string python;  // default: python_candidates() (common/paths.h)
  std::chrono::seconds build_timeout{1200};
  int build_jobs =
      0;  // compiled_packages' builds at a time; 0: one per CPU (each build uses one thread)
  std::string off_reason =
      "turned off";  // the absent reason when !enabled (a command names its flag)
  std::string max_autotune_off_reason = "max-autotune turned off";  // when !max_autotune
  // Polled while packages are built (every quarter second): once it returns true no build starts,
  // the ones running are killed, and their packages are absent with kCompiledInterrupted (not
  // cached: the next command builds them). A command that ends its run on Ctrl-C or SIGTERM
  // (`kforge evolve`) sets it, so its builds do not hold the stop up for minutes.
  std::function<bool()> stop;
};

// The absent reason of a package whose build CompiledOptions::stop ended or never started.
inline constexpr const char* kCompiledInterrupted = "not built: the command was interrupted";

// The torch.compile mode a kind's package is built in ("default", "max-autotune"); nullopt for a
// kind that is no package (eager, scripted).
std::optional<std::string_view> compiled_mode(BaselineKind kind);
// The kinds that are packages (compiled_mode has one), in baseline_kinds() order.
std::vector<BaselineKind> compiled_kinds();

// "" when this LibTorch can load AOTInductor packages, else why it cannot.
std::string compiled_unsupported();

// A package, or why there is none.
struct CompiledPackage {
  BaselineKind kind = BaselineKind::Compiled;
  std::string path;    // the .pt2; "" when absent
  std::string absent;  // why there is no package ("" when there is)
  std::string log;     // the helper's log (warnings, a traceback)
  double build_s = 0;  // seconds the helper spent building it now (0: from the cache)
  // A failure of the moment, not the task's: the GPU's memory was taken (by the builds beside this
  // one, which autotune on the GPU too). Not cached; compiled_packages tries again, fewer at once.
  bool transient = false;
};

// The package of `task`'s reference of compiled kind `kind` (compiled_kinds(); throws
// kforge::Error for another) for inputs shaped as `inputs` (on `device`, whose GPU kind is part of
// the key): from the cache (cache_dir()/compiled), else built now (which takes from seconds to
// minutes, max-autotune's longer). A failed build is cached too, with its reason, until the
// task, the helper or PyTorch changes.
CompiledPackage compiled_package(const tasks::Task& task, const std::vector<torch::Tensor>& inputs,
                                 int device, BaselineKind kind,
                                 const CompiledOptions& options = {});

// compiled_package for each task at its timed dims (its declared shapes and dtypes) and each of
// compiled_kinds(), options.build_jobs builds at a time, before a judge needs them: the judge
// builds a missing one when it first times a task and waits for it, one at a time. The packages
// come back task by task, each task's in compiled_kinds() order (a kind turned off: absent, its
// off reason saying so). `done` (when given) hears of each package as it is ready, from the
// building thread (one call at a time).
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
