// torch.compile's baselines on the GPU (issue 20): the helper builds each task's AOTInductor
// packages (default mode and max-autotune) with this machine's PyTorch, the judge loads them,
// checks them against the reference and times them beside eager and scripted; built ahead for
// several tasks at once, a judge finds them in the cache.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "../corpus_util.h"
#include "gpu_test_util.h"
#include "kforge/tasks/math_mode.h"
#include "kforge/verify/compiled_reference.h"
#include "kforge/verify/device_facts.h"
#include "kforge/verify/gpu_generator.h"
#include "kforge/verify/judge.h"

using namespace kforge;
using namespace kforge::test;

namespace {

// A GPU, and a LibTorch that loads AOTInductor packages; else the test skips, saying which is
// missing.
#define KFORGE_REQUIRE_COMPILED() \
  KFORGE_REQUIRE_GPU();           \
  if (std::string why = verify::compiled_unsupported(); !why.empty()) GTEST_SKIP() << why

// A package cache of the test's own (built here, not found from an earlier run), for as long as it
// lives, whatever assertion ends the test.
struct PrivateCache {
  TempDir dir;
  PrivateCache() { ::setenv("KFORGE_CACHE_DIR", dir.path().c_str(), 1); }
  ~PrivateCache() { ::unsetenv("KFORGE_CACHE_DIR"); }
};

}  // namespace

TEST(GpuCompiled, ABaselineIsBuiltCheckedTimedAndThenTakenFromTheCache) {
  KFORGE_REQUIRE_COMPILED();
  PrivateCache cache;
  compile::Compiler compiler(private_cache(cache.dir));
  std::vector<CheckedAnswer> answers;
  for (std::string name : {"relu_vec4", "softmax_rows"})
    answers.push_back(
        check_answer_file((source_dir() / "tests/gpu/honest" / (name + ".md")).string(),
                          verify::plan_facts(0), compiler));
  // Built ahead, all at once, as a run does before its first verdict (at the tasks' timed dims):
  // each task's packages, one per compiled kind.
  const std::vector<BaselineKind> kinds = verify::compiled_kinds();
  verify::CompiledOptions ahead;
  ahead.build_jobs = 4;
  std::vector<verify::CompiledPackage> built =
      verify::compiled_packages({&answers[0].fixture.task, &answers[1].fixture.task}, 0, ahead);
  ASSERT_EQ(built.size(), answers.size() * kinds.size());
  for (size_t k = 0; k < built.size(); ++k) {
    EXPECT_EQ(built[k].kind, kinds[k % kinds.size()]);
    ASSERT_TRUE(built[k].absent.empty()) << built[k].absent;
    EXPECT_GT(built[k].build_s, 0) << "built now";
    std::cout << "  " << answers[k / kinds.size()].fixture.task.id() << " ("
              << *verify::compiled_mode(built[k].kind) << "): package built in " << built[k].build_s
              << " s (4 at once)" << std::endl;
  }
  for (const CheckedAnswer& c : answers) {
    verify::Baselines b = verify::measure_baselines(c.fixture.task, verify::VerifyOptions{});
    ASSERT_EQ(b.list.size(), baseline_kinds().size());
    for (BaselineKind kind : kinds) {
      const verify::BaselineTiming* t = verify::find_baseline(b.list, kind);
      ASSERT_TRUE(t && t->stats) << c.fixture.task.id() << ": " << (t ? t->absent : "missing");
      EXPECT_TRUE(t->absent.empty());
      EXPECT_EQ(t->build_s, 0) << "the package built ahead is the one the judge looks for";
      EXPECT_GT(t->stats->median_ms, 0);
      EXPECT_GE(t->stats->reps, 10);
      EXPECT_TRUE(t->stats->held);
    }
    std::cout << "  " << c.fixture.task.id() << ": " << verify::medians(b.list).to_json().dump()
              << std::endl;
    // A judge's verdict carries them, from the cache now.
    verify::Judge judge;
    verify::Verdict v = judge.verify(c.fixture.task, c.report);
    ASSERT_TRUE(v.correct()) << v.summary;
    ASSERT_TRUE(v.timing);
    for (BaselineKind kind : kinds) {
      const verify::BaselineTiming* t = verify::find_baseline(v.timing->baselines, kind);
      ASSERT_TRUE(t && t->stats) << (t ? t->absent : "missing");
      ASSERT_TRUE(v.timing->speedup(kind));
      EXPECT_NEAR(*v.timing->speedup(kind), t->stats->median_ms / v.timing->time.median_ms, 1e-9);
    }
    ASSERT_TRUE(v.timing->best_speedup());
    std::cout << "  judged: " << v.timing->time.median_ms << " ms, x eager "
              << *v.timing->speedup(BaselineKind::Eager) << ", x best " << *v.timing->best_speedup()
              << std::endl;
  }
}

// max-autotune's package (torch.compile's max-autotune options, CUDA graphs off) is a package of
// its own: built in that mode, loaded, its outputs those of the reference, and timed by the judge.
TEST(GpuCompiled, AMaxAutotunePackageBuildsLoadsMatchesTheReferenceAndIsTimed) {
  KFORGE_REQUIRE_COMPILED();
  PrivateCache cache;
  CompileFixture f = CompileFixture::load("smoke/softmax");
  const tasks::Task& task = f.task;
  std::vector<torch::Tensor> inputs;
  for (size_t i = 0; i < task.inputs.size(); ++i)
    inputs.push_back(verify::generate_cuda(task, i, task.dims, 7, 0, 0));

  verify::CompiledPackage p =
      verify::compiled_package(task, inputs, 0, BaselineKind::CompiledMaxAutotune);
  ASSERT_TRUE(p.absent.empty()) << p.absent << " (" << p.log << ")";
  EXPECT_EQ(p.kind, BaselineKind::CompiledMaxAutotune);
  EXPECT_GT(p.build_s, 0);
  std::string spec_path = p.path.substr(0, p.path.size() - 4) + ".json";
  nlohmann::json spec = nlohmann::json::parse(read_file(spec_path).value());
  EXPECT_EQ(spec["mode"], "max-autotune") << "the helper was asked for max-autotune's options";
  std::cout << "  smoke/softmax (max-autotune): package built in " << p.build_s << " s"
            << std::endl;

  // Loaded, its outputs the reference's (TF32 as the task says).
  verify::CompiledReference loaded(p.path, 0);
  std::vector<torch::Tensor> got, expected;
  {
    tasks::MathModeGuard mode(task.allow_tf32);
    got = loaded.run(inputs);
    expected = f.ref.run(inputs);
  }
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(torch::allclose(got[i], expected[i], 1e-5, 1e-5))
        << "output " << i << ": max difference "
        << (got[i] - expected[i]).abs().max().item<double>();

  // The default mode's package is another (the mode is part of the cache key).
  verify::CompiledPackage plain = verify::compiled_package(task, inputs, 0, BaselineKind::Compiled);
  ASSERT_TRUE(plain.absent.empty()) << plain.absent;
  EXPECT_NE(plain.path, p.path);

  // Timed by the judge as the other kinds are, the package found in the cache; checked against the
  // reference there too (a package that computed something else would be absent, saying so).
  verify::Baselines b = verify::measure_baselines(task, verify::VerifyOptions{});
  const verify::BaselineTiming* t =
      verify::find_baseline(b.list, BaselineKind::CompiledMaxAutotune);
  ASSERT_TRUE(t && t->stats) << (t ? t->absent : "missing");
  EXPECT_EQ(t->build_s, 0);
  EXPECT_GT(t->stats->median_ms, 0);
  EXPECT_GE(t->stats->reps, 10);
  EXPECT_TRUE(t->stats->held);
  std::cout << "  smoke/softmax: " << verify::medians(b.list).to_json().dump() << std::endl;
}

// Turned off, max-autotune is absent with the reason; the default mode's is still timed.
TEST(GpuCompiled, MaxAutotuneTurnedOffIsAbsentWithTheReason) {
  KFORGE_REQUIRE_COMPILED();
  PrivateCache cache;
  CompileFixture f = CompileFixture::load("smoke/relu");
  verify::VerifyOptions o;
  o.compiled.max_autotune = false;
  verify::Baselines b = verify::measure_baselines(f.task, o);
  BaselineTimes m = verify::medians(b.list);
  EXPECT_EQ(m.absent(BaselineKind::CompiledMaxAutotune), "max-autotune turned off");
  EXPECT_TRUE(m.ms(BaselineKind::Compiled)) << m.absent(BaselineKind::Compiled);
}

TEST(GpuCompiled, AReferenceTorchExportCannotTakeIsAbsentWithTheReason) {
  KFORGE_REQUIRE_COMPILED();
  PrivateCache cache;
  // Branching on the data: TorchScript runs it, torch.export cannot trace it.
  std::string toml = valid_task("data_dependent");
  toml.replace(toml.find("return torch.relu(x)"), 20,
               "if bool(x.sum() > 0):\n        return torch.relu(x)\n    return x");
  std::string file = cache.dir.write("data_dependent.toml", toml).string();
  std::optional<tasks::Task> t;
  try {
    t = tasks::load_task(file);
  } catch (const std::exception& e) {
    GTEST_SKIP() << "the task does not load as TorchScript here: " << e.what();
  }
  verify::Baselines b = verify::measure_baselines(*t, verify::VerifyOptions{});
  BaselineTimes m = verify::medians(b.list);
  for (BaselineKind kind : verify::compiled_kinds()) {
    EXPECT_FALSE(m.ms(kind));
    EXPECT_NE(m.absent(kind).find("torch.export failed"), std::string::npos) << m.absent(kind);
    std::cout << "  absent (" << *verify::compiled_mode(kind) << "): " << m.absent(kind)
              << std::endl;
  }
  EXPECT_GT(m.ms(BaselineKind::Eager).value_or(0), 0)
      << "eager and scripted are timed all the same";
  EXPECT_GT(m.ms(BaselineKind::Scripted).value_or(0), 0);
}

// A stop request (Ctrl-C in `kforge evolve`) ends the builds under way within a second, however
// long they would take, and caches nothing: the next command builds the packages.
TEST(GpuCompiled, AStopRequestEndsTheBuildsAtOnceAndCachesNothing) {
  KFORGE_REQUIRE_COMPILED();
  PrivateCache cache;
  CompileFixture f = CompileFixture::load("smoke/relu");
  verify::CompiledOptions o;
  o.max_autotune = false;
  auto t0 = std::chrono::steady_clock::now();
  o.stop = [&] { return std::chrono::steady_clock::now() - t0 > std::chrono::seconds(2); };
  std::vector<verify::CompiledPackage> p = verify::compiled_packages({&f.task}, 0, o);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(p.size(), verify::compiled_kinds().size());
  EXPECT_EQ(p[0].absent, verify::kCompiledInterrupted) << "a build of smoke/relu takes ~1 minute";
  EXPECT_LT(s, 5.0);
  for (const auto& e : std::filesystem::recursive_directory_iterator(cache.dir.path()))
    EXPECT_NE(e.path().extension(), ".absent")
        << e.path() << ": an interrupted build is not cached";
}
