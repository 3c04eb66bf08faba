// Private to verify/src: the parts of the judge (judge.h) and what they share. judge.cpp
// orchestrates them: set-up (judge_setup.cpp: buffers, launches, one run's preparation and
// check), correctness (judge_correctness.cpp), timing and baselines (judge_timing.cpp), the
// sanitizer runs (judge_sanitizer.cpp) and admission (judge_admission.cpp).
#pragma once

#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kforge/compile/candidate.h"
#include "kforge/tasks/reference.h"
#include "kforge/tasks/reference_cache.h"
#include "kforge/tasks/task.h"
#include "kforge/verify/clocks.h"
#include "kforge/verify/compare.h"
#include "kforge/verify/judge.h"
#include "kforge/verify/memory.h"
#include "kforge/verify/outcome.h"
#include "kforge/verify/runner_client.h"
#include "kforge/verify/shared_buffer.h"
#include "kforge/verify/timing.h"
#include "kforge/verify/timing_gate.h"

namespace kforge::verify {

using Clock = std::chrono::steady_clock;

namespace parts {
// A torch.compile package of a task's reference (one compiled kind), loaded and checked against the
// reference (as a candidate is), or why there is none.
struct CompiledBaseline {
  std::shared_ptr<CompiledReference> reference;
  std::string absent;
  double build_s = 0;
};
// A task's packages at some input shapes, by compiled kind (compiled_kinds()).
using CompiledBaselines = std::map<BaselineKind, CompiledBaseline>;
}  // namespace parts

struct Judge::Session {
  std::unique_ptr<TimingGate> gate_;
  struct Timed {
    Baselines baselines;
    Clock::time_point at;
  };
  std::map<std::string, Timed> baselines;  // by task version, dims and math mode
  // The references this judge runs and times: its own cache, never the process's
  // (tasks/reference_cache.h); unbounded, so a reference lives as long as the session.
  tasks::ReferenceCache references;
  std::map<std::string, parts::CompiledBaselines> compiled;  // by task version and input shapes

  TimingGate& gate(int device) {
    if (!gate_) gate_ = std::make_unique<TimingGate>(device);
    return *gate_;
  }
  // A task's reference, compiled once per judge session (the dims do not change the code).
  const tasks::Reference& reference(const tasks::Task& task) { return *references.reference(task); }
};

namespace parts {

// ---- Shared state ----------------------------------------------------------------------------

// Everything one configuration needs: its buffers (the plan's tensors, in plan order), the
// request the runner gets, and the reference's output shapes.
struct Config {
  tasks::Dims dims;
  bool timed = false;
  std::vector<std::unique_ptr<SharedBuffer>> buffers;
  size_t inputs = 0, outputs = 0;
  RunRequest request;
  std::vector<std::string> names;
  // by buffer: large buffers' random finite poison (prepare_run)
  std::map<size_t, torch::Tensor> finite_poison;
  std::optional<PoolPlan> memory;  // the timed dims' memory plan (prepare_config's size_pool)
};

inline constexpr int64_t kCachedPoisonElements = int64_t{1} << 20;

// Where a verdict was reached: dims, seed, distribution and which of the two runs.
struct Place {
  const Config* config = nullptr;
  uint64_t seed = 0;
  int variant = 0;
  int run = 0;
  nlohmann::json to_json() const {
    return {{"dims", config->dims},
            {"timed", config->timed},
            {"seed", seed},
            {"variant", variant},
            {"run", run}};
  }
  std::string words() const {
    return "at dims " + tasks::format_dims(config->dims) + ", seed " + std::to_string(seed) +
           (variant ? " (second distribution)" : "") + ", run " + std::to_string(run);
  }
};

// A timing input set and what its outputs must be: eager's, within the correctness threshold
// plus eager's own error (so a candidate that passed correctness is never rejected here, and a
// kernel that behaves differently while timed is caught).
struct PoolSet {
  std::vector<torch::Tensor> inputs, eager;
  std::vector<double> allowed;  // max |c - eager| per output; 0: bitwise equal (integers)
};

// One candidate's verification: what every part reads (the candidate, its task and reference,
// the seed, the module) and the evidence every verdict carries, which the parts add to as they go.
struct Verification {
  // Draws the seed (options.seed, else a fresh one) and starts the evidence.
  Verification(const VerifyOptions& options, RunnerClient& runner, Judge::Session& session,
               const tasks::Task& task, const compile::CandidateReport& report);

  const VerifyOptions& options;
  RunnerClient& runner;
  Judge::Session& session;
  const tasks::Task& task;
  const compile::CandidateReport& report;
  const tasks::Reference& reference;
  uint64_t seed = 1;
  ModuleImage image;
  std::chrono::milliseconds watchdog{2000};  // set by the orchestration after the eager probe
  // Timing input sets kept: the timed dims' memory plan (PoolPlan::sets), 0 before it is made
  // (options.timing.pool then).
  int pool_sets = 0;
  // The float64 reference's batch slice that fitted (reference64), for the next call on inputs
  // with the same batch: {batch indices, slice length}; {0, 0} until one was needed.
  std::pair<int64_t, int64_t> reference64_slice{0, 0};
  nlohmann::json evidence;
};

// ---- Helpers (judge_setup.cpp) ---------------------------------------------------------------

void synchronize();
double ms_since(Clock::time_point t);
// Where the judge's time goes, in the evidence (issue 6's latency budget).
void note_phase(nlohmann::json& evidence, const char* name, Clock::time_point& since);
// The correctness phase's time by step (draw, runs, references, compare), summed over seeds; a
// step's time includes waiting for the GPU work queued before it.
void note_step(nlohmann::json& evidence, const char* name, Clock::time_point& since);

// Eager: TorchScript's graph optimizer off; scripted: on (its fuser, after profiling runs).
// TF32 off for cuBLAS and cuDNN unless the task allows it.
std::vector<torch::Tensor> run_reference(const tasks::Task& task, const tasks::Reference& ref,
                                         const std::vector<torch::Tensor>& inputs, bool scripted);
std::vector<torch::Tensor> draw_inputs(const Verification& j, const tasks::Dims& dims,
                                       uint64_t seed, int variant);
// The task's reference, eager (or scripted).
std::vector<torch::Tensor> eager(const Verification& j, const std::vector<torch::Tensor>& inputs,
                                 bool scripted = false);
// The reference in float64: floating inputs widened (exactly), integer inputs as they are. Where
// that runs out of memory and the task has a batch_dim, a slice of it at a time
// (run_in_batch_slices; the slice's length in evidence "reference64_slice").
std::vector<torch::Tensor> reference64(Verification& j, const std::vector<torch::Tensor>& inputs);
// tol of the acceptance formula for output `o`: the task's own, else the dtype's default.
double tolerance_for(const tasks::Task& task, size_t o, tasks::Dtype dt);
// Eager's time on the timed dims (one warm-up, one timed call): the watchdog's base.
double time_eager(const Verification& j);

// ---- Buffer and launch set-up (judge_setup.cpp) ----------------------------------------------

// The buffers and the runner's request for configuration `index` (`dims`, `plan`). With
// `size_pool` (the timed dims, for correctness and timing), plan_memory first: the plan goes in
// Config::memory, or MemoryShortfall is thrown before any buffer is allocated.
Config prepare_config(const Verification& j, const tasks::Dims& dims,
                      const compile::ConcretePlan& plan, size_t index, bool size_pool = false);
// How many timing input sets fit (memory.h) at `dims` with these outputs and `plan`'s workspaces:
// the device's free memory (after LibTorch's cache is given back, where the plan needs it) within
// options.memory_limit / $KFORGE_GPU_MEMORY_LIMIT. Throws MemoryShortfall when not even the
// minimum fits.
PoolPlan plan_memory(const Verification& j, const tasks::Dims& dims,
                     const std::vector<std::vector<int64_t>>& out_shapes,
                     const std::vector<torch::ScalarType>& out_types,
                     const compile::ConcretePlan& plan);
std::vector<BufferSpec> specs(const Config& c, bool inputs_read_only);
std::vector<int> fds(const Config& c);
// Outputs and workspaces poisoned, canaries laid, inputs restored from `inputs`. Returns the
// outputs' random finite poison (empty for NaN poison: untouched elements are found as NaN).
std::vector<torch::Tensor> prepare_run(Config& c, const std::vector<torch::Tensor>& inputs,
                                       Poison kind, uint64_t seed);
// After a run that finished: canaries intact and inputs unchanged, else the verdict.
std::optional<Verdict> after_run(const nlohmann::json& evidence, Config& c,
                                 const std::vector<torch::Tensor>& inputs, uint64_t seed,
                                 const Place& at);

// ---- Correctness (judge_correctness.cpp) -----------------------------------------------------

// What the correctness runs found when every configuration passed.
struct Correctness {
  nlohmann::json configs = nlohmann::json::array();  // per configuration: dims, timed, seeds
  nlohmann::json worst;             // the output closest to its threshold (null: none compared)
  bool bitwise_unstable = false;    // some output differed bitwise between two runs
  std::optional<Config> timed;      // the timed dims' configuration, for timing
  std::vector<PoolSet> timed_sets;  // its checked input sets (with options.time): the timing pool
};
// docs/design.md, Verification 2: every configuration of the report, its seeds, two runs each.
// Adds the correctness steps' times (and notes) to j.evidence.
std::variant<Correctness, Verdict> check_correctness(Verification& j);

// does_not_fit: `plan` (in the evidence as "memory") says what the timed dims need and what is
// free; or, with `error` (an allocation that failed although planned), that error and the memory
// free now.
Verdict does_not_fit(const nlohmann::json& evidence, const PoolPlan& plan);
Verdict out_of_memory(const nlohmann::json& evidence, const std::string& error, int device);

// A verdict reached at `at`: the evidence so far, where and `detail`.
Verdict fail(const nlohmann::json& evidence, Outcome o, const std::string& summary,
             nlohmann::json detail, const Place& at);
// A run that did not finish: launch refused, fault, hang, crash. Faults are diagnosed by
// running again with inputs writable (does it change them?) under compute-sanitizer memcheck
// (does it touch memory outside its buffers?).
Verdict runner_failure(const Verification& j, const RunResult& r, Config* c,
                       const std::vector<torch::Tensor>& inputs = {}, const Place& at = {});

// ---- Timing and baselines (judge_timing.cpp) -------------------------------------------------

// docs/design.md, Verification 3-5: the candidate on the timed dims over a pool of input sets
// (`pool`, topped up to options.timing.pool), then every kind of baseline the same way in this
// session, then the roofline floor.
std::variant<TimingResult, Verdict> time_candidate(Verification& j, Config& c,
                                                   std::vector<PoolSet> pool);

// ---- Sanitizer runs (judge_sanitizer.cpp) ----------------------------------------------------

struct SanitizedRun {
  RunResult result;
  std::string log;
  double ms = 0;
};
// One run of `c` (its inputs restored from `inputs`, NaN poison) in a runner of its own under
// compute-sanitizer's `tool` (no wrapper when `tool_path` is empty): what admission's sanitizer
// passes and a fault's diagnosis both need. The runner then exits, giving the tool a minute to
// write its summary; the log is read by path (the tool rewrites the file).
SanitizedRun run_sanitized(const Verification& j, const std::string& tool_path, const char* tool,
                           Config& c, bool inputs_read_only,
                           const std::vector<torch::Tensor>& inputs, uint64_t seed,
                           std::chrono::milliseconds limit);
// The same with any tool: `wrapper(log_path)` is the command line the runner runs under (empty:
// none), the tool writing its log to log_path.
SanitizedRun run_wrapped(const Verification& j,
                         const std::function<std::vector<std::string>(const std::string&)>& wrapper,
                         Config& c, bool inputs_read_only, const std::vector<torch::Tensor>& inputs,
                         uint64_t seed, std::chrono::milliseconds limit);
// Admission's sanitizer passes (docs/design.md, Verification 6): memcheck, initcheck and
// racecheck each run the plan once, in a runner of their own, on the configuration with the
// fewest input bytes. nullopt: every tool clean (or compute-sanitizer absent, said in `record`).
std::optional<Verdict> sanitize(const Verification& j, nlohmann::json& record);

// ---- Orchestration (judge.cpp) ---------------------------------------------------------------

// Steps 2-5 on one candidate: module, eager probe and watchdog, correctness, then timing.
Verdict run_verification(Verification& j);

}  // namespace parts
}  // namespace kforge::verify
