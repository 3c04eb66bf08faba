// The judge (docs/design.md, Verification): owns the buffers, draws inputs, computes references
// (fp64 and eager), compares, and drives one runner process that runs the candidate. It never runs
// candidate code itself. Correctness (step 2) with the fault outcomes, then timing, baselines
// and the roofline floor (steps 3-5) for correct candidates.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kforge/compile/candidate.h"
#include "kforge/tasks/task.h"
#include "kforge/verify/compiled_reference.h"
#include "kforge/verify/outcome.h"
#include "kforge/verify/runner_client.h"
#include "kforge/verify/timing.h"

namespace kforge::verify {

struct VerifyOptions {
  int device = 0;
  std::optional<uint64_t> seed;  // default: a fresh one per candidate, recorded in the evidence
  int timed_seeds = 3;  // seeds on the timed dims (the last one with the second distribution)
  int check_seeds = 2;  // per [check] configuration (one per distribution)
  RunnerOptions runner;
  std::optional<std::chrono::milliseconds>
      watchdog;           // default: clamp(50 x eager x launches, 2 s, 60 s)
  bool sanitizer = true;  // refine runtime errors with compute-sanitizer memcheck where present
  std::string sanitizer_path;  // default: found on PATH, $CUDA_HOME/bin, /usr/local/cuda/bin
  bool time = true;            // time a correct candidate, its baselines and roofline
  bool baselines = true;       // with time: every kind of baseline too (speedups need them)
  CompiledOptions compiled;    // torch.compile's baselines (compiled_reference.h)
  TimingOptions timing;
  // Baselines of a (task version, dims, math mode) timed within this long by the same judge are
  // reused (docs/design.md, Verification 4); 0 times them for every candidate.
  std::chrono::seconds baseline_reuse{600};
  // At most this many bytes of the GPU's free memory are planned for one verification (memory.h:
  // its buffers, timing input sets and working memory); fewer timing sets are kept where the
  // options' pool does not fit, and a task whose minimum does not fit is does_not_fit. Default:
  // $KFORGE_GPU_MEMORY_LIMIT (e.g. 20GiB), else the free memory alone. A cap on the plan, not on
  // LibTorch's allocations: it makes a large GPU judge as a smaller one would.
  std::optional<uint64_t> memory_limit;
};

// Watchdog default (docs/design.md, Defaults).
std::chrono::milliseconds default_watchdog(double eager_ms, size_t launches);
// A CUDA tool's path (`hint`, else on PATH, $CUDA_HOME/bin, /usr/local/cuda/bin), or "" when it
// is not installed.
std::string find_cuda_tool(const std::string& tool, const std::string& hint = "");
// compute-sanitizer's path, or "" when it is not installed.
std::string find_compute_sanitizer(const std::string& hint = "");

// Nsight Compute's view of a kernel (docs/evolve.md, "Profile feedback"): the metrics kforge asks
// `ncu` for, and what it keeps of them from a `--csv` log (one row per launch and metric): per
// launch in order {name, duration_ms, dram_pct, sm_pct, l2_pct, occupancy_pct, registers,
// stalls: [[reason, warps stalled per issued instruction], ...] the three largest}. A log without
// metrics gives {"error": what the log says}.
const std::vector<std::string>& ncu_metrics();
nlohmann::json parse_ncu_log(const std::string& log);
// Reads a memcheck log: out_of_bounds_read / _write when the first invalid access is out of
// bounds within kNearBufferBytes of a buffer; nullopt otherwise (wild pointers, misaligned
// accesses and other faults stay runtime errors).
inline constexpr int64_t kNearBufferBytes = int64_t{8} << 20;
std::optional<Outcome> classify_memcheck_log(const std::string& log);
// The errors a compute-sanitizer log counts (memcheck and initcheck: "ERROR SUMMARY: N errors";
// racecheck: "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)", warnings not
// counted); nullopt when the log has no summary.
std::optional<int64_t> sanitizer_errors(const std::string& log);

struct Baselines {
  std::vector<BaselineTiming> list;  // every kind, in baseline_kinds() order (TimingResult's)
  std::string math_mode;             // "ieee" (TF32 off) or "tf32"
  nlohmann::json clocks =
      nlohmann::json::object();  // SM clock while timing (clocks.h), measure_baselines only
  std::string gpu_uuid;  // the GPU that timed them, where there are several (evolve::Gpu::devices)
};
// The task's reference at its timed dims as every kind of baseline (a compiled kind absent where
// its package cannot be had, with the reason), timed the way candidates are (the same pool of
// input sets, L2 flush and events). Needs a GPU.
Baselines measure_baselines(const tasks::Task& task, const VerifyOptions& options);

// The verdict on a candidate stopped before the GPU (answer, plan, compile, signature, limits).
Verdict verdict_from_report(const compile::CandidateReport& report);

class Judge {
 public:
  // Needs a GPU and a LibTorch with CUDA (throws kforge::Error naming what is missing).
  explicit Judge(VerifyOptions options = {});
  ~Judge();

  // Correctness verdict. A report that is not ok() gives verdict_from_report(report).
  Verdict verify(const tasks::Task& task, const compile::CandidateReport& report);

  // A quick look at one point of a tune space (kforge corpus --tune-points): correctness on the
  // timed dims with one seed, then timing over a pool of two sets with a shorter minimum
  // (screen_timing), no baselines. `correct` here is not a verdict to store: the chosen point gets
  // verify().
  Verdict screen(const tasks::Task& task, const compile::CandidateReport& report);
  static TimingOptions screen_timing();

  // Admission of a winner (docs/design.md, Verification 6), after verify() found it correct:
  // `unseen` is the task with its dims replaced by configurations no candidate saw
  // (draw_unseen_dims) and `report` the candidate checked against it with the same tunables. A
  // fresh runner checks correctness there (no timing); then compute-sanitizer memcheck, initcheck
  // and racecheck, where present, each run the plan once on the smallest of them. `correct` means
  // admitted; evidence "admission" and "sanitizers" say what ran.
  Verdict admit(const tasks::Task& unseen, const compile::CandidateReport& report);

  // Nsight Compute's profile of one run of the plan at the timed dims, in a runner of its own under
  // `ncu_path` (after verify() found the candidate correct): {"tool", "dims", "kernels": [...],
  // "ms"}, or {"error": why} when the tool or the run failed.
  nlohmann::json profile(const tasks::Task& task, const compile::CandidateReport& report,
                         const std::string& ncu_path);

  RunnerClient& runner() { return runner_; }
  const VerifyOptions& options() const { return options_; }

  struct Session;  // internal: the timing gate and the baselines timed so far (judge_parts.h)

 private:
  // Runs `judge`; a CUDA or LibTorch out-of-memory becomes does_not_fit for this candidate, any
  // other exception harness_error (the runner restarts); another CUDA error means the GPU is
  // unusable and throws.
  Verdict guarded(const std::function<Verdict()>& judge);
  // verify() under other options (screen()).
  Verdict verify_with(const VerifyOptions& options, const tasks::Task& task,
                      const compile::CandidateReport& report);

  VerifyOptions options_;
  RunnerClient runner_;
  std::unique_ptr<Session> session_;
};

// The task with its dims replaced by `configurations` configurations no candidate saw (drawn,
// seeded, from tasks::draw_unseen_dims) and that `usable` accepts (default: all; e.g. those where
// a plan's constraints hold at the candidate's tunables): the first timed, the rest checked;
// nullopt when none is left.
std::optional<tasks::Task> unseen_task(const tasks::Task& task, uint64_t seed,
                                       int configurations = 3,
                                       const std::function<bool(const tasks::Dims&)>& usable = {});

// Admission end to end: draws `configurations` unseen dims from the task (seeded), checks the
// candidate there with the tunables it was judged with (the compile cache answers), and asks the
// judge to admit it. No unseen dims possible: plan_error-free `correct` is not claimed; the
// verdict is harness_error saying so.
Verdict admit_candidate(Judge& judge, const tasks::Task& task, const std::string& source,
                        const std::string& plan, const compile::Tunables& tunables,
                        const compile::DeviceFacts& facts, compile::Compiler& compiler,
                        uint64_t seed, int configurations = 3);

}  // namespace kforge::verify
