#include "kforge/archive/first_sample.h"

#include <functional>

#include "baseline_rows.h"
#include "best.h"
#include "database_of.h"
#include "kforge/archive/lineage.h"
#include "kforge/archive/winner.h"

namespace kforge::archive {
namespace {

// Whether a model wrote kernels of this kind: the prompt kinds an LLM answers. A kind added to
// LineageKind must be placed here (the switch has no default).
bool written_by_model(LineageKind kind) {
  switch (kind) {
    case LineageKind::Translate:
    case LineageKind::Optimize:
    case LineageKind::Crossover:
    case LineageKind::RepairCompile:
    case LineageKind::RepairWrong:
    case LineageKind::Idea:
      return true;
    case LineageKind::Manual:   // by hand (`kforge corpus`)
    case LineageKind::Seed:     // the task's seed file
    case LineageKind::Archive:  // an earlier correct kernel, judged again
    case LineageKind::Tune:     // the offline tuner's point of a parent's tune space
    case LineageKind::Import:   // someone else's kernel (an AI CUDA Engineer file)
      return false;
  }
  return false;
}

// The candidates (`c`) that may be a first sample: a model's kernel, made or verified by kforge.
// The model column names the model; "human" is evolve's proposer for kernels given by hand (a
// `kforge corpus` line stored under a model's prompt kind).
std::string model_written() {
  std::string kinds;
  for (LineageKind k : lineage_kinds())
    if (written_by_model(k))
      kinds += (kinds.empty() ? "" : ", ") + detail::sql_text(std::string(to_string(k)));
  return "c.verified = 1 AND c.model NOT IN ('', 'human') AND c.prompt_kind IN (" + kinds + ")";
}

// The newest evaluation with baselines of the task version of `p` on the GPU of screen `s`, with a
// further condition.
std::string baselines_evaluation(const std::string& also) {
  return "SELECT e2.id FROM evaluations e2 JOIN candidates c2 ON c2.id = e2.candidate_id WHERE "
         "c2.task_id = p.task_id AND e2.device_id = s.device_id AND e2.import_trust IS NOT "
         "'claimed' AND EXISTS (SELECT 1 FROM evaluation_baselines b WHERE b.evaluation_id = "
         "e2.id) " +
         also + " ORDER BY e2.id DESC LIMIT 1";
}

// `scope`: a query of rows (task_id, label), the tasks reported; `pool`: a further condition on
// the candidates `c` that count (the run's). Parameters are the caller's to bind.
std::vector<FirstSample> first_samples(Database& db, const std::string& scope,
                                       const std::string& pool,
                                       const std::function<void(Statement&)>& bind) {
  Statement s = db.prepare(
      "WITH scope(task_id, label) AS (" + scope +
      "), "
      // Each task version's first model-written candidate: by run (none last), generation, id.
      "firsts AS (SELECT task_id, id FROM (SELECT c.task_id, c.id, ROW_NUMBER() OVER (PARTITION "
      "BY c.task_id ORDER BY c.run_id IS NULL, c.run_id, c.generation, c.id) AS k FROM "
      "candidates c WHERE c.task_id IN (SELECT task_id FROM scope) AND " +
      model_written() + pool +
      ") WHERE k = 1), "
      // Its judgment (the newest correct and timed one, else the newest), and its newest screen.
      "picked AS (SELECT f.task_id, f.id AS candidate, (SELECT e.id FROM evaluations e WHERE "
      "e.candidate_id = f.id AND e.import_trust IS NOT 'claimed' ORDER BY (e.outcome = 'correct' "
      "AND e.time_ms IS NOT NULL) DESC, e.id DESC LIMIT 1) AS evaluation, (SELECT s.id FROM "
      "screens s WHERE s.candidate_id = f.id ORDER BY s.id DESC LIMIT 1) AS screen FROM firsts "
      "f) "
      "SELECT sc.label, p.candidate, p.evaluation, e.outcome, e.time_ms, s.id, s.outcome, "
      "s.median_ms, "
      // A screen's baselines: the task version's newest evaluation with baselines on its GPU, one
      // of the screen's harness version first (SQLite's ORDER BY in a subquery cannot name `s`).
      "coalesce((" +
      baselines_evaluation("AND e2.harness_version = s.harness_version") + "), (" +
      baselines_evaluation("") +
      ")), "
      // Whether the judgment counts for the field's metrics (a flagged timing does not).
      "EXISTS (SELECT 1 FROM evaluations e JOIN candidates c ON c.id = e.candidate_id WHERE e.id "
      "= p.evaluation AND " +
      field_condition() +
      ") "
      "FROM scope sc LEFT JOIN picked p ON p.task_id = sc.task_id LEFT JOIN evaluations e ON "
      "e.id = p.evaluation LEFT JOIN screens s ON s.id = p.screen ORDER BY sc.label, sc.task_id");
  bind(s);
  std::vector<FirstSample> out;
  std::vector<std::optional<int64_t>> baselines_from;
  while (s.step()) {
    FirstSample f;
    f.result.task = s.text(0);
    baselines_from.push_back(std::nullopt);
    if (!s.is_null(1)) f.candidate = CandidateId{s.integer(1)};
    if (!s.is_null(2)) {
      f.judged_by = "evaluation";
      f.outcome = s.text(3);
      f.result.correct = s.integer(9) != 0;
      if (f.result.correct) f.result.time_ms = s.real(4), baselines_from.back() = s.integer(2);
    } else if (!s.is_null(5)) {
      f.judged_by = "screen";
      f.outcome = s.text(6);
      f.result.correct = f.outcome == "correct" && !s.is_null(7);
      if (f.result.correct) {
        f.result.time_ms = s.real(7);
        if (!s.is_null(8)) baselines_from.back() = s.integer(8);
      }
    }
    out.push_back(std::move(f));
  }
  std::vector<BaselineTimes> baselines = detail::evaluation_baselines(db, baselines_from);
  for (size_t i = 0; i < out.size(); ++i) out[i].result.baselines = std::move(baselines[i]);
  return out;
}

}  // namespace

std::vector<FirstSample> run_first_samples(Archive& ar, RunId run) {
  return first_samples(
      detail::database_of(ar),
      "SELECT t.id, t.suite || '/' || t.name FROM tasks t WHERE t.id IN (SELECT task_id FROM "
      "candidates WHERE run_id = ?1)",
      " AND c.run_id = ?1", [&](Statement& s) { s.bind(1, run.value); });
}

std::vector<FirstSample> suite_first_samples(Archive& ar, const std::string& suite) {
  return first_samples(detail::database_of(ar),
                       std::string("SELECT n.id, n.suite || '/' || n.name FROM (") +
                           detail::kNewestTasks + ") n WHERE n.suite = ?1",
                       "", [&](Statement& s) { s.bind(1, suite); });
}

}  // namespace kforge::archive
