// `kforge evolve` on GPU workers through a real Slurm (issue 42, docs/scale.md, "Slurm"): munged,
// slurmctld and slurmd started here on loopback (one node, four fake GPUs declared as a generic
// resource over files), the job submitted with scripts/slurm/kforge-evolve.sbatch as a user
// submits it, each worker a job step started by srun. The workers are kforge-fake-gpu-worker
// (`kforge gpu-worker` with the fake GPU): everything but the GPU is real, Slurm included.
//
// Skips, saying why, where Slurm is not installed (.ci/run installs it) or cannot start here.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "kforge/archive/sqlite.h"
#include "kforge/common/files.h"
#include "test_util.h"

namespace {

using namespace kforge;
using kforge::test::CliResult;
using kforge::test::run_command;
using kforge::test::TempDir;

std::string tasks_dir() {
  return (kforge::test::source_dir() / "tasks").string();
}
std::string sbatch_script() {
  return (kforge::test::source_dir() / "scripts/slurm/kforge-evolve.sbatch").string();
}

// The offline run every test asks for, before its tasks folder.
const std::string kRun = "--llm none --generations 2 --tasks-dir ";

// A TCP port nobody listens on now.
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

bool has_tool(const std::string& name) {
  return run_command("command -v " + name + " > /dev/null").code == 0;
}

// A one-node Slurm cluster in a folder of its own, for the whole test suite.
class Cluster {
 public:
  // "" when it runs, else why not.
  std::string start() {
    for (const char* tool :
         {"munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scancel"})
      if (!has_tool(tool))
        return std::string("Slurm is not installed (no ") + tool +
               "): apt install slurmctld slurmd slurm-client munge (.ci/run does)";
    if (::geteuid() != 0) return "slurmd needs root to start job steps as the submitting user";
    root_ = dir_.path().string();
    for (const char* d : {"munge", "ctld", "spool", "log"}) make_directories(root_ + "/" + d);
    std::string munge = root_ + "/munge";
    if (run_command("dd if=/dev/urandom of=" + munge +
                    "/key bs=128 count=1 2> /dev/null && chmod 600 " + munge + "/key")
            .code != 0)
      return "cannot write a munge key";
    CliResult m = run_command("munged -f --socket=" + munge + "/sock --key-file=" + munge +
                              "/key --log-file=" + munge + "/log --pid-file=" + munge +
                              "/pid --seed-file=" + munge + "/seed");
    if (m.code != 0) return "munged did not start: " + m.out;
    munged_ = true;
    std::ostringstream conf;
    conf << "ClusterName=kforge\nSlurmctldHost=localhost(127.0.0.1)\nSlurmctldPort=" << free_port()
         << "\nSlurmdPort=" << free_port() << "\nAuthType=auth/munge\nAuthInfo=socket=" << munge
         << "/sock\nCredType=cred/munge\nSlurmUser=root\nSlurmdUser=root\nStateSaveLocation="
         << root_ << "/ctld\nSlurmdSpoolDir=" << root_ << "/spool\nSlurmctldPidFile=" << root_
         << "/ctld.pid\nSlurmdPidFile=" << root_ << "/slurmd.pid\nSlurmctldLogFile=" << root_
         << "/log/slurmctld.log\nSlurmdLogFile=" << root_
         << "/log/slurmd.log\nSlurmdParameters=config_overrides\nProctrackType=proctrack/"
            "linuxproc\nTaskPlugin=task/none\nReturnToService=2\nSchedulerType=sched/"
            "backfill\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nGresTypes=gpu\n"
            "MpiDefault=none\nJobAcctGatherType=jobacct_gather/none\nAccountingStorageType="
            "accounting_storage/none\nKillWait=5\nInactiveLimit=0\n"
         << "NodeName=kforge1 NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=8 Gres=gpu:4 "
            "State=UNKNOWN\n"
         << "PartitionName=gpus Nodes=kforge1 Default=YES MaxTime=INFINITE State=UP "
            "OverSubscribe=FORCE\n";
    write_file_atomic(root_ + "/slurm.conf", conf.str());
    for (int i = 0; i < 4; ++i) std::ofstream(root_ + "/gpu" + std::to_string(i)).close();
    write_file_atomic(root_ + "/gres.conf",
                      "NodeName=kforge1 Name=gpu File=" + root_ + "/gpu[0-3]\n");
    env_ = "SLURM_CONF=" + root_ + "/slurm.conf ";
    run_command(env_ + "setsid slurmctld -D -i > " + root_ +
                "/log/slurmctld.out 2>&1 < /dev/null &");
    run_command(env_ + "setsid slurmd -D -N kforge1 > " + root_ +
                "/log/slurmd.out 2>&1 < /dev/null &");
    for (int i = 0; i < 300; ++i) {  // 30 s for both to come up and the node to be idle
      CliResult s = run_command(env_ + "sinfo -h -o %t");
      if (s.code == 0 && s.out.find("idle") != std::string::npos) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "slurmctld and slurmd did not come up in 30 s:\n" + logs();
  }

  ~Cluster() {
    if (!env_.empty()) {
      run_command(env_ + "scancel --full --quiet -u root");
      run_command("kill $(cat " + root_ + "/slurmd.pid " + root_ +
                  "/ctld.pid 2> /dev/null) 2> /dev/null");
    }
    if (munged_) run_command("munged --stop --socket=" + root_ + "/munge/sock");
  }

  // A command line with this cluster's configuration.
  std::string env() const { return env_; }
  std::string root() const { return root_; }
  std::string logs() const {
    std::string out;
    for (const char* f :
         {"log/slurmctld.log", "log/slurmd.log", "log/slurmctld.out", "log/slurmd.out"})
      out += std::string("--- ") + f + "\n" + read_file(root_ + "/" + f).value_or("(none)") + "\n";
    return out.size() > 6000 ? out.substr(out.size() - 6000) : out;
  }

 private:
  TempDir dir_;
  std::string root_, env_;
  bool munged_ = false;
};

Cluster* cluster = nullptr;
std::string* why_not = nullptr;

class Slurm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster = new Cluster();
    why_not = new std::string(cluster->start());
  }
  static void TearDownTestSuite() {
    delete cluster;
    delete why_not;
    cluster = nullptr;
  }
  void SetUp() override {
    if (!why_not->empty()) GTEST_SKIP() << *why_not;
  }
};

// The fake worker as the job's worker command, with `extra` flags (--busy-ms 50).
std::string worker(const std::string& extra = "") {
  return std::string("'") + KFORGE_FAKE_GPU_WORKER + "'" + (extra.empty() ? "" : " " + extra);
}

// The script's settings (docs/scale.md): shell assignments for the submitting environment, which
// the job gets (sbatch --export=ALL).
std::string settings(const std::string& db, const std::string& worker_command,
                     const std::string& args, const std::string& more = "KFORGE_TASKS=smoke") {
  return more + " KFORGE=" + KFORGE_BINARY + " KFORGE_DB=" + db +
         " KFORGE_WORKER_HOST=127.0.0.1 KFORGE_WORKER=\"" + worker_command + "\" KFORGE_ARGS=\"" +
         args + "\" ";
}

// sbatch of the project's script for `workers` tasks and GPUs: --wait (its exit code), or
// --parsable (the job's id), with its output in `out`.
CliResult submit(const TempDir& dir, int workers, const std::string& env, const std::string& out,
                 bool wait = true) {
  CliResult r = run_command(cluster->env() + env + "sbatch " + (wait ? "--wait" : "--parsable") +
                            " --export=ALL --ntasks=" + std::to_string(workers) + " --gres=gpu:" +
                            std::to_string(workers) + " --chdir=" + dir.path().string() +
                            " --output=" + out + " " + sbatch_script());
  if (wait) r.out += "\n--- job output\n" + read_file(out).value_or("(none)");
  return r;
}

// The script submitted without waiting for it, its workers taking 150 ms a measurement (so the
// run lasts long enough to act on it while it runs): the job's id.
std::string start_job(const TempDir& dir, int workers, const std::string& db,
                      const std::string& out) {
  CliResult s =
      submit(dir, workers, settings(db, worker("--busy-ms 150"), kRun + tasks_dir()), out, false);
  EXPECT_EQ(s.code, 0) << s.out;
  return std::regex_replace(s.out, std::regex("\\s+"), "");
}

// Whether `ready()` came true within `seconds` (asked every 100 ms).
template <class F>
bool wait_until(F ready, int seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return ready();
}

// Waits until the job is no longer in the queue (at most `seconds`).
void wait_for_end(const std::string& job, int seconds) {
  wait_until(
      [&] {
        CliResult q = run_command(cluster->env() + "squeue -h -j " + job + " -o %T");
        return q.out.find_first_not_of(" \n") == std::string::npos;
      },
      seconds);
}

int64_t scalar(const std::string& db, const std::string& sql) {
  archive::Database raw(db, archive::Access::ReadOnly);
  archive::Statement q = raw.prepare(sql);
  return q.step() ? q.integer(0) : -1;
}

// Per task: its best correct time and its counts of screens and judgments.
std::map<std::string, std::string> outcome(const std::string& db) {
  archive::Database raw(db, archive::Access::ReadOnly);
  archive::Statement q = raw.prepare(
      "SELECT t.suite || '/' || t.name, (SELECT min(e.time_ms) FROM evaluations e JOIN candidates "
      "c ON c.id = e.candidate_id WHERE c.task_id = t.id AND e.outcome = 'correct'), (SELECT "
      "count(*) FROM screens s JOIN candidates c ON c.id = s.candidate_id WHERE c.task_id = t.id), "
      "(SELECT count(*) FROM evaluations e JOIN candidates c ON c.id = e.candidate_id WHERE "
      "c.task_id = t.id) FROM tasks t ORDER BY 1");
  std::map<std::string, std::string> out;
  while (q.step())
    out[q.text(0)] = q.text(1) + " screened " + std::to_string(q.integer(2)) + " judged " +
                     std::to_string(q.integer(3));
  return out;
}

// The screens the archive holds (0 before kforge has made it and its tables).
int64_t screens(const std::string& db) {
  if (::access(db.c_str(), F_OK) != 0) return 0;
  try {
    return scalar(db, "SELECT count(*) FROM screens");
  } catch (const std::exception&) {  // the file is there, its schema not yet
    return 0;
  }
}

void expect_nothing_twice(const std::string& db) {
  EXPECT_EQ(scalar(db,
                   "SELECT count(*) FROM (SELECT candidate_id FROM screens GROUP BY candidate_id "
                   "HAVING count(*) > 1)"),
            0);
  EXPECT_EQ(scalar(db,
                   "SELECT count(*) FROM (SELECT candidate_id FROM evaluations GROUP BY "
                   "candidate_id HAVING count(*) > 1)"),
            0);
}

}  // namespace

// The sbatch script with four workers, each a job step with a GPU of its own: per task the same
// best kernel and the same counts of screens and judgments as one worker started by sh, nothing
// measured twice, every measurement recorded against the worker's GPU that made it.
TEST_F(Slurm, TheSbatchScriptRunsEvolveOnFourWorkersAsOneGpuWould) {
  TempDir dir;
  std::string db = dir.path().string() + "/slurm.db";
  CliResult r = submit(dir, 4, settings(db, worker("--busy-ms 5"), kRun + tasks_dir()),
                       dir.path().string() + "/job.out");
  ASSERT_EQ(r.code, 0) << r.out << cluster->logs();
  EXPECT_NE(r.out.find("4 GPU worker(s) ready"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("every task ended"), std::string::npos) << r.out;
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM runs WHERE status = 'finished'"), 1);
  expect_nothing_twice(db);
  EXPECT_EQ(scalar(db,
                   "SELECT min(d.uuid LIKE 'GPU-fake-worker-%') FROM (SELECT device_id FROM "
                   "screens UNION ALL SELECT device_id FROM evaluations) m JOIN devices d ON d.id "
                   "= m.device_id"),
            1);
  EXPECT_GE(scalar(db,
                   "SELECT count(DISTINCT device_id) FROM (SELECT device_id FROM screens UNION ALL "
                   "SELECT device_id FROM evaluations)"),
            2)
      << "the work was spread over the job steps";

  // The same run on one worker that sh starts, no Slurm.
  std::string one = dir.path().string() + "/one.db";
  CliResult o = run_command(std::string(KFORGE_BINARY) + " evolve smoke " + kRun + tasks_dir() +
                            " --db " + one + " --workers 1 --worker-command \"" + worker() +
                            " --connect {address} --worker {worker}\"");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_EQ(outcome(db), outcome(one)) << "the search does not depend on which GPU measured what";
}

// One worker's job step cancelled (scancel JOB.STEP) while the run goes on: that worker is taken
// out with the reason, its job is done by another, the run finishes as it would have.
TEST_F(Slurm, AWorkerStepCancelledMidRunIsTakenOutAndTheRunFinishes) {
  TempDir dir;
  std::string db = dir.path().string() + "/a.db";
  std::string out = dir.path().string() + "/job.out";
  std::string job = start_job(dir, 3, db, out);
  ASSERT_FALSE(job.empty());
  // Wait for the three worker steps and the first measurements, then cancel step 1.
  bool running = wait_until(
      [&] {
        CliResult q = run_command(cluster->env() + "squeue -h -s -j " + job + " -o %i");
        return q.out.find(job + ".2") != std::string::npos && screens(db) > 3;
      },
      60);
  ASSERT_TRUE(running) << read_file(out).value_or("") << cluster->logs();
  std::string step = job + ".1";
  ASSERT_EQ(run_command(cluster->env() + "scancel " + step).code, 0);
  wait_for_end(job, 120);  // the job ends by itself
  std::string text = read_file(out).value_or("");
  EXPECT_NE(text.find("every task ended"), std::string::npos) << text << cluster->logs();
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM runs WHERE status = 'finished'"), 1) << text;
  expect_nothing_twice(db);
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM evaluations WHERE outcome = 'harness_error'"), 0);
  // The worker list at the end names the one taken out, and why.
  std::smatch m;
  EXPECT_TRUE(std::regex_search(text, m, std::regex(R"(worker \d+: .*(taken out|out:).*)")))
      << text;
}

// The allocation ends under a running kforge evolve (scancel of the whole job): the run is recorded
// as ended, not left running; `--resume` in a new allocation (the same script, KFORGE_RESUME)
// finishes it, measuring nothing twice.
TEST_F(Slurm, ARunWhoseAllocationEndsIsResumedInANewOne) {
  TempDir dir;
  std::string db = dir.path().string() + "/a.db";
  std::string out = dir.path().string() + "/job1.out";
  std::string job = start_job(dir, 2, db, out);
  ASSERT_FALSE(job.empty());
  bool measuring = wait_until([&] { return screens(db) > 3; }, 60);
  ASSERT_TRUE(measuring) << read_file(out).value_or("") << cluster->logs();
  ASSERT_EQ(run_command(cluster->env() + "scancel " + job).code, 0);
  wait_for_end(job, 60);
  // Slurm signals the job's processes (SIGTERM, then SIGKILL after KillWait): the run is recorded
  // as interrupted, or failed when its workers went first; never left running.
  std::string status;
  wait_until(
      [&] {
        archive::Database raw(db, archive::Access::ReadOnly);
        archive::Statement q = raw.prepare("SELECT status FROM runs WHERE id = 1");
        status = q.step() ? q.text(0) : "";
        return status != "running" && !status.empty();
      },
      10);
  EXPECT_TRUE(status == "interrupted" || status == "failed") << status << "\n"
                                                             << read_file(out).value_or("");
  int64_t screened = screens(db);
  TempDir again;
  CliResult r =
      submit(again, 2, settings(db, worker(), "--tasks-dir " + tasks_dir(), "KFORGE_RESUME=1"),
             again.path().string() + "/job2.out");
  ASSERT_EQ(r.code, 0) << r.out << cluster->logs();
  EXPECT_NE(r.out.find("every task ended"), std::string::npos) << r.out;
  EXPECT_EQ(scalar(db, "SELECT count(*) FROM runs WHERE id = 1 AND status = 'finished'"), 1)
      << r.out;
  EXPECT_GE(screens(db), screened);
  expect_nothing_twice(db);
}
