#include "kforge/archive/web_view.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "baseline_rows.h"
#include "best.h"
#include "database_of.h"

namespace kforge::archive {

namespace {

// A candidate `c` of task `t` as a CandidateLine, with its newest evaluation `e` (LEFT JOINed).
const std::string kLineColumns =
    "c.id, t.suite || '/' || t.name, c.generation, c.island, c.model, c.prompt_kind, c.created_at, "
    "COALESCE((SELECT outcome FROM evaluations WHERE candidate_id = c.id ORDER BY id DESC LIMIT "
    "1), "
    "(SELECT 'screened: ' || outcome FROM screens WHERE candidate_id = c.id ORDER BY id DESC LIMIT "
    "1), (SELECT 'compile_error' FROM compiles WHERE candidate_id = c.id AND ok = 0 ORDER BY id "
    "DESC LIMIT 1), 'not judged'), e.time_ms, e.id";
const std::string kNewestEvaluation =
    " LEFT JOIN evaluations e ON e.id = (SELECT max(id) FROM evaluations WHERE candidate_id = "
    "c.id)";

CandidateLine line_of(Statement& s) {
  CandidateLine l;
  l.id = CandidateId{s.integer(0)};
  l.task = s.text(1);
  l.generation = s.integer(2);
  l.island = s.integer(3);
  l.model = s.text(4);
  l.prompt_kind = s.text(5);
  l.created_at = s.text(6);
  l.outcome = s.text(7);
  l.time_ms = s.maybe_real(8);
  return l;
}

// The lines of a query over kLineColumns, each with its newest evaluation's baselines.
std::vector<CandidateLine> lines(Database& db, Statement& s) {
  std::vector<CandidateLine> out;
  std::vector<std::optional<int64_t>> evaluations;
  while (s.step()) {
    out.push_back(line_of(s));
    evaluations.push_back(s.is_null(9) ? std::nullopt : std::optional<int64_t>(s.integer(9)));
  }
  std::vector<BaselineTimes> baselines = detail::evaluation_baselines(db, evaluations);
  for (size_t i = 0; i < out.size(); ++i) out[i].baselines = std::move(baselines[i]);
  return out;
}

}  // namespace

std::map<int64_t, std::vector<RunBestKernel>> run_bests(Archive& ar) {
  Database& db = detail::database_of(ar);
  std::map<int64_t, std::vector<RunBestKernel>> out;
  for (Statement runs = db.prepare("SELECT id FROM runs ORDER BY id"); runs.step();) {
    detail::BestScope scope;
    scope.run = runs.integer(0);
    Statement s = db.prepare("WITH best AS (" + detail::best_evaluations(scope) +
                             ") SELECT t.suite || '/' || t.name, e.candidate_id, e.time_ms, e.id "
                             "FROM best b JOIN evaluations e ON e.id = b.evaluation_id JOIN tasks "
                             "t ON t.id = b.task_id ORDER BY 1, t.id");
    std::vector<RunBestKernel> bests;
    std::vector<std::optional<int64_t>> evaluations;
    while (s.step()) {
      bests.push_back({s.text(0), CandidateId{s.integer(1)}, s.maybe_real(2), {}});
      evaluations.push_back(s.integer(3));
    }
    if (bests.empty()) continue;
    std::vector<BaselineTimes> baselines = detail::evaluation_baselines(db, evaluations);
    for (size_t i = 0; i < bests.size(); ++i) bests[i].baselines = std::move(baselines[i]);
    // The largest speedup over the best baseline first (none: last), then by task.
    std::stable_sort(bests.begin(), bests.end(),
                     [](const RunBestKernel& a, const RunBestKernel& b) {
                       return detail::larger_speedup_first(a.baselines.best_speedup(a.time_ms),
                                                           b.baselines.best_speedup(b.time_ms));
                     });
    out[*scope.run] = std::move(bests);
  }
  return out;
}

std::vector<CandidateLine> newest_candidates(Archive& ar, RunId run, size_t limit) {
  Statement s = detail::database_of(ar).prepare(
      "SELECT " + kLineColumns + " FROM candidates c JOIN tasks t ON t.id = c.task_id" +
      kNewestEvaluation + " WHERE c.run_id = ? ORDER BY c.id DESC LIMIT ?");
  s.bind(1, run.value).bind(2, static_cast<int64_t>(limit));
  return lines(detail::database_of(ar), s);
}

std::vector<std::string> suites(Archive& ar) {
  std::vector<std::string> out;
  for (Statement s = detail::database_of(ar).prepare("SELECT DISTINCT suite FROM tasks ORDER BY 1");
       s.step();)
    out.push_back(s.text(0));
  return out;
}

std::set<std::string> tasks_tagged(Archive& ar, const std::string& tag) {
  Statement s = detail::database_of(ar).prepare(
      "SELECT DISTINCT t.suite || '/' || t.name FROM tasks t, json_each(t.tags) j WHERE "
      "json_valid(t.tags) AND j.value = ?");
  s.bind(1, tag);
  std::set<std::string> out;
  while (s.step()) out.insert(s.text(0));
  return out;
}

std::vector<CandidateLine> task_candidates(Archive& ar, const std::string& suite,
                                           const std::string& name) {
  Statement s = detail::database_of(ar).prepare(
      "SELECT " + kLineColumns + " FROM candidates c JOIN tasks t ON t.id = c.task_id" +
      kNewestEvaluation + " WHERE t.suite = ? AND t.name = ? ORDER BY c.id");
  s.bind(1, suite).bind(2, name);
  return lines(detail::database_of(ar), s);
}

std::optional<TaskInfo> task_info(Archive& ar, const std::string& suite, const std::string& name) {
  Database& db = detail::database_of(ar);
  Statement t =
      db.prepare("SELECT t.id, t.summary, t.definition, t.version, t.tags FROM (" +
                 std::string(detail::kNewestTasks) + ") t WHERE t.suite = ? AND t.name = ?");
  t.bind(1, suite).bind(2, name);
  if (!t.step()) return std::nullopt;
  TaskInfo info;
  int64_t task = t.integer(0);
  info.summary = t.text(1);
  info.reference = t.text(2);
  info.version = t.text(3);
  nlohmann::json tags = nlohmann::json::parse(t.text(4), nullptr, false);
  if (tags.is_array())
    for (const nlohmann::json& tag : tags)
      if (tag.is_string()) info.tags.push_back(tag.get<std::string>());
  Statement e = db.prepare(
      "SELECT e.id, e.dims, COALESCE(d.name, '') FROM evaluations e JOIN candidates c ON c.id = "
      "e.candidate_id LEFT JOIN devices d ON d.id = e.device_id WHERE c.task_id = ? AND EXISTS "
      "(SELECT 1 FROM evaluation_baselines b WHERE b.evaluation_id = e.id) ORDER BY e.id DESC "
      "LIMIT 1");
  e.bind(1, task);
  if (e.step()) {
    info.dims = e.text(1);
    info.device = e.text(2);
    info.baselines = std::move(detail::evaluation_baselines(db, {e.integer(0)}).front());
  }
  return info;
}

std::map<int64_t, std::vector<GenerationBest>> task_best_by_generation(Archive& ar,
                                                                       const std::string& suite,
                                                                       const std::string& name) {
  Database& db = detail::database_of(ar);
  const std::string newest_version = "t.suite = ?1 AND t.name = ?2 AND t.id IN (SELECT id FROM (" +
                                     std::string(detail::kNewestTasks) + "))";
  Statement s = db.prepare(
      "SELECT CAST(c.island AS TEXT), c.generation, c.id, e.id, e.time_ms, c.prompt_kind FROM "
      "evaluations e JOIN candidates c ON c.id = "
      "e.candidate_id JOIN tasks t ON t.id = c.task_id WHERE " +
      newest_version + " AND " + winner_condition() + " ORDER BY c.island, c.generation, " +
      detail::kBestOrder);
  s.bind(1, suite).bind(2, name);
  std::map<int64_t, std::vector<GenerationBest>> out;
  for (const auto& [island, curve] : detail::best_so_far(db, s))
    for (const detail::BestSoFar& p : curve)
      out[std::stoll(island)].push_back(
          {p.generation, CandidateId{p.candidate}, p.time_ms, p.baselines});
  // The best so far holds until the island's last generation: a point for each generation after.
  Statement last = db.prepare(
      "SELECT c.island, max(c.generation) FROM candidates c JOIN tasks t ON t.id = c.task_id "
      "WHERE " +
      newest_version + " GROUP BY c.island");
  last.bind(1, suite).bind(2, name);
  while (last.step()) {
    auto it = out.find(last.integer(0));
    if (it == out.end()) continue;
    std::vector<GenerationBest> filled;
    for (size_t i = 0; i < it->second.size(); ++i) {
      int64_t until =
          i + 1 < it->second.size() ? it->second[i + 1].generation : last.integer(1) + 1;
      for (int64_t g = it->second[i].generation; g < until; ++g)
        filled.push_back(
            {g, it->second[i].candidate, it->second[i].time_ms, it->second[i].baselines});
    }
    it->second = std::move(filled);
  }
  return out;
}

std::vector<CandidateLine> relatives(Archive& ar, CandidateId id, bool parents) {
  const std::string other_end = parents ? "parent_id" : "candidate_id",
                    this_end = parents ? "candidate_id" : "parent_id";
  Statement s = detail::database_of(ar).prepare(
      "SELECT " + kLineColumns + " FROM candidate_parents p JOIN candidates c ON c.id = p." +
      other_end + " JOIN tasks t ON t.id = c.task_id" + kNewestEvaluation + " WHERE p." + this_end +
      " = ? ORDER BY c.id");
  s.bind(1, id.value);
  return lines(detail::database_of(ar), s);
}

}  // namespace kforge::archive
