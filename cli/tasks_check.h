// `kforge tasks check`, shared by `kforge tasks import-kernelbench` (which checks what it wrote).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kforge/tasks/kernelbench_import.h"

namespace kforge::tasks {
struct TaskCheck;
}

namespace kforge::cli {

struct CheckArgs {
  std::vector<std::string> specs;
  std::string device = "cpu";
  std::string dims;
  uint64_t seed = 1;
  int timing_runs = -1;
  bool json = false;
  bool verbose = false;
  bool force = false;
  std::optional<std::string> reference_time_limit;
  // Called with each task file and its check (the KernelBench import marks degenerate tasks).
  std::function<void(const std::filesystem::path&, const tasks::TaskCheck&)> on_checked;
};

// Checks the tasks (every suite under `root` when `a.specs` is empty), prints one line per task
// and a summary; kExitFindings when any fails.
int run_check(const CheckArgs& a, const std::filesystem::path& root);

// `kforge tasks import-kernelbench`'s work (kernelbench_cmd.cpp): the problems imported into a
// suite, which is then checked; `kforge model profile --suite` imports its chains with it.
struct KernelBenchImportArgs {
  tasks::KernelBenchOptions o;
  std::string out;  // the folder the suite goes in ("": the tasks folder)
  bool json = false;
};
int run_kernelbench_import(const KernelBenchImportArgs& args,
                           const std::filesystem::path& tasks_root);

// Registers `kforge tasks import-kernelbench` (kernelbench_cmd.cpp) under `tasks`.
void add_import_kernelbench_command(CLI::App* tasks, int& exit_code,
                                    std::function<std::filesystem::path()> root);

}  // namespace kforge::cli
