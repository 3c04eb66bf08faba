#include "run_records.h"

#include <filesystem>

#include "kforge/archive/sqlite.h"
#include "kforge/common/files.h"
#include "kforge/compile/answer.h"
#include "kforge/verify/protocol.h"

namespace kforge::evolve {

using archive::Statement;
using nlohmann::json;

namespace records {

std::optional<int64_t> find_candidate(archive::Database& db, archive::TaskId task,
                                      const std::string& identity) {
  Statement s = db.prepare("SELECT id FROM candidates WHERE task_id = ? AND identity = ?");
  s.bind(1, task.value).bind(2, identity);
  if (s.step()) return s.integer(0);
  return std::nullopt;
}

// The devices of the same kind as device ?: the same name and architecture (two H200s; a resumed
// run on another machine of the kind reads its records back, docs/decisions.md).
const std::string kSameKind =
    "(SELECT k.id FROM devices d JOIN devices k ON k.name = d.name AND k.arch = d.arch WHERE d.id "
    "= ?)";

std::optional<Screen> find_screen(archive::Database& db, int64_t candidate, int64_t device) {
  Statement s = db.prepare(
      "SELECT outcome, median_ms, summary FROM screens WHERE candidate_id = ? AND device_id IN " +
      kSameKind + " AND harness_version = ? ORDER BY device_id = ? DESC, id LIMIT 1");
  s.bind(1, candidate).bind(2, device).bind(3, int64_t{verify::kHarnessVersion}).bind(4, device);
  if (!s.step()) return std::nullopt;
  Screen r;
  r.outcome = verify::outcome_from_string(s.text(0)).value_or(verify::Outcome::HarnessError);
  r.median_ms = s.maybe_real(1);
  r.summary = s.text(2);
  return r;
}

void add_screen(archive::Database& db, int64_t candidate, int64_t device, int64_t run,
                const Screen& r) {
  Statement s = db.prepare(
      "INSERT INTO screens (candidate_id, device_id, harness_version, run_id, outcome, median_ms, "
      "summary) "
      "VALUES (?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, candidate).bind(2, device).bind(3, int64_t{verify::kHarnessVersion}).bind(4, run);
  s.bind(5, std::string(verify::to_string(r.outcome)))
      .bind(6, r.median_ms)
      .bind(7, r.summary.substr(0, 300));
  s.run();
}

std::optional<Judgment> find_judgment(archive::Database& db, int64_t candidate, int64_t device) {
  Statement s = db.prepare(std::string("SELECT outcome, time_ms, eager_ms, scripted_ms, "
                                       "speedup_eager, roofline_fraction, admitted, flags, ") +
                           "compiled_ms " +
                           "FROM evaluations WHERE candidate_id = ? AND device_id IN " + kSameKind +
                           " AND harness_version = ? AND import_source IS NULL ORDER BY device_id "
                           "= ? DESC, id DESC LIMIT 1");
  s.bind(1, candidate).bind(2, device).bind(3, int64_t{verify::kHarnessVersion}).bind(4, device);
  if (!s.step()) return std::nullopt;
  Judgment j;
  j.outcome = verify::outcome_from_string(s.text(0)).value_or(verify::Outcome::HarnessError);
  j.time_ms = s.maybe_real(1), j.eager_ms = s.maybe_real(2), j.scripted_ms = s.maybe_real(3);
  j.speedup_eager = s.maybe_real(4), j.roofline_fraction = s.maybe_real(5);
  j.admitted = s.integer(6) != 0;
  j.flagged = s.text(7) != "[]";
  j.compiled_ms = s.maybe_real(8);
  return j;
}

Judgment judgment_of(const Evaluation& e) {
  Judgment j;
  j.outcome = e.verdict.outcome;
  j.summary = e.verdict.summary;
  j.flagged = !e.verdict.flags.empty();
  j.admitted = e.admitted();
  if (const auto& t = e.verdict.timing) {
    j.time_ms = t->time.median_ms, j.eager_ms = t->eager.median_ms,
    j.scripted_ms = t->scripted.median_ms;
    j.speedup_eager = t->speedup_eager, j.roofline_fraction = t->roofline_fraction;
    if (t->compiled) j.compiled_ms = t->compiled->median_ms;
  }
  return j;
}

int64_t start_run(archive::Database& db, const RunConfig& config) {
  Statement s = db.prepare("INSERT INTO runs (config) VALUES (?)");
  s.bind(1, config.to_json().dump()).run();
  return db.last_insert_id();
}

void finish_run(archive::Database& db, int64_t run, const std::string& status, const json& used) {
  Statement s = db.prepare(
      "UPDATE runs SET status = ?, budgets_used = ?, finished_at = CASE WHEN ? = 'running' THEN "
      "NULL "
      "ELSE strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END WHERE id = ?");
  s.bind(1, status).bind(2, used.dump()).bind(3, status).bind(4, run).run();
}

double recorded_wall_s(archive::Database& db, int64_t run) {
  Statement s = db.prepare("SELECT json_extract(budgets_used, '$.wall_s') FROM runs WHERE id = ?");
  s.bind(1, run);
  return s.step() && !s.is_null(0) ? s.real(0) : 0;
}

}  // namespace records

std::vector<Proposal> starting_population(const std::shared_ptr<const tasks::Task>& task,
                                          archive::Archive& ar, size_t from_archive,
                                          std::optional<int64_t> run) {
  std::vector<Proposal> out;
  std::filesystem::path seed = task->file.parent_path() / "seeds" / (task->name + ".md");
  if (std::optional<std::string> text = read_file(seed.string())) {
    Proposal p;
    p.task = task;
    p.label = seed.string();
    try {
      compile::Answer a = compile::parse_answer(*text);
      p.source = a.source, p.plan = a.plan, p.first_line = a.source_first_line;
    } catch (const compile::AnswerError& e) {
      p.answer_error = e.what();
    }
    p.lineage.prompt_kind = "seed";
    out.push_back(std::move(p));
  }
  // The archive's correct kernels of this task version, distinct code, fastest first.
  Statement s = ar.db().prepare(
      "SELECT c.source, c.plan, c.tunables, c.id, MIN(e.time_ms) AS t FROM candidates c JOIN tasks "
      "k ON k.id = c.task_id "
      "JOIN evaluations e ON e.candidate_id = c.id WHERE k.suite = ? AND k.name = ? AND k.version "
      "= ? AND "
      "e.outcome = 'correct' AND e.time_ms IS NOT NULL AND c.verified = 1 AND e.import_trust IS "
      "NOT 'claimed' "
      "AND (?5 IS NULL OR c.run_id IS NULL OR c.run_id != ?5) GROUP BY c.source, c.plan ORDER BY t "
      "LIMIT ?4");
  s.bind(1, task->suite)
      .bind(2, task->name)
      .bind(3, task->content_hash)
      .bind(4, static_cast<int64_t>(from_archive));
  s.bind(5, run);
  while (s.step()) {
    Proposal p;
    p.task = task;
    p.source = s.text(0), p.plan = s.text(1);
    if (!out.empty() && out.front().source == p.source) continue;  // the seed itself
    p.tunables = json::parse(s.text(2)).get<compile::Tunables>();
    p.lineage.parents = {s.integer(3)};
    p.lineage.prompt_kind = "archive";
    p.lineage.model = "";
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace kforge::evolve
