// torch.compile's packages built before a command's first verdict (verify::compiled_packages),
// with a line for each one built or missing and one summing up: a cold
// build takes a minute or two per task, and without this the judge would wait for each in turn.
#pragma once

#include <CLI/CLI.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "kforge/tasks/task.h"
#include "kforge/verify/judge.h"

namespace kforge::cli {

// `--no-compile`: the options' torch.compile baselines off (every mode), their absence saying so.
void add_no_compile_flag(CLI::App* cmd, bool& no_compile);
void apply_no_compile(bool no_compile, verify::VerifyOptions& options);
// `--no-max-autotune`: torch.compile's max-autotune baseline off (its package takes longest to
// build), the default mode's kept.
void add_no_max_autotune_flag(CLI::App* cmd, bool& no_max_autotune);
void apply_no_max_autotune(bool no_max_autotune, verify::VerifyOptions& options);

// Each distinct task once, on options.device; says so on `out` (standard error where standard
// output is JSON). Nothing when timing or the baseline is off.
void prepare_compiled_baselines(const verify::VerifyOptions& options,
                                const std::vector<const tasks::Task*>& tasks, std::ostream& out);

}  // namespace kforge::cli
