// The archive's run log (kforge/archive/run_log.h), and the JSONL export of an evolve run's
// archive: imported into a fresh file, every row of every table comes back (issue 36).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <sstream>

#include "kforge/archive/run_log.h"
#include "kforge/archive/sqlite.h"
#include "kforge/common/files.h"
#include "kforge/evolve/run.h"
#include "loop_rig.h"
#include "loopback_model.h"
#include "test_util.h"

namespace {

using namespace kforge;
using archive::Archive;
using kforge::test::Rig;
using kforge::test::TempDir;
using nlohmann::json;

std::shared_ptr<const tasks::Task> task(const std::string& spec) {
  return std::make_shared<const tasks::Task>(tasks::load_task(
      tasks::resolve_tasks(spec, (kforge::test::source_dir() / "tasks").string()).at(0)));
}

TEST(RunLog, ARunsRowKeepsItsConfigStatusAndSpend) {
  TempDir dir;
  Archive a = Archive::open((dir.path() / "a.db").string());
  archive::RunLog log(a);
  archive::RunId run = log.start({{"tasks", {"smoke/relu"}}});
  EXPECT_EQ(*log.config(run), json({{"tasks", {"smoke/relu"}}}));
  EXPECT_FALSE(log.config(archive::RunId{run.value + 1}));
  EXPECT_EQ(log.recorded_wall_s(run), 0);
  log.set_status(run, archive::RunStatus::Interrupted, {{"wall_s", 12.5}});
  EXPECT_EQ(log.recorded_wall_s(run), 12.5);
  json row = a.runs().at(0);
  EXPECT_EQ(row["status"], "interrupted");
  EXPECT_FALSE(row["finished_at"].is_null());
  log.set_status(run, archive::RunStatus::Running, {{"wall_s", 12.5}});  // resumed
  row = a.runs().at(0);
  EXPECT_EQ(row["status"], "running");
  EXPECT_TRUE(row["finished_at"].is_null());
  for (archive::RunStatus s : {archive::RunStatus::Running, archive::RunStatus::Finished,
                               archive::RunStatus::Failed, archive::RunStatus::Interrupted})
    EXPECT_EQ(archive::run_status_from_string(archive::to_string(s)), s);
  EXPECT_FALSE(archive::run_status_from_string("won"));
}

TEST(RunLog, AScreenIsReadBackOnAGpuOfTheSameKindAtTheSameHarnessVersion) {
  TempDir dir;
  Archive a = Archive::open((dir.path() / "a.db").string());
  archive::RunLog log(a);
  archive::RunId run = log.start(json::object());
  archive::DeviceId one = a.upsert_device("GPU-1", "H200", "sm_90a", 132, std::nullopt, "580");
  archive::DeviceId two = a.upsert_device("GPU-2", "H200", "sm_90a", 132, std::nullopt, "580");
  archive::DeviceId other = a.upsert_device("GPU-3", "H100", "sm_90a", 132, std::nullopt, "580");
  archive::NewCandidate c;
  c.task = a.upsert_task(*task("smoke/relu"));
  c.identity = "k", c.source = "__global__ void k() {}";
  archive::CandidateId id = a.add_candidate(c, std::nullopt, {});
  EXPECT_EQ(log.find_candidate(c.task, "k")->value, id.value);
  EXPECT_FALSE(log.find_candidate(c.task, "other"));
  log.add_screen(id, one, run, 7, {"correct", 0.25, std::string(400, 's')});
  std::optional<archive::ScreenRecord> back = log.find_screen(id, two, 7);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->outcome, "correct");
  EXPECT_EQ(back->median_ms, 0.25);
  EXPECT_EQ(back->summary.size(), 300u);
  EXPECT_FALSE(log.find_screen(id, other, 7)) << "another kind of GPU measures itself";
  EXPECT_FALSE(log.find_screen(id, one, 8)) << "another harness version measures again";
  EXPECT_FALSE(log.find_judgment(id, one, 7));
}

// The rows of every table of the archive at `path`, each table's rows as sorted lines of quoted
// values: ids left out and references given by what identifies the row they name (a task by
// suite, name and version, a device by UUID, a run by start and config, a candidate by task and
// identity, an evaluation by its candidate, device, dims and time judged, a baselines row by its
// task, dims, device and math mode), so two archives that hold the same rows compare equal whatever
// ids they gave them.
// Left out too: import_source and import_trust, which say that (and from where) a row was imported.
std::map<std::string, std::vector<std::string>> every_row(const std::string& path) {
  archive::Database db(path, archive::Access::ReadOnly);
  const std::map<std::string, std::string> key = {
      {"tasks", "suite || '/' || name || '@' || version"},
      {"devices", "uuid"},
      {"runs", "started_at || ' ' || config"},
      {"candidates",
       "(SELECT suite || '/' || name || '@' || version FROM tasks WHERE tasks.id = task_id) || "
       "'#' || identity"},
      {"evaluations",
       "(SELECT t.suite || '/' || t.name || '@' || t.version || '#' || c.identity FROM candidates "
       "c JOIN tasks t ON t.id = c.task_id WHERE c.id = r.candidate_id) || ' ' || coalesce((SELECT "
       "uuid FROM devices WHERE devices.id = r.device_id), '') || ' ' || r.dims || ' ' || "
       "r.created_at"},
      {"baselines",
       "(SELECT suite || '/' || name || '@' || version FROM tasks WHERE tasks.id = r.task_id) || "
       "' ' || (SELECT uuid FROM devices WHERE devices.id = r.device_id) || ' ' || r.dims || ' ' "
       "|| r.math_mode"}};
  auto named = [&](const std::string& table, const std::string& column) {
    return "(SELECT " + key.at(table) + " FROM " + table + " r WHERE r.id = " + column + ")";
  };
  std::map<std::string, std::vector<std::string>> out;
  archive::Statement tables = db.prepare(
      "SELECT name, sql LIKE 'CREATE VIRTUAL TABLE%' FROM sqlite_master WHERE type = 'table' AND "
      "name NOT LIKE 'sqlite_%' ORDER BY name");
  while (tables.step()) {
    std::string table = tables.text(0);
    bool fts = tables.integer(1) != 0;
    if (table.find("_text_") != std::string::npos) continue;  // FTS5's own shadow tables
    std::map<std::string, std::string> references;
    archive::Statement fks =
        db.prepare("SELECT \"from\", \"table\" FROM pragma_foreign_key_list('" + table + "')");
    while (fks.step()) references[fks.text(0)] = fks.text(1);
    if (fts) references = {{"task_id", "tasks"}, {"candidate_id", "candidates"}};
    std::vector<std::string> columns;
    archive::Statement info =
        db.prepare("SELECT name FROM pragma_table_info('" + table + "') ORDER BY cid");
    while (info.step()) {
      std::string c = info.text(0);
      if (c == "id" || c == "import_source" || c == "import_trust") continue;
      columns.push_back("quote(" + (references.count(c) ? named(references[c], c) : c) + ")");
    }
    std::string select;
    for (const std::string& c : columns) select += (select.empty() ? "" : " || ' | ' || ") + c;
    archive::Statement rows = db.prepare("SELECT " + select + " FROM " + table);
    std::vector<std::string>& lines = out[table];
    while (rows.step()) lines.push_back(rows.text(0));
    std::sort(lines.begin(), lines.end());
  }
  return out;
}

// A model for the loop: its first answer does not compile, its second launches a kernel the fake
// GPU finds wrong, every other one is the seed with a comment that makes it new code.
class MixedModel {
 public:
  MixedModel()
      : model_([this, seed = *read_file(
                          (kforge::test::source_dir() / "tasks/smoke/seeds/relu.md").string())](
                   const std::string&) -> std::optional<std::string> {
          int n = ++answers_;
          std::string answer = seed;
          if (n == 2)
            for (size_t at = answer.find("relu_f32"); at != std::string::npos;
                 at = answer.find("relu_f32"))
              answer.replace(at, 8, "relu_bad");
          answer.insert(
              answer.find("```cuda\n") + 8,
              n == 1 ? "#error deliberately broken\n" : "// answer " + std::to_string(n) + "\n");
          return answer;
        }) {}
  std::unique_ptr<evolve::LlmProposer> proposer(const std::string& cache) {
    return model_.proposer(cache);
  }

 private:
  std::atomic<int> answers_{0};
  kforge::test::LoopbackModel model_;  // last: its server, which uses the counter, stops first
};

TEST(ArchiveJsonl, AnEvolveRunsArchiveComesBackRowForRowInAFreshFile) {
  Rig s;
  s.gpu.ncu = "/opt/fake/ncu";  // profiles of the parents
  s.gpu.wrong_kernels = {"relu_bad"};
  MixedModel model;
  auto llm = model.proposer((s.dir.path() / "llm-cache").string());
  evolve::RunConfig c;
  c.tasks = {"smoke/relu"};
  c.generations = 2;
  c.children = 2;
  c.llm_children = 2;
  c.tuner.exhaustive_max = 8;
  c.operators = {1, 0, 0};
  evolve::RunSummary r =
      evolve::run_evolution(c, {task("smoke/relu")}, *s.evaluator, std::nullopt, {}, llm.get());
  ASSERT_EQ(r.tasks.at(0).stopped, "generations done");
  // Rows the loop does not make, so that every table has some: LLM calls (one for no candidate),
  // a run without candidates, a GPU nothing was measured on, a task without candidates but with
  // baselines.
  archive::Archive& a = s.evaluator->archive();
  a.record_llm_call(
      {archive::RunId{r.run}, archive::CandidateId{2}, "m1", "ok", 1000, 400, 0.02, 812.5});
  a.record_llm_call({std::nullopt, std::nullopt, "m1", "failed", 0, 0, 0, std::nullopt});
  archive::RunLog(a).start({{"tasks", {"smoke/softmax"}}});
  a.upsert_device("GPU-idle", "Idle GPU", "sm_80", 108, int64_t{80} << 30, "550");
  std::shared_ptr<const tasks::Task> softmax = task("smoke/softmax");
  BaselineTimes times;
  times.set(BaselineKind::Eager, 1.5);
  times.set(BaselineKind::Compiled, std::nullopt, "no Python with PyTorch 2");
  times.set(BaselineKind::CompiledMaxAutotune, 1.25);
  a.store_baseline(a.upsert_task(*softmax), softmax->dims, archive::DeviceId{1}, "ieee", times);

  std::string path = (s.dir.path() / "a.db").string();
  std::map<std::string, std::vector<std::string>> before = every_row(path);
  for (const char* table :
       {"tasks", "devices", "runs", "candidates", "candidate_parents", "compiles", "evaluations",
        "evaluation_baselines", "screens", "profiles", "baselines", "baseline_times", "llm_calls",
        "task_text", "kernel_text"})
    EXPECT_FALSE(before[table].empty()) << table << ": the run left it empty, so it proves nothing";
  EXPECT_GT(s.count("SELECT count(*) FROM screens WHERE outcome = 'wrong_result'"), 0);
  EXPECT_GT(s.count("SELECT count(*) FROM compiles WHERE ok = 0"), 0);

  std::stringstream exported;
  a.export_jsonl(exported);
  std::string fresh = (s.dir.path() / "b.db").string();
  {
    Archive b = Archive::open(fresh);
    std::stringstream in(exported.str());
    archive::ImportReport report = b.import_jsonl(in, "a.jsonl", {/*trust=*/true});
    EXPECT_EQ(report.skipped, 0u);
    EXPECT_GT(report.records, 0u);
  }
  std::map<std::string, std::vector<std::string>> after = every_row(fresh);
  ASSERT_EQ(before.size(), after.size());
  for (const auto& [table, rows] : before) EXPECT_EQ(after[table], rows) << "table " << table;
  {
    // Exported again it is the same file, and importing it again adds nothing.
    Archive b = Archive::open(fresh);
    std::stringstream second;
    b.export_jsonl(second);
    EXPECT_EQ(second.str(), exported.str());
    std::stringstream again(exported.str());
    archive::ImportReport report = b.import_jsonl(again, "a.jsonl", {/*trust=*/true});
    EXPECT_EQ(report.records + report.compiles + report.evaluations + report.new_candidates, 0u);
  }
  EXPECT_EQ(every_row(fresh), before);

  // A file not trusted gives its candidates as claims and keeps none of its measurements.
  std::string claims = (s.dir.path() / "c.db").string();
  Archive untrusted = Archive::open(claims);
  std::stringstream in(exported.str());
  archive::ImportReport report = untrusted.import_jsonl(in, "a.jsonl");
  EXPECT_EQ(report.skipped, before["screens"].size() + before["profiles"].size() +
                                before["baselines"].size() + before["llm_calls"].size());
  std::map<std::string, std::vector<std::string>> kept = every_row(claims);
  for (const char* table : {"screens", "profiles", "baselines", "baseline_times", "llm_calls"})
    EXPECT_TRUE(kept[table].empty()) << table;
  EXPECT_EQ(kept["evaluation_baselines"].size(), before["evaluation_baselines"].size())
      << "a claim keeps its baselines";
  EXPECT_EQ(kept["candidates"].size(), before["candidates"].size());
}

TEST(ArchiveJsonl, AMalformedRecordNamesItsField) {
  TempDir dir;
  Archive a = Archive::open((dir.path() / "a.db").string());
  struct Case {
    std::string line, expect;
  };
  std::vector<Case> cases = {
      {R"({"kforge_archive": 1, "run": {"started_at": "yesterday"}})",
       ":1: run.started_at: 'yesterday' is not a timestamp"},
      {R"({"kforge_archive": 1, "device": {"uuid": "GPU-1", "sms": -1}})",
       ":1: device.sms: -1 is out of range"},
      {R"({"kforge_archive": 1, "llm_call": {"model": "m", "status": "ok", "tokens_in": -2, )"
       R"("created_at": "2026-12-01T00:00:00Z"}})",
       ":1: llm_call.tokens_in: -2 is out of range"},
      {R"({"kforge_archive": 1, "task": {"suite": "s", "name": "t", "version": "v", "baselines": )"
       R"([{"dims": {}, "device": {"uuid": "GPU-1"}, "math_mode": "ieee", "eager_ms": 0, )"
       R"("created_at": "2026-12-01T00:00:00Z"}]}})",
       ":1: task.baselines[0].eager_ms: 0 is not positive"},
      {R"({"kforge_archive": 1, "task": {"suite": "s", "name": "t", "version": "v", "baselines": )"
       R"([{"dims": {}, "device": {"uuid": "GPU-1"}, "math_mode": "ieee", "baselines": )"
       R"({"compiled_max_autotune": "fast"}, "created_at": "2026-12-01T00:00:00Z"}]}})",
       ":1: task.baselines[0].baselines.compiled_max_autotune: must be a number or null"},
  };
  for (const Case& c : cases) {
    std::stringstream in(c.line + "\n");
    try {
      a.import_jsonl(in, "case.jsonl", {/*trust=*/true});
      ADD_FAILURE() << "imported: " << c.expect;
    } catch (const kforge::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("case.jsonl" + c.expect), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(a.runs().empty());
}

}  // namespace
