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

#include "kforge/archive/run_log.h"
#include "kforge/archive/winner.h"
#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/compile/answer.h"
#include "kforge/evolve/features.h"
#include "kforge/verify/protocol.h"
#include "loop/budget.h"
#include "run_records.h"

namespace kforge::evolve {
namespace {

using namespace records;
using loop::Budget;
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

// ---- The population ----

// Kernels that share code (source and plan) and differ in tunables: one tune space.
struct Family {
  std::string source, plan;
  compile::Plan parsed;
  std::vector<compile::Tunables> space;
  Measured measured;  // screened points: median, or none when not correct
};

struct Member {
  int64_t id = 0;
  std::string family;
  compile::Tunables tunables;
  double time_ms = 0;  // judged in full
  std::string cell;
  int island = 0;
};

struct TaskState {
  std::shared_ptr<const tasks::Task> task;
  archive::TaskId task_id;
  std::map<std::string, Family> families;
  std::vector<Member> members;
  std::optional<Member> best;
  TaskStatus status;  // (what it spent: the loop's Budget, by task id)
  // The LLM's failed children waiting for a repair, and how deep in repairs each child is.
  std::vector<std::pair<int64_t, PromptKind>> repairs;
  std::map<int64_t, int> repair_depth;
};

// A task's children for one generation, their compiles queued.
struct Child {
  std::future<std::vector<Checked>> ready;
  std::string family;  // "" for a starting kernel (its family is known once it compiles)
  int island = 0;
};
struct Pending {
  std::vector<Child> children;
  std::map<size_t, int> repaired;     // child index -> its repair depth (a repair of a repair: 2)
  std::optional<StopReason> stopped;  // why the task cannot go on (none when it can)
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
    std::lock_guard<std::mutex> hold(mu_);
    Gpu* gpu = ev_.gpu();
    int lanes = std::min<int>(gpu ? gpu->parallel() : 1, static_cast<int>(states.size()));
    if (lanes > 1)
      run_lanes(states, lanes);
    else
      run_in_step(states);
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
  // One GPU: generation by generation, every task's children proposed (their compiles queued)
  // before the GPU takes the first, so the GPU does not wait on compiles while work is queued.
  void run_in_step(std::vector<TaskState>& states) {
    for (int g = 0; g <= config_.generations && !stopping(); ++g) {
      std::vector<std::optional<Pending>> pending(states.size());
      for (size_t i = 0; i < states.size(); ++i) pending[i] = propose(states[i], g);
      bool any = false;
      for (size_t i = 0; i < states.size() && !stopping(); ++i) {
        if (!pending[i]) continue;
        any = true;
        evaluate_or_cancel(states[i], g, *pending[i]);
      }
      if (stopping() && llm_) llm_->cancel();  // before the unconsumed children are dropped
      if (!any) break;
    }
  }

  // Several GPUs (a pool of workers, Gpu::parallel): a lane per GPU, each taking the next task and
  // running its generations, so no GPU waits for another task's generation to end. The lanes share
  // the loop's state under mu_ and let go of it only while they wait (unlocked): for a GPU, a
  // compile or a model's answer. Work in flight when a budget runs out is finished and counted: a
  // budget may be overrun by up to a judgment per lane.
  void run_lanes(std::vector<TaskState>& states, int lanes) {
    size_t next = 0;
    std::exception_ptr failed;
    auto lane = [&] {
      std::lock_guard<std::mutex> hold(mu_);
      try {
        while (!stopping() && next < states.size()) {
          TaskState& s = states[next++];
          for (int g = 0; g <= config_.generations && !stopping(); ++g) {
            std::optional<Pending> p = propose(s, g);
            if (!p) break;
            evaluate_or_cancel(s, g, *p);
            if (stopping() && llm_) llm_->cancel();  // before the unconsumed children are dropped
          }
        }
      } catch (...) {
        if (!failed) failed = std::current_exception();
        if (!stopped_) stopped_ = StopReason::Failed;
        if (llm_) llm_->cancel();
      }
    };
    unlocked([&] {
      std::vector<std::thread> threads;
      for (int k = 0; k < lanes; ++k) threads.emplace_back(lane);
      for (std::thread& t : threads) t.join();
    });
    if (failed) std::rethrow_exception(failed);
  }

  // The lane's hold on the loop's state is let go while `f` runs (it waits on a GPU, a compile or
  // a model) and taken back after, also when `f` throws.
  template <typename F>
  auto unlocked(F&& f) -> decltype(f()) {
    mu_.unlock();
    struct Relock {
      std::mutex& m;
      ~Relock() { m.lock(); }
    } relock{mu_};
    return f();
  }

  // A task's children for generation g (their compiles queued); none when the task has ended.
  std::optional<Pending> propose(TaskState& s, int g) {
    if (!s.status.stopped.empty()) return std::nullopt;
    if (std::optional<StopReason> why = task_budget_reached(s)) {
      s.status.stopped = to_string(*why);
      return std::nullopt;
    }
    s.status.generation = g;
    return g == 0 ? propose_start(s) : propose_generation(s, g);
  }

  // evaluate(); when it throws, the model's outstanding requests are cancelled first: the children
  // waiting for them are dropped on the way out, and each would wait for its answer.
  void evaluate_or_cancel(TaskState& s, int g, Pending& pending) {
    try {
      evaluate(s, g, pending);
    } catch (...) {
      if (llm_) llm_->cancel();
      throw;
    }
  }

  void evaluate(TaskState& s, int g, Pending& pending) {
    if (g == 0)
      start(s, pending);
    else
      generation(s, g, pending);
    if (s.members.empty() && g == 0 && !stopping())
      s.status.stopped = to_string(StopReason::NoCorrectStartingKernel);
    std::optional<double> over_eager =
        s.status.baselines.speedup(BaselineKind::Eager, s.status.best_ms);
    if (config_.target_speedup > 0 && over_eager && *over_eager >= config_.target_speedup)
      s.status.stopped = to_string(StopReason::TargetSpeedup);
    if (hooks_.on_progress) hooks_.on_progress(s.status);
  }

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

  std::mt19937_64 rng_for(const TaskState& s, int generation, int island) const {
    std::seed_seq seq{static_cast<uint32_t>(config_.seed),
                      static_cast<uint32_t>(config_.seed >> 32),
                      static_cast<uint32_t>(stable_hash(s.task->id())),
                      static_cast<uint32_t>(generation), static_cast<uint32_t>(island)};
    return std::mt19937_64(seq);
  }

  std::string family_key(const std::string& source, const std::string& plan) const {
    return content_hash(source + std::string(1, '\0') + plan);
  }

  Family& family_of(TaskState& s, const Proposal& p) {
    std::string key = family_key(p.source, p.plan);
    auto it = s.families.find(key);
    if (it == s.families.end()) {
      Family f;
      f.source = p.source;
      f.plan = p.plan;
      f.parsed = compile::parse_plan_text(p.plan, *s.task, ev_.task_tensors(*s.task));
      f.space = compile::tune_space(f.parsed, s.task->dims, ev_.facts());
      it = s.families.emplace(key, std::move(f)).first;
    }
    return it->second;
  }

  // The candidate's archive id: found by identity (a resumed run's, or one that failed before it
  // had an identity: by the one it was recorded with), else recorded with its compile report.
  int64_t candidate_id(TaskState& s, const Checked& c) {
    if (std::optional<archive::CandidateId> id =
            log_.find_candidate(s.task_id, recorded_identity(c)))
      return id->value;
    return ev_.record(c, std::nullopt);
  }

  // f() on the GPU, the loop's state let go meanwhile; the time it takes counts as the task's and
  // the run's GPU time (not the time waiting to take the state back).
  template <typename F>
  auto on_gpu(TaskState& s, F&& f) -> decltype(f()) {
    double spent = 0;
    auto result = unlocked([&] {
      auto t0 = Clock::now();
      auto r = f();
      spent = seconds_since(t0);
      return r;
    });
    budget_.add_gpu_s(s.task->id(), spent);
    return result;
  }

  // Every event carries the run's clock and what it has spent (the --log-json lines; the
  // throughput benchmark reads them).
  void event(const TaskState& s, json e) {
    e["t"] = wall_s();
    e["gpu_s"] = budget_.gpu_s();
    e["evaluations"] = spent();
    if (hooks_.on_event) hooks_.on_event(e, s.status);
  }

  Screen screen(TaskState& s, const Checked& c, int64_t id, int generation, int island) {
    int64_t device = ev_.device_id();
    if (std::optional<Screen> known = find_screen(log_, id, device)) {
      budget_.count_read_back(s.task->id());
      return *known;
    }
    verify::Verdict v = on_gpu(s, [&] { return ev_.screen(c); });
    budget_.count_measured(s.task->id());
    Screen r{
        v.outcome,
        v.correct() && v.timing ? std::optional<double>(v.timing->time.median_ms) : std::nullopt,
        v.summary};
    add_screen(log_, id, ev_.device_id(v.gpu_uuid), run_, r);
    event(s, {{"event", "screen"},
              {"task", s.task->id()},
              {"generation", generation},
              {"island", island},
              {"candidate", id},
              {"tunables", c.report.tunables},
              {"outcome", verify::to_string(r.outcome)},
              {"median_ms", r.median_ms ? json(*r.median_ms) : json(nullptr)}});
    return r;
  }

  // A full judgment, and admission when it would be the task's new best.
  Judgment judge(TaskState& s, const Checked& c, int64_t id, int generation, int island) {
    int64_t device = ev_.device_id();
    if (std::optional<Judgment> known = find_judgment(log_, id, device)) {
      // A correct judgment without admission (from `kforge corpus`, say) that would be the new best
      // is judged again, with admission: admission is what makes a winner.
      bool needs_admission = config_.admit && known->outcome == verify::Outcome::Correct &&
                             !known->admitted && !known->flagged && known->time_ms &&
                             (!s.best || *known->time_ms < s.best->time_ms);
      if (!needs_admission) {
        budget_.count_read_back(s.task->id());
        return *known;
      }
    }
    Evaluation e = on_gpu(s, [&] { return ev_.judge(c, false); });
    // Admission too for a kernel flagged only "suspicious": a review may accept it later.
    bool only_suspicious =
        std::all_of(e.verdict.flags.begin(), e.verdict.flags.end(),
                    [](const std::string& f) { return f == verify::kFlagSuspicious; });
    bool new_best = e.verdict.correct() && e.verdict.timing && only_suspicious &&
                    (!s.best || e.verdict.timing->time.median_ms < s.best->time_ms);
    if (config_.admit && new_best) {
      auto t1 = Clock::now();
      e.admission =
          on_gpu(s, [&] { return ev_.admit(c, e.verdict.evidence.value("seed", uint64_t{1})); });
      e.admission_ms = std::chrono::duration<double, std::milli>(Clock::now() - t1).count();
    }
    budget_.count_measured(s.task->id());
    ev_.record(c, e, /*with_compile=*/false);  // its compile was recorded with the candidate
    Judgment j = judgment_of(e);
    event(s,
          {{"event", "judge"},
           {"task", s.task->id()},
           {"generation", generation},
           {"island", island},
           {"candidate", id},
           {"tunables", c.report.tunables},
           {"outcome", verify::to_string(j.outcome)},
           {"time_ms", j.time_ms ? json(*j.time_ms) : json(nullptr)},
           {"admitted", j.admitted},
           {"summary", j.summary.substr(0, 200)},
           {"admission", e.admission ? json(e.admission->summary.substr(0, 300)) : json(nullptr)}});
    return j;
  }

  // A judged candidate joins the population when correct; the best when it is a winner (the one
  // rule, archive/winner.h: unflagged, and admitted unless admission is off) and faster than the
  // best so far (on equal times the one judged first stays).
  void accept(TaskState& s, const Checked& c, int64_t id, const Judgment& j, int island) {
    if (j.outcome != verify::Outcome::Correct || !j.time_ms) {
      ++s.status.failed;
      return;
    }
    ++s.status.correct;
    Member m{id,
             family_key(c.proposal.source, c.proposal.plan),
             c.report.tunables,
             *j.time_ms,
             cell_of(features_of(c.report)),
             island};
    s.members.push_back(m);
    // The loop's own judgment: made by kforge, not an imported claim.
    bool wins = archive::is_winner({/*correct=*/true, /*timed=*/true, j.flagged, j.admitted},
                                   /*admission_required=*/config_.admit);
    if (wins && (!s.best || m.time_ms < s.best->time_ms)) {
      s.best = m;
      s.status.best = id;
      s.status.best_ms = j.time_ms;
      s.status.baselines = j.baselines;
      s.status.roofline_fraction = j.roofline_fraction;
    }
  }

  // Generation 0: every starting kernel screened (its point joins its family) and judged.
  Pending propose_start(TaskState& s) {
    Pending out;
    int island = 0;
    for (Proposal& p : starting_population(s.task, ev_.archive(), 4, run_)) {
      p.lineage.run = run_;
      out.children.push_back({ev_.check_async(std::move(p), 1), "", island});
      island = (island + 1) % std::max(config_.islands, 1);
    }
    if (out.children.empty()) ask_llm(s, 0, out);  // nothing to start from: translations
    return out;
  }

  // The LLM's children for a generation: repairs of last generation's failed children first, then
  // translations while the task has no correct kernel, else the operators' mix (optimize,
  // crossover, ideas) over selected parents. Each request is on a thread of its own; its answer is
  // compiled there too.
  void ask_llm(TaskState& s, int g, Pending& out) {
    if (!llm_) return;
    int islands = std::max(config_.islands, 1);
    std::vector<std::pair<int64_t, PromptKind>> repairs = std::move(s.repairs);
    s.repairs.clear();
    for (int k = 0; k < config_.llm_children; ++k) {
      int island = k % islands;
      std::mt19937_64 rng = rng_for(s, g, 1000 + k);
      Ask ask;
      ask.sample = g * 100 + k;
      if (static_cast<size_t>(k) < repairs.size()) {
        ask.parent = repairs[k].first, ask.kind = repairs[k].second;
      } else if (s.members.empty()) {
        ask.kind = PromptKind::Translate;
      } else {
        choose_operator(s, island, rng, ask);
      }
      std::vector<int64_t> parents;
      for (const auto& p : {ask.parent, ask.second_parent})
        if (p) parents.push_back(*p);
      if (ask.kind == PromptKind::Optimize || ask.kind == PromptKind::Crossover ||
          ask.kind == PromptKind::Ideas)
        for (int64_t parent : parents) profile_parent(s, parent);
      ask.lineage = {run_, parents, g, island};  // how and by whom: the proposer says
      std::function<std::vector<Proposal>()> job = llm_->prepare(ask, s.task, ev_.archive());
      Evaluator* ev = &ev_;
      out.children.push_back({std::async(std::launch::async,
                                         [job, ev] {
                                           std::vector<Checked> checked;
                                           for (Proposal& p : job())
                                             checked.push_back(p.unanswered
                                                                   ? Checked{std::move(p), {}}
                                                                   : ev->check(std::move(p)));
                                           return checked;
                                         }),
                              "", island});
      if (ask.kind == PromptKind::RepairCompile || ask.kind == PromptKind::RepairWrong)
        out.repaired[out.children.size() - 1] = s.repair_depth[*ask.parent] + 1;
    }
  }

  // Profile feedback: a parent's Nsight Compute profile, measured once per candidate and GPU kind
  // (where the GPU has the tool) before a prompt quotes it. A failed profile is recorded too (with
  // its error), so it is not tried again.
  void profile_parent(TaskState& s, int64_t id) {
    Gpu* gpu = ev_.gpu();
    if (!config_.profile || !gpu || gpu->profiler().empty()) return;
    int64_t device = ev_.device_id();
    if (ev_.archive().profile(archive::CandidateId{id}, device)) return;
    auto m = std::find_if(s.members.begin(), s.members.end(),
                          [&](const Member& x) { return x.id == id; });
    if (m == s.members.end()) return;
    const Family& f = s.families.at(m->family);
    Proposal p;
    p.task = s.task;
    p.source = f.source, p.plan = f.plan, p.tunables = m->tunables;
    Checked c = unlocked([&] { return ev_.check(std::move(p)); });
    auto t0 = Clock::now();
    json profile = on_gpu(s, [&] { return ev_.profile(c); });
    ev_.archive().add_profile(archive::CandidateId{id},
                              ev_.device_id(profile.value("gpu_uuid", "")), profile);
    event(s, {{"event", "profile"},
              {"task", s.task->id()},
              {"candidate", id},
              {"s", seconds_since(t0)},
              {"error", profile.value("error", "")}});
  }

  // Optimize, crossover or ideas, drawn by the config's weights. Crossover needs a second parent of
  // other code (from another island first, else another cell, else any); without one it optimizes.
  void choose_operator(const TaskState& s, int island, std::mt19937_64& rng, Ask& ask) const {
    const RunConfig::Operators& w = config_.operators;
    std::discrete_distribution<int> pick({w.optimize, w.crossover, w.ideas});
    int op = pick(rng);
    const Member& a = select_parent(s, island, rng);
    ask.parent = a.id;
    ask.kind = op == 2 ? PromptKind::Ideas : PromptKind::Optimize;
    if (op != 1) return;
    const Member* b = nullptr;
    auto rank = [&](const Member& m) {
      return (m.island != a.island ? 0 : 2) + (m.cell != a.cell ? 0 : 1);
    };
    for (const Member& m : s.members)
      if (m.family != a.family &&
          (!b || rank(m) < rank(*b) || (rank(m) == rank(*b) && m.time_ms < b->time_ms)))
        b = &m;
    if (!b) return;
    ask.second_parent = b->id;
    ask.kind = PromptKind::Crossover;
  }

  // A child once compiled (an ideas child: one per idea); while it waits (for the model's answer),
  // a stop request cancels the wait. An answer that has not come (a batch folder) pauses the run.
  std::vector<Checked> take(Child& child) {
    while (unlocked([&] { return child.ready.wait_for(std::chrono::milliseconds(50)); }) !=
           std::future_status::ready)
      if (llm_ && hooks_.stop && hooks_.stop->load() > 0) llm_->cancel();
    std::vector<Checked> got = child.ready.get();
    if (!stopping())  // a stop request's cancel leaves children unanswered too: that is an
                      // interrupt
      for (const Checked& c : got)
        if (c.proposal.unanswered && !stopped_) stopped_ = StopReason::WaitingForAnswers;
    return got;
  }

  bool from_llm(const Checked& c) const {
    return llm_ && llm_->proposes_as(c.proposal.lineage.model);
  }

  // A failed LLM child (it did not compile, or did not screen correct) waits for a repair.
  void note_failure(TaskState& s, const Checked& c, int64_t id, PromptKind kind) {
    if (!from_llm(c)) return;
    if (s.repair_depth[id] >= config_.repair_attempts || c.proposal.answer_error) return;
    s.repairs.emplace_back(id, kind);
  }

  // A taken child's archive id, its repair depth noted; none when it did not compile (counted as
  // failed, and waiting for a repair when it is the model's).
  std::optional<int64_t> compiled_id(TaskState& s, Pending& pending, size_t k, const Checked& c) {
    int64_t id = candidate_id(s, c);
    if (pending.repaired.count(k)) s.repair_depth[id] = pending.repaired[k];
    if (c.report.ok()) return id;
    ++s.status.failed;
    note_failure(s, c, id, PromptKind::RepairCompile);
    return std::nullopt;
  }

  void start(TaskState& s, Pending& pending) {
    for (size_t k = 0; k < pending.children.size(); ++k) {
      Child& child = pending.children[k];
      if (stopping()) break;
      std::vector<Checked> got = take(child);
      if (stopping())
        break;  // a child the stop cut short is not recorded (a resumed run asks again)
      for (Checked& c : got) {
        if (stopping()) break;
        std::optional<int64_t> compiled = compiled_id(s, pending, k, c);
        if (!compiled) continue;
        int64_t id = *compiled;
        Family& f = family_of(s, c.proposal);
        Screen sc = screen(s, c, id, 0, child.island);
        ++s.status.screened;
        f.measured[c.report.tunables] = sc.median_ms;
        if (stopping()) break;
        Judgment j = judge(s, c, id, 0, child.island);
        ++s.status.judged;
        accept(s, c, id, j, child.island);
        // A kernel judged too big for this GPU's memory has nothing a repair could fix.
        if (j.outcome != verify::Outcome::Correct && j.outcome != verify::Outcome::DoesNotFit)
          note_failure(s, c, id, PromptKind::RepairWrong);
      }
    }
  }

  const Member& select_parent(const TaskState& s, int island, std::mt19937_64& rng) const {
    std::vector<const Member*> pool;
    for (const Member& m : s.members)
      if (m.island == island) pool.push_back(&m);
    if (pool.empty())
      for (const Member& m : s.members) pool.push_back(&m);
    std::uniform_real_distribution<double> u(0, 1);
    double r = u(rng);
    auto faster = [](const Member* a, const Member* b) { return a->time_ms < b->time_ms; };
    if (r < config_.select_best) return **std::min_element(pool.begin(), pool.end(), faster);
    if (r < config_.select_best + config_.select_elite) {
      std::map<std::string, const Member*> elites;  // per cell, the fastest
      for (const Member* m : pool)
        if (!elites.count(m->cell) || m->time_ms < elites[m->cell]->time_ms) elites[m->cell] = m;
      auto it = elites.begin();
      std::advance(it, static_cast<long>(rng() % elites.size()));
      return *it->second;
    }
    return *pool[rng() % pool.size()];
  }

  void migrate(TaskState& s) {
    int islands = std::max(config_.islands, 1);
    std::vector<Member> moved;
    for (int i = 0; i < islands; ++i) {
      const Member* best = nullptr;
      for (const Member& m : s.members)
        if (m.island == i && (!best || m.time_ms < best->time_ms)) best = &m;
      if (!best) continue;
      Member copy = *best;
      copy.island = (i + 1) % islands;
      bool there = std::any_of(s.members.begin(), s.members.end(), [&](const Member& m) {
        return m.id == copy.id && m.island == copy.island;
      });
      if (!there) moved.push_back(copy);
    }
    s.members.insert(s.members.end(), moved.begin(), moved.end());
  }

  Pending propose_generation(TaskState& s, int g) {
    Pending out;
    if (s.members.empty()) {
      ask_llm(s, g, out);  // fix mode: translations (and repairs) until one kernel is correct
      if (out.children.empty()) out.stopped = StopReason::NoCorrectKernelToStartFrom;
      return out;
    }
    int islands = std::max(config_.islands, 1);
    if (config_.migration_interval > 0 && g % config_.migration_interval == 0) migrate(s);
    for (int i = 0; i < islands; ++i) {
      std::mt19937_64 rng = rng_for(s, g, i);
      const Member& parent = select_parent(s, i, rng);
      Family& f = s.families.at(parent.family);
      size_t count = static_cast<size_t>(config_.children / islands +
                                         (i < config_.children % islands ? 1 : 0));
      // Each point is reserved as it is proposed, so another island proposes others.
      for (const compile::Tunables& t :
           propose_points(f.parsed, f.space, f.measured, count, rng, config_.tuner)) {
        f.measured.emplace(t, std::nullopt);  // the screen sets it
        Proposal p;
        p.task = s.task;
        p.source = f.source;
        p.plan = f.plan;
        p.tunables = t;
        p.lineage = {run_, {parent.id}, g, i, archive::LineageKind::Tune, "offline-tuner"};
        out.children.push_back({ev_.check_async(p, 1), parent.family, i});
      }
    }
    ask_llm(s, g, out);
    if (out.children.empty()) out.stopped = StopReason::TuneSpacesExhausted;
    return out;
  }

  void generation(TaskState& s, int g, Pending& pending) {
    if (pending.stopped) {
      s.status.stopped = to_string(*pending.stopped);
      return;
    }
    std::vector<Child>& children = pending.children;
    struct Screened {
      Checked checked;
      int64_t id;
      double median_ms;
      int island;
    };
    std::vector<Screened> correct;
    for (size_t k = 0; k < children.size(); ++k) {
      Child& child = children[k];
      if (stopping()) break;
      std::vector<Checked> got = take(child);
      if (stopping())
        break;  // a child the stop cut short is not recorded (a resumed run asks again)
      for (Checked& c : got) {
        if (stopping()) break;
        std::optional<int64_t> compiled = compiled_id(s, pending, k, c);
        if (!compiled) continue;  // a tuner point stays reserved, as not correct
        int64_t id = *compiled;
        Family& f = child.family.empty() ? family_of(s, c.proposal) : s.families.at(child.family);
        Screen sc = screen(s, c, id, g, child.island);
        ++s.status.screened;
        f.measured[c.report.tunables] = sc.median_ms;
        if (sc.median_ms) {
          correct.push_back({std::move(c), id, *sc.median_ms, child.island});
        } else if (from_llm(c)) {
          // A wrong LLM child is judged in full: its evidence (where, which dims, expected vs got)
          // is what the repair prompt shows.
          Judgment j = judge(s, c, id, g, child.island);
          ++s.status.judged;
          accept(s, c, id, j, child.island);
          note_failure(s, c, id, PromptKind::RepairWrong);
        } else {
          ++s.status.failed;
        }
      }
    }
    std::stable_sort(correct.begin(), correct.end(), [](const Screened& a, const Screened& b) {
      return a.median_ms < b.median_ms;
    });
    // The fastest few, when a screen puts them near the best (screens are shorter, so noisier).
    for (size_t k = 0; k < correct.size() && k < static_cast<size_t>(config_.judge_top); ++k) {
      if (stopping()) break;
      if (s.best && correct[k].median_ms > 1.05 * s.best->time_ms) break;
      Judgment j = judge(s, correct[k].checked, correct[k].id, g, correct[k].island);
      ++s.status.judged;
      accept(s, correct[k].checked, correct[k].id, j, correct[k].island);
    }
  }

  const RunConfig& config_;
  Evaluator& ev_;
  archive::RunLog log_;
  int64_t run_;
  const LoopHooks& hooks_;
  LlmProposer* llm_;
  Budget budget_;  // the limits and what the run and each task spent against them
  std::optional<StopReason> stopped_;  // why the run stops (none while it goes on)
  std::mutex mu_;  // the loop's state, held by the lane that works on it (run_lanes)
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

}  // namespace

RunSummary run_evolution(const RunConfig& config,
                         const std::vector<std::shared_ptr<const tasks::Task>>& tasks,
                         Evaluator& evaluator, std::optional<int64_t> resume,
                         const LoopHooks& hooks, LlmProposer* llm) {
  archive::RunLog log(evaluator.archive());
  archive::RunId run = resume ? archive::RunId{*resume} : log.start(config.to_json());
  double wall_before = resume ? log.recorded_wall_s(run) : 0;
  log.set_status(run, archive::RunStatus::Running, {{"wall_s", wall_before}});
  std::vector<TaskState> states;
  for (const auto& t : tasks) {
    evaluator.prepare(*t);
    TaskState s;
    s.task = t;
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
