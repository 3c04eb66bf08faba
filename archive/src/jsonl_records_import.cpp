// Import of the lines jsonl_records.h describes: each record checked field by field, then stored
// without adding what is there already.
#include <climits>

#include "baseline_rows.h"
#include "database_of.h"
#include "jsonl_records.h"
#include "kforge/archive/run_log.h"

namespace kforge::archive::detail {
namespace {

using nlohmann::json;

constexpr int kFormat = 1;  // as jsonl.cpp writes: these lines are additions to format 1

ImportedLine::Device check_device(const json& o, const std::string& at, const LineChecker& f) {
  const json& d = *f.get(o, at, "device", true);
  std::string dat = at.empty() ? "device" : at + ".device";
  if (!d.is_object()) f.fail(dat, std::string("must be an object, not ") + d.type_name());
  return {f.name(d, dat, "uuid"),        f.text(d, dat, "name", false),
          f.text(d, dat, "arch", false), f.text(d, dat, "driver", false),
          f.maybe_count(d, dat, "sms"),  f.maybe_count(d, dat, "memory_bytes")};
}

std::optional<ImportedLine::Run> check_run(const json& o, const std::string& at,
                                           const LineChecker& f) {
  const json* r = f.get(o, at, "run", false);
  if (!r || r->is_null()) return std::nullopt;
  std::string rat = at.empty() ? "run" : at + ".run";
  if (!r->is_object()) f.fail(rat, std::string("must be an object or null, not ") + r->type_name());
  ImportedLine::Run run;
  run.started_at = *f.timestamp(*r, rat, "started_at", true);
  if (const json* fin = f.get(*r, rat, "finished_at", false); fin && !fin->is_null())
    run.finished_at = f.timestamp(*r, rat, "finished_at", true);
  run.status = f.text(*r, rat, "status", false, "finished");
  if (!run_status_from_string(run.status))
    f.fail(rat + ".status", "'" + run.status + "' is not a run status");
  run.config = f.object(*r, rat, "config");
  run.budgets_used = f.object(*r, rat, "budgets_used");
  return run;
}

std::vector<LineRecords::Baseline> check_baselines(const json& task, const LineChecker& f) {
  std::vector<LineRecords::Baseline> out;
  const json* list = f.get(task, "task", "baselines", false);
  if (!list) return out;
  if (!list->is_array())
    f.fail("task.baselines", std::string("must be a list, not ") + list->type_name());
  for (size_t i = 0; i < list->size(); ++i) {
    std::string at = "task.baselines[" + std::to_string(i) + "]";
    const json& b = (*list)[i];
    if (!b.is_object()) f.fail(at, std::string("must be an object, not ") + b.type_name());
    LineRecords::Baseline r;
    r.dims = f.object(b, at, "dims", true);
    r.device = check_device(b, at, f);
    r.math_mode = f.text(b, at, "math_mode", true);
    r.times = f.baselines(b, at);
    r.created_at = *f.timestamp(b, at, "created_at", true);
    out.push_back(std::move(r));
  }
  return out;
}

LineRecords::LlmCall check_llm_call(const json& c, const std::string& at, const LineChecker& f) {
  if (!c.is_object()) f.fail(at, std::string("must be an object, not ") + c.type_name());
  LineRecords::LlmCall r;
  r.run = check_run(c, at, f);
  r.model = f.text(c, at, "model", true);
  r.status = f.text(c, at, "status", true);
  r.tokens_in = f.integer(c, at, "tokens_in", false, 0, 0, INT64_MAX);
  r.tokens_out = f.integer(c, at, "tokens_out", false, 0, 0, INT64_MAX);
  r.cost_usd = f.measure(c, at, "cost_usd", true).value_or(0);
  r.latency_ms = f.measure(c, at, "latency_ms", true);
  r.created_at = *f.timestamp(c, at, "created_at", true);
  return r;
}

// An import never rewrites a device or a run it already has (found by UUID; by start and config).
int64_t device_id(Database& db, const ImportedLine::Device& d) {
  Statement ds = db.prepare("SELECT id FROM devices WHERE uuid = ?");
  ds.bind(1, d.uuid);
  if (ds.step()) return ds.integer(0);
  Statement ins = db.prepare(
      "INSERT INTO devices (uuid, name, arch, sms, memory_bytes, driver) VALUES (?, ?, ?, ?, ?, "
      "?)");
  ins.bind(1, d.uuid).bind(2, d.name).bind(3, d.arch).bind(4, d.sms).bind(5, d.memory_bytes);
  ins.bind(6, d.driver).run();
  return db.last_insert_id();
}

std::optional<int64_t> run_id(Database& db, const std::optional<ImportedLine::Run>& run) {
  if (!run) return std::nullopt;
  Statement rs = db.prepare("SELECT id FROM runs WHERE started_at = ? AND config = ?");
  rs.bind(1, run->started_at).bind(2, run->config.dump());
  if (rs.step()) return rs.integer(0);
  Statement ins = db.prepare(
      "INSERT INTO runs (started_at, finished_at, status, config, budgets_used) VALUES (?, ?, ?, "
      "?, ?)");
  ins.bind(1, run->started_at).bind(2, run->finished_at).bind(3, run->status);
  ins.bind(4, run->config.dump()).bind(5, run->budgets_used.dump()).run();
  return db.last_insert_id();
}

// Counts an insert that may have been ignored (a row already there).
void count(Database& db, ImportReport& report) {
  ++(sqlite3_changes(db.handle()) > 0 ? report.records : report.duplicates);
}

void store_baselines(Database& db, int64_t task, const std::vector<LineRecords::Baseline>& list,
                     ImportReport& report) {
  for (const LineRecords::Baseline& b : list) {
    int64_t device = device_id(db, b.device);
    Statement s = db.prepare(
        "INSERT INTO baselines (task_id, dims, device_id, math_mode, created_at) VALUES (?, ?, ?, "
        "?, ?) ON CONFLICT (task_id, dims, device_id, math_mode) DO NOTHING RETURNING id");
    s.bind(1, task).bind(2, b.dims.dump()).bind(3, device).bind(4, b.math_mode);
    s.bind(5, b.created_at);
    if (!s.step()) {
      ++report.duplicates;
      continue;
    }
    int64_t id = s.integer(0);
    s.run();
    store_baseline_times(db, id, b.times);
    ++report.records;
  }
}

void store_llm_call(Database& db, std::optional<int64_t> candidate, const LineRecords::LlmCall& c,
                    ImportReport& report) {
  std::optional<int64_t> run = run_id(db, c.run);
  Statement known = db.prepare(
      "SELECT 1 FROM llm_calls WHERE run_id IS ? AND candidate_id IS ? AND model = ? AND status = "
      "? AND tokens_in = ? AND tokens_out = ? AND cost_usd = ? AND latency_ms IS ? AND created_at "
      "= ?");
  known.bind(1, run).bind(2, candidate).bind(3, c.model).bind(4, c.status).bind(5, c.tokens_in);
  known.bind(6, c.tokens_out).bind(7, c.cost_usd).bind(8, c.latency_ms).bind(9, c.created_at);
  if (known.step()) {
    ++report.duplicates;
    return;
  }
  Statement s = db.prepare(
      "INSERT INTO llm_calls (run_id, candidate_id, model, status, tokens_in, tokens_out, "
      "cost_usd, latency_ms, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, run).bind(2, candidate).bind(3, c.model).bind(4, c.status).bind(5, c.tokens_in);
  s.bind(6, c.tokens_out).bind(7, c.cost_usd).bind(8, c.latency_ms).bind(9, c.created_at).run();
  ++report.records;
}

// A task line's task, checked as a candidate line's is (import_check.cpp).
tasks::Task check_task(const json& tj, const LineChecker& f, std::optional<std::string>& created) {
  if (!tj.is_object()) f.fail("task", std::string("must be an object, not ") + tj.type_name());
  tasks::Task t;
  t.suite = f.name(tj, "task", "suite");
  t.name = f.name(tj, "task", "name");
  t.content_hash = f.name(tj, "task", "version");
  t.summary = f.text(tj, "task", "summary", false);
  t.tags = f.strings(tj, "task", "tags");
  t.reference = f.text(tj, "task", "definition", false);
  created = f.timestamp(tj, "task", "created_at", false);
  return t;
}

int64_t task_id(Archive& archive, Database& db, const tasks::Task& t,
                const std::optional<std::string>& created) {
  Statement exists =
      db.prepare("SELECT id FROM tasks WHERE suite = ? AND name = ? AND version = ?");
  exists.bind(1, t.suite).bind(2, t.name).bind(3, t.content_hash);
  if (exists.step()) return exists.integer(0);
  TaskId id = archive.upsert_task(t);
  if (created) {
    Statement when = db.prepare("UPDATE tasks SET created_at = ? WHERE id = ?");
    when.bind(1, *created).bind(2, id.value).run();
  }
  return id.value;
}

}  // namespace

LineRecords check_line_records(const json& j, const LineChecker& f) {
  LineRecords r;
  auto list = [&](const char* key) {
    const json* v = f.get(j, "", key, false);
    if (v && !v->is_array()) f.fail(key, std::string("must be a list, not ") + v->type_name());
    return v ? *v : json::array();
  };
  json screens = list("screens");
  for (size_t i = 0; i < screens.size(); ++i) {
    std::string at = "screens[" + std::to_string(i) + "]";
    const json& s = screens[i];
    if (!s.is_object()) f.fail(at, std::string("must be an object, not ") + s.type_name());
    LineRecords::Screen x;
    x.device = check_device(s, at, f);
    x.harness_version = f.integer(s, at, "harness_version", true, 0, 0, INT_MAX);
    x.run = check_run(s, at, f);
    x.outcome = f.text(s, at, "outcome", true);
    if (!known_outcome(x.outcome))
      f.fail(at + ".outcome", "'" + x.outcome.substr(0, 40) + "' is not an outcome kforge knows");
    x.median_ms = f.measure(s, at, "median_ms", false);
    x.summary = f.text(s, at, "summary", false);
    x.created_at = *f.timestamp(s, at, "created_at", true);
    r.screens.push_back(std::move(x));
  }
  json profiles = list("profiles");
  for (size_t i = 0; i < profiles.size(); ++i) {
    std::string at = "profiles[" + std::to_string(i) + "]";
    const json& p = profiles[i];
    if (!p.is_object()) f.fail(at, std::string("must be an object, not ") + p.type_name());
    r.profiles.push_back({check_device(p, at, f), f.object(p, at, "profile", true),
                          *f.timestamp(p, at, "created_at", true)});
  }
  json calls = list("llm_calls");
  for (size_t i = 0; i < calls.size(); ++i)
    r.llm_calls.push_back(check_llm_call(calls[i], "llm_calls[" + std::to_string(i) + "]", f));
  if (const json* task = f.get(j, "", "task", false); task && task->is_object())
    r.baselines = check_baselines(*task, f);
  return r;
}

void store_line_records(Archive& archive, const ImportedLine& line, const LineRecords& records,
                        bool trust, ImportReport& report) {
  size_t rows = records.screens.size() + records.profiles.size() + records.baselines.size() +
                records.llm_calls.size();
  if (!trust) {
    report.skipped += rows;
    return;
  }
  if (rows == 0) return;
  Database& db = database_of(archive);
  Statement c = db.prepare(
      "SELECT c.id, c.task_id FROM candidates c JOIN tasks t ON t.id = c.task_id WHERE t.suite = "
      "? AND t.name = ? AND t.version = ? AND c.identity = ?");
  c.bind(1, line.task.suite).bind(2, line.task.name).bind(3, line.task.content_hash);
  c.bind(4, line.candidate.identity);
  if (!c.step())
    throw ArchiveError(db.path() + ": the imported candidate " + line.candidate.identity +
                       " is not there after it was stored");
  int64_t candidate = c.integer(0), task = c.integer(1);
  for (const LineRecords::Screen& s : records.screens) {
    Statement ins = db.prepare(
        "INSERT OR IGNORE INTO screens (candidate_id, device_id, harness_version, run_id, outcome, "
        "median_ms, summary, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, candidate).bind(2, device_id(db, s.device)).bind(3, s.harness_version);
    ins.bind(4, run_id(db, s.run)).bind(5, s.outcome).bind(6, s.median_ms).bind(7, s.summary);
    ins.bind(8, s.created_at).run();
    count(db, report);
  }
  for (const LineRecords::Profile& p : records.profiles) {
    Statement ins = db.prepare(
        "INSERT OR IGNORE INTO profiles (candidate_id, device_id, profile, created_at) VALUES (?, "
        "?, ?, ?)");
    ins.bind(1, candidate).bind(2, device_id(db, p.device)).bind(3, p.profile.dump());
    ins.bind(4, p.created_at).run();
    count(db, report);
  }
  store_baselines(db, task, records.baselines, report);
  for (const LineRecords::LlmCall& call : records.llm_calls)
    store_llm_call(db, candidate, call, report);
}

void import_other_line(Archive& archive, const json& j, const LineChecker& f, bool trust,
                       ImportReport& report) {
  int64_t format = f.integer(j, "", "kforge_archive", true, 0, 1, INT_MAX);
  if (format != kFormat)
    f.fail("kforge_archive", "format " + std::to_string(format) +
                                 " is newer than this kforge reads (" + std::to_string(kFormat) +
                                 "); upgrade kforge");
  Database& db = database_of(archive);
  if (const json* tj = f.get(j, "", "task", false)) {
    std::optional<std::string> created;
    tasks::Task t = check_task(*tj, f, created);
    std::vector<LineRecords::Baseline> baselines = check_baselines(*tj, f);
    Transaction line(db);
    int64_t task = task_id(archive, db, t, created);
    if (trust)
      store_baselines(db, task, baselines, report);
    else
      report.skipped += baselines.size();
    line.commit();
  } else if (j.contains("run")) {
    std::optional<ImportedLine::Run> run = check_run(j, "", f);
    if (!run) f.fail("run", "must be an object, not null");
    Transaction line(db);
    (void)run_id(db, run);
    line.commit();
  } else if (j.contains("device")) {
    ImportedLine::Device d = check_device(j, "", f);
    Transaction line(db);
    (void)device_id(db, d);
    line.commit();
  } else {
    LineRecords::LlmCall call = check_llm_call(*f.get(j, "", "llm_call", true), "llm_call", f);
    if (!trust) {
      ++report.skipped;
      return;
    }
    Transaction line(db);
    store_llm_call(db, std::nullopt, call, report);
    line.commit();
  }
}

}  // namespace kforge::archive::detail
