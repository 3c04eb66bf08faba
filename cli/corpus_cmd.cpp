// `kforge corpus PATH...`: judges many answers in one judge session, each naming its task in its
// first line (`<!-- task: suite/name -->`). Folders may hold a manifest.json of the outcomes that
// count as right per file (tests/gpu/exploits). Compiles run in parallel; the GPU judges one
// candidate at a time. Prints a table (file, task, expected, verdict, judge seconds, time, eager,
// speedup, roofline) and the throughput: issue 6's benchmark and issue 7's corpus table.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <future>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "candidate_input.h"
#include "command_list.h"
#include "commands.h"
#include "compiled_baselines.h"
#include "kforge/common/files.h"
#include "kforge/common/strings.h"
#include "kforge/compile/answer.h"
#include "kforge/compile/candidate.h"
#include "kforge/evolve/evaluator.h"
#include "kforge/tasks/reference.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/judge.h"
#include "progress.h"
#include "table.h"

namespace kforge::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct CorpusArgs {
  std::vector<std::string> paths;
  std::string tasks_dir, db, jsonl, expect, kind = "manual";
  std::optional<uint64_t> seed;
  int jobs = 0, tune = 1;
  bool no_timing = false, admit = false, no_store = false, no_compile = false;
};

// One answer file and what it should get.
struct Entry {
  std::string path, name, task_spec;
  std::vector<std::string> expected;  // empty: no expectation
  std::string text;
};

std::vector<Entry> collect(const CorpusArgs& a, bool sanitizer) {
  std::vector<Entry> out;
  for (const std::string& p : a.paths) {
    std::vector<std::string> files;
    json manifest;
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.path().extension() == ".md" && e.path().filename() != "README.md")
          files.push_back(e.path().string());
      std::sort(files.begin(), files.end());
      if (auto m = read_file((fs::path(p) / "manifest.json").string())) {
        try {
          manifest = json::parse(*m);
        } catch (const std::exception& e) {
          throw InputError(p + "/manifest.json", std::nullopt, "",
                           std::string("not JSON: ") + e.what());
        }
      }
    } else if (fs::exists(p)) {
      files.push_back(p);
    } else {
      throw UsageError(p + ": no such file or folder");
    }
    for (const std::string& f : files) {
      Entry e;
      e.path = f;
      e.name = fs::path(f).filename().string();
      e.text = read_file(f).value_or("");
      e.task_spec = compile::task_named_in(e.text);
      if (manifest.contains("kernels") && manifest["kernels"].contains(e.name)) {
        e.expected = manifest["kernels"][e.name].get<std::vector<std::string>>();
        if (!sanitizer && manifest.contains("without_sanitizer") &&
            manifest["without_sanitizer"].contains(e.name))
          e.expected = manifest["without_sanitizer"][e.name].get<std::vector<std::string>>();
      } else if (!a.expect.empty()) {
        e.expected = {a.expect};
      }
      out.push_back(std::move(e));
    }
  }
  return out;
}

// An answer ready for the compile threads, or why it cannot be judged at all.
struct Loaded {
  std::optional<evolve::Proposal> proposal;
  std::string error;  // no task line, unknown task, unreadable reference
};

// The task (its reference compiled here, on the calling thread) and the answer parsed.
Loaded load(const Entry& e, const CorpusArgs& a, evolve::Evaluator& evaluator) {
  Loaded l;
  try {
    if (e.task_spec.empty())
      throw InputError(e.path, 1, "task", "no `<!-- task: suite/name -->` line names the task");
    evolve::Proposal p;
    p.task = std::make_shared<const tasks::Task>(load_one_task(e.task_spec, a.tasks_dir));
    evaluator.prepare(*p.task);
    p.lineage.prompt_kind = a.kind;
    try {
      compile::Answer answer = compile::parse_answer(e.text);
      p.source = answer.source;
      p.plan = answer.plan;
    } catch (const compile::AnswerError& err) {
      p.answer_error = err.what();
    }
    l.proposal = std::move(p);
  } catch (const std::exception& err) {
    l.error = err.what();
  }
  return l;
}

// --tune-points: screens every point and makes the fastest correct one the candidate that is then
// judged in full. A point that screens wrong is printed: an honest kernel should be correct at
// every point of its tune space. Returns one record per point (none for a single point).
std::pair<evolve::Checked, json> tune_by_screening(evolve::Evaluator& evaluator,
                                                   std::vector<evolve::Checked> points,
                                                   const std::string& name, Progress& progress) {
  if (points.size() < 2) return {std::move(points.front()), json::array()};
  evolve::Screened s = evaluator.screen_points(points);
  progress.clear();
  for (const auto& [i, v] : s.wrong)
    std::cout << "  " << name << " at " << tunables_text(points[i].report.tunables, " ") << ": "
              << verify::to_string(v.outcome) << ": " << printable(v.summary.substr(0, 200))
              << std::endl;
  std::cout << "  " << name << ": screened " << points.size() << " tune point(s), chose "
            << tunables_text(points[s.chosen].report.tunables, " ")
            << (s.chosen_ms ? " at " + fixed(*s.chosen_ms, 4) + " ms" : "") << std::endl;
  return {std::move(points[s.chosen]), s.records};
}

int run_corpus(const CorpusArgs& a) {
  verify::Driver::get().require("kforge corpus");
  bool sanitizer = !verify::find_compute_sanitizer().empty();
  std::vector<Entry> entries = collect(a, sanitizer);
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
  // Compiles in parallel, ahead of the judge (which starts meanwhile): taken in order as they
  // finish.
  std::vector<Loaded> loaded;
  std::vector<std::future<std::vector<evolve::Checked>>> ready(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    loaded.push_back(load(entries[i], a, evaluator));
    if (loaded[i].proposal)
      ready[i] = evaluator.check_async(*loaded[i].proposal, a.no_timing ? 1 : a.tune);
  }
  verify::VerifyOptions options;
  options.seed = a.seed;
  options.time = !a.no_timing;
  apply_no_compile(a.no_compile, options);
  std::unique_ptr<evolve::Gpu> gpu = evolve::make_judge_gpu(options);
  evaluator.attach_gpu(gpu.get());
  std::vector<const tasks::Task*> judged_tasks;
  for (const Loaded& l : loaded)
    if (l.proposal) judged_tasks.push_back(l.proposal->task.get());
  prepare_compiled_baselines(options, judged_tasks, std::cout);
  std::cout << "kforge corpus: " << entries.size() << " answer(s), " << jobs
            << " compile worker(s), compute-sanitizer " << (sanitizer ? "present" : "absent")
            << (options.time ? "" : ", correctness only") << std::endl;
  Table table({"FILE", "TASK", "EXPECTED", "VERDICT", "", "JUDGED", "TIME ms", "EAGER ms",
               "x EAGER", "ROOFLINE"});
  std::unique_ptr<std::ofstream> jsonl;
  if (!a.jsonl.empty()) jsonl = std::make_unique<std::ofstream>(a.jsonl);
  int unmet = 0, judged = 0;
  double judge_ms_total = 0;
  std::map<std::string, int> counts;
  Progress progress;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    std::string counter =
        "[" + std::to_string(i + 1) + "/" + std::to_string(entries.size()) + "] " + e.name;
    progress.show(counter + ": compiling");
    std::vector<evolve::Checked> points;
    std::string error = loaded[i].error;
    if (error.empty()) try {
        points = ready[i].get();
      } catch (const std::exception& err) {
        error = err.what();
      }
    progress.show(counter + (points.size() > 1
                                 ? ": screening " + std::to_string(points.size()) + " tune points"
                                 : ": judging"));
    if (!error.empty()) {
      progress.clear();
      std::cout << e.name << ": not judged: " << printable(error) << std::endl;
      table.add({e.name, e.task_spec, join(e.expected, "|"), "-", "NOT JUDGED"});
      ++unmet;
      continue;
    }
    auto t_tune = Clock::now();
    auto [c, tuning] = tune_by_screening(evaluator, std::move(points), e.name, progress);
    double tuning_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_tune).count();
    progress.show(counter + ": judging");
    evolve::Evaluation ev = evaluator.judge(c, a.admit);
    const verify::Verdict& v = ev.verdict;
    const std::optional<verify::Verdict>& admission = ev.admission;
    double ms = ev.verify_ms + ev.admission_ms;
    progress.clear();
    judge_ms_total += ms + tuning_ms;
    ++judged;
    std::string outcome(verify::to_string(v.outcome));
    if (admission && !admission->correct())
      outcome = "admission:" + std::string(verify::to_string(admission->outcome));
    ++counts[outcome];
    bool ok = e.expected.empty() ||
              std::find(e.expected.begin(), e.expected.end(), outcome) != e.expected.end();
    if (!ok) ++unmet;
    const auto& t = v.timing;
    table.add({e.name, c.proposal.task->id(), join(e.expected, "|"), outcome,
               e.expected.empty() ? "" : (ok ? "ok" : "UNEXPECTED"), fixed(ms / 1000, 2) + " s",
               t ? fixed(t->time.median_ms, 4) : "", t ? fixed(t->eager.median_ms, 4) : "",
               t ? fixed(t->speedup_eager, 2) : "",
               t && t->roofline_fraction ? fixed(100 * *t->roofline_fraction, 0) + "%" : ""});
    std::cout << "  " << e.name << ": " << outcome << (ok ? "" : "  (UNEXPECTED)") << " in "
              << fixed(ms / 1000, 2) << " s: " << v.summary.substr(0, 300) << std::endl;
    if (jsonl) {
      json j{{"file", e.path},
             {"task", c.proposal.task->id()},
             {"expected", e.expected},
             {"outcome", outcome},
             {"flags", v.flags},
             {"summary", v.summary},
             {"judge_ms", ms},
             {"identity", c.report.identity},
             {"tunables", c.report.tunables},
             {"timing", t ? t->to_json() : json(nullptr)},
             {"phase_ms", v.evidence.value("phase_ms", json::object())},
             {"correctness_split_ms", v.evidence.value("correctness_split_ms", json::object())}};
      if (admission) j["admission"] = evolve::admission_json(*admission);
      if (!tuning.empty()) j["tuning"] = tuning, j["tuning_ms"] = tuning_ms;
      *jsonl << j.dump() << "\n" << std::flush;
    }
    if (!a.no_store && c.report.stage != compile::Stage::Answer) evaluator.record(c, ev);
  }
  double wall_s = std::chrono::duration<double>(Clock::now() - t_start).count();
  std::cout << "\n";
  table.print();
  std::cout << "\n";
  for (const auto& [o, n] : counts) std::cout << o << ": " << n << "   ";
  std::cout << "\n"
            << entries.size() << " answer(s) in " << fixed(wall_s, 1)
            << " s wall: " << fixed(60.0 * judged / wall_s, 1)
            << " candidates/minute (compiles in parallel, " << jobs
            << " worker(s)); judge median per candidate: see --jsonl; "
            << "judge total " << fixed(judge_ms_total / 1000, 1) << " s\n";
  std::cout << (unmet == 0 ? "every expectation met"
                           : std::to_string(unmet) + " answer(s) did not get an expected outcome")
            << std::endl;
  return unmet == 0 ? kExitOk : kExitFindings;
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
  cmd->add_option("--tune-points", a->tune,
                  "Screen up to N points of each answer's tune space (correctness on the timed "
                  "dims, a short timing) "
                  "and judge the fastest in full")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--seed", a->seed, "Base seed of the inputs (default: fresh per candidate)");
  cmd->add_option("--jobs", a->jobs, "Compile workers (default: one per CPU)");
  cmd->add_option("--jsonl", a->jsonl, "Write one JSON record per answer to this file");
  cmd->add_option("--tasks-dir", a->tasks_dir, "Folder holding the suites");
  cmd->add_option("--db", a->db,
                  "Archive file (default $KFORGE_DB, else $XDG_DATA_HOME/kforge/archive.db)");
  cmd->add_flag("--no-store", a->no_store, "Do not write the verdicts to the archive");
  cmd->add_option("--kind", a->kind,
                  "How these candidates were made, as stored (manual, seed, ...)")
      ->capture_default_str();
  add_wide_flag(cmd);
  cmd->callback([&exit_code, a] { exit_code = run_corpus(*a); });
}

}  // namespace kforge::cli
