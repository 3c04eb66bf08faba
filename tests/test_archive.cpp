// The archive on real SQLite files: schema and migrations, refusals, the winner rule, retrieval,
// JSONL round trip, kill -9 mid-write, a reader beside a writer, and browsing from the CLI.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "archive_schema.h"
#include "archive_sql.h"
#include "kforge/archive/archive.h"
#include "kforge/archive/run_log.h"
#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/common/identity.h"
#include "kforge/verify/outcome.h"
#include "test_util.h"

namespace {

using namespace kforge::archive;
using kforge::test::ArchiveSql;
using kforge::test::TempDir;
using nlohmann::json;

kforge::tasks::Task make_task(const std::string& suite, const std::string& name,
                              const std::vector<std::string>& tags, const std::string& summary) {
  kforge::tasks::Task t;
  t.suite = suite;
  t.name = name;
  t.tags = tags;
  t.summary = summary;
  t.content_hash = kforge::content_hash(suite + name + summary);
  t.reference = "def forward(x: Tensor) -> Tensor:\n    return x\n";
  return t;
}

EvaluationRecord eval(const std::string& outcome, std::optional<double> ms, bool admitted = true,
                      std::vector<std::string> flags = {}) {
  EvaluationRecord e;
  e.outcome = outcome;
  e.time_ms = ms;
  e.baselines.set(kforge::BaselineKind::Eager, 2.0);
  e.admitted = admitted;
  e.flags = std::move(flags);
  e.harness_version = 1;
  e.evidence = {{"max_abs_error", 1e-7}};
  e.dims = {{"N", 1024}};
  return e;
}

// The identity kforge gives a candidate (an import recomputes it).
NewCandidate& with_identity(NewCandidate& c) {
  c.identity = kforge::candidate_identity(c.source, c.plan,
                                          c.tunables.get<std::map<std::string, int64_t>>());
  return c;
}

NewCandidate candidate(TaskId task, const std::string& source) {
  NewCandidate c;
  c.task = task;
  c.source = source;
  c.plan = {{"launch", json::array()}};
  c.model = "test-model";
  c.prompt_kind = "seed";
  with_identity(c);
  return c;
}

// Reference times as the judge gives them: eager and scripted, torch.compile's or why it has none.
BaselineTimes times(std::optional<double> eager, std::optional<double> scripted,
                    std::optional<double> compiled = std::nullopt,
                    const std::string& compiled_absent = "") {
  BaselineTimes b;
  if (eager) b.set(kforge::BaselineKind::Eager, eager);
  if (scripted) b.set(kforge::BaselineKind::Scripted, scripted);
  if (compiled || !compiled_absent.empty())
    b.set(kforge::BaselineKind::Compiled, compiled, compiled_absent);
  return b;
}

int64_t count(Archive& a, const std::string& sql) {
  return ArchiveSql(a).count(sql);
}

TEST(Archive, CreatesTheSchemaWithWalAndForeignKeys) {
  TempDir dir;
  Archive a = Archive::open((dir.path() / "a.db").string());
  EXPECT_EQ(a.schema_version(), kSchemaVersion);
  EXPECT_EQ(ArchiveSql(a).text("PRAGMA journal_mode"), "wal");
  // A candidate for a task that does not exist violates a foreign key.
  EXPECT_THROW(a.add_candidate(candidate(TaskId{42}, "x"), std::nullopt, {}), kforge::Error);
}

TEST(Archive, MigratesEveryOlderSchemaAndPinsTheCount) {
  // Version 0 is an empty file; each later version migrates from the one before it.
  TempDir dir;
  std::string path = (dir.path() / "old.db").string();
  { Database raw(path, true); }
  Archive a = Archive::open(path);
  EXPECT_EQ(a.schema_version(), 7);
  EXPECT_EQ(kSchemaVersion, 7)
      << "a new schema version needs a migration test from the previous one "
         "(1 to 2: ArchiveImport.MigratesAVersionOneArchive; 2 to 3: "
         "Evolve.MigratesAVersionTwoArchive; 3 to 4: Evolve.MigratesAVersionThreeArchive; "
         "4 to 5: CompiledColumns.AVersionFourArchiveMigratesWithNoCompiledTimes; "
         "5 to 6: MemoryPlan.AVersionFiveArchiveMigratesAndStoresDoesNotFit; "
         "6 to 7: Archive.AVersionSixArchivesBaselinesBecomeListsKeyedByKind)";
}

// Schema 7: a version 6 archive's baseline columns become lists keyed by kind, the reason
// torch.compile has no time included (an evaluation's from its evidence, a baseline's from its
// column), and the columns are gone.
TEST(Archive, AVersionSixArchivesBaselinesBecomeListsKeyedByKind) {
  using kforge::BaselineKind;
  const std::string no_python = "no Python with PyTorch 2 found";
  TempDir dir;
  std::string path = (dir.path() / "v6.db").string();
  {
    Database raw(path, true);
    for (std::string_view v :
         {kforge::embedded::archive_schema_v1, kforge::embedded::archive_schema_v2,
          kforge::embedded::archive_schema_v3, kforge::embedded::archive_schema_v4,
          kforge::embedded::archive_schema_v5, kforge::embedded::archive_schema_v6})
      raw.exec(std::string(v));
    raw.exec("PRAGMA user_version = 6");
    raw.exec("INSERT INTO tasks (suite, name, version) VALUES ('s', 'relu', 'v1')");
    raw.exec("INSERT INTO devices (uuid, name, arch) VALUES ('GPU-1', 'NVIDIA H200', 'sm_90a')");
    std::string source = "__global__ void k() {}";
    Statement c = raw.prepare(
        "INSERT INTO candidates (task_id, identity, source, prompt_kind) VALUES (1, ?, ?, 'seed')");
    c.bind(1, kforge::content_hash(source)).bind(2, source).run();
    raw.exec(
        "INSERT INTO evaluations (candidate_id, device_id, outcome, dims, time_ms, eager_ms, "
        "scripted_ms, speedup_eager, speedup_scripted, compiled_ms, speedup_compiled, admitted, "
        "harness_version, created_at) VALUES (1, 1, 'correct', '{\"N\":8}', 0.5, 1.0, 1.1, 2.0, "
        "2.2, 0.9, 1.8, 1, 7, '2026-12-01T00:00:00.000Z')");
    raw.exec(
        "INSERT INTO evaluations (candidate_id, device_id, outcome, evidence, dims, time_ms, "
        "eager_ms, scripted_ms, speedup_eager, speedup_scripted, admitted, harness_version, "
        "created_at) VALUES (1, 1, 'correct', '{\"timing\":{\"compiled_absent\":\"" +
        no_python +
        "\"}}', '{\"N\":8}', 0.4, 1.0, 1.2, 2.5, 3.0, 1, 7, '2026-12-02T00:00:00.000Z')");
    raw.exec(
        "INSERT INTO evaluations (candidate_id, device_id, outcome, harness_version) VALUES (1, 1, "
        "'wrong_result', 7)");
    raw.exec(
        "INSERT INTO baselines (task_id, dims, device_id, math_mode, eager_ms, scripted_ms, "
        "compiled_absent) VALUES (1, '{\"N\":8}', 1, 'ieee', 1.0, 1.1, '" +
        no_python + "')");
    raw.exec(
        "INSERT INTO baselines (task_id, dims, device_id, math_mode, eager_ms, compiled_ms) VALUES "
        "(1, '{\"N\":8}', 1, 'tf32', 0.8, 0.7)");
  }
  Archive a = Archive::open(path);
  EXPECT_EQ(a.schema_version(), 7);
  json dims = {{"N", 8}};
  EXPECT_EQ(a.baseline(TaskId{1}, dims, DeviceId{1}, "ieee")->to_json(),
            json({{"eager", 1.0}, {"scripted", 1.1}, {"absent", {{"compiled", no_python}}}}));
  EXPECT_EQ(a.baseline(TaskId{1}, dims, DeviceId{1}, "tf32")->to_json(),
            json({{"eager", 0.8}, {"compiled", 0.7}}));
  json evaluations = a.show(CandidateId{1})["evaluations"];
  ASSERT_EQ(evaluations.size(), 3u);
  EXPECT_EQ(evaluations[0]["baselines"],
            json({{"eager", 1.0}, {"scripted", 1.1}, {"compiled", 0.9}}));
  EXPECT_DOUBLE_EQ(evaluations[0]["speedup"]["best"].get<double>(), 0.9 / 0.5) << "compiled's";
  EXPECT_EQ(evaluations[1]["baselines"],
            json({{"eager", 1.0}, {"scripted", 1.2}, {"absent", {{"compiled", no_python}}}}));
  EXPECT_TRUE(evaluations[1]["speedup"]["compiled"].is_null());
  EXPECT_EQ(evaluations[2]["baselines"], json::object());
  // The read models read the lists: the fastest correct evaluation (0.4 ms) is the best.
  std::optional<KernelSummary> best = a.best(TaskId{1});
  ASSERT_TRUE(best);
  EXPECT_EQ(best->baselines.ms(BaselineKind::Scripted), 1.2);
  EXPECT_EQ(best->baselines.absent(BaselineKind::Compiled), no_python);
  json row = a.results("s", "").at(0);
  EXPECT_DOUBLE_EQ(row["speedup"]["eager"].get<double>(), 2.5);
  EXPECT_EQ(row["baselines"]["absent"]["compiled"], no_python);
  for (const char* table : {"evaluations", "baselines"})
    EXPECT_EQ(count(a, std::string("SELECT count(*) FROM pragma_table_info('") + table +
                           "') WHERE name LIKE '%eager%' OR name LIKE '%scripted%' OR name LIKE "
                           "'%compiled%'"),
              0)
        << table;
}

TEST(Archive, RefusesANewerSchemaAndChangesNothing) {
  TempDir dir;
  std::string path = (dir.path() / "new.db").string();
  {
    Archive::open(path);
    ArchiveSql(path).exec("PRAGMA user_version = 8");
  }
  try {
    Archive::open(path);
    FAIL();
  } catch (const ArchiveError& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 8, newer"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  Database raw(path, false);
  Statement v = raw.prepare("PRAGMA user_version");
  v.step();
  EXPECT_EQ(v.integer(0), 8);
}

TEST(Archive, RefusesDamagedAndForeignFiles) {
  TempDir dir;
  std::string junk = dir.write("junk.db", std::string(8192, 'x')).string();
  try {
    Archive::open(junk);
    FAIL();
  } catch (const ArchiveError& e) {
    EXPECT_NE(std::string(e.what()).find("damaged or not a kforge archive"), std::string::npos)
        << e.what();
  }
  std::string other = (dir.path() / "other.db").string();
  {
    Database raw(other, true);
    raw.exec("CREATE TABLE notes (x)");
  }
  try {
    Archive::open(other);
    FAIL();
  } catch (const ArchiveError& e) {
    EXPECT_NE(std::string(e.what()).find("not a kforge archive"), std::string::npos) << e.what();
  }
}

TEST(Archive, LockedFileIsAClearError) {
  TempDir dir;
  std::string path = (dir.path() / "a.db").string();
  Archive writer = Archive::open(path, true, /*busy_timeout_ms=*/100);
  TaskId t = writer.upsert_task(make_task("s", "relu", {"activation"}, "ReLU"));
  ArchiveSql other(path);
  other.exec("BEGIN IMMEDIATE");
  try {
    writer.add_candidate(candidate(t, "k"), std::nullopt, {});
    FAIL();
  } catch (const ArchiveError& e) {
    EXPECT_NE(std::string(e.what()).find("locked by another process"), std::string::npos)
        << e.what();
  }
  other.exec("ROLLBACK");
  EXPECT_NO_THROW(writer.add_candidate(candidate(t, "k"), std::nullopt, {}));
}

TEST(Archive, WinnerIsCorrectAdmittedUnflaggedAndVerified) {
  TempDir dir;
  Archive a = Archive::open((dir.path() / "a.db").string());
  TaskId t = a.upsert_task(make_task("level1", "softmax", {"softmax"}, "Softmax over rows"));
  EXPECT_EQ(a.upsert_task(make_task("level1", "softmax", {"softmax"}, "Softmax over rows")).value,
            t.value);  // same version
  CandidateId slow = a.add_candidate(candidate(t, "slow"), std::nullopt, {eval("correct", 1.5)});
  a.add_candidate(candidate(t, "suspicious"), std::nullopt,
                  {eval("correct", 0.01, true, {"suspicious"})});
  a.add_candidate(candidate(t, "not admitted"), std::nullopt, {eval("correct", 0.5, false)});
  a.add_candidate(candidate(t, "wrong"), std::nullopt, {eval("wrong_result", 0.2)});
  NewCandidate imported = candidate(t, "imported hack");
  imported.imported = true;
  a.add_candidate(imported, std::nullopt, {eval("correct", 0.001)});
  auto best = a.best(t);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->id.value, slow.value);
  CandidateId fast = a.add_candidate(candidate(t, "fast"), std::nullopt, {eval("correct", 0.9)});
  EXPECT_EQ(a.best(t)->id.value, fast.value);
  EXPECT_EQ(a.stats().winners, 2);
  auto failures = a.notable_failures(t, 5);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].first.outcome, "wrong_result");
  EXPECT_NE(failures[0].second.find("max_abs_error"), std::string::npos);
}

TEST(Archive, OneCandidateIsOneTransaction) {
  TempDir dir;
  Archive a = Archive::open((dir.path() / "a.db").string());
  TaskId t = a.upsert_task(make_task("s", "relu", {}, "ReLU"));
  // An invalid outcome fails the CHECK constraint: neither the candidate nor its compile remain.
  CompileRecord cr;
  cr.ok = true;
  cr.stage = "passed";
  EXPECT_THROW(a.add_candidate(candidate(t, "k"), cr, {eval("excellent", 1.0)}), kforge::Error);
  EXPECT_EQ(count(a, "SELECT count(*) FROM candidates"), 0);
  EXPECT_EQ(count(a, "SELECT count(*) FROM compiles"), 0);
  EXPECT_EQ(count(a, "SELECT count(*) FROM kernel_text"), 0);
}

TEST(Archive, RetrievalRanksSimilarTasksFirst) {
  TempDir dir;
  Archive a = Archive::open((dir.path() / "a.db").string());
  TaskId softmax = a.upsert_task(
      make_task("level1", "softmax", {"reduction", "softmax"}, "Softmax over the last dimension"));
  TaskId logsm = a.upsert_task(make_task("level1", "log_softmax", {"reduction", "softmax"},
                                         "Log-softmax over the last dimension"));
  TaskId relu = a.upsert_task(make_task("level1", "relu", {"activation", "elementwise"}, "ReLU"));
  TaskId mm =
      a.upsert_task(make_task("level1", "matmul_square", {"matmul"}, "Square matrix product"));
  a.add_candidate(candidate(softmax, "__global__ void softmax_rows() {}"), std::nullopt,
                  {eval("correct", 1.0)});
  a.add_candidate(candidate(logsm, "__global__ void log_softmax_rows() {}"), std::nullopt,
                  {eval("correct", 1.0)});
  a.add_candidate(candidate(relu, "__global__ void relu() {}"), std::nullopt,
                  {eval("correct", 1.0)});
  a.add_candidate(candidate(mm, "__global__ void tiled_matmul() {}"), std::nullopt,
                  {eval("correct", 1.0)});
  auto query = make_task("level2", "scaled_masked_softmax", {"softmax", "fused"},
                         "Softmax of masked scaled scores");
  auto got = a.similar(query, 3);
  ASSERT_GE(got.size(), 2u);
  EXPECT_TRUE(got[0].task == "level1/softmax" || got[0].task == "level1/log_softmax")
      << got[0].task;
  EXPECT_TRUE(got[1].task == "level1/softmax" || got[1].task == "level1/log_softmax")
      << got[1].task;
  for (const auto& k : got) EXPECT_NE(k.task, "level1/matmul_square");
  auto hits = a.search("tiled_matmul", 5);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].task, "level1/matmul_square");
  // A task's wrong kernel (no time) is not what a prompt retrieves when the task has a correct one.
  a.add_candidate(candidate(softmax, "__global__ void softmax_wrong() {}"), std::nullopt,
                  {eval("wrong_result", std::nullopt, false)});
  for (const auto& k : a.similar(query, 3))
    if (k.task == "level1/softmax")
      EXPECT_EQ(a.show(k.id)["source"], "__global__ void softmax_rows() {}");
}

void populate(Archive& a) {
  TaskId t = a.upsert_task(make_task("level1", "softmax", {"softmax"}, "Softmax"));
  RunId run = RunLog(a).start({{"suite", "level1"}, {"models", {"m1"}}});
  DeviceId dev =
      a.upsert_device("GPU-1234", "NVIDIA H200", "sm_90a", 132, int64_t{150} << 30, "580.1");
  CompileRecord cr;
  cr.ok = true;
  cr.stage = "passed";
  cr.resources = {{"softmax_rows<BLOCK>", {{"registers", 30}}}};
  cr.compile_ms = 120.5;
  cr.arch = "sm_90a";
  cr.nvrtc = "13.0";
  NewCandidate parent = candidate(t, "__global__ void parent() {}");
  parent.run = run;
  EvaluationRecord e = eval("correct", 1.25);
  e.device = dev;
  CandidateId p = a.add_candidate(parent, cr, {e, eval("wrong_result", std::nullopt)});
  NewCandidate child = candidate(t, "__global__ void child() {}");
  child.parents = {p};
  child.generation = 1;
  child.run = run;
  child.tunables = {{"BLOCK", 256}};
  a.add_candidate(with_identity(child), cr, {e});
  RunLog(a).set_status(run, RunStatus::Finished, {{"calls", 2}});
  a.record_llm_call({run, p, "m1", "ok", 1000, 400, 0.02, 812.0});
}

TEST(Archive, JsonlRoundTripsLosslessly) {
  TempDir dir;
  Archive a = Archive::open((dir.path() / "a.db").string());
  populate(a);
  std::stringstream first;
  EXPECT_EQ(a.export_jsonl(first), 2u);
  Archive b = Archive::open((dir.path() / "b.db").string());
  std::stringstream in(first.str());
  EXPECT_EQ(b.import_jsonl(in, "first.jsonl", {/*trust=*/true}).lines,
            2u);  // the user's own export
  std::stringstream second;
  b.export_jsonl(second);
  EXPECT_EQ(first.str(), second.str());
  // The lineage survived (by identity), and the AI CUDA Engineer columns are present.
  auto line = json::parse(first.str().substr(first.str().find('\n') + 1));
  EXPECT_EQ(line["candidate"]["parents"].size(), 1u);
  EXPECT_EQ(line["Op_Name"], "softmax");
  EXPECT_EQ(line["CUDA_Runtime"], 1.25);
  EXPECT_EQ(line["Correct"], true);
}

TEST(Archive, ImportedRowsAreUnverifiedAndNeverWinners) {
  TempDir dir;
  Archive a = Archive::open((dir.path() / "a.db").string());
  std::stringstream in(
      R"({"Op_Name": "19_ReLU", "Level_ID": 1, "Task_ID": 19, "Kernel_Name": "relu", "CUDA_Runtime": 0.001, "PyTorch_Native_Runtime": 0.02, "CUDA_Speedup_Native": 20.0, "CUDA_Code": "__global__ void relu() {}", "Correct": true, "Max_Diff": 0.0, "Error": null})"
      "\n");
  EXPECT_EQ(a.import_jsonl(in, "sakana.jsonl").lines, 1u);
  EXPECT_EQ(a.stats().imported, 1);
  EXPECT_EQ(a.stats().winners, 0);
  json c = a.show(CandidateId{1});
  EXPECT_FALSE(c["verified"].get<bool>());
  EXPECT_EQ(c["imported"]["CUDA_Speedup_Native"], 20.0);
  EXPECT_TRUE(c["evaluations"].empty());  // their claims are not kforge evaluations
  std::stringstream bad("{\"task\": {}}\nnot json\n");
  EXPECT_THROW(a.import_jsonl(bad, "bad.jsonl"), kforge::InputError);
}

TEST(Archive, BaselinesAreKeyedByTaskDimsDeviceAndMathMode) {
  TempDir dir;
  Archive a = Archive::open((dir.path() / "a.db").string());
  TaskId t = a.upsert_task(make_task("s", "relu", {}, "ReLU"));
  DeviceId d = a.upsert_device("GPU-1", "H200", "sm_90a", 132, std::nullopt, "580");
  json dims = {{"B", 4096}, {"N", 196608}};
  a.store_baseline(t, dims, d, "ieee", times(1.57, 1.50));
  a.store_baseline(t, dims, d, "tf32", times(1.2, std::nullopt));
  EXPECT_EQ(a.baseline(t, dims, d, "ieee")->ms(kforge::BaselineKind::Eager), 1.57);
  EXPECT_FALSE(a.baseline(t, dims, d, "tf32")->ms(kforge::BaselineKind::Scripted).has_value());
  EXPECT_FALSE(a.baseline(t, {{"B", 1}, {"N", 1}}, d, "ieee").has_value());
  a.store_baseline(t, dims, d, "ieee",
                   times(1.60, 1.52));  // timed again in a judgment: the first timing stays
  EXPECT_EQ(a.baseline(t, dims, d, "ieee")->ms(kforge::BaselineKind::Eager), 1.57);
  a.store_baseline(t, dims, d, "ieee", times(1.55, 1.49),
                   /*replace=*/true);  // re-timed by `kforge baseline`
  EXPECT_EQ(a.baseline(t, dims, d, "ieee")->ms(kforge::BaselineKind::Eager), 1.55);
  EXPECT_EQ(count(a, "SELECT count(*) FROM baselines"), 2);
  // Another H200 reads the first H200's timing, also once it timed its own (a run resumed on
  // another machine renders the same prompts); another kind of GPU never does.
  DeviceId same_kind = a.upsert_device("GPU-2", "H200", "sm_90a", 132, std::nullopt, "580");
  DeviceId other_kind = a.upsert_device("GPU-3", "A100", "sm_80", 108, std::nullopt, "580");
  EXPECT_EQ(a.baseline(t, dims, same_kind, "ieee")->ms(kforge::BaselineKind::Eager), 1.55);
  EXPECT_FALSE(a.baseline(t, dims, other_kind, "ieee").has_value());
  a.store_baseline(t, dims, same_kind, "ieee", times(1.51, 1.47));
  EXPECT_EQ(a.baseline(t, dims, same_kind, "ieee")->ms(kforge::BaselineKind::Eager), 1.55);
  EXPECT_EQ(a.baseline(t, dims, d, "ieee")->ms(kforge::BaselineKind::Eager), 1.55);
}

// Each kind's time, or why there is none, is a row of its own (schema 7); re-timing replaces the
// whole list, a judgment's timing never does.
TEST(Archive, BaselinesKeepEachKindsTimeOrWhyItIsAbsent) {
  using kforge::BaselineKind;
  TempDir dir;
  Archive a = Archive::open((dir.path() / "a.db").string());
  TaskId t = a.upsert_task(make_task("s", "relu", {}, "ReLU"));
  DeviceId d = a.upsert_device("GPU-1", "H200", "sm_90a", 132, std::nullopt, "580");
  json dims = {{"N", 4096}};
  BaselineTimes first = times(1.0, 1.1, std::nullopt, "no Python with PyTorch 2 on this machine");
  first.set(BaselineKind::CompiledMaxAutotune, std::nullopt, "autotuning failed");
  a.store_baseline(t, dims, d, "ieee", first);
  std::optional<BaselineTimes> b = a.baseline(t, dims, d, "ieee");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->to_json(), first.to_json());
  EXPECT_FALSE(b->ms(BaselineKind::Compiled).has_value());
  EXPECT_EQ(b->absent(BaselineKind::Compiled), "no Python with PyTorch 2 on this machine");
  EXPECT_EQ(b->absent(BaselineKind::CompiledMaxAutotune), "autotuning failed");
  EXPECT_EQ(b->best()->kind, BaselineKind::Eager);
  BaselineTimes all = times(1.0, 1.1, 0.9);
  all.set(BaselineKind::CompiledMaxAutotune, 0.8);
  a.store_baseline(t, dims, d, "ieee", all);  // a judgment's: the first stays
  EXPECT_FALSE(a.baseline(t, dims, d, "ieee")->ms(BaselineKind::Compiled).has_value());
  a.store_baseline(t, dims, d, "ieee", all, /*replace=*/true);  // `kforge baseline`
  b = a.baseline(t, dims, d, "ieee");
  EXPECT_EQ(b->ms(BaselineKind::Compiled), 0.9);
  EXPECT_EQ(b->absent(BaselineKind::Compiled), "");
  EXPECT_EQ(b->best()->kind, BaselineKind::CompiledMaxAutotune);
  EXPECT_EQ(count(a, "SELECT count(*) FROM baseline_times"), 4);
  EXPECT_EQ(count(a, "SELECT count(*) FROM baseline_times WHERE absent IS NOT NULL"), 0);
  // A kind a newer kforge stored is skipped, not an error.
  ArchiveSql(a).exec(
      "INSERT INTO baseline_times (baseline_id, kind, ms) VALUES (1, 'from_the_future', 0.1)");
  EXPECT_EQ(a.baseline(t, dims, d, "ieee")->to_json(), all.to_json());
}

TEST(Archive, LlmCallsHaveNoPlaceForKeys) {
  TempDir dir;
  Archive a = Archive::open((dir.path() / "a.db").string());
  for (const std::string& c :
       ArchiveSql(a).column("SELECT name FROM pragma_table_info('llm_calls')")) {
    for (const char* bad : {"key", "auth", "header", "token_value", "secret"})
      EXPECT_EQ(c.find(bad), std::string::npos) << c;
  }
}

TEST(Archive, KillDuringWritesLosesNothingCommitted) {
  TempDir dir;
  std::string path = (dir.path() / "a.db").string();
  { Archive::open(path).upsert_task(make_task("s", "relu", {}, "ReLU")); }
  std::string progress = (dir.path() / "progress").string();
  pid_t pid = fork();
  if (pid == 0) {
    Archive a = Archive::open(path);
    CompileRecord cr;
    cr.ok = true;
    cr.stage = "passed";
    cr.log = std::string(200000, 'l');  // big rows: the kill lands mid-write
    for (int i = 0; i < 100000; ++i) {
      a.add_candidate(candidate(TaskId{1}, "kernel " + std::to_string(i)), cr,
                      {eval("correct", 1.0), eval("correct", 1.1)});
      kforge::write_file_atomic(progress, std::to_string(i + 1));
    }
    _exit(0);
  }
  while (!kforge::read_file(progress) || std::stoi(*kforge::read_file(progress)) < 20)
    usleep(10000);
  usleep(37000);
  kill(pid, SIGKILL);
  int status;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  int committed = std::stoi(*kforge::read_file(progress));
  Archive a = Archive::open(path);
  EXPECT_EQ(ArchiveSql(a).text("PRAGMA integrity_check"), "ok");
  int64_t n = count(a, "SELECT count(*) FROM candidates");
  EXPECT_GE(n, committed);      // nothing committed is lost
  EXPECT_LE(n, committed + 1);  // at most the one whose progress note the kill beat
  EXPECT_EQ(count(a,
                  "SELECT count(*) FROM candidates c WHERE (SELECT count(*) FROM compiles WHERE "
                  "candidate_id = c.id) != 1 "
                  "OR (SELECT count(*) FROM evaluations WHERE candidate_id = c.id) != 2"),
            0);  // no half-written candidate
}

TEST(Archive, ReaderRunsBesideAWriter) {
  TempDir dir;
  std::string path = (dir.path() / "a.db").string();
  TaskId t = Archive::open(path).upsert_task(make_task("s", "relu", {}, "ReLU"));
  std::atomic<bool> done{false};
  std::thread writer([&] {
    Archive w = Archive::open(path);
    for (int i = 0; i < 300; ++i)
      w.add_candidate(candidate(t, "k" + std::to_string(i)), std::nullopt, {eval("correct", 1.0)});
    done = true;
  });
  Archive r = Archive::open(path);
  int64_t last = 0;
  int reads = 0;
  while (!done || reads == 0) {
    int64_t now = r.stats().candidates;
    EXPECT_GE(now, last);
    last = now;
    ++reads;
  }
  writer.join();
  EXPECT_EQ(r.stats().candidates, 300);
  EXPECT_GT(reads, 1);
}

TEST(Archive, ResultsGiveEachTaskItsFastestCorrectKernelOfAKind) {
  // docs/results.md (issue 8) comes from this query: one row per task, missing ones included.
  TempDir dir;
  std::string path = (dir.path() / "a.db").string();
  {
    Archive a = Archive::open(path);
    TaskId softmax =
        a.upsert_task(make_task("level1", "softmax", {"softmax"}, "Softmax over rows"));
    a.upsert_task(make_task("level1", "relu", {"elementwise"}, "ReLU"));
    a.upsert_task(make_task("level2", "other", {}, "not in the suite"));
    a.add_candidate(candidate(softmax, "seed slow"), std::nullopt, {eval("correct", 1.5)});
    a.add_candidate(candidate(softmax, "seed fast"), std::nullopt, {eval("correct", 0.9, false)});
    a.add_candidate(candidate(softmax, "seed wrong"), std::nullopt, {eval("wrong_result", 0.1)});
    NewCandidate evolved = candidate(softmax, "evolved");
    evolved.prompt_kind = "optimize";
    a.add_candidate(evolved, std::nullopt, {eval("correct", 0.3)});
    json seeds = a.results("level1", "seed");
    ASSERT_EQ(seeds.size(), 2u) << seeds.dump(1);
    EXPECT_EQ(seeds[0]["task"], "level1/relu");
    EXPECT_TRUE(seeds[0]["time_ms"].is_null());
    EXPECT_EQ(seeds[1]["task"], "level1/softmax");
    EXPECT_DOUBLE_EQ(seeds[1]["time_ms"].get<double>(), 0.9);
    EXPECT_EQ(seeds[1]["baselines"], json({{"eager", 2.0}}));
    EXPECT_DOUBLE_EQ(seeds[1]["speedup"]["eager"].get<double>(), 2.0 / 0.9);
    EXPECT_DOUBLE_EQ(seeds[1]["speedup"]["best"].get<double>(), 2.0 / 0.9);
    EXPECT_TRUE(seeds[1]["speedup"]["compiled"].is_null()) << seeds.dump(1);
    EXPECT_TRUE(seeds[0]["baselines"].is_null() && seeds[0]["speedup"].is_null()) << "no kernel";
    EXPECT_DOUBLE_EQ(a.results("level1", "")[1]["time_ms"].get<double>(), 0.3);
    // Winners only: the not-admitted 0.9 and a flagged 0.2 do not count.
    NewCandidate flagged = candidate(softmax, "flagged");
    flagged.prompt_kind = "optimize";
    a.add_candidate(flagged, std::nullopt, {eval("correct", 0.2, true, {"suspicious"})});
    EXPECT_DOUBLE_EQ(a.results("level1", "")[1]["time_ms"].get<double>(), 0.2);
    EXPECT_DOUBLE_EQ(a.results("level1", "", true)[1]["time_ms"].get<double>(), 0.3);
    EXPECT_DOUBLE_EQ(a.results("level1", "seed", true)[1]["time_ms"].get<double>(), 1.5);
  }
  FILE* p = popen(
      (std::string(KFORGE_BINARY) + " archive results level1 --kind seed --db " + path + " 2>&1")
          .c_str(),
      "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(WEXITSTATUS(pclose(p)), 0) << out;
  EXPECT_NE(out.find("| task | eager ms | scripted ms | compile ms | max-autotune ms | seed ms | "
                     "x eager | x scripted | x compile | x max-autotune | x best |"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("| level1/softmax | 2.0000 | - | - | - | 0.9000 | 2.22 | - | - | - | 2.22 |"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("| level1/relu | - | - | - | - | - |"), std::string::npos) << out;
  EXPECT_NE(out.find("Geometric mean over the 1 of 2 tasks with a kernel: 2.22x eager"),
            std::string::npos)
      << out;
}

TEST(Archive, BrowsesFromTheCommandLineInBothForms) {
  TempDir dir;
  std::string path = (dir.path() / "a.db").string();
  {
    Archive a = Archive::open(path);
    populate(a);
  }
  auto run = [&](const std::string& args) {
    std::string out;
    FILE* p = popen(
        (std::string(KFORGE_BINARY) + " archive " + args + " --db " + path + " 2>&1").c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int rc = pclose(p);
    return std::make_pair(WEXITSTATUS(rc), out);
  };
  auto parse = [](const std::string& text) {
    try {
      return json::parse(text);
    } catch (const json::exception&) {
      ADD_FAILURE() << "not JSON: " << text;
      return json();
    }
  };
  auto [rc1, stats] = run("stats");
  EXPECT_EQ(rc1, 0);
  EXPECT_NE(stats.find("winners"), std::string::npos) << stats;
  auto [rc2, stats_json] = run("stats --json");
  EXPECT_EQ(parse(stats_json)["candidates"], 2);
  auto [rc3, top] = run("top --json");
  EXPECT_EQ(parse(top).size(), 1u);
  auto [rc4, show] = run("show 2");
  EXPECT_NE(show.find("parents    [1]"), std::string::npos) << show;
  auto [rc5, lineage] = run("lineage 2 --json");
  EXPECT_EQ(parse(lineage).size(), 2u);
  auto [rc6, source] = run("source 1");
  EXPECT_EQ(source, "__global__ void parent() {}");
  auto [rc7, diff] = run("diff 1 2");
  EXPECT_NE(diff.find("- __global__ void parent() {}"), std::string::npos) << diff;
  EXPECT_NE(diff.find("+ __global__ void child() {}"), std::string::npos) << diff;
  auto [rc8, runs] = run("runs --json");
  EXPECT_EQ(parse(runs)[0]["status"], "finished");
  auto [rc9, missing] = run("show 99");
  EXPECT_EQ(rc9, 2);  // a candidate that is not there: a usage error, as a run or task would be
  EXPECT_NE(missing.find("no candidate 99"), std::string::npos);
  std::string none = (dir.path() / "none.db").string();
  FILE* p =
      popen((std::string(KFORGE_BINARY) + " archive stats --db " + none + " 2>&1").c_str(), "r");
  char buf[512] = {};
  fread(buf, 1, sizeof buf - 1, p);
  EXPECT_EQ(WEXITSTATUS(pclose(p)), 2);
  EXPECT_NE(std::string(buf).find("no archive here yet"), std::string::npos) << buf;
}

}  // namespace

TEST(Archive, CreatesItsFolderOnAFreshMachine) {
  kforge::test::TempDir dir;
  std::string path = (dir.path() / "not" / "yet" / "archive.db").string();
  auto ar = kforge::archive::Archive::open(path, /*create=*/true);
  EXPECT_EQ(ar.schema_version(), kforge::archive::kSchemaVersion);
  EXPECT_EQ(::access(path.c_str(), F_OK), 0);
}

// Issue 18: `kforge archive review` decides on a suspicious evaluation; a time below the floor is
// never accepted.
TEST(Archive, ReviewAcceptsOrRejectsASuspiciousEvaluation) {
  TempDir dir;
  std::string path = (dir.path() / "a.db").string();
  CandidateId fast, impossible;
  TaskId t;
  {
    Archive a = Archive::open(path);
    t = a.upsert_task(make_task("level1", "matmul_diag", {"matmul"}, "diag(a) @ b"));
    EvaluationRecord e = eval("correct", 0.07, true, {"suspicious"});
    e.evidence["timing"] = {
        {"suspicion", "more than 10x eager ...: awaiting review (kforge archive review)"}};
    fast = a.add_candidate(candidate(t, "fast"), std::nullopt, {e});
    EvaluationRecord below = eval("correct", 0.01, true, {"suspicious"});
    below.evidence["timing"] = {
        {"suspicion", std::string(kforge::verify::kSuspicionBelowFloor) + " (300% of it)"}};
    impossible = a.add_candidate(candidate(t, "impossible"), std::nullopt, {below});
    EXPECT_FALSE(a.best(t)) << "flagged: no winner yet";
  }
  auto cli = [&](const std::string& args) {
    return kforge::test::run_kforge("archive review " + args + " --db " + path);
  };
  EXPECT_EQ(cli(std::to_string(fast.value)).code, 2);  // neither --accept nor --reject
  auto accepted =
      cli(std::to_string(fast.value) + " --accept --note 'diag: eager does the full matmul'");
  EXPECT_EQ(accepted.code, 0) << accepted.out;
  auto refused = cli(std::to_string(impossible.value) + " --accept");
  EXPECT_EQ(refused.code, 2) << refused.out;
  EXPECT_NE(refused.out.find("cannot be accepted: its time is faster than the roofline floor"),
            std::string::npos)
      << refused.out;
  EXPECT_EQ(cli(std::to_string(impossible.value) + " --reject").code, 0);
  auto again = cli(std::to_string(fast.value) + " --accept");
  EXPECT_EQ(again.code, 2) << "nothing flagged any more: " << again.out;
  Archive a = Archive::open(path);
  ASSERT_TRUE(a.best(t));
  EXPECT_EQ(a.best(t)->id.value, fast.value);
  json shown = a.show(impossible);
  EXPECT_EQ(shown["evaluations"][0]["flags"], json({"suspicious", "rejected"}));
  EXPECT_EQ(a.show(fast)["evaluations"][0]["evidence"]["review"]["note"],
            "diag: eager does the full matmul");
}
