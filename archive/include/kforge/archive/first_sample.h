// A task's first sample (issue 38; docs/results.md, "The field's metrics"): KernelBench reports its
// metrics on the first kernel the model wrote for a problem as well as on the best of all attempts.
// Here a task's first sample is the first model-written candidate of the task version (a prompt
// kind a model answers: translate, optimize, crossover, repair_compile, repair_wrong, idea; a model
// named, not "human"; made or verified by kforge), ordered by run (candidates of no run after every
// run's), generation and id: per run for `kforge report`, the archive's earliest for `kforge
// archive results`. It is judged by
// - its full evaluation when it has one (not an imported claim): correct when one of them has the
//   outcome correct and a time, judged then by the newest such one, with that evaluation's
//   baselines;
// - else its newest screen (the loop judges in full only its top screens): the screen's outcome
//   decides, its median is the time, against the baselines of the task version's newest evaluation
//   on the screen's GPU that has baselines (one of the screen's harness version first);
// - a task without a model-written kernel, or whose first one was neither judged nor screened,
//   counts as not correct (KernelBench's denominator: the problem still counts).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kforge/archive/archive.h"
#include "kforge/archive/field_metrics.h"

namespace kforge::archive {

struct FirstSample {
  std::optional<CandidateId> candidate;  // none: no model-written kernel
  std::string judged_by;                 // "evaluation", "screen", or "" (neither)
  std::string outcome;                   // the judgment's or the screen's; "" when neither
  ProblemResult result;  // task (suite/name), correct, time_ms (when correct), baselines
};

// Each task of the run (a task with a candidate of the run), by task name: its first sample among
// the run's candidates.
std::vector<FirstSample> run_first_samples(Archive& ar, RunId run);

// Each task of the suite (its newest version, as Archive::results lists them), by name: its first
// sample among every candidate the archive has of that version.
std::vector<FirstSample> suite_first_samples(Archive& ar, const std::string& suite);

}  // namespace kforge::archive
