// The loop's budget alone (evolve/src/loop/budget.h): each limit reached exactly at its bound, the
// per-task limits, 0 as no limit, the interrupt first, and the stop reasons' spellings.
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>

#include "kforge/evolve/run.h"
#include "loop/budget.h"

namespace kforge::evolve::loop {
namespace {

// A clock the test moves.
struct FakeClock {
  double now = 100;
  Budget::Clock fn() {
    return [this] { return now; };
  }
};

constexpr StopReason kEvery[] = {
    StopReason::Interrupted,
    StopReason::WaitingForAnswers,
    StopReason::Failed,
    StopReason::EvaluationBudget,
    StopReason::TimeBudget,
    StopReason::GpuTimeBudget,
    StopReason::LlmCallBudget,
    StopReason::LlmTokenBudget,
    StopReason::LlmDollarBudget,
    StopReason::EveryTaskEnded,
    StopReason::TaskEvaluationBudget,
    StopReason::TaskGpuTimeBudget,
    StopReason::TaskLlmTokenBudget,
    StopReason::TaskLlmDollarBudget,
    StopReason::TargetSpeedup,
    StopReason::NoCorrectStartingKernel,
    StopReason::NoCorrectKernelToStartFrom,
    StopReason::TuneSpacesExhausted,
    StopReason::GenerationsDone,
};

TEST(LoopBudget, SpellingsAreTodaysAndRoundTrip) {
  EXPECT_EQ(to_string(StopReason::Interrupted), "interrupted");
  EXPECT_EQ(to_string(StopReason::WaitingForAnswers), kWaitingForAnswers);
  EXPECT_EQ(to_string(StopReason::Failed), "failed");
  EXPECT_EQ(to_string(StopReason::EvaluationBudget), "evaluation budget reached");
  EXPECT_EQ(to_string(StopReason::TimeBudget), "time budget reached");
  EXPECT_EQ(to_string(StopReason::GpuTimeBudget), "GPU time budget reached");
  EXPECT_EQ(to_string(StopReason::LlmCallBudget), "LLM call budget reached");
  EXPECT_EQ(to_string(StopReason::LlmTokenBudget), "LLM token budget reached");
  EXPECT_EQ(to_string(StopReason::LlmDollarBudget), "LLM dollar budget reached");
  EXPECT_EQ(to_string(StopReason::EveryTaskEnded), "every task ended");
  EXPECT_EQ(to_string(StopReason::TaskEvaluationBudget), "task evaluation budget reached");
  EXPECT_EQ(to_string(StopReason::TaskGpuTimeBudget), "task GPU time budget reached");
  EXPECT_EQ(to_string(StopReason::TaskLlmTokenBudget), "task LLM token budget reached");
  EXPECT_EQ(to_string(StopReason::TaskLlmDollarBudget), "task LLM dollar budget reached");
  EXPECT_EQ(to_string(StopReason::TargetSpeedup), "target speedup reached");
  EXPECT_EQ(to_string(StopReason::NoCorrectStartingKernel), "no correct starting kernel");
  EXPECT_EQ(to_string(StopReason::NoCorrectKernelToStartFrom), "no correct kernel to start from");
  EXPECT_EQ(to_string(StopReason::TuneSpacesExhausted), "tune spaces exhausted");
  EXPECT_EQ(to_string(StopReason::GenerationsDone), "generations done");

  std::set<std::string> seen;
  for (StopReason r : kEvery) {
    std::string text = to_string(r);
    EXPECT_TRUE(seen.insert(text).second) << "two reasons spelled " << text;
    EXPECT_EQ(stop_reason_from_string(text), r) << text;
  }
  EXPECT_EQ(stop_reason_from_string(""), std::nullopt);
  EXPECT_EQ(stop_reason_from_string("Interrupted"), std::nullopt);
  EXPECT_EQ(stop_reason_from_string("evaluation budget"), std::nullopt);

  for (StopReason r : kEvery)
    EXPECT_EQ(pauses(r), r == StopReason::Interrupted || r == StopReason::WaitingForAnswers)
        << to_string(r);
}

TEST(LoopBudget, LimitsComeFromTheRunConfig) {
  RunConfig c;
  c.evaluations = 1, c.task_evaluations = 2, c.minutes = 3, c.gpu_minutes = 4;
  c.task_gpu_minutes = 5, c.llm_calls = 6, c.llm_tokens = 7, c.task_llm_tokens = 8;
  c.llm_dollars = 9, c.task_llm_dollars = 10;
  Limits l = Limits::of(c);
  EXPECT_EQ(l.evaluations, 1);
  EXPECT_EQ(l.task_evaluations, 2);
  EXPECT_EQ(l.minutes, 3);
  EXPECT_EQ(l.gpu_minutes, 4);
  EXPECT_EQ(l.task_gpu_minutes, 5);
  EXPECT_EQ(l.llm_calls, 6);
  EXPECT_EQ(l.llm_tokens, 7);
  EXPECT_EQ(l.task_llm_tokens, 8);
  EXPECT_EQ(l.llm_dollars, 9);
  EXPECT_EQ(l.task_llm_dollars, 10);
}

TEST(LoopBudget, ZeroMeansNoLimit) {
  FakeClock clock;
  Budget b(Limits{}, {1e9}, clock.fn());
  for (int k = 0; k < 1000; ++k) b.count_measured("a"), b.count_read_back("a");
  b.add_gpu_s("a", 1e9);
  b.set_llm({1'000'000, 1'000'000'000, 1e6});
  b.set_task_llm("a", {1'000'000, 1'000'000'000, 1e6});
  clock.now += 1e9;
  EXPECT_EQ(b.run_reached(false), std::nullopt);
  EXPECT_EQ(b.task_reached("a"), std::nullopt);
  EXPECT_EQ(b.task_reached("never seen"), std::nullopt);
}

TEST(LoopBudget, EvaluationsMeasuredAndReadBackCountAtTheBound) {
  Limits l;
  l.evaluations = 3;
  Budget b(l);
  b.count_measured("a");
  b.count_read_back("b");
  EXPECT_EQ(b.run_reached(false), std::nullopt);
  b.count_measured("b");
  EXPECT_EQ(b.run_reached(false), StopReason::EvaluationBudget);
  EXPECT_EQ(b.measured(), 2);
  EXPECT_EQ(b.reused(), 1);
  EXPECT_EQ(b.evaluations(), 3);
  EXPECT_EQ(b.task("a").evaluations, 1);
  EXPECT_EQ(b.task("b").evaluations, 2);
}

TEST(LoopBudget, WallTimeCountsEarlierSessions) {
  Limits l;
  l.minutes = 2;  // 120 s
  FakeClock clock;
  Budget b(l, {100}, clock.fn());  // 100 s in earlier sessions
  EXPECT_DOUBLE_EQ(b.wall_s(), 100);
  clock.now += 19.5;
  EXPECT_EQ(b.run_reached(false), std::nullopt);
  clock.now += 0.5;
  EXPECT_DOUBLE_EQ(b.wall_s(), 120);
  EXPECT_EQ(b.run_reached(false), StopReason::TimeBudget);

  Budget resumed_past_it(l, {120}, clock.fn());
  EXPECT_EQ(resumed_past_it.run_reached(false), StopReason::TimeBudget);
  Budget fresh(l, {}, clock.fn());
  EXPECT_EQ(fresh.run_reached(false), std::nullopt);
}

TEST(LoopBudget, GpuTimeAtTheBound) {
  Limits l;
  l.gpu_minutes = 1;
  Budget b(l);
  b.add_gpu_s("a", 30);
  b.add_gpu_s("b", 29.75);
  EXPECT_EQ(b.run_reached(false), std::nullopt);
  b.add_gpu_s("b", 0.25);
  EXPECT_EQ(b.run_reached(false), StopReason::GpuTimeBudget);
  EXPECT_DOUBLE_EQ(b.gpu_s(), 60);
  EXPECT_DOUBLE_EQ(b.task("b").gpu_s, 30);
}

TEST(LoopBudget, LlmCallsTokensDollarsAtTheBound) {
  Limits calls;
  calls.llm_calls = 4;
  Budget a(calls);
  a.set_llm({3, 0, 0});
  EXPECT_EQ(a.run_reached(false), std::nullopt);
  a.set_llm({4, 0, 0});
  EXPECT_EQ(a.run_reached(false), StopReason::LlmCallBudget);

  Limits tokens;
  tokens.llm_tokens = 1000;
  Budget t(tokens);
  t.set_llm({9, 999, 5});
  EXPECT_EQ(t.run_reached(false), std::nullopt);
  t.set_llm({9, 1000, 5});
  EXPECT_EQ(t.run_reached(false), StopReason::LlmTokenBudget);

  Limits dollars;
  dollars.llm_dollars = 0.5;
  Budget d(dollars);
  d.set_llm({9, 999, 0.25});
  EXPECT_EQ(d.run_reached(false), std::nullopt);
  d.set_llm({9, 999, 0.5});
  EXPECT_EQ(d.run_reached(false), StopReason::LlmDollarBudget);
  EXPECT_EQ(d.llm().calls, 9);
}

TEST(LoopBudget, TheInterruptWinsThenTheOrderIsFixed) {
  Limits l;
  l.evaluations = 1, l.minutes = 1, l.gpu_minutes = 1, l.llm_calls = 1, l.llm_tokens = 1;
  l.llm_dollars = 1;
  FakeClock clock;
  Budget b(l, {}, clock.fn());
  EXPECT_EQ(b.run_reached(true), StopReason::Interrupted);
  EXPECT_EQ(b.run_reached(false), std::nullopt);
  b.set_llm({1, 1, 1});
  EXPECT_EQ(b.run_reached(false), StopReason::LlmCallBudget);
  b.add_gpu_s("a", 60);
  EXPECT_EQ(b.run_reached(false), StopReason::GpuTimeBudget);
  clock.now += 60;
  EXPECT_EQ(b.run_reached(false), StopReason::TimeBudget);
  b.count_measured("a");
  EXPECT_EQ(b.run_reached(false), StopReason::EvaluationBudget);
  EXPECT_EQ(b.run_reached(true), StopReason::Interrupted);
}

TEST(LoopBudget, TaskLimitsAtTheirBoundsAndPerTask) {
  Limits l;
  l.task_evaluations = 2;
  Budget e(l);
  e.count_measured("a");
  e.count_read_back("b");
  EXPECT_EQ(e.task_reached("a"), std::nullopt);
  e.count_read_back("a");
  EXPECT_EQ(e.task_reached("a"), StopReason::TaskEvaluationBudget);
  EXPECT_EQ(e.task_reached("b"), std::nullopt);
  EXPECT_EQ(e.run_reached(false), std::nullopt) << "a task's limit does not stop the run";

  Limits g;
  g.task_gpu_minutes = 0.5;
  Budget gpu(g);
  gpu.add_gpu_s("a", 29.5);
  gpu.add_gpu_s("b", 30);
  EXPECT_EQ(gpu.task_reached("a"), std::nullopt);
  EXPECT_EQ(gpu.task_reached("b"), StopReason::TaskGpuTimeBudget);

  Limits t;
  t.task_llm_tokens = 100;
  t.task_llm_dollars = 2;
  Budget llm(t);
  llm.set_llm({50, 10'000, 100});  // the run's figures do not count against a task
  llm.set_task_llm("a", {3, 99, 1.5});
  EXPECT_EQ(llm.task_reached("a"), std::nullopt);
  llm.set_task_llm("a", {3, 100, 1.5});
  EXPECT_EQ(llm.task_reached("a"), StopReason::TaskLlmTokenBudget);
  llm.set_task_llm("b", {3, 99, 2});
  EXPECT_EQ(llm.task_reached("b"), StopReason::TaskLlmDollarBudget);
  EXPECT_EQ(llm.task_reached("c"), std::nullopt);
  EXPECT_EQ(llm.run_reached(false), std::nullopt);
}

TEST(LoopBudget, ATasksLimitsInOrder) {
  Limits l;
  l.task_evaluations = 1, l.task_gpu_minutes = 1, l.task_llm_tokens = 1, l.task_llm_dollars = 1;
  Budget b(l);
  b.set_task_llm("a", {1, 1, 1});
  EXPECT_EQ(b.task_reached("a"), StopReason::TaskLlmTokenBudget);
  b.add_gpu_s("a", 60);
  EXPECT_EQ(b.task_reached("a"), StopReason::TaskGpuTimeBudget);
  b.count_measured("a");
  EXPECT_EQ(b.task_reached("a"), StopReason::TaskEvaluationBudget);
}

}  // namespace
}  // namespace kforge::evolve::loop
