// `kforge archive stats | tasks | top | results | search | runs`: listings of the archive.
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "archive_cmd.h"
#include "baseline_columns.h"
#include "commands.h"
#include "kforge/archive/field_metrics.h"
#include "kforge/archive/first_sample.h"
#include "kforge/common/strings.h"
#include "kforge/tasks/task.h"
#include "report_cmd.h"
#include "table.h"

namespace kforge::cli {
namespace {

using nlohmann::json;

// A results row's baselines and kernel time (Archive::results' shape).
BaselineTimes baselines_of(const json& r) {
  return BaselineTimes::from_json(r.value("baselines", json()));
}

std::optional<double> time_of(const json& r) {
  return r["time_ms"].is_number() ? std::optional<double>(r["time_ms"].get<double>())
                                  : std::nullopt;
}

// "Geometric mean over the 58 of 61 tasks with a kernel: 1.42x eager, 1.40x scripted, 1.05x compile
// (over 57), ..., 1.02x best; median roofline 61%." A kind may be missing where others are not:
// its mean says over how many.
std::string results_summary(const json& rows) {
  std::vector<std::string> labels = baseline_labels(true);
  std::vector<double> log_sum(labels.size(), 0);
  std::vector<size_t> count(labels.size(), 0);
  size_t with = 0;
  std::vector<double> roofline;
  for (const auto& r : rows) {
    BaselineTimes b = baselines_of(r);
    std::optional<double> best = b.best_speedup(time_of(r));
    if (!best) continue;
    ++with;
    for (size_t i = 0; i < labels.size(); ++i) {
      std::optional<double> x =
          i + 1 < labels.size() ? b.speedup(baseline_kinds()[i].kind, time_of(r)) : best;
      if (x && *x > 0) ++count[i], log_sum[i] += std::log(*x);
    }
    if (r["roofline_fraction"].is_number())
      roofline.push_back(r["roofline_fraction"].get<double>());
  }
  if (with == 0) return "No task has a kernel here yet.\n";
  std::vector<std::string> means;
  for (size_t i = 0; i < labels.size(); ++i)
    if (count[i] > 0)
      means.push_back(fixed(std::exp(log_sum[i] / static_cast<double>(count[i])), 2) + "x " +
                      labels[i] +
                      (count[i] < with ? " (over " + std::to_string(count[i]) + ")" : ""));
  std::string out = "Geometric mean over the " + std::to_string(with) + " of " +
                    std::to_string(rows.size()) + " tasks with a kernel: " + join(means, ", ");
  if (!roofline.empty()) {
    std::sort(roofline.begin(), roofline.end());
    out += "; median roofline fraction " + fixed(100 * roofline[roofline.size() / 2], 0) + "%";
  }
  return out + ".\n";
}

std::string ms(const std::optional<double>& v) {
  if (!v) return "-";
  std::ostringstream os;
  os << std::fixed << std::setprecision(3) << *v;
  return os.str();
}

int print_summaries(const std::vector<archive::KernelSummary>& ks, bool as_json,
                    const std::string& empty) {
  if (as_json) {
    json j = json::array();
    for (const auto& k : ks) j.push_back(archive::to_json(k));
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  if (ks.empty()) {
    std::cout << empty << "\n";
    return kExitOk;
  }
  std::vector<std::string> head = {"ID", "TASK", "OUTCOME", "BEST MS"};
  for (const std::string& label : baseline_labels(true)) head.push_back("x " + heading(label));
  for (const char* h : {"MODEL", "KIND", "VERIFIED"}) head.push_back(h);
  Table t(head);
  for (const auto& k : ks) {
    std::vector<std::string> row = {std::to_string(k.id.value), k.task, k.outcome, ms(k.time_ms)};
    for (std::string& x : speedup_cells(k.baselines, k.time_ms, "x")) row.push_back(x);
    row.push_back(k.model.empty() ? "-" : k.model);
    row.push_back(k.prompt_kind.empty() ? "-" : k.prompt_kind);
    row.push_back(k.verified ? "yes" : "no (imported)");
    t.add(row);
  }
  t.print();
  return kExitOk;
}

// Why a list of winners is empty, and where the seeds' times are instead.
std::string no_winners(const std::string& suite) {
  return "no winners yet: no candidate of these tasks has been admitted as a winner (correct, "
         "admitted by `kforge verify --admit` or `kforge corpus --admit`, unflagged, measured by "
         "kforge).\n"
         "Seeds are stored as kind seed: `kforge archive results " +
         (suite.empty() ? std::string("SUITE") : suite) +
         " --kind seed` shows each task's fastest correct seed.";
}

// A suite named on the command line must exist: in the tasks folder, or in the archive (imports
// make suites of their own). Otherwise a usage error naming it and the suites there are.
void require_suite(archive::Archive& ar, const std::string& option, const std::string& suite) {
  std::set<std::string> known;
  std::filesystem::path root = tasks::default_tasks_root();
  std::error_code ec;
  for (const auto& dir : std::filesystem::directory_iterator(root, ec)) {
    if (!dir.is_directory(ec)) continue;
    for (const auto& f : std::filesystem::directory_iterator(dir.path(), ec))
      if (f.path().extension() == ".toml") {
        known.insert(dir.path().filename().string());
        break;
      }
  }
  for (const auto& t : ar.tasks_overview()) {
    std::string id = t["task"].get<std::string>();
    known.insert(id.substr(0, id.find('/')));
  }
  if (known.count(suite)) return;
  throw InputError(
      option, std::nullopt, "",
      "no suite '" + suite + "' in the tasks folder (" + root.string() + ") or in " + ar.path() +
          "; suites: " +
          (known.empty() ? "none"
                         : join(std::vector<std::string>(known.begin(), known.end()), ", ")));
}

int stats(const ArchiveOptions& a) {
  auto ar = open_existing(a);
  archive::Stats s = ar.stats();
  nlohmann::ordered_json j = {{"database", ar.path()},
                              {"schema_version", ar.schema_version()},
                              {"tasks", s.tasks},
                              {"candidates", s.candidates},
                              {"imported", s.imported},
                              {"compiles", s.compiles},
                              {"evaluations", s.evaluations},
                              {"correct_evaluations", s.correct},
                              {"claimed_evaluations", s.claimed},
                              {"winners", s.winners},
                              {"runs", s.runs},
                              {"llm_calls", s.llm_calls},
                              {"llm_cost_usd", s.llm_cost_usd}};
  if (a.json)
    std::cout << j.dump(2) << "\n";
  else
    for (auto it = j.begin(); it != j.end(); ++it)
      std::cout << std::left << std::setw(22) << it.key() << it.value().dump() << "\n";
  return kExitOk;
}

int tasks_list(const ArchiveOptions& a) {
  auto ar = open_existing(a);
  json j = ar.tasks_overview();
  if (a.json) {
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  if (j.empty()) {
    std::cout << "no tasks in " << ar.path()
              << " yet: `kforge verify`, `kforge corpus` and `kforge archive import` "
              << "store candidates with their tasks\n";
    return kExitOk;
  }
  Table t({"TASK", "VERSION", "CANDIDATES", "CORRECT", "BEST MS"});
  std::set<std::string> suites;
  bool any_winner = false;
  for (const auto& r : j) {
    t.add({r["task"], r["version"].get<std::string>().substr(0, 12),
           std::to_string(r["candidates"].get<int64_t>()),
           std::to_string(r["correct_evaluations"].get<int64_t>()),
           r["best_ms"].is_null() ? "-" : ms(r["best_ms"].get<double>())});
    std::string id = r["task"].get<std::string>();
    suites.insert(id.substr(0, id.find('/')));
    any_winner = any_winner || !r["best_ms"].is_null();
  }
  t.print();
  if (!any_winner)  // BEST MS is a winner's time
    std::cout << "\n" << no_winners(suites.size() == 1 ? *suites.begin() : "") << "\n";
  return kExitOk;
}

struct TopOptions {
  std::string task, suite;
  size_t limit = 20;
};

int top(const ArchiveOptions& a, const TopOptions& o) {
  auto ar = open_existing(a);
  if (!o.suite.empty()) require_suite(ar, "--suite", o.suite);
  std::string suite = o.suite.empty() && o.task.find('/') != std::string::npos
                          ? o.task.substr(0, o.task.find('/'))
                          : o.suite;
  return print_summaries(ar.top(!o.task.empty() ? o.task : o.suite, o.limit), a.json,
                         no_winners(suite));
}

struct ResultsOptions {
  std::string suite, kind;
  bool winners = false, metrics_only = false;
  size_t problems = 0;  // the metrics' denominator; 0: the suite's tasks
};

// The suite's problems: its task files in the tasks folder, or the tasks the archive has of it
// (`rows`, one per task), whichever is more.
size_t suite_problems(const std::string& suite, const json& rows) {
  size_t files = 0;
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(tasks::default_tasks_root() / suite, ec))
    files += f.path().extension() == ".toml";
  return std::max(files, rows.size());
}

// The field's metrics (archive/field_metrics.h) over the results' rows: a task without a kernel
// is a problem without a correct one.
archive::FieldMetrics metrics_of(const json& rows, size_t problems) {
  std::vector<archive::ProblemResult> results;
  for (const auto& r : rows) {
    archive::ProblemResult p;
    p.task = r["task"].get<std::string>();
    p.time_ms = time_of(r);
    p.correct = p.time_ms.has_value();
    p.baselines = baselines_of(r);
    results.push_back(std::move(p));
  }
  return archive::field_metrics(results, problems);
}

std::string results_table(const json& rows, const std::string& kind) {
  auto num = [](const json& v, int digits, double scale = 1, const char* unit = "") {
    if (v.is_null()) return std::string("-");
    std::ostringstream os;
    os << std::fixed << std::setprecision(digits) << v.get<double>() * scale << unit;
    return os.str();
  };
  std::set<std::string> devices, harness;
  std::vector<AbsentBaseline> absent;  // each timed task's missing baselines, with why
  size_t timed = 0;
  std::ostringstream out;
  out << "| task |";
  for (const std::string& label : baseline_labels(false)) out << " " << label << " ms |";
  out << " " << (kind.empty() ? "best" : kind) << " ms |";
  for (const std::string& label : baseline_labels(true)) out << " x " << label << " |";
  out << " roofline | tunables |\n|---|";
  for (size_t i = 0; i < 2 * baseline_kinds().size() + 3; ++i) out << "---:|";
  out << "---|\n";
  for (const auto& r : rows) {
    std::string tuned;
    if (r["tunables"].is_object())
      for (const auto& [k, v] : r["tunables"].items())
        tuned += (tuned.empty() ? "" : " ") + k + "=" + v.dump();
    BaselineTimes b = baselines_of(r);
    out << "| " << r["task"].get<std::string>() << " | " << join(baseline_ms_cells(b, 4), " | ")
        << " | " << num(r["time_ms"], 4) << " | " << join(speedup_cells(b, time_of(r)), " | ")
        << " | " << num(r["roofline_fraction"], 0, 100, "%") << " | " << tuned << " |\n";
    for (const std::string& why : absent_reasons(b))
      absent.push_back({r["task"].get<std::string>(), why});
    if (time_of(r)) ++timed;
    if (!r["device"].is_null()) devices.insert(r["device"].get<std::string>());
    if (!r["harness_version"].is_null())
      harness.insert(std::to_string(r["harness_version"].get<int64_t>()));
  }
  out << "\n"
      << results_summary(rows) << "\nDevice: "
      << (devices.empty() ? "-"
                          : join(std::vector<std::string>(devices.begin(), devices.end()), ", "))
      << "; harness version "
      << (harness.empty() ? "-"
                          : join(std::vector<std::string>(harness.begin(), harness.end()), ", "))
      << "; roofline = floor / time; " << baseline_legend() << ".\n";
  out << absent_baselines_text(absent, timed);
  return out.str();
}

int results(const ArchiveOptions& a, const ResultsOptions& o) {
  auto ar = open_existing(a);
  require_suite(ar, "suite", o.suite);
  json rows = ar.results(o.suite, o.kind, o.winners);
  size_t problems = o.problems ? o.problems : suite_problems(o.suite, rows);
  // The best of all attempts (of --kind, --winners), and each task's first sample, whatever the
  // filters: the first kernel a model wrote for it, the archive's earliest.
  archive::FieldFigures m;
  std::vector<archive::ProblemResult> first;
  for (const archive::FirstSample& f : archive::suite_first_samples(ar, o.suite))
    first.push_back(f.result), m.sampled += f.candidate.has_value();
  // Winners are a subset of what the field's rule counts (winner.h); else the field's rule picks.
  m.best =
      metrics_of(o.winners ? rows : ar.results(o.suite, o.kind, false, /*field=*/true), problems);
  m.first_sample = archive::field_metrics(first, problems);
  if (!o.kind.empty()) m.best_note += " (kind " + o.kind + ")";
  if (o.winners) m.best_note += " (winners only)";
  if (o.metrics_only && a.json)
    std::cout << m.to_json().dump(2) << "\n";
  else if (a.json)
    std::cout << rows.dump(2) << "\n";
  else if (o.metrics_only)
    std::cout << m.to_markdown();
  else
    std::cout << results_table(rows, o.kind) << "\nThe field's metrics (KernelBench's fast_p; "
              << "docs/results.md):\n\n"
              << m.to_markdown();
  return kExitOk;
}

int runs(const ArchiveOptions& a) {
  auto ar = open_existing(a);
  json j = ar.runs();
  if (a.json) {
    std::cout << j.dump(2) << "\n";
    return kExitOk;
  }
  Table t({"RUN", "STATUS", "STARTED", "FINISHED", "CANDIDATES", "SPENT"});
  for (const auto& r : j)
    t.add({r["id"].dump(), r["status"], r["started_at"],
           r["finished_at"].is_null() ? "-" : r["finished_at"].get<std::string>(),
           r["candidates"].dump(), spent_text(r["budgets_used"])});
  t.print();
  return kExitOk;
}

}  // namespace

void add_archive_stats(CLI::App* archive, SharedArchiveOptions a, int& exit_code) {
  add_archive_subcommand(archive, "stats",
                         "Counts: tasks, candidates, evaluations, winners, LLM calls and cost")
      ->callback([&exit_code, a] { exit_code = stats(*a); });
}

void add_archive_tasks(CLI::App* archive, SharedArchiveOptions a, int& exit_code) {
  add_archive_subcommand(archive, "tasks",
                         "Tasks in the archive with candidate counts and best times")
      ->callback([&exit_code, a] { exit_code = tasks_list(*a); });
}

void add_archive_top(CLI::App* archive, SharedArchiveOptions a, int& exit_code) {
  auto o = std::make_shared<TopOptions>();
  auto* top_cmd = add_archive_subcommand(
      archive, "top", "Winners (correct, admitted, unflagged), best speedup first");
  top_cmd->add_option("--task", o->task, "suite/name or name");
  top_cmd->add_option("--suite", o->suite, "suite");
  top_cmd->add_option("--limit", o->limit, "rows")->capture_default_str();
  top_cmd->callback([&exit_code, a, o] { exit_code = top(*a, *o); });
}

void add_archive_results(CLI::App* archive, SharedArchiveOptions a, int& exit_code) {
  auto o = std::make_shared<ResultsOptions>();
  auto* cmd =
      add_archive_subcommand(archive, "results",
                             "Per task of a suite: the fastest correct kernel (of one kind, e.g. "
                             "seed) with each baseline's time, the speedups over each and over the "
                             "best baseline, and roofline fraction, as a markdown table "
                             "(docs/results.md)");
  cmd->add_option("suite", o->suite, "suite")->required();
  cmd->add_option("--kind", o->kind,
                  "only candidates made as this kind (seed, optimize, manual, ...)");
  cmd->add_flag("--winners", o->winners,
                "only winners: correct, admitted and unflagged (what kforge evolve keeps)");
  cmd->add_flag("--metrics", o->metrics_only,
                "only the field's metrics: correctness rate, fast_p (p = 0, 1, 1.5, 2) and the "
                "geometric mean speedup against eager, torch.compile and the best baseline, for "
                "the best of all attempts and for the first sample (each task's first "
                "model-written kernel)");
  cmd->add_option("--problems", o->problems,
                  "the metrics' denominator (e.g. 100 for a KernelBench level); default: the "
                  "suite's tasks")
      ->check(CLI::Range(size_t{1}, size_t{1000000}));
  cmd->callback([&exit_code, a, o] { exit_code = results(*a, *o); });
}

void add_archive_search(CLI::App* archive, SharedArchiveOptions a, int& exit_code) {
  auto query = std::make_shared<std::string>();
  auto limit = std::make_shared<size_t>(20);
  auto* cmd = add_archive_subcommand(archive, "search",
                                     "Full-text search over kernel sources and their tasks");
  cmd->add_option("query", *query)->required();
  cmd->add_option("--limit", *limit, "rows")->capture_default_str();
  cmd->callback([&exit_code, a, query, limit] {
    auto ar = open_existing(*a);
    exit_code = print_summaries(ar.search(*query, *limit), a->json, "no kernel matches");
  });
}

void add_archive_runs(CLI::App* archive, SharedArchiveOptions a, int& exit_code) {
  add_archive_subcommand(archive, "runs", "Evolution runs with their status and budgets")
      ->callback([&exit_code, a] { exit_code = runs(*a); });
}

}  // namespace kforge::cli
