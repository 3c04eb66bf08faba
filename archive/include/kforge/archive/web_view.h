// The web view's read model (browse/, `kforge serve`): what its pages show that the archive's
// general reads do not. Every "best" is the winner rule's (kforge/archive/winner.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kforge/archive/archive.h"

namespace kforge::archive {

// One candidate as the pages list it.
struct CandidateLine {
  CandidateId id;
  std::string task;  // suite/name
  int64_t generation = 0, island = 0;
  std::string model, prompt_kind, created_at;
  // Its newest verdict, else "screened: " and its newest screen's, else "compile_error" when a
  // compile failed, else "not judged".
  std::string outcome;
  std::optional<double> time_ms;  // of its newest evaluation
  BaselineTimes baselines;        // of its newest evaluation
};

// A task's best kernel of one run (the winner rule over the run's candidates).
struct RunBestKernel {
  std::string task;
  CandidateId candidate;
  std::optional<double> time_ms;
  BaselineTimes baselines;
};

// Per run id, each task's best kernel of the run, the largest speedup over the best baseline first.
std::map<int64_t, std::vector<RunBestKernel>> run_bests(Archive& ar);
// The run's newest candidates, newest first.
std::vector<CandidateLine> newest_candidates(Archive& ar, RunId run, size_t limit);
// Every suite in the archive, by name.
std::vector<std::string> suites(Archive& ar);
// The tasks (suite/name) carrying `tag`.
std::set<std::string> tasks_tagged(Archive& ar, const std::string& tag);
// Every candidate of the task (all its versions), oldest first.
std::vector<CandidateLine> task_candidates(Archive& ar, const std::string& suite,
                                           const std::string& name);

// What the task page says about the task itself: its newest version's summary, tags and
// reference, and the timed dims and baselines of that version's newest evaluation with baselines
// (on the device it ran on).
struct TaskInfo {
  std::string summary, reference, version;
  std::vector<std::string> tags;
  std::string dims;    // {"N": 4096}, as stored; "" without an evaluation
  std::string device;  // the GPU's name; "" without an evaluation
  BaselineTimes baselines;
};
std::optional<TaskInfo> task_info(Archive& ar, const std::string& suite, const std::string& name);

// A point of a best-so-far curve: after `generation`, the best kernel so far, its time and
// baselines.
struct GenerationBest {
  int64_t generation = 0;
  CandidateId candidate;
  std::optional<double> time_ms;
  BaselineTimes baselines;
};
// Per island, the best so far (the winner rule) of the task's newest version after each generation,
// from the island's first winner to its last generation.
std::map<int64_t, std::vector<GenerationBest>> task_best_by_generation(Archive& ar,
                                                                       const std::string& suite,
                                                                       const std::string& name);

// The candidate's parents (`parents`) or children, by id.
std::vector<CandidateLine> relatives(Archive& ar, CandidateId id, bool parents);

}  // namespace kforge::archive
