// Seeded mutations of what kforge reads from outside (task files, LLM answers and their launch
// plans, expressions, archive lines): no crash, no hang, no unbounded memory, and every error is
// one kforge raises for bad input and names the input (never the "kforge bug" class, exit 4).
// Each target runs in a forked child under a memory and time limit; a failing case is reported
// with its seed so it can be replayed (KFORGE_FUZZ_CASES scales the number of cases).
#include "fuzz_util.h"

#include "compile_test_util.h"
#include "kforge/archive/archive.h"
#include "kforge/common/expr.h"
#include "kforge/compile/answer.h"
#include "kforge/compile/plan.h"
#include "kforge/compile/source_check.h"
#include "kforge/tasks/task.h"

namespace {

using kforge::test::TempDir;
using namespace kforge::test::fuzzing;

TEST(Fuzz, Expressions) {
  std::vector<std::string> seeds = {
      "ceil_div(B * N, BLOCK)", "min(ceil_div(B * N, BLOCK), 8 * num_sms)", "BLOCK * 4 <= 49152",
      "max(1, N / (VEC * 32)) % 7", "-(B - 1) * -2"};
  std::string failures = fuzz(seeds, 3000, 30, 1, [](const std::string& text) -> std::string {
    try {
      kforge::Expr e = kforge::Expr::parse(text);
      kforge::IntNames names = {
          {"B", 4096}, {"N", 8192}, {"BLOCK", 256}, {"num_sms", 132}, {"VEC", 4}};
      for (const std::string& n : e.names()) names.emplace(n, 3);
      (void)e.eval(names);
    } catch (const kforge::ExprError&) {
    }
    return "";
  });
  EXPECT_EQ(failures, "");
}

TEST(Fuzz, TaskFiles) {
  TempDir dir;
  std::vector<std::string> seeds = files_under(source_dir_string() + "/tasks", ".toml", 100);
  ASSERT_GE(seeds.size(), 50u);
  std::string path = (dir.path() / "fuzzed.toml").string();
  std::string failures = fuzz(seeds, 2000, 50, 2, [&](const std::string& text) -> std::string {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    try {
      kforge::tasks::load_task(path);
    } catch (const std::exception& e) {
      return named(e, path);
    }
    return "";
  });
  EXPECT_EQ(failures, "");
}

TEST(Fuzz, AnswersAndPlans) {
  std::vector<std::string> seeds =
      files_under(source_dir_string() + "/tasks/smoke/seeds", ".md", 20);
  for (const std::string& s : files_under(source_dir_string() + "/tests/gpu/exploits", ".md", 40))
    seeds.push_back(s);
  ASSERT_GE(seeds.size(), 20u);
  auto relu = kforge::test::CompileFixture::load("smoke/relu");
  std::string failures = fuzz(seeds, 3000, 50, 3, [&](const std::string& text) -> std::string {
    using namespace kforge::compile;
    Answer a;
    try {
      a = parse_answer(text);
    } catch (const AnswerError&) {
      return "";
    }
    (void)preprocessing_problems(a.source, candidate_include_dirs());
    try {
      Plan p = parse_plan_text(a.plan, relu.task, relu.tensors);
      for (const LaunchSpec& l : p.launches) (void)name_expression_problem(l.kernel);
      std::vector<Tunables> space = tune_space(p, relu.task.dims, DeviceFacts{});
      if (space.size() > 100000)
        return "a tune space of " + std::to_string(space.size()) + " points";
      (void)evaluate_plan(p, relu.task.dims, default_tunables(p), DeviceFacts{});
    } catch (const PlanError&) {
    }
    return "";
  });
  EXPECT_EQ(failures, "");
}

TEST(Fuzz, ArchiveLines) {
  TempDir dir;
  std::vector<std::string> seeds;
  FILE* p = ::popen(
      ("zcat " + source_dir_string() + "/docs/results/seeds-2026-12-03.jsonl.gz | head -4").c_str(),
      "r");
  std::array<char, 65536> buf;
  std::string text;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) text.append(buf.data(), n);
  ::pclose(p);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) seeds.push_back(line);
  seeds.push_back(
      R"({"Op_Name": "relu", "Level_ID": 1, "Task_ID": 19, "Kernel_Name": "k", "CUDA_Code": "__global__ void k() {}", "CUDA_Runtime": 0.1, "Correct": true})");
  ASSERT_GE(seeds.size(), 3u);
  std::string db = (dir.path() / "fuzz.db").string();
  auto archive = kforge::archive::Archive::open(db);
  std::string failures = fuzz(seeds, 600, 50, 4, [&](const std::string& line) -> std::string {
    std::istringstream in(line);
    try {
      archive.import_jsonl(in, "fuzzed.jsonl");
    } catch (const std::exception& e) {
      return named(e, "fuzzed.jsonl");
    }
    return "";
  });
  EXPECT_EQ(failures, "");
}

}  // namespace
