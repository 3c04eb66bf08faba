#include "kforge/evolve/run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "budget.h"
#include "kforge/archive/run_log.h"
#include "kforge/archive/winner.h"
#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/compile/answer.h"
#include "kforge/evolve/features.h"
#include "kforge/verify/protocol.h"
#include "proposers.h"
#include "run_records.h"
#include "scheduler.h"

namespace kforge::evolve {
namespace {

using namespace records;
using loop::StopReason;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

using loop::Child;
using loop::Round;
using loop::Scheduler;
using loop::Slot;
using loop::SlotPtr;
using loop::TaskState;
using loop::Want;

// A step of a round's commit: a child judged in full, then accepted.
struct Step {
  enum class Kind { Start, Wrong, Top } kind;
  SlotPtr slot;
  size_t child;
  double screen_ms = 0;  // Top: its screen median
};

// The loop's policy (docs/evolve.md, "What one run does"): what a task's round proposes (the
// starting kernels; per island the tuner's points around a parent; the model's repairs,
// translations or operators over selected parents), and what its commit does (every starting
// kernel judged, the fastest screened children near the best judged, a wrong model child judged
// for its evidence; the correct ones accepted, failures waiting for repairs; the next rounds).
class Loop : public Scheduler::Policy {
 public:
  Loop(const RunConfig& config, Evaluator& evaluator, int64_t run, const LoopHooks& hooks,
       LlmProposer* llm, loop::SpentBefore before, std::vector<TaskState>& states)
      : config_(config),
        ev_(evaluator),
        run_(run),
        hooks_(hooks),
        llm_(llm),
        states_(states),
        scheduler_(config, evaluator, run, hooks, llm, before, states) {
    proposers_.push_back(std::make_unique<loop::TunerProposer>(config, evaluator, run));
    if (llm_) {
      llm_->ideas = config_.ideas_count;
      llm_->budget = {config_.llm_calls, config_.llm_tokens, config_.task_llm_tokens,
                      config_.llm_dollars, config_.task_llm_dollars};
      proposers_.push_back(std::make_unique<loop::ModelProposer>(config, evaluator, run, *llm));
    }
  }

  RunSummary run() {
    auto t0 = Clock::now();
    scheduler_.run(*this);
    std::optional<StopReason> stopped = scheduler_.stopped();
    RunSummary out;
    out.run = run_;
    out.evaluations = scheduler_.budget().measured();
    out.reused = scheduler_.budget().reused();
    out.wall_s = seconds_since(t0);
    out.gpu_s = scheduler_.budget().gpu_s();
    out.stopped = to_string(stopped.value_or(StopReason::EveryTaskEnded));
    if (llm_) out.llm = llm_->spent();
    for (TaskState& s : states_) {
      if (s.status.stopped.empty())
        s.status.stopped = to_string(stopped.value_or(StopReason::GenerationsDone));
      out.tasks.push_back(s.status);
    }
    return out;
  }

  double wall_s() const { return scheduler_.budget().wall_s(); }
  int64_t spent() const { return scheduler_.budget().evaluations(); }
  std::optional<StopReason> stopped() const { return scheduler_.stopped(); }

  // ---- Proposing ----

  void propose(size_t t, int r) override {
    TaskState& s = states_[t];
    if (!s.status.stopped.empty()) return;
    if (std::optional<StopReason> why = scheduler_.task_budget_reached(t))
      return Scheduler::stop_task(s, *why);
    s.proposed = r;
    loop::RoundPtr round = scheduler_.open(t, r);
    if (r == 0) {
      int island = 0;
      for (Proposal& p : starting_population(s.task, ev_.archive(), 4, run_)) {
        p.lineage.run = run_;
        scheduler_.add(*round, island, std::move(p));
        island = (island + 1) % s.population.islands();
      }
      if (round->slots.empty()) want_model(s, *round);  // nothing to start from: translations
    } else if (s.population.empty()) {
      want_model(s, *round);  // fix mode: translations (and repairs) until one kernel is correct
      if (round->slots.empty())
        return Scheduler::stop_task(s, StopReason::NoCorrectKernelToStartFrom);
    } else {
      want_tuner(s, *round);
      want_model(s, *round);
      if (round->slots.empty()) return Scheduler::stop_task(s, StopReason::TuneSpacesExhausted);
    }
    scheduler_.submit(round);
  }

  // Per island a parent, and the tuner's share of the round's children around it.
  void want_tuner(TaskState& s, Round& round) {
    int islands = s.population.islands(), g = round.number;
    if (config_.migration_interval > 0 && g % config_.migration_interval == 0)
      s.population.migrate();
    for (int i = 0; i < islands; ++i) {
      std::mt19937_64 rng = loop::stream(config_.seed, s.task->id(), g, i);
      Want w;
      w.op = "tune", w.parents = {s.population.select_parent(i, rng).id}, w.island = i;
      w.count = static_cast<size_t>(config_.children / islands +
                                    (i < config_.children % islands ? 1 : 0));
      write(s, round, w);
    }
  }

  // The model's children: repairs of failed children first, then translations while the task has
  // no correct kernel, else the operators' mix over selected parents.
  void want_model(TaskState& s, Round& round) {
    if (!llm_) return;
    int g = round.number;
    std::vector<std::pair<int64_t, PromptKind>> repairs = s.population.take_repairs();
    for (int k = 0; k < config_.llm_children; ++k) {
      Want w;
      w.island = k % s.population.islands();
      w.sample = g * 100 + k;
      if (static_cast<size_t>(k) < repairs.size()) {
        w.op = prompt_kind_name(repairs[k].second), w.parents = {repairs[k].first};
        w.repair_depth = s.population.repair_depth(repairs[k].first) + 1;
      } else if (s.population.empty()) {
        w.op = prompt_kind_name(PromptKind::Translate);
      } else {
        std::mt19937_64 rng = loop::stream(config_.seed, s.task->id(), g, 1000 + k);
        loop::Choice c = s.population.choose(
            {config_.operators.optimize, config_.operators.crossover, config_.operators.ideas},
            w.island, rng);
        w.op = prompt_kind_name(c.kind), w.parents = {c.parent};
        if (c.second_parent) w.parents.push_back(*c.second_parent);
      }
      write(s, round, w);
    }
  }

  // The proposer that writes the operator writes the slot.
  void write(TaskState& s, Round& round, const Want& w) {
    for (const auto& p : proposers_)
      if (p->writes(w.op)) return p->propose(s, round, w, scheduler_);
    throw Error("no proposer writes the operator \"" + w.op + "\"");
  }

  // ---- Committing ----

  void commit(Round& round, std::function<void()> done) override {
    TaskState& s = states_[round.task];
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
        ++s.status.screened;  // (a tuner point that did not compile stays reserved)
        loop::family_of(s, ev_, child.checked.proposal.source, child.checked.proposal.plan)
            .measured[child.checked.report.tunables] = child.screen->median_ms;
        if (round.number == 0)
          steps->push_back({Step::Kind::Start, slot, k});
        else if (child.screen->median_ms)
          correct.push_back({Step::Kind::Top, slot, k, *child.screen->median_ms});
        else if (scheduler_.from_model(child.checked))
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
    const std::optional<loop::Member>& best = s.population.best();
    if (i == steps->size() || ((*steps)[i].kind == Step::Kind::Top && best &&
                               (*steps)[i].screen_ms > 1.05 * best->time_ms))
      return done();
    const Step& step = (*steps)[i];
    judge(s, *step.slot, step.child,
          [this, &s, steps, i, done = std::move(done)](const std::optional<Judgment>& got) mutable {
            if (!got) return done();  // a budget ran out
            const Step& step = (*steps)[i];
            Child& child = step.slot->children[step.child];
            ++s.status.judged;
            accept(s, child, *got, step.slot->island);
            // A kernel judged too big for this GPU's memory has nothing a repair could fix.
            if (step.kind == Step::Kind::Wrong ||
                (step.kind == Step::Kind::Start && got->outcome != verify::Outcome::Correct &&
                 got->outcome != verify::Outcome::DoesNotFit))
              note_failure(s, child, PromptKind::RepairWrong);
            run_steps(s, steps, i + 1, std::move(done));
          });
  }

  // A full judgment, and admission when it would be the task's new best; read back where this
  // GPU's kind judged it before. `then` gets none when a budget ran out before it could start.
  void judge(TaskState& s, Slot& slot, size_t k,
             std::function<void(const std::optional<Judgment>&)> then) {
    Child& child = slot.children[k];
    const std::optional<loop::Member>& best = s.population.best();
    if (std::optional<Judgment> known =
            find_judgment(scheduler_.log(), child.id, ev_.device_id())) {
      // A correct judgment without admission (from `kforge corpus`, say) that would be the new best
      // is judged again, with admission: admission is what makes a winner.
      bool needs_admission = config_.admit && known->outcome == verify::Outcome::Correct &&
                             !known->admitted && !known->flagged && known->time_ms &&
                             (!best || *known->time_ms < best->time_ms);
      if (!needs_admission) {
        scheduler_.count_read_back(slot.task);
        return then(*known);
      }
    }
    std::optional<double> best_ms;
    if (best) best_ms = best->time_ms;
    const Checked* c = &child.checked;
    scheduler_.measure(
        slot.task,
        [this, c, best_ms, &s, &slot, k, then]() -> loop::Then {
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
          return [this, c, &s, &slot, k, e = std::move(e), then] {
            ev_.record(*c, e, /*with_compile=*/false);  // its compile was recorded with it
            Judgment j = judgment_of(e);
            LoopEvent ev;
            ev.kind = LoopEvent::Kind::Judge;
            ev.generation = slot.generation, ev.island = slot.island;
            ev.candidate = slot.children[k].id, ev.tunables = c->report.tunables;
            ev.outcome = verify::to_string(j.outcome), ev.ms = j.time_ms;
            ev.admitted = j.admitted, ev.summary = j.summary.substr(0, 200);
            if (e.admission) ev.admission = e.admission->summary.substr(0, 300);
            scheduler_.event(s, std::move(ev));
            then(j);
          };
        },
        [then] { then(std::nullopt); });
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
    loop::family_of(s, ev_, c.proposal.source, c.proposal.plan);
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

  // A failed model child (it did not compile, or was judged wrong) waits for a repair.
  void note_failure(TaskState& s, const Child& child, PromptKind kind) {
    if (!scheduler_.from_model(child.checked)) return;
    if (s.population.repair_depth(child.id) >= config_.repair_attempts ||
        child.checked.proposal.answer_error)
      return;
    s.population.wait_for_repair(child.id, kind);
  }

  // After a round's commit: the task's status, its stop conditions, and the rounds it may now
  // propose (up to `lookahead` past this one).
  void committed(const Round& round) override {
    TaskState& s = states_[round.task];
    s.status.generation = round.number;
    if (round.number == 0 && s.population.empty() && !scheduler_.stopping())
      Scheduler::stop_task(s, StopReason::NoCorrectStartingKernel);
    std::optional<double> over_eager =
        s.status.baselines.speedup(BaselineKind::Eager, s.status.best_ms);
    if (config_.target_speedup > 0 && over_eager && *over_eager >= config_.target_speedup)
      Scheduler::stop_task(s, StopReason::TargetSpeedup);
    if (hooks_.on_progress) hooks_.on_progress(s.status);
    int last = std::min(config_.generations, round.number + std::max(config_.lookahead, 1));
    for (int r = s.proposed + 1; r <= last && !scheduler_.stopping(); ++r) propose(round.task, r);
  }

 private:
  const RunConfig& config_;
  Evaluator& ev_;
  int64_t run_;
  const LoopHooks& hooks_;
  LlmProposer* llm_;
  std::vector<TaskState>& states_;
  Scheduler scheduler_;
  std::vector<std::unique_ptr<loop::Proposer>> proposers_;  // by the operators they write
};

bool interrupted(const verify::Baselines& b) {
  return std::any_of(b.list.begin(), b.list.end(), [](const verify::BaselineTiming& t) {
    return t.absent == verify::kCompiledInterrupted;
  });
}

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
        if (b && !interrupted(*b))  // a package the stop left unbuilt: timed again on --resume
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
  if (resume) log.set_config(run, config.to_json());  // budgets given again are kept
  loop::SpentBefore before;
  if (resume) before = {log.recorded_wall_s(run), log.recorded_evaluations(run)};
  log.set_status(run, archive::RunStatus::Running, {{"wall_s", before.wall_s}});
  std::vector<TaskState> states;
  for (const auto& t : tasks) {
    evaluator.prepare(*t);
    TaskState s{
        t, {}, loop::Population(config.islands, config.select_best, config.select_elite), {}};
    s.task_id = evaluator.archive().upsert_task(*t);
    s.status.task = t->id();
    states.push_back(std::move(s));
  }
  Loop loop(config, evaluator, run.value, hooks, llm, before, states);
  RunSummary summary;
  try {
    time_baselines(evaluator, states, hooks);
    summary = loop.run();
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
