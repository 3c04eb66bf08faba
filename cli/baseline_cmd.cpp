// `kforge baseline SUITE`: every task's reference timed at its timed dims the way candidates are,
// as each kind of baseline (common/baseline.h: eager, scripted, torch.compile's modes), or why a
// kind is absent; stored in the archive per task version, dims, device and math mode
// (docs/design.md, Verification 4).
#include <iomanip>
#include <iostream>
#include <sstream>

#include "baseline_columns.h"
#include "command_list.h"
#include "commands.h"
#include "compiled_baselines.h"
#include "kforge/archive/archive.h"
#include "kforge/archive/location.h"
#include "kforge/compile/nvrtc.h"
#include "kforge/verify/clocks.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/judge.h"
#include "table.h"

namespace kforge::cli {
namespace {

struct BaselineArgs {
  std::string suite, tasks_dir, db;
  bool no_store = false, json = false, no_compile = false, no_max_autotune = false;
};

std::string ms(double v) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(4) << v;
  return os.str();
}

std::string why_absent(const verify::BaselineTiming& t) {
  return t.absent.empty() ? "not measured" : t.absent;
}

// The table's heading: each kind's median and IQR, then the best baseline's kind.
std::vector<std::string> table_heading() {
  std::vector<std::string> head = {"TASK", "DIMS"};
  for (const std::string& label : baseline_labels(false)) {
    head.push_back(heading(label) + " ms");
    head.push_back("IQR");
  }
  head.push_back(heading(std::string(kBestBaselineLabel)));
  head.push_back("MODE");
  return head;
}

// "eager 0.1234 ms, scripted 0.1100 ms, compile - (why), ...; best: scripted".
std::string timed_line(const verify::Baselines& b) {
  std::vector<std::string> parts;
  for (const BaselineKindInfo& info : baseline_kinds()) {
    const verify::BaselineTiming* t = verify::find_baseline(b.list, info.kind);
    parts.push_back(std::string(info.label) + " " +
                    (t && t->stats ? ms(t->stats->median_ms) + " ms"
                                   : "- (" + (t ? why_absent(*t) : "not measured") + ")"));
  }
  std::optional<BaselineMs> best = verify::medians(b.list).best();
  return join(parts, ", ") + "; " + std::string(kBestBaselineLabel) + ": " +
         (best ? std::string(baseline_info(best->kind).label) : "-");
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
  Table table(table_heading());
  std::vector<std::string> absent;  // "task: compile: why its time is missing"
  nlohmann::json rows = nlohmann::json::array();
  verify::VerifyOptions options;
  apply_no_compile(a.no_compile, options);
  apply_no_max_autotune(a.no_max_autotune, options);
  std::vector<tasks::Task> all;
  for (const auto& file : files) all.push_back(tasks::load_task(file));
  std::vector<const tasks::Task*> pointers;
  for (const tasks::Task& t : all) pointers.push_back(&t);
  prepare_compiled_baselines(options, pointers, a.json ? std::cerr : std::cout);
  for (const tasks::Task& task : all) {
    verify::Baselines b = verify::measure_baselines(task, options);
    BaselineTimes times = verify::medians(b.list);
    if (ar)
      ar->store_baseline(ar->upsert_task(task), task.dims, *device, b.math_mode, times,
                         /*replace=*/true);
    std::vector<std::string> row = {task.id(), tasks::format_dims(task.dims)};
    nlohmann::json list = nlohmann::json::array();
    for (const BaselineKindInfo& info : baseline_kinds()) {
      const verify::BaselineTiming* t = verify::find_baseline(b.list, info.kind);
      row.push_back(t && t->stats ? ms(t->stats->median_ms) : "-");
      row.push_back(t && t->stats ? ms(t->stats->iqr_ms) : "-");
      if (!t || !t->stats)
        absent.push_back(task.id() + ": " + std::string(info.label) + ": " +
                         (t ? why_absent(*t) : "not measured"));
      if (t) list.push_back(t->to_json());
    }
    std::optional<BaselineMs> best = times.best();
    row.push_back(best ? std::string(baseline_info(best->kind).label) : "-");
    row.push_back(b.math_mode);
    table.add(row);
    rows.push_back(
        {{"task", task.id()},
         {"dims", task.dims},
         {"baselines", list},
         {"best", best ? nlohmann::json(to_string(best->kind)) : nlohmann::json(nullptr)},
         {"math_mode", b.math_mode},
         {"clocks", b.clocks}});
    if (!a.json)
      std::cout << "timed " << task.id() << ": " << printable(timed_line(b)) << "; SM clock "
                << verify::clock_text(b.clocks) << std::endl;
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
      std::cout << "\nBaselines not measured:\n";
      for (const auto& line : absent) std::cout << "  " << printable(line) << "\n";
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
  add_no_max_autotune_flag(cmd, a->no_max_autotune);
  cmd->add_flag("--json", a->json, "Machine-readable output");
  add_wide_flag(cmd);
  cmd->callback([&exit_code, a] { exit_code = run_baseline(*a); });
}

}  // namespace kforge::cli
