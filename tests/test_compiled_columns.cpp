// torch.compile's baselines (issue 20; max-autotune and the list keyed by kind, issue 36) carried
// wherever the scripted one goes: the archive (schema 5 and 7, their migrations, JSONL), the loop's
// records and prompts, `kforge archive results | show` and `kforge report`. The GPU is the fake one
// (fake_gpu.h): eager 1.0 ms, scripted 1.1 ms, compiled 0.9 ms, max-autotune 0.8 ms, or no compiled
// times and the reason.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "archive_schema.h"
#include "fake_gpu.h"
#include "kforge/archive/archive.h"
#include "kforge/archive/sqlite.h"
#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/evolve/run.h"
#include "loop_rig.h"
#include "loopback_model.h"
#include "test_util.h"

namespace {

using namespace kforge;
using kforge::test::Rig;
using kforge::test::run_kforge;
using kforge::test::TempDir;
using nlohmann::json;

constexpr const char* kNoPython = "no Python with PyTorch 2 found (python3 has torch 1.13)";

std::shared_ptr<const tasks::Task> relu() {
  std::string root = (kforge::test::source_dir() / "tasks").string();
  return std::make_shared<const tasks::Task>(
      tasks::load_task(tasks::resolve_tasks("smoke/relu", root).at(0)));
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A short run on the fake GPU: the seed, two tuned children and one LLM child (whose prompt quotes
// the baselines), the model answering with relu's seed.
struct RecordedRun {
  Rig s;
  kforge::test::LoopbackModel model{
      [seed = *read_file((kforge::test::source_dir() / "tasks/smoke/seeds/relu.md").string())](
          const std::string&) { return std::optional<std::string>(seed); }};
  evolve::RunSummary summary;
  std::string db() const { return (s.dir.path() / "a.db").string(); }

  explicit RecordedRun(const std::string& compiled_absent) {
    s.gpu.compiled_absent = compiled_absent;
    evolve::RunConfig c;
    c.tasks = {"smoke/relu"};
    c.generations = 1;
    c.children = 2;
    c.llm_children = 1;
    c.judge_top = 1;
    c.islands = 1;
    c.tuner.exhaustive_max = 8;
    c.operators = {1, 0, 0};
    auto llm = model.proposer((s.dir.path() / "llm-cache").string());
    llm->set_target(evolve::PromptGpu{}, s.evaluator->device_id());
    summary = evolve::run_evolution(c, {relu()}, *s.evaluator, std::nullopt, {}, llm.get());
  }
  std::string baselines_line() {
    for (const std::string& p : model.prompts()) {
      size_t at = p.find("PyTorch baselines: ");
      if (at != std::string::npos) return p.substr(at, p.find('\n', at) - at);
    }
    return "(no prompt quoted the baselines)";
  }
};

TEST(CompiledColumns, ARunRecordsTorchCompileAndEveryViewShowsXCompile) {
  RecordedRun run("");
  ASSERT_EQ(run.summary.tasks.size(), 1u);
  const evolve::TaskStatus& t = run.summary.tasks[0];
  ASSERT_TRUE(t.best_ms);
  EXPECT_EQ(t.baselines.ms(BaselineKind::Compiled), 0.9);
  EXPECT_EQ(t.baselines.ms(BaselineKind::CompiledMaxAutotune), 0.8);
  // The archive: the baseline and every timed evaluation carry both, a row per kind.
  EXPECT_EQ(run.s.count("SELECT count(*) FROM baseline_times x JOIN baselines b ON b.id = "
                        "x.baseline_id WHERE b.math_mode = 'ieee' AND x.absent IS NULL AND "
                        "((x.kind = 'eager' AND x.ms = 1.0) OR (x.kind = 'scripted' AND x.ms = "
                        "1.1) OR (x.kind = 'compiled' AND x.ms = 0.9) OR (x.kind = "
                        "'compiled_max_autotune' AND x.ms = 0.8))"),
            4);
  EXPECT_GT(run.s.count("SELECT count(*) FROM evaluations WHERE outcome = 'correct'"), 0);
  EXPECT_EQ(run.s.count("SELECT count(*) FROM evaluations e WHERE outcome = 'correct' AND (SELECT "
                        "count(*) FROM evaluation_baselines x WHERE x.evaluation_id = e.id AND "
                        "x.absent IS NULL AND ((x.kind = 'compiled' AND x.ms = 0.9) OR (x.kind = "
                        "'compiled_max_autotune' AND x.ms = 0.8))) != 2"),
            0);
  // The prompt: every kind's time, and the number to beat.
  EXPECT_NE(
      run.baselines_line().find("PyTorch baselines: eager 1 ms, scripted 1.1 ms, compile 0.9 ms, "
                                "max-autotune 0.8 ms (measured on "),
      std::string::npos)
      << run.baselines_line();
  EXPECT_NE(
      run.baselines_line().find("; the best baseline, the time to beat: max-autotune, 0.8 ms"),
      std::string::npos)
      << run.baselines_line();
  // `kforge archive results`: the compile columns beside eager and scripted, and their means.
  kforge::test::CliResult results = run_kforge("archive results smoke --db " + run.db());
  ASSERT_EQ(results.code, 0) << results.out;
  double best = *t.best_ms;
  std::string row = "| smoke/relu | 1.0000 | 1.1000 | 0.9000 | 0.8000 | " + fixed(best, 4) + " | " +
                    fixed(1.0 / best, 2) + " | " + fixed(1.1 / best, 2) + " | " +
                    fixed(0.9 / best, 2) + " | " + fixed(0.8 / best, 2) + " | " +
                    fixed(0.8 / best, 2) + " | ";
  EXPECT_NE(results.out.find("| task | eager ms | scripted ms | compile ms | max-autotune ms | "
                             "best ms | x eager | x scripted | x compile | x max-autotune | x "
                             "best | roofline | tunables |"),
            std::string::npos)
      << results.out;
  EXPECT_NE(results.out.find(row), std::string::npos) << row << "\n" << results.out;
  EXPECT_NE(results.out.find("x scripted, " + fixed(0.9 / best, 2) + "x compile, " +
                             fixed(0.8 / best, 2) + "x max-autotune, " + fixed(0.8 / best, 2) +
                             "x best;"),
            std::string::npos)
      << results.out;
  EXPECT_EQ(results.out.find("Baselines not measured"), std::string::npos) << results.out;
  kforge::test::CliResult as_json = run_kforge("archive results smoke --json --db " + run.db());
  json rows = json::parse(as_json.out);
  EXPECT_EQ(
      rows[0]["baselines"],
      json({{"eager", 1.0}, {"scripted", 1.1}, {"compiled", 0.9}, {"compiled_max_autotune", 0.8}}))
      << as_json.out;
  EXPECT_DOUBLE_EQ(rows[0]["speedup"]["best"].get<double>(), 0.8 / best) << as_json.out;
  // `kforge report`: compile ms and x compile per task.
  kforge::test::CliResult report =
      run_kforge("report " + std::to_string(run.summary.run) + " --db " + run.db());
  ASSERT_EQ(report.code, 0) << report.out;
  EXPECT_NE(report.out.find("| scripted ms | x scripted | compile ms | x compile | max-autotune ms "
                            "| x max-autotune | x best | roofline |"),
            std::string::npos)
      << report.out;
  EXPECT_NE(
      report.out.find("| 1.1000 | " + fixed(1.1 / best, 2) + " | 0.9000 | " + fixed(0.9 / best, 2) +
                      " | 0.8000 | " + fixed(0.8 / best, 2) + " | " + fixed(0.8 / best, 2) + " | "),
      std::string::npos)
      << report.out;
  // JSONL: exported, imported (--trust) into another archive, shown there the same.
  std::string exported = (run.s.dir.path() / "export.jsonl").string(),
              copy = (run.s.dir.path() / "copy.db").string();
  ASSERT_EQ(run_kforge("archive export " + exported + " --db " + run.db()).code, 0);
  EXPECT_NE(read_file(exported)->find("\"PyTorch_Compile_Runtime\":0.9"), std::string::npos);
  kforge::test::CliResult imported =
      run_kforge("archive import --trust " + exported + " --db " + copy);
  ASSERT_EQ(imported.code, 0) << imported.out;
  kforge::test::CliResult again = run_kforge("archive results smoke --db " + copy);
  EXPECT_NE(again.out.find(row), std::string::npos) << again.out;
}

TEST(CompiledColumns, WithoutTorchCompileTheColumnIsADashAndTheReasonIsShown) {
  RecordedRun run(kNoPython);
  ASSERT_TRUE(run.summary.tasks.at(0).best_ms);
  EXPECT_FALSE(run.summary.tasks[0].baselines.ms(BaselineKind::Compiled));
  EXPECT_EQ(run.summary.tasks[0].baselines.absent(BaselineKind::Compiled), kNoPython);
  EXPECT_EQ(run.s.count(std::string("SELECT count(*) FROM baseline_times x JOIN baselines b ON "
                                    "b.id = x.baseline_id WHERE b.math_mode = 'ieee' AND x.kind "
                                    "IN ('compiled', 'compiled_max_autotune') AND x.ms IS NULL AND "
                                    "x.absent = '") +
                        kNoPython + "'"),
            2);
  EXPECT_EQ(run.s.count("SELECT count(*) FROM evaluation_baselines WHERE kind IN ('compiled', "
                        "'compiled_max_autotune') AND ms IS NOT NULL"),
            0);
  // The prompt says it was not measured and why, never a number.
  std::string quoted = run.baselines_line();
  EXPECT_NE(quoted.find(std::string("scripted 1.1 ms, compile not measured (") + kNoPython +
                        "), max-autotune not measured (" + kNoPython + ")"),
            std::string::npos)
      << quoted;
  EXPECT_NE(quoted.find("the best baseline, the time to beat: eager, 1 ms"), std::string::npos)
      << quoted;
  EXPECT_EQ(quoted.find("TorchInductor"), std::string::npos) << quoted;
  // `kforge archive results`: "-" in the compile columns, the reason under the table.
  kforge::test::CliResult results = run_kforge("archive results smoke --db " + run.db());
  ASSERT_EQ(results.code, 0) << results.out;
  double best = *run.summary.tasks[0].best_ms;
  EXPECT_NE(results.out.find("| smoke/relu | 1.0000 | 1.1000 | - | - | " + fixed(best, 4) + " | " +
                             fixed(1.0 / best, 2) + " | " + fixed(1.1 / best, 2) + " | - | - | " +
                             fixed(1.0 / best, 2) + " | "),
            std::string::npos)
      << "the best baseline is eager's\n"
      << results.out;
  EXPECT_NE(results.out.find(std::string("Baselines not measured (their columns \"-\"):\n- "
                                         "smoke/relu: compile: ") +
                             kNoPython + "\n- smoke/relu: max-autotune: " + kNoPython),
            std::string::npos)
      << results.out;
  for (const char* mean : {"x compile,", "x max-autotune,"})
    EXPECT_EQ(results.out.find(mean), std::string::npos) << "no mean over nothing\n" << results.out;
  // `kforge archive show`: the evaluation says why.
  int64_t id = run.s.count(
      "SELECT candidate_id FROM evaluations WHERE outcome = 'correct' ORDER BY id LIMIT 1");
  kforge::test::CliResult show =
      run_kforge("archive show " + std::to_string(id) + " --db " + run.db());
  EXPECT_NE(show.out.find(std::string("vs compile - (not measured: ") + kNoPython + ")"),
            std::string::npos)
      << show.out;
}

// Session 28: a level run with --no-max-autotune listed "max-autotune: turned off" under the
// results table once per task (49 lines). A reason more than two tasks give is one line: "every
// timed task above" when all give it, else the tasks named.
TEST(CompiledColumns, AReasonMoreThanTwoTasksGiveIsOneLineUnderTheTables) {
  std::string root = (kforge::test::source_dir() / "tasks").string();
  auto run = [&](Rig& s, const std::vector<std::string>& names, const std::string& absent) {
    s.gpu.compiled_absent = absent;
    std::vector<std::shared_ptr<const tasks::Task>> list;
    for (const std::string& name : names)
      list.push_back(std::make_shared<const tasks::Task>(
          tasks::load_task(tasks::resolve_tasks(name, root).at(0))));
    evolve::RunConfig c;
    c.tasks = names;
    c.generations = 0;
    c.islands = 1;
    evolve::RunSummary r = evolve::run_evolution(c, list, *s.evaluator, std::nullopt);
    for (const auto& t : r.tasks) EXPECT_TRUE(t.best_ms) << t.task;
    return r.run;
  };
  auto db = [](Rig& s) { return (s.dir.path() / "a.db").string(); };
  const std::string head = "Baselines not measured (their columns \"-\"):\n";
  const std::string no = kNoPython;
  {  // Two tasks: a line each, as before.
    Rig s;
    run(s, {"smoke/relu", "smoke/softmax"}, no);
    std::string out = run_kforge("archive results smoke --db " + db(s)).out;
    EXPECT_NE(out.find(head + "- smoke/relu: compile: " + no + "\n- smoke/softmax: compile: " + no +
                       "\n- smoke/relu: max-autotune: " + no +
                       "\n- smoke/softmax: max-autotune: " + no + "\n"),
              std::string::npos)
        << out;
  }
  Rig s;
  int64_t first = run(s, {"smoke/relu", "smoke/softmax", "smoke/sum_rows"}, no);
  std::string every = head + "- compile: " + no +
                      ": every timed task above (3)\n- max-autotune: " + no +
                      ": every timed task above (3)\n";
  kforge::test::CliResult results = run_kforge("archive results smoke --db " + db(s));
  ASSERT_EQ(results.code, 0) << results.out;
  EXPECT_NE(results.out.find(every), std::string::npos) << results.out;
  kforge::test::CliResult report = run_kforge("report " + std::to_string(first) + " --db " + db(s));
  ASSERT_EQ(report.code, 0) << report.out;
  EXPECT_NE(report.out.find(every), std::string::npos) << report.out;
  // A fourth task with torch.compile's times: the three are named.
  run(s, {"smoke/vector_add"}, "");
  results = run_kforge("archive results smoke --db " + db(s));
  const std::string three = ": 3 tasks: smoke/relu, smoke/softmax, smoke/sum_rows\n";
  EXPECT_NE(results.out.find(head + "- compile: " + no + three + "- max-autotune: " + no + three),
            std::string::npos)
      << results.out;
}

// A version 4 archive (before torch.compile's baseline) migrates to 5: its rows read with no
// compiled time, and its export and an export without the new fields import as before.
TEST(CompiledColumns, AVersionFourArchiveMigratesWithNoCompiledTimes) {
  TempDir dir;
  std::string path = (dir.path() / "v4.db").string();
  {
    archive::Database raw(path, true);
    for (std::string_view v : {embedded::archive_schema_v1, embedded::archive_schema_v2,
                               embedded::archive_schema_v3, embedded::archive_schema_v4})
      raw.exec(std::string(v));
    raw.exec("PRAGMA user_version = 4");
    raw.exec("INSERT INTO tasks (suite, name, version) VALUES ('s', 'relu', 'v1')");
    raw.exec("INSERT INTO devices (uuid, name, arch) VALUES ('GPU-1', 'NVIDIA H200', 'sm_90a')");
    std::string source = "__global__ void k() {}";
    archive::Statement c = raw.prepare(
        "INSERT INTO candidates (task_id, identity, source, prompt_kind) VALUES (1, ?, ?, 'seed')");
    c.bind(1, content_hash(source))
        .bind(2, source)
        .run();  // no plan: the source's hash is its identity
    raw.exec(
        "INSERT INTO evaluations (candidate_id, device_id, outcome, dims, time_ms, eager_ms, "
        "scripted_ms, "
        "speedup_eager, speedup_scripted, admitted, harness_version, created_at) VALUES (1, 1, "
        "'correct', "
        "'{\"N\":8}', 0.5, 1.0, 1.1, 2.0, 2.2, 1, 7, '2026-12-01T00:00:00.000Z')");
    raw.exec(
        "INSERT INTO baselines (task_id, dims, device_id, math_mode, eager_ms, scripted_ms) VALUES "
        "(1, '{\"N\":8}', "
        "1, 'ieee', 1.0, 1.1)");
  }
  EXPECT_EQ(run_kforge("archive results s --db " + path).code, 1) << "reading never migrates";
  kforge::test::CliResult migrated = run_kforge("archive migrate --db " + path);
  ASSERT_EQ(migrated.code, 0) << migrated.out;
  EXPECT_NE(migrated.out.find("schema version " + std::to_string(archive::kSchemaVersion)),
            std::string::npos)
      << migrated.out;
  archive::Archive a = archive::Archive::open(path);
  EXPECT_EQ(a.schema_version(), archive::kSchemaVersion);
  std::optional<archive::BaselineTimes> b =
      a.baseline(archive::TaskId{1}, json{{"N", 8}}, archive::DeviceId{1}, "ieee");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->ms(BaselineKind::Eager), 1.0);
  EXPECT_FALSE(b->ms(BaselineKind::Compiled));
  EXPECT_EQ(b->absent(BaselineKind::Compiled), "") << "timed before version 5: no reason known";
  json e = a.show(archive::CandidateId{1})["evaluations"][0];
  EXPECT_EQ(e["baselines"], json({{"eager", 1.0}, {"scripted", 1.1}})) << e.dump();
  EXPECT_TRUE(e["speedup"]["compiled"].is_null()) << e.dump();
  kforge::test::CliResult results = run_kforge("archive results s --db " + path);
  EXPECT_NE(results.out.find(
                "| s/relu | 1.0000 | 1.1000 | - | - | 0.5000 | 2.00 | 2.20 | - | - | 2.00 | "),
            std::string::npos)
      << results.out;
  EXPECT_EQ(results.out.find("Baselines not measured"), std::string::npos) << "no reason to show\n"
                                                                           << results.out;
  // Its export, and the same lines as a version 4 kforge wrote them (a column per kind, no
  // compiled one), import.
  std::ostringstream out;
  a.export_jsonl(out);
  json line = json::parse(out.str());
  EXPECT_EQ(line["evaluations"][0]["baselines"], e["baselines"]) << out.str();
  for (bool strip : {false, true}) {
    json l = line;
    if (strip)
      for (auto& ev : l["evaluations"]) {
        ev["eager_ms"] = ev["baselines"]["eager"], ev["scripted_ms"] = ev["baselines"]["scripted"];
        ev["speedup_eager"] = 2.0, ev["speedup_scripted"] = 2.2;
        ev.erase("baselines");
      }
    std::istringstream in(l.dump() + "\n");
    archive::Archive fresh =
        archive::Archive::open((dir.path() / (strip ? "b.db" : "a.db")).string());
    archive::ImportReport r = fresh.import_jsonl(in, "old.jsonl", {true});
    EXPECT_EQ(r.evaluations, 1u);
    std::ostringstream round;
    fresh.export_jsonl(round);
    EXPECT_EQ(json::parse(round.str())["evaluations"], line["evaluations"]) << strip;
  }
}

}  // namespace
