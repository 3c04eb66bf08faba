// The scheduler for many GPUs (evolve/worker_pool.h) with fake workers in real processes over real
// sockets on loopback: a worker killed, one hanging, one slow, one sending garbage, one with a
// wrong token. Every job is answered exactly once, by a worker that did it, or with an error that
// says why.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "kforge/common/error.h"
#include "kforge/evolve/worker_pool.h"

namespace {

using kforge::evolve::JobResult;
using kforge::evolve::WorkerPool;
using kforge::evolve::WorkerPoolOptions;
using nlohmann::json;

// The command template: worker I runs the fake worker with behaviour[I] (a shell case, as an ssh or
// srun wrapper would be written).
WorkerPoolOptions fake_pool(const std::vector<std::string>& behaviour) {
  std::string cases;
  for (size_t i = 0; i < behaviour.size(); ++i)
    cases += std::to_string(i) + ") exec " + KFORGE_FAKE_POOL_WORKER +
             " --connect {address} --worker {worker} " + behaviour[i] + ";; ";
  WorkerPoolOptions o;
  o.command = {"/bin/sh", "-c", "case {worker} in " + cases + "esac"};
  o.workers = static_cast<int>(behaviour.size());
  o.connect_timeout = std::chrono::seconds(20);
  return o;
}

std::vector<JobResult> run_jobs(WorkerPool& pool, int n, std::chrono::milliseconds deadline) {
  std::vector<std::future<JobResult>> futures;
  for (int i = 0; i < n; ++i) futures.push_back(pool.submit({{"value", i}}, deadline));
  std::vector<JobResult> out;
  for (auto& f : futures) {
    EXPECT_EQ(f.wait_for(std::chrono::seconds(60)), std::future_status::ready);
    out.push_back(f.get());
  }
  return out;
}

TEST(WorkerPool, AKilledAHungAndASlowWorkerLoseNothing) {
  // The first two fail on their first job, which each is sure to get (an idle worker always takes
  // the next job), whatever the machine's load: exactly two failed attempts.
  WorkerPoolOptions o = fake_pool({"--die-after 1", "--hang-after 1", "--slow-ms 150", ""});
  o.max_attempts =
      3;  // one job may meet both the dying and the hanging worker, and still be answered
  WorkerPool pool(o);
  ASSERT_EQ(pool.alive(), 4);
  std::vector<JobResult> results = run_jobs(pool, 40, std::chrono::milliseconds(3000));
  std::map<int, int> by_worker;
  int failed_attempts = 0;
  for (int i = 0; i < 40; ++i) {
    ASSERT_FALSE(results[i].error) << "job " << i << ": " << *results[i].error;
    EXPECT_EQ(results[i].answer["double"], 2 * i) << "job " << i << "'s own answer";
    by_worker[results[i].worker]++;
    failed_attempts += results[i].attempts - 1;
  }
  EXPECT_EQ(failed_attempts, 2)
      << "the killed worker's job and the hung worker's job, given to another";
  auto workers = pool.workers();
  EXPECT_FALSE(workers[0].alive);
  EXPECT_NE(workers[0].out_reason.find("exited with status 3"), std::string::npos)
      << workers[0].out_reason;
  EXPECT_FALSE(workers[1].alive);
  EXPECT_NE(workers[1].out_reason.find("hung"), std::string::npos) << workers[1].out_reason;
  EXPECT_TRUE(workers[2].alive && workers[3].alive);
  EXPECT_EQ(by_worker[0], 0) << "it died on its first job";
  EXPECT_EQ(by_worker[1], 0) << "it hung on its first job";
  EXPECT_EQ(by_worker[0] + by_worker[1] + by_worker[2] + by_worker[3], 40);
  EXPECT_LT(by_worker[2], by_worker[3]) << "the slow worker took fewer jobs";
  int done = 0;
  for (const auto& w : workers) done += w.jobs_done;
  EXPECT_EQ(done, 40) << "no job done twice";
  EXPECT_EQ(workers[3].hello["device"], "fake GPU 3");
  EXPECT_FALSE(workers[3].hello.contains("token"));
}

TEST(WorkerPool, AJobThatBreaksEveryWorkerIsAnsweredWithAnError) {
  WorkerPoolOptions o = fake_pool({"--die-after 1", "--die-after 1", "--die-after 1"});
  o.max_attempts = 2;
  WorkerPool pool(o);
  // One job at a time: the first kills two workers and is answered with an error; the second kills
  // the last one and is answered too.
  JobResult first = run_jobs(pool, 1, std::chrono::milliseconds(5000))[0];
  ASSERT_TRUE(first.error);
  EXPECT_NE(first.error->find(
                "2 worker(s) failed on this job (the last: it ended (exited with status 3))"),
            std::string::npos)
      << *first.error;
  EXPECT_EQ(first.attempts, 2);
  EXPECT_EQ(pool.alive(), 1);
  JobResult second = run_jobs(pool, 1, std::chrono::milliseconds(5000))[0];
  ASSERT_TRUE(second.error);
  EXPECT_NE(second.error->find("no worker is left"), std::string::npos) << *second.error;
  EXPECT_EQ(pool.alive(), 0);
  // Once none is left, a job is answered at once, not queued forever.
  auto late = pool.submit({{"value", 7}}, std::chrono::milliseconds(1000));
  ASSERT_EQ(late.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_NE(late.get().error->find("no worker is left"), std::string::npos);
}

TEST(WorkerPool, OnlyItsOwnWorkersSpeakingTheProtocolAreKept) {
  WorkerPool pool(fake_pool({"--bad-token", "--garbage-after 1", ""}));
  auto workers = pool.workers();
  EXPECT_FALSE(workers[0].alive) << "a hello with the wrong token is refused";
  EXPECT_NE(workers[0].out_reason.find("before it said hello"), std::string::npos)
      << workers[0].out_reason;
  std::vector<JobResult> results = run_jobs(pool, 6, std::chrono::milliseconds(5000));
  for (int i = 0; i < 6; ++i) {
    ASSERT_FALSE(results[i].error) << *results[i].error;
    EXPECT_EQ(results[i].answer["double"], 2 * i);
    EXPECT_EQ(results[i].worker, 2);
  }
  workers = pool.workers();
  EXPECT_FALSE(workers[1].alive);
  EXPECT_NE(workers[1].out_reason.find("not allow: this is not JSON"), std::string::npos)
      << workers[1].out_reason;
}

TEST(WorkerPool, NoWorkerStartingIsAnErrorNamingEachOne) {
  WorkerPoolOptions o;
  o.command = {"/bin/sh", "-c", "exit 4"};
  o.workers = 2;
  o.connect_timeout = std::chrono::seconds(10);
  try {
    WorkerPool pool(o);
    FAIL() << "a pool without workers";
  } catch (const kforge::Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("worker 0: it ended before it said hello (exited with status 4)"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("worker 1:"), std::string::npos) << what;
  }
}

}  // namespace
