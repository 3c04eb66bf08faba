#include "kforge/archive/report.h"

#include "baseline_rows.h"
#include "best.h"
#include "database_of.h"
#include "stored_json.h"

namespace kforge::archive {

namespace {

// `field`: each task's best by the field's metrics' rule instead of the winner rule, among the
// candidates of generations up to `max_generation` when given.
std::vector<RunTask> run_tasks(Database& db, RunId run, bool field = false,
                               std::optional<int64_t> max_generation = std::nullopt) {
  detail::BestScope scope;
  scope.run = run.value;
  scope.field = field;
  scope.max_generation = max_generation;
  Statement s = db.prepare(
      "WITH best AS (" + detail::best_evaluations(scope) +
      ") SELECT t.suite || '/' || t.name, e.candidate_id, e.time_ms, e.id, e.roofline_fraction, "
      "(SELECT count(*) FROM candidates c WHERE c.task_id = t.id AND c.run_id = ?1), "
      "(SELECT count(*) FROM screens s JOIN candidates c ON c.id = s.candidate_id WHERE "
      "c.task_id = t.id AND s.run_id = ?1 AND s.median_ms IS NULL) "
      "FROM tasks t LEFT JOIN best b ON b.task_id = t.id LEFT JOIN evaluations e ON e.id = "
      "b.evaluation_id WHERE t.id IN (SELECT task_id FROM candidates WHERE run_id = ?1) "
      "ORDER BY 1, t.id");
  s.bind(1, run.value);
  std::vector<RunTask> out;
  std::vector<std::optional<int64_t>> evaluations;
  while (s.step()) {
    RunTask t;
    t.task = s.text(0);
    evaluations.push_back(std::nullopt);
    if (!s.is_null(1)) {
      t.best = RunBest{CandidateId{s.integer(1)}, s.real(2), s.maybe_real(4), {}};
      evaluations.back() = s.integer(3);
    }
    t.candidates = s.integer(5);
    t.failed_screens = s.integer(6);
    out.push_back(t);
  }
  std::vector<BaselineTimes> baselines = detail::evaluation_baselines(db, evaluations);
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].best) out[i].best->baselines = std::move(baselines[i]);
  return out;
}

std::vector<RunOutcome> run_outcomes(Database& db, RunId run) {
  Statement s = db.prepare(
      "SELECT e.outcome, count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id "
      "WHERE c.run_id = ?1 GROUP BY e.outcome UNION ALL SELECT 'screen: ' || s.outcome, count(*) "
      "FROM screens s WHERE s.run_id = ?1 GROUP BY s.outcome ORDER BY 1");
  s.bind(1, run.value);
  std::vector<RunOutcome> out;
  while (s.step()) out.push_back({s.text(0), s.integer(1)});
  return out;
}

std::vector<RunProposer> run_proposers(Database& db, RunId run) {
  Statement s = db.prepare(
      "SELECT c.prompt_kind, c.model, count(*), sum(EXISTS (SELECT 1 FROM screens s WHERE "
      "s.candidate_id = c.id AND s.outcome = 'correct') OR EXISTS (SELECT 1 FROM evaluations e "
      "WHERE e.candidate_id = c.id AND e.outcome = 'correct')) FROM candidates c WHERE c.run_id = "
      "? GROUP BY 1, 2 ORDER BY 1, 2");
  s.bind(1, run.value);
  std::vector<RunProposer> out;
  while (s.step()) out.push_back({s.text(0), s.text(1), s.integer(2), s.integer(3)});
  return out;
}

std::vector<std::pair<std::string, std::vector<RunProgress>>> run_progress(Database& db,
                                                                           RunId run) {
  Statement s = db.prepare(
      "SELECT t.suite || '/' || t.name, c.generation, c.id, e.id, e.time_ms, c.prompt_kind FROM "
      "evaluations e JOIN candidates c ON c.id = "
      "e.candidate_id JOIN tasks t ON t.id = c.task_id WHERE c.run_id = ? AND " +
      winner_condition() + " ORDER BY 1, c.generation, " + detail::kBestOrder);
  s.bind(1, run.value);
  std::vector<std::pair<std::string, std::vector<RunProgress>>> out;
  for (const auto& [task, curve] : detail::best_so_far(db, s)) {
    std::vector<RunProgress> steps;
    for (const detail::BestSoFar& p : curve)
      steps.push_back({p.generation, CandidateId{p.candidate}, p.time_ms, p.baselines,
                       p.prompt_kind, p.improved});
    out.emplace_back(task, std::move(steps));
  }
  return out;
}

std::vector<LineageEntry> lineage_of(Archive& ar, CandidateId best) {
  std::vector<LineageEntry> out;
  for (CandidateId c : ar.lineage(best)) {
    Statement s = detail::database_of(ar).prepare(
        "SELECT prompt_kind, tunables FROM candidates WHERE id = ?");
    s.bind(1, c.value);
    if (!s.step()) continue;
    out.push_back({c, s.text(0),
                   stored_json(detail::database_of(ar), s, 1, "candidates", "tunables", c.value)});
  }
  return out;
}

}  // namespace

std::optional<RunReport> run_report(Archive& ar, RunId run) {
  RunReport r;
  for (const nlohmann::json& row : ar.runs())
    if (row["id"] == run.value) r.run = row;
  if (r.run.is_null()) return std::nullopt;
  Database& db = detail::database_of(ar);
  r.tasks = run_tasks(db, run);
  r.first_samples = run_first_samples(ar, run);
  r.outcomes = run_outcomes(db, run);
  r.proposers = run_proposers(db, run);
  Statement last = db.prepare("SELECT max(generation) FROM candidates WHERE run_id = ?");
  last.bind(1, run.value);
  if (last.step() && !last.is_null(0)) r.last_generation = last.integer(0);
  for (int64_t g = 0; g <= r.last_generation; ++g) {
    std::vector<std::optional<RunBest>> bests;
    for (RunTask& t : run_tasks(db, run, /*field=*/true, g)) bests.push_back(std::move(t.best));
    r.field_best_by_generation.push_back(std::move(bests));
  }
  // Up to the last generation is every candidate of the run: each task's best by the field's rule.
  if (!r.field_best_by_generation.empty())
    for (size_t i = 0; i < r.tasks.size(); ++i)
      r.tasks[i].field_best = r.field_best_by_generation.back().at(i);
  r.progress = run_progress(db, run);
  for (const RunTask& t : r.tasks)
    if (t.best) r.lineage.emplace_back(t.task, lineage_of(ar, t.best->candidate));
  return r;
}

}  // namespace kforge::archive
