// torch.compile's baseline on the GPU (issue 20): the helper builds each task's AOTInductor package
// with this machine's PyTorch, the judge loads it, checks it against the reference and times it
// beside eager and scripted; built ahead for several tasks at once, a judge finds them in the
// cache.
#include <cstdlib>
#include <iostream>

#include "../corpus_util.h"
#include "gpu_test_util.h"
#include "kforge/verify/compiled_reference.h"
#include "kforge/verify/device_facts.h"
#include "kforge/verify/judge.h"

using namespace kforge;
using namespace kforge::test;

TEST(GpuCompiled, ABaselineIsBuiltCheckedTimedAndThenTakenFromTheCache) {
  KFORGE_REQUIRE_GPU();
  if (std::string why = verify::compiled_unsupported(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  ::setenv("KFORGE_CACHE_DIR", dir.path().c_str(), 1);  // built here, not found from an earlier run
  compile::Compiler compiler(private_cache(dir));
  std::vector<CheckedAnswer> answers;
  for (std::string name : {"relu_vec4", "softmax_rows"})
    answers.push_back(
        check_answer_file((source_dir() / "tests/gpu/honest" / (name + ".md")).string(),
                          verify::plan_facts(0), compiler));
  // Built ahead, both at once, as a run does before its first verdict (at the tasks' timed dims).
  verify::CompiledOptions ahead;
  ahead.build_jobs = 2;
  std::vector<verify::CompiledPackage> built =
      verify::compiled_packages({&answers[0].fixture.task, &answers[1].fixture.task}, 0, ahead);
  for (size_t k = 0; k < answers.size(); ++k) {
    ASSERT_TRUE(built[k].absent.empty()) << built[k].absent;
    EXPECT_GT(built[k].build_s, 0) << "built now";
    std::cout << "  " << answers[k].fixture.task.id() << ": package built in " << built[k].build_s
              << " s (2 at once)" << std::endl;
  }
  for (const CheckedAnswer& c : answers) {
    verify::Baselines b = verify::measure_baselines(c.fixture.task, verify::VerifyOptions{});
    ASSERT_TRUE(b.compiled) << c.fixture.task.id() << ": " << b.compiled_absent;
    EXPECT_TRUE(b.compiled_absent.empty());
    EXPECT_EQ(b.compiled_build_s, 0) << "the package built ahead is the one the judge looks for";
    EXPECT_GT(b.compiled->median_ms, 0);
    EXPECT_GE(b.compiled->reps, 10);
    EXPECT_TRUE(b.compiled->held);
    std::cout << "  " << c.fixture.task.id() << ": eager " << b.eager.median_ms << " ms, scripted "
              << b.scripted.median_ms << " ms, torch.compile " << b.compiled->median_ms << " ms"
              << std::endl;
    // A judge's verdict carries it, from the cache now.
    verify::Judge judge;
    verify::Verdict v = judge.verify(c.fixture.task, c.report);
    ASSERT_TRUE(v.correct()) << v.summary;
    ASSERT_TRUE(v.timing && v.timing->compiled)
        << (v.timing ? v.timing->compiled_absent : "no timing");
    ASSERT_TRUE(v.timing->speedup_compiled);
    EXPECT_NEAR(*v.timing->speedup_compiled,
                v.timing->compiled->median_ms / v.timing->time.median_ms, 1e-9);
    std::cout << "  judged: " << v.timing->time.median_ms << " ms, x eager "
              << v.timing->speedup_eager << ", x compile " << *v.timing->speedup_compiled
              << std::endl;
  }
  ::unsetenv("KFORGE_CACHE_DIR");
}

TEST(GpuCompiled, AReferenceTorchExportCannotTakeIsAbsentWithTheReason) {
  KFORGE_REQUIRE_GPU();
  if (std::string why = verify::compiled_unsupported(); !why.empty()) GTEST_SKIP() << why;
  TempDir dir;
  ::setenv("KFORGE_CACHE_DIR", dir.path().c_str(), 1);
  // Branching on the data: TorchScript runs it, torch.export cannot trace it.
  std::string toml = valid_task("data_dependent");
  toml.replace(toml.find("return torch.relu(x)"), 20,
               "if bool(x.sum() > 0):\n        return torch.relu(x)\n    return x");
  std::string file = dir.write("data_dependent.toml", toml).string();
  std::optional<tasks::Task> t;
  try {
    t = tasks::load_task(file);
  } catch (const std::exception& e) {
    GTEST_SKIP() << "the task does not load as TorchScript here: " << e.what();
  }
  verify::Baselines b = verify::measure_baselines(*t, verify::VerifyOptions{});
  EXPECT_FALSE(b.compiled);
  EXPECT_NE(b.compiled_absent.find("torch.export failed"), std::string::npos) << b.compiled_absent;
  EXPECT_GT(b.eager.median_ms, 0) << "eager and scripted are timed all the same";
  std::cout << "  absent: " << b.compiled_absent << std::endl;
  ::unsetenv("KFORGE_CACHE_DIR");
}
