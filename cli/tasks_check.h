// `kforge tasks check`, shared by `kforge tasks import-kernelbench` (which checks what it wrote).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

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

// Registers `kforge tasks import-kernelbench` (kernelbench_cmd.cpp) under `tasks`.
void add_import_kernelbench_command(CLI::App* tasks, int& exit_code,
                                    std::function<std::filesystem::path()> root);

}  // namespace kforge::cli
