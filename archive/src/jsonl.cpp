// JSONL export and import (archive.h). A line holds one candidate with its task, parents (by
// identity), compiles and evaluations, and no database ids, so export(import(export(a))) equals
// export(a) (import --trust). Columns named like the public AI CUDA Engineer archive ride along for
// other tools. What an import reads is a claim: checked field by field (import_check.h), stored
// one line per transaction, never twice, and never a winner unless the user trusts the file.
#include <cerrno>
#include <cstring>
#include <istream>
#include <memory>
#include <ostream>
#include <set>

#include "baseline_rows.h"
#include "database_of.h"
#include "evaluation_columns.h"
#include "gzip_input.h"
#include "import_check.h"
#include "jsonl_records.h"
#include "kforge/archive/archive.h"
#include "kforge/archive/lineage.h"
#include "kforge/common/hash.h"
#include "stored_json.h"

namespace kforge::archive {
namespace {

using nlohmann::json;

constexpr int kFormat = 1;
constexpr size_t kMaxLineBytes = size_t{64} << 20;

bool is_ai_cuda_engineer_row(const json& j) {
  return j.contains("CUDA_Code") && !j.contains("kforge_archive");
}

std::string slug(const std::string& s) {
  std::string out;
  for (char c : s)
    out += std::isalnum(static_cast<unsigned char>(c))
               ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
               : '_';
  return out;
}

// One line (without the newline) of at most kMaxLineBytes; false at the end of the input.
bool read_line(std::istream& in, std::string& out, const std::string& file, int line_no) {
  out.clear();
  std::streambuf* sb = in.rdbuf();
  bool any = false;
  for (int c = sb->sbumpc(); c != std::char_traits<char>::eof(); c = sb->sbumpc()) {
    any = true;
    if (c == '\n') return true;
    if (out.size() >= kMaxLineBytes)
      throw InputError(file, line_no, "",
                       "the line is longer than 64 MiB; no kforge line is that long");
    out.push_back(static_cast<char>(c));
  }
  return any;
}

// Someone else's kernel and claims: retrieval text, unverified, never a winner (--trust or not).
void import_ai_cuda_engineer_row(Archive& ar, const json& j, const detail::LineChecker& f,
                                 const std::string& source_name, ImportReport& report) {
  std::string op = f.text(j, "", "Op_Name", false, "unknown_op");
  std::string level = "0";
  if (const json* l = f.get(j, "", "Level_ID", false)) {
    if (!l->is_string() && !l->is_number_integer())
      f.fail("Level_ID", std::string("must be a string or an integer, not ") + l->type_name());
    level = l->dump();
  }
  std::string source = f.text(j, "", "CUDA_Code", true);
  if (source.empty()) f.fail("CUDA_Code", "is empty");
  tasks::Task t;
  t.suite = "imported_" + slug(level);
  t.name = slug(op);
  t.summary = op + " (imported from " + source_name + ")";
  t.tags = {"imported"};
  t.content_hash = "imported";
  Transaction line(detail::database_of(ar));
  NewCandidate c;
  c.task = ar.upsert_task(t);
  c.source = source;
  c.identity = content_hash(c.source);
  c.prompt_kind = std::string(to_string(LineageKind::Import));
  c.model = source_name;
  c.imported = true;
  c.import_source = source_name;
  c.import_trust = "claimed";
  for (const char* k : {"Op_Name", "Level_ID", "Task_ID", "Kernel_Name", "CUDA_Runtime",
                        "PyTorch_Native_Runtime", "PyTorch_Compile_Runtime", "CUDA_Speedup_Native",
                        "CUDA_Speedup_Compile", "Correct", "Max_Diff", "Error"})
    if (j.contains(k)) c.imported_claims[k] = j[k];
  c.imported_claims["source"] = source_name;
  Statement known = detail::database_of(ar).prepare(
      "SELECT 1 FROM candidates WHERE task_id = ? AND identity = ?");
  known.bind(1, c.task.value).bind(2, c.identity);
  ++(known.step() ? report.known_candidates : report.new_candidates);
  ar.add_candidate(c, std::nullopt, {});
  line.commit();
}

}  // namespace

size_t Archive::export_jsonl(std::ostream& out, const std::string& destination) {
  // A full disk or a closed pipe is an error (errno is read right after the write that failed),
  // not a short export that says it succeeded.
  auto check = [&](size_t lines) {
    if (out) return;
    int err = errno;
    throw UsageError("cannot write the export to " + destination +
                     (err ? std::string(": ") + std::strerror(err) : std::string()) + " (after " +
                     std::to_string(lines) + " line(s)); the export is incomplete");
  };
  Statement ids = db_->prepare("SELECT id FROM candidates ORDER BY id");
  std::set<int64_t> baselines_written;  // a task's baselines ride on its first candidate's line
  size_t n = 0;
  while (ids.step()) {
    CandidateId id{ids.integer(0)};
    json c = show(id);
    if (c.is_null())
      throw ArchiveError(db_->path() + ": table candidates, row " + std::to_string(id.value) +
                         ", column task_id: names no task; the archive is damaged");
    Statement t = db_->prepare(
        "SELECT t.suite, t.name, t.version, t.summary, t.tags, t.definition, t.created_at, t.id "
        "FROM tasks t JOIN candidates c "
        "ON c.task_id = t.id WHERE c.id = ?");
    t.bind(1, id.value);
    t.step();
    json line;
    line["kforge_archive"] = kFormat;
    line["task"] = {{"suite", t.text(0)},
                    {"name", t.text(1)},
                    {"version", t.text(2)},
                    {"summary", t.text(3)},
                    {"tags", stored_json(*db_, t, 4, "tasks", "tags", t.integer(7))},
                    {"definition", t.text(5)},
                    {"created_at", t.text(6)}};
    json parents = json::array();
    for (const auto& p : c["parents"]) {
      Statement ps = db_->prepare("SELECT identity FROM candidates WHERE id = ?");
      ps.bind(1, p.get<int64_t>());
      if (ps.step()) parents.push_back(ps.text(0));
    }
    json run = nullptr;
    if (!c["run"].is_null()) {
      Statement r = db_->prepare(
          "SELECT started_at, finished_at, status, config, budgets_used, id FROM runs WHERE id = "
          "?");
      r.bind(1, c["run"].get<int64_t>());
      if (r.step())
        run = {{"started_at", r.text(0)},
               {"finished_at", r.is_null(1) ? json(nullptr) : json(r.text(1))},
               {"status", r.text(2)},
               {"config", stored_json(*db_, r, 3, "runs", "config", r.integer(5))},
               {"budgets_used", stored_json(*db_, r, 4, "runs", "budgets_used", r.integer(5))}};
    }
    json compiles = c["compiles"];
    for (auto& cr : compiles) cr.erase("import");
    json evals = c["evaluations"];
    for (auto& e : evals) {
      // A claim stays a claim wherever the line goes next; what was measured here (or trusted) is
      // plain, so export(import --trust(export(a))) equals export(a).
      json from = e["import"];
      e.erase("import");
      e.erase("speedup");  // for people; computed from the baselines again
      if (!from.is_null() && from["trust"] == "claimed" && from["from"].is_string())
        e["claimed_from"] = from["from"];
      if (e["device"].is_null()) continue;
      Statement d =
          db_->prepare("SELECT name, arch, sms, memory_bytes, driver FROM devices WHERE uuid = ?");
      d.bind(1, e["device"].get<std::string>());
      d.step();
      e["device"] = {{"uuid", e["device"]},
                     {"name", d.text(0)},
                     {"arch", d.text(1)},
                     {"sms", d.is_null(2) ? json(nullptr) : json(d.integer(2))},
                     {"memory_bytes", d.is_null(3) ? json(nullptr) : json(d.integer(3))},
                     {"driver", d.text(4)}};
    }
    line["candidate"] = {{"identity", c["identity"]},
                         {"source", c["source"]},
                         {"plan", c["plan"]},
                         {"tunables", c["tunables"]},
                         {"generation", c["generation"]},
                         {"island", c["island"]},
                         {"prompt_kind", c["prompt_kind"]},
                         {"model", c["model"]},
                         {"origin", c["origin"]},
                         {"verified", c["verified"]},
                         {"imported", c["imported"]},
                         {"created_at", c["created_at"]},
                         {"parents", parents},
                         {"run", run}};
    line["compiles"] = compiles;
    line["evaluations"] = evals;
    detail::add_line_records(*db_, id, TaskId{t.integer(7)},
                             baselines_written.insert(t.integer(7)).second, line);
    // The AI CUDA Engineer archive's column names, from kforge's own numbers (best correct
    // evaluation).
    json best = nullptr;
    for (const auto& e : evals)
      if (e["outcome"] == "correct" && !e["time_ms"].is_null() && !e.contains("claimed_from") &&
          (best.is_null() || e["time_ms"] < best["time_ms"]))
        best = e;
    line["Op_Name"] = t.text(1);
    line["Level_ID"] = t.text(0);
    line["Task_ID"] = t.text(0) + "/" + t.text(1);
    line["Kernel_Name"] = c["identity"];
    line["CUDA_Code"] = c["source"];
    BaselineTimes baselines =
        best.is_null() ? BaselineTimes{} : BaselineTimes::from_json(best["baselines"]);
    std::optional<double> time_ms =
        best.is_null() ? std::nullopt : std::optional(best["time_ms"].get<double>());
    auto number = [](std::optional<double> x) { return x ? json(*x) : json(nullptr); };
    line["CUDA_Runtime"] = number(time_ms);
    line["PyTorch_Native_Runtime"] = number(baselines.ms(BaselineKind::Eager));
    line["CUDA_Speedup_Native"] = number(baselines.speedup(BaselineKind::Eager, time_ms));
    // torch.compile's (default mode)
    line["PyTorch_Compile_Runtime"] = number(baselines.ms(BaselineKind::Compiled));
    line["CUDA_Speedup_Compile"] = number(baselines.speedup(BaselineKind::Compiled, time_ms));
    line["Correct"] = !best.is_null();
    line["Max_Diff"] = best.is_null() || !best["evidence"].is_object() ||
                               !best["evidence"].contains("max_abs_error")
                           ? json(nullptr)
                           : best["evidence"]["max_abs_error"];
    line["Error"] = evals.empty()
                        ? json(nullptr)
                        : json(evals.back()["outcome"] == "correct" ? "" : evals.back()["outcome"]);
    errno = 0;
    out << line.dump() << "\n";
    check(n);
    ++n;
  }
  for (const json& line : detail::other_lines(*db_)) {  // rows no candidate's line carries
    errno = 0;
    out << line.dump() << "\n";
    check(n);
    ++n;
  }
  errno = 0;
  out.flush();
  check(n);
  return n;
}

void Archive::store_imported(const detail::ImportedLine& l, ImportReport& report) {
  Transaction line(*db_);  // the whole line or nothing of it
  TaskId task;
  Statement exists =
      db_->prepare("SELECT id FROM tasks WHERE suite = ? AND name = ? AND version = ?");
  exists.bind(1, l.task.suite).bind(2, l.task.name).bind(3, l.task.content_hash);
  if (exists.step()) {
    task = TaskId{exists.integer(0)};
  } else {
    task = upsert_task(l.task);
    if (l.task_created_at) {
      Statement when = db_->prepare("UPDATE tasks SET created_at = ? WHERE id = ?");
      when.bind(1, *l.task_created_at).bind(2, task.value).run();
    }
  }
  NewCandidate c = l.candidate;
  c.task = task;
  if (l.run) {
    const detail::ImportedLine::Run& r = *l.run;
    Statement rs = db_->prepare("SELECT id FROM runs WHERE started_at = ? AND config = ?");
    rs.bind(1, r.started_at).bind(2, r.config.dump());
    if (rs.step()) {
      c.run = RunId{rs.integer(0)};
    } else {
      Statement ins = db_->prepare(
          "INSERT INTO runs (started_at, finished_at, status, config, budgets_used) VALUES (?, ?, "
          "?, ?, ?)");
      ins.bind(1, r.started_at)
          .bind(2, r.finished_at)
          .bind(3, r.status)
          .bind(4, r.config.dump())
          .bind(5, r.budgets_used.dump());
      ins.run();
      c.run = RunId{db_->last_insert_id()};
    }
  }
  for (const auto& p : l.parents) {
    Statement ps = db_->prepare("SELECT id FROM candidates WHERE identity = ? ORDER BY id LIMIT 1");
    ps.bind(1, p);
    if (ps.step()) c.parents.push_back(CandidateId{ps.integer(0)});
  }
  std::optional<CandidateId> known;
  Statement find = db_->prepare("SELECT id FROM candidates WHERE task_id = ? AND identity = ?");
  find.bind(1, task.value).bind(2, c.identity);
  if (find.step()) known = CandidateId{find.integer(0)};
  ++(known ? report.known_candidates : report.new_candidates);

  // Reports already stored (the same line imported before, or this archive's own) are not added
  // again.
  std::vector<CompileRecord> compiles;
  for (const auto& cr : l.compiles) {
    if (known) {
      Statement s = db_->prepare(
          "SELECT 1 FROM compiles WHERE candidate_id = ? AND ok = ? AND stage = ? AND errors = ? "
          "AND log = ? AND resources = ? "
          "AND compile_ms IS ? AND arch = ? AND nvrtc = ? AND created_at = ?");
      s.bind(1, known->value)
          .bind(2, int64_t{cr.ok})
          .bind(3, cr.stage)
          .bind(4, json(cr.errors).dump())
          .bind(5, cr.log);
      s.bind(6, cr.resources.dump())
          .bind(7, cr.compile_ms)
          .bind(8, cr.arch)
          .bind(9, cr.nvrtc)
          .bind(10, cr.created_at);
      if (s.step()) {
        ++report.duplicates;
        continue;
      }
    }
    compiles.push_back(cr);
  }
  std::vector<EvaluationRecord> evaluations;
  for (const auto& ie : l.evaluations) {
    EvaluationRecord e = ie.record;
    if (known) {
      Statement s = db_->prepare(
          "SELECT e.id FROM evaluations e LEFT JOIN devices d ON d.id = e.device_id WHERE "
          "e.candidate_id = ? AND d.uuid IS ? AND e.outcome = ? AND e.flags = ? AND e.evidence = ? "
          "AND e.dims = ? AND e.time_ms IS ? AND e.time_iqr_ms IS ? AND e.time_min_ms IS ? AND "
          "e.roofline_fraction IS ? AND e.admitted = ? AND e.harness_version = ? AND e.toolchain "
          "= ? AND e.created_at = ?");
      s.bind(1, known->value);
      if (ie.device)
        s.bind(2, ie.device->uuid);
      else
        s.bind_null(2);
      bind_evaluation_columns(s, e);
      std::vector<std::optional<int64_t>> same;
      while (s.step()) same.push_back(s.integer(0));
      bool duplicate = false;
      for (const BaselineTimes& b : detail::evaluation_baselines(*db_, same))
        duplicate = duplicate || b.to_json() == e.baselines.to_json();
      if (duplicate) {
        ++report.duplicates;
        continue;
      }
    }
    if (ie.device) {
      // A device already known here keeps its own row: an import does not rewrite it.
      const detail::ImportedLine::Device& d = *ie.device;
      Statement ds = db_->prepare("SELECT id FROM devices WHERE uuid = ?");
      ds.bind(1, d.uuid);
      if (ds.step()) {
        e.device = DeviceId{ds.integer(0)};
      } else {
        Statement ins = db_->prepare(
            "INSERT INTO devices (uuid, name, arch, sms, memory_bytes, driver) VALUES (?, ?, ?, ?, "
            "?, ?)");
        ins.bind(1, d.uuid)
            .bind(2, d.name)
            .bind(3, d.arch)
            .bind(4, d.sms)
            .bind(5, d.memory_bytes)
            .bind(6, d.driver)
            .run();
        e.device = DeviceId{db_->last_insert_id()};
      }
    }
    ++(e.import_trust == "claimed" ? report.claimed : report.trusted);
    evaluations.push_back(e);
  }
  report.compiles += compiles.size();
  report.evaluations += evaluations.size();
  add_candidate(c, compiles.empty() ? std::nullopt : std::optional<CompileRecord>(compiles[0]),
                evaluations);
  for (size_t i = 1; i < compiles.size(); ++i) add_candidate(c, compiles[i], {});
  line.commit();
}

ImportReport Archive::import_jsonl(std::istream& raw, const std::string& source_name,
                                   const ImportOptions& options) {
  // Gzip (the magic bytes, whatever the name) is read through zlib as it streams.
  std::unique_ptr<detail::GzipBuf> gzip;
  std::unique_ptr<std::istream> inflated;
  if (detail::starts_with_gzip(raw)) {
    gzip = std::make_unique<detail::GzipBuf>(raw.rdbuf(), source_name);
    inflated = std::make_unique<std::istream>(gzip.get());
  }
  std::istream& in = inflated ? *inflated : raw;
  ImportReport report;
  std::string text;
  int line_no = 0;
  auto what_happened = [&] {
    return "; nothing of this line was stored" +
           (report.lines
                ? ", the " + std::to_string(report.lines) + " line(s) before it were imported"
                : std::string()) +
           " (importing again adds nothing twice: fix the line and re-run)";
  };
  // A candidate's line: checked whole (its records too) before anything is stored, then stored
  // in one transaction.
  auto store_candidate_line = [&](const json& j, const detail::LineChecker& f) {
    detail::ImportedLine line = detail::check_kforge_line(j, f, source_name, options);
    detail::LineRecords records = detail::check_line_records(j, f);
    Transaction whole(*db_);
    store_imported(line, report);
    detail::store_line_records(*this, line, records, options.trust, report);
    whole.commit();
  };
  while (true) {
    int current = line_no + 1;
    try {
      if (!read_line(in, text, source_name, current)) break;
      line_no = current;
      if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
      detail::LineChecker f(source_name, line_no);
      json j = f.parse(text);
      if (is_ai_cuda_engineer_row(j))
        import_ai_cuda_engineer_row(*this, j, f, source_name, report);
      else if (!j.contains("candidate") && (j.contains("task") || j.contains("run") ||
                                            j.contains("device") || j.contains("llm_call")))
        detail::import_other_line(*this, j, f, options.trust, report);
      else
        store_candidate_line(j, f);
      ++report.lines;
    } catch (const InputError& e) {
      throw InputError(e.file(), e.line(), e.field(), e.problem() + what_happened());
    } catch (const ArchiveError& e) {
      throw ArchiveError(std::string(e.what()) + " (importing " + source_name + " line " +
                         std::to_string(current) + what_happened() + ")");
    }
  }
  if (in.bad() || raw.bad())
    throw InputError(source_name, std::nullopt, "",
                     "reading failed after line " + std::to_string(line_no));
  return report;
}

}  // namespace kforge::archive
