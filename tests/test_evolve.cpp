// The search loop (issue 18) on the CPU: the real compiler (NVRTC workers), the real archive (a
// SQLite file), the real loop; only the GPU is fake (fake_gpu.h).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <regex>

#include <algorithm>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "archive_sql.h"
#include "fake_gpu.h"
#include "kforge/archive/sqlite.h"
#include "kforge/common/files.h"
#include "kforge/common/process.h"
#include "kforge/common/sandbox.h"
#include "kforge/evolve/batch.h"
#include "kforge/evolve/features.h"
#include "kforge/evolve/run.h"
#include "kforge/evolve/run_setup.h"
#include "kforge/evolve/tuner.h"
#include "loop_rig.h"
#include "loopback_model.h"
#include "test_util.h"

namespace {

using namespace kforge;
using kforge::test::FakeGpu;
using kforge::test::TempDir;
using nlohmann::json;

std::string tasks_dir() {
  return (kforge::test::source_dir() / "tasks").string();
}

std::shared_ptr<const tasks::Task> task(const std::string& spec) {
  return std::make_shared<const tasks::Task>(
      tasks::load_task(tasks::resolve_tasks(spec, tasks_dir()).at(0)));
}

compile::Plan plan_with(std::vector<std::pair<std::string, std::vector<int64_t>>> tune) {
  compile::Plan p;
  p.tune = std::move(tune);
  return p;
}

std::vector<compile::Tunables> product(const compile::Plan& p) {
  std::vector<compile::Tunables> out{{}};
  for (const auto& [name, values] : p.tune) {
    std::vector<compile::Tunables> next;
    for (const auto& t : out)
      for (int64_t v : values) {
        compile::Tunables u = t;
        u[name] = v;
        next.push_back(u);
      }
    out = next;
  }
  return out;
}

TEST(Tuner, SmallSpacesAreMeasuredInOrderAndNeverTwice) {
  compile::Plan p = plan_with({{"A", {1, 2, 3}}, {"B", {8, 16}}});
  auto space = product(p);
  std::mt19937_64 rng(1);
  evolve::Measured measured;
  auto first = evolve::propose_points(p, space, measured, 4, rng);
  ASSERT_EQ(first.size(), 4u);
  EXPECT_EQ(first, std::vector<compile::Tunables>(space.begin(), space.begin() + 4));
  for (const auto& t : first) measured[t] = 1.0;
  auto rest = evolve::propose_points(p, space, measured, 10, rng);
  EXPECT_EQ(rest, std::vector<compile::Tunables>(space.begin() + 4, space.end()));
  for (const auto& t : rest) measured[t] = std::nullopt;
  EXPECT_TRUE(evolve::propose_points(p, space, measured, 10, rng).empty());
}

TEST(Tuner, LargeSpacesSearchNearTheFastestAndRepeatWithTheSameSeed) {
  compile::Plan p = plan_with(
      {{"A", {1, 2, 3, 4, 5, 6, 7, 8}}, {"B", {1, 2, 3, 4, 5, 6, 7, 8}}, {"C", {1, 2, 3, 4}}});
  auto space = product(p);  // 256 points
  evolve::TunerOptions o;
  o.exhaustive_max = 16;
  auto run = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    evolve::Measured measured;
    std::vector<compile::Tunables> all;
    for (int gen = 0; gen < 6; ++gen) {
      auto batch = evolve::propose_points(p, space, measured, 8, rng, o);
      EXPECT_EQ(batch.size(), 8u);
      for (const auto& t : batch) {
        EXPECT_FALSE(measured.count(t)) << "proposed twice";
        // A bowl with its floor at A=6, B=3, C=2.
        measured[t] =
            std::abs(t.at("A") - 6) + std::abs(t.at("B") - 3) + std::abs(t.at("C") - 2) + 1.0;
        all.push_back(t);
      }
    }
    return all;
  };
  auto a = run(7), b = run(7), c = run(8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // 48 of 256 points, and the search got within one step of the floor: random alone would need
  // luck.
  double best = 1e9;
  for (const auto& t : a)
    best = std::min(
        best, std::abs(t.at("A") - 6) + std::abs(t.at("B") - 3) + std::abs(t.at("C") - 2) + 1.0);
  EXPECT_LE(best, 2.0);
}

// A kernel's time over 7 tunables of 2-3 values each: each tunable matters by a different amount,
// two of them interact, and a few points do not run (as constraints and wrong results do).
evolve::Measured synthetic_table(const compile::Plan& p,
                                 const std::vector<compile::Tunables>& space) {
  evolve::Measured table;
  for (const auto& t : space) {
    double ms = 1.0 + 0.30 * (t.at("BM") != 64) + 0.12 * (t.at("BK") == 8) +
                0.07 * std::abs(t.at("TM") - 4) / 2 + 0.05 * (t.at("UNROLL") == 1) +
                0.04 * (t.at("W") == 2) + 0.035 * (t.at("X") != 3) +
                0.25 * (t.at("BM") == 64 && t.at("TM") == 8) + 0.032 * (t.at("Y") == 0);
    if (t.at("BM") == 128 && t.at("BK") == 32 && t.at("TM") == 8)
      continue;  // does not screen correct
    table[t] = ms;
  }
  return table;
}

TEST(Tuner, ReachesWithinThreePercentOfTheExhaustiveBestInAQuarterOfTheSpace) {
  compile::Plan p = plan_with({{"BM", {32, 64, 128}},
                               {"BK", {8, 16, 32}},
                               {"TM", {2, 4, 8}},
                               {"UNROLL", {1, 2}},
                               {"W", {1, 2}},
                               {"X", {1, 3}},
                               {"Y", {0, 1}}});
  auto space = product(p);  // 432 points; the start is the first, far from the best
  evolve::Measured table = synthetic_table(p, space);
  std::vector<size_t> tuner, random;
  evolve::TunerOptions pure_random{.exhaustive_max = 0, .elite = 0, .random_share = 1};
  for (uint64_t seed = 1; seed <= 41; ++seed) {
    tuner.push_back(evolve::evaluations_to_reach(p, space, table, space.front(), 8, 2, 0.03, seed)
                        .value_or(space.size()));
    random.push_back(
        evolve::evaluations_to_reach(p, space, table, space.front(), 8, 2, 0.03, seed, pure_random)
            .value_or(space.size()));
  }
  std::sort(tuner.begin(), tuner.end());
  std::sort(random.begin(), random.end());
  // The aim of issue 18's benchmark, on a known function; and better than random search.
  EXPECT_LE(tuner[tuner.size() / 2], space.size() / 4)
      << "random search: " << random[random.size() / 2];
  EXPECT_LT(tuner[tuner.size() / 2], random[random.size() / 2]);
  // The same stream, the same count; every point is counted once (a generation at a time).
  EXPECT_EQ(evolve::evaluations_to_reach(p, space, table, space.front(), 8, 2, 0.03, 5),
            evolve::evaluations_to_reach(p, space, table, space.front(), 8, 2, 0.03, 5));
  EXPECT_EQ((tuner[0] - 1) % 8, 0u);
}

using kforge::test::Rig;

evolve::RunConfig small_config() {
  evolve::RunConfig c;
  c.tasks = {"smoke/relu"};
  c.generations = 3;
  c.children = 6;
  c.judge_top = 2;
  c.islands = 2;
  c.migration_interval = 2;
  c.tuner.exhaustive_max = 8;  // relu's seed has 36 points: the evolutionary search runs
  c.operators = {1, 0,
                 0};  // the LLM's children optimize (tests of the other operators set their mix)
  return c;
}

TEST(Evolve, OfflineRunRecordsEveryChildWithItsLineage) {
  Rig s;
  evolve::RunSummary r =
      evolve::run_evolution(small_config(), {task("smoke/relu")}, *s.evaluator, std::nullopt);
  ASSERT_EQ(r.tasks.size(), 1u);
  const evolve::TaskStatus& t = r.tasks[0];
  EXPECT_EQ(t.generation, 3);
  EXPECT_EQ(t.screened, 1 + 3 * 6) << "the seed, then six children a generation";
  EXPECT_EQ(s.gpu.screened, t.screened);
  EXPECT_EQ(s.gpu.verified, t.judged);
  ASSERT_TRUE(t.best_ms);
  // The best is the fastest point judged, and at least as fast as the seed's default point.
  EXPECT_LE(*t.best_ms,
            FakeGpu::time_of({{"BLOCK", 128}, {"BLOCKS_PER_SM", 65536}, {"UNROLL", 2}}));
  EXPECT_EQ(s.count("SELECT count(*) FROM screens WHERE run_id = " + std::to_string(r.run)),
            t.screened);
  // Children: made by the tuner, one parent each, generation and island recorded.
  EXPECT_EQ(s.count("SELECT count(*) FROM candidates WHERE prompt_kind = 'tune' AND model = "
                    "'offline-tuner' AND run_id = " +
                    std::to_string(r.run)),
            18);
  EXPECT_EQ(
      s.count(
          "SELECT count(*) FROM candidates c WHERE prompt_kind = 'tune' AND (SELECT count(*) FROM "
          "candidate_parents p WHERE p.candidate_id = c.id) != 1"),
      0);
  EXPECT_EQ(s.count("SELECT count(DISTINCT island) FROM candidates WHERE prompt_kind = 'tune'"), 2);
  EXPECT_EQ(s.count("SELECT max(generation) FROM candidates"), 3);
  // No point screened twice; every new best admitted.
  EXPECT_EQ(s.count("SELECT count(*) FROM (SELECT candidate_id FROM screens GROUP BY candidate_id "
                    "HAVING count(*) > 1)"),
            0);
  EXPECT_GE(s.gpu.admitted, 1);
  EXPECT_EQ(s.count("SELECT status = 'finished' FROM runs WHERE id = " + std::to_string(r.run)), 1);
  // The task's references were timed once, before generation 0, and kept for the prompts; a second
  // run on this GPU does not time them again.
  EXPECT_EQ(s.gpu.baselined, 1);
  EXPECT_EQ(s.count("SELECT count(*) FROM baselines WHERE math_mode = 'ieee'"), 1);
  EXPECT_EQ(s.count("SELECT count(*) FROM baselines b JOIN baseline_times t ON t.baseline_id = "
                    "b.id WHERE b.math_mode = 'ieee' AND (t.kind, t.ms) IN (VALUES ('eager', 1.0), "
                    "('scripted', 1.1), ('compiled', 0.9), ('compiled_max_autotune', 0.8))"),
            4);
  evolve::run_evolution(small_config(), {task("smoke/relu")}, *s.evaluator, std::nullopt);
  EXPECT_EQ(s.gpu.baselined, 1);
}

// Issue 19: a run resumed on another machine of the same kind (a batch API's answers can take
// hours) reads its records back instead of measuring its history again; another kind measures.
TEST(Evolve, AResumedRunReadsBackWhatAnotherGpuOfTheSameKindMeasured) {
  Rig s;
  evolve::RunSummary first =
      evolve::run_evolution(small_config(), {task("smoke/relu")}, *s.evaluator, std::nullopt);
  for (bool same_kind : {true, false}) {
    FakeGpu other;
    other.uuid = same_kind ? "GPU-fake-1111" : "GPU-fake-2222";
    if (!same_kind) other.name = "Another Fake GPU";
    evolve::EvaluatorOptions eo;
    eo.facts = compile::DeviceFacts::for_arch("sm_90a");
    eo.db = (s.dir.path() / "a.db").string();
    eo.compiler.workers = 2;
    evolve::Evaluator ev(eo, &other);
    evolve::RunSummary r =
        evolve::run_evolution(small_config(), {task("smoke/relu")}, ev, first.run);
    if (same_kind) {
      EXPECT_EQ(r.evaluations, 0);
      EXPECT_EQ(r.reused, first.evaluations);
      EXPECT_EQ(other.screened + other.verified + other.baselined, 0);
    } else {
      EXPECT_EQ(r.evaluations, first.evaluations)
          << "another kind of GPU measures everything itself";
      EXPECT_EQ(other.baselined, 1);
    }
  }
}

// Session 21: a run stopped by its budget and resumed as it was stopped again at once (the GPU
// call that resumed one spent a minute on nothing); budgets given with --resume are its new
// totals, recorded, so a later resume keeps them.
TEST(Evolve, ResumeWithANewBudgetGoesOnAndKeepsIt) {
  Rig s;
  evolve::RunConfig c = small_config();
  c.evaluations = 7;
  evolve::RunSummary first =
      evolve::run_evolution(c, {task("smoke/relu")}, *s.evaluator, std::nullopt);
  ASSERT_EQ(first.stopped, "evaluation budget reached");
  auto config_of = [&](const evolve::RunRequest& r) {
    return evolve::run_config_for(r, [&]() -> archive::Archive& { return s.evaluator->archive(); });
  };
  evolve::RunRequest again;
  again.resume = first.run;
  again.generations = 99;  // not a budget: ignored on a resume
  evolve::RunConfig same = config_of(again);
  EXPECT_EQ(same.evaluations, 7);
  EXPECT_EQ(same.generations, c.generations);
  evolve::RunSummary stopped =
      evolve::run_evolution(same, {task("smoke/relu")}, *s.evaluator, first.run);
  // As it was, the run stops at its budget: nothing measured again, nothing new (its replay may
  // stop before it has read back all 7: they are spent whatever it reaches).
  EXPECT_EQ(stopped.evaluations, 0);
  EXPECT_LE(stopped.reused, 7);
  EXPECT_EQ(stopped.stopped, "evaluation budget reached");
  evolve::RunRequest more = again;
  more.evaluations = 12;
  evolve::RunConfig extended = config_of(more);
  EXPECT_EQ(extended.evaluations, 12);
  evolve::RunSummary second =
      evolve::run_evolution(extended, {task("smoke/relu")}, *s.evaluator, first.run);
  EXPECT_EQ(second.stopped, "evaluation budget reached");
  EXPECT_EQ(second.evaluations, 5);  // 12 in all, the 7 spent before counting

  EXPECT_EQ(config_of(again).evaluations, 12) << "the new budget was not recorded";
}

TEST(Evolve, EachBudgetStopsTheRunAtItsLimit) {
  {
    Rig s;
    evolve::RunConfig c = small_config();
    c.evaluations = 7;
    evolve::RunSummary r =
        evolve::run_evolution(c, {task("smoke/relu")}, *s.evaluator, std::nullopt);
    EXPECT_EQ(r.stopped, "evaluation budget reached");
    EXPECT_EQ(r.evaluations, 7);
    EXPECT_EQ(s.gpu.screened + s.gpu.verified, 7);
  }
  {
    Rig s;
    evolve::RunConfig c = small_config();
    c.task_evaluations = 5;
    evolve::RunSummary r =
        evolve::run_evolution(c, {task("smoke/relu")}, *s.evaluator, std::nullopt);
    EXPECT_EQ(r.tasks[0].stopped, "task evaluation budget reached");
    EXPECT_LE(r.evaluations, 5 + c.children + c.judge_top);  // checked between generations
  }
  // The time budgets: each screen and judgment takes 30 ms, the budgets a quarter of a second.
  for (std::string budget : {"minutes", "gpu_minutes", "task_gpu_minutes"}) {
    Rig s;
    s.gpu.busy_ms = 30;
    evolve::RunConfig c = small_config();
    c.generations = 50;
    (budget == "minutes"       ? c.minutes
     : budget == "gpu_minutes" ? c.gpu_minutes
                               : c.task_gpu_minutes) = 0.25 / 60;
    evolve::RunSummary r =
        evolve::run_evolution(c, {task("smoke/relu")}, *s.evaluator, std::nullopt);
    std::string why = budget == "minutes"       ? "time budget reached"
                      : budget == "gpu_minutes" ? "GPU time budget reached"
                                                : "task GPU time budget reached";
    EXPECT_EQ(budget == "task_gpu_minutes" ? r.tasks[0].stopped : r.stopped, why) << budget;
    EXPECT_GE(budget == "minutes" ? r.wall_s : r.gpu_s, 0.25) << budget;
    // Stopped near the limit: checked after each measurement, the one under way then finishing
    // (per task: between rounds, `lookahead` of them proposed ahead).
    EXPECT_LE(r.evaluations, budget == "task_gpu_minutes" ? 8 + 2 * (c.children + c.judge_top) : 10)
        << budget;
  }
  {
    Rig s;
    evolve::RunConfig c = small_config();
    c.target_speedup = 1.0;  // eager is 1 ms; every fake time is at most 1.5 ms, so the first best
                             // below 1 ms ends it
    evolve::RunSummary r =
        evolve::run_evolution(c, {task("smoke/relu")}, *s.evaluator, std::nullopt);
    if (r.tasks[0].best_ms && *r.tasks[0].best_ms <= 1.0) {
      EXPECT_EQ(r.tasks[0].stopped, "target speedup reached");
    }
  }
  {
    Rig s;
    s.gpu.busy_ms = 20;  // the GPU the slow part: no measured result waits for the loop's thread
    std::atomic<int> stop{0};
    evolve::LoopHooks hooks;
    hooks.stop = &stop;
    int events = 0;
    double last_t = -1;
    hooks.on_event = [&](const evolve::LoopEvent& e, const evolve::TaskStatus& st) {
      EXPECT_EQ(st.task, "smoke/relu");
      EXPECT_EQ(e.task, "smoke/relu");
      EXPECT_GE(e.t, last_t);  // the run's clock, for the throughput benchmark
      last_t = e.t;
      EXPECT_EQ(e.evaluations, events + 1);
      EXPECT_GE(e.gpu_s, 0.0);
      json line = e.to_json();  // the --log-json line
      EXPECT_EQ(line.at("event"), evolve::to_string(e.kind));
      EXPECT_EQ(line.at("evaluations").get<int64_t>(), e.evaluations);
      if (++events == 4) stop = 1;  // Ctrl-C: what is in flight finishes, nothing new starts
    };
    evolve::RunSummary r = evolve::run_evolution(small_config(), {task("smoke/relu")}, *s.evaluator,
                                                 std::nullopt, hooks);
    EXPECT_EQ(r.stopped, "interrupted");
    // The measurement the GPU had started when the stop came finishes and counts.
    EXPECT_GE(r.evaluations, 4);
    EXPECT_LE(r.evaluations, 5);
    EXPECT_EQ(s.count("SELECT status = 'interrupted' FROM runs"), 1);
  }
}

// A loopback LLM endpoint answering as a model would: every optimize request with code that does
// not compile (the model's mistake), every repair with working code; it records what it was asked.
class ScriptedModel {
 public:
  // `mode`: "" as above; "prose": every answer is words without code; "down": every call is a 500;
  // "good": every kernel answer compiles and is correct (each marked, so each is new code).
  explicit ScriptedModel(std::string mode = "")
      : model_([this, mode,
                seed = *read_file(
                    (kforge::test::source_dir() / "tasks/smoke/seeds/relu.md").string())](
                   const std::string& prompt) -> std::optional<std::string> {
          if (mode == "down") return std::nullopt;
          if (prompt.find("distinct optimisation ideas as a numbered list") !=
              std::string::npos)  // prompts/ideas.md
            return "Here are my ideas.\n\n1. Vectorise the loads\n   with float4.\n2) Unroll by "
                   "four.\n3. Use a grid-stride "
                   "loop.\n";
          bool repair = prompt.find("was rejected before it could run") !=
                        std::string::npos;  // prompts/repair_compile.md
          std::string answer = seed;
          size_t code = answer.find("```cuda\n") + 8;
          answer.insert(code, repair || mode == "good"
                                  ? "// answer " + std::to_string(++repairs_) + "\n"
                                  : "#error deliberately broken " + std::to_string(++asks_) + "\n");
          if (mode == "prose")
            answer = "I would vectorise the loads and unroll by " + std::to_string(asks_) + ".";
          return answer;
        }) {}
  std::unique_ptr<evolve::LlmProposer> proposer(const std::string& cache) {
    return model_.proposer(cache);
  }
  std::vector<std::string> prompts() { return model_.prompts(); }
  std::vector<json> requests() { return model_.requests(); }
  std::string base_url() const { return model_.base_url(); }

 private:
  std::atomic<int> asks_{0}, repairs_{0};
  kforge::test::LoopbackModel model_;  // last: its server, which uses the counters, stops first
};

TEST(Evolve, LlmChildrenJoinTheLoopAndAFailedChildIsRepairedWithItsEvidence) {
  ScriptedModel model;
  Rig s;
  std::string cache = (s.dir.path() / "llm-cache").string();
  evolve::RunConfig c = small_config();
  c.generations = 2;
  c.llm_children = 2;
  c.children = 2;   // the tuner's children beside them
  c.lookahead = 1;  // one round at a time: a failure's repair is asked in the next generation
  {
    auto llm = model.proposer(cache);
    evolve::RunSummary r =
        evolve::run_evolution(c, {task("smoke/relu")}, *s.evaluator, std::nullopt, {}, llm.get());
    EXPECT_EQ(r.llm.calls,
              4);  // two optimizations in generation 1, their two repairs in generation 2
    EXPECT_EQ(r.llm.tokens_in, 4000);
    EXPECT_EQ(r.llm.tokens_out, 2000);
  }
  // The run's report: per task, the proposers with their share correct, what the model cost.
  kforge::test::CliResult report =
      kforge::test::run_kforge("report 1 --db " + (s.dir.path() / "a.db").string());
  EXPECT_EQ(report.code, 0) << report.out;
  EXPECT_NE(report.out.find("| smoke/relu |"), std::string::npos) << report.out;
  // What it spent in words, its config as a JSON block (issue 40: not one-line blobs).
  EXPECT_TRUE(std::regex_search(report.out, std::regex("Spent: [0-9]+ evaluations, [0-9.]+ s of "
                                                       "GPU, [0-9.]+ s wall; LLM: [0-9]+ answers")))
      << report.out;
  EXPECT_NE(report.out.find("Config:\n\n```json\n{\n"), std::string::npos) << report.out;
  kforge::test::CliResult runs =
      kforge::test::run_kforge("archive runs --db " + (s.dir.path() / "a.db").string());
  EXPECT_EQ(runs.code, 0) << runs.out;
  EXPECT_NE(runs.out.find("SPENT"), std::string::npos) << runs.out;
  EXPECT_EQ(runs.out.find("{\""), std::string::npos) << "no JSON in the table\n" << runs.out;
  EXPECT_NE(report.out.find("| optimize | scripted | 2 | 0 | 0% |"), std::string::npos)
      << report.out;
  EXPECT_NE(report.out.find("| repair_compile | scripted | 2 | 2 | 100% |"), std::string::npos)
      << report.out;
  EXPECT_NE(report.out.find(
                "LLM: 4 answer(s) (0 from the cache), 0 failed call(s); 4000 tokens in, 2000 out"),
            std::string::npos)
      << report.out;
  EXPECT_NE(report.out.find("## Winners' lineage"), std::string::npos);
  // Where the speed came from: the best after each generation and who proposed each new best.
  EXPECT_NE(report.out.find("## Best by generation"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("| g0 | g1 | g2 |"), std::string::npos) << report.out;
  EXPECT_NE(report.out.find("x best (seed) |"), std::string::npos) << report.out;
  // Every child recorded with its lineage: the broken ones too, with their compile failure.
  EXPECT_EQ(s.count("SELECT count(*) FROM candidates WHERE prompt_kind = 'optimize' AND model = "
                    "'scripted' AND generation = 1"),
            2);
  EXPECT_EQ(s.count("SELECT count(*) FROM candidates WHERE prompt_kind = 'repair_compile' AND "
                    "generation = 2"),
            2);
  EXPECT_EQ(s.count("SELECT count(*) FROM candidates c JOIN candidate_parents p ON p.candidate_id "
                    "= c.id JOIN candidates q "
                    "ON q.id = p.parent_id WHERE c.prompt_kind = 'repair_compile' AND "
                    "q.prompt_kind = 'optimize'"),
            2);
  EXPECT_EQ(s.count("SELECT count(*) FROM screens sc JOIN candidates c ON c.id = sc.candidate_id "
                    "WHERE c.prompt_kind = "
                    "'repair_compile' AND sc.outcome = 'correct'"),
            2);
  // The repair prompts carry the compile log of the child they repair.
  int with_evidence = 0;
  for (const std::string& p : model.prompts())
    with_evidence += p.find("deliberately broken") != std::string::npos &&
                     p.find("#error") != std::string::npos &&
                     p.find("// repaired") == std::string::npos;
  EXPECT_GE(with_evidence, 2);
  // Resumed, the run asks the model nothing it already answered (the response cache).
  size_t asked = model.prompts().size();
  {
    auto llm = model.proposer(cache);
    evolve::RunSummary r =
        evolve::run_evolution(c, {task("smoke/relu")}, *s.evaluator, int64_t{1}, {}, llm.get());
    EXPECT_EQ(r.llm.cached, r.llm.calls);
    EXPECT_EQ(r.evaluations, 0);
  }
  EXPECT_EQ(model.prompts().size(), asked);
}

TEST(Evolve, AModelThatAnswersWithoutCodeOrIsDownLosesNothingAndTheRunGoesOn) {
  for (std::string mode : {"prose", "down"}) {
    ScriptedModel model(mode);
    Rig s;
    evolve::RunConfig c = small_config();
    c.generations = 2;
    c.llm_children = 2;
    auto llm = model.proposer((s.dir.path() / "llm-cache").string());
    evolve::RunSummary r =
        evolve::run_evolution(c, {task("smoke/relu")}, *s.evaluator, std::nullopt, {}, llm.get());
    EXPECT_EQ(r.tasks[0].stopped, "generations done") << mode;
    EXPECT_EQ(r.llm.calls, mode == "prose" ? 4 : 0) << mode;
    EXPECT_EQ(r.llm.failed_calls, mode == "down" ? 4 : 0) << mode;
    // Each LLM child is recorded with what went wrong; no repair is asked for an answer with no
    // code. (Four calls that failed alike are one candidate: the same identity.)
    EXPECT_EQ(s.count("SELECT count(*) FROM candidates WHERE model = 'scripted'"),
              mode == "prose" ? 4 : 1)
        << mode;
    EXPECT_EQ(s.count("SELECT count(*) FROM candidates WHERE prompt_kind LIKE 'repair%'"), 0)
        << mode;
    archive::Statement why = s.sql().prepare(
        "SELECT r.errors FROM compiles r JOIN candidates c ON c.id = r.candidate_id WHERE c.model "
        "= 'scripted' LIMIT 1");
    ASSERT_TRUE(why.step()) << mode;
    EXPECT_NE(why.text(0).find(mode == "down" ? "no answer from the model" : "code"),
              std::string::npos)
        << why.text(0);
    // The tuner's children went on beside them.
    EXPECT_GT(s.count("SELECT count(*) FROM candidates WHERE model = 'offline-tuner'"), 0) << mode;
  }
}

// Answers every line of DIR/requests.jsonl as a model would, from the request text alone: the
// task's seed (named in the prompt), written to DIR/answers.jsonl in the Batch API's output format.
size_t answer_batch(const std::filesystem::path& dir) {
  std::ifstream in(dir / "requests.jsonl");
  std::ofstream out(dir / "answers.jsonl", std::ios::app);
  size_t n = 0;
  for (std::string line; std::getline(in, line); ++n) {
    json req = json::parse(line);
    std::string prompt = req["body"]["messages"].back()["content"];
    size_t at = prompt.find("## The operation: ") + 18;
    std::string task = prompt.substr(at, prompt.find('\n', at) - at);
    std::string seed =
        *read_file((kforge::test::source_dir() / "tasks" / task.substr(0, task.find('/')) /
                    "seeds" / (task.substr(task.find('/') + 1) + ".md"))
                       .string());
    seed.insert(seed.find("```cuda\n") + 8, "// batch answer " + std::to_string(n) + "\n");
    json body = {
        {"model", "batch"},
        {"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", seed}}}}}},
        {"usage", {{"prompt_tokens", 100}, {"completion_tokens", 50}}}};
    out << json{{"id", "r" + std::to_string(n)},
                {"custom_id", req["custom_id"]},
                {"response", {{"status_code", 200}, {"body", body}}},
                {"error", nullptr}}
               .dump()
        << "\n";
  }
  return n;
}

TEST(Evolve, TheBatchExchangeWaitsForAnswersAndAResumedRunReadsThem) {
  Rig s;
  TempDir batch;
  evolve::RunConfig c = small_config();
  c.generations = 1;
  c.llm_children = 2;
  c.children = 2;
  std::string prompts = (kforge::test::source_dir() / "prompts").string();
  {
    // Ctrl-C while the run waits for its two requests: it stops, recording nothing unanswered.
    auto exchange = std::make_shared<const evolve::BatchExchange>(
        batch.path(), "batch", std::chrono::seconds(60), std::chrono::milliseconds(10));
    evolve::LlmProposer llm(exchange, prompts, "a test GPU");
    std::atomic<int> stop{0};
    std::thread ctrl_c([&] {
      for (int i = 0; i < 3000; ++i) {
        std::optional<std::string> r = read_file(exchange->requests_file().string());
        if (r && std::count(r->begin(), r->end(), '\n') == 2) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      stop = 1;
    });
    evolve::LoopHooks hooks;
    hooks.stop = &stop;
    auto t0 = std::chrono::steady_clock::now();
    evolve::RunSummary r =
        evolve::run_evolution(c, {task("smoke/relu")}, *s.evaluator, std::nullopt, hooks, &llm);
    ctrl_c.join();
    EXPECT_EQ(r.stopped, "interrupted");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(50))
        << "the stop did not cut the wait short";
    EXPECT_EQ(s.count("SELECT count(*) FROM candidates WHERE model = 'batch'"), 0);
  }
  EXPECT_EQ(answer_batch(batch.path()), 2u);
  {
    auto exchange = std::make_shared<const evolve::BatchExchange>(
        batch.path(), "batch", std::chrono::seconds(5), std::chrono::milliseconds(10));
    evolve::LlmProposer llm(exchange, prompts, "a test GPU");
    evolve::RunSummary r =
        evolve::run_evolution(c, {task("smoke/relu")}, *s.evaluator, int64_t{1}, {}, &llm);
    EXPECT_EQ(r.llm.calls, 2);
    EXPECT_EQ(r.llm.failed_calls, 0);
    EXPECT_EQ(r.llm.tokens_out, 100);
  }
  EXPECT_EQ(
      s.count("SELECT count(*) FROM candidates WHERE model = 'batch' AND prompt_kind = 'optimize'"),
      2);
  std::string requests = *read_file((batch.path() / "requests.jsonl").string());
  EXPECT_EQ(std::count(requests.begin(), requests.end(), '\n'), 2) << "a request was written twice";
}

// Issue 19: with no answer in the folder yet, the run pauses (nothing recorded for the waiting
// children, every request of the generation written) and a resumed run goes on once the answers
// are there.
TEST(Evolve, ABatchFolderWithoutAnswersPausesTheRunAndResumeGoesOn) {
  Rig s;
  TempDir batch;
  evolve::RunConfig c = small_config();
  c.tasks = {"smoke/relu", "smoke/softmax"};
  c.generations = 1;
  c.llm_children = 2;
  c.children = 2;
  std::string prompts = (kforge::test::source_dir() / "prompts").string();
  auto tasks =
      std::vector<std::shared_ptr<const tasks::Task>>{task("smoke/relu"), task("smoke/softmax")};
  auto exchange = [&] {
    return std::make_shared<const evolve::BatchExchange>(
        batch.path(), "batch", std::chrono::milliseconds(0), std::chrono::milliseconds(10));
  };
  {
    evolve::LlmProposer llm(exchange(), prompts, "a test GPU");
    evolve::RunSummary r = evolve::run_evolution(c, tasks, *s.evaluator, std::nullopt, {}, &llm);
    EXPECT_EQ(r.stopped, evolve::kWaitingForAnswers);
    EXPECT_EQ(r.llm.failed_calls, 0);
  }
  EXPECT_EQ(s.count("SELECT count(*) FROM candidates WHERE model = 'batch'"), 0);
  EXPECT_EQ(s.count("SELECT count(*) FROM runs WHERE status = 'interrupted'"), 1);
  EXPECT_EQ(exchange()->unanswered(), 4) << "both tasks' requests are out before the run pauses";
  EXPECT_EQ(answer_batch(batch.path()), 4u);
  EXPECT_EQ(exchange()->unanswered(), 0);
  {
    evolve::LlmProposer llm(exchange(), prompts, "a test GPU");
    evolve::RunSummary r = evolve::run_evolution(c, tasks, *s.evaluator, int64_t{1}, {}, &llm);
    EXPECT_EQ(r.stopped, "every task ended");
    EXPECT_EQ(r.llm.calls, 4);
  }
  EXPECT_EQ(s.count("SELECT count(*) FROM candidates WHERE model = 'batch'"), 4);
  std::string requests = *read_file((batch.path() / "requests.jsonl").string());
  EXPECT_EQ(std::count(requests.begin(), requests.end(), '\n'), 4) << "a request was written twice";
}

TEST(Evolve, IdeasAnswersAreParsedIntoNumberedItems) {
  std::vector<std::string> ideas = evolve::parse_ideas(
      "Sure.\n1. Vectorise\n   with float4.\n```cuda\n2. not an idea\n```\n2) Unroll.\n**3.** "
      "Tiles\n4. Fourth\n",
      3);
  ASSERT_EQ(ideas.size(), 3u);
  EXPECT_EQ(ideas[0], "Vectorise\n   with float4.");
  EXPECT_EQ(ideas[1], "Unroll.");
  EXPECT_EQ(ideas[2], "Tiles");
  EXPECT_TRUE(evolve::parse_ideas("No list here, only prose.", 3).empty());
}

// Issue 19: crossover asks for two parents of different code, ideas for ideas in words and then
// one child per idea, each implementing its idea; every child is recorded with its parents.
TEST(Evolve, CrossoverAndIdeasChildrenCarryTheirParentsAndEachIdeaBecomesAChild) {
  ScriptedModel model("good");
  Rig s;
  evolve::RunConfig c = small_config();
  c.generations = 3;
  c.lookahead = 1;  // one round at a time: each generation's parents are the last one's kernels
  c.llm_children = 2;
  c.children = 0;  // the LLM's children alone: each correct one is judged and joins the population
  c.operators = {0, 0.5, 0.5};
  c.ideas_count = 3;
  auto llm = model.proposer((s.dir.path() / "llm-cache").string());
  evolve::RunSummary r =
      evolve::run_evolution(c, {task("smoke/relu")}, *s.evaluator, std::nullopt, {}, llm.get());
  EXPECT_EQ(r.tasks[0].stopped, "generations done");
  EXPECT_EQ(r.llm.failed_calls, 0);
  int64_t crossovers = s.count("SELECT count(*) FROM candidates WHERE prompt_kind = 'crossover'");
  int64_t ideas = s.count("SELECT count(*) FROM candidates WHERE prompt_kind = 'idea'");
  EXPECT_GT(crossovers, 0);
  EXPECT_GT(ideas, 0);
  EXPECT_EQ(ideas % 3, 0) << "each ideas answer lists three ideas: three children";
  // A crossover child has two parents, of different code.
  EXPECT_EQ(s.count("SELECT count(*) FROM candidates c WHERE c.prompt_kind = 'crossover' AND "
                    "(SELECT count(DISTINCT q.source) "
                    "FROM candidate_parents p JOIN candidates q ON q.id = p.parent_id WHERE "
                    "p.candidate_id = c.id) = 2"),
            crossovers);
  EXPECT_EQ(s.count("SELECT count(*) FROM candidates c WHERE c.prompt_kind = 'idea' AND (SELECT "
                    "count(*) FROM "
                    "candidate_parents p WHERE p.candidate_id = c.id) = 1"),
            ideas);
  // The idea prompts each carry one of the listed ideas, the continuation line included.
  int with_idea = 0, crossover_prompts = 0;
  for (const std::string& p : model.prompts()) {
    if (p.find("## The idea to implement\nVectorise the loads\n   with float4.") !=
            std::string::npos ||
        p.find("## The idea to implement\nUnroll by four.") != std::string::npos ||
        p.find("## The idea to implement\nUse a grid-stride loop.") != std::string::npos)
      ++with_idea;
    if (p.find("## Kernel B (candidate") != std::string::npos) ++crossover_prompts;
  }
  EXPECT_EQ(with_idea, ideas);
  EXPECT_EQ(crossover_prompts, crossovers);
  EXPECT_GT(s.count("SELECT count(*) FROM screens sc JOIN candidates c ON c.id = sc.candidate_id "
                    "WHERE c.prompt_kind = "
                    "'idea' AND sc.outcome = 'correct'"),
            0);
}

// Issue 19's profile feedback: each parent an optimize prompt quotes is profiled once (where the
// GPU has Nsight Compute), the profile stored with it and quoted in its children's prompts; a run
// with `llm.profile = false`, or a GPU without the tool, profiles nothing and says so.
TEST(Evolve, ParentsAreProfiledOnceAndTheirProfileIsQuotedInTheirChildrensPrompts) {
  for (bool on : {true, false}) {
    SCOPED_TRACE(on ? "profiling" : "profile = false");
    ScriptedModel model("good");
    Rig s;
    s.gpu.ncu = "/opt/fake/ncu";
    evolve::RunConfig c = small_config();
    c.generations = 3;
    c.lookahead = 1;  // one round at a time: each generation's parents are the last one's kernels
    c.llm_children = 2;
    c.children = 0;
    c.profile = on;
    auto llm = model.proposer((s.dir.path() / "llm-cache").string());
    evolve::RunSummary r =
        evolve::run_evolution(c, {task("smoke/relu")}, *s.evaluator, std::nullopt, {}, llm.get());
    EXPECT_EQ(r.tasks[0].stopped, "generations done");
    int64_t parents = s.count(
        "SELECT count(DISTINCT p.parent_id) FROM candidate_parents p JOIN candidates c ON "
        "c.id = p.candidate_id WHERE c.prompt_kind = 'optimize'");
    ASSERT_GT(parents, 1);
    int64_t profiles = s.count("SELECT count(*) FROM profiles");
    int with_profile = 0, without = 0;
    for (const std::string& p : model.prompts()) {
      if (p.find("Nsight Compute: one run at the timed dims\n- launch 1 `relu") !=
              std::string::npos &&
          p.find("DRAM throughput 81.2%, SM throughput 40.5%, achieved occupancy 62.0% (of peak); "
                 "18 registers per "
                 "thread; top warp stalls (cycles per issued instruction): long_scoreboard 12.5, "
                 "wait 2.0") != std::string::npos)
        ++with_profile;
      if (p.find("Nsight Compute: not measured") != std::string::npos) ++without;
    }
    if (on) {
      EXPECT_EQ(profiles, parents) << "every parent profiled, each once";
      EXPECT_EQ(s.gpu.profiled, parents) << "a parent used again is not profiled again";
      EXPECT_NE(s.gpu.profiled_on, std::this_thread::get_id())
          << "profiled on the loop's thread, which then waits on the GPU";
      EXPECT_EQ(with_profile, static_cast<int>(model.prompts().size()));
      EXPECT_EQ(s.count("SELECT count(*) FROM profiles f WHERE NOT EXISTS (SELECT 1 FROM "
                        "candidate_parents p WHERE "
                        "p.parent_id = f.candidate_id)"),
                0);
    } else {
      EXPECT_EQ(profiles, 0);
      EXPECT_EQ(s.gpu.profiled, 0);
      EXPECT_EQ(without, static_cast<int>(model.prompts().size()));
    }
  }
}

// Issue 19: the LLM config's ensemble: models drawn by weight, each role's temperature, prices
// turned into dollars that stop the run at the budget, and per-task budgets.
// Requests asked at once each take their call from the budget before they wait for the endpoint:
// twelve asked together on a budget of five send five (the loop once sent every request that had
// passed the check before the first answer came back, 50-53 answers on a budget of 48).
TEST(Evolve, RequestsAskedAtOnceNeverSendMoreCallsThanTheBudget) {
  Rig s;
  TempDir cache;
  kforge::test::LoopbackModel model([](const std::string&) -> std::optional<std::string> {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));  // all twelve are out at once
    return "ideas, not code";
  });
  std::unique_ptr<evolve::LlmProposer> llm = model.proposer(cache.path().string());
  llm->budget.calls = 5;
  std::shared_ptr<const tasks::Task> relu = task("smoke/relu");
  std::vector<std::future<std::vector<evolve::Proposal>>> asked;
  for (int k = 0; k < 12; ++k) {
    evolve::Ask ask;
    ask.kind = evolve::PromptKind::Translate;
    ask.sample = k;
    asked.push_back(
        std::async(std::launch::async, llm->prepare(ask, relu, s.evaluator->archive())));
  }
  int unanswered = 0;
  for (auto& f : asked)
    for (const evolve::Proposal& p : f.get()) unanswered += p.unanswered;
  EXPECT_EQ(model.prompts().size(), 5u) << "requests sent past the budget";
  EXPECT_EQ(llm->spent().calls, 5);
  EXPECT_EQ(unanswered, 7);
  EXPECT_TRUE(llm->budget_spent());
}

TEST(Evolve, AnEnsembleDrawsModelsByWeightAndDollarBudgetsStopTheRun) {
  ScriptedModel model("good");
  TempDir dir;
  std::string cfg_path = (dir.path() / "llm.toml").string();
  {
    std::ofstream cfg(cfg_path);
    cfg << "[[models]]\nmodel = \"openai:cheap\"\nweight = 3\nprice = { input = 1.0, output = 2.0 "
           "}\n"
           "temperature = { optimize = 0.3, repair = 0.1 }\n"
           "[[models]]\nmodel = \"openai:dear\"\nweight = 1\nprice = { input = 10.0, output = 30.0 "
           "}\n"
           "[providers.openai]\nbase_url = \""
        << model.base_url() << "\"\n";
  }
  evolve::LlmConfig cfg = evolve::load_llm_config(cfg_path);
  auto proposer = [&](const std::string& cache) {
    std::vector<evolve::Voice> voices;
    for (const evolve::ModelConfig& m : cfg.models)
      voices.push_back({m, std::make_shared<const evolve::LlmClient>(
                               cfg.endpoint(m), cfg.policy(m), nullptr, nullptr,
                               std::make_shared<evolve::ResponseCache>(cache))});
    return std::make_unique<evolve::LlmProposer>(
        voices, (kforge::test::source_dir() / "prompts").string(), "a test GPU");
  };
  {
    Rig s;
    evolve::RunConfig c = small_config();
    c.generations = 4;
    c.llm_children = 4;
    c.children = 1;
    auto llm = proposer((s.dir.path() / "cache").string());
    evolve::RunSummary r =
        evolve::run_evolution(c, {task("smoke/relu")}, *s.evaluator, std::nullopt, {}, llm.get());
    // 16 answers of 1000 tokens in and 500 out: $0.002 each from the cheap model, $0.025 from the
    // dear one.
    EXPECT_EQ(r.llm.calls, 16);
    int64_t cheap = s.count("SELECT count(*) FROM candidates WHERE model = 'openai:cheap'");
    int64_t dear = s.count("SELECT count(*) FROM candidates WHERE model = 'openai:dear'");
    EXPECT_EQ(cheap + dear, 16);
    EXPECT_GT(cheap, dear) << "weights 3:1";
    EXPECT_GT(dear, 0);
    EXPECT_NEAR(r.llm.cost_usd,
                static_cast<double>(cheap) * 0.002 + static_cast<double>(dear) * 0.025, 1e-9);
    for (const json& req : model.requests())
      if (req["model"] == "cheap")
        EXPECT_DOUBLE_EQ(req["temperature"].get<double>(), 0.3);
      else
        EXPECT_FALSE(req.contains("temperature")) << "none configured: none sent";
    EXPECT_EQ(
        s.count("SELECT json_type(budgets_used, '$.llm_tokens_cache_read') = 'integer' FROM runs"),
        1)
        << "the summary counts the prompt cache's tokens";
  }
  for (bool per_task : {false, true}) {
    Rig s;
    evolve::RunConfig c = small_config();
    c.generations = 8;
    c.llm_children = 4;
    c.children = 1;
    if (per_task)
      c.task_llm_dollars = 0.01;
    else
      c.llm_dollars = 0.01;
    auto llm = proposer((s.dir.path() / "cache").string());
    evolve::RunSummary r =
        evolve::run_evolution(c, {task("smoke/relu")}, *s.evaluator, std::nullopt, {}, llm.get());
    EXPECT_GE(r.llm.cost_usd, 0.01);
    EXPECT_LT(r.llm.calls, 32) << "the budget stopped the run before its generations were done";
    if (per_task)
      EXPECT_EQ(r.tasks[0].stopped, "task LLM dollar budget reached");
    else
      EXPECT_EQ(r.stopped, "LLM dollar budget reached");
  }
}

// What a run recorded: per candidate identity, its screens and judgments.
std::multiset<std::string> records(const std::string& db) {
  archive::Database raw(db, archive::Access::ReadOnly);
  archive::Statement s = raw.prepare(
      "SELECT 'screen ' || c.identity || ' ' || c.generation || ' ' || c.island FROM screens x "
      "JOIN candidates c ON "
      "c.id = x.candidate_id UNION ALL SELECT 'judge ' || c.identity || ' ' || e.admitted FROM "
      "evaluations e JOIN "
      "candidates c ON c.id = e.candidate_id");
  std::multiset<std::string> out;
  while (s.step()) out.insert(s.text(0));
  return out;
}

// The fake loop (kforge-evolve-fake) on `db`, `seed`, six generations of smoke/relu; resuming
// `run`.
using Launch = std::function<kforge::Process(const std::string& db, std::optional<int64_t> run)>;

Launch fake_loop(const TempDir& dir, const std::string& seed,
                 std::map<std::string, std::string> env = {}) {
  return [&dir, seed, env](const std::string& db, std::optional<int64_t> run) {
    SpawnOptions o;
    o.argv = {KFORGE_EVOLVE_FAKE, db, tasks_dir(), "smoke/relu", seed, "6"};
    if (run) o.argv.push_back(std::to_string(*run));
    std::map<std::string, std::string> e = env;
    e["KFORGE_CACHE_DIR"] = (dir.path() / "cache").string();
    o.env = child_environment(e);
    return Process::spawn(o);
  };
}

void run_to_the_end(const Launch& launch, const std::string& db) {
  Process p = launch(db, std::nullopt);
  int status = *p.wait_exit(std::chrono::minutes(5));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe_exit(status);
}

// Runs the loop on `db` to its end, killed with SIGKILL `kills` times on the way (each time once it
// has recorded something new and `may_kill` holds, at a random moment shortly after; `killed` is
// told at once) and resumed. Returns the kills made (fewer when the run ended first).
int run_killed(const Launch& launch, const std::string& db, int kills,
               const std::function<bool()>& may_kill = {},
               const std::function<void()>& killed = {}) {
  std::mt19937_64 rng(20261203);
  auto recorded = [&]() -> int64_t {
    if (::access(db.c_str(), F_OK) != 0) return 0;
    try {
      archive::Database raw(db, archive::Access::ReadOnly);
      archive::Statement s =
          raw.prepare("SELECT (SELECT count(*) FROM screens) + (SELECT count(*) FROM evaluations)");
      return s.step() ? s.integer(0) : 0;
    } catch (const std::exception&) {
      return 0;  // not created (or migrated) yet
    }
  };
  auto run_id = [&]() -> std::optional<int64_t> {
    if (::access(db.c_str(), F_OK) != 0) return std::nullopt;
    try {
      archive::Database raw(db, archive::Access::ReadOnly);
      archive::Statement s = raw.prepare("SELECT max(id) FROM runs");
      if (s.step() && !s.is_null(0)) return s.integer(0);
    } catch (const std::exception&) {
    }
    return std::nullopt;
  };
  int made = 0;
  for (bool finished = false; !finished;) {
    int64_t before = recorded();
    Process p = launch(db, run_id());
    if (made == kills) {
      int status = *p.wait_exit(std::chrono::minutes(5));
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe_exit(status);
      break;
    }
    for (;;) {
      if (auto status = p.wait_exit(std::chrono::milliseconds(1))) {
        finished = WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
        EXPECT_TRUE(finished) << describe_exit(*status);
        finished = true;
        break;
      }
      if (recorded() > before && (!may_kill || may_kill())) {
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
        p.kill();
        if (killed) killed();
        ++made;
        break;
      }
    }
  }
  return made;
}

TEST(Evolve, ResumeAfterKillNineLosesAndRepeatsNothing) {
  TempDir dir;
  Launch launch = fake_loop(dir, "5");
  std::string whole = (dir.path() / "whole.db").string(),
              killed = (dir.path() / "killed.db").string();
  run_to_the_end(launch, whole);
  std::multiset<std::string> expected = records(whole);
  ASSERT_GT(expected.size(), 10u);
  EXPECT_GE(run_killed(launch, killed, 20), 10) << "the run ended before most kills";
  EXPECT_EQ(records(killed), expected);  // none lost, none repeated
}

// A model whose answers take 20 to 120 ms (so the loop is killed with answers in flight) and are a
// function of the prompt alone (so a resumed run, asking again, gets what it got before): repairs
// and ideas answered as ScriptedModel does, other requests by working code or, for one prompt in
// three, code that does not compile (so repairs are asked too).
class SlowModel {
 public:
  SlowModel()
      : model_([this, seed = *read_file(
                          (kforge::test::source_dir() / "tasks/smoke/seeds/relu.md").string())](
                   const std::string& prompt) -> std::optional<std::string> {
          std::string mark = content_hash(prompt).substr(0, 8);
          {
            std::lock_guard<std::mutex> lock(mutex_);
            ++in_flight_;
          }
          std::this_thread::sleep_for(
              std::chrono::milliseconds(20 + std::stoul(mark, nullptr, 16) % 100));
          std::string answer = seed;
          if (prompt.find("distinct optimisation ideas as a numbered list") != std::string::npos)
            answer = "1. Vectorise the loads (" + mark + ").\n2. Unroll by four.\n";
          else if (prompt.find("was rejected before it could run") == std::string::npos &&
                   std::stoul(mark, nullptr, 16) % 3 == 0)
            answer.insert(answer.find("```cuda\n") + 8, "#error broken " + mark + "\n");
          else
            answer.insert(answer.find("```cuda\n") + 8, "// answer " + mark + "\n");
          std::lock_guard<std::mutex> lock(mutex_);
          --in_flight_;
          finished_.push_back(std::chrono::steady_clock::now());
          return answer;
        }) {}
  // Requests a process killed now may have lost: those being answered, and those answered in the
  // last 100 ms (their answer may not have reached the response cache yet).
  int at_risk() {
    std::lock_guard<std::mutex> lock(mutex_);
    auto recent = std::chrono::steady_clock::now() - std::chrono::milliseconds(100);
    return in_flight_ + static_cast<int>(std::count_if(finished_.begin(), finished_.end(),
                                                       [&](auto t) { return t > recent; }));
  }
  bool answering() {
    std::lock_guard<std::mutex> lock(mutex_);
    return in_flight_ > 0;
  }
  size_t asked() { return model_.prompts().size(); }
  std::string base_url() const { return model_.base_url(); }

 private:
  std::mutex mutex_;
  int in_flight_ = 0;
  std::vector<std::chrono::steady_clock::time_point> finished_;
  kforge::test::LoopbackModel model_;  // last: its server, which uses the rest, stops first
};

// Every candidate the model proposed (identity, operator, generation), for comparing runs.
std::multiset<std::string> llm_candidates(const std::string& db) {
  archive::Database raw(db, archive::Access::ReadOnly);
  archive::Statement s = raw.prepare(
      "SELECT c.identity || ' ' || c.prompt_kind || ' ' || c.generation FROM candidates c WHERE "
      "c.model = 'scripted'");
  std::multiset<std::string> out;
  while (s.step()) out.insert(s.text(0));
  return out;
}

TEST(Evolve, ResumeAfterKillNineWithAnswersInFlightReAsksNothingAnswered) {
  TempDir dir;
  SlowModel model;
  auto launch_with = [&](const std::string& cache) {
    // Seed 3: the model's answers hang on its prompts' hashes, so how many distinct children it
    // proposes does too: rounds proposed ahead from one population ask the same prompt more than
    // once, and this model answers a prompt the same each time (one candidate); a change to the
    // prompts' text can change it (seed 2 fell to 5 when the judging text changed), so the seed is
    // one that gives at least the 6 asserted below.
    return fake_loop(dir, "3",
                     {{"KFORGE_FAKE_LLM_URL", model.base_url()},
                      {"KFORGE_FAKE_LLM_CACHE", (dir.path() / cache).string()}});
  };
  std::string whole = (dir.path() / "whole.db").string(),
              killed = (dir.path() / "killed.db").string();
  run_to_the_end(launch_with("whole-answers"), whole);
  size_t asked_whole = model.asked();
  std::multiset<std::string> expected = records(whole), proposed = llm_candidates(whole);
  ASSERT_GT(asked_whole, 10u);
  ASSERT_GE(proposed.size(), 6u);
  // Killed only while the model is answering: each kill loses at most what was at risk then.
  int at_risk = 0;
  int kills = run_killed(
      launch_with("killed-answers"), killed, 15, [&] { return model.answering(); },
      [&] { at_risk += model.at_risk(); });
  EXPECT_GE(kills, 8) << "the run ended before most kills";
  EXPECT_GT(at_risk, 0);
  size_t asked_killed = model.asked() - asked_whole;
  EXPECT_LE(asked_killed, asked_whole + at_risk)
      << "a resumed run asked again what had been answered";
  EXPECT_EQ(records(killed), expected);         // no screen or judgment lost or repeated
  EXPECT_EQ(llm_candidates(killed), proposed);  // every child the model proposed, once
  std::printf(
      "[ model ] uninterrupted: %zu requests; killed %d times with answers in flight (%d at risk): "
      "%zu requests\n",
      asked_whole, kills, at_risk, asked_killed);
}

TEST(Evolve, CellsComeFromTheCompiledCode) {
  Rig s;
  evolve::Proposal p;
  p.task = task("smoke/relu");
  auto seeds = evolve::starting_population(p.task, s.evaluator->archive());
  ASSERT_FALSE(seeds.empty());
  evolve::Checked c = s.evaluator->check(seeds.front());
  ASSERT_TRUE(c.report.ok()) << c.report.errors.front();
  evolve::Features f = evolve::features_of(c.report);
  EXPECT_EQ(f.load_width, 4);  // the seed loads float4
  EXPECT_FALSE(f.tensor_cores);
  EXPECT_EQ(f.shared_band, 0);
  EXPECT_EQ(evolve::cell_of(f).substr(0, 1), "r");
}

// Admission draws unseen dims the candidate's plan supports at its tunables: instance_norm's seed
// at CLUSTER=2, BLOCK=1024, VEC=7 needs H * W >= 28672, beyond the usual unseen range (run 22).
TEST(Evolve, AdmissionDrawsUnseenDimsThePlanSupports) {
  Rig s;
  auto t = task("level1/instance_norm");
  auto seeds = evolve::starting_population(t, s.evaluator->archive());
  ASSERT_FALSE(seeds.empty());
  evolve::Checked c = s.evaluator->check(seeds.front());
  ASSERT_TRUE(c.report.ok()) << c.report.errors.front();
  EXPECT_EQ(c.report.tunables, (compile::Tunables{{"BLOCK", 1024}, {"CLUSTER", 2}, {"VEC", 7}}));
  verify::Verdict v = s.evaluator->admit(c, 7);
  EXPECT_TRUE(v.correct()) << v.summary;
  EXPECT_EQ(s.gpu.admitted, 1);
}

// Issue 19: the GPU facts a run's prompts quote are recorded with its config and come back on
// resume, so a run resumed on another machine of the kind renders the same prompts.
TEST(Evolve, TheRecordedTargetComesBackWithTheConfig) {
  evolve::RunConfig c = small_config();
  c.target = {{"name", "NVIDIA H200"}, {"measured", {{"read_gbps", 4396.0}}}};
  evolve::RunConfig back = evolve::RunConfig::from_json(c.to_json());
  EXPECT_EQ(back.target, c.target);
  EXPECT_EQ(back.to_json(), c.to_json());
  EXPECT_TRUE(evolve::RunConfig::from_json(small_config().to_json()).target.is_null());
}

// Issue 40: a batch folder's choices come back on resume (a run begun with --batch-wait 0 fell
// back to waiting 24 h when resumed without the flag); a config file cannot set them.
TEST(Evolve, TheBatchChoicesComeBackWithTheConfig) {
  evolve::RunConfig c = small_config();
  c.model = "batch:/tmp/b";
  c.batch_model = "anthropic:claude-sonnet-4-5";
  c.batch_wait_s = 0.0;
  evolve::RunConfig back = evolve::RunConfig::from_json(c.to_json());
  EXPECT_EQ(back.batch_model, c.batch_model);
  ASSERT_TRUE(back.batch_wait_s.has_value());
  EXPECT_EQ(*back.batch_wait_s, 0.0);
  EXPECT_EQ(back.to_json(), c.to_json());
  evolve::RunConfig plain = evolve::RunConfig::from_json(small_config().to_json());
  EXPECT_FALSE(plain.batch_wait_s.has_value());
  EXPECT_TRUE(plain.batch_model.empty());
  TempDir dir;
  auto file = dir.write("run.toml", "tasks = [\"smoke\"]\n[batch]\nwait_s = 0\n");
  EXPECT_THROW(evolve::load_run_config(file.string()), kforge::InputError);
}

TEST(Evolve, RunConfigNamesTheBadField) {
  TempDir dir;
  auto good = dir.write("run.toml",
                        "tasks = [\"smoke\"]\ngenerations = 4\n[budget]\nevaluations = "
                        "100\n[selection]\nbest = 0.6\n");
  evolve::RunConfig c = evolve::load_run_config(good.string());
  EXPECT_EQ(c.generations, 4);
  EXPECT_EQ(c.evaluations, 100);
  EXPECT_DOUBLE_EQ(c.select_best, 0.6);
  EXPECT_EQ(evolve::RunConfig::from_json(c.to_json()).to_json(), c.to_json());
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {"generatoins = 4\n", "generatoins: unknown key"},
           {"[budget]\nminutes = -1\n", "budget.minutes: must be a number, 0 or more"},
           {"[selection]\nbest = 0.8\nelite = 0.5\n", "selection: best + elite must be at most 1"},
           {"tasks = \"smoke\"\n", "tasks: must be a list of strings"}}) {
    auto bad = dir.write("bad.toml", text);
    try {
      evolve::load_run_config(bad.string());
      ADD_FAILURE() << text;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(bad.string() + ": " + field), std::string::npos)
          << e.what();
    }
  }
}

// Schema 7's baselines (rows keyed by kind) undone back to schema 4's columns (eager and scripted;
// schema 5 added torch.compile's), to make an older archive from today's.
constexpr const char* kBeforeVersionFive =
    "DROP TABLE evaluation_baselines; DROP TABLE baseline_times; "
    "ALTER TABLE evaluations ADD COLUMN eager_ms REAL; "
    "ALTER TABLE evaluations ADD COLUMN scripted_ms REAL; "
    "ALTER TABLE evaluations ADD COLUMN speedup_eager REAL; "
    "ALTER TABLE evaluations ADD COLUMN speedup_scripted REAL; "
    "ALTER TABLE baselines ADD COLUMN eager_ms REAL; "
    "ALTER TABLE baselines ADD COLUMN scripted_ms REAL; ";

TEST(Evolve, MigratesAVersionTwoArchive) {
  TempDir dir;
  std::string path = (dir.path() / "v2.db").string();
  {
    // A version 2 archive: today's, less what versions 3 to 7 changed.
    archive::Archive a = archive::Archive::open(path);
    test::ArchiveSql(path).exec(std::string(kBeforeVersionFive) +
                                "DROP TABLE profiles; DROP INDEX screens_by_run; DROP TABLE "
                                "screens; PRAGMA user_version = 2");
  }
  archive::Archive a = archive::Archive::open(path);
  EXPECT_EQ(a.schema_version(), archive::kSchemaVersion);
  test::ArchiveSql sql(path);
  archive::Statement s = sql.prepare("SELECT count(*) FROM screens");
  EXPECT_TRUE(s.step());
}

TEST(Evolve, MigratesAVersionThreeArchive) {
  TempDir dir;
  std::string path = (dir.path() / "v3.db").string();
  {
    // A version 3 archive: today's, less version 4's profiles and versions 5 to 7's baselines.
    archive::Archive a = archive::Archive::open(path);
    test::ArchiveSql(path).exec(std::string(kBeforeVersionFive) +
                                "DROP TABLE profiles; PRAGMA user_version = 3");
  }
  archive::Archive a = archive::Archive::open(path);
  EXPECT_EQ(a.schema_version(), archive::kSchemaVersion);
  test::ArchiveSql sql(path);
  archive::Statement s = sql.prepare("SELECT count(*) FROM profiles");
  EXPECT_TRUE(s.step());
}

}  // namespace
