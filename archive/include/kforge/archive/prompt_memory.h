// What prompts remember of a task, as rows (evolve/src/prompt_memory.cpp puts them in words): the
// reference times measured for a GPU kind, the newest judged candidate's numbers, and the task's
// recent failures. Each read is limited to what a resumed run reads again: rows of earlier runs (or
// of none), and the run's own rows of generations before the child's.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kforge/archive/archive.h"

namespace kforge::archive {

// The reference times that prompts quote, from the baselines table (an eager time always).
struct QuotedBaseline {
  BaselineTimes baselines;  // each kind's time or why it has none
  std::string device_name;  // the GPU that timed them
};

// The references' times as the newest judgment of the task measured them beside a candidate.
struct JudgedReferences {
  CandidateId candidate;
  std::string device_name;         // "a GPU" where the evaluation names none
  BaselineTimes baselines;         // an eager time always; absent kinds as the judge said
  std::optional<double> floor_ms;  // the roofline floor: roofline_fraction x time
};

// Where a failure was recorded; ties at one instant sort in this order.
enum class FailureSource { Evaluation = 0, Screen = 1, Compile = 2 };

// One failure of a candidate of the task: an evaluation or a screen with a failing outcome, or a
// compile report with errors.
struct FailureRecord {
  FailureSource source = FailureSource::Evaluation;
  std::string created_at;
  int64_t row = 0;  // the row's id in its table
  CandidateId candidate;
  std::optional<RunId> run;
  int generation = 0;
  std::string outcome;                                 // evaluations and screens
  nlohmann::json evidence = nlohmann::json::object();  // evaluations ({} where it is not JSON)
  std::string summary;                                 // screens: the verdict's summary
  std::string stage, log;                              // compiles: the failed stage, NVRTC's log
  nlohmann::json errors;                               // compiles (null where it is not JSON)
};

class PromptMemory {
 public:
  explicit PromptMemory(Archive& archive) : archive_(archive) {}

  // The first baselines timed with an eager time for this task version at its timed dims, on a
  // GPU of `device`'s kind (the same name and arch), in `math_mode`.
  std::optional<QuotedBaseline> baseline(const tasks::Task& task, DeviceId device,
                                         const std::string& math_mode);
  // The newest evaluation with an eager time of this task version (not an imported claim), of a
  // candidate made outside any run or in a run before `before_run` (any run when none).
  std::optional<JudgedReferences> newest_judged(const tasks::Task& task,
                                                std::optional<RunId> before_run);
  // This task version's failures, newest first (up to 64 of each source), not imported claims and
  // not the outcomes that teach nothing about the code (correct, harness_error, does_not_fit).
  // With `run`: only rows of candidates of earlier runs (or of none) made before `run` started, and
  // of `run`'s own candidates of generations before `generation` (none of them without one).
  std::vector<FailureRecord> failures(const tasks::Task& task, std::optional<RunId> run,
                                      std::optional<int> generation);

 private:
  Archive& archive_;
};

}  // namespace kforge::archive
