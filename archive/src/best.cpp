#include "best.h"

#include "baseline_rows.h"
#include "kforge/archive/winner.h"

namespace kforge::archive::detail {

const char* const kNewestTasks =
    "SELECT t.* FROM tasks t WHERE t.id = (SELECT t2.id FROM tasks t2 WHERE t2.suite = t.suite "
    "AND t2.name = t.name ORDER BY t2.created_at DESC, t2.id DESC LIMIT 1)";

std::string sql_text(const std::string& value) {
  std::string out = "'";
  for (char ch : value) out += ch == '\'' ? std::string("''") : std::string(1, ch);
  return out + "'";
}

std::string best_evaluations(const BestScope& scope) {
  std::string where = scope.field ? field_condition() : winner_condition(scope.admission_required);
  if (scope.run) where += " AND c.run_id = " + std::to_string(*scope.run);
  if (scope.max_generation)
    where += " AND c.generation <= " + std::to_string(*scope.max_generation);
  if (scope.harness_version)
    where += " AND e.harness_version = " + std::to_string(*scope.harness_version);
  if (!scope.archs.empty()) {
    std::string archs;
    for (const std::string& a : scope.archs) archs += (archs.empty() ? "" : ", ") + sql_text(a);
    where += " AND e.device_id IN (SELECT id FROM devices WHERE arch IN (" + archs + "))";
  }
  return std::string(
             "SELECT task_id, evaluation_id FROM (SELECT c.task_id, e.id AS evaluation_id, "
             "ROW_NUMBER() OVER (PARTITION BY c.task_id ORDER BY ") +
         kBestOrder +
         ") AS k FROM evaluations e JOIN candidates c ON c.id = e.candidate_id WHERE " + where +
         ") WHERE k = 1";
}

std::vector<std::pair<std::string, std::vector<BestSoFar>>> best_so_far(Database& db,
                                                                        Statement& winners) {
  std::vector<std::pair<std::string, std::vector<BestSoFar>>> out;
  while (winners.step()) {
    std::string group = winners.text(0);
    if (out.empty() || out.back().first != group) out.push_back({group, {}});
    std::vector<BestSoFar>& curve = out.back().second;
    BestSoFar p;
    p.generation = winners.integer(1);
    p.candidate = winners.integer(2);
    p.evaluation = winners.integer(3);
    p.time_ms = winners.real(4);
    p.prompt_kind = winners.text(5);
    // Rows come best first within a generation: the first of a generation decides it.
    if (!curve.empty() && curve.back().generation == p.generation) continue;
    const BestSoFar* best = curve.empty() ? nullptr : &curve.back();
    p.improved = !best || p.time_ms < best->time_ms ||
                 (p.time_ms == best->time_ms && p.evaluation < best->evaluation);
    if (!p.improved) {
      BestSoFar same = *best;
      same.generation = p.generation;
      same.improved = false;
      p = same;
    }
    curve.push_back(p);
  }
  std::vector<std::optional<int64_t>> evaluations;
  for (const auto& [group, curve] : out)
    for (const BestSoFar& p : curve) evaluations.push_back(p.evaluation);
  std::vector<BaselineTimes> baselines = evaluation_baselines(db, evaluations);
  size_t i = 0;
  for (auto& [group, curve] : out)
    for (BestSoFar& p : curve) p.baselines = std::move(baselines[i++]);
  return out;
}

}  // namespace kforge::archive::detail
