#include "scheduler.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "kforge/verify/protocol.h"

namespace kforge::evolve::loop {

using nlohmann::json;
using records::Screen;
using Clock = std::chrono::steady_clock;

namespace {
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
}  // namespace

Scheduler::Scheduler(const RunConfig& config, Evaluator& ev, int64_t run, const LoopHooks& hooks,
                     LlmProposer* llm, SpentBefore before, std::vector<TaskState>& tasks)
    : config_(config),
      ev_(ev),
      log_(ev.archive()),
      run_(run),
      hooks_(hooks),
      llm_(llm),
      before_(before),
      budget_(Limits::of(config), before),
      tasks_(tasks) {}

void Scheduler::run(Policy& policy) {
  Gpu* gpu = ev_.gpu();
  Lanes lanes({llm_ ? llm_->concurrency : 1, ev_.compile_workers(), gpu ? gpu->parallel() : 1});
  EvaluationGate gate(config_.evaluations, config_.task_evaluations, tasks_.size(),
                      before_.evaluations);
  policy_ = &policy, lanes_ = &lanes, gate_ = &gate;
  try {
    for (size_t t = 0; t < tasks_.size() && !stopping(); ++t) policy.propose(t, 0);
    lanes.drive([this] { return stopping(); },
                [this] {
                  if (llm_) llm_->cancel();
                });
    // Everything that could go on without the batch folder's answers has: the run pauses.
    if (waiting_ && !stopped_) stopped_ = StopReason::WaitingForAnswers;
  } catch (...) {
    if (!stopped_) stopped_ = StopReason::Failed;
    lanes_ = nullptr, gate_ = nullptr;
    throw;
  }
  lanes_ = nullptr, gate_ = nullptr;
}

// ---- Proposing ----

RoundPtr Scheduler::open(size_t task, int number) {
  auto round = std::make_shared<Round>();
  round->task = task, round->number = number;
  return round;
}

void Scheduler::submit(const RoundPtr& round) {
  round->unrecorded = round->slots.size();
  rounds_.push_back(round);
  if (round->slots.empty()) advance_commits();  // round 0 with nothing to start from
}

SlotPtr Scheduler::new_slot(Round& round, int island) {
  auto slot = std::make_shared<Slot>();
  slot->task = round.task, slot->round = &round;
  slot->generation = round.number, slot->island = island;
  round.slots.push_back(slot);
  slots_.push_back(slot);
  return slot;
}

void Scheduler::add(Round& round, int island, Proposal p) {
  SlotPtr slot = new_slot(round, island);
  slot->children.emplace_back().checked.proposal = std::move(p);
  compile(slot, 0);
}

void Scheduler::ask(Round& round, int island, std::optional<int> repair_depth,
                    std::vector<First> first, std::function<Job()> prompt) {
  SlotPtr slot = new_slot(round, island);
  slot->from_model = true;
  slot->repair_depth = repair_depth;
  auto send = [this, slot, prompt = std::move(prompt)] {
    lanes_->submit(Lane::Model, Priority::Answer, [this, slot, job = prompt()]() -> Then {
      std::vector<Proposal> got = job();
      return [this, slot, got = std::move(got)]() mutable { answered(slot, std::move(got)); };
    });
  };
  if (first.empty()) return send();
  auto left = std::make_shared<size_t>(first.size());
  for (First& f : first)
    first_on_gpu(slot->task, std::move(f), [left, send] {
      if (--*left == 0) send();
    });
}

// A model request's GPU work, once per key at a time, ahead of screens (the model waits on it).
// Not a measurement: it spends GPU time, not evaluations. The run stopping drops it (and the
// request with it, as a request not sent).
void Scheduler::first_on_gpu(size_t task, First first, Then then) {
  auto [waiters, fresh] = firsts_.try_emplace(first.key);
  waiters->second.push_back(std::move(then));
  if (!fresh) return;
  lanes_->submit(Lane::Gpu, Priority::Commit,
                 [this, task, key = first.key, work = std::move(first.work)]() -> Then {
                   auto t0 = Clock::now();
                   Then done = work();
                   double took = seconds_since(t0);
                   return [this, task, key, done = std::move(done), took] {
                     spent_gpu(tasks_[task], took);
                     done();
                     std::vector<Then> waiting = std::move(firsts_[key]);
                     firsts_.erase(key);
                     for (Then& w : waiting) w();
                   };
                 });
}

// ---- Running: compiles and screens as they come ----

Priority Scheduler::priority_of(const Slot& slot) const {
  return slot.from_model || slot.generation == 0 ? Priority::Answer : Priority::Tuner;
}

void Scheduler::compile(const SlotPtr& slot, size_t k) {
  lanes_->submit(Lane::Compile, priority_of(*slot),
                 [this, slot, k, p = slot->children[k].checked.proposal]() -> Then {
                   Checked c = ev_.check(p);
                   return [this, slot, k, c = std::move(c)]() mutable {
                     slot->children[k].checked = std::move(c);
                     compiled(slot, k);
                   };
                 });
}

// A model's answer: each proposal compiled. One that has not come (a batch folder) pauses the run
// once everything else is done, and a request the stop cut short is not recorded (a resumed run
// asks again): either leaves the slot pending, so nothing after it is recorded either.
void Scheduler::answered(const SlotPtr& slot, std::vector<Proposal> got) {
  if (std::any_of(got.begin(), got.end(), [](const Proposal& p) { return p.unanswered; })) {
    if (!stopping()) waiting_ = true;
    return;
  }
  if (got.empty()) return resolved(slot);  // nothing to compile: the request was its last part
  slot->pending += static_cast<int>(got.size()) - 1;
  for (Proposal& p : got) slot->children.emplace_back().checked.proposal = std::move(p);
  for (size_t k = 0; k < slot->children.size(); ++k) compile(slot, k);
}

// A compiled child is screened: a duplicate of one this run screened (the same identity: code,
// plan and tunables) takes its screen, measured once; else read back where this GPU's kind
// screened it before; else measured. One that did not compile is done.
void Scheduler::compiled(const SlotPtr& slot, size_t k) {
  Child& child = slot->children[k];
  TaskState& s = tasks_[slot->task];
  if (!child.checked.report.ok()) return resolved(slot);
  std::string identity = recorded_identity(child.checked);
  if (auto it = screens_.find(identity); it != screens_.end()) {
    LoopEvent e;
    e.kind = LoopEvent::Kind::Duplicate, e.identity = identity;
    event(s, std::move(e));
    if (!it->second.done) {
      it->second.waiting.emplace_back(slot, k);
      return;
    }
    child.screen = it->second.screen, child.skipped = it->second.skipped;
    return resolved(slot);
  }
  Screening& screening = screens_[identity];
  if (std::optional<archive::CandidateId> id = log_.find_candidate(s.task_id, identity)) {
    child.id = id->value;  // recorded before (a resumed run): record() need not look again
    if (std::optional<Screen> known = records::find_screen(log_, id->value, ev_.device_id())) {
      count_read_back(slot->task);
      screening.done = true;
      child.screen = screening.screen = *known;
      return resolved(slot);
    }
  }
  lanes_->submit(Lane::Gpu, priority_of(*slot), [this, slot, k, identity]() -> Then {
    if (!gate_->take(slot->task)) return [this, slot, k, identity] { screened(slot, k, identity); };
    auto t0 = Clock::now();
    verify::Verdict v = ev_.screen(slot->children[k].checked);
    double took = seconds_since(t0);
    return [this, slot, k, identity, v = std::move(v), took] {
      Child& child = slot->children[k];
      TaskState& s = tasks_[slot->task];
      spent_gpu(s, took);
      budget_.count_measured(s.task->id());
      child.screen =
          Screen{v.outcome,
                 v.correct() && v.timing ? std::optional(v.timing->time.median_ms) : std::nullopt,
                 v.summary};
      child.screened_here = true;
      child.gpu_uuid = v.gpu_uuid;
      LoopEvent e;
      e.kind = LoopEvent::Kind::Screen;
      e.generation = slot->generation, e.island = slot->island, e.identity = identity;
      e.tunables = child.checked.report.tunables;
      e.outcome = verify::to_string(child.screen->outcome), e.ms = child.screen->median_ms;
      event(s, std::move(e));
      screened(slot, k, identity);
    };
  });
}

// A screen is known (or was skipped: a budget ran out first): its duplicates waiting take it too.
void Scheduler::screened(const SlotPtr& slot, size_t k, const std::string& identity) {
  Child& child = slot->children[k];
  if (!child.screen) {
    child.skipped = true;
    refused(slot->task);
  }
  Screening& screening = screens_[identity];
  screening.done = true;
  screening.screen = child.screen, screening.skipped = child.skipped;
  for (auto& [other, j] : std::exchange(screening.waiting, {})) {
    other->children[j].screen = child.screen, other->children[j].skipped = child.skipped;
    resolved(other);
  }
  resolved(slot);
}

void Scheduler::resolved(const SlotPtr& slot) {
  if (--slot->pending == 0) advance_records();
}

// ---- Recording and committing, in the order proposed ----

void Scheduler::advance_records() {
  while (!slots_.empty() && slots_.front()->pending == 0) {
    SlotPtr slot = std::move(slots_.front());
    slots_.pop_front();
    record(*slot);
    --slot->round->unrecorded;
  }
  advance_commits();
}

// The slot's children in the archive: each candidate found by identity (a resumed run's, found
// when it compiled; a duplicate's) or recorded with its compile report, and the screens measured
// here.
void Scheduler::record(Slot& slot) {
  TaskState& s = tasks_[slot.task];
  for (Child& child : slot.children) {
    if (!child.id) {
      std::optional<archive::CandidateId> id =
          log_.find_candidate(s.task_id, recorded_identity(child.checked));
      child.id = id ? id->value : ev_.record(child.checked, std::nullopt);
    }
    if (slot.repair_depth) s.population.set_repair_depth(child.id, *slot.repair_depth);
    if (child.screened_here)
      records::add_screen(log_, child.id, ev_.device_id(child.gpu_uuid), run_, *child.screen);
  }
}

void Scheduler::advance_commits() {
  if (committing_ || rounds_.empty() || rounds_.front()->unrecorded > 0) return;
  committing_ = true;
  RoundPtr round = rounds_.front();
  policy_->commit(*round, [this, round] {
    rounds_.pop_front();
    committing_ = false;
    policy_->committed(*round);
    advance_commits();
  });
}

void Scheduler::measure(size_t task, std::function<Then()> work, std::function<void()> refused) {
  lanes_->submit(Lane::Gpu, Priority::Commit,
                 [this, task, work = std::move(work), refused = std::move(refused)]() -> Then {
                   if (!gate_->take(task))
                     return [this, task, refused] {
                       this->refused(task);
                       refused();
                     };
                   auto t0 = Clock::now();
                   Then then = work();
                   double took = seconds_since(t0);
                   return [this, task, then = std::move(then), took] {
                     spent_gpu(tasks_[task], took);
                     budget_.count_measured(tasks_[task].task->id());
                     then();
                   };
                 });
}

// ---- Budgets and events ----

// A measurement of the task the gate refused: the task stops when its own budget is spent (else
// the run's is, and the run stops).
void Scheduler::refused(size_t task) {
  if (gate_->task_spent(task)) stop_task(tasks_[task], StopReason::TaskEvaluationBudget);
}

void Scheduler::count_read_back(size_t task) {
  budget_.count_read_back(tasks_[task].task->id());
  gate_->count(task);
}

void Scheduler::spent_gpu(const TaskState& s, double seconds) {
  budget_.add_gpu_s(s.task->id(), seconds);
}

void Scheduler::stop_task(TaskState& s, StopReason why) {
  if (s.status.stopped.empty()) s.status.stopped = to_string(why);
}

namespace {
LlmUsage usage(const LlmSpent& spent) {
  return {spent.calls, spent.tokens(), spent.cost_usd};
}
}  // namespace

bool Scheduler::stopping() {
  if (stopped_) return true;
  if (llm_) budget_.set_llm(usage(llm_->spent()));
  stopped_ = budget_.run_reached(hooks_.stop && hooks_.stop->load() > 0);
  return stopped_.has_value();
}

std::optional<StopReason> Scheduler::task_budget_reached(size_t task) {
  const std::string& id = tasks_[task].task->id();
  if (llm_) budget_.set_task_llm(id, usage(llm_->spent(id)));
  return budget_.task_reached(id);
}

// Every event carries the run's clock and what it has spent (the --log-json lines; the throughput
// benchmark reads them).
void Scheduler::event(const TaskState& s, LoopEvent e) {
  e.task = s.task->id();
  e.t = budget_.wall_s(), e.gpu_s = budget_.gpu_s(), e.evaluations = budget_.evaluations();
  if (hooks_.on_event) hooks_.on_event(e, s.status);
}

}  // namespace kforge::evolve::loop
