// Judging on GPUs with less memory (verify/memory.h, docs/decisions.md): what one verification
// needs at a task's timed dims, how many timing input sets fit, the does_not_fit outcome and its
// words, the memory limit's spelling, and the archive's schema 6 that stores the outcome. No GPU.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "archive_schema.h"
#include "archive_sql.h"
#include "kforge/archive/archive.h"
#include "kforge/archive/sqlite.h"
#include "kforge/tasks/reference.h"
#include "kforge/tasks/task.h"
#include "kforge/verify/batch_slices.h"
#include "kforge/verify/memory.h"
#include "kforge/verify/outcome.h"
#include "test_util.h"

using namespace kforge;
using namespace kforge::verify;

namespace {

constexpr uint64_t GiB = uint64_t{1} << 30, MiB = uint64_t{1} << 20;
// What the driver reports: cuMemGetInfo's total, and free in a judge with LibTorch's and a
// runner's contexts (about 1.1 GiB less).
constexpr uint64_t kH100Total = uint64_t{81559} * MiB, kH100Free = kH100Total - 1126 * MiB;
constexpr uint64_t kH200Total = uint64_t{143771} * MiB, kH200Free = kH200Total - 1126 * MiB;
constexpr uint64_t k24GiBTotal = uint64_t{24564} * MiB, k24GiBFree = k24GiBTotal - 1126 * MiB;
constexpr uint64_t kGranularity = 2 * MiB;

TensorSize f32(uint64_t numel) {
  return {numel, 4, true};
}

// The timed dims' inputs of a shipped task, and outputs of the first input's shape and dtype (the
// elementwise and row-wise tasks of run 53).
struct Sizes {
  std::vector<TensorSize> in, out;
};
Sizes elementwise(const std::string& id) {
  tasks::Task t = tasks::load_task(test::source_dir() / "tasks" / (id + ".toml"));
  Sizes s;
  for (const tasks::InputSpec& i : t.inputs) {
    TensorSize z;
    z.numel = 1;
    for (int64_t d : t.shape_of(i, t.dims)) z.numel *= static_cast<uint64_t>(d);
    z.element_bytes = tasks::dtype_size(i.dtype);
    z.floating = tasks::is_floating(i.dtype);
    s.in.push_back(z);
  }
  s.out.push_back(s.in.front());
  return s;
}

}  // namespace

// Where the memory goes for level1/cumsum (float32 [24576, 32768]: 3 GiB in, 3 GiB out).
TEST(MemoryPlan, NeedsCountBuffersSetsAndWorkingMemory) {
  const uint64_t n = uint64_t{24576} * 32768;
  MemoryNeeds m = memory_needs({f32(n)}, {f32(n)}, {}, kGranularity, kH100Total);
  // Each buffer its own allocation: the tensor plus at least 256 slack bytes, rounded up to 2 MiB.
  EXPECT_EQ(m.buffers, 2 * (3 * GiB + 2 * MiB));
  EXPECT_EQ(m.set, 6 * GiB);  // inputs and eager's outputs
  // Run 1's outputs (3), the cached poison (3), float64 inputs (6) and outputs (6), one float64
  // temporary (6), four float64 comparison chunks of 2^26 elements (2).
  EXPECT_EQ(m.working, 26 * GiB);
  EXPECT_EQ(m.reserve, kH100Total / 32);
  EXPECT_EQ(m.for_sets(4), m.buffers + m.working + m.reserve + 24 * GiB);

  // Integer inputs are not widened; integer outputs stay their size; small buffers take no cached
  // poison.
  MemoryNeeds small = memory_needs({TensorSize{1000, 8, false}}, {TensorSize{10, 8, false}},
                                   {f32(100)}, kGranularity, 8 * GiB);
  EXPECT_EQ(small.buffers, 3 * 2 * MiB);
  EXPECT_EQ(small.set, 8000u + 80u);
  EXPECT_EQ(small.working, 80u + 0 + 0 + 80 + 80 + 4 * 8 * 10);
  EXPECT_EQ(small.reserve, kMinReserveBytes);
}

TEST(MemoryPlan, ThePoolShrinksToWhatFitsButNeverBelowTheMinimum) {
  MemoryNeeds m;
  m.buffers = 6 * GiB, m.set = 6 * GiB, m.working = 26 * GiB,
  m.reserve = 2 * GiB;  // 34 GiB before any set
  PoolPlan all = plan_pool(m, 80 * GiB, 4);
  EXPECT_TRUE(all.fits);
  EXPECT_EQ(all.sets, 4);
  EXPECT_EQ(all.minimum, 2);
  EXPECT_EQ(all.needed, 46 * GiB);

  PoolPlan three = plan_pool(m, 34 * GiB + 3 * 6 * GiB + 5 * GiB, 4);
  EXPECT_EQ(three.sets, 3);
  PoolPlan two = plan_pool(m, 46 * GiB, 4);  // exactly the minimum
  EXPECT_TRUE(two.fits);
  EXPECT_EQ(two.sets, 2);

  PoolPlan none = plan_pool(m, 46 * GiB - 1, 4);
  EXPECT_FALSE(none.fits);
  EXPECT_EQ(none.sets, 0);
  EXPECT_EQ(none.needed, 46 * GiB);
  EXPECT_EQ(plan_pool(m, 10 * GiB, 4).sets, 0) << "less than the buffers and working memory alone";

  // Without timing one set is alive at a time (the seed's own); a pool of 1 asked for is kept.
  EXPECT_TRUE(plan_pool(m, 40 * GiB, 1, 1).fits);
  EXPECT_EQ(plan_pool(m, 40 * GiB, 1, 1).sets, 1);
  EXPECT_EQ(plan_pool(m, 40 * GiB, 1).minimum, 1) << "the minimum is clamped to what is wanted";
  // Screening's pool of 2.
  EXPECT_EQ(plan_pool(m, 80 * GiB, 2).sets, 2);
  // A task with nothing to keep always fits its sets.
  MemoryNeeds empty;
  EXPECT_EQ(plan_pool(empty, 0, 4).sets, 4);
}

TEST(MemoryPlan, TheShortfallNamesTheBytesNeededAndFree) {
  MemoryNeeds m;
  m.buffers = 6 * GiB, m.set = 6 * GiB, m.working = 26 * GiB, m.reserve = 1 * GiB;
  PoolPlan p = plan_pool(m, 20 * GiB, 4);
  p.device.free = 20 * GiB;
  p.device.total = 24 * GiB;
  std::string s = p.shortfall();
  EXPECT_NE(s.find(std::to_string(45 * GiB) + " bytes (45.0 GiB)"), std::string::npos) << s;
  EXPECT_NE(s.find(std::to_string(20 * GiB) + " bytes (20.0 GiB) can be used (free of 24.0 GiB)"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("2 input set(s) of 6.0 GiB"), std::string::npos) << s;
  EXPECT_NE(s.find("do not fit this GPU's memory"), std::string::npos) << s;
  EXPECT_EQ(s.find("LibTorch"), std::string::npos) << s;  // unknown: not said
  // Where LibTorch's allocator was read, the shortfall says how much of the memory in use is its.
  p.device.torch_reserved = 3 * GiB;
  p.device.torch_allocated = GiB;
  s = p.shortfall();
  EXPECT_NE(s.find("(free of 24.0 GiB; of the 4.0 GiB in use, LibTorch in this process holds "
                   "3.0 GiB (1.0 GiB of it in live tensors))"),
            std::string::npos)
      << s;
  EXPECT_EQ(p.to_json()["torch_reserved_bytes"], 3 * GiB);
  EXPECT_EQ(p.to_json()["torch_allocated_bytes"], GiB);
  p.device.torch_reserved.reset();
  p.device.torch_allocated.reset();
  EXPECT_TRUE(p.to_json()["torch_reserved_bytes"].is_null());
  p.limit = 20 * GiB;
  p.device.free = 70 * GiB;
  EXPECT_NE(p.shortfall().find("KFORGE_GPU_MEMORY_LIMIT"), std::string::npos) << p.shortfall();

  nlohmann::json j = p.to_json();
  EXPECT_EQ(j["pool_sets"], 0);
  EXPECT_EQ(j["fits"], false);
  EXPECT_EQ(j["needed_bytes"], 45 * GiB);
  EXPECT_EQ(j["available_bytes"], 20 * GiB);
  EXPECT_EQ(j["limit_bytes"], 20 * GiB);
  EXPECT_EQ(j["needs"]["set_bytes"], 6 * GiB);

  MemoryShortfall e(p);
  EXPECT_EQ(std::string(e.what()), p.shortfall());
  EXPECT_EQ(e.plan().needed, 45 * GiB);
}

// Run 53's eight failures (7 tasks) at their timed dims: the whole pool fits the H200 and the
// 80 GiB H100 (at least the minimum on the H100), and a 24 GiB GPU gets does_not_fit.
TEST(MemoryPlan, Run53TasksFitTheH100AndNotA24GiBGpu) {
  for (const char* id :
       {"level1/cumsum", "level1/gelu_tanh_fp16", "level1/l1_norm", "level1/layer_norm",
        "level1/relu_bf16", "level1/rms_norm", "level1/silu"}) {
    Sizes s = elementwise(id);
    MemoryNeeds h100 = memory_needs(s.in, s.out, {}, kGranularity, kH100Total);
    PoolPlan on_h100 = plan_pool(h100, kH100Free, 4);
    PoolPlan on_h200 =
        plan_pool(memory_needs(s.in, s.out, {}, kGranularity, kH200Total), kH200Free, 4);
    PoolPlan on_24 =
        plan_pool(memory_needs(s.in, s.out, {}, kGranularity, k24GiBTotal), k24GiBFree, 4);
    std::cout << "  " << id << ": set " << format_bytes(h100.set) << ", buffers "
              << format_bytes(h100.buffers) << ", working " << format_bytes(h100.working)
              << "; H100 " << on_h100.sets << " sets (4: " << format_bytes(h100.for_sets(4))
              << " of " << format_bytes(kH100Free) << "), H200 " << on_h200.sets
              << ", 24 GiB: needs " << format_bytes(on_24.needed) << std::endl;
    EXPECT_GE(on_h100.sets, kMinPoolSets) << id;
    EXPECT_EQ(on_h200.sets, 4) << id;
    EXPECT_FALSE(on_24.fits) << id;
    EXPECT_GT(on_24.needed, k24GiBFree) << id;
  }
}

TEST(MemoryPlan, SizesAreReadAndWritten) {
  EXPECT_EQ(parse_bytes("24GiB"), 24 * GiB);
  EXPECT_EQ(parse_bytes("24 GiB"), 24 * GiB);
  EXPECT_EQ(parse_bytes("80g"), 80 * GiB);
  EXPECT_EQ(parse_bytes("512MiB"), 512 * MiB);
  EXPECT_EQ(parse_bytes("1.5G"), 3 * GiB / 2);
  EXPECT_EQ(parse_bytes("1000000"), 1000000u);
  EXPECT_EQ(parse_bytes("2T"), 2048 * GiB);
  for (const char* bad : {"", "GiB", "-1G", "0", "12 parsecs", "1.2.3G", "0.1"})
    EXPECT_FALSE(parse_bytes(bad)) << bad;
  EXPECT_EQ(format_bytes(900), "900 bytes");
  EXPECT_EQ(format_bytes(512 * MiB), "512.0 MiB");
  EXPECT_EQ(format_bytes(45 * GiB + GiB / 2), "45.5 GiB");
}

TEST(MemoryPlan, TheLimitComesFromTheOptionElseTheEnvironment) {
  const char* old = std::getenv("KFORGE_GPU_MEMORY_LIMIT");
  std::string saved = old ? old : "";
  unsetenv("KFORGE_GPU_MEMORY_LIMIT");
  EXPECT_FALSE(memory_limit(std::nullopt));
  EXPECT_EQ(memory_limit(5 * GiB), 5 * GiB);
  setenv("KFORGE_GPU_MEMORY_LIMIT", "20GiB", 1);
  EXPECT_EQ(memory_limit(std::nullopt), 20 * GiB);
  EXPECT_EQ(memory_limit(5 * GiB), 5 * GiB) << "the option wins";
  setenv("KFORGE_GPU_MEMORY_LIMIT", "lots", 1);
  try {
    memory_limit(std::nullopt);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KFORGE_GPU_MEMORY_LIMIT=lots is not a size"),
              std::string::npos)
        << e.what();
  }
  if (old)
    setenv("KFORGE_GPU_MEMORY_LIMIT", saved.c_str(), 1);
  else
    unsetenv("KFORGE_GPU_MEMORY_LIMIT");
}

TEST(MemoryPlan, DoesNotFitIsAnOutcomeOfItsOwn) {
  EXPECT_EQ(to_string(Outcome::DoesNotFit), "does_not_fit");
  EXPECT_EQ(outcome_from_string("does_not_fit"), Outcome::DoesNotFit);
  Verdict v;
  v.outcome = Outcome::DoesNotFit;
  v.summary = "the timed dims need ...";
  v.evidence = {{"memory", {{"needed_bytes", 45 * GiB}}}};
  Verdict back = verdict_from_json(to_json(v));  // a GPU worker's answer
  EXPECT_EQ(back.outcome, Outcome::DoesNotFit);
  EXPECT_EQ(back.evidence["memory"]["needed_bytes"], 45 * GiB);
}

// Schema 5 to today's: evaluations keep every row and column (but the baselines' columns, rows of
// evaluation_baselines since schema 7), and take does_not_fit (schema 6).
TEST(MemoryPlan, AVersionFiveArchiveMigratesAndStoresDoesNotFit) {
  test::TempDir dir;
  std::string path = (dir.path() / "v5.db").string();
  std::vector<std::string> before;
  {
    archive::Database raw(path, true);
    for (std::string_view v :
         {embedded::archive_schema_v1, embedded::archive_schema_v2, embedded::archive_schema_v3,
          embedded::archive_schema_v4, embedded::archive_schema_v5})
      raw.exec(std::string(v));
    raw.exec("PRAGMA user_version = 5");
    raw.exec("INSERT INTO tasks (suite, name, version) VALUES ('s', 'relu', 'v1')");
    raw.exec(
        "INSERT INTO candidates (task_id, identity, source, prompt_kind) VALUES (1, 'x', 'src', "
        "'seed')");
    raw.exec(
        "INSERT INTO evaluations (candidate_id, outcome, dims, time_ms, harness_version, "
        "import_trust, compiled_ms, "
        "speedup_compiled) VALUES (1, 'correct', '{\"N\":8}', 0.5, 3, 'claimed', 0.9, 1.8)");
    EXPECT_THROW(raw.exec("INSERT INTO evaluations (candidate_id, outcome, harness_version) VALUES "
                          "(1, 'does_not_fit', 3)"),
                 Error)
        << "version 5 refuses it";
    archive::Statement cols = raw.prepare("SELECT name FROM pragma_table_info('evaluations')");
    while (cols.step()) before.push_back(cols.text(0));
  }
  archive::Archive a = archive::Archive::open(path);
  EXPECT_EQ(a.schema_version(), archive::kSchemaVersion);
  test::ArchiveSql sql(a);
  std::vector<std::string> after = sql.column("SELECT name FROM pragma_table_info('evaluations')");
  std::vector<std::string> kept;
  for (const std::string& c : before)
    if (c.find("eager") == std::string::npos && c.find("scripted") == std::string::npos &&
        c.find("compiled") == std::string::npos)
      kept.push_back(c);
  EXPECT_EQ(kept.size(), before.size() - 6);
  EXPECT_EQ(after, kept) << "the same columns in the same order, less the baselines'";
  archive::Statement row = sql.prepare(
      "SELECT outcome, dims, time_ms, import_trust, b.kind, b.ms FROM evaluations e JOIN "
      "evaluation_baselines b ON b.evaluation_id = e.id WHERE e.id = 1");
  ASSERT_TRUE(row.step());
  EXPECT_EQ(row.text(0), "correct");
  EXPECT_EQ(row.text(1), "{\"N\":8}");
  EXPECT_EQ(row.real(2), 0.5);
  EXPECT_EQ(row.text(3), "claimed");
  EXPECT_EQ(row.text(4), "compiled");
  EXPECT_EQ(row.real(5), 0.9);
  EXPECT_FALSE(row.step()) << "no eager or scripted time: no row";
  sql.exec(
      "INSERT INTO evaluations (candidate_id, outcome, harness_version) VALUES (1, 'does_not_fit', "
      "3)");
  EXPECT_THROW(
      sql.exec(
          "INSERT INTO evaluations (candidate_id, outcome, harness_version) VALUES (1, 'fast', 3)"),
      Error);
  archive::Statement indexes = sql.prepare(
      "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'evaluations'");
  ASSERT_TRUE(indexes.step());
  EXPECT_EQ(indexes.integer(0), 2);
}

TEST(MemoryPlan, LibTorchIsAskedToKeepLargeCachedBlocksWholeUnlessTheUserSaidOtherwise) {
  auto saved = [](const char* name) {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  const std::optional<std::string> cuda = saved("PYTORCH_CUDA_ALLOC_CONF"),
                                   any = saved("PYTORCH_ALLOC_CONF");
  ::unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  ::unsetenv("PYTORCH_ALLOC_CONF");
  keep_large_cached_blocks_whole();
  EXPECT_STREQ(std::getenv("PYTORCH_CUDA_ALLOC_CONF"), "max_split_size_mb:512");
  ::setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 1);
  keep_large_cached_blocks_whole();
  EXPECT_STREQ(std::getenv("PYTORCH_CUDA_ALLOC_CONF"), "expandable_segments:True");
  ::unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  ::setenv("PYTORCH_ALLOC_CONF", "max_split_size_mb:128", 1);
  keep_large_cached_blocks_whole();
  EXPECT_EQ(std::getenv("PYTORCH_CUDA_ALLOC_CONF"), nullptr);
  for (auto [name, value] :
       {std::pair{"PYTORCH_CUDA_ALLOC_CONF", cuda}, {"PYTORCH_ALLOC_CONF", any}})
    value ? ::setenv(name, value->c_str(), 1) : ::unsetenv(name);
}

// A float64 reference that runs out of memory fails through TorchScript's interpreter, which puts
// its traceback and source excerpt first and LibTorch's "CUDA out of memory" last. The reference's
// error keeps that last line, so the judge still recognises it as out of memory (does_not_fit,
// not harness_error: session 30's sdpa_causal lost it to a message cut to 12 lines). The message
// is built at run time so that the excerpt does not contain it.
TEST(MemoryPlan, AReferenceOutOfMemoryIsRecognisedAfterALongTraceback) {
  tasks::Task task;
  task.file = "oom.toml";
  task.reference =
      "def forward(x: Tensor) -> Tensor:\n"
      "    assert bool(\n"
      "        x.sum()\n"
      "        <\n"
      "        -1.0e30\n"
      "    ), 'CUDA out of ' + 'memory. Tried to allocate 32.00 GiB'\n"
      "    return x\n";
  task.inputs.resize(1);
  tasks::Reference ref = tasks::Reference::compile(task);
  try {
    ref.run({torch::ones({4})});
    FAIL() << "the reference should have failed";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_GT(std::count(what.begin(), what.end(), '\n'), 12) << "long enough to be cut: " << what;
    EXPECT_TRUE(is_out_of_memory(e)) << what;
    EXPECT_NE(what.find("the reference failed"), std::string::npos) << what;
  }
}

// A reference too large for the GPU whole, a slice of its batch_dim at a time (batch_slices.h).
// The out-of-memory errors are raised by the references themselves, as LibTorch words them: the
// GPU's own is what session 30's level1/sdpa_causal met (its float64 math attention needs about
// 96 GiB at the timed size).
namespace {

struct SliceProbe {
  int calls = 0, releases = 0;
  std::vector<int64_t> lengths;
};

tasks::Task task_with(const std::string& reference, const std::string& batch_dim) {
  tasks::Task task;
  task.file = "sliced.toml";
  task.reference = reference;
  task.inputs.resize(1);
  task.batch_dim = batch_dim;
  return task;
}

SlicedResult run_traced(const tasks::Task& task, const TensorsFn& run,
                        const std::vector<torch::Tensor>& inputs, SliceProbe& probe,
                        int64_t start_slice = 0) {
  return run_in_batch_slices(
      task,
      [&](const std::vector<torch::Tensor>& in) {
        ++probe.calls;
        probe.lengths.push_back(in[0].size(0));
        return run(in);
      },
      inputs, [&] { ++probe.releases; }, start_slice);
}

struct ReferenceFailure {
  std::string what;  // empty: the reference gave its outputs
  bool out_of_memory = false;
};

// The error `task`'s reference ends with through run_in_batch_slices.
ReferenceFailure failure_of(const tasks::Task& task, const std::vector<torch::Tensor>& inputs,
                            SliceProbe& probe) {
  tasks::Reference ref = tasks::Reference::compile(task);
  try {
    run_traced(
        task, [&](const std::vector<torch::Tensor>& in) { return ref.run(in); }, inputs, probe);
  } catch (const std::exception& e) {
    return {e.what(), is_out_of_memory(e)};
  }
  return {};
}

}  // namespace

TEST(ReferenceSlices, AttentionTooLargeWholeIsComputedOneBatchIndexAtATime) {
  tasks::Task task = tasks::load_task(test::source_dir() / "tasks/level1/sdpa_causal.toml");
  ASSERT_EQ(task.batch_dim, "B");
  tasks::Reference ref = tasks::Reference::compile(task);
  torch::manual_seed(3);
  std::vector<torch::Tensor> qkv;
  for (int i = 0; i < 3; ++i) qkv.push_back(torch::randn({3, 2, 17, 64}, torch::kFloat64));
  const torch::Tensor whole = ref.run(qkv).at(0);
  SliceProbe probe;
  SlicedResult r = run_traced(
      task,
      [&](const std::vector<torch::Tensor>& in) {
        if (in[0].size(0) > 1)
          throw std::runtime_error("CUDA out of memory. Tried to allocate 8 GiB");
        return ref.run(in);
      },
      qkv, probe);
  EXPECT_EQ(r.slice, 1);
  // Whole (3), then slices of 2 (the first fails), then of 1.
  EXPECT_EQ(probe.lengths, (std::vector<int64_t>{3, 2, 1, 1, 1}));
  EXPECT_EQ(probe.releases, 2) << "LibTorch's cache is given back before each smaller try";
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].sizes(), whole.sizes());
  EXPECT_EQ(r.outputs[0].scalar_type(), torch::kFloat64);
  EXPECT_TRUE(torch::allclose(r.outputs[0], whole, 1e-12, 0)) << "the slices make the whole";
}

TEST(ReferenceSlices, AnOutOfMemoryRaisedInsideTorchScriptHalvesTheBatch) {
  tasks::Task task = task_with(
      "def forward(x: Tensor) -> Tensor:\n"
      "    assert x.size(0) <= 2, 'CUDA out of ' + 'memory. Tried to allocate 1.00 GiB'\n"
      "    return x * 2.0\n",
      "B");
  tasks::Reference ref = tasks::Reference::compile(task);
  torch::Tensor x = torch::arange(12, torch::kFloat64).reshape({4, 3});
  SliceProbe probe;
  SlicedResult r = run_traced(
      task, [&](const std::vector<torch::Tensor>& in) { return ref.run(in); }, {x}, probe);
  EXPECT_EQ(r.slice, 2);
  EXPECT_EQ(probe.lengths, (std::vector<int64_t>{4, 2, 2}));
  EXPECT_EQ(probe.releases, 1);
  EXPECT_TRUE(torch::equal(r.outputs.at(0), x * 2.0));
  // The judge's next reference on inputs of this batch starts at the slice that fitted.
  SliceProbe again;
  SlicedResult r2 = run_traced(
      task, [&](const std::vector<torch::Tensor>& in) { return ref.run(in); }, {x}, again, r.slice);
  EXPECT_EQ(r2.slice, 2);
  EXPECT_EQ(again.lengths, (std::vector<int64_t>{2, 2})) << "no whole try this time";
  EXPECT_EQ(again.releases, 0);
  EXPECT_TRUE(torch::equal(r2.outputs.at(0), x * 2.0));
}

TEST(ReferenceSlices, WithoutABatchDimOrForAnotherErrorTheErrorStands) {
  const std::string oom_reference =
      "def forward(x: Tensor) -> Tensor:\n"
      "    assert x.size(0) <= 1, 'CUDA out of ' + 'memory. Tried to allocate 1.00 GiB'\n"
      "    return x\n";
  const torch::Tensor x = torch::ones({4, 3}, torch::kFloat64);
  {
    SliceProbe probe;  // no batch_dim: does_not_fit as before
    ReferenceFailure f = failure_of(task_with(oom_reference, ""), {x}, probe);
    EXPECT_TRUE(f.out_of_memory) << f.what;
    EXPECT_EQ(probe.calls, 1);
    EXPECT_EQ(probe.releases, 0);
  }
  {
    SliceProbe probe;
    ReferenceFailure f = failure_of(task_with("def forward(x: Tensor) -> Tensor:\n"
                                              "    assert x.size(0) <= 1, 'shapes do not match'\n"
                                              "    return x\n",
                                              "B"),
                                    {x}, probe);
    EXPECT_FALSE(f.out_of_memory);
    EXPECT_NE(f.what.find("shapes do not match"), std::string::npos) << f.what;
    EXPECT_EQ(probe.calls, 1) << "only running out of memory is retried in slices";
  }
  {
    tasks::Task task = task_with(oom_reference, "B");  // out of memory at one index a slice
    SliceProbe probe;
    auto always = [&](const std::vector<torch::Tensor>&) -> std::vector<torch::Tensor> {
      throw std::runtime_error("CUDA out of memory. Tried to allocate 1.00 GiB");
    };
    EXPECT_THROW(run_traced(task, always, {x}, probe), std::runtime_error);
    EXPECT_EQ(probe.lengths, (std::vector<int64_t>{4, 2, 1}));
    SliceProbe single;
    EXPECT_THROW(run_traced(task, always, {torch::ones({1, 3}, torch::kFloat64)}, single),
                 std::runtime_error);
    EXPECT_EQ(single.calls, 1) << "one batch index cannot be sliced";
  }
}

TEST(ReferenceSlices, AReferenceNotIndependentAlongItsBatchDimIsNamed) {
  SliceProbe probe;
  ReferenceFailure f = failure_of(
      task_with("def forward(x: Tensor) -> Tensor:\n"
                "    assert x.size(0) <= 1, 'CUDA out of ' + 'memory. Tried to allocate 1.00 GiB'\n"
                "    return x.sum(dim=0)\n",
                "B"),
      {torch::ones({4, 3}, torch::kFloat64)}, probe);
  EXPECT_FALSE(f.out_of_memory) << "a sum over the batch cannot be sliced: " << f.what;
  EXPECT_NE(f.what.find("sliced.toml"), std::string::npos) << f.what;
  EXPECT_NE(f.what.find("batch_dim 'B'"), std::string::npos) << f.what;
  EXPECT_NE(f.what.find("does not begin with 1"), std::string::npos) << f.what;
}
