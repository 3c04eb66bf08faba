// The LLM proposer's operators on a real GPU (issue 19): crossover and ideas children judged by the
// real judge, and profile feedback (each parent profiled once with Nsight Compute where `ncu` is
// installed, its numbers quoted in its children's prompts). The model is a loopback server that
// answers like a model would: an ideas request with two ideas, every kernel request with the
// smoke/relu seed's code marked as new. On the GPU machine:
//   build-gpu/tests/kforge_gpu_tests --gtest_filter='GpuLoop.*'
#include <atomic>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "../archive_sql.h"
#include "../corpus_util.h"
#include "../loopback_model.h"
#include "gpu_test_util.h"
#include "kforge/archive/archive.h"
#include "kforge/archive/sqlite.h"
#include "kforge/evolve/evaluator.h"
#include "kforge/evolve/run.h"
#include "kforge/verify/device_facts.h"
#include "kforge/verify/judge.h"

using namespace kforge;
using namespace kforge::test;
using nlohmann::json;

TEST(GpuLoop, CrossoverAndIdeasChildrenAreJudgedAndParentsProfiledOnce) {
  KFORGE_REQUIRE_GPU();
  TempDir dir;
  std::string ncu = verify::find_cuda_tool("ncu");
  std::cout << "  ncu: " << (ncu.empty() ? "not found (profiles are not measured)" : ncu)
            << std::endl;
  std::string seed = read_file((source_dir() / "tasks/smoke/seeds/relu.md").string()).value();
  std::atomic<int> answers{0};
  LoopbackModel model(
      [&](const std::string& prompt) -> std::optional<std::string> {
        if (prompt.find("distinct optimisation ideas as a numbered list") != std::string::npos)
          return "1. Process four elements per thread with float4 loads.\n2. Use a grid-stride "
                 "loop.\n";
        std::string answer = seed;
        answer.insert(answer.find("```cuda\n") + 8,
                      "// answer " + std::to_string(++answers) + "\n");
        return answer;
      },
      "operators-replay");

  std::string db_path = (dir.path() / "archive.db").string();
  evolve::EvaluatorOptions eo;
  eo.facts = verify::plan_facts(0);
  eo.db = db_path;
  eo.compiler = private_cache(dir, /*in_process=*/false);
  eo.compiler.workers = std::max(2u, std::thread::hardware_concurrency() / 2);
  evolve::Evaluator evaluator(eo, nullptr);
  std::unique_ptr<evolve::Gpu> gpu = evolve::make_judge_gpu(verify::VerifyOptions{});
  evaluator.attach_gpu(gpu.get());
  std::unique_ptr<evolve::LlmProposer> llm = model.proposer((dir.path() / "llm-cache").string());

  // Generation 1 has one code (the seed): its crossovers fall back to optimizing; generation 2 has
  // the model's children of other code to cross with.
  evolve::RunConfig config;
  config.tasks = {"smoke/relu"};
  config.model = "openai:operators-replay";
  config.generations = 2;
  config.lookahead = 1;  // one round at a time: generation 2 is asked once generation 1 is in
  config.children = 0;
  config.islands = 2;
  config.llm_children = 4;
  config.repair_attempts = 0;
  config.operators = {0, 0.5, 0.5};
  config.ideas_count = 2;
  config.judge_top = 8;
  auto task = std::make_shared<const tasks::Task>(tasks::load_task(
      tasks::resolve_tasks("smoke/relu", (source_dir() / "tasks").string()).at(0)));
  auto t0 = std::chrono::steady_clock::now();
  evolve::RunSummary summary =
      evolve::run_evolution(config, {task}, evaluator, std::nullopt, {}, llm.get());
  std::cout << "  run: " << summary.evaluations << " evaluations in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s"
            << std::endl;
  EXPECT_EQ(summary.tasks.at(0).stopped, "generations done");
  EXPECT_EQ(summary.llm.failed_calls, 0);

  archive::Archive ar = archive::Archive::open_read_only(db_path);
  ArchiveSql sql(db_path, archive::Access::ReadOnly);
  auto count = [&](const std::string& query) { return sql.count(query); };
  // Children of each operator, judged correct by the real judge, with their parents.
  for (const char* kind : {"crossover", "idea"}) {
    SCOPED_TRACE(kind);
    std::string of_kind = "c.prompt_kind = '" + std::string(kind) + "'";
    int64_t children = count("SELECT count(*) FROM candidates c WHERE " + of_kind);
    int64_t judged = count(
        "SELECT count(DISTINCT c.id) FROM candidates c JOIN evaluations e ON e.candidate_id = c.id "
        "WHERE " +
        of_kind + " AND e.outcome = 'correct' AND e.time_ms > 0");
    std::cout << "  " << kind << ": " << children << " children, " << judged << " judged correct"
              << std::endl;
    EXPECT_GT(children, 0);
    EXPECT_GT(judged, 0);
    EXPECT_EQ(
        count("SELECT count(*) FROM candidates c WHERE " + of_kind +
              " AND (SELECT count(*) FROM candidate_parents p WHERE p.candidate_id = c.id) = " +
              (std::string(kind) == "crossover" ? "2" : "1")),
        children);
  }

  // Profiles: every parent of a child the model was asked to improve, once each; quoted.
  int64_t parents = count(
      "SELECT count(DISTINCT p.parent_id) FROM candidate_parents p JOIN candidates c ON c.id = "
      "p.candidate_id WHERE c.prompt_kind IN ('optimize', 'crossover', 'idea')");
  int64_t profiles = count("SELECT count(*) FROM profiles");
  int quoted = 0, unmeasured = 0;
  for (const std::string& p : model.prompts()) {
    quoted +=
        p.find("Nsight Compute: one run at the timed dims\n- launch 1 `") != std::string::npos;
    unmeasured += p.find("Nsight Compute: not measured") != std::string::npos;
  }
  std::cout << "  parents " << parents << ", profiles " << profiles << ", prompts "
            << model.prompts().size() << " (" << quoted << " quote a profile)" << std::endl;
  if (ncu.empty()) {
    EXPECT_EQ(profiles, 0);
    EXPECT_EQ(unmeasured, static_cast<int>(model.prompts().size()));
    return;
  }
  EXPECT_EQ(profiles, parents);
  archive::Statement s = sql.prepare("SELECT candidate_id, profile FROM profiles ORDER BY id");
  while (s.step()) {
    json p = json::parse(s.text(1));
    std::cout << "  profile of candidate " << s.integer(0) << ": " << p.dump() << std::endl;
    ASSERT_TRUE(p.contains("kernels")) << p.dump();
    ASSERT_EQ(p["kernels"].size(), 1u) << "relu's plan has one launch";
    const json& k = p["kernels"][0];
    for (const char* key :
         {"duration_ms", "dram_pct", "sm_pct", "l2_pct", "occupancy_pct", "registers"})
      EXPECT_TRUE(k.contains(key)) << key;
    EXPECT_GT(k.value("duration_ms", 0.0), 0);
    EXPECT_GT(k.value("dram_pct", 0.0), 5) << "relu streams memory";
    EXPECT_EQ(k["stalls"].size(), 3u);
  }
  EXPECT_EQ(quoted, static_cast<int>(model.prompts().size()))
      << "an ideas or idea prompt quotes its parent's profile too";
}
