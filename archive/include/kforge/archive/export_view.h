// The exporter's read model (`kforge export`): each task's best kernel (the winner rule,
// kforge/archive/winner.h, over the task's newest version) with what the package records of it.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kforge/archive/archive.h"

namespace kforge::archive {

// Which judgments may be exported: on GPUs of these architectures, by this harness version.
struct ExportScope {
  std::vector<std::string> archs;
  int64_t harness_version = 0;
  bool admission_required = true;  // false: `kforge export --include-unadmitted`
};

// A task's best kernel, its task and the judgment that made it the best.
struct ExportKernel {
  std::string task;  // suite/name
  std::string definition, version;
  CandidateId candidate;
  std::string identity, source, plan, model, prompt_kind;
  nlohmann::json tunables, toolchain;
  std::optional<int64_t> run;
  int64_t generation = 0, harness_version = 0;
  bool admitted = false;
  std::optional<double> time_ms, roofline_fraction;
  BaselineTimes baselines;  // speedups: baselines.speedup(kind, time_ms), best_speedup(time_ms)
  std::string device, arch, driver, judged_at;
};

// Each task's best kernel in `scope`, by task name; tasks without one are left out.
std::vector<ExportKernel> export_kernels(Archive& ar, const ExportScope& scope);
// Per task, the harness versions that judged a best in `scope` with any harness version, oldest
// first: what to say of a task with none at the asked version.
std::map<std::string, std::vector<int64_t>> winning_harness_versions(Archive& ar,
                                                                     const ExportScope& scope);
// Every task (suite/name) in the archive, by name.
std::vector<std::string> task_names(Archive& ar);

}  // namespace kforge::archive
