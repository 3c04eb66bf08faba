#include "compiled_baselines.h"

#include <chrono>
#include <iostream>
#include <set>

#include "kforge/common/strings.h"
#include "progress.h"

namespace kforge::cli {

void add_no_compile_flag(CLI::App* cmd, bool& no_compile) {
  cmd->add_flag("--no-compile", no_compile,
                "No torch.compile baselines, neither mode (their AOTInductor packages take a "
                "minute or more per task to build the first time)");
}

void add_no_max_autotune_flag(CLI::App* cmd, bool& no_max_autotune) {
  cmd->add_flag("--no-max-autotune", no_max_autotune,
                "No torch.compile max-autotune baseline (its package autotunes GEMM templates: the "
                "slowest to build); the default mode's is kept");
}

void apply_no_max_autotune(bool no_max_autotune, verify::VerifyOptions& options) {
  if (!no_max_autotune) return;
  options.compiled.max_autotune = false;
  options.compiled.max_autotune_off_reason = "turned off (--no-max-autotune)";
}

void apply_no_compile(bool no_compile, verify::VerifyOptions& options) {
  if (!no_compile) return;
  options.compiled.enabled = false;
  options.compiled.off_reason = "turned off (--no-compile)";
}

void prepare_compiled_baselines(const verify::VerifyOptions& options,
                                const std::vector<const tasks::Task*>& tasks, std::ostream& out) {
  if (!options.time || !options.compiled.enabled) return;
  std::vector<const tasks::Task*> distinct;
  std::set<std::string> seen;
  for (const tasks::Task* t : tasks)
    if (seen.insert(t->content_hash + tasks::format_dims(t->dims)).second) distinct.push_back(t);
  if (distinct.empty()) return;
  size_t built = 0, cached = 0, absent = 0, interrupted = 0, done = 0,
         packages = distinct.size() * verify::compiled_kinds().size();
  std::set<std::string> reasons;  // each said once: a missing PyTorch is every task's reason
  Progress progress;
  auto t0 = std::chrono::steady_clock::now();
  verify::compiled_packages(
      distinct, options.device, options.compiled,
      [&](const tasks::Task& t, const verify::CompiledPackage& p) {
        ++done;
        std::string of = "  torch.compile baseline (" + std::string(baseline_info(p.kind).label) +
                         ") of " + t.id();
        if (p.absent == verify::kCompiledInterrupted) {
          ++interrupted;
        } else if (!p.absent.empty()) {
          ++absent;
          if (!reasons.insert(p.absent).second) return;
          progress.clear();
          out << of << ": none (" << printable(p.absent) << ")" << std::endl;
        } else if (p.build_s > 0) {
          ++built;
          progress.clear();
          out << of << ": built in " << static_cast<int>(p.build_s + 0.5) << " s" << std::endl;
        } else {
          ++cached;
        }
        progress.show("torch.compile packages: " + std::to_string(done) + "/" +
                      std::to_string(packages));
      });
  progress.clear();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out << "torch.compile baselines: " << built << " built"
      << (built ? " in " + std::to_string(static_cast<int>(wall + 0.5)) + " s" : "") << ", "
      << cached << " from the cache, " << absent << " absent (the reason shows with each verdict)"
      << (interrupted ? ", " + std::to_string(interrupted) + " not built (interrupted)" : "")
      << std::endl;
}

}  // namespace kforge::cli
