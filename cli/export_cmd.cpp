// `kforge export`: the archive's winners as a library (docs/export.md); no GPU needed.
#include <algorithm>
#include <iostream>

#include "command_list.h"
#include "commands.h"
#include "kforge/common/strings.h"
#include "kforge/export/exporter.h"
#include "kforge/verify/outcome.h"

namespace kforge::cli {
namespace {

struct ExportArgs {
  exporter::ExportOptions o;
  std::string archs = "sm_90a";
  bool json = false;
};

// --json's result: what was exported, what was left out and why, how to build it.
nlohmann::json export_json(const ExportArgs& a, const exporter::ExportResult& r) {
  nlohmann::json ops = nlohmann::json::array(), left_out = nlohmann::json::array();
  for (const exporter::Op& op : r.ops)
    ops.push_back({{"op", op.op}, {"task", op.task->id()}, {"fallback", op.fallback}});
  for (const exporter::Missing& m : r.missing)
    left_out.push_back({{"task", m.task}, {"why", m.why}});
  nlohmann::json j = {{"name", a.o.name}, {"out", a.o.out.string()}, {"archs", a.o.archs},
                      {"ops", ops},       {"left_out", left_out},    {"written", !r.ops.empty()}};
  if (!r.ops.empty())
    j["build"] = "cmake -S " + a.o.out.string() + " -B " + (a.o.out / "build").string();
  return j;
}

int run_export(ExportArgs& a) {
  a.o.archs = split(a.archs, ',');
  for (std::string& arch : a.o.archs) arch = trim(arch);
  for (char c : a.o.name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      throw UsageError("kforge export: --name " + a.o.name +
                       " is not a C++ and Python identifier (letters, digits, _)");
  if (a.o.name.empty() || std::isdigit(static_cast<unsigned char>(a.o.name[0])))
    throw UsageError("kforge export: --name must start with a letter or _");
  compile::Compiler compiler;
  // With --json the progress goes to stderr and stdout holds the result alone.
  std::ostream& out = a.json ? std::cerr : std::cout;
  out << "kforge export: " << a.o.name << " for " << join(a.o.archs, ", ") << " into "
      << a.o.out.string() << std::endl;
  exporter::ExportResult r = exporter::export_library(
      a.o, compiler, [&out](const std::string& line) { out << line << std::endl; });
  if (a.json) std::cout << export_json(a, r).dump(2) << std::endl;
  // Each reason once: a reason that leaves out several tasks is one line naming a few of them.
  std::vector<std::pair<std::string, std::vector<std::string>>> reasons;  // in first-seen order
  for (const exporter::Missing& m : r.missing) {
    auto same = std::find_if(reasons.begin(), reasons.end(),
                             [&](const auto& reason) { return reason.first == m.why; });
    if (same == reasons.end()) reasons.push_back({m.why, {}}), same = reasons.end() - 1;
    same->second.push_back(m.task);
  }
  for (const auto& [reason, tasks] : reasons) {  // the whole reason, its later lines indented
    std::string why = printable(reason);
    for (size_t at = why.find('\n'); at != std::string::npos; at = why.find('\n', at + 1))
      why.insert(at + 1, "    ");
    if (tasks.size() < 4) {
      for (const std::string& task : tasks)
        out << "  " << printable(task) << ": not exported: " << why << std::endl;
      continue;
    }
    std::vector<std::string> some(tasks.begin(), tasks.begin() + 3);
    out << "  " << tasks.size() << " tasks (" << printable(join(some, ", ")) << ", ...): "
        << "not exported: " << why << std::endl;
  }
  if (r.ops.empty()) {
    out << "0 op(s) exported, " << r.missing.size() << " task(s) left out: no package written"
        << std::endl;
    return kExitFindings;
  }
  out << r.ops.size() << " op(s) exported, " << r.missing.size()
      << " task(s) left out (manifest.json lists them); "
      << "build: cmake -S " << a.o.out.string() << " -B " << (a.o.out / "build").string()
      << ", or pip install --no-build-isolation " << a.o.out.string() << std::endl;
  return r.ops.empty() ? kExitFindings : kExitOk;
}

}  // namespace

void add_export_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ExportArgs>();
  auto* cmd = app.add_subcommand("export", command_description("export"));
  cmd->add_option("--out", a->o.out, "Folder to write the package into")->required();
  cmd->add_option("--suite", a->o.suites, "Suites to export (default: every task with a winner)");
  cmd->add_option("--task", a->o.tasks, "Tasks to export (suite/name or name)");
  cmd->add_option("--name", a->o.name,
                  "The package's name: C++ namespace, CMake package, Python module")
      ->capture_default_str();
  cmd->add_option("--arch", a->archs, "Architectures, comma-separated: a cubin each, and PTX")
      ->capture_default_str();
  cmd->add_option("--from", a->o.from_jsonl,
                  "An archive export (kforge archive export, JSONL or .gz) instead of the archive");
  cmd->add_option(
      "--tasks-dir", a->o.tasks_dir,
      "Folder holding the suites (each winner's task file, at the version it was judged)");
  cmd->add_option("--db", a->o.db,
                  "Archive file (default $KFORGE_DB, else $XDG_DATA_HOME/kforge/archive.db)");
  cmd->add_option("--harness", a->o.harness_version,
                  "Harness version whose verdicts count (default: this kforge's, " +
                      std::to_string(verify::kHarnessVersion) +
                      "); an archive judged by an older kforge names its version")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--min-speedup", a->o.min_speedup,
                  "Leave out (or, with --fallback, run the reference for) tasks whose winner is "
                  "slower than this over eager")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--include-unadmitted", a->o.include_unadmitted,
                "Also kernels never admitted (fresh dims, sanitizers); the manifest says which");
  cmd->add_flag("--json", a->json,
                "The result as JSON on stdout (ops, tasks left out and why), progress on stderr");
  cmd->add_flag(
      "--fallback", a->o.fallback,
      "Tasks without a winner as PyTorch ops that run the task's reference (the manifest says so)");
  cmd->callback([&exit_code, a] { exit_code = run_export(*a); });
}

}  // namespace kforge::cli
