#include "kforge/evolve/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "kforge/archive/run_log.h"
#include "kforge/archive/winner.h"
#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/compile/answer.h"
#include "kforge/evolve/features.h"
#include "kforge/verify/protocol.h"
#include "loop/budget.h"
#include "loop/lanes.h"
#include "loop/population.h"
#include "run_records.h"

namespace kforge::evolve {
namespace {

using namespace records;
using loop::Budget;
using loop::Lane;
using loop::Priority;
using loop::StopReason;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A stable 64-bit number from text (the first 16 hex digits of its XXH3-128).
uint64_t stable_hash(const std::string& text) {
  return std::stoull(content_hash(text).substr(0, 16), nullptr, 16);
}

// ---- The plan of work: rounds of slots ----
//
// A task's round is what one generation was: its tuner points and model requests, proposed from the
// population as the task's last committed round left it. Rounds run ahead (`lookahead` of them per
// task), their slots compiled and screened as they come; they are recorded and committed in the
// order they were proposed (docs/evolve.md, "The steady state"), so the run is a function of its
// seed and the model's answers, never of which answer came first.

// A child of a slot: a proposal once compiled, and its screen.
struct Child {
  Checked checked;
  std::optional<Screen> screen;  // none: not compiled
  bool screened_here = false;    // measured in this process: recorded with its slot
  bool skipped = false;          // not measured: a budget ran out first
  std::string gpu_uuid;
  int64_t id = 0;  // the candidate's archive id, once recorded
};

// One source of children in a round: a tuner point, a starting kernel, or a model request (an
// ideas request gives one child per idea). Resolved when nothing of it is pending.
struct Slot {
  size_t task = 0;
  int round = 0, island = 0;
  bool from_model = false;
  std::optional<int> repair_depth;  // a repair's
  int pending = 1;                  // its request or compile, then each child's compile and screen
  std::vector<Child> children;
};
using SlotPtr = std::shared_ptr<Slot>;

struct Round {
  size_t task = 0;
  int number = 0;
  std::vector<SlotPtr> slots;
  size_t unrecorded = 0;
};
using RoundPtr = std::shared_ptr<Round>;

struct TaskState {
  std::shared_ptr<const tasks::Task> task;
  archive::TaskId task_id;
  loop::Population population;
  TaskStatus status;  // (what it spent: the loop's Budget, by task id)
  int rendered = -1;  // the last round proposed
};

// A step of a round's commit: a child judged in full, then accepted.
struct Step {
  enum class Kind { Start, Wrong, Top } kind;
  SlotPtr slot;
  size_t child;
  double screen_ms = 0;  // Top: its screen median
};

class Loop {
 public:
  // `wall_before`: the wall time of the run's earlier sessions (a resumed run).
  Loop(const RunConfig& config, Evaluator& evaluator, int64_t run, const LoopHooks& hooks,
       LlmProposer* llm, double wall_before)
      : config_(config),
        ev_(evaluator),
        log_(evaluator.archive()),
        run_(run),
        hooks_(hooks),
        llm_(llm),
        budget_(loop::Limits::of(config), wall_before) {
    if (llm_) llm_->ideas = config_.ideas_count;
    if (llm_)
      llm_->budget = {config_.llm_calls, config_.llm_tokens, config_.task_llm_tokens,
                      config_.llm_dollars, config_.task_llm_dollars};
  }

  RunSummary run(std::vector<TaskState>& states) {
    auto t0 = Clock::now();
    Gpu* gpu = ev_.gpu();
    loop::Lanes lanes(
        {llm_ ? llm_->concurrency : 1, ev_.compile_workers(), gpu ? gpu->parallel() : 1});
    lanes_ = &lanes;
    states_ = &states;
    loop::EvaluationGate gate(config_.evaluations, config_.task_evaluations, states.size());
    gate_ = &gate;
    try {
      for (size_t t = 0; t < states.size() && !stopping(); ++t) render(t, 0);
      lanes.drive([this] { return stopping(); },
                  [this] {
                    if (llm_) llm_->cancel();
                  });
      // Everything that could go on without the batch folder's answers has: the run pauses.
      if (waiting_ && !stopped_) stopped_ = StopReason::WaitingForAnswers;
    } catch (...) {
      if (!stopped_) stopped_ = StopReason::Failed;
      throw;
    }
    RunSummary out;
    out.run = run_;
    out.evaluations = budget_.measured();
    out.reused = budget_.reused();
    out.wall_s = seconds_since(t0);
    out.gpu_s = budget_.gpu_s();
    out.stopped = to_string(stopped_.value_or(StopReason::EveryTaskEnded));
    if (llm_) out.llm = llm_->spent();
    for (TaskState& s : states) {
      if (s.status.stopped.empty())
        s.status.stopped = to_string(stopped_.value_or(StopReason::GenerationsDone));
      out.tasks.push_back(s.status);
    }
    return out;
  }

  double wall_s() const { return budget_.wall_s(); }
  int64_t spent() const { return budget_.evaluations(); }
  std::optional<StopReason> stopped() const { return stopped_; }

 private:
  // ---- Proposing: a task's round ----

  void stop_task(TaskState& s, StopReason why) {
    if (s.status.stopped.empty()) s.status.stopped = to_string(why);
  }

  // Round r of task t, from its population as its last committed round left it.
  void render(size_t t, int r) {
    TaskState& s = (*states_)[t];
    if (!s.status.stopped.empty()) return;
    if (std::optional<StopReason> why = task_budget_reached(s)) return stop_task(s, *why);
    s.rendered = r;
    auto round = std::make_shared<Round>();
    round->task = t, round->number = r;
    if (r == 0) {
      int island = 0;
      for (Proposal& p : starting_population(s.task, ev_.archive(), 4, run_)) {
        p.lineage.run = run_;
        compile_slot(*round, island, std::move(p));
        island = (island + 1) % s.population.islands();
      }
      if (round->slots.empty()) ask_model(s, *round);  // nothing to start from: translations
    } else if (s.population.empty()) {
      ask_model(s, *round);  // fix mode: translations (and repairs) until one kernel is correct
      if (round->slots.empty()) return stop_task(s, StopReason::NoCorrectKernelToStartFrom);
    } else {
      propose_points_of(s, *round);
      ask_model(s, *round);
      if (round->slots.empty()) return stop_task(s, StopReason::TuneSpacesExhausted);
    }
    round->unrecorded = round->slots.size();
    rounds_.push_back(round);
    if (round->slots.empty()) advance_commits();  // round 0 with nothing to start from
  }

  std::mt19937_64 rng_for(const TaskState& s, int round, int island) const {
    std::seed_seq seq{static_cast<uint32_t>(config_.seed),
                      static_cast<uint32_t>(config_.seed >> 32),
                      static_cast<uint32_t>(stable_hash(s.task->id())),
                      static_cast<uint32_t>(round), static_cast<uint32_t>(island)};
    return std::mt19937_64(seq);
  }

  loop::Family& family_of(TaskState& s, const std::string& source, const std::string& plan) {
    return s.population.family(source, plan, [&] {
      loop::Family f;
      f.source = source, f.plan = plan;
      f.parsed = compile::parse_plan_text(plan, *s.task, ev_.task_tensors(*s.task));
      f.space = compile::tune_space(f.parsed, s.task->dims, ev_.facts());
      return f;
    });
  }

  // The tuner's points: per island a parent, and points of its tune space not measured yet (each
  // reserved as it is proposed, so another island or round proposes others).
  void propose_points_of(TaskState& s, Round& round) {
    int islands = s.population.islands(), g = round.number;
    if (config_.migration_interval > 0 && g % config_.migration_interval == 0)
      s.population.migrate();
    for (int i = 0; i < islands; ++i) {
      std::mt19937_64 rng = rng_for(s, g, i);
      const loop::Member parent = s.population.select_parent(i, rng);
      loop::Family& f = *s.population.family(parent.family);
      size_t count = static_cast<size_t>(config_.children / islands +
                                         (i < config_.children % islands ? 1 : 0));
      for (const compile::Tunables& t :
           propose_points(f.parsed, f.space, f.measured, count, rng, config_.tuner)) {
        f.measured.emplace(t, std::nullopt);  // the commit sets it
        Proposal p;
        p.task = s.task;
        p.source = f.source, p.plan = f.plan, p.tunables = t;
        p.lineage = {run_, {parent.id}, g, i, archive::LineageKind::Tune, "offline-tuner"};
        compile_slot(round, i, std::move(p));
      }
    }
  }

  // The model's children for a round: repairs of failed children first, then translations while
  // the task has no correct kernel, else the operators' mix over selected parents.
  void ask_model(TaskState& s, Round& round) {
    if (!llm_) return;
    int g = round.number, islands = s.population.islands();
    std::vector<std::pair<int64_t, PromptKind>> repairs = s.population.take_repairs();
    for (int k = 0; k < config_.llm_children; ++k) {
      int island = k % islands;
      std::mt19937_64 rng = rng_for(s, g, 1000 + k);
      Ask ask;
      ask.sample = g * 100 + k;
      // What every committed round wrote: all of this task's rounds up to g - lookahead.
      ask.horizon = std::max(0, g - lookahead() + 1);
      std::optional<int> depth;
      if (static_cast<size_t>(k) < repairs.size()) {
        ask.parent = repairs[k].first, ask.kind = repairs[k].second;
        depth = s.population.repair_depth(*ask.parent) + 1;
      } else if (s.population.empty()) {
        ask.kind = PromptKind::Translate;
      } else {
        loop::Choice c = s.population.choose(
            {config_.operators.optimize, config_.operators.crossover, config_.operators.ideas},
            island, rng);
        ask.kind = c.kind, ask.parent = c.parent, ask.second_parent = c.second_parent;
      }
      std::vector<int64_t> parents;
      for (const auto& p : {ask.parent, ask.second_parent})
        if (p) parents.push_back(*p);
      if (ask.kind == PromptKind::Optimize || ask.kind == PromptKind::Crossover ||
          ask.kind == PromptKind::Ideas)
        for (int64_t parent : parents) profile_parent(s, parent);
      ask.lineage = {run_, parents, g, island};  // how and by whom: the proposer says
      auto slot = add_slot(round, island);
      slot->from_model = true;
      slot->repair_depth = depth;
      lanes_->submit(Lane::Model, Priority::Answer,
                     [this, slot, job = llm_->prepare(ask, s.task, ev_.archive())]() -> loop::Then {
                       std::vector<Proposal> got = job();
                       return [this, slot, got = std::move(got)]() mutable {
                         answered(slot, std::move(got));
                       };
                     });
    }
  }

  // Profile feedback: a parent's Nsight Compute profile, measured once per candidate and GPU kind
  // (where the GPU has the tool) before a prompt quotes it. A failed profile is recorded too (with
  // its error), so it is not tried again. On the loop's thread: once per parent.
  void profile_parent(TaskState& s, int64_t id) {
    Gpu* gpu = ev_.gpu();
    if (!config_.profile || !gpu || gpu->profiler().empty()) return;
    if (ev_.archive().profile(archive::CandidateId{id}, ev_.device_id())) return;
    const auto& members = s.population.members();
    auto m = std::find_if(members.begin(), members.end(),
                          [&](const loop::Member& x) { return x.id == id; });
    if (m == members.end()) return;
    const loop::Family& f = *s.population.family(m->family);
    Proposal p;
    p.task = s.task;
    p.source = f.source, p.plan = f.plan, p.tunables = m->tunables;
    Checked c = ev_.check(std::move(p));
    auto t0 = Clock::now();
    json profile = ev_.profile(c);
    budget_.add_gpu_s(s.task->id(), seconds_since(t0));
    ev_.archive().add_profile(archive::CandidateId{id},
                              ev_.device_id(profile.value("gpu_uuid", "")), profile);
    event(s, {{"event", "profile"},
              {"task", s.task->id()},
              {"candidate", id},
              {"s", seconds_since(t0)},
              {"error", profile.value("error", "")}});
  }

  // ---- Running: compiles and screens as they come ----

  SlotPtr add_slot(Round& round, int island) {
    auto slot = std::make_shared<Slot>();
    slot->task = round.task, slot->round = round.number, slot->island = island;
    round.slots.push_back(slot);
    slots_.push_back(slot);
    return slot;
  }

  void compile_slot(Round& round, int island, Proposal p) {
    SlotPtr slot = add_slot(round, island);
    slot->children.emplace_back().checked.proposal = std::move(p);
    compile(slot, 0);
  }

  Priority priority_of(const Slot& slot) const {
    return slot.from_model || slot.round == 0 ? Priority::Answer : Priority::Tuner;
  }

  void compile(const SlotPtr& slot, size_t k) {
    lanes_->submit(Lane::Compile, priority_of(*slot),
                   [this, slot, k, p = slot->children[k].checked.proposal]() -> loop::Then {
                     Checked c = ev_.check(p);
                     return [this, slot, k, c = std::move(c)]() mutable {
                       slot->children[k].checked = std::move(c);
                       compiled(slot, k);
                     };
                   });
  }

  // A model's answer: each proposal compiled. One that has not come (a batch folder) pauses the
  // run once everything else is done, and a request the stop cut short is not recorded (a resumed
  // run asks again): either leaves the slot pending, so nothing after it is recorded either.
  void answered(const SlotPtr& slot, std::vector<Proposal> got) {
    bool unanswered =
        std::any_of(got.begin(), got.end(), [](const Proposal& p) { return p.unanswered; });
    if (unanswered) {
      if (!stopping()) waiting_ = true;  // the rest goes on; the run pauses once it is done
      return;
    }
    slot->pending += static_cast<int>(got.size()) - 1;
    for (Proposal& p : got) slot->children.emplace_back().checked.proposal = std::move(p);
    for (size_t k = 0; k < slot->children.size(); ++k) compile(slot, k);
    if (got.empty()) resolved(slot);
  }

  // A compiled child is screened: a duplicate of one this run screened (the same identity: code,
  // plan and tunables) takes its screen, measured once; else read back where this GPU's kind
  // screened it before; else measured. One that did not compile is done.
  void compiled(const SlotPtr& slot, size_t k) {
    Child& child = slot->children[k];
    TaskState& s = (*states_)[slot->task];
    if (!child.checked.report.ok()) return resolved(slot);
    std::string identity = recorded_identity(child.checked);
    if (auto it = screens_.find(identity); it != screens_.end()) {
      event(s, {{"event", "duplicate"}, {"task", s.task->id()}, {"identity", identity}});
      if (!it->second.done) {
        it->second.waiting.emplace_back(slot, k);
        return;
      }
      child.screen = it->second.screen, child.skipped = it->second.skipped;
      return resolved(slot);
    }
    Screening& screening = screens_[identity];
    if (std::optional<archive::CandidateId> id = log_.find_candidate(s.task_id, identity))
      if (std::optional<Screen> known = find_screen(log_, id->value, ev_.device_id())) {
        budget_.count_read_back(s.task->id());
        gate_->count(slot->task);
        screening.done = true;
        child.screen = screening.screen = *known;
        return resolved(slot);
      }
    lanes_->submit(Lane::Gpu, priority_of(*slot), [this, slot, k, identity]() -> loop::Then {
      if (!gate_->take(slot->task))
        return [this, slot, k, identity] { screened(slot, k, identity); };
      auto t0 = Clock::now();
      verify::Verdict v = ev_.screen(slot->children[k].checked);
      double spent = seconds_since(t0);
      return [this, slot, k, identity, v = std::move(v), spent] {
        Child& child = slot->children[k];
        TaskState& s = (*states_)[slot->task];
        budget_.add_gpu_s(s.task->id(), spent);
        budget_.count_measured(s.task->id());
        child.screen =
            Screen{v.outcome,
                   v.correct() && v.timing ? std::optional<double>(v.timing->time.median_ms)
                                           : std::nullopt,
                   v.summary};
        child.screened_here = true;
        child.gpu_uuid = v.gpu_uuid;
        event(s, {{"event", "screen"},
                  {"task", s.task->id()},
                  {"generation", slot->round},
                  {"island", slot->island},
                  {"identity", identity},
                  {"tunables", child.checked.report.tunables},
                  {"outcome", verify::to_string(child.screen->outcome)},
                  {"median_ms",
                   child.screen->median_ms ? json(*child.screen->median_ms) : json(nullptr)}});
        screened(slot, k, identity);
      };
    });
  }

  // A screen is known (or was skipped: a budget ran out first): its duplicates waiting for it take
  // it too.
  void screened(const SlotPtr& slot, size_t k, const std::string& identity) {
    Child& child = slot->children[k];
    if (!child.screen) {
      child.skipped = true;
      TaskState& s = (*states_)[slot->task];
      stop_task(s, budget_.task_reached(s.task->id()).value_or(StopReason::TaskEvaluationBudget));
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

  void resolved(const SlotPtr& slot) {
    if (--slot->pending == 0) advance_records();
  }

  // ---- Recording, in the order the slots were proposed ----

  void advance_records() {
    while (!slots_.empty() && slots_.front()->pending == 0) {
      SlotPtr slot = slots_.front();
      slots_.pop_front();
      record(*slot);
      for (const RoundPtr& r : rounds_)
        if (r->task == slot->task && r->number == slot->round) --r->unrecorded;
    }
    advance_commits();
  }

  void record(Slot& slot) {
    TaskState& s = (*states_)[slot.task];
    for (Child& child : slot.children) {
      child.id = candidate_id(s, child.checked);
      if (slot.repair_depth) s.population.set_repair_depth(child.id, *slot.repair_depth);
      if (child.screened_here)
        add_screen(log_, child.id, ev_.device_id(child.gpu_uuid), run_, *child.screen);
    }
  }

  // The candidate's archive id: found by identity (a resumed run's, or one that failed before it
  // had an identity: by the one it was recorded with), else recorded with its compile report.
  int64_t candidate_id(TaskState& s, const Checked& c) {
    if (std::optional<archive::CandidateId> id =
            log_.find_candidate(s.task_id, recorded_identity(c)))
      return id->value;
    return ev_.record(c, std::nullopt);
  }

  // ---- Committing, in the same order: judgments, the population, the next rounds ----

  void advance_commits() {
    if (committing_ || rounds_.empty() || rounds_.front()->unrecorded > 0) return;
    committing_ = true;
    RoundPtr round = rounds_.front();
    commit(*round, [this, round] {
      rounds_.pop_front();
      committing_ = false;
      committed(*round);
      advance_commits();
    });
  }

  void commit(Round& round, std::function<void()> done) {
    TaskState& s = (*states_)[round.task];
    auto steps = std::make_shared<std::vector<Step>>();
    std::vector<Step> correct;
    for (const SlotPtr& slot : round.slots)
      for (size_t k = 0; k < slot->children.size(); ++k) {
        Child& child = slot->children[k];
        if (child.skipped) continue;  // a budget ran out before it was screened
        if (!child.screen) {          // did not compile: counted as failed, and maybe repaired
          ++s.status.failed;
          note_failure(s, child, PromptKind::RepairCompile);
          continue;
        }
        ++s.status.screened;
        if (round.number > 0) {  // a tuner point stays reserved when it did not compile
          loop::Family& f =
              family_of(s, child.checked.proposal.source, child.checked.proposal.plan);
          f.measured[child.checked.report.tunables] = child.screen->median_ms;
        }
        if (round.number == 0)
          steps->push_back({Step::Kind::Start, slot, k});
        else if (child.screen->median_ms)
          correct.push_back({Step::Kind::Top, slot, k, *child.screen->median_ms});
        else if (from_model(child.checked))
          // A wrong model child is judged in full: its evidence (where, which dims, expected vs
          // got) is what the repair prompt shows.
          steps->push_back({Step::Kind::Wrong, slot, k});
        else
          ++s.status.failed;
      }
    std::stable_sort(correct.begin(), correct.end(),
                     [](const Step& a, const Step& b) { return a.screen_ms < b.screen_ms; });
    for (size_t k = 0; k < correct.size() && k < static_cast<size_t>(config_.judge_top); ++k)
      steps->push_back(correct[k]);
    run_steps(s, steps, 0, std::move(done));
  }

  void run_steps(TaskState& s, std::shared_ptr<std::vector<Step>> steps, size_t i,
                 std::function<void()> done) {
    // The fastest few, when a screen puts them near the best (screens are shorter, so noisier).
    if (i == steps->size() || ((*steps)[i].kind == Step::Kind::Top && s.population.best() &&
                               (*steps)[i].screen_ms > 1.05 * s.population.best()->time_ms))
      return done();
    const Step& step = (*steps)[i];
    judge(s, *step.slot, step.child,
          [this, &s, steps, i, done = std::move(done)](const std::optional<Judgment>& got) mutable {
            if (!got) return done();
            const Judgment& j = *got;
            const Step& step = (*steps)[i];
            Child& child = step.slot->children[step.child];
            ++s.status.judged;
            accept(s, child, j, step.slot->island);
            // A kernel judged too big for this GPU's memory has nothing a repair could fix.
            if (step.kind == Step::Kind::Wrong ||
                (step.kind == Step::Kind::Start && j.outcome != verify::Outcome::Correct &&
                 j.outcome != verify::Outcome::DoesNotFit))
              note_failure(s, child, PromptKind::RepairWrong);
            run_steps(s, steps, i + 1, std::move(done));
          });
  }

  // A full judgment, and admission when it would be the task's new best; read back where this
  // GPU's kind judged it before.
  // `then` gets none when a budget ran out before the judgment could start.
  void judge(TaskState& s, Slot& slot, size_t k,
             std::function<void(const std::optional<Judgment>&)> then) {
    Child& child = slot.children[k];
    const std::optional<loop::Member>& best = s.population.best();
    if (std::optional<Judgment> known = find_judgment(log_, child.id, ev_.device_id())) {
      // A correct judgment without admission (from `kforge corpus`, say) that would be the new best
      // is judged again, with admission: admission is what makes a winner.
      bool needs_admission = config_.admit && known->outcome == verify::Outcome::Correct &&
                             !known->admitted && !known->flagged && known->time_ms &&
                             (!best || *known->time_ms < best->time_ms);
      if (!needs_admission) {
        budget_.count_read_back(s.task->id());
        gate_->count(slot.task);
        return then(*known);
      }
    }
    std::optional<double> best_ms;
    if (best) best_ms = best->time_ms;
    const Checked* c = &child.checked;
    lanes_->submit(
        Lane::Gpu, Priority::Commit,
        [this, c, best_ms, &s, &slot, k, then = std::move(then)]() mutable -> loop::Then {
          if (!gate_->take(slot.task))  // a budget ran out: the round's commit ends here
            return [this, &s, then = std::move(then)] {
              stop_task(
                  s, budget_.task_reached(s.task->id()).value_or(StopReason::TaskEvaluationBudget));
              then(std::nullopt);
            };
          auto t0 = Clock::now();
          Evaluation e = ev_.judge(*c, false);
          // Admission too for a kernel flagged only "suspicious": a review may accept it later.
          bool only_suspicious =
              std::all_of(e.verdict.flags.begin(), e.verdict.flags.end(),
                          [](const std::string& f) { return f == verify::kFlagSuspicious; });
          bool new_best = e.verdict.correct() && e.verdict.timing && only_suspicious &&
                          (!best_ms || e.verdict.timing->time.median_ms < *best_ms);
          if (config_.admit && new_best) {
            auto t1 = Clock::now();
            e.admission = ev_.admit(*c, e.verdict.evidence.value("seed", uint64_t{1}));
            e.admission_ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
          }
          double spent = seconds_since(t0);
          return [this, c, &s, &slot, k, e = std::move(e), spent, then = std::move(then)] {
            budget_.add_gpu_s(s.task->id(), spent);
            budget_.count_measured(s.task->id());
            ev_.record(*c, e, /*with_compile=*/false);  // its compile was recorded with it
            Judgment j = judgment_of(e);
            event(s, {{"event", "judge"},
                      {"task", s.task->id()},
                      {"generation", slot.round},
                      {"island", slot.island},
                      {"candidate", slot.children[k].id},
                      {"tunables", c->report.tunables},
                      {"outcome", verify::to_string(j.outcome)},
                      {"time_ms", j.time_ms ? json(*j.time_ms) : json(nullptr)},
                      {"admitted", j.admitted},
                      {"summary", j.summary.substr(0, 200)},
                      {"admission",
                       e.admission ? json(e.admission->summary.substr(0, 300)) : json(nullptr)}});
            then(j);
          };
        });
  }

  // A judged child joins the population when correct; the best when it is a winner (the one rule,
  // archive/winner.h: unflagged, and admitted unless admission is off) and faster than the best so
  // far.
  void accept(TaskState& s, const Child& child, const Judgment& j, int island) {
    if (j.outcome != verify::Outcome::Correct || !j.time_ms) {
      ++s.status.failed;
      return;
    }
    ++s.status.correct;
    const Checked& c = child.checked;
    family_of(s, c.proposal.source, c.proposal.plan);
    loop::Member m{child.id,
                   loop::Population::family_key(c.proposal.source, c.proposal.plan),
                   c.report.tunables,
                   *j.time_ms,
                   cell_of(features_of(c.report)),
                   island};
    // The loop's own judgment: made by kforge, not an imported claim.
    bool wins = archive::is_winner({/*correct=*/true, /*timed=*/true, j.flagged, j.admitted},
                                   /*admission_required=*/config_.admit);
    if (s.population.accept(m, wins)) {
      s.status.best = child.id;
      s.status.best_ms = j.time_ms;
      s.status.baselines = j.baselines;
      s.status.roofline_fraction = j.roofline_fraction;
    }
  }

  bool from_model(const Checked& c) const {
    return llm_ && llm_->proposes_as(c.proposal.lineage.model);
  }

  // A failed model child (it did not compile, or was judged wrong) waits for a repair.
  void note_failure(TaskState& s, const Child& child, PromptKind kind) {
    if (!from_model(child.checked)) return;
    if (s.population.repair_depth(child.id) >= config_.repair_attempts ||
        child.checked.proposal.answer_error)
      return;
    s.population.wait_for_repair(child.id, kind);
  }

  // After a round's commit: the task's status, its stop conditions, and the rounds it may now
  // propose (up to `lookahead` past this one).
  void committed(const Round& round) {
    TaskState& s = (*states_)[round.task];
    s.status.generation = round.number;
    if (round.number == 0 && s.population.empty() && !stopping())
      stop_task(s, StopReason::NoCorrectStartingKernel);
    std::optional<double> over_eager =
        s.status.baselines.speedup(BaselineKind::Eager, s.status.best_ms);
    if (config_.target_speedup > 0 && over_eager && *over_eager >= config_.target_speedup)
      stop_task(s, StopReason::TargetSpeedup);
    if (hooks_.on_progress) hooks_.on_progress(s.status);
    for (int r = s.rendered + 1;
         r <= std::min(config_.generations, round.number + lookahead()) && !stopping(); ++r)
      render(round.task, r);
  }

  int lookahead() const { return std::max(config_.lookahead, 1); }

  // ---- Budgets and events ----

  // Whether the run stops: the first reason it stopped for stays (the budget's, an interrupt, a
  // failure, or answers still to come).
  bool stopping() {
    if (stopped_) return true;
    if (llm_) budget_.set_llm(usage(llm_->spent()));
    stopped_ = budget_.run_reached(hooks_.stop && hooks_.stop->load() > 0);
    return stopped_.has_value();
  }
  std::optional<StopReason> task_budget_reached(const TaskState& s) {
    if (llm_) budget_.set_task_llm(s.task->id(), usage(llm_->spent(s.task->id())));
    return budget_.task_reached(s.task->id());
  }
  static loop::LlmUsage usage(const LlmSpent& spent) {
    return {spent.calls, spent.tokens(), spent.cost_usd};
  }

  // Every event carries the run's clock and what it has spent (the --log-json lines; the
  // throughput benchmark reads them).
  void event(const TaskState& s, json e) {
    e["t"] = wall_s();
    e["gpu_s"] = budget_.gpu_s();
    e["evaluations"] = spent();
    if (hooks_.on_event) hooks_.on_event(e, s.status);
  }

  const RunConfig& config_;
  Evaluator& ev_;
  archive::RunLog log_;
  int64_t run_;
  const LoopHooks& hooks_;
  LlmProposer* llm_;
  Budget budget_;  // the limits and what the run and each task spent against them
  std::optional<StopReason> stopped_;  // why the run stops (none while it goes on)
  loop::Lanes* lanes_ = nullptr;
  std::vector<TaskState>* states_ = nullptr;
  std::deque<SlotPtr> slots_;    // proposed, not yet recorded (in the order proposed)
  std::deque<RoundPtr> rounds_;  // proposed, not yet committed (in the order proposed)
  bool committing_ = false;      // the front round's judgments are under way
  bool waiting_ = false;         // a batch folder has not answered a request yet
  loop::EvaluationGate* gate_ = nullptr;
  // This run's screens by identity: a duplicate child takes its first's (or waits for it).
  struct Screening {
    bool done = false, skipped = false;
    std::optional<Screen> screen;
    std::vector<std::pair<SlotPtr, size_t>> waiting;
  };
  std::map<std::string, Screening> screens_;
};

// Each task's references timed before generation 0 where no GPU of this kind timed them at these
// dims yet, so that every prompt, the first included, quotes the times to beat; the first timing
// of a kind stays what prompts quote (a resumed run renders the same prompts).
// With several GPUs, several tasks at once; each time is stored against the GPU that measured it.
void time_baselines(Evaluator& ev, const std::vector<TaskState>& states, const LoopHooks& hooks) {
  Gpu* gpu = ev.gpu();
  if (!gpu) return;
  archive::DeviceId device{ev.device_id()};
  std::mutex mutex;  // the archive and `next`
  size_t next = 0;
  std::exception_ptr failed;
  auto lane = [&] {
    std::unique_lock<std::mutex> lock(mutex);
    try {
      while (next < states.size() && !failed && !(hooks.stop && hooks.stop->load() > 0)) {
        const TaskState& s = states[next++];
        if (ev.archive().baseline(s.task_id, s.task->dims, device,
                                  s.task->allow_tf32 ? "tf32" : "ieee"))
          continue;
        lock.unlock();
        std::optional<verify::Baselines> b = gpu->baselines(*s.task);
        lock.lock();
        if (b)
          ev.archive().store_baseline(s.task_id, s.task->dims,
                                      archive::DeviceId{ev.device_id(b->gpu_uuid)}, b->math_mode,
                                      baseline_times(*b));
      }
    } catch (...) {
      if (!lock.owns_lock()) lock.lock();
      if (!failed) failed = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (int k = 0; k < std::min<int>(gpu->parallel(), static_cast<int>(states.size())); ++k)
    threads.emplace_back(lane);
  if (threads.empty()) lane();
  for (std::thread& t : threads) t.join();
  if (failed) std::rethrow_exception(failed);
}

// Rounds a task runs ahead: enough that the model's requests fill its concurrency twice over while
// the oldest round waits for its slowest answer (2 to 8); 2 without a model, so that the next
// round's compiles overlap this one's screens.
int choose_lookahead(const RunConfig& config, size_t tasks, const LlmProposer* llm) {
  if (!llm || config.llm_children <= 0) return 2;
  int per_round = static_cast<int>(std::max<size_t>(tasks, 1)) * config.llm_children;
  return std::clamp((2 * llm->concurrency + per_round - 1) / per_round, 2, 8);
}

}  // namespace

RunSummary run_evolution(const RunConfig& given,
                         const std::vector<std::shared_ptr<const tasks::Task>>& tasks,
                         Evaluator& evaluator, std::optional<int64_t> resume,
                         const LoopHooks& hooks, LlmProposer* llm) {
  RunConfig config = given;  // with the lookahead chosen (and recorded) when the run starts
  if (config.lookahead <= 0) config.lookahead = choose_lookahead(config, tasks.size(), llm);
  archive::RunLog log(evaluator.archive());
  archive::RunId run = resume ? archive::RunId{*resume} : log.start(config.to_json());
  double wall_before = resume ? log.recorded_wall_s(run) : 0;
  log.set_status(run, archive::RunStatus::Running, {{"wall_s", wall_before}});
  std::vector<TaskState> states;
  for (const auto& t : tasks) {
    evaluator.prepare(*t);
    TaskState s{
        t, {}, loop::Population(config.islands, config.select_best, config.select_elite), {}};
    s.task_id = evaluator.archive().upsert_task(*t);
    s.status.task = t->id();
    states.push_back(std::move(s));
  }
  Loop loop(config, evaluator, run.value, hooks, llm, wall_before);
  RunSummary summary;
  try {
    time_baselines(evaluator, states, hooks);
    summary = loop.run(states);
  } catch (...) {
    log.set_status(run, archive::RunStatus::Failed,
                   {{"wall_s", loop.wall_s()}, {"evaluations", loop.spent()}});
    throw;
  }
  bool paused = loop.stopped() && loop::pauses(*loop.stopped());
  log.set_status(run, paused ? archive::RunStatus::Interrupted : archive::RunStatus::Finished,
                 {{"wall_s", loop.wall_s()},
                  {"evaluations", loop.spent()},
                  {"gpu_s", summary.gpu_s},
                  {"llm_calls", summary.llm.calls},
                  {"llm_failed_calls", summary.llm.failed_calls},
                  {"llm_tokens_in", summary.llm.tokens_in},
                  {"llm_tokens_out", summary.llm.tokens_out},
                  {"llm_tokens_cache_read", summary.llm.tokens_cache_read},
                  {"llm_tokens_cache_write", summary.llm.tokens_cache_write},
                  {"llm_cached", summary.llm.cached},
                  {"llm_cost_usd", summary.llm.cost_usd}});
  return summary;
}

}  // namespace kforge::evolve
