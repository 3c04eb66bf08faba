#include "kforge/archive/export_view.h"

#include "baseline_rows.h"
#include "best.h"
#include "database_of.h"
#include "stored_json.h"

namespace kforge::archive {

namespace {

detail::BestScope best_scope(const ExportScope& scope) {
  detail::BestScope s;
  s.admission_required = scope.admission_required;
  s.harness_version = scope.harness_version;
  s.archs = scope.archs;
  return s;
}

}  // namespace

std::vector<ExportKernel> export_kernels(Archive& ar, const ExportScope& scope) {
  Database& db = detail::database_of(ar);
  if (scope.archs.empty()) return {};
  Statement s = db.prepare(
      "WITH newest AS (" + std::string(detail::kNewestTasks) + "), best AS (" +
      detail::best_evaluations(best_scope(scope)) +
      ") SELECT t.suite || '/' || t.name, t.definition, t.version, c.id, c.identity, c.source, "
      "c.plan, c.tunables, c.model, c.prompt_kind, c.run_id, c.generation, e.admitted, e.time_ms, "
      "e.roofline_fraction, d.name, d.arch, d.driver, e.toolchain, e.harness_version, "
      "e.created_at, e.id "
      "FROM newest t JOIN best b ON b.task_id = t.id JOIN evaluations e ON e.id = b.evaluation_id "
      "JOIN candidates c ON c.id = e.candidate_id JOIN devices d ON d.id = e.device_id "
      "ORDER BY t.suite, t.name");
  std::vector<ExportKernel> out;
  std::vector<std::optional<int64_t>> evaluations;
  while (s.step()) {
    ExportKernel k;
    k.task = s.text(0);
    k.definition = s.text(1);
    k.version = s.text(2);
    k.candidate = CandidateId{s.integer(3)};
    k.identity = s.text(4);
    k.source = s.text(5);
    k.plan = s.text(6);
    k.tunables = stored_json(db, s, 7, "candidates", "tunables", s.integer(3));
    k.model = s.text(8);
    k.prompt_kind = s.text(9);
    if (!s.is_null(10)) k.run = s.integer(10);
    k.generation = s.integer(11);
    k.admitted = s.integer(12) != 0;
    k.time_ms = s.maybe_real(13);
    k.roofline_fraction = s.maybe_real(14);
    k.device = s.text(15);
    k.arch = s.text(16);
    k.driver = s.is_null(17) ? "" : s.text(17);
    k.toolchain = stored_json(db, s, 18, "evaluations", "toolchain", s.integer(21));
    k.harness_version = s.integer(19);
    k.judged_at = s.text(20);
    evaluations.push_back(s.integer(21));
    out.push_back(std::move(k));
  }
  std::vector<BaselineTimes> baselines = detail::evaluation_baselines(db, evaluations);
  for (size_t i = 0; i < out.size(); ++i) out[i].baselines = std::move(baselines[i]);
  return out;
}

std::map<std::string, std::vector<int64_t>> winning_harness_versions(Archive& ar,
                                                                     const ExportScope& scope) {
  std::map<std::string, std::vector<int64_t>> out;
  if (scope.archs.empty()) return out;
  Statement s = detail::database_of(ar).prepare(
      "WITH newest AS (" + std::string(detail::kNewestTasks) +
      ") SELECT DISTINCT t.suite || '/' || t.name, e.harness_version FROM newest t JOIN "
      "candidates c ON c.task_id = t.id JOIN evaluations e ON e.candidate_id = c.id JOIN devices "
      "d ON d.id = e.device_id WHERE " +
      winner_condition(scope.admission_required) +
      " AND d.arch IN (SELECT value FROM json_each(?)) ORDER BY 2");
  s.bind(1, nlohmann::json(scope.archs).dump());
  while (s.step()) out[s.text(0)].push_back(s.integer(1));
  return out;
}

std::vector<std::string> task_names(Archive& ar) {
  std::vector<std::string> out;
  for (Statement s = detail::database_of(ar).prepare(
           "SELECT DISTINCT suite || '/' || name FROM tasks ORDER BY 1");
       s.step();)
    out.push_back(s.text(0));
  return out;
}

}  // namespace kforge::archive
