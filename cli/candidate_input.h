// What `kforge compile` and `kforge verify` share: reading a candidate (a whole LLM answer, or a
// source with a plan), the one task it is for, the device facts and --tune values.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kforge/compile/plan.h"
#include "kforge/evolve/evaluator.h"
#include "kforge/evolve/prompt.h"
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
// "NAME=value" items joined by `separator`, for people ("BLOCK=256, VEC=4").
std::string tunables_text(const compile::Tunables& t, const std::string& separator = ", ");

}  // namespace kforge::cli
