#include "kforge/archive/run_log.h"

#include "kforge/archive/winner.h"

#include <algorithm>

#include "baseline_rows.h"
#include "database_of.h"
#include "stored_json.h"

namespace kforge::archive {
namespace {

using nlohmann::json;

constexpr const char* kStatuses[] = {"running", "finished", "failed", "interrupted"};

// The devices of the same kind as device ?: the same name and architecture (two H200s; a resumed
// run on another machine of the kind reads its records back, docs/decisions.md).
const std::string kSameKind =
    "(SELECT k.id FROM devices d JOIN devices k ON k.name = d.name AND k.arch = d.arch WHERE d.id "
    "= ?)";

}  // namespace

const char* to_string(RunStatus s) {
  return kStatuses[static_cast<int>(s)];
}

std::optional<RunStatus> run_status_from_string(const std::string& s) {
  for (int i = 0; i < 4; ++i)
    if (s == kStatuses[i]) return static_cast<RunStatus>(i);
  return std::nullopt;
}

RunId RunLog::start(const json& config) {
  Database& db = detail::database_of(archive_);
  Statement s = db.prepare("INSERT INTO runs (config) VALUES (?)");
  s.bind(1, config.dump()).run();
  return RunId{db.last_insert_id()};
}

std::optional<json> RunLog::config(RunId run) {
  Database& db = detail::database_of(archive_);
  Statement s = db.prepare("SELECT config FROM runs WHERE id = ?");
  s.bind(1, run.value);
  if (!s.step()) return std::nullopt;
  return stored_json(db, s, 0, "runs", "config", run.value);
}

void RunLog::set_config(RunId run, const json& config) {
  detail::database_of(archive_)
      .prepare("UPDATE runs SET config = ?1 WHERE id = ?2")
      .bind(1, config.dump())
      .bind(2, run.value)
      .run();
}

void RunLog::set_status(RunId run, RunStatus status, const json& used) {
  Statement s = detail::database_of(archive_).prepare(
      "UPDATE runs SET status = ?1, budgets_used = ?2, finished_at = CASE WHEN ?1 = 'running' "
      "THEN NULL ELSE strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END WHERE id = ?3");
  s.bind(1, to_string(status)).bind(2, used.dump()).bind(3, run.value).run();
}

double RunLog::recorded_wall_s(RunId run) {
  Statement s = detail::database_of(archive_).prepare(
      "SELECT json_extract(budgets_used, '$.wall_s') FROM runs WHERE id = ?");
  s.bind(1, run.value);
  return s.step() && !s.is_null(0) ? s.real(0) : 0;
}

int64_t RunLog::recorded_evaluations(RunId run) {
  Statement s = detail::database_of(archive_).prepare(
      "SELECT json_extract(budgets_used, '$.evaluations') FROM runs WHERE id = ?");
  s.bind(1, run.value);
  return s.step() && !s.is_null(0) ? s.integer(0) : 0;
}

std::optional<CandidateId> RunLog::find_candidate(TaskId task, const std::string& identity) {
  Statement s = detail::database_of(archive_).prepare(
      "SELECT id FROM candidates WHERE task_id = ? AND identity = ?");
  s.bind(1, task.value).bind(2, identity);
  if (s.step()) return CandidateId{s.integer(0)};
  return std::nullopt;
}

std::optional<ScreenRecord> RunLog::find_screen(CandidateId candidate, DeviceId device,
                                                int harness_version) {
  Statement s = detail::database_of(archive_).prepare(
      "SELECT outcome, median_ms, summary FROM screens WHERE candidate_id = ? AND device_id IN " +
      kSameKind + " AND harness_version = ? ORDER BY device_id = ? DESC, id LIMIT 1");
  s.bind(1, candidate.value).bind(2, device.value).bind(3, int64_t{harness_version});
  s.bind(4, device.value);
  if (!s.step()) return std::nullopt;
  return ScreenRecord{s.text(0), s.maybe_real(1), s.text(2)};
}

void RunLog::add_screen(CandidateId candidate, DeviceId device, RunId run, int harness_version,
                        const ScreenRecord& screen) {
  Statement s = detail::database_of(archive_).prepare(
      "INSERT INTO screens (candidate_id, device_id, harness_version, run_id, outcome, median_ms, "
      "summary) VALUES (?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, candidate.value).bind(2, device.value).bind(3, int64_t{harness_version});
  s.bind(4, run.value).bind(5, screen.outcome).bind(6, screen.median_ms);
  // 300 bytes, cut before a character's continuation bytes (the export writes valid UTF-8).
  size_t cut = std::min<size_t>(screen.summary.size(), 300);
  if (cut < screen.summary.size())
    while (cut > 0 && (static_cast<unsigned char>(screen.summary[cut]) & 0xC0) == 0x80) --cut;
  s.bind(7, screen.summary.substr(0, cut)).run();
}

std::optional<JudgmentRecord> RunLog::find_judgment(CandidateId candidate, DeviceId device,
                                                    int harness_version) {
  Statement s = detail::database_of(archive_).prepare(
      "SELECT outcome, time_ms, roofline_fraction, admitted, flags, id FROM evaluations WHERE "
      "candidate_id = ? AND device_id IN " +
      kSameKind +
      " AND harness_version = ? AND import_source IS NULL ORDER BY device_id = ? DESC, id DESC "
      "LIMIT 1");
  s.bind(1, candidate.value).bind(2, device.value).bind(3, int64_t{harness_version});
  s.bind(4, device.value);
  if (!s.step()) return std::nullopt;
  JudgmentRecord j;
  j.outcome = s.text(0);
  j.time_ms = s.maybe_real(1), j.roofline_fraction = s.maybe_real(2);
  j.admitted = s.integer(3) != 0;
  j.flagged = s.text(4) != "[]";
  j.baselines = detail::evaluation_baselines(detail::database_of(archive_), {s.integer(5)})[0];
  return j;
}

std::vector<StartingKernel> RunLog::starting_kernels(const tasks::Task& task, size_t limit,
                                                     std::optional<RunId> outside) {
  Database& db = detail::database_of(archive_);
  Statement s = db.prepare(
      "SELECT c.source, c.plan, c.tunables, c.id, MIN(e.time_ms) AS t FROM candidates c JOIN "
      "tasks k ON k.id = c.task_id JOIN evaluations e ON e.candidate_id = c.id WHERE k.suite = ? "
      "AND k.name = ? AND k.version = ? AND " +
      // The one winner rule, admission aside: the loop judges a starting kernel again with
      // admission; a flagged one does not start.
      winner_condition(/*admitted=*/false) +
      " AND (?5 IS NULL OR c.run_id IS NULL OR c.run_id != ?5) GROUP BY c.source, c.plan ORDER BY "
      "t "
      "LIMIT ?4");
  s.bind(1, task.suite).bind(2, task.name).bind(3, task.content_hash);
  s.bind(4, static_cast<int64_t>(limit));
  if (outside)
    s.bind(5, outside->value);
  else
    s.bind_null(5);
  std::vector<StartingKernel> out;
  while (s.step())
    out.push_back({CandidateId{s.integer(3)}, s.text(0), s.text(1),
                   stored_json(db, s, 2, "candidates", "tunables", s.integer(3))});
  return out;
}

}  // namespace kforge::archive
