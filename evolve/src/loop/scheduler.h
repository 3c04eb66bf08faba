// The loop's scheduler (issue 37; docs/evolve.md, "The steady state"): runs the rounds a policy
// proposes on the lanes (lanes.h) — model requests, compiles, screens — as their parts arrive, and
// takes their results in the order they were proposed: a slot is recorded in the archive once
// every slot proposed before it is, and a round is committed (the policy's judgments) once its
// slots are recorded and every round before it is committed. So the run is a function of its seed
// and the model's answers, never of which answer came first. It keeps the budget, screens a
// duplicate child once, and tells the hooks what happens; it never prints.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "budget.h"
#include "kforge/archive/run_log.h"
#include "kforge/evolve/proposer.h"
#include "lanes.h"
#include "plan.h"

namespace kforge::evolve::loop {

class Scheduler : public Slots {
 public:
  // What the loop does at a round's turns (run.cpp).
  class Policy {
   public:
    virtual ~Policy() = default;
    virtual void propose(size_t task, int round) = 0;  // proposes round `round` of the task, or not
    // A round whose slots are recorded: its judgments, then done() (on the loop's thread).
    virtual void commit(Round& round, std::function<void()> done) = 0;
    virtual void committed(const Round& round) = 0;  // after done(): the next rounds
  };

  // `before`: what the run's earlier sessions spent (a resumed run).
  Scheduler(const RunConfig& config, Evaluator& ev, int64_t run, const LoopHooks& hooks,
            LlmProposer* llm, SpentBefore before, std::vector<TaskState>& tasks);

  // Round 0 of every task, then everything that follows, until nothing is left to do or the run
  // stops. Rethrows what a part threw.
  void run(Policy& policy);

  // For the policy and the proposers.
  RoundPtr open(size_t task, int number);  // a round to add slots to
  void submit(const RoundPtr& round);      // proposed: recorded and committed in this order
  void add(Round& round, int island, Proposal p) override;
  void ask(Round& round, int island, std::optional<int> repair_depth, std::vector<First> first,
           std::function<Job()> prompt) override;
  void event(const TaskState& s, LoopEvent e) override;
  void spent_gpu(const TaskState& s, double seconds) override;
  // A measurement of the task (a judgment) on a GPU lane ahead of screens, counted against the
  // evaluation budgets as it starts: `work` returns what to do with its result; `refused` runs
  // instead when a budget ran out first (the task stops).
  void measure(size_t task, std::function<Then()> work, std::function<void()> refused);
  void count_read_back(size_t task);  // an evaluation read back from the archive
  bool stopping();                    // whether the run stops (the first reason stays)
  std::optional<StopReason> task_budget_reached(size_t task);
  bool from_model(const Checked& c) const {
    return llm_ && llm_->proposes_as(c.proposal.lineage.model);
  }
  static void stop_task(TaskState& s, StopReason why);

  std::optional<StopReason> stopped() const { return stopped_; }
  const Budget& budget() const { return budget_; }
  archive::RunLog& log() { return log_; }

 private:
  SlotPtr new_slot(Round& round, int island);
  Priority priority_of(const Slot& slot) const;
  void compile(const SlotPtr& slot, size_t k);
  void answered(const SlotPtr& slot, std::vector<Proposal> got);
  void compiled(const SlotPtr& slot, size_t k);
  void screened(const SlotPtr& slot, size_t k, const std::string& identity);
  void resolved(const SlotPtr& slot);
  void refused(size_t task);
  void advance_records();
  void record(Slot& slot);
  void advance_commits();
  void first_on_gpu(size_t task, First first, Then then);

  const RunConfig& config_;
  Evaluator& ev_;
  archive::RunLog log_;
  int64_t run_;
  const LoopHooks& hooks_;
  LlmProposer* llm_;
  SpentBefore before_;
  Budget budget_;  // the limits and what the run and each task spent against them
  std::vector<TaskState>& tasks_;
  std::optional<StopReason> stopped_;  // why the run stops (none while it goes on)
  Policy* policy_ = nullptr;
  Lanes* lanes_ = nullptr;
  EvaluationGate* gate_ = nullptr;
  std::deque<SlotPtr> slots_;    // proposed, not yet recorded (in the order proposed)
  std::deque<RoundPtr> rounds_;  // proposed, not yet committed (in the order proposed)
  bool committing_ = false;      // the front round's judgments are under way
  bool waiting_ = false;         // a batch folder has not answered a request yet
  std::map<int64_t, std::vector<Then>> firsts_;  // GPU work under way for requests: who waits
  // This run's screens by identity: a duplicate child takes its first's (or waits for it).
  struct Screening {
    bool done = false, skipped = false;
    std::optional<records::Screen> screen;
    std::vector<std::pair<SlotPtr, size_t>> waiting;
  };
  std::map<std::string, Screening> screens_;
};

}  // namespace kforge::evolve::loop
