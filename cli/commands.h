// The kforge command line: each subcommand registers itself on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

namespace kforge::cli {

// Exit codes (README.md, "Exit codes").
inline constexpr int kExitOk = 0;
inline constexpr int kExitFindings = 1;  // the command ran and found problems (failing tasks)
inline constexpr int kExitUsage = 2;     // bad arguments or malformed input files
inline constexpr int kExitNoGpu = 3;     // the command needs a GPU and none can be used here
inline constexpr int kExitInternal = 4;  // a kforge bug (an unexpected library exception)
inline constexpr int kExitWaiting =
    75;  // kforge evolve paused for a batch folder's answers (EX_TEMPFAIL)

// Each returns a callback's exit code through `exit_code`.
void add_doctor_command(CLI::App& app, int& exit_code);
void add_tasks_command(CLI::App& app, int& exit_code);
void add_compile_command(CLI::App& app, int& exit_code);
void add_archive_command(CLI::App& app, int& exit_code);
void add_llm_command(CLI::App& app, int& exit_code);
void add_prompt_command(CLI::App& app, int& exit_code);
void add_verify_command(CLI::App& app, int& exit_code);
void add_baseline_command(CLI::App& app, int& exit_code);
void add_corpus_command(CLI::App& app, int& exit_code);
void add_evolve_command(CLI::App& app, int& exit_code);  // evolve and report
void add_export_command(CLI::App& app, int& exit_code);
void add_model_command(CLI::App& app, int& exit_code);  // model profile and model check
void add_serve_command(CLI::App& app, int& exit_code);
void add_gpu_worker_command(CLI::App& app,
                            int& exit_code);  // a GPU of kforge evolve --gpus / --worker-command
void add_reference_command(CLI::App& app, int& exit_code);  // hidden: tasks::ReferenceChild's child

}  // namespace kforge::cli
