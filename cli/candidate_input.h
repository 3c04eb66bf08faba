// What `kforge compile` and `kforge verify` share: reading a candidate (a whole LLM answer, or a
// source with a plan), the one task it is for, the device facts and --tune values.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kforge/compile/plan.h"
#include "kforge/evolve/evaluator.h"
#include "kforge/evolve/prompt.h"
#include "kforge/tasks/reference_child.h"
#include "kforge/tasks/task.h"

namespace kforge::cli {

struct CandidateFiles {
  std::string source_file, plan_file, answer_file;
};

struct CandidateInput {
  std::string source, plan;
  std::string label = "candidate.cu";       // the file errors refer to
  int first_line = 1;                       // of the source within that file
  std::optional<std::string> answer_error;  // the answer has no usable code or plan
  std::string task_named;  // the task an answer names (`<!-- task: suite/name -->`), or ""
};

// Throws InputError naming `command`'s missing or conflicting arguments and unreadable files.
CandidateInput read_candidate(const CandidateFiles& files, const std::string& command);

// A KernelBench answer (--kernelbench ANSWER.py) and what to do with it.
struct KernelBenchFlags {
  std::string file;    // the answer: a Python file with ModelNew and load_inline
  std::string python;  // --python: the Python that parses it ("": python_candidates())
  std::string write;   // -o FILE.md: the derived candidate, written as a kforge answer
};

// The candidate derived from a KernelBench answer for `task` (compile/kernelbench_answer.h):
// its device code and plan, or answer_error saying why it does not convert (the answer's line
// and the construct). Says what the conversion changed on `notes`, and writes the candidate to
// flags.write when asked. Throws InputError for conflicting arguments, UsageError without a
// Python.
CandidateInput read_kernelbench_candidate(const KernelBenchFlags& flags,
                                          const CandidateFiles& files, const tasks::Task& task,
                                          tasks::ReferenceChild& reference, std::ostream& notes);

// The task --kernelbench converts for: --task, which it needs (InputError without it).
tasks::Task kernelbench_task_of(const std::string& task_flag, const std::string& tasks_dir);
// Without --kernelbench: InputError when one of its other flags is given.
void check_kernelbench_flags(const KernelBenchFlags& flags);

// --kernelbench, --python and -o/--write-candidate on `cmd`.
void add_kernelbench_options(CLI::App* cmd, KernelBenchFlags& flags);

// --task names exactly one task (a file, suite/name or name).
tasks::Task load_one_task(const std::string& spec, const std::string& tasks_dir);
// The task of a candidate: --task when given, else the one its answer names (InputError when
// neither).
tasks::Task load_candidate_task(const std::string& task_flag, const CandidateInput& in,
                                const std::string& tasks_dir);

// The candidate as the evaluation pipeline takes it (a manual proposal), with --tune's values.
evolve::Proposal proposal(const CandidateInput& in, std::shared_ptr<const tasks::Task> task,
                          const std::vector<std::string>& tune);

// GPU 0's facts where a GPU is present, else the usual GPU of `arch` (default sm_90a).
compile::DeviceFacts facts_for(const std::string& arch_flag);
// The prompts' line about the target GPU: this machine's, else a Hopper's.
std::string device_line();
std::string device_line(const verify::DeviceInfo& gpu);  // that GPU's
// The prompts' facts about the target GPU: GPU 0's (its bandwidth and peaks measured once, then
// cached), else the usual sm_90a GPU's.
evolve::PromptGpu prompt_gpu();
// That GPU's, as described (a GPU worker's, where this machine has none).
evolve::PromptGpu prompt_gpu(const verify::DeviceInfo& gpu, const compile::DeviceFacts& plan,
                             std::optional<verify::MeasuredFacts> measured);

// NAME=V items of --tune.
compile::Tunables parse_tune(const std::vector<std::string>& items);
// Each --tune item names a tunable of the candidate's plan with one of its listed values; else a
// UsageError naming the plan's tunables or values. A plan that does not parse is left to the
// plan stage, which reports it as the candidate's problem.
void check_tune(const std::string& plan_text, const tasks::Task& task,
                const std::vector<compile::TensorInfo>& tensors, const compile::Tunables& chosen);
// "NAME=value" items joined by `separator`, for people ("BLOCK=256, VEC=4").
std::string tunables_text(const compile::Tunables& t, const std::string& separator = ", ");

}  // namespace kforge::cli
