// `kforge corpus PATH...`: judges many answers in one judge session (evolve/corpus.h), each naming
// its task in its first line (`<!-- task: suite/name -->`). Prints a table (file, task, expected,
// verdict, judge seconds, time, speedups over each baseline and the best, roofline) and the
// throughput: issue 6's benchmark and issue 7's corpus table. An answer's own problem is a "not
// judged" row; kforge's own failure ends the command (exit 4).
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "baseline_columns.h"
#include "candidate_input.h"
#include "command_list.h"
#include "commands.h"
#include "compiled_baselines.h"
#include "kforge/archive/lineage.h"
#include "kforge/common/strings.h"
#include "kforge/compile/candidate.h"
#include "kforge/evolve/corpus.h"
#include "kforge/evolve/evaluator.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/judge.h"
#include "progress.h"
#include "table.h"

namespace kforge::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct CorpusArgs {
  std::vector<std::string> paths;
  std::string tasks_dir, db, jsonl, expect, kind = "manual";
  std::optional<uint64_t> seed;
  int jobs = 0, tune = 1;
  bool no_timing = false, admit = false, no_store = false, no_compile = false,
       no_max_autotune = false, json = false;
};

// The table, the JSONL records and the progress line, as the answers are judged; with --json the
// records are kept for stdout and the rest goes to stderr (`out`).
class Printer : public evolve::CorpusObserver {
 public:
  Printer(const std::vector<evolve::CorpusEntry>& entries, const std::string& jsonl,
          std::ostream& out, bool keep_records)
      : out(out), entries_(entries), table_(heading_row()), keep_records_(keep_records) {
    if (!jsonl.empty()) jsonl_ = std::make_unique<std::ofstream>(jsonl);
  }

  static std::vector<std::string> heading_row() {
    std::vector<std::string> head = {"FILE", "TASK",   "EXPECTED", "VERDICT",
                                     "",     "JUDGED", "TIME ms"};
    for (const std::string& label : baseline_labels(true)) head.push_back("x " + heading(label));
    head.push_back("ROOFLINE");
    return head;
  }

  void on_step(size_t i, const std::string& step) override {
    progress_.show("[" + std::to_string(i + 1) + "/" + std::to_string(entries_.size()) + "] " +
                   entries_[i].name + ": " + step);
  }

  // A point that screens wrong is printed: an honest kernel should be correct at every point of
  // its tune space.
  void on_screened(const evolve::CorpusEntry& e, const std::vector<evolve::Checked>& points,
                   const evolve::Screened& s) override {
    progress_.clear();
    for (const auto& [i, v] : s.wrong)
      out << "  " << e.name << " at " << tunables_text(points[i].report.tunables, " ") << ": "
          << verify::to_string(v.outcome) << ": " << printable(v.summary.substr(0, 200))
          << std::endl;
    out << "  " << e.name << ": screened " << points.size() << " tune point(s), chose "
        << tunables_text(points[s.chosen].report.tunables, " ")
        << (s.chosen_ms ? " at " + fixed(*s.chosen_ms, 4) + " ms" : "") << std::endl;
  }

  void on_result(size_t, const evolve::CorpusResult& r) override {
    const evolve::CorpusEntry& e = *r.entry;
    progress_.clear();
    if (!r.not_judged.empty()) {
      out << e.name << ": not judged: " << printable(r.not_judged) << std::endl;
      table_.add({e.name, e.task_spec, join(e.expected, "|"), "-", "NOT JUDGED"});
      if (keep_records_)
        records.push_back({{"file", e.path}, {"task", e.task_spec}, {"not_judged", r.not_judged}});
      ++unmet;
      return;
    }
    const verify::Verdict& v = r.evaluation.verdict;
    double ms = r.evaluation.verify_ms + r.evaluation.admission_ms;
    judge_ms_total += ms + r.tuning_ms;
    ++judged;
    ++counts[r.outcome];
    if (!r.as_expected) ++unmet;
    const auto& t = v.timing;
    const evolve::Checked& c = r.checked;
    std::vector<std::string> row = {e.name,
                                    c.proposal.task->id(),
                                    join(e.expected, "|"),
                                    r.outcome,
                                    e.expected.empty() ? "" : (r.as_expected ? "ok" : "UNEXPECTED"),
                                    fixed(ms / 1000, 2) + " s",
                                    t ? fixed(t->time.median_ms, 4) : ""};
    for (std::string& x : t ? speedup_cells(verify::medians(t->baselines), t->time.median_ms)
                            : std::vector<std::string>(baseline_kinds().size() + 1))
      row.push_back(x);
    row.push_back(t && t->roofline_fraction ? fixed(100 * *t->roofline_fraction, 0) + "%" : "");
    table_.add(row);
    out << "  " << e.name << ": " << r.outcome << (r.as_expected ? "" : "  (UNEXPECTED)") << " in "
        << fixed(ms / 1000, 2) << " s: " << v.summary.substr(0, 300) << std::endl;
    if (jsonl_ || keep_records_) {
      json j{{"file", e.path},
             {"task", c.proposal.task->id()},
             {"expected", e.expected},
             {"outcome", r.outcome},
             {"flags", v.flags},
             {"summary", v.summary},
             {"judge_ms", ms},
             {"identity", c.report.identity},
             {"tunables", c.report.tunables},
             {"timing", t ? t->to_json() : json(nullptr)},
             {"phase_ms", v.evidence.value("phase_ms", json::object())},
             {"correctness_split_ms", v.evidence.value("correctness_split_ms", json::object())}};
      if (r.evaluation.admission) j["admission"] = evolve::admission_json(*r.evaluation.admission);
      if (!r.tuning.empty()) j["tuning"] = r.tuning, j["tuning_ms"] = r.tuning_ms;
      if (jsonl_) *jsonl_ << j.dump() << "\n" << std::flush;
      if (keep_records_) records.push_back(std::move(j));
    }
  }

  void print_table() { table_.print(out); }

  std::ostream& out;
  json records = json::array();  // with --json: one per answer, as --jsonl writes them
  int unmet = 0, judged = 0;
  double judge_ms_total = 0;
  std::map<std::string, int> counts;

 private:
  const std::vector<evolve::CorpusEntry>& entries_;
  Table table_;
  std::unique_ptr<std::ofstream> jsonl_;
  bool keep_records_;
  Progress progress_;
};

int run_corpus(const CorpusArgs& a) {
  std::optional<archive::LineageKind> kind = archive::lineage_kind_from_string(a.kind);
  if (!kind)
    throw UsageError("kforge corpus: --kind '" + printable(a.kind.substr(0, 64)) +
                     "' is not a kind (" + archive::lineage_kinds_text() + ")");
  verify::Driver::get().require("kforge corpus");
  bool sanitizer = !verify::find_compute_sanitizer().empty();
  std::vector<evolve::CorpusEntry> entries = evolve::collect_corpus(a.paths, a.expect, sanitizer);
  if (entries.empty())
    throw UsageError("kforge corpus: no answers (*.md) in " + join(a.paths, ", "));
  auto t_start = Clock::now();

  int jobs =
      a.jobs > 0 ? a.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  evolve::EvaluatorOptions eo;
  eo.compiler.workers = static_cast<size_t>(jobs);
  eo.facts = facts_for("");
  eo.db = a.db;
  evolve::Evaluator evaluator(eo, nullptr);
  evolve::CorpusOptions co;
  co.tasks_dir = a.tasks_dir;
  co.kind = *kind;
  co.tune_points = a.no_timing ? 1 : a.tune;
  co.admit = a.admit;
  co.store = !a.no_store;
  // Compiles in parallel, ahead of the judge (which starts meanwhile).
  evolve::Corpus corpus(std::move(entries), co, evaluator);
  verify::VerifyOptions options;
  options.seed = a.seed;
  options.time = !a.no_timing;
  apply_no_compile(a.no_compile, options);
  apply_no_max_autotune(a.no_max_autotune, options);
  std::unique_ptr<evolve::Gpu> gpu = evolve::make_judge_gpu(options);
  evaluator.attach_gpu(gpu.get());
  std::ostream& out = a.json ? std::cerr : out;  // --json: stdout holds the records
  prepare_compiled_baselines(options, corpus.tasks(), out);
  size_t answers = corpus.entries().size();
  out << "kforge corpus: " << answers << " answer(s), " << jobs
      << " compile worker(s), compute-sanitizer " << (sanitizer ? "present" : "absent")
      << (options.time ? "" : ", correctness only") << std::endl;
  Printer printer(corpus.entries(), a.jsonl, out, a.json);
  corpus.judge(printer);
  double wall_s = std::chrono::duration<double>(Clock::now() - t_start).count();
  out << "\n";
  printer.print_table();
  out << "\n";
  for (const auto& [o, n] : printer.counts) out << o << ": " << n << "   ";
  out << "\n"
      << answers << " answer(s) in " << fixed(wall_s, 1)
      << " s wall: " << fixed(60.0 * printer.judged / wall_s, 1)
      << " candidates/minute (compiles in parallel, " << jobs
      << " worker(s)); judge median per candidate: see --jsonl; "
      << "judge total " << fixed(printer.judge_ms_total / 1000, 1) << " s\n";
  out << (printer.unmet == 0
              ? "every expectation met"
              : std::to_string(printer.unmet) + " answer(s) did not get an expected outcome")
      << std::endl;
  if (a.json) std::cout << printer.records.dump(2) << std::endl;
  return printer.unmet == 0 ? kExitOk : kExitFindings;
}

}  // namespace

void add_corpus_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<CorpusArgs>();
  auto* cmd = app.add_subcommand("corpus", command_description("corpus"));
  cmd->add_option("paths", a->paths, "Answer files or folders of them")->required();
  cmd->add_option("--expect", a->expect,
                  "Outcome every answer without a manifest entry must get (e.g. correct)");
  cmd->add_flag("--admit", a->admit,
                "Admission for every correct candidate (fresh runner, unseen dims, sanitizers)");
  cmd->add_flag("--no-timing", a->no_timing, "Correctness only");
  add_no_compile_flag(cmd, a->no_compile);
  add_no_max_autotune_flag(cmd, a->no_max_autotune);
  cmd->add_option("--tune-points", a->tune,
                  "Screen up to N points of each answer's tune space (correctness on the timed "
                  "dims, a short timing) "
                  "and judge the fastest in full")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--seed", a->seed, "Base seed of the inputs (default: fresh per candidate)");
  cmd->add_option("--jobs", a->jobs, "Compile workers (default: one per CPU)");
  cmd->add_option("--jsonl", a->jsonl, "Write one JSON record per answer to this file");
  cmd->add_flag("--json", a->json,
                "The records --jsonl writes, as one JSON array on stdout (the table on stderr)");
  cmd->add_option("--tasks-dir", a->tasks_dir, "Folder holding the suites");
  cmd->add_option("--db", a->db,
                  "Archive file (default $KFORGE_DB, else $XDG_DATA_HOME/kforge/archive.db)");
  cmd->add_flag("--no-store", a->no_store, "Do not write the verdicts to the archive");
  cmd->add_option("--kind", a->kind,
                  "How these candidates were made, as stored: " + archive::lineage_kinds_text())
      ->capture_default_str();
  add_wide_flag(cmd);
  cmd->callback([&exit_code, a] { exit_code = run_corpus(*a); });
}

}  // namespace kforge::cli
