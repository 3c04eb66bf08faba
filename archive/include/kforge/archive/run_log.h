// The search loop's log in the archive, as ninja's BuildLog is a build's: what the next session of
// a run reads back so it repeats no work. A run's row (config, status, what it spent), its
// candidates' screens, and the records a resumed run reads instead of measuring again: candidates
// by identity, screens and judgments per GPU kind and harness version. evolve/ writes and reads its
// records only through this class.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kforge/archive/archive.h"

namespace kforge::archive {

// A run's status in the runs table.
enum class RunStatus { Running, Finished, Failed, Interrupted };
const char* to_string(RunStatus s);  // "running", "finished", ...
std::optional<RunStatus> run_status_from_string(const std::string& s);  // none: not a status

// A screen: one tune point's short pass (correctness on the timed dims, then a short timing).
struct ScreenRecord {
  std::string outcome;              // docs/design.md, Outcomes
  std::optional<double> median_ms;  // only where the point screened correct
  std::string summary;              // the verdict's; its first 300 bytes are stored
};

// What the loop reads back of a recorded judgment.
struct JudgmentRecord {
  std::string outcome;
  std::optional<double> time_ms, roofline_fraction;
  BaselineTimes baselines;
  bool admitted = false;
  bool flagged = false;  // the evaluation carries a flag
};

// A correct kernel of a task version the archive holds: a starting point for the loop.
struct StartingKernel {
  CandidateId id;
  std::string source, plan;  // the plan as stored (JSON text)
  nlohmann::json tunables = nlohmann::json::object();
};

class RunLog {
 public:
  explicit RunLog(Archive& archive) : archive_(archive) {}

  // A new run's row, status running, with its config; returns its id.
  RunId start(const nlohmann::json& config);
  // The config recorded when the run started; none when the archive has no such run.
  std::optional<nlohmann::json> config(RunId run);
  // Replaces the run's recorded config (a resumed run given new budgets keeps them).
  void set_config(RunId run, const nlohmann::json& config);
  // The run's status and what it has spent; finished_at is stamped, or cleared for Running.
  void set_status(RunId run, RunStatus status, const nlohmann::json& used);
  // The wall time its earlier sessions recorded (budgets_used.wall_s); 0 when none.
  double recorded_wall_s(RunId run);
  // The evaluations (measured and read back) the run had spent when it last stopped; 0 if unknown
  // (a run killed before it could say).
  int64_t recorded_evaluations(RunId run);

  // The candidate stored for the task under this identity.
  std::optional<CandidateId> find_candidate(TaskId task, const std::string& identity);
  // The screen recorded for the candidate on a GPU of `device`'s kind (the same name and arch;
  // `device`'s own first) at this harness version: the first recorded.
  std::optional<ScreenRecord> find_screen(CandidateId candidate, DeviceId device,
                                          int harness_version);
  // Records a screen measured on `device` in `run`.
  void add_screen(CandidateId candidate, DeviceId device, RunId run, int harness_version,
                  const ScreenRecord& screen);
  // The newest evaluation made here (not imported) of the candidate on a GPU of `device`'s kind
  // (`device`'s own first) at this harness version.
  std::optional<JudgmentRecord> find_judgment(CandidateId candidate, DeviceId device,
                                              int harness_version);

  // Up to `limit` correct, timed kernels of this task version made by kforge (not imported
  // claims), distinct code (source and plan), the fastest first; none of run `outside`'s own
  // candidates (a resumed run starts from what it started from the first time).
  std::vector<StartingKernel> starting_kernels(const tasks::Task& task, size_t limit,
                                               std::optional<RunId> outside);

 private:
  Archive& archive_;
};

}  // namespace kforge::archive
