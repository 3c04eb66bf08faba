// `kforge verify`: a candidate compiled, then judged on the GPU by a judge and a runner process
// (docs/protocol.md): correctness on every configuration, several seeds and two distributions,
// with faults, hangs, out-of-bounds accesses and input mutation caught as outcomes.
#include <chrono>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "candidate_input.h"
#include "command_list.h"
#include "commands.h"
#include "compiled_baselines.h"
#include "kforge/common/strings.h"
#include "kforge/compile/candidate.h"
#include "kforge/compile/nvrtc.h"
#include "kforge/evolve/evaluator.h"
#include "kforge/tasks/reference.h"
#include "kforge/tasks/reference_child.h"
#include "kforge/verify/clocks.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/judge.h"

namespace kforge::cli {
namespace {

using nlohmann::ordered_json;

struct VerifyArgs {
  CandidateFiles files;
  KernelBenchFlags kernelbench;
  std::string task, tasks_dir;
  std::vector<std::string> tune;
  std::optional<uint64_t> seed;
  double watchdog_s = 0;
  std::string db;
  bool no_compile = false, no_max_autotune = false;
  bool json = false, no_sanitizer = false, no_timing = false, no_store = false, admit = false;
};

// A line per kind of baseline: its time and the speedup over it, or why it was not measured; then
// the best baseline (the fastest kind measured), the figure to beat.
std::string baseline_lines(const verify::TimingResult& t) {
  auto padded = [](std::string_view label) {
    return std::string(label) + std::string(label.size() < 12 ? 12 - label.size() : 1, ' ');
  };
  std::ostringstream out;
  out << std::fixed;
  for (const BaselineKindInfo& info : baseline_kinds()) {
    const verify::BaselineTiming* b = verify::find_baseline(t.baselines, info.kind);
    out << padded(info.label);
    if (b && b->stats)
      out << std::setprecision(4) << b->stats->median_ms << " ms  -> speedup "
          << std::setprecision(2) << t.speedup(info.kind).value_or(0) << "x  (" << info.about
          << ")\n";
    else
      out << "-  (not measured: "
          << printable(b && !b->absent.empty() ? b->absent : "no reason given") << ")\n";
  }
  std::optional<BaselineMs> best = verify::medians(t.baselines).best();
  if (best)
    out << padded(kBestBaselineLabel) << baseline_info(best->kind).label << ", "
        << std::setprecision(4) << *best->ms << " ms  -> speedup " << std::setprecision(2)
        << t.best_speedup().value_or(0) << "x  (the fastest baseline: the figure to beat)\n";
  return out.str();
}

// {"kind": "compiled", "ms": 0.09, "speedup": 1.2}: the fastest kind measured; null without one.
nlohmann::json best_baseline_json(const verify::TimingResult& t) {
  std::optional<BaselineMs> best = verify::medians(t.baselines).best();
  if (!best) return nullptr;
  return {{"kind", to_string(best->kind)},
          {"ms", *best->ms},
          {"speedup", t.best_speedup() ? nlohmann::json(*t.best_speedup()) : nlohmann::json()}};
}

void print(const tasks::Task& task, const compile::CandidateReport& r, const verify::Verdict& v,
           bool json, double verify_ms, const std::optional<verify::Verdict>& admission) {
  if (json) {
    ordered_json j;
    j["task"] = task.id();
    j["identity"] = r.identity;
    j["tunables"] = r.tunables;
    j["outcome"] = verify::to_string(v.outcome);
    j["flags"] = v.flags;
    j["summary"] = v.summary;
    j["harness_version"] = verify::kHarnessVersion;
    j["verify_ms"] = verify_ms;  // the judge's work: compile excluded
    j["timing"] = v.timing ? v.timing->to_json() : nlohmann::json(nullptr);
    j["best_baseline"] = v.timing ? best_baseline_json(*v.timing) : nlohmann::json(nullptr);
    j["evidence"] = v.evidence;
    if (admission) j["admission"] = evolve::admission_json(*admission);
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::string tuned = tunables_text(r.tunables);
  std::cout << "task        " << task.id() << "\n";
  if (!r.identity.empty())
    std::cout << "candidate   " << r.identity << (tuned.empty() ? "" : "  (" + tuned + ")") << "\n";
  std::cout << "verdict     " << verify::to_string(v.outcome);
  for (const auto& f : v.flags) std::cout << "  [" << f << "]";
  std::cout << "\n            " << printable(v.summary) << "\n";
  std::cout << "judged in   " << std::fixed << std::setprecision(2) << verify_ms / 1000
            << " s (compile excluded)\n";
  const auto& e = v.evidence;
  if (e.contains("seed"))
    std::cout << "harness     v" << verify::kHarnessVersion << ", seed " << e["seed"]
              << ", watchdog " << e.value("watchdog_ms", 0) << " ms, eager "
              << e.value("eager_ms", 0.0) << " ms\n";
  if (v.timing) {
    const verify::TimingResult& t = *v.timing;
    std::cout << std::fixed << std::setprecision(4) << "time        " << t.time.median_ms
              << " ms (median of " << t.time.reps << ", IQR " << t.time.iqr_ms << ", min "
              << t.time.min_ms << ")\n"
              << baseline_lines(t);
    if (t.floor_ms)
      std::cout << std::setprecision(4) << "roofline    floor " << *t.floor_ms << " ms ("
                << (t.bytes ? std::to_string(static_cast<int64_t>(*t.bytes / 1e6)) + " MB"
                            : std::string("?"))
                << " at " << std::setprecision(0) << t.device.value("copy_gbps", 0.0) << "-"
                << t.device.value("read_gbps", 0.0) << " GB/s measured): " << std::setprecision(0)
                << 100 * t.roofline_fraction.value_or(0) << "% of the floor's speed\n";
    std::cout << "SM clock    " << verify::clock_text(t.clocks) << "\n";
    std::cout << "math mode   " << t.math_mode
              << (t.suspicious ? "   SUSPICIOUS: faster than the floor or >10x eager" : "") << "\n";
  }
  if (e.contains("detail") && e["detail"].contains("memcheck"))
    std::cout << "\ncompute-sanitizer memcheck:\n"
              << e["detail"]["memcheck"].get<std::string>() << "\n";
  if (admission) {
    std::cout << "admission   "
              << (admission->correct()
                      ? "admitted"
                      : "NOT admitted: " + std::string(verify::to_string(admission->outcome)))
              << "\n            " << admission->summary << "\n";
    for (const auto& s : admission->evidence.value("sanitizers", nlohmann::json::array()))
      std::cout << "            " << s.value("tool", "?") << ": " << s.value("errors", -1)
                << " error(s), " << s.value("status", "?") << ", " << std::setprecision(1)
                << s.value("ms", 0.0) / 1000 << " s\n";
  }
}

int run_verify(const VerifyArgs& a) {
  verify::Driver::get().require("kforge verify");  // exit 3 before any work when there is no GPU
  CandidateInput in;
  std::shared_ptr<const tasks::Task> task;
  if (!a.kernelbench.file.empty()) {
    task = std::make_shared<const tasks::Task>(kernelbench_task_of(a.task, a.tasks_dir));
    tasks::ReferenceChild reference(
        tasks::reference_limits(std::nullopt, tasks::kShapesReferenceSeconds));
    in = read_kernelbench_candidate(a.kernelbench, a.files, *task, reference,
                                    a.json ? std::cerr : std::cout);
  } else {
    check_kernelbench_flags(a.kernelbench);
    in = read_candidate(a.files, "kforge verify");
    task = std::make_shared<const tasks::Task>(load_candidate_task(a.task, in, a.tasks_dir));
  }
  verify::VerifyOptions options;
  options.seed = a.seed;
  options.sanitizer = !a.no_sanitizer;
  options.time = !a.no_timing;
  apply_no_compile(a.no_compile, options);
  apply_no_max_autotune(a.no_max_autotune, options);
  if (a.watchdog_s > 0)
    options.watchdog = std::chrono::milliseconds(static_cast<int64_t>(a.watchdog_s * 1000));
  std::unique_ptr<evolve::Gpu> gpu = evolve::make_judge_gpu(options);
  prepare_compiled_baselines(options, {task.get()}, a.json ? std::cerr : std::cout);
  evolve::EvaluatorOptions eo;
  eo.facts = facts_for("");
  eo.db = a.db;
  evolve::Evaluator evaluator(eo, gpu.get());
  evolve::Checked c = evaluator.check(proposal(in, task, a.tune));
  evolve::Evaluation e = evaluator.judge(c, a.admit);
  print(*task, c.report, e.verdict, a.json, e.verify_ms, e.admission);
  if (!a.no_store) evaluator.record(c, e);
  return e.verdict.correct() && (!a.admit || e.admitted()) ? kExitOk : kExitFindings;
}

}  // namespace

void add_verify_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<VerifyArgs>();
  auto* cmd = app.add_subcommand("verify", command_description("verify"));
  cmd->add_option("candidate", a->files.source_file,
                  "CUDA source of the candidate (device code only)");
  cmd->add_option("--plan", a->files.plan_file, "JSON launch plan");
  cmd->add_option("--answer", a->files.answer_file,
                  "A whole LLM answer in markdown (docs/answer-format.md)");
  add_kernelbench_options(cmd, a->kernelbench);
  cmd->add_option("--task", a->task,
                  "Task file, suite/name or name (default: the one --answer names)");
  cmd->add_option("--tune", a->tune,
                  "Tunable values NAME=V (default: the first valid combination)");
  cmd->add_option("--seed", a->seed, "Base seed of the inputs (default: a fresh one, printed)");
  cmd->add_option("--watchdog", a->watchdog_s,
                  "Seconds before a run is a timeout (default: 50 x eager x launches, 2-60 s)");
  cmd->add_option("--tasks-dir", a->tasks_dir, "Folder holding the suites");
  cmd->add_flag("--no-sanitizer", a->no_sanitizer,
                "Do not re-run faulting candidates under compute-sanitizer memcheck");
  cmd->add_flag("--no-timing", a->no_timing, "Correctness only: no timing, baselines or roofline");
  add_no_compile_flag(cmd, a->no_compile);
  add_no_max_autotune_flag(cmd, a->no_max_autotune);
  cmd->add_flag(
      "--admit", a->admit,
      "After a correct verdict, admission: a fresh runner, 3 dims configurations never shown, and "
      "compute-sanitizer memcheck, initcheck and racecheck where present");
  cmd->add_option(
      "--db", a->db,
      "Archive file for the verdict (default $KFORGE_DB, else $XDG_DATA_HOME/kforge/archive.db)");
  cmd->add_flag("--no-store", a->no_store, "Do not write the verdict to the archive");
  cmd->add_flag("--json", a->json, "Machine-readable output");
  cmd->callback([&exit_code, a] { exit_code = run_verify(*a); });
}

}  // namespace kforge::cli
