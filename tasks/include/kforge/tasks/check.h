// `kforge tasks check`: runs a task's reference on its configurations and flags tasks a kernel
// could satisfy without doing the work (docs/task-format.md, "Degenerate tasks").
#pragma once

#include <torch/types.h>

#include <functional>
#include <string>
#include <vector>

#include "kforge/tasks/generator.h"
#include "kforge/tasks/task.h"

namespace kforge::tasks {

enum class DimsSelection { Timed, Check, All };

struct OutputStats {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;
  double min = 0, max = 0, mean = 0, rms = 0;
  int64_t nan = 0, inf = 0;
};

struct ConfigResult {
  Dims dims;
  bool timed = false;  // the timed configuration (not a [check] one)
  std::vector<OutputStats> outputs;
  double reference_ms = 0;  // median wall time of the reference (synchronised), rough
  double bytes_moved = 0;   // min_bytes, else inputs read once + outputs written once
  std::string error;        // the reference failed
};

struct TaskCheck {
  std::string task;
  std::vector<ConfigResult> configs;
  std::vector<std::string> problems;  // failures and degeneracies; empty means the task is usable
  std::vector<std::string> notes;     // e.g. float16 run upcast on the CPU
  bool ok() const { return problems.empty(); }
};

// The timed dims a CPU check runs again to confirm a degeneracy (docs/task-format.md).
inline constexpr int64_t kRecheckTimedBytes = int64_t{64} << 20;
inline constexpr double kRecheckSeconds = 10;  // ...and a run there should take about this at most

struct CheckOptions {
  torch::Device device = torch::kCPU;
  DimsSelection dims = DimsSelection::Check;
  InputGenerator generator;  // default: generate_cpu, moved to `device`
  uint64_t seed = 1;
  int timing_runs = 0;  // > 0: time the reference this many times per configuration
  // Called before each configuration's reference runs with where they run ("check dims (N=4)"),
  // e.g. for a watchdog that names the configuration a reference hangs on.
  std::function<void(const std::string& where)> on_config;
  // A degeneracy found at check dims (DimsSelection::Check) is checked again at the timed dims
  // when their inputs take at most this many bytes (0: never); one that does not hold there is a
  // note, not a problem.
  int64_t recheck_timed_bytes = kRecheckTimedBytes;
};

// Thresholds (docs/design.md, Defaults).
inline constexpr double kDegenerateSpread = 1e-6;
inline constexpr double kUnusedInputChange = 1e-6;
// A batch_dim's slice may differ from the whole by rounding (another blocking of a matmul).
inline constexpr double kBatchSliceChange = 1e-5;

TaskCheck check_task(const Task& task, const CheckOptions& options);

// Relative spread of a tensor's values: (max - min) / max(|max|, |min|); 0 for all-zero.
double relative_spread(const torch::Tensor& t);

}  // namespace kforge::tasks
