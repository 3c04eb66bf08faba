#include "kforge/archive/prompt_memory.h"

#include <algorithm>

#include "baseline_rows.h"
#include "database_of.h"

namespace kforge::archive {
namespace {

using nlohmann::json;

// Rows of `task`'s version that a resumed run reads the same: from candidates of earlier runs (or
// none) made before ?4 started, and from ?4's own candidates of earlier generations.
// ?1..?3 the task version, ?4 the run, ?5 the generation, ?6 the run's start.
const char* kEligible =
    " AND (?4 IS NULL OR ((c.run_id IS NULL OR c.run_id < ?4) AND x.created_at < ?6) "
    "OR (c.run_id = ?4 AND ?5 IS NOT NULL AND c.generation < ?5))";
const char* kTaskVersion =
    " JOIN candidates c ON c.id = x.candidate_id JOIN tasks k ON k.id = c.task_id "
    "WHERE k.suite = ?1 AND k.name = ?2 AND k.version = ?3 AND c.import_trust IS NOT 'claimed'";

}  // namespace

std::optional<QuotedBaseline> PromptMemory::baseline(const tasks::Task& task, DeviceId device,
                                                     const std::string& math_mode) {
  Database& db = detail::database_of(archive_);
  Statement b = db.prepare(
      "SELECT b.id, d.name FROM baselines b JOIN tasks k ON k.id = b.task_id JOIN devices d ON "
      "d.id = b.device_id WHERE k.suite = ?1 AND k.name = ?2 AND k.version = ?3 AND b.dims = ?4 "
      "AND b.device_id IN (SELECT o.id FROM devices m JOIN devices o ON o.name = m.name AND "
      "o.arch = m.arch WHERE m.id = ?5) AND b.math_mode = ?6 AND EXISTS (SELECT 1 FROM "
      "baseline_times x WHERE x.baseline_id = b.id AND x.kind = ?7 AND x.ms IS NOT NULL) ORDER BY "
      "b.id LIMIT 1");
  b.bind(1, task.suite).bind(2, task.name).bind(3, task.content_hash);
  b.bind(4, json(task.dims).dump()).bind(5, device.value).bind(6, math_mode);
  b.bind(7, std::string(to_string(BaselineKind::Eager)));
  if (!b.step()) return std::nullopt;
  int64_t id = b.integer(0);
  return QuotedBaseline{detail::baseline_times(db, {id})[id], b.text(1)};
}

std::optional<JudgedReferences> PromptMemory::newest_judged(const tasks::Task& task,
                                                            std::optional<RunId> before_run) {
  Database& db = detail::database_of(archive_);
  Statement s = db.prepare(
      "SELECT e.id, e.roofline_fraction * e.time_ms, coalesce(d.name, 'a GPU'), c.id FROM "
      "evaluations e JOIN candidates c ON c.id = e.candidate_id JOIN tasks k ON k.id = c.task_id "
      "LEFT JOIN devices d ON d.id = e.device_id WHERE k.suite = ?1 AND k.name = ?2 AND "
      "k.version = ?3 AND EXISTS (SELECT 1 FROM evaluation_baselines x WHERE x.evaluation_id = "
      "e.id AND x.kind = ?5 AND x.ms IS NOT NULL) AND e.import_trust IS NOT 'claimed' AND (?4 IS "
      "NULL OR c.run_id IS NULL OR c.run_id < ?4) ORDER BY e.id DESC LIMIT 1");
  s.bind(1, task.suite).bind(2, task.name).bind(3, task.content_hash);
  if (before_run)
    s.bind(4, before_run->value);
  else
    s.bind_null(4);
  s.bind(5, std::string(to_string(BaselineKind::Eager)));
  if (!s.step()) return std::nullopt;
  JudgedReferences j;
  j.candidate = CandidateId{s.integer(3)};
  j.device_name = s.text(2);
  j.baselines = detail::evaluation_baselines(db, {s.integer(0)})[0];
  j.floor_ms = s.maybe_real(1);
  return j;
}

std::vector<FailureRecord> PromptMemory::failures(const tasks::Task& task, std::optional<RunId> run,
                                                  std::optional<int> generation) {
  Database& db = detail::database_of(archive_);
  std::string start = "9999";  // a run the archive lacks: no bound
  if (run) {
    Statement r = db.prepare("SELECT started_at FROM runs WHERE id = ?");
    r.bind(1, run->value);
    if (r.step()) start = r.text(0);
  }
  auto query = [&](const std::string& sql) {
    Statement s = db.prepare(sql);
    s.bind(1, task.suite).bind(2, task.name).bind(3, task.content_hash);
    if (run)
      s.bind(4, run->value);
    else
      s.bind_null(4);
    if (generation)
      s.bind(5, int64_t{*generation});
    else
      s.bind_null(5);
    s.bind(6, start);
    return s;
  };
  auto common = [](Statement& s, FailureSource source) {
    FailureRecord f;
    f.source = source;
    f.created_at = s.text(0), f.row = s.integer(1), f.candidate = CandidateId{s.integer(2)};
    if (!s.is_null(3)) f.run = RunId{s.integer(3)};
    f.generation = static_cast<int>(s.integer(4));
    return f;
  };
  const std::string head = "SELECT x.created_at, x.id, c.id, c.run_id, c.generation, ";
  // Newest first: the run's own rows by generation (then as recorded), before earlier runs' rows
  // by time. The run records a generation's rows in an order fixed by its seed and answers, but
  // rows of two sources, or of generations still under way, by time in an order that hangs on
  // which answer came first: the prompts must not (docs/evolve.md, "The steady state").
  const std::string tail =
      " ORDER BY c.run_id IS ?4 DESC, CASE WHEN c.run_id IS ?4 THEN c.generation END DESC, "
      "x.created_at DESC, x.id DESC LIMIT 64";
  std::vector<FailureRecord> rows;
  Statement e = query(head + "x.outcome, x.evidence FROM evaluations x" + kTaskVersion +
                      " AND x.outcome NOT IN ('correct', 'harness_error', 'does_not_fit') "
                      "AND x.import_trust IS NOT 'claimed'" +
                      kEligible + tail);
  while (e.step()) {
    FailureRecord f = common(e, FailureSource::Evaluation);
    f.outcome = e.text(5);
    json ev = json::parse(e.text(6), nullptr, false);
    f.evidence = ev.is_discarded() ? json::object() : ev;
    rows.push_back(std::move(f));
  }
  Statement sc = query(head + "x.outcome, x.summary FROM screens x" + kTaskVersion +
                       " AND x.outcome NOT IN ('correct', 'harness_error', 'does_not_fit')" +
                       kEligible + tail);
  while (sc.step()) {
    FailureRecord f = common(sc, FailureSource::Screen);
    f.outcome = sc.text(5);
    f.summary = sc.text(6);
    rows.push_back(std::move(f));
  }
  Statement co = query(head + "x.stage, x.errors, x.log FROM compiles x" + kTaskVersion +
                       " AND x.errors NOT IN ('', '[]')" + kEligible + tail);
  while (co.step()) {
    FailureRecord f = common(co, FailureSource::Compile);
    f.stage = co.text(5);
    json errors = json::parse(co.text(6), nullptr, false);
    f.errors = errors.is_discarded() ? json() : errors;
    f.log = co.text(7);
    rows.push_back(std::move(f));
  }
  auto own = [&](const FailureRecord& f) { return run && f.run && f.run->value == run->value; };
  std::sort(rows.begin(), rows.end(), [&](const FailureRecord& a, const FailureRecord& b) {
    if (own(a) != own(b)) return own(a);
    if (own(a) && a.generation != b.generation) return a.generation > b.generation;
    if (!own(a) && a.created_at != b.created_at) return a.created_at > b.created_at;
    if (a.source != b.source) return a.source < b.source;
    return a.row > b.row;
  });
  return rows;
}

}  // namespace kforge::archive
