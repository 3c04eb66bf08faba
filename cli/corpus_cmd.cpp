// `kforge corpus PATH...`: judges many answers in one judge session, each naming its task in its
// first line (`<!-- task: suite/name -->`). Folders may hold a manifest.json of the outcomes that
// count as right per file (tests/gpu/exploits). Compiles run in parallel; the GPU judges one
// candidate at a time. Prints a table (file, task, expected, verdict, judge seconds, time, eager,
// speedup, roofline) and the throughput: issue 6's benchmark and issue 7's corpus table.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <iomanip>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "candidate_input.h"
#include "commands.h"
#include "store_verdict.h"
#include "table.h"
#include "kforge/common/files.h"
#include "kforge/common/strings.h"
#include "kforge/compile/answer.h"
#include "kforge/compile/candidate.h"
#include "kforge/tasks/reference.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/judge.h"

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
  bool no_timing = false, admit = false, no_store = false;
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
        if (e.path().extension() == ".md" && e.path().filename() != "README.md") files.push_back(e.path().string());
      std::sort(files.begin(), files.end());
      if (auto m = read_file((fs::path(p) / "manifest.json").string())) {
        try {
          manifest = json::parse(*m);
        } catch (const std::exception& e) {
          throw InputError(p + "/manifest.json", std::nullopt, "", std::string("not JSON: ") + e.what());
        }
      }
    } else if (fs::exists(p)) {
      files.push_back(p);
    } else {
      throw Error(p + ": no such file or folder");
    }
    for (const std::string& f : files) {
      Entry e;
      e.path = f;
      e.name = fs::path(f).filename().string();
      e.text = read_file(f).value_or("");
      e.task_spec = compile::task_named_in(e.text);
      if (manifest.contains("kernels") && manifest["kernels"].contains(e.name)) {
        e.expected = manifest["kernels"][e.name].get<std::vector<std::string>>();
        if (!sanitizer && manifest.contains("without_sanitizer") && manifest["without_sanitizer"].contains(e.name))
          e.expected = manifest["without_sanitizer"][e.name].get<std::vector<std::string>>();
      } else if (!a.expect.empty()) {
        e.expected = {a.expect};
      }
      out.push_back(std::move(e));
    }
  }
  return out;
}

struct Checked {
  std::optional<tasks::Task> task;
  std::vector<compile::TensorInfo> tensors;
  compile::Answer answer;
  compile::CandidateReport report;
  std::vector<compile::CandidateReport> points;  // --tune: the tune-space points to screen (report first)
  std::string error;  // the file could not be judged at all (no task line, unknown task)
};

// The task and its tensors (TorchScript: on the calling thread); the answer parsed.
Checked load(const Entry& e, const CorpusArgs& a) {
  Checked c;
  try {
    if (e.task_spec.empty()) throw InputError(e.path, 1, "task", "no `<!-- task: suite/name -->` line names the task");
    c.task = load_one_task(e.task_spec, a.tasks_dir);
    c.tensors = compile::task_tensors(*c.task, tasks::Reference::compile(*c.task));
    c.answer = compile::parse_answer(e.text);
  } catch (const compile::AnswerError& err) {
    c.report.errors = {err.what()};
  } catch (const std::exception& err) {
    c.error = err.what();
  }
  return c;
}

// Plan, compile, signatures, limits (thread-safe: the compiler serves several threads).
void check(Checked& c, int tune, const compile::DeviceFacts& facts, compile::Compiler& compiler) {
  if (!c.error.empty() || !c.report.errors.empty()) return;
  try {
    c.report = compile::check_candidate(*c.task, c.tensors, c.answer.source, c.answer.plan, std::nullopt, facts, compiler);
    if (tune > 1 && c.report.ok()) {
      compile::Plan plan = compile::parse_plan_text(c.answer.plan, *c.task, c.tensors);
      for (const compile::Tunables& t : compile::sample_tune_space(compile::tune_space(plan, c.task->dims, facts), tune))
        c.points.push_back(t == c.report.tunables ? c.report
                                                  : compile::check_candidate(*c.task, c.tensors, c.answer.source,
                                                                             c.answer.plan, t, facts, compiler));
    }
  } catch (const std::exception& err) {
    c.error = err.what();
  }
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

// --tune: screens every point (Judge::screen) and makes the fastest correct one c.report, the one
// verify() then judges in full. A point that screens wrong is printed: an honest kernel should
// be correct at every point of its tune space. Returns one record per point.
json tune_by_screening(verify::Judge& judge, Checked& c, const std::string& name) {
  json out = json::array();
  if (c.points.size() < 2) return out;
  std::optional<size_t> best;
  double best_ms = 0;
  for (size_t i = 0; i < c.points.size(); ++i) {
    verify::Verdict s = judge.screen(*c.task, c.points[i]);
    json point{{"tunables", c.points[i].tunables}, {"outcome", verify::to_string(s.outcome)}};
    if (s.correct() && s.timing) {
      double ms = s.timing->time.median_ms;
      point["median_ms"] = ms;
      if (!best || ms < best_ms) best = i, best_ms = ms;
    } else {
      point["summary"] = s.summary.substr(0, 300);
      std::cout << "  " << name << " at " << tunables_text(c.points[i].tunables, " ") << ": "
                << verify::to_string(s.outcome) << ": " << printable(s.summary.substr(0, 200))
                << std::endl;
    }
    out.push_back(point);
  }
  if (best) c.report = c.points[*best];
  std::cout << "  " << name << ": screened " << c.points.size() << " tune point(s), chose "
            << tunables_text(c.report.tunables, " ") << (best ? " at " + fixed(best_ms, 4) + " ms" : "") << std::endl;
  c.points.clear();  // their modules are no longer needed
  return out;
}

int run_corpus(const CorpusArgs& a) {
  verify::Driver::get().require("kforge corpus");
  bool sanitizer = !verify::find_compute_sanitizer().empty();
  std::vector<Entry> entries = collect(a, sanitizer);
  if (entries.empty()) throw Error("kforge corpus: no answers (*.md) in " + join(a.paths, ", "));
  auto t_start = Clock::now();

  int jobs = a.jobs > 0 ? a.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  compile::CompilerOptions co;
  co.workers = static_cast<size_t>(jobs);
  compile::Compiler compiler(co);
  compile::DeviceFacts facts = facts_for("");
  // Compiles in parallel, ahead of the judge: the judge takes them in order as they finish.
  std::vector<Checked> loaded;
  for (const Entry& e : entries) loaded.push_back(load(e, a));
  std::vector<std::promise<void>> done(entries.size());
  std::vector<std::future<void>> ready;
  for (auto& p : done) ready.push_back(p.get_future());
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  struct JoinAll {
    std::vector<std::thread>& threads;
    ~JoinAll() {
      for (auto& t : threads) t.join();
    }
  } join_all{pool};
  for (int w = 0; w < jobs; ++w)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < entries.size();) {
        check(loaded[i], a.no_timing ? 1 : a.tune, facts, compiler);
        done[i].set_value();
      }
    });

  verify::VerifyOptions options;
  options.seed = a.seed;
  options.time = !a.no_timing;
  verify::Judge judge(options);
  std::cout << "kforge corpus: " << entries.size() << " answer(s), " << jobs << " compile worker(s), compute-sanitizer "
            << (sanitizer ? "present" : "absent") << (options.time ? "" : ", correctness only") << std::endl;
  Table table({"FILE", "TASK", "EXPECTED", "VERDICT", "", "JUDGED", "TIME ms", "EAGER ms", "x EAGER", "ROOFLINE"});
  std::unique_ptr<std::ofstream> jsonl;
  if (!a.jsonl.empty()) jsonl = std::make_unique<std::ofstream>(a.jsonl);
  int unmet = 0, judged = 0;
  double judge_ms_total = 0;
  std::map<std::string, int> counts;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    ready[i].wait();
    Checked& c = loaded[i];
    if (!c.error.empty()) {
      std::cout << e.name << ": not judged: " << printable(c.error) << std::endl;
      table.add({e.name, e.task_spec, join(e.expected, "|"), "-", "NOT JUDGED"});
      ++unmet;
      continue;
    }
    auto t_tune = Clock::now();
    json tuning = tune_by_screening(judge, c, e.name);
    double tuning_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_tune).count();
    auto t0 = Clock::now();
    verify::Verdict v = judge.verify(*c.task, c.report);
    std::optional<verify::Verdict> admission;
    if (a.admit && v.correct())
      admission = verify::admit_candidate(judge, *c.task, c.answer.source, c.answer.plan, c.report.tunables, facts, compiler,
                                          v.evidence.value("seed", uint64_t{1}));
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    judge_ms_total += ms + tuning_ms;
    ++judged;
    std::string outcome(verify::to_string(v.outcome));
    if (admission && !admission->correct()) outcome = "admission:" + std::string(verify::to_string(admission->outcome));
    ++counts[outcome];
    bool ok = e.expected.empty() || std::find(e.expected.begin(), e.expected.end(), outcome) != e.expected.end();
    if (!ok) ++unmet;
    const auto& t = v.timing;
    table.add({e.name, c.task->id(), join(e.expected, "|"), outcome, e.expected.empty() ? "" : (ok ? "ok" : "UNEXPECTED"),
               fixed(ms / 1000, 2) + " s", t ? fixed(t->time.median_ms, 4) : "", t ? fixed(t->eager.median_ms, 4) : "",
               t ? fixed(t->speedup_eager, 2) : "", t && t->roofline_fraction ? fixed(100 * *t->roofline_fraction, 0) + "%" : ""});
    std::cout << "  " << e.name << ": " << outcome << (ok ? "" : "  (UNEXPECTED)") << " in " << fixed(ms / 1000, 2)
              << " s: " << v.summary.substr(0, 300) << std::endl;
    if (jsonl) {
      json j{{"file", e.path},     {"task", c.task->id()}, {"expected", e.expected}, {"outcome", outcome},
             {"flags", v.flags},   {"summary", v.summary}, {"judge_ms", ms},         {"identity", c.report.identity},
             {"tunables", c.report.tunables}, {"timing", t ? t->to_json() : json(nullptr)},
             {"phase_ms", v.evidence.value("phase_ms", json::object())},
             {"correctness_split_ms", v.evidence.value("correctness_split_ms", json::object())}};
      if (admission) j["admission"] = admission_json(*admission);
      if (!tuning.empty()) j["tuning"] = tuning, j["tuning_ms"] = tuning_ms;
      *jsonl << j.dump() << "\n" << std::flush;
    }
    if (!a.no_store && c.report.stage != compile::Stage::Answer)
      store_verdict(a.db, *c.task, c.answer.source, c.answer.plan, c.report, v, admission, a.kind);
  }
  double wall_s = std::chrono::duration<double>(Clock::now() - t_start).count();
  std::cout << "\n";
  table.print();
  std::cout << "\n";
  for (const auto& [o, n] : counts) std::cout << o << ": " << n << "   ";
  std::cout << "\n"
            << entries.size() << " answer(s) in " << fixed(wall_s, 1) << " s wall: " << fixed(60.0 * judged / wall_s, 1)
            << " candidates/minute (compiles in parallel, " << jobs << " worker(s)); judge median per candidate: see --jsonl; "
            << "judge total " << fixed(judge_ms_total / 1000, 1) << " s\n";
  std::cout << (unmet == 0 ? "every expectation met" : std::to_string(unmet) + " answer(s) did not get an expected outcome")
            << std::endl;
  return unmet == 0 ? kExitOk : kExitFindings;
}

}  // namespace

void add_corpus_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<CorpusArgs>();
  auto* cmd = app.add_subcommand("corpus", "Judge many answers (files or folders; each names its task in its first line) "
                                           "in one judge session, with a folder's manifest.json of expected outcomes (needs a GPU)");
  cmd->add_option("paths", a->paths, "Answer files or folders of them")->required();
  cmd->add_option("--expect", a->expect, "Outcome every answer without a manifest entry must get (e.g. correct)");
  cmd->add_flag("--admit", a->admit, "Admission for every correct candidate (fresh runner, unseen dims, sanitizers)");
  cmd->add_flag("--no-timing", a->no_timing, "Correctness only");
  cmd->add_option("--tune", a->tune,
                  "Screen up to N points of each answer's tune space (correctness on the timed dims, a short timing) "
                  "and judge the fastest in full")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--seed", a->seed, "Base seed of the inputs (default: fresh per candidate)");
  cmd->add_option("--jobs", a->jobs, "Compile workers (default: one per CPU)");
  cmd->add_option("--jsonl", a->jsonl, "Write one JSON record per answer to this file");
  cmd->add_option("--tasks-dir", a->tasks_dir, "Folder holding the suites");
  cmd->add_option("--db", a->db, "Archive file (default $KFORGE_DB, else $XDG_DATA_HOME/kforge/archive.db)");
  cmd->add_flag("--no-store", a->no_store, "Do not write the verdicts to the archive");
  cmd->add_option("--kind", a->kind, "How these candidates were made, as stored (manual, seed, ...)")->capture_default_str();
  add_wide_flag(cmd);
  cmd->callback([&exit_code, a] { exit_code = run_corpus(*a); });
}

}  // namespace kforge::cli
