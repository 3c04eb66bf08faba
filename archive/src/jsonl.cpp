// JSONL export and import (archive.h). A line holds one candidate with its task, parents (by
// identity), compiles and evaluations, and no database ids, so export(import(export(a))) equals
// export(a). Columns named like the public AI CUDA Engineer archive ride along for other tools.
#include <istream>
#include <ostream>

#include "kforge/archive/archive.h"
#include "kforge/common/hash.h"

namespace kforge::archive {
namespace {

using nlohmann::json;

constexpr int kFormat = 1;

bool is_ai_cuda_engineer_row(const json& j) { return j.contains("CUDA_Code") && !j.contains("kforge_archive"); }

std::string slug(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : '_';
  return out;
}

}  // namespace

size_t Archive::export_jsonl(std::ostream& out) {
  Statement ids = db_->prepare("SELECT id FROM candidates ORDER BY id");
  size_t n = 0;
  while (ids.step()) {
    CandidateId id{ids.integer(0)};
    json c = show(id);
    Statement t = db_->prepare(
        "SELECT t.suite, t.name, t.version, t.summary, t.tags, t.definition, t.created_at FROM tasks t JOIN candidates c "
        "ON c.task_id = t.id WHERE c.id = ?");
    t.bind(1, id.value);
    t.step();
    json line;
    line["kforge_archive"] = kFormat;
    line["task"] = {{"suite", t.text(0)}, {"name", t.text(1)}, {"version", t.text(2)}, {"summary", t.text(3)},
                    {"tags", json::parse(t.text(4))}, {"definition", t.text(5)}, {"created_at", t.text(6)}};
    json parents = json::array();
    for (const auto& p : c["parents"]) {
      Statement ps = db_->prepare("SELECT identity FROM candidates WHERE id = ?");
      ps.bind(1, p.get<int64_t>());
      if (ps.step()) parents.push_back(ps.text(0));
    }
    json run = nullptr;
    if (!c["run"].is_null()) {
      Statement r = db_->prepare("SELECT started_at, finished_at, status, config, budgets_used FROM runs WHERE id = ?");
      r.bind(1, c["run"].get<int64_t>());
      if (r.step())
        run = {{"started_at", r.text(0)}, {"finished_at", r.is_null(1) ? json(nullptr) : json(r.text(1))}, {"status", r.text(2)},
               {"config", json::parse(r.text(3))}, {"budgets_used", json::parse(r.text(4))}};
    }
    json evals = c["evaluations"];
    for (auto& e : evals) {
      if (e["device"].is_null()) continue;
      Statement d = db_->prepare("SELECT name, arch, sms, memory_bytes, driver FROM devices WHERE uuid = ?");
      d.bind(1, e["device"].get<std::string>());
      d.step();
      e["device"] = {{"uuid", e["device"]}, {"name", d.text(0)}, {"arch", d.text(1)},
                     {"sms", d.is_null(2) ? json(nullptr) : json(d.integer(2))},
                     {"memory_bytes", d.is_null(3) ? json(nullptr) : json(d.integer(3))}, {"driver", d.text(4)}};
    }
    line["candidate"] = {{"identity", c["identity"]}, {"source", c["source"]}, {"plan", c["plan"]}, {"tunables", c["tunables"]},
                         {"generation", c["generation"]}, {"island", c["island"]}, {"prompt_kind", c["prompt_kind"]},
                         {"model", c["model"]}, {"origin", c["origin"]}, {"verified", c["verified"]},
                         {"imported", c["imported"]}, {"created_at", c["created_at"]}, {"parents", parents}, {"run", run}};
    line["compiles"] = c["compiles"];
    line["evaluations"] = evals;
    // The AI CUDA Engineer archive's column names, from kforge's own numbers (best correct evaluation).
    json best = nullptr;
    for (const auto& e : evals)
      if (e["outcome"] == "correct" && !e["time_ms"].is_null() && (best.is_null() || e["time_ms"] < best["time_ms"])) best = e;
    line["Op_Name"] = t.text(1);
    line["Level_ID"] = t.text(0);
    line["Task_ID"] = t.text(0) + "/" + t.text(1);
    line["Kernel_Name"] = c["identity"];
    line["CUDA_Code"] = c["source"];
    line["CUDA_Runtime"] = best.is_null() ? json(nullptr) : best["time_ms"];
    line["PyTorch_Native_Runtime"] = best.is_null() ? json(nullptr) : best["eager_ms"];
    line["CUDA_Speedup_Native"] = best.is_null() ? json(nullptr) : best["speedup_eager"];
    line["Correct"] = !best.is_null();
    line["Max_Diff"] = best.is_null() || !best["evidence"].contains("max_abs_error") ? json(nullptr) : best["evidence"]["max_abs_error"];
    line["Error"] = evals.empty() ? json(nullptr) : json(evals.back()["outcome"] == "correct" ? "" : evals.back()["outcome"]);
    out << line.dump() << "\n";
    ++n;
  }
  return n;
}

size_t Archive::import_jsonl(std::istream& in, const std::string& source_name) {
  std::string text;
  size_t n = 0, line_no = 0;
  while (std::getline(in, text)) {
    ++line_no;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j;
    try {
      j = json::parse(text);
    } catch (const json::parse_error& e) {
      throw ArchiveError(source_name + ":" + std::to_string(line_no) + ": not a JSON object: " + e.what() + " (nothing from this line on was imported)");
    }
    auto field = [&](const json& obj, const char* key) -> const json& {
      if (!obj.contains(key)) throw ArchiveError(source_name + ":" + std::to_string(line_no) + ": missing field '" + key + "'");
      return obj.at(key);
    };
    if (is_ai_cuda_engineer_row(j)) {
      // Someone else's kernel and claims: retrieval text, unverified, never a winner.
      std::string op = j.value("Op_Name", std::string("unknown_op"));
      std::string level = j.contains("Level_ID") ? j["Level_ID"].dump() : "0";
      tasks::Task t;
      t.suite = "imported_" + slug(level);
      t.name = slug(op);
      t.summary = op + " (imported from " + source_name + ")";
      t.tags = {"imported"};
      t.content_hash = "imported";
      TaskId task = upsert_task(t);
      NewCandidate c;
      c.task = task;
      c.source = field(j, "CUDA_Code").get<std::string>();
      c.identity = content_hash(c.source);
      c.prompt_kind = "import";
      c.model = source_name;
      c.imported = true;
      for (const char* k : {"Op_Name", "Level_ID", "Task_ID", "Kernel_Name", "CUDA_Runtime", "PyTorch_Native_Runtime",
                            "CUDA_Speedup_Native", "Correct", "Max_Diff", "Error"})
        if (j.contains(k)) c.imported_claims[k] = j[k];
      c.imported_claims["source"] = source_name;
      add_candidate(c, std::nullopt, {});
      ++n;
      continue;
    }
    const json& tj = field(j, "task");
    const json& cj = field(j, "candidate");
    tasks::Task t;
    t.suite = field(tj, "suite");
    t.name = field(tj, "name");
    t.content_hash = field(tj, "version");
    t.summary = tj.value("summary", "");
    t.tags = tj.value("tags", std::vector<std::string>{});
    t.reference = tj.value("definition", "");
    Statement exists = db_->prepare("SELECT id FROM tasks WHERE suite = ? AND name = ? AND version = ?");
    exists.bind(1, t.suite).bind(2, t.name).bind(3, t.content_hash);
    TaskId task;
    if (exists.step()) {
      task = TaskId{exists.integer(0)};
    } else {
      task = upsert_task(t);
      Statement when = db_->prepare("UPDATE tasks SET created_at = ? WHERE id = ?");
      when.bind(1, tj.value("created_at", "")).bind(2, task.value).run();
    }
    NewCandidate c;
    c.task = task;
    c.identity = field(cj, "identity");
    c.source = field(cj, "source");
    c.plan = cj.value("plan", json::object());
    c.tunables = cj.value("tunables", json::object());
    c.generation = cj.value("generation", 0);
    c.island = cj.value("island", 0);
    c.prompt_kind = cj.value("prompt_kind", "");
    c.model = cj.value("model", "");
    c.imported = cj.value("origin", "kforge") == "imported";
    c.imported_claims = cj.value("imported", json::object());
    c.created_at = cj.value("created_at", "");
    for (const auto& p : cj.value("parents", json::array())) {
      Statement ps = db_->prepare("SELECT id FROM candidates WHERE identity = ? ORDER BY id LIMIT 1");
      ps.bind(1, p.get<std::string>());
      if (ps.step()) c.parents.push_back(CandidateId{ps.integer(0)});
    }
    if (cj.contains("run") && !cj["run"].is_null()) {
      const json& r = cj["run"];
      Statement rs = db_->prepare("SELECT id FROM runs WHERE started_at = ? AND config = ?");
      rs.bind(1, r.value("started_at", "")).bind(2, r.value("config", json::object()).dump());
      if (rs.step()) {
        c.run = RunId{rs.integer(0)};
      } else {
        Statement ins = db_->prepare("INSERT INTO runs (started_at, finished_at, status, config, budgets_used) VALUES (?, ?, ?, ?, ?)");
        ins.bind(1, r.value("started_at", ""));
        if (r["finished_at"].is_null()) ins.bind_null(2);
        else ins.bind(2, r["finished_at"].get<std::string>());
        ins.bind(3, r.value("status", "finished")).bind(4, r.value("config", json::object()).dump());
        ins.bind(5, r.value("budgets_used", json::object()).dump()).run();
        c.run = RunId{db_->last_insert_id()};
      }
    }
    std::vector<EvaluationRecord> evals;
    for (const auto& e : j.value("evaluations", json::array())) {
      EvaluationRecord r;
      if (e.contains("device") && e["device"].is_object()) {
        const json& d = e["device"];
        r.device = upsert_device(d.value("uuid", ""), d.value("name", ""), d.value("arch", ""),
                                 d["sms"].is_null() ? std::nullopt : std::optional<int64_t>(d["sms"].get<int64_t>()),
                                 d["memory_bytes"].is_null() ? std::nullopt : std::optional<int64_t>(d["memory_bytes"].get<int64_t>()),
                                 d.value("driver", ""));
      }
      r.outcome = field(e, "outcome");
      r.flags = e.value("flags", std::vector<std::string>{});
      r.evidence = e.value("evidence", json::object());
      r.dims = e.value("dims", json::object());
      auto opt = [&](const char* k) { return e.contains(k) && !e[k].is_null() ? std::optional<double>(e[k].get<double>()) : std::nullopt; };
      r.time_ms = opt("time_ms");
      r.time_iqr_ms = opt("time_iqr_ms");
      r.time_min_ms = opt("time_min_ms");
      r.eager_ms = opt("eager_ms");
      r.scripted_ms = opt("scripted_ms");
      r.speedup_eager = opt("speedup_eager");
      r.speedup_scripted = opt("speedup_scripted");
      r.roofline_fraction = opt("roofline_fraction");
      r.admitted = e.value("admitted", false);
      r.harness_version = e.value("harness_version", 0);
      r.toolchain = e.value("toolchain", json::object());
      r.created_at = e.value("created_at", "");
      evals.push_back(r);
    }
    std::optional<CompileRecord> first_compile;
    std::vector<CompileRecord> more;
    for (const auto& cr : j.value("compiles", json::array())) {
      CompileRecord r;
      r.ok = cr.value("ok", false);
      r.stage = cr.value("stage", "");
      r.errors = cr.value("errors", std::vector<std::string>{});
      r.log = cr.value("log", "");
      r.resources = cr.value("resources", json::object());
      if (cr.contains("compile_ms") && !cr["compile_ms"].is_null()) r.compile_ms = cr["compile_ms"].get<double>();
      r.arch = cr.value("arch", "");
      r.nvrtc = cr.value("nvrtc", "");
      r.created_at = cr.value("created_at", "");
      if (!first_compile) first_compile = r;
      else more.push_back(r);
    }
    // Each write is its own transaction: a kill between them leaves whole rows only.
    add_candidate(c, first_compile, evals);
    for (const auto& r : more) add_candidate(c, r, {});
    ++n;
  }
  return n;
}

}  // namespace kforge::archive
