// `kforge baseline SUITE`: every task's reference timed at its timed dims the way candidates are:
// eager, scripted (TorchScript's fuser) and torch.compile's (TorchInductor), or why the last is
// absent; stored in the archive per task version, dims, device and math mode (docs/design.md,
// Verification 4).
#include <iomanip>
#include <iostream>
#include <sstream>

#include "command_list.h"
#include "commands.h"
#include "compiled_baselines.h"
#include "kforge/archive/archive.h"
#include "kforge/archive/location.h"
#include "kforge/compile/nvrtc.h"
#include "kforge/evolve/evaluator.h"
#include "kforge/verify/clocks.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/judge.h"
#include "table.h"

namespace kforge::cli {
namespace {

struct BaselineArgs {
  std::string suite, tasks_dir, db;
  bool no_store = false, json = false, no_compile = false;
};

std::string ms(double v) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(4) << v;
  return os.str();
}

int run_baseline(const BaselineArgs& a) {
  verify::Driver::get().require("kforge baseline");
  std::filesystem::path root =
      a.tasks_dir.empty() ? tasks::default_tasks_root() : std::filesystem::path(a.tasks_dir);
  std::vector<std::filesystem::path> files = tasks::resolve_tasks(a.suite, root);
  verify::DeviceInfo gpu = verify::list_devices().at(0);
  std::optional<archive::Archive> ar;
  std::optional<archive::DeviceId> device;
  if (!a.no_store) {
    ar = archive::Archive::open(archive::database_path(a.db).string(), /*create=*/true);
    device = ar->upsert_device(gpu.uuid, gpu.name, compile::arch_for(gpu.cc_major, gpu.cc_minor),
                               gpu.sm_count, static_cast<int64_t>(gpu.memory_bytes),
                               std::to_string(verify::driver_version()));
  }
  Table table(
      {"TASK", "DIMS", "EAGER ms", "IQR", "SCRIPTED ms", "IQR", "COMPILE ms", "IQR", "MODE"});
  std::vector<std::string> absent;  // "task: why torch.compile's time is missing"
  nlohmann::json rows = nlohmann::json::array();
  verify::VerifyOptions options;
  apply_no_compile(a.no_compile, options);
  std::vector<tasks::Task> all;
  for (const auto& file : files) all.push_back(tasks::load_task(file));
  std::vector<const tasks::Task*> pointers;
  for (const tasks::Task& t : all) pointers.push_back(&t);
  prepare_compiled_baselines(options, pointers, a.json ? std::cerr : std::cout);
  for (const tasks::Task& task : all) {
    verify::Baselines b = verify::measure_baselines(task, options);
    if (ar)
      ar->store_baseline(ar->upsert_task(task), task.dims, *device, b.math_mode,
                         evolve::baseline_times(b), /*replace=*/true);
    std::string why = b.compiled                  ? ""
                      : b.compiled_absent.empty() ? "not measured"
                                                  : b.compiled_absent;
    table.add({task.id(), tasks::format_dims(task.dims), ms(b.eager.median_ms), ms(b.eager.iqr_ms),
               ms(b.scripted.median_ms), ms(b.scripted.iqr_ms),
               b.compiled ? ms(b.compiled->median_ms) : "-",
               b.compiled ? ms(b.compiled->iqr_ms) : "-", b.math_mode});
    if (!b.compiled) absent.push_back(task.id() + ": " + why);
    rows.push_back({{"task", task.id()},
                    {"dims", task.dims},
                    {"eager", b.eager.to_json()},
                    {"scripted", b.scripted.to_json()},
                    {"compiled", b.compiled ? b.compiled->to_json() : nlohmann::json(nullptr)},
                    {"compiled_absent", b.compiled ? nlohmann::json(nullptr) : nlohmann::json(why)},
                    {"math_mode", b.math_mode},
                    {"clocks", b.clocks}});
    if (!a.json)
      std::cout << "timed " << task.id() << ": eager " << ms(b.eager.median_ms) << " ms, scripted "
                << ms(b.scripted.median_ms) << " ms, compile "
                << (b.compiled ? ms(b.compiled->median_ms) + " ms" : "- (" + why + ")")
                << "; SM clock " << verify::clock_text(b.clocks) << std::endl;
  }
  if (a.json) {
    std::cout << nlohmann::json{{"device", {{"name", gpu.name}, {"uuid", gpu.uuid}}},
                                {"baselines", rows}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << "\n"
              << gpu.name << " (" << gpu.uuid << ")" << (ar ? ", stored in the archive" : "")
              << "\n";
    table.print();
    if (!absent.empty()) {
      std::cout << "\nNo torch.compile (TorchInductor) time:\n";
      for (const auto& line : absent) std::cout << "  " << line << "\n";
    }
  }
  return kExitOk;
}

}  // namespace

void add_baseline_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<BaselineArgs>();
  auto* cmd = app.add_subcommand("baseline", command_description("baseline"));
  cmd->add_option("suite", a->suite, "Suite, suite/name, or a task file")->required();
  cmd->add_option("--tasks-dir", a->tasks_dir, "Folder holding the suites");
  cmd->add_option("--db", a->db,
                  "Archive file (default $KFORGE_DB, else $XDG_DATA_HOME/kforge/archive.db)");
  cmd->add_flag("--no-store", a->no_store, "Print only; do not write the archive");
  add_no_compile_flag(cmd, a->no_compile);
  cmd->add_flag("--json", a->json, "Machine-readable output");
  add_wide_flag(cmd);
  cmd->callback([&exit_code, a] { exit_code = run_baseline(*a); });
}

}  // namespace kforge::cli
