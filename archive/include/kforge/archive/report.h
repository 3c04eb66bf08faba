// `kforge report RUN`'s read model: what one evolve run made and how it fared, per task, with
// every "best" by the winner rule (kforge/archive/winner.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kforge/archive/archive.h"
#include "kforge/archive/first_sample.h"

namespace kforge::archive {

// A task's best kernel of the run, with the baselines it was judged against.
struct RunBest {
  CandidateId candidate;
  double time_ms = 0;
  std::optional<double> roofline_fraction;
  BaselineTimes baselines;  // speedups: baselines.speedup(kind, time_ms), best_speedup(time_ms)
};

struct RunTask {
  std::string task;  // suite/name
  std::optional<RunBest> best;
  // The fastest kernel by the field's metrics' rule (field_condition in winner.h): it may be one
  // the winner rule refuses (not admitted, or `bitwise_unstable`).
  std::optional<RunBest> field_best;
  int64_t candidates = 0, failed_screens = 0;  // the run's candidates of the task; screens untimed
};

struct RunOutcome {
  std::string outcome;  // a judgment's outcome, or "screen: " and a screen's
  int64_t count = 0;
};

struct RunProposer {
  std::string kind, model;
  int64_t candidates = 0, correct = 0;  // correct: a screen or a judgment said so
};

// A task's best after a generation of the run: the kernel, its time, its baselines, and whether the
// generation improved on the one before (then `prompt_kind` made the new best).
struct RunProgress {
  int64_t generation = 0;
  CandidateId candidate;
  double time_ms = 0;
  BaselineTimes baselines;
  std::string prompt_kind;
  bool improved = false;
};

struct LineageEntry {
  CandidateId candidate;
  std::string prompt_kind;
  nlohmann::json tunables;
};

struct RunReport {
  nlohmann::json run;          // its row of Archive::runs(): times, status, config, budgets used
  std::vector<RunTask> tasks;  // by task name
  // Each task's first sample among the run's candidates (kforge/archive/first_sample.h), in the
  // order of `tasks`.
  std::vector<FirstSample> first_samples;
  std::vector<RunOutcome> outcomes;
  std::vector<RunProposer> proposers;  // by kind and model
  int64_t last_generation = 0;
  // Each task's best by the field's rule among the candidates of generations 0..g, for g = 0 ..
  // last_generation: how the field's metrics moved (tasks in the order of `tasks`).
  std::vector<std::vector<std::optional<RunBest>>> field_best_by_generation;
  std::vector<std::pair<std::string, std::vector<RunProgress>>> progress;  // tasks with a winner
  // Each best's lineage, the best first and then its ancestors, nearest first.
  std::vector<std::pair<std::string, std::vector<LineageEntry>>> lineage;
};

// The run's report; none when the archive has no such run.
std::optional<RunReport> run_report(Archive& ar, RunId run);

}  // namespace kforge::archive
