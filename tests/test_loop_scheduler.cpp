// The loop's scheduler alone (evolve/src/loop/scheduler.h) under a scripted policy, and its
// proposers (loop/proposers.h): slots recorded and rounds committed in the order proposed whatever
// order their screens finish in, a duplicate child screened once, the evaluation budget exact, the
// stop flag, and the tuner's and the model's operators. The compiler (NVRTC) and the archive
// (SQLite) are real; only the GPU is fake (fake_gpu.h), here with screens that wait on cue.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "archive_sql.h"
#include "fake_gpu.h"
#include "kforge/archive/run_log.h"
#include "kforge/evolve/batch.h"
#include "kforge/evolve/run.h"
#include "loop/proposers.h"
#include "loop/scheduler.h"
#include "test_util.h"

namespace kforge::evolve::loop {
namespace {

using compile::Tunables;
using nlohmann::json;
using test::TempDir;

// The fake GPU, `lanes` screens at once; a screen takes `delay_ms`, and may not return before
// `may_finish` says so for its point (polled; at most 10 s, after which the test's order checks
// fail). It notes when screens start and the order they finish in.
class CueGpu : public test::FakeGpu {
 public:
  int lanes = 1;
  int delay_ms = 0;
  std::function<bool(const Tunables&)> may_finish;
  std::atomic<int> started{0}, finished{0};

  int parallel() const override { return lanes; }
  verify::Verdict screen(const tasks::Task& task, const Checked& c) override {
    ++started;
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    for (int ms = 0; may_finish && !may_finish(c.report.tunables) && ms < 10'000; ++ms)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::lock_guard<std::mutex> lock(mutex_);  // FakeGpu's counters are plain ints
    verify::Verdict v = FakeGpu::screen(task, c);
    order_.push_back(c.report.tunables);
    ++finished;
    return v;
  }
  std::vector<Tunables> finish_order() {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_;
  }

 private:
  std::mutex mutex_;
  std::vector<Tunables> order_;
};

// smoke/relu in a fresh archive with a run started: its seed and the seed's tune space (27 points).
struct Stage {
  TempDir dir;
  CueGpu gpu;
  std::unique_ptr<Evaluator> ev;
  std::shared_ptr<const tasks::Task> relu;
  RunConfig config;
  LoopHooks hooks;
  std::vector<TaskState> tasks;
  int64_t run = 0;
  Proposal seed;
  std::vector<Tunables> space;

  Stage() {
    EvaluatorOptions eo;
    eo.facts = compile::DeviceFacts::for_arch("sm_90a");
    eo.db = (dir.path() / "a.db").string();
    eo.compiler.workers = 2;
    ev = std::make_unique<Evaluator>(eo, &gpu);
    relu = std::make_shared<const tasks::Task>(tasks::load_task(
        tasks::resolve_tasks("smoke/relu", (test::source_dir() / "tasks").string()).at(0)));
    ev->prepare(*relu);
    TaskState s{relu, {}, Population(2, 0.5, 0.3), {}};
    s.task_id = ev->archive().upsert_task(*relu);
    s.status.task = relu->id();
    tasks.push_back(std::move(s));
    run = archive::RunLog(ev->archive()).start(config.to_json()).value;
    seed = starting_population(relu, ev->archive(), 4, run).at(0);
    space = compile::tune_space(compile::parse_plan_text(seed.plan, *relu, ev->task_tensors(*relu)),
                                relu->dims, ev->facts());
  }
  // The seed at point `k` of its space: round 0's a starting kernel, later rounds' a tuner's child.
  Proposal point(size_t k, int round, int island) const {
    Proposal p = seed;
    p.tunables = space.at(k);
    p.lineage.run = run, p.lineage.generation = round, p.lineage.island = island;
    if (round > 0) p.lineage.prompt_kind = archive::LineageKind::Tune, p.lineage.model = "tuner";
    return p;
  }
  std::unique_ptr<Scheduler> scheduler() {
    return std::make_unique<Scheduler>(config, *ev, run, hooks, nullptr, SpentBefore{}, tasks);
  }
  int64_t count(const std::string& sql) { return test::ArchiveSql(ev->archive()).count(sql); }
};

// What a commit saw of one child.
struct SeenChild {
  int64_t id = 0;
  Tunables point;
  std::optional<records::Screen> screen;
  bool skipped = false;     // not screened: a budget ran out first
  bool in_archive = false;  // its candidate row, and its screen row where it was screened
};
struct SeenRound {
  int number = 0;
  std::vector<SeenChild> children;  // in slot order
};

// A scripted policy: round r's slots are points `rounds[r]` of the seed (one child each), proposed
// `ahead` rounds past the last committed one; a commit notes what it saw and is done at once.
class Script : public Scheduler::Policy {
 public:
  using Rounds = std::vector<std::vector<size_t>>;
  Script(Stage& stage, Scheduler& scheduler, Rounds rounds, int ahead)
      : stage_(stage), scheduler_(scheduler), rounds_(std::move(rounds)), ahead_(ahead) {}

  void propose(size_t task, int round) override { through(task, round + ahead_ - 1); }
  void commit(Round& round, std::function<void()> done) override {
    SeenRound seen{round.number, {}};
    test::ArchiveSql sql(stage_.ev->archive());
    for (const SlotPtr& slot : round.slots)
      for (const Child& c : slot->children) {
        std::string id = std::to_string(c.id);
        bool rows = sql.count("SELECT count(*) FROM candidates WHERE id = " + id) == 1 &&
                    (!c.screen ||
                     sql.count("SELECT count(*) FROM screens WHERE candidate_id = " + id) == 1);
        seen.children.push_back({c.id, c.checked.report.tunables, c.screen, c.skipped, rows});
      }
    commits.push_back(std::move(seen));
    done();
  }
  void committed(const Round& round) override { through(round.task, round.number + ahead_); }

  std::vector<SeenRound> commits;

 private:
  void through(size_t task, int last) {
    TaskState& s = stage_.tasks[task];
    for (int r = s.proposed + 1;
         r <= last && r < static_cast<int>(rounds_.size()) && !scheduler_.stopping(); ++r) {
      s.proposed = r;
      RoundPtr round = scheduler_.open(task, r);
      for (size_t k = 0; k < rounds_[r].size(); ++k)
        scheduler_.add(*round, k % 2, stage_.point(rounds_[r][k], r, k % 2));
      scheduler_.submit(round);
    }
  }
  Stage& stage_;
  Scheduler& scheduler_;
  Rounds rounds_;
  int ahead_;
};

double screen_ms(const Tunables& t) {
  return test::FakeGpu::time_of(t) * 1.01;  // the fake's screen of this point
}

// Screens finish out of order (the first slot of round 0 last of rounds 0 and 1, round 1's first
// slot after its others), yet candidates get ids in proposal order and rounds commit in order, each
// with every child recorded and holding its own point's screen.
TEST(LoopScheduler, RecordsInProposalOrderWhateverOrderScreensFinishIn) {
  Stage st;
  st.gpu.lanes = 4;
  // Points P0-P3 are round 0's slots, P4-P6 round 1's, P7-P8 round 2's (proposed once 0 commits).
  const Tunables first = st.space[0], second = st.space[4];  // round 0's and round 1's first slots
  st.gpu.may_finish = [&](const Tunables& t) {
    if (t == first) return st.gpu.finished >= 6;   // after rounds 0 and 1's other five and P4
    if (t == second) return st.gpu.finished >= 5;  // after P1-P3, P5 and P6
    return true;
  };
  std::vector<Tunables> screen_events;
  st.hooks.on_event = [&](const LoopEvent& e, const TaskStatus&) {
    if (e.kind == LoopEvent::Kind::Screen) screen_events.push_back(e.tunables.get<Tunables>());
  };
  std::unique_ptr<Scheduler> scheduler = st.scheduler();
  Script script(st, *scheduler, {{0, 1, 2, 3}, {4, 5, 6}, {7, 8}}, /*ahead=*/2);
  scheduler->run(script);

  EXPECT_EQ(scheduler->stopped(), std::nullopt);
  std::vector<Tunables> finish = st.gpu.finish_order();
  ASSERT_EQ(finish.size(), 9u);
  EXPECT_EQ(finish[5], second) << "the test's screens did not finish out of order";
  EXPECT_EQ(finish[6], first) << "the test's screens did not finish out of order";
  ASSERT_EQ(screen_events.size(), 9u);
  EXPECT_NE(screen_events[0], first) << "the scheduler saw the screens in proposal order anyway";

  ASSERT_EQ(script.commits.size(), 3u);
  int64_t last_id = 0;
  size_t k = 0;
  for (int r = 0; r < 3; ++r) {
    const SeenRound& round = script.commits[r];
    EXPECT_EQ(round.number, r) << "rounds committed out of order";
    for (const SeenChild& c : round.children) {
      EXPECT_EQ(c.point, st.space[k]) << "round " << r;
      EXPECT_GT(c.id, last_id) << "point " << k << " recorded out of proposal order";
      EXPECT_TRUE(c.in_archive) << "point " << k << " not recorded when its round committed";
      ASSERT_TRUE(c.screen) << "point " << k;
      ASSERT_TRUE(c.screen->median_ms) << "point " << k;
      EXPECT_DOUBLE_EQ(*c.screen->median_ms, screen_ms(c.point)) << "another point's screen";
      last_id = c.id, ++k;
    }
  }
  EXPECT_EQ(k, 9u);
  EXPECT_EQ(st.count("SELECT count(*) FROM candidates"), 9);
  EXPECT_EQ(st.count("SELECT count(*) FROM screens WHERE run_id = " + std::to_string(st.run)), 9);
  EXPECT_EQ(scheduler->budget().measured(), 9);
}

// A child of the same code, plan and tunables as another (twice in a round, again a round later)
// is screened once: every copy gets that screen and the copies share one candidate and one screen
// row. Round 0's copy waits for the screen under way (the GPU holds it until the duplicate is
// seen); round 1's takes the one already done.
TEST(LoopScheduler, ADuplicateChildIsScreenedOnce) {
  Stage st;
  st.gpu.lanes = 2;
  const size_t a = 3, b = 5, c = 7;
  std::atomic<int> duplicates{0};
  st.hooks.on_event = [&](const LoopEvent& e, const TaskStatus&) {
    if (e.kind == LoopEvent::Kind::Duplicate) ++duplicates;
  };
  st.gpu.may_finish = [&](const Tunables& t) { return t != st.space[a] || duplicates > 0; };
  std::unique_ptr<Scheduler> scheduler = st.scheduler();
  Script script(st, *scheduler, {{a, a, b}, {a, c}}, /*ahead=*/1);
  scheduler->run(script);

  EXPECT_EQ(scheduler->stopped(), std::nullopt);
  EXPECT_EQ(st.gpu.screened, 3) << "a, b and c, each once";
  EXPECT_EQ(scheduler->budget().measured(), 3);
  EXPECT_EQ(duplicates, 2);
  ASSERT_EQ(script.commits.size(), 2u);
  std::vector<SeenChild> copies = {script.commits[0].children[0], script.commits[0].children[1],
                                   script.commits[1].children[0]};
  for (const SeenChild& copy : copies) {
    EXPECT_EQ(copy.point, st.space[a]);
    EXPECT_EQ(copy.id, copies[0].id) << "a copy recorded as a candidate of its own";
    ASSERT_TRUE(copy.screen && copy.screen->median_ms) << "a copy without the screen";
    EXPECT_EQ(copy.screen->outcome, verify::Outcome::Correct);
    EXPECT_DOUBLE_EQ(*copy.screen->median_ms, screen_ms(st.space[a]));
  }
  EXPECT_NE(script.commits[0].children[2].id, copies[0].id);
  EXPECT_EQ(st.count("SELECT count(*) FROM candidates"), 3);
  std::string id = std::to_string(copies[0].id);
  EXPECT_EQ(st.count("SELECT count(*) FROM screens WHERE candidate_id = " + id), 1);
  EXPECT_EQ(st.count("SELECT count(*) FROM screens"), 3);
}

// With ten screens queued on four GPU lanes and an evaluation budget of 3, exactly three are
// measured, and the run says why it stopped.
TEST(LoopScheduler, TheEvaluationBudgetStopsMeasuringAtExactlyItsLimit) {
  Stage st;
  st.gpu.lanes = 4;
  st.gpu.delay_ms = 20;
  st.config.evaluations = 3;
  std::unique_ptr<Scheduler> scheduler = st.scheduler();
  Script script(st, *scheduler, {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10, 11}}, /*ahead=*/1);
  scheduler->run(script);

  ASSERT_TRUE(scheduler->stopped());
  EXPECT_EQ(to_string(*scheduler->stopped()), "evaluation budget reached");
  EXPECT_EQ(st.tasks[0].status.stopped, "") << "the run's budget, not the task's";
  EXPECT_EQ(st.gpu.started, 3);
  EXPECT_EQ(st.gpu.screened, 3);
  EXPECT_EQ(scheduler->budget().measured(), 3);
  EXPECT_EQ(scheduler->budget().evaluations(), 3);
  EXPECT_LE(st.count("SELECT count(*) FROM screens"), 3);
  // Round 0 commits when its refused screens came back skipped before the stop dropped them; the
  // next round is never proposed.
  ASSERT_LE(script.commits.size(), 1u);
  for (const SeenRound& round : script.commits) {
    int screened = 0;
    for (const SeenChild& c : round.children) {
      EXPECT_NE(c.screen.has_value(), c.skipped) << "neither screened nor skipped";
      screened += c.screen.has_value();
    }
    EXPECT_EQ(screened, 3);
  }
}

// The hooks' stop flag, raised at the first screen: the run ends interrupted, and the screen under
// way then (on the one GPU lane) is the last to start.
TEST(LoopScheduler, TheStopFlagEndsTheRunAfterTheScreenUnderWay) {
  Stage st;
  st.gpu.lanes = 1;
  st.gpu.delay_ms = 50;
  std::atomic<int> stop{0};
  int screens = 0;
  st.hooks.stop = &stop;
  st.hooks.on_event = [&](const LoopEvent& e, const TaskStatus&) {
    if (e.kind == LoopEvent::Kind::Screen && ++screens == 1) stop = 1;
  };
  std::unique_ptr<Scheduler> scheduler = st.scheduler();
  Script script(st, *scheduler, {{0, 1, 2, 3, 4, 5}, {6, 7}}, /*ahead=*/2);
  auto t0 = std::chrono::steady_clock::now();
  scheduler->run(script);

  EXPECT_EQ(scheduler->stopped(), StopReason::Interrupted);
  EXPECT_GE(st.gpu.started, 1);
  EXPECT_LE(st.gpu.started, 2) << "a screen started after the stop";
  EXPECT_EQ(st.gpu.finished, st.gpu.started) << "the screen under way did not finish";
  EXPECT_EQ(scheduler->budget().measured(), st.gpu.started) << "it finished and counts";
  EXPECT_EQ(screens, st.gpu.started);
  EXPECT_TRUE(script.commits.empty());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

// Where a proposer puts its slots: noted, nothing run.
struct Sink : Slots {
  std::vector<std::pair<int, Proposal>> added;  // island, proposal
  int asked = 0;
  void event(const TaskState&, LoopEvent) override {}
  void spent_gpu(const TaskState&, double) override {}
  void add(Round&, int island, Proposal p) override { added.emplace_back(island, std::move(p)); }
  void ask(Round&, int, std::optional<int>, std::vector<First>, std::function<Job()>) override {
    ++asked;
  }
};

// "tune" writes `count` distinct points of the parent's tune space, none measured before, each a
// slot of its own with the parent's code and a tuner's lineage, each reserved as it is proposed (so
// the next ask gets others); a parent not in the population gets none.
TEST(LoopScheduler, TheTunerProposesUnmeasuredPointsAndReservesThem) {
  Stage st;
  TaskState& s = st.tasks[0];
  Family& f = family_of(s, *st.ev, st.seed.source, st.seed.plan);
  ASSERT_EQ(f.space, st.space);
  ASSERT_GE(f.space.size(), 10u);
  f.measured[f.space[0]] = 1.0, f.measured[f.space[1]] = std::nullopt;  // screened before
  const compile::Tunables parent_point = f.space[0];
  ASSERT_TRUE(s.population.accept(
      {42, Population::family_key(f.source, f.plan), parent_point, 1.0, "cell", 1}, true));
  TunerProposer tuner(st.config, *st.ev, st.run);
  EXPECT_TRUE(tuner.writes("tune"));
  EXPECT_FALSE(tuner.writes("optimize"));
  EXPECT_FALSE(tuner.writes("translate"));

  Round round;
  round.number = 3;
  Want want;
  want.op = "tune", want.parents = {42}, want.island = 1, want.count = 3;
  std::set<Tunables> before;
  for (const auto& [t, ms] : f.measured) before.insert(t);
  Sink sink;
  tuner.propose(s, round, want, sink);
  ASSERT_EQ(sink.added.size(), 3u);
  EXPECT_EQ(sink.asked, 0);
  std::set<Tunables> proposed;
  for (const auto& [island, p] : sink.added) {
    ASSERT_TRUE(p.tunables);
    EXPECT_TRUE(proposed.insert(*p.tunables).second) << "a point proposed twice";
    EXPECT_FALSE(before.count(*p.tunables)) << "a point measured before";
    EXPECT_TRUE(std::count(f.space.begin(), f.space.end(), *p.tunables)) << "not of the space";
    auto reserved = f.measured.find(*p.tunables);
    ASSERT_NE(reserved, f.measured.end()) << "not reserved";
    EXPECT_EQ(reserved->second, std::nullopt);
    EXPECT_EQ(island, 1);
    EXPECT_EQ(p.task, st.relu);
    EXPECT_EQ(p.source, f.source);
    EXPECT_EQ(p.plan, f.plan);
    EXPECT_EQ(p.lineage.run, st.run);
    EXPECT_EQ(p.lineage.parents, std::vector<int64_t>{42});
    EXPECT_EQ(p.lineage.generation, 3);
    EXPECT_EQ(p.lineage.island, 1);
    EXPECT_EQ(p.lineage.prompt_kind, archive::LineageKind::Tune);
    EXPECT_EQ(p.lineage.model, "offline-tuner");
  }
  EXPECT_EQ(f.measured.size(), 5u);

  Sink again;
  tuner.propose(s, round, want, again);
  ASSERT_EQ(again.added.size(), 3u);
  for (const auto& [island, p] : again.added)
    EXPECT_FALSE(proposed.count(*p.tunables)) << "a reserved point proposed again";

  Sink none;
  want.parents = {43};
  tuner.propose(s, round, want, none);
  EXPECT_TRUE(none.added.empty()) << "a parent not in the population";
}

// The model writes its prompt kinds by name, all but "idea" (part of "ideas"); not "tune".
TEST(LoopScheduler, TheModelWritesItsPromptKindsByName) {
  Stage st;
  TempDir batch;
  LlmProposer llm(std::make_shared<const BatchExchange>(batch.path(), "batch"),
                  (test::source_dir() / "prompts").string(), "a test GPU");
  ModelProposer model(st.config, *st.ev, st.run, llm);
  for (const char* op :
       {"optimize", "crossover", "ideas", "translate", "repair_compile", "repair_wrong"})
    EXPECT_TRUE(model.writes(op)) << op;
  for (const char* op : {"tune", "idea", "", "Optimize", "repair"})
    EXPECT_FALSE(model.writes(op)) << op;
}

}  // namespace
}  // namespace kforge::evolve::loop
