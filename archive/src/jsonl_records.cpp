#include "jsonl_records.h"

#include "baseline_rows.h"
#include "stored_json.h"

namespace kforge::archive::detail {
namespace {

using nlohmann::json;

constexpr int kFormat = 1;  // as jsonl.cpp writes: these lines are additions to format 1

json real_or_null(const Statement& s, int col) {
  return s.is_null(col) ? json(nullptr) : json(s.real(col));
}

json device_json(Database& db, int64_t id) {
  Statement d =
      db.prepare("SELECT uuid, name, arch, sms, memory_bytes, driver FROM devices WHERE id = ?");
  d.bind(1, id);
  d.step();
  return {{"uuid", d.text(0)},
          {"name", d.text(1)},
          {"arch", d.text(2)},
          {"sms", d.is_null(3) ? json(nullptr) : json(d.integer(3))},
          {"memory_bytes", d.is_null(4) ? json(nullptr) : json(d.integer(4))},
          {"driver", d.text(5)}};
}

// A run by what identifies it across archives (its start and config), as a candidate's line has it.
json run_json(Database& db, const Statement& row, int col) {
  if (row.is_null(col)) return nullptr;
  Statement r = db.prepare(
      "SELECT started_at, finished_at, status, config, budgets_used, id FROM runs WHERE id = ?");
  r.bind(1, row.integer(col));
  r.step();
  return {{"started_at", r.text(0)},
          {"finished_at", r.is_null(1) ? json(nullptr) : json(r.text(1))},
          {"status", r.text(2)},
          {"config", stored_json(db, r, 3, "runs", "config", r.integer(5))},
          {"budgets_used", stored_json(db, r, 4, "runs", "budgets_used", r.integer(5))}};
}

json task_json(Database& db, int64_t id) {
  Statement t = db.prepare(
      "SELECT suite, name, version, summary, tags, definition, created_at FROM tasks WHERE id = ?");
  t.bind(1, id);
  t.step();
  return {{"suite", t.text(0)},
          {"name", t.text(1)},
          {"version", t.text(2)},
          {"summary", t.text(3)},
          {"tags", stored_json(db, t, 4, "tasks", "tags", id)},
          {"definition", t.text(5)},
          {"created_at", t.text(6)}};
}

json baselines_of(Database& db, int64_t task) {
  json out = json::array();
  std::vector<int64_t> ids;
  Statement b = db.prepare(
      "SELECT dims, device_id, math_mode, created_at, id FROM baselines WHERE task_id = ? ORDER BY "
      "id");
  b.bind(1, task);
  while (b.step()) {
    ids.push_back(b.integer(4));
    out.push_back({{"dims", stored_json(db, b, 0, "baselines", "dims", b.integer(4))},
                   {"device", device_json(db, b.integer(1))},
                   {"math_mode", b.text(2)},
                   {"created_at", b.text(3)}});
  }
  std::map<int64_t, BaselineTimes> times = baseline_times(db, ids);
  for (size_t i = 0; i < ids.size(); ++i) out[i]["baselines"] = times[ids[i]].to_json();
  return out;
}

json llm_call_json(Database& db, const Statement& l) {
  return {{"run", run_json(db, l, 0)},        {"model", l.text(1)},         {"status", l.text(2)},
          {"tokens_in", l.integer(3)},        {"tokens_out", l.integer(4)}, {"cost_usd", l.real(5)},
          {"latency_ms", real_or_null(l, 6)}, {"created_at", l.text(7)}};
}

const char* kLlmCallColumns =
    "SELECT run_id, model, status, tokens_in, tokens_out, cost_usd, latency_ms, created_at FROM "
    "llm_calls WHERE ";

}  // namespace

void add_line_records(Database& db, CandidateId candidate, TaskId task, bool baselines,
                      json& line) {
  json screens = json::array(), profiles = json::array(), calls = json::array();
  Statement s = db.prepare(
      "SELECT device_id, harness_version, run_id, outcome, median_ms, summary, created_at FROM "
      "screens WHERE candidate_id = ? ORDER BY id");
  s.bind(1, candidate.value);
  while (s.step())
    screens.push_back({{"device", device_json(db, s.integer(0))},
                       {"harness_version", s.integer(1)},
                       {"run", run_json(db, s, 2)},
                       {"outcome", s.text(3)},
                       {"median_ms", real_or_null(s, 4)},
                       {"summary", s.text(5)},
                       {"created_at", s.text(6)}});
  Statement p = db.prepare(
      "SELECT device_id, profile, created_at, id FROM profiles WHERE candidate_id = ? ORDER BY id");
  p.bind(1, candidate.value);
  while (p.step())
    profiles.push_back({{"device", device_json(db, p.integer(0))},
                        {"profile", stored_json(db, p, 1, "profiles", "profile", p.integer(3))},
                        {"created_at", p.text(2)}});
  Statement l = db.prepare(std::string(kLlmCallColumns) + "candidate_id = ? ORDER BY id");
  l.bind(1, candidate.value);
  while (l.step()) calls.push_back(llm_call_json(db, l));
  if (!screens.empty()) line["screens"] = screens;
  if (!profiles.empty()) line["profiles"] = profiles;
  if (!calls.empty()) line["llm_calls"] = calls;
  if (!baselines) return;
  json list = baselines_of(db, task.value);
  if (!list.empty()) line["task"]["baselines"] = list;
}

std::vector<json> other_lines(Database& db) {
  std::vector<json> out;
  auto each = [&](const char* sql, auto&& make) {
    Statement s = db.prepare(sql);
    while (s.step()) out.push_back(make(s));
  };
  each(
      "SELECT id FROM tasks t WHERE NOT EXISTS (SELECT 1 FROM candidates c WHERE c.task_id = "
      "t.id) ORDER BY id",
      [&](Statement& s) {
        json task = task_json(db, s.integer(0));
        json baselines = baselines_of(db, s.integer(0));
        if (!baselines.empty()) task["baselines"] = baselines;
        return json{{"kforge_archive", kFormat}, {"task", task}};
      });
  each(
      "SELECT id FROM runs r WHERE NOT EXISTS (SELECT 1 FROM candidates c WHERE c.run_id = r.id) "
      "ORDER BY id",
      [&](Statement& s) {
        return json{{"kforge_archive", kFormat}, {"run", run_json(db, s, 0)}};
      });
  each(
      "SELECT id FROM devices d WHERE NOT EXISTS (SELECT 1 FROM evaluations x WHERE x.device_id "
      "= d.id) AND NOT EXISTS (SELECT 1 FROM screens x WHERE x.device_id = d.id) AND NOT EXISTS "
      "(SELECT 1 FROM profiles x WHERE x.device_id = d.id) AND NOT EXISTS (SELECT 1 FROM "
      "baselines x WHERE x.device_id = d.id) ORDER BY id",
      [&](Statement& s) {
        return json{{"kforge_archive", kFormat}, {"device", device_json(db, s.integer(0))}};
      });
  Statement l = db.prepare(std::string(kLlmCallColumns) + "candidate_id IS NULL ORDER BY id");
  while (l.step()) out.push_back({{"kforge_archive", kFormat}, {"llm_call", llm_call_json(db, l)}});
  return out;
}

}  // namespace kforge::archive::detail
