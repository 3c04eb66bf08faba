// The loop's budget (issue 37): the run's and each task's limits (RunConfig's budgets; 0 means
// none), what has been spent against them, and why a run or a task stops. Pure logic: no printing,
// no archive. The loop tells it what it spends (evaluations measured or read back, GPU seconds, the
// LLM proposer's figures) and asks it whether a limit is reached; a resumed run starts it with its
// earlier sessions' wall time (the run log's), and its read-back evaluations count as they replay.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kforge::evolve {
struct RunConfig;
}

namespace kforge::evolve::loop {

// Why a run or a task stops. to_string gives the text the summary, progress lines and tests show.
enum class StopReason {
  // The run's (RunSummary::stopped); a run-wide reason is also each unfinished task's.
  Interrupted,        // "interrupted": a stop request; the run pauses
  WaitingForAnswers,  // kWaitingForAnswers: a batch folder has not answered; the run pauses
  Failed,             // "failed": a lane threw (the run's status is failed)
  EvaluationBudget,   // "evaluation budget reached"
  TimeBudget,         // "time budget reached" (wall time, earlier sessions included)
  GpuTimeBudget,      // "GPU time budget reached"
  LlmCallBudget,      // "LLM call budget reached"
  LlmTokenBudget,     // "LLM token budget reached"
  LlmDollarBudget,    // "LLM dollar budget reached"
  EveryTaskEnded,     // "every task ended": no run-wide reason stopped it
  // A task's (TaskStatus::stopped).
  TaskEvaluationBudget,        // "task evaluation budget reached"
  TaskGpuTimeBudget,           // "task GPU time budget reached"
  TaskLlmTokenBudget,          // "task LLM token budget reached"
  TaskLlmDollarBudget,         // "task LLM dollar budget reached"
  TargetSpeedup,               // "target speedup reached"
  NoCorrectStartingKernel,     // "no correct starting kernel"
  NoCorrectKernelToStartFrom,  // "no correct kernel to start from"
  TuneSpacesExhausted,         // "tune spaces exhausted"
  GenerationsDone,             // "generations done"
};

std::string to_string(StopReason reason);
// The reason a text spells (a run read back); none for any other text.
std::optional<StopReason> stop_reason_from_string(std::string_view text);
// Whether a run stopped for this reason pauses (recorded as interrupted; --resume goes on).
bool pauses(StopReason reason);

// The budgets (0: no limit).
// What a resumed run's earlier sessions spent, as they recorded it when they stopped.
struct SpentBefore {
  double wall_s = 0;
  int64_t evaluations = 0;
};

struct Limits {
  int64_t evaluations = 0, task_evaluations = 0;
  double minutes = 0, gpu_minutes = 0, task_gpu_minutes = 0;
  int64_t llm_calls = 0, llm_tokens = 0, task_llm_tokens = 0;
  double llm_dollars = 0, task_llm_dollars = 0;

  static Limits of(const RunConfig& config);
};

// The LLM proposer's spent figures as the budgets count them (tokens: in plus out).
struct LlmUsage {
  int64_t calls = 0, tokens = 0;
  double dollars = 0;
};

// A task's spending in this run.
struct TaskUsage {
  int64_t evaluations = 0;  // screens and judgments, measured or read back
  double gpu_s = 0;         // measuring it in this process
  LlmUsage llm;
};

// The evaluation budgets as measurements start, on the GPU lanes' threads: a measurement queued
// before a budget ran out does not start after it did, so the run and each task stop at their
// evaluation budgets exactly (the time budgets are reached while measurements run: those running
// then finish and count). Thread-safe.
//
// A resumed run starts with what its earlier sessions spent (`spent_before`, as recorded when they
// stopped): its replay reads those evaluations back in whatever order its lanes reach them, and a
// new measurement must not take the budget a read-back that comes later would have taken. So the
// first `spent_before` read-backs are already counted, and only those beyond them count again.
class EvaluationGate {
 public:
  EvaluationGate(int64_t run_limit, int64_t task_limit, size_t tasks, int64_t spent_before = 0);
  bool take(size_t task);   // one measurement may start (and is counted); false once one is spent
  void count(size_t task);  // one evaluation read back from the archive
  bool task_spent(size_t task) const;  // whether the task's own budget refuses (not the run's)

 private:
  int64_t run_limit_, task_limit_, spent_before_;
  std::atomic<int64_t> run_{0}, read_back_{0};
  std::unique_ptr<std::atomic<int64_t>[]> tasks_;
};

class Budget {
 public:
  // Seconds on a monotonic clock; the default is std::chrono::steady_clock.
  using Clock = std::function<double()>;

  // `before`: what a resumed run's earlier sessions spent: their wall time, and the evaluations
  // its replay reads back (it may stop before reading them all), which count whatever the replay
  // reaches (see EvaluationGate).
  explicit Budget(Limits limits, SpentBefore before = {}, Clock clock = {});

  // What the loop spends.
  void count_measured(const std::string& task);   // a screen or judgment measured
  void count_read_back(const std::string& task);  // one read back from the archive instead
  void add_gpu_s(const std::string& task, double seconds);
  void set_llm(const LlmUsage& run);  // the proposer's figures so far (they replace the last)
  void set_task_llm(const std::string& task, const LlmUsage& used);

  int64_t measured() const { return measured_; }
  int64_t reused() const { return reused_; }
  // Measured here, and read back here or spent before (a resumed run's), whichever is more.
  int64_t evaluations() const { return measured_ + std::max(reused_, evaluations_before_); }
  double gpu_s() const { return gpu_s_; }
  double wall_s() const;  // earlier sessions' and this one's
  const LlmUsage& llm() const { return llm_; }
  const TaskUsage& task(const std::string& task) const;  // zeros for a task not seen
  const Limits& limits() const { return limits_; }

  // The first run-wide limit reached, in this order: the interrupt, evaluations, wall time, GPU
  // time, LLM calls, LLM tokens, LLM dollars. None while all hold.
  std::optional<StopReason> run_reached(bool interrupted) const;
  // The first of a task's limits reached: evaluations, GPU time, LLM tokens, LLM dollars.
  std::optional<StopReason> task_reached(const std::string& task) const;

 private:
  Limits limits_;
  double wall_before_ = 0, start_ = 0;
  Clock clock_;
  int64_t measured_ = 0, reused_ = 0, evaluations_before_ = 0;
  double gpu_s_ = 0;
  LlmUsage llm_;
  std::map<std::string, TaskUsage> tasks_;
};

}  // namespace kforge::evolve::loop
