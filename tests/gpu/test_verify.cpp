// The judge and runner on a real GPU: honest candidates are correct; candidates that skip work,
// mutate inputs, write or read out of bounds, fault or hang get their outcome, and the judge goes
// on with a fresh runner.
#include <nlohmann/json.hpp>

#include "../corpus_util.h"
#include "gpu_test_util.h"
#include "kforge/tasks/reference.h"
#include "kforge/verify/batch_slices.h"
#include "kforge/verify/clocks.h"
#include "kforge/verify/device_facts.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/judge.h"
#include "kforge/verify/memory.h"
#include "kforge/verify/shared_buffer.h"

using namespace kforge;
using namespace kforge::test;

namespace {

// As kforge's main() does, before LibTorch's allocator starts (a static initializer runs before
// gtest's main).
const bool kLargeBlocksWhole = (verify::keep_large_cached_blocks_whole(), true);

// Judged as `kforge verify` does: a report that stops before the GPU gives its compile or plan
// error.
verify::Verdict judge_file(verify::Judge& judge, const std::string& path,
                           compile::Compiler& compiler) {
  CheckedAnswer c = check_answer_file(path, verify::plan_facts(0), compiler);
  auto t0 = std::chrono::steady_clock::now();
  verify::Verdict v = judge.verify(c.fixture.task, c.report);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "  " << path.substr(path.rfind('/') + 1) << " (" << c.fixture.task.id()
            << "): " << verify::to_string(v.outcome) << " in " << s << " s: " << v.summary
            << std::endl;
  return v;
}

}  // namespace

TEST(GpuVerify, HonestCandidatesAreCorrect) {
  KFORGE_REQUIRE_GPU();
  TempDir dir;
  compile::Compiler compiler(private_cache(dir));
  verify::VerifyOptions o;
  o.compiled.enabled =
      false;  // 25 tasks' torch.compile packages take minutes: GpuCompiled.* builds some
  verify::Judge judge(o);
  for (const std::string& path : answers_in((source_dir() / "tests/gpu/honest").string())) {
    verify::Verdict v = judge_file(judge, path, compiler);
    EXPECT_NE(v.outcome, verify::Outcome::CompileError) << path;
    EXPECT_NE(v.outcome, verify::Outcome::PlanError) << path;
    // Every shipped task's timed sizes fit an 80 GB GPU (run 53: an H100); a smaller one may say
    // they do not.
    if (v.outcome == verify::Outcome::DoesNotFit &&
        verify::device_memory(0).total < (uint64_t{79} << 30))
      continue;
    EXPECT_EQ(v.outcome, verify::Outcome::Correct) << path << ": " << v.summary << "\n"
                                                   << v.evidence.dump(1);
    if (v.evidence.contains("memory"))
      std::cout << "    timing pool " << v.evidence["memory"]["pool_sets"] << " of "
                << v.evidence["memory"]["pool_wanted"] << " sets; planned "
                << verify::format_bytes(v.evidence["memory"]["needs"]["set_bytes"].get<uint64_t>())
                << " a set within "
                << verify::format_bytes(v.evidence["memory"]["available_bytes"].get<uint64_t>())
                << (v.evidence["memory"]["released_torch_cache"].get<bool>()
                        ? " (LibTorch's cache given back)"
                        : "")
                << std::endl;
    if (!v.correct()) continue;
    ASSERT_TRUE(v.timing) << path;
    EXPECT_GE(v.timing->time.reps, 10);
    EXPECT_GT(v.timing->time.median_ms, 0);
    BaselineTimes baselines = verify::medians(v.timing->baselines);
    EXPECT_GT(baselines.ms(BaselineKind::Eager).value_or(0), 0);
    EXPECT_GT(baselines.ms(BaselineKind::Scripted).value_or(0), 0);
    for (BaselineKind kind : verify::compiled_kinds())
      EXPECT_EQ(baselines.absent(kind), "turned off") << "every compiled kind, with the reason";
    // NVML read the SM clock after timed launches (at most every 5 ms), inside the GPU's range.
    const nlohmann::json& clocks = v.timing->clocks;
    ASSERT_TRUE(clocks.contains("sm_mhz")) << path << ": " << clocks.dump();
    EXPECT_GE(clocks["samples"].get<int>(), 3) << path;
    EXPECT_LT(clocks["read_ms"].get<double>(), 50) << path;
    EXPECT_GT(clocks["sm_mhz"]["min"].get<unsigned>(), 0u) << path;
    EXPECT_LE(clocks["sm_mhz"]["max"].get<unsigned>(), clocks["max_sm_mhz"].get<unsigned>())
        << path;
    std::cout << "    SM clock " << verify::clock_text(clocks) << std::endl;
    std::cout << "    time " << v.timing->time.median_ms << " ms (" << v.timing->time.reps
              << " reps), eager " << *baselines.ms(BaselineKind::Eager) << " ms, scripted "
              << *baselines.ms(BaselineKind::Scripted) << " ms, floor "
              << v.timing->floor_ms.value_or(-1) << " ms"
              << (v.timing->suspicious ? " SUSPICIOUS" : "") << std::endl;
  }
  EXPECT_EQ(judge.runner().runners_started(), 1);  // honest work never costs a runner
}

TEST(GpuVerify, ExploitsGetTheirOutcomeAndTheRunGoesOn) {
  KFORGE_REQUIRE_GPU();
  TempDir dir;
  compile::Compiler compiler(private_cache(dir));
  verify::VerifyOptions correctness_only;
  correctness_only.time = false;
  verify::Judge judge(correctness_only);
  std::string folder = (source_dir() / "tests/gpu/exploits").string();
  nlohmann::json manifest = nlohmann::json::parse(read_file(folder + "/manifest.json").value());
  bool sanitizer = !verify::find_compute_sanitizer().empty();
  std::cout << "  compute-sanitizer: "
            << (sanitizer ? verify::find_compute_sanitizer() : "not found") << std::endl;
  for (const auto& [file, expected] : manifest["kernels"].items()) {
    verify::Verdict v = judge_file(judge, folder + "/" + file, compiler);
    std::vector<std::string> ok = expected.get<std::vector<std::string>>();
    if (!sanitizer && manifest["without_sanitizer"].contains(file))
      ok = manifest["without_sanitizer"][file].get<std::vector<std::string>>();
    EXPECT_NE(std::find(ok.begin(), ok.end(), std::string(verify::to_string(v.outcome))), ok.end())
        << file << ": got " << verify::to_string(v.outcome) << ": " << v.summary << "\n"
        << v.evidence.dump(1);
    EXPECT_FALSE(v.summary.empty()) << file;
    if (manifest["defeated_by_reset"].contains(file)) {
      // Correct because the reset of module globals before every run defeated it: each global the
      // exploit keeps its state in must be among those reset.
      for (const auto& name : manifest["defeated_by_reset"][file])
        EXPECT_NE(
            std::find(v.evidence["globals_reset"].begin(), v.evidence["globals_reset"].end(), name),
            v.evidence["globals_reset"].end())
            << file << ": global " << name << " not reset; evidence " << v.evidence.dump(1);
      continue;
    }
    if (v.correct())
      continue;  // e.g. a cache in a workspace, defeated by zeroing it before every run
    EXPECT_TRUE(v.evidence.contains("detail") || v.evidence.contains("errors"))
        << file << ": no evidence";
  }
  // The same judge, after faults and a hang, still judges honest work.
  verify::Verdict after =
      judge_file(judge, (source_dir() / "tests/gpu/honest/relu_vec4.md").string(), compiler);
  EXPECT_EQ(after.outcome, verify::Outcome::Correct) << after.summary;
  EXPECT_GT(judge.runner().runners_started(), 1);
}

TEST(GpuVerify, AdmissionAdmitsHonestWorkAndRejectsATailSkipper) {
  KFORGE_REQUIRE_GPU();
  TempDir dir;
  compile::Compiler compiler(private_cache(dir));
  verify::VerifyOptions correctness_only;
  correctness_only.time = false;
  verify::Judge judge(correctness_only);
  compile::DeviceFacts facts = verify::plan_facts(0);
  struct Case {
    std::string path;
    bool admitted;
  };
  for (const Case& k : {Case{"tests/gpu/honest/layer_norm.md", true},
                        Case{"tests/gpu/admission/overfit_shown_dims.md", false}}) {
    std::string path = (source_dir() / k.path).string();
    CheckedAnswer c = check_answer_file(path, facts, compiler);
    verify::Verdict v = judge.verify(c.fixture.task, c.report);
    ASSERT_TRUE(v.correct()) << path << ": the shown dims must pass: " << v.summary;
    compile::Answer a = compile::parse_answer(read_file(path).value());
    verify::Verdict adm = verify::admit_candidate(judge, c.fixture.task, a.source, a.plan,
                                                  c.report.tunables, facts, compiler, 7);
    std::cout << "  " << k.path << ": admission " << verify::to_string(adm.outcome) << ": "
              << adm.summary << std::endl;
    EXPECT_EQ(adm.correct(), k.admitted) << path << ": " << adm.summary << "\n"
                                         << adm.evidence.dump(1);
    if (k.admitted && !verify::find_compute_sanitizer().empty()) {
      ASSERT_EQ(adm.evidence["sanitizers"].size(), 3u) << adm.evidence.dump(1);
      for (const auto& s : adm.evidence["sanitizers"]) EXPECT_EQ(s["errors"], 0) << s.dump();
    }
  }
}

TEST(GpuVerify, ScreenChecksTheTimedDimsOnceAndTimesWithoutBaselines) {
  KFORGE_REQUIRE_GPU();
  TempDir dir;
  compile::Compiler compiler(private_cache(dir));
  verify::Judge judge;
  CheckedAnswer c = check_answer_file((source_dir() / "tests/gpu/honest/relu_vec4.md").string(),
                                      verify::plan_facts(0), compiler);
  verify::Verdict s = judge.screen(c.fixture.task, c.report);
  ASSERT_TRUE(s.correct()) << s.summary;
  ASSERT_TRUE(s.timing);
  EXPECT_GT(s.timing->time.median_ms, 0);
  EXPECT_LE(s.timing->time.reps, verify::Judge::screen_timing().max_reps);
  EXPECT_TRUE(s.timing->baselines.empty());  // no baselines
  ASSERT_EQ(s.evidence["configs"].size(), 1u);
  EXPECT_TRUE(s.evidence["configs"][0]["timed"].get<bool>());
  EXPECT_EQ(s.evidence["configs"][0]["seeds"].size(), 1u);
  // A kernel that leaves outputs unwritten fails the screen too.
  CheckedAnswer noop = check_answer_file((source_dir() / "tests/gpu/exploits/noop.md").string(),
                                         verify::plan_facts(0), compiler);
  EXPECT_EQ(judge.screen(noop.fixture.task, noop.report).outcome,
            verify::Outcome::IncompleteOutput);
}

// Run 53 on the H100: LibTorch keeps what earlier candidates freed, and the judge's own buffers
// (cuMemCreate) found no memory. A buffer larger than what is free while LibTorch's cache holds the
// rest gets it: the cache is given back and the allocation tried again.
TEST(GpuVerify, LibTorchsCacheIsGivenBackForTheJudgesBuffers) {
  KFORGE_REQUIRE_GPU();
  constexpr uint64_t GiB = uint64_t{1} << 30;
  verify::Judge judge;  // the primary context current, as when judging
  verify::DeviceMemory before = verify::device_memory(0);
  ASSERT_GT(before.free, 8 * GiB) << "this test needs 8 GiB of free GPU memory";
  const uint64_t taken = before.free - 2 * GiB;
  {
    torch::Tensor t =
        torch::empty({static_cast<int64_t>(taken)},
                     torch::TensorOptions().dtype(torch::kUInt8).device(torch::kCUDA, 0));
    t.fill_(1);
  }  // freed, and kept in LibTorch's cache
  verify::DeviceMemory cached = verify::device_memory(0);
  std::cout << "  free " << verify::format_bytes(before.free) << ", with LibTorch's cache "
            << verify::format_bytes(cached.free) << std::endl;
  EXPECT_LT(cached.free, before.free - taken / 2) << "LibTorch kept the freed block";
  // LibTorch's own figures say the same: the block is reserved, and no live tensor holds it.
  ASSERT_TRUE(cached.torch_reserved && cached.torch_allocated);
  EXPECT_GE(*cached.torch_reserved, taken);
  EXPECT_LT(*cached.torch_allocated, taken / 2);
  {
    verify::SharedBuffer b("x", {static_cast<int64_t>(4 * GiB)}, torch::kUInt8, false, 0);
    b.tensor().fill_(2);
    // Read before the sum: LibTorch's reduction over 4 Gi elements may cache a temporary of its
    // own.
    verify::DeviceMemory with = verify::device_memory(0);
    std::cout << "  free with the judge's 4 GiB buffer " << verify::format_bytes(with.free)
              << std::endl;
    EXPECT_GT(with.free + 4 * GiB, before.free - GiB) << "the cache was given back";
    EXPECT_EQ(b.tensor().sum().item<int64_t>(), static_cast<int64_t>(8 * GiB));
  }
  EXPECT_TRUE(verify::release_torch_cache(0));
  verify::DeviceMemory after = verify::device_memory(0);
  EXPECT_GT(after.free, before.free - GiB);
  ASSERT_TRUE(after.torch_reserved);
  EXPECT_LT(*after.torch_reserved, taken / 2);
}

// The memory limit (VerifyOptions::memory_limit, $KFORGE_GPU_MEMORY_LIMIT) makes this GPU judge as
// a smaller one: the timing pool shrinks to what fits, and below its minimum the verdict is
// does_not_fit naming the bytes needed and usable, with nothing allocated for the timed dims.
TEST(GpuVerify, AMemoryLimitShrinksThePoolOrSaysTheTaskDoesNotFit) {
  KFORGE_REQUIRE_GPU();
  TempDir dir;
  compile::Compiler compiler(private_cache(dir));
  CheckedAnswer c = check_answer_file((source_dir() / "tests/gpu/honest/relu_vec4.md").string(),
                                      verify::plan_facts(0), compiler);
  verify::VerifyOptions o;
  o.compiled.enabled = false;
  o.baselines = false;
  o.seed = 11;
  auto judge_with = [&](std::optional<uint64_t> limit, bool time = true) {
    verify::VerifyOptions lo = o;
    lo.memory_limit = limit;
    lo.time = time;
    verify::Judge judge(lo);
    verify::Verdict v = judge.verify(c.fixture.task, c.report);
    std::cout << "  limit " << (limit ? verify::format_bytes(*limit) : std::string("none"))
              << (time ? "" : ", no timing") << ": " << verify::to_string(v.outcome) << ": "
              << v.summary << "\n    memory " << v.evidence["memory"].dump() << std::endl;
    EXPECT_EQ(judge.runner().runners_started(), 1) << "a task that does not fit costs no runner";
    return v;
  };
  verify::Verdict full = judge_with(std::nullopt);
  ASSERT_EQ(full.outcome, verify::Outcome::Correct) << full.summary;
  const nlohmann::json& m = full.evidence["memory"];
  ASSERT_TRUE(m.is_object()) << full.evidence.dump(1);
  EXPECT_EQ(m["pool_sets"], 4);
  EXPECT_EQ(m["pool_wanted"], 4);
  EXPECT_EQ(full.evidence["timing_pool_sets"], 4);
  const uint64_t set = m["needs"]["set_bytes"],
                 fixed = m["needs"]["buffers_bytes"].get<uint64_t>() +
                         m["needs"]["working_bytes"].get<uint64_t>() +
                         m["needs"]["reserve_bytes"].get<uint64_t>();
  EXPECT_EQ(m["needed_bytes"], fixed + 2 * set);

  // Room for two and a half sets: two are kept, and timing cycles over them.
  verify::Verdict two = judge_with(fixed + 2 * set + set / 2);
  ASSERT_EQ(two.outcome, verify::Outcome::Correct) << two.summary;
  EXPECT_EQ(two.evidence["memory"]["pool_sets"], 2);
  EXPECT_EQ(two.evidence["timing_pool_sets"], 2);
  ASSERT_TRUE(two.timing);
  EXPECT_GE(two.timing->time.reps, 10);

  // One byte short of the minimum: does_not_fit, before any buffer of the timed dims.
  verify::Verdict none = judge_with(fixed + 2 * set - 1);
  EXPECT_EQ(none.outcome, verify::Outcome::DoesNotFit) << none.summary;
  EXPECT_FALSE(none.evidence["memory"]["fits"].get<bool>());
  EXPECT_NE(none.summary.find(std::to_string(fixed + 2 * set) + " bytes"), std::string::npos)
      << none.summary;
  EXPECT_NE(none.summary.find(std::to_string(fixed + 2 * set - 1) + " bytes"), std::string::npos)
      << none.summary;
  EXPECT_NE(none.summary.find("do not fit this GPU's memory"), std::string::npos) << none.summary;
  EXPECT_FALSE(none.evidence.contains("configs")) << "nothing was run";

  // Without timing one set at a time is enough.
  verify::Verdict unt = judge_with(fixed + set, false);
  EXPECT_EQ(unt.outcome, verify::Outcome::Correct) << unt.summary;
  EXPECT_EQ(unt.evidence["memory"]["pool_minimum"], 1);

  // The environment variable, for users: a 64 MiB GPU fits nothing at the timed dims.
  setenv("KFORGE_GPU_MEMORY_LIMIT", "64MiB", 1);
  verify::Verdict env = judge_with(std::nullopt);
  unsetenv("KFORGE_GPU_MEMORY_LIMIT");
  EXPECT_EQ(env.outcome, verify::Outcome::DoesNotFit) << env.summary;
  EXPECT_EQ(env.evidence["memory"]["limit_bytes"], uint64_t{64} << 20);
}

// A float64 reference that runs out of the GPU's memory whole is computed a slice of its task's
// batch_dim at a time (verify/batch_slices.h): LibTorch's own out-of-memory error, rethrown by
// TorchScript, is recognised, and the slices make the whole. A live tensor takes all but 768 MiB,
// so that causal attention's float64 math path (two 512 MiB score matrices at these sizes) cannot
// run whole, while one batch index (a quarter of that) can.
TEST(GpuVerify, AReferenceTooLargeWholeIsComputedABatchSliceAtATime) {
  KFORGE_REQUIRE_GPU();
  constexpr uint64_t MiB = uint64_t{1} << 20;
  tasks::Task task = tasks::load_task(source_dir() / "tasks/level1/sdpa_causal.toml");
  ASSERT_EQ(task.batch_dim, "B");
  tasks::Reference ref = tasks::Reference::compile(task);
  auto run = [&](const std::vector<torch::Tensor>& in) { return ref.run(in); };
  torch::manual_seed(5);
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(torch::kCUDA, 0);
  std::vector<torch::Tensor> qkv;
  for (int i = 0; i < 3; ++i) qkv.push_back(torch::randn({4, 4, 2048, 64}, f64));
  const torch::Tensor whole = run(qkv).at(0);
  verify::SlicedResult r;
  {
    verify::Judge judge;  // the primary context current, as when judging
    ASSERT_TRUE(verify::release_torch_cache(0));
    const uint64_t free = verify::device_memory(0).free;
    ASSERT_GT(free, 2048 * MiB);
    torch::Tensor hog =
        torch::empty({static_cast<int64_t>(free - 768 * MiB)},
                     torch::TensorOptions().dtype(torch::kUInt8).device(torch::kCUDA, 0));
    int releases = 0;
    r = verify::run_in_batch_slices(task, run, qkv, [&] {
      ++releases;
      verify::release_torch_cache(0);
    });
    std::cout << "  with " << verify::format_bytes(verify::device_memory(0).free)
              << " free: slices of " << r.slice << " batch index(es), " << releases
              << " release(s) of LibTorch's cache" << std::endl;
    EXPECT_GE(releases, 1);
  }
  EXPECT_GE(r.slice, 1) << "the whole should not have fitted";
  EXPECT_LE(r.slice, 2);
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_TRUE(torch::allclose(r.outputs[0], whole, 1e-12, 0)) << "the slices make the whole";
}
