#include "budget.h"

#include <chrono>
#include <utility>

#include "kforge/evolve/run.h"

namespace kforge::evolve::loop {
namespace {

struct Spelling {
  StopReason reason;
  std::string_view text;
};
constexpr Spelling kSpellings[] = {
    {StopReason::Interrupted, "interrupted"},
    {StopReason::WaitingForAnswers, kWaitingForAnswers},
    {StopReason::Failed, "failed"},
    {StopReason::EvaluationBudget, "evaluation budget reached"},
    {StopReason::TimeBudget, "time budget reached"},
    {StopReason::GpuTimeBudget, "GPU time budget reached"},
    {StopReason::LlmCallBudget, "LLM call budget reached"},
    {StopReason::LlmTokenBudget, "LLM token budget reached"},
    {StopReason::LlmDollarBudget, "LLM dollar budget reached"},
    {StopReason::EveryTaskEnded, "every task ended"},
    {StopReason::TaskEvaluationBudget, "task evaluation budget reached"},
    {StopReason::TaskGpuTimeBudget, "task GPU time budget reached"},
    {StopReason::TaskLlmTokenBudget, "task LLM token budget reached"},
    {StopReason::TaskLlmDollarBudget, "task LLM dollar budget reached"},
    {StopReason::TargetSpeedup, "target speedup reached"},
    {StopReason::NoCorrectStartingKernel, "no correct starting kernel"},
    {StopReason::NoCorrectKernelToStartFrom, "no correct kernel to start from"},
    {StopReason::TuneSpacesExhausted, "tune spaces exhausted"},
    {StopReason::GenerationsDone, "generations done"},
};

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string to_string(StopReason reason) {
  for (const Spelling& s : kSpellings)
    if (s.reason == reason) return std::string(s.text);
  return "unknown";  // not reached: every reason has a spelling (the tests check)
}

std::optional<StopReason> stop_reason_from_string(std::string_view text) {
  for (const Spelling& s : kSpellings)
    if (s.text == text) return s.reason;
  return std::nullopt;
}

bool pauses(StopReason reason) {
  return reason == StopReason::Interrupted || reason == StopReason::WaitingForAnswers;
}

Limits Limits::of(const RunConfig& c) {
  Limits l;
  l.evaluations = c.evaluations;
  l.task_evaluations = c.task_evaluations;
  l.minutes = c.minutes;
  l.gpu_minutes = c.gpu_minutes;
  l.task_gpu_minutes = c.task_gpu_minutes;
  l.llm_calls = c.llm_calls;
  l.llm_tokens = c.llm_tokens;
  l.task_llm_tokens = c.task_llm_tokens;
  l.llm_dollars = c.llm_dollars;
  l.task_llm_dollars = c.task_llm_dollars;
  return l;
}

Budget::Budget(Limits limits, SpentBefore before, Clock clock)
    : limits_(limits),
      wall_before_(before.wall_s),
      clock_(clock ? std::move(clock) : Clock(steady_seconds)),
      evaluations_before_(before.evaluations) {
  start_ = clock_();
}

void Budget::count_measured(const std::string& task) {
  ++measured_, ++tasks_[task].evaluations;
}
void Budget::count_read_back(const std::string& task) {
  ++reused_, ++tasks_[task].evaluations;
}
void Budget::add_gpu_s(const std::string& task, double seconds) {
  gpu_s_ += seconds, tasks_[task].gpu_s += seconds;
}
void Budget::set_llm(const LlmUsage& run) {
  llm_ = run;
}
void Budget::set_task_llm(const std::string& task, const LlmUsage& used) {
  tasks_[task].llm = used;
}

double Budget::wall_s() const {
  return wall_before_ + (clock_() - start_);
}

const TaskUsage& Budget::task(const std::string& task) const {
  static const TaskUsage kNone;
  auto it = tasks_.find(task);
  return it == tasks_.end() ? kNone : it->second;
}

std::optional<StopReason> Budget::run_reached(bool interrupted) const {
  const Limits& l = limits_;
  if (interrupted) return StopReason::Interrupted;
  if (l.evaluations > 0 && evaluations() >= l.evaluations) return StopReason::EvaluationBudget;
  if (l.minutes > 0 && wall_s() >= 60 * l.minutes) return StopReason::TimeBudget;
  if (l.gpu_minutes > 0 && gpu_s_ >= 60 * l.gpu_minutes) return StopReason::GpuTimeBudget;
  if (l.llm_calls > 0 && llm_.calls >= l.llm_calls) return StopReason::LlmCallBudget;
  if (l.llm_tokens > 0 && llm_.tokens >= l.llm_tokens) return StopReason::LlmTokenBudget;
  if (l.llm_dollars > 0 && llm_.dollars >= l.llm_dollars) return StopReason::LlmDollarBudget;
  return std::nullopt;
}

std::optional<StopReason> Budget::task_reached(const std::string& id) const {
  const Limits& l = limits_;
  const TaskUsage& t = task(id);
  if (l.task_evaluations > 0 && t.evaluations >= l.task_evaluations)
    return StopReason::TaskEvaluationBudget;
  if (l.task_gpu_minutes > 0 && t.gpu_s >= 60 * l.task_gpu_minutes)
    return StopReason::TaskGpuTimeBudget;
  if (l.task_llm_tokens > 0 && t.llm.tokens >= l.task_llm_tokens)
    return StopReason::TaskLlmTokenBudget;
  if (l.task_llm_dollars > 0 && t.llm.dollars >= l.task_llm_dollars)
    return StopReason::TaskLlmDollarBudget;
  return std::nullopt;
}

EvaluationGate::EvaluationGate(int64_t run_limit, int64_t task_limit, size_t tasks,
                               int64_t spent_before)
    : run_limit_(run_limit),
      task_limit_(task_limit),
      spent_before_(spent_before),
      run_(spent_before),
      tasks_(std::make_unique<std::atomic<int64_t>[]>(tasks)) {}

bool EvaluationGate::take(size_t task) {
  if (run_limit_ > 0 && run_.fetch_add(1) >= run_limit_) {
    run_.fetch_sub(1);
    return false;
  }
  if (task_limit_ > 0 && tasks_[task].fetch_add(1) >= task_limit_) {
    tasks_[task].fetch_sub(1);
    if (run_limit_ > 0) run_.fetch_sub(1);
    return false;
  }
  return true;
}

bool EvaluationGate::task_spent(size_t task) const {
  return task_limit_ > 0 && tasks_[task].load() >= task_limit_;
}

void EvaluationGate::count(size_t task) {
  if (read_back_.fetch_add(1) >= spent_before_) run_.fetch_add(1);
  tasks_[task].fetch_add(1);
}

}  // namespace kforge::evolve::loop
