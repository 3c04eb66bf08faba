// The winner rule's SQL for the read models (archive/ only): each task's best evaluation within a
// scope, the task versions that count, and the best so far generation by generation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kforge/archive/sqlite.h"
#include "kforge/common/baseline.h"

namespace kforge::archive::detail {

// The rule's order among winners: the fastest first; on equal times, the one judged first.
inline constexpr const char* kBestOrder = "e.time_ms ASC, e.id ASC";

// Where a best is looked for: which winners count (the rule) and which candidates are in scope.
struct BestScope {
  bool admission_required = true;
  bool field = false;  // the field's metrics' rule (field_condition) instead of the winner rule
  std::optional<int64_t> run;              // candidates of this run only
  std::optional<int64_t> max_generation;   // candidates of generations up to this one only
  std::optional<int64_t> harness_version;  // evaluations by this harness only
  std::vector<std::string> archs;          // evaluations on GPUs of these architectures only
};

// A query of rows (task_id, evaluation_id): each task version's best evaluation in `scope`.
std::string best_evaluations(const BestScope& scope);

// A query of every task row (t.*) that is its task's newest version: a task edited is a new
// version, and "the task" is the newest one the archive has (results, leaderboard, export).
extern const char* const kNewestTasks;

// The query's quoting of a text value: 'it''s'.
std::string sql_text(const std::string& value);

// One point of a best-so-far curve: after `generation`, the fastest winner so far (the rule), and
// whether it improved in that generation.
struct BestSoFar {
  int64_t generation = 0;
  int64_t candidate = 0, evaluation = 0;
  double time_ms = 0;
  BaselineTimes baselines;  // the evaluation's
  std::string prompt_kind;
  bool improved = false;
};

// Reads winners (columns: group key text, generation, candidate, evaluation, time_ms, prompt_kind)
// ordered by group, generation and then kBestOrder, into each group's curve: a point for every
// generation that has a winner, with its evaluation's baselines; the last point is the group's
// best.
std::vector<std::pair<std::string, std::vector<BestSoFar>>> best_so_far(Database& db,
                                                                        Statement& winners);

}  // namespace kforge::archive::detail
