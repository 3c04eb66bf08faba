// A candidate checked end to end without a GPU: answer → plan → compile → signatures → limits on
// every dims configuration. Every failure stops at its stage with errors written for the LLM.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/identity.h"
#include "kforge/compile/compiler.h"
#include "kforge/compile/plan.h"
#include "kforge/compile/signature.h"
#include "kforge/tasks/reference.h"

namespace kforge::compile {

enum class Stage { Answer, Plan, Compile, Signature, Limits, Passed };
std::string_view stage_name(Stage s);

struct KernelReport {
  std::string name;       // as the plan names it
  std::string lowered;    // mangled (or the plain extern "C" name)
  std::string signature;  // demangled; empty for extern "C"
  KernelResources resources;
  std::vector<ParamType> params;  // from the signature, or sizes only from PTX (extern "C")
};

struct CandidateReport {
  Stage stage = Stage::Answer;  // the stage reached: Passed when everything holds
  std::vector<std::string> errors;
  Tunables tunables;
  std::string identity;
  Module module;
  std::vector<KernelReport> kernels;
  std::vector<std::pair<tasks::Dims, ConcretePlan>> configurations;
  bool ok() const { return stage == Stage::Passed; }
};

// The most bytes a module's __device__ variables may take (PTX `.global` data); larger scratch
// memory is a plan workspace.
inline constexpr uint64_t kMaxModuleGlobalBytes = uint64_t{256} << 20;

// The task's tensors as plans name them: inputs, then outputs (tasks::describe_outputs).
std::vector<TensorInfo> task_tensors(const tasks::Task& task, const tasks::Reference& ref);
std::vector<TensorInfo> task_tensors(const tasks::Task& task,
                                     const std::vector<tasks::OutputInfo>& outputs);

// XXH3-128 of length-prefixed source, canonical plan JSON and sorted NAME=value tunables (in
// common/, where the archive can recompute it for what it imports).
using kforge::candidate_identity;

// `tunables`: values for some or all of the plan's tunables; the others (all of them, by default)
// come from the first point of tune_space that agrees with them (choose_tunables).
CandidateReport check_candidate(const tasks::Task& task, const std::vector<TensorInfo>& tensors,
                                const std::string& source, const std::string& plan_text,
                                const std::optional<Tunables>& tunables, const DeviceFacts& facts,
                                Compiler& compiler);

// Rewrites NVRTC's "candidate.cu(12): error: ..." to a reader's file and line offset.
std::string relabel_log(const std::string& log, const std::string& file, int first_line);

}  // namespace kforge::compile
