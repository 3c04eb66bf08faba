// `kforge evolve` on a pool of GPU workers (issue 23, docs/scale.md), on the CPU: the real
// scheduler (worker_pool.h), protocol, task loading and compiles in worker processes
// (kforge-fake-gpu-worker: `kforge gpu-worker` with the fake GPU), the real loop with a lane per
// worker, the real archive. Only the GPU inside each worker is fake (fake_gpu.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "archive_sql.h"
#include "fake_gpu.h"
#include "kforge/archive/sqlite.h"
#include "kforge/common/error.h"
#include "kforge/common/files.h"
#include "kforge/common/sandbox.h"
#include "kforge/evolve/remote_gpu.h"
#include "kforge/evolve/run.h"
#include "kforge/verify/driver.h"
#include "test_util.h"

namespace {

using namespace kforge;
using kforge::test::TempDir;

std::string tasks_dir() {
  return (kforge::test::source_dir() / "tasks").string();
}

std::vector<std::shared_ptr<const tasks::Task>> smoke_tasks() {
  std::vector<std::shared_ptr<const tasks::Task>> out;
  for (const auto& f : tasks::resolve_tasks("smoke", tasks_dir()))
    out.push_back(std::make_shared<const tasks::Task>(tasks::load_task(f)));
  return out;
}

evolve::RunConfig config() {
  evolve::RunConfig c;
  c.seed = 11;
  c.generations = 2;
  c.children = 4;
  c.judge_top = 2;
  c.islands = 2;
  c.tuner.exhaustive_max = 8;
  return c;
}

// An evaluator on a fresh archive in `dir`, judging on `gpu`.
std::unique_ptr<evolve::Evaluator> evaluator(const TempDir& dir, evolve::Gpu* gpu) {
  evolve::EvaluatorOptions eo;
  eo.facts = compile::DeviceFacts::for_arch("sm_90a");
  eo.db = (dir.path() / "a.db").string();
  eo.compiler.workers = 2;
  return std::make_unique<evolve::Evaluator>(eo, gpu);
}

// A pool of fake GPU workers; `args[i]` are worker i's extra arguments (--die-after 3, ...). The
// workers are started through sh, as --worker-command starts them.
evolve::RemoteGpuOptions pool_of(const std::vector<std::string>& args,
                                 std::chrono::milliseconds deadline = std::chrono::seconds(60)) {
  std::string script = "case {worker} in";
  for (size_t i = 0; i < args.size(); ++i)
    script += " " + std::to_string(i) +
              ") exec '" KFORGE_FAKE_GPU_WORKER "' --connect {address} --worker {worker} " +
              args[i] + ";;";
  script += " esac";
  evolve::RemoteGpuOptions o;
  o.pool.command = {"/bin/sh", "-c", script};
  o.pool.workers = static_cast<int>(args.size());
  o.pool.max_attempts = 3;
  o.pool.env = child_environment();
  o.deadline = deadline;
  return o;
}

int64_t count(evolve::Evaluator& ev, const std::string& sql) {
  return test::ArchiveSql(ev.archive()).count(sql);
}

// Per task, its best time and its counts, as one GPU finds them.
std::map<std::string, std::string> outcome(const evolve::RunSummary& r) {
  std::map<std::string, std::string> out;
  for (const evolve::TaskStatus& t : r.tasks)
    out[t.task] = (t.best_ms ? std::to_string(*t.best_ms) : "none") + " screened " +
                  std::to_string(t.screened) + " judged " + std::to_string(t.judged) + " correct " +
                  std::to_string(t.correct);
  return out;
}

const std::map<std::string, std::string>& one_gpu_outcome() {
  static const std::map<std::string, std::string> once = [] {
    TempDir dir;
    test::FakeGpu gpu;
    auto ev = evaluator(dir, &gpu);
    return outcome(evolve::run_evolution(config(), smoke_tasks(), *ev, std::nullopt));
  }();
  return once;
}

// Nothing measured twice: no candidate screened twice, none judged twice.
void expect_nothing_twice(evolve::Evaluator& ev) {
  EXPECT_EQ(count(ev,
                  "SELECT count(*) FROM (SELECT candidate_id FROM screens GROUP BY candidate_id "
                  "HAVING count(*) > 1)"),
            0);
  EXPECT_EQ(count(ev,
                  "SELECT count(*) FROM (SELECT candidate_id FROM evaluations GROUP BY "
                  "candidate_id HAVING count(*) > 1)"),
            0);
}

TEST(Scale, APoolOfWorkersFindsWhatOneGpuFindsAndRecordsWhichGpuMeasured) {
  TempDir dir;
  evolve::RemoteGpu gpu(pool_of({"--busy-ms 5", "--busy-ms 5", "--busy-ms 5"}));
  ASSERT_EQ(gpu.parallel(), 3);
  auto ev = evaluator(dir, &gpu);
  evolve::RunSummary r = evolve::run_evolution(config(), smoke_tasks(), *ev, std::nullopt);
  EXPECT_EQ(r.stopped, "every task ended");
  EXPECT_EQ(outcome(r), one_gpu_outcome())
      << "each task's search does not depend on which GPU measured what";
  expect_nothing_twice(*ev);
  // Every screen and judgment is recorded against the worker's GPU that measured it: all three
  // worked, each a device of the archive; so are the baselines, each task's on the GPUs that timed
  // it.
  EXPECT_EQ(count(*ev, "SELECT count(*) FROM devices WHERE uuid LIKE 'GPU-fake-worker-%'"), 3);
  EXPECT_EQ(count(*ev,
                  "SELECT count(DISTINCT device_id) FROM (SELECT device_id FROM screens UNION ALL "
                  "SELECT device_id FROM evaluations)"),
            3);
  EXPECT_EQ(count(*ev, "SELECT count(DISTINCT task_id) FROM baselines"),
            static_cast<int64_t>(smoke_tasks().size()));
  EXPECT_EQ(count(*ev,
                  "SELECT count(*) FROM baselines b JOIN devices d ON d.id = b.device_id WHERE "
                  "d.uuid NOT LIKE 'GPU-fake-worker-%'"),
            0);
  // A judgment's baselines are the ones its own GPU timed beside it (the fake's: 1 ms eager), every
  // kind of them come over the wire.
  EXPECT_EQ(count(*ev,
                  "SELECT count(*) FROM evaluations e WHERE outcome = 'correct' AND (SELECT ms "
                  "FROM evaluation_baselines b WHERE b.evaluation_id = e.id AND b.kind = 'eager') "
                  "IS NOT 1.0"),
            0);
  EXPECT_EQ(count(*ev,
                  "SELECT count(*) FROM evaluations e WHERE outcome = 'correct' AND (SELECT "
                  "count(*) FROM evaluation_baselines b WHERE b.evaluation_id = e.id AND b.ms IS "
                  "NOT NULL) != " +
                      std::to_string(baseline_kinds().size())),
            0);
  int jobs = 0;
  for (const evolve::WorkerState& w : gpu.workers()) {
    EXPECT_TRUE(w.alive) << w.out_reason;
    jobs += w.jobs_done;
  }
  EXPECT_GE(jobs, r.evaluations) << "every measurement was a worker's job";
}

// One worker dies on its third measurement, one hangs on its second (the deadline takes it out:
// 8 s, far above a healthy job's time even on a loaded machine), one is slow: the run ends as with
// one GPU, nothing lost, nothing measured twice.
TEST(Scale, WorkersThatDieOrHangAreTakenOutAndTheirWorkIsDoneElsewhere) {
  TempDir dir;
  evolve::RemoteGpu gpu(
      pool_of({"--die-after 3", "--hang-after 2", "--busy-ms 20"}, std::chrono::seconds(8)));
  auto ev = evaluator(dir, &gpu);
  evolve::RunSummary r = evolve::run_evolution(config(), smoke_tasks(), *ev, std::nullopt);
  EXPECT_EQ(r.stopped, "every task ended");
  EXPECT_EQ(outcome(r), one_gpu_outcome());
  expect_nothing_twice(*ev);
  EXPECT_EQ(count(*ev, "SELECT count(*) FROM evaluations WHERE outcome = 'harness_error'"), 0);
  std::vector<evolve::WorkerState> w = gpu.workers();
  ASSERT_EQ(w.size(), 3u);
  EXPECT_FALSE(w[0].alive);
  // "it ended (exited with status 3)", or its connection closed before the exit was seen
  EXPECT_EQ(w[0].out_reason.find("deadline"), std::string::npos) << w[0].out_reason;
  EXPECT_FALSE(w[0].out_reason.empty());
  EXPECT_FALSE(w[1].alive);
  EXPECT_NE(w[1].out_reason.find("deadline"), std::string::npos) << w[1].out_reason;
  EXPECT_TRUE(w[2].alive);
}

// Every worker dies: the run ends "failed" with the reason; resumed on a new pool it finishes, and
// what was recorded before is read back, not measured again.
TEST(Scale, WithNoWorkerLeftTheRunFailsAndAResumeOnANewPoolFinishesIt) {
  TempDir dir;
  int64_t run = 0;
  {
    evolve::RemoteGpu gpu(pool_of({"--die-after 4", "--die-after 5"}));
    auto ev = evaluator(dir, &gpu);
    try {
      evolve::run_evolution(config(), smoke_tasks(), *ev, std::nullopt);
      FAIL() << "the run went on without a GPU";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("no GPU worker is left"), std::string::npos) << e.what();
    }
    run = count(*ev, "SELECT max(id) FROM runs");
    EXPECT_EQ(count(*ev, "SELECT status = 'failed' FROM runs WHERE id = " + std::to_string(run)),
              1);
    EXPECT_GT(count(*ev, "SELECT count(*) FROM screens"), 0) << "what was measured before is kept";
  }
  evolve::RemoteGpu gpu(pool_of({"", ""}));
  auto ev = evaluator(dir, &gpu);
  int64_t screened_before = count(*ev, "SELECT count(*) FROM screens");
  evolve::RunSummary r = evolve::run_evolution(config(), smoke_tasks(), *ev, run);
  EXPECT_EQ(r.stopped, "every task ended");
  EXPECT_GE(r.reused, screened_before);
  expect_nothing_twice(*ev);
  for (const evolve::TaskStatus& t : r.tasks) EXPECT_TRUE(t.best_ms) << t.task;
}

TEST(Scale, WorkersWithGpusOfDifferentKindsAreRefused) {
  try {
    evolve::RemoteGpu gpu(pool_of({"", "--name 'Another GPU'"}));
    FAIL() << "a pool of two kinds was accepted";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("different kinds"), std::string::npos) << what;
    EXPECT_NE(what.find("Another GPU"), std::string::npos) << what;
  }
}

// The job format round trip on its own: a worker's verdict is the fake GPU's verdict for the same
// candidate, compiled again from its code in the worker; admission goes through a worker too (its
// job carries the unseen dims); an edited task file is refused rather than judged as another task.
TEST(Scale, AWorkerJudgesTheCandidateThatWasSent) {
  TempDir dir;
  evolve::RemoteGpu gpu(pool_of({""}));
  test::FakeGpu local;
  auto ev = evaluator(dir, &gpu);
  std::shared_ptr<const tasks::Task> relu = smoke_tasks().at(0);
  auto seeds = evolve::starting_population(relu, ev->archive(), 1, std::nullopt);
  ASSERT_FALSE(seeds.empty());
  evolve::Checked c = ev->check(seeds.at(0));
  ASSERT_TRUE(c.report.ok());
  verify::Verdict remote = gpu.verify(*relu, c), here = local.verify(*relu, c);
  EXPECT_EQ(verify::to_json(remote), verify::to_json(here));
  EXPECT_EQ(remote.gpu_uuid, "GPU-fake-worker-0");
  EXPECT_TRUE(ev->admit(c, 1).correct());
  // A task file (a version not sent before) edited after it was loaded.
  std::filesystem::copy_file(relu->file, dir.path() / "relu.toml");
  std::ofstream(dir.path() / "relu.toml", std::ios::app) << "\n# a copy\n";
  tasks::Task copy = tasks::load_task(dir.path() / "relu.toml");
  std::ofstream(dir.path() / "relu.toml", std::ios::app) << "# edited\n";
  try {
    gpu.screen(copy, c);
    FAIL() << "an edited task file was sent";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the task file changed"), std::string::npos) << e.what();
  }
}

// `kforge evolve` itself on a machine without a GPU, its workers started by --worker-command (the
// fake ones, through sh): it checks and tunes for the GPU the first worker describes, prints each
// worker's jobs, and records every measurement against the worker that made it.
TEST(Scale, KforgeEvolveWithoutAGpuRunsOnTheWorkersItsCommandStarts) {
  if (verify::Driver::get().available())
    GTEST_SKIP() << "this machine has a GPU: kforge evolve would check for it";
  TempDir dir;
  std::string db = (dir.path() / "a.db").string();
  test::CliResult r = test::run_kforge(
      "evolve smoke/relu smoke/vector_add smoke/relu --llm none --generations 1 --workers 2 "
      "--worker-command \"'" KFORGE_FAKE_GPU_WORKER
      "' --connect {address} --worker {worker}\" --db " +
      db + " --tasks-dir " + tasks_dir());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 GPU worker(s) ready, Fake GPU"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kforge evolve: 2 task(s)"), std::string::npos)
      << "a task named twice runs once\n"
      << r.out;
  EXPECT_NE(r.out.find("every task ended"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GPU workers:\n  worker 0: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n  worker 1: "), std::string::npos) << r.out;
  archive::Database raw(db, archive::Access::ReadOnly);
  archive::Statement q = raw.prepare(
      "SELECT count(*), count(DISTINCT d.uuid), min(d.uuid LIKE 'GPU-fake-worker-%') FROM (SELECT "
      "device_id FROM screens "
      "UNION ALL SELECT device_id FROM evaluations) m JOIN devices d ON d.id = m.device_id");
  ASSERT_TRUE(q.step());
  EXPECT_GT(q.integer(0), 0);
  EXPECT_EQ(q.integer(1), 2) << "both workers measured";
  EXPECT_EQ(q.integer(2), 1) << "every measurement recorded against a worker's GPU";
  archive::Statement judged = raw.prepare("SELECT count(*) FROM evaluations");
  ASSERT_TRUE(judged.step());
  EXPECT_GT(judged.integer(0), 0) << "the best kernels were judged";
}

// Issue 40: SIGTERM (what a batch system or `kill` sends) ends a run as Ctrl-C does: recorded as
// interrupted, not left `running`. The run waits on a batch folder nobody answers; it is killed
// once its first requests are there.
TEST(Scale, SigtermEndsAnEvolveRunRecordedAsInterrupted) {
  if (verify::Driver::get().available())
    GTEST_SKIP() << "this machine has a GPU: kforge evolve would judge on it";
  TempDir dir;
  std::string db = (dir.path() / "a.db").string();
  std::string batch = (dir.path() / "batch").string();
  std::string evolve = std::string(KFORGE_BINARY) +
                       " evolve smoke/relu --generations 2 --model batch:" + batch +
                       " --workers 1 --worker-command \"'" KFORGE_FAKE_GPU_WORKER
                       "' --connect {address} --worker {worker}\" --db " +
                       db + " --tasks-dir " + tasks_dir();
  test::CliResult r = test::run_command(
      "(" + evolve + " > " + (dir.path() / "out.txt").string() +
      " 2>&1 & pid=$!; for i in $(seq 600); do [ -s " + batch +
      "/requests.jsonl ] && break; sleep 0.1; done; kill -TERM $pid; kill -TERM $pid; wait $pid; "
      "echo rc=$?)");  // twice at once, as `timeout` does (the process, then its group)
  std::string out = *read_file((dir.path() / "out.txt").string());
  EXPECT_NE(r.out.find("rc=130"), std::string::npos) << r.out << "\n" << out;
  archive::Database raw(db, archive::Access::ReadOnly);
  archive::Statement q = raw.prepare("SELECT status, finished_at IS NOT NULL FROM runs");
  ASSERT_TRUE(q.step());
  EXPECT_EQ(q.text(0), "interrupted") << out;
  EXPECT_EQ(q.integer(1), 1) << out;
}

TEST(Scale, KforgeEvolveSaysWhatIsWrongWithItsWorkerFlags) {
  test::CliResult r = test::run_kforge("evolve smoke --worker-command 'true'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--workers N"), std::string::npos) << r.out;
  r = test::run_kforge("evolve smoke --gpus 0 --workers 2 --worker-command 'true'");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--gpus and --worker-command: give one"), std::string::npos) << r.out;
  r = test::run_kforge(
      "evolve smoke --workers 1 --worker-command 'exit 7' --worker-host 127.0.0.1");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("it ended before it said hello (exited with status 7)"), std::string::npos)
      << r.out;
  if (!verify::Driver::get().available()) {
    r = test::run_kforge("evolve smoke --gpus 0");
    EXPECT_EQ(r.code, 3) << r.out;
    EXPECT_NE(r.out.find("needs an NVIDIA GPU"), std::string::npos) << r.out;
  }
}

}  // namespace
