// `kforge tasks import-kernelbench PATH... --suite NAME [--out DIR]`: KernelBench problem files
// become a kforge suite (tasks/kernelbench_import.h does the import), and the tasks written are
// then checked like any suite (`kforge tasks check`).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "json_output.h"
#include "kforge/common/error.h"
#include "kforge/common/files.h"
#include "kforge/tasks/check.h"
#include "kforge/tasks/kernelbench_import.h"
#include "kforge/tasks/reference_child.h"
#include "kforge/tasks/task.h"
#include "kforge/verify/driver.h"
#include "tasks_check.h"

namespace kforge::cli {
namespace {

namespace fs = std::filesystem;

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

std::string percent(size_t part, size_t whole) {
  return whole ? std::to_string((part * 100 + whole / 2) / whole) + "%" : "-";
}

// The import's progress, a line per problem.
class Printer : public tasks::KernelBenchObserver {
 public:
  explicit Printer(const tasks::KernelBenchOptions& a) : a_(a) {}

  void on_start(size_t problems, const std::string& python, const std::string& torch,
                const std::string& confinement) override {
    std::cout << "importing " << problems << " KernelBench problem(s) into "
              << a_.out_root + "/" + a_.suite << " (" << python << ", PyTorch " << torch
              << ", checked on " << a_.device << ")\n           " << confinement << "; "
              << seconds(a_.time_limit) << " per problem" << std::endl;
  }
  void on_converted(const tasks::KernelBenchProblem& p,
                    const tasks::KernelBenchConversion& c) override {
    std::string dims, fixed;
    for (const std::string& d : c.dims) dims += (dims.empty() ? "" : ", ") + d;
    for (const auto& [k, v] : c.fixed)
      fixed += (fixed.empty() ? "" : ", ") + k + "=" + std::to_string(v);
    std::cout << "converted  " << p.file << " -> " << a_.suite << "/" << p.name << ": dims "
              << (dims.empty() ? "none" : dims) << (fixed.empty() ? "" : "; fixed " + fixed)
              << "; matches the Model at " << c.checked_sizes << " check size(s)"
              << (c.timed_checked ? " and the timed sizes" : "") << std::endl;
    for (const std::string& n : c.notes) std::cout << "           note: " << n << "\n";
  }
  void on_failed(const tasks::KernelBenchProblem& p) override {
    std::cout << "failed     " << p.file << ": " << p.reason << std::endl;
  }
  void on_removed_stale(const std::string& task_file) override {
    std::cout << "           removed " << task_file << " (an earlier import's)" << std::endl;
  }

 private:
  const tasks::KernelBenchOptions& a_;
};

const std::string kDegenerate = "degenerate: ";

// Adds `degenerate = [...]` (the check's findings) to a task file the import wrote, after its
// tags, where top-level keys go; "" when done, else why not. The file must still load.
std::string mark_degenerate(const std::string& file, const std::vector<std::string>& found) {
  try {
    std::optional<std::string> text = read_file(file);
    if (!text) return "cannot read it";
    size_t at = text->find("\ntags = ");
    if (at == std::string::npos) return "it has no tags line";
    at = text->find('\n', at + 1);
    if (at == std::string::npos) return "it ends after its tags";
    nlohmann::json list = found;  // JSON strings are TOML basic strings
    std::string marked = text->substr(0, at + 1) + "degenerate = " +
                         list.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace) + "\n" +
                         text->substr(at + 1);
    (void)tasks::parse_task(file, marked);
    write_file_atomic(file, marked);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

const char* outcome_name(tasks::ProblemOutcome o) {
  switch (o) {
    case tasks::ProblemOutcome::Converted:
      return "converted";
    case tasks::ProblemOutcome::Failed:
      return "failed";
    case tasks::ProblemOutcome::Pending:
      return "not_reached";
  }
  return "unknown";
}

}  // namespace

int run_kernelbench_import(const KernelBenchImportArgs& args, const fs::path& tasks_root) {
  tasks::KernelBenchOptions a = args.o;
  if (a.suite.empty() || !std::all_of(a.suite.begin(), a.suite.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      }))
    throw InputError("--suite", std::nullopt, "",
                     "must be a folder name of letters, digits, _ and -, got '" + a.suite + "'");
  if (a.device != "cpu" && a.device != "cuda")
    throw InputError("--device", std::nullopt, "", "must be cpu or cuda, got '" + a.device + "'");
  if (!(a.time_limit > 0 && a.time_limit <= tasks::kMaxReferenceSeconds))
    throw InputError("--time-limit", std::nullopt, "",
                     "must be a number of seconds above 0 and at most 86400");
  if (a.device == "cuda")
    verify::Driver::get().require("kforge tasks import-kernelbench --device cuda");
  a.out_root = args.out.empty() ? tasks_root.string() : args.out;
  StdoutToStderr redirect(args.json);  // --json: the lines below on stderr, the result on stdout
  Printer printer(a);
  tasks::KernelBenchImport r = tasks::import_kernelbench(a, printer);
  size_t converted = 0, failed = 0, unreached = 0;
  for (const tasks::KernelBenchProblem& p : r.problems) {
    if (p.outcome == tasks::ProblemOutcome::Converted) ++converted;
    if (p.outcome == tasks::ProblemOutcome::Failed) ++failed;
    if (p.outcome == tasks::ProblemOutcome::Pending) {
      ++unreached;
      std::cout << "not reached " << p.file << ": " << p.reason << "\n";
    }
  }
  int check_rc = kExitOk;
  std::vector<std::pair<std::string, std::vector<std::string>>> degenerate;
  if (!r.written.empty()) {
    std::cout << "\n";
    CheckArgs c;
    c.specs = r.written;
    c.device = a.device;
    c.on_checked = [&degenerate](const fs::path& file, const tasks::TaskCheck& check) {
      std::vector<std::string> found;
      for (const std::string& p : check.problems)
        if (p.rfind(kDegenerate, 0) == 0) found.push_back(p.substr(kDegenerate.size()));
      if (!found.empty()) degenerate.emplace_back(file.string(), found);
    };
    check_rc = run_check(c, tasks_root);
  }
  // A degenerate task stays, marked in its file (`kforge tasks list` and `check` show it).
  for (const auto& [file, found] : degenerate) {
    if (std::string why = mark_degenerate(file, found); !why.empty())
      std::cout << "could not mark " << file << " degenerate: " << why << "\n";
    else
      std::cout << "marked     " << file << " degenerate (" << found.size()
                << " finding(s) above)\n";
  }
  size_t total = r.problems.size();
  std::cout
      << "\nimported " << converted << " of " << total << " KernelBench problem(s) ("
      << percent(converted, total) << ") into " << r.suite_dir << "; " << failed
      << " could not be converted"
      << (r.importer_failures
              ? " (" + std::to_string(r.importer_failures) +
                    " of them broke kforge's importer: a kforge bug, unless the problem's own "
                    "code did it; please report it with the problem)"
              : std::string())
      << (unreached ? "; " + std::to_string(unreached) + " not reached (above)" : std::string())
      << (check_rc == kExitOk ? "" : "; some converted tasks fail `kforge tasks check` (above)")
      << "\n";
  std::string where = a.out_root == tasks_root.string() ? "" : " --tasks-dir " + a.out_root;
  std::string next = "kforge evolve " + a.suite + where + " --dry-run";
  if (converted > 0)  // the next command, with the folder the suite went to
    std::cout << "next: " << next << "  (then without --dry-run, on a GPU; kforge tasks list "
              << a.suite << where << " lists them)\n";
  int rc = r.kforge_bugs                                ? kExitInternal
           : failed || unreached || check_rc != kExitOk ? kExitFindings
                                                        : kExitOk;
  if (args.json) {
    nlohmann::json problems = nlohmann::json::array(), marked = nlohmann::json::array();
    for (const tasks::KernelBenchProblem& p : r.problems)
      problems.push_back({{"file", p.file},
                          {"name", p.name},
                          {"outcome", outcome_name(p.outcome)},
                          {"reason", p.reason}});
    for (const auto& [file, found] : degenerate)
      marked.push_back({{"file", file}, {"degenerate", found}});
    redirect.print({{"suite", a.suite},
                    {"suite_dir", r.suite_dir},
                    {"problems", problems},
                    {"converted", converted},
                    {"failed", failed},
                    {"not_reached", unreached},
                    {"tasks_check_passed", check_rc == kExitOk},
                    {"degenerate", marked},
                    {"next", converted > 0 ? nlohmann::json(next) : nlohmann::json(nullptr)}});
  }
  return rc;
}

void add_import_kernelbench_command(CLI::App* tasks, int& exit_code,
                                    std::function<fs::path()> root) {
  auto* cmd = tasks->add_subcommand("import-kernelbench",
                                    "Convert KernelBench problem files (or level folders) into a "
                                    "kforge suite, checked against each Model "
                                    "(needs a Python with PyTorch)");
  auto a = std::make_shared<KernelBenchImportArgs>();
  cmd->add_option("paths", a->o.paths,
                  "KernelBench problem files or folders (e.g. KernelBench/KernelBench/level1)")
      ->required();
  cmd->add_option("--suite", a->o.suite, "Name of the suite (the folder the tasks are written to)")
      ->required();
  cmd->add_option("--out", a->out,
                  "Folder the suite folder goes in (default: the tasks folder, see --tasks-dir)");
  cmd->add_option("--device", a->o.device,
                  "Where each task is checked against its Model: cpu or cuda")
      ->capture_default_str();
  cmd->add_option(
      "--python", a->o.python,
      "Python with PyTorch (default: $KFORGE_PYTHON, else python3, then /usr/bin/python3)");
  cmd->add_option("--time-limit", a->o.time_limit,
                  "Seconds each problem may take to convert and check; kforge stops it then")
      ->capture_default_str();
  cmd->add_flag("--json", a->json,
                "The result as JSON on stdout (each problem's outcome, the next command); the "
                "progress on stderr");
  cmd->fallthrough();
  cmd->callback([&exit_code, a, root] { exit_code = run_kernelbench_import(*a, root()); });
}

}  // namespace kforge::cli
