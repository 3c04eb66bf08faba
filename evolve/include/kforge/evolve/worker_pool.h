// The scheduler for many GPUs (issue 23, docs/scale.md): the parent hands jobs (JSON) to worker
// processes, one per GPU, over TCP connections the workers open back to it. Workers are started by
// a command template (a local process per GPU, or srun, ssh, kubectl exec: any existing launcher), so
// kforge has no cluster manager of its own. A worker that dies, closes its connection or overruns a
// job's deadline is taken out (killed where the pool started it) and its job goes to another worker;
// every job is answered exactly once, by one worker, or with an error once `max_attempts` workers
// failed on it or none is left. Only the parent sees the answers, so only it writes the archive.
//
// Wire format, one JSON object per line:
//   worker -> parent  {"op":"hello","worker":I,"token":T,...}    (anything else in it is kept: its GPU)
//   parent -> worker  {"op":"job","id":N,"job":{...}}
//   worker -> parent  {"op":"result","id":N,"answer":{...}}
// The token (random, per pool; the worker reads $KFORGE_WORKER_TOKEN or a {token} argument) keeps
// other processes that can reach the port from posing as a worker.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kforge::evolve {

struct WorkerPoolOptions {
  // One worker's argv; in each argument "{address}" becomes HOST:PORT the pool listens on, "{worker}"
  // the worker's index (0..workers-1) and "{token}" the pool's token.
  std::vector<std::string> command;
  int workers = 1;
  std::string host = "127.0.0.1";  // the address workers connect to (loopback unless they are remote)
  std::chrono::milliseconds connect_timeout{30000};
  int max_attempts = 2;            // workers that may fail on one job before it is answered with an error
  std::vector<std::string> env;    // the workers' environment ("NAME=value"); the token is added
};

struct JobResult {
  nlohmann::json answer;             // the worker's answer (null with an error)
  std::optional<std::string> error;  // why there is no answer
  int worker = -1;                   // who answered
  int attempts = 0;                  // workers it was given to
};

struct WorkerState {
  int index = 0;
  bool alive = false;
  std::string out_reason;  // why it was taken out
  int jobs_done = 0;
  nlohmann::json hello;    // what it said of itself
};

class WorkerPool {
 public:
  // Starts the workers and waits (connect_timeout) for each one's hello; one that does not come is
  // taken out. Throws kforge::Error when none comes.
  explicit WorkerPool(WorkerPoolOptions options);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues a job (thread-safe). A worker that takes longer than `deadline` over it is hung: killed,
  // taken out, and the job given to another.
  std::future<JobResult> submit(nlohmann::json job, std::chrono::milliseconds deadline);
  std::vector<WorkerState> workers() const;
  int alive() const;
  std::string address() const;  // HOST:PORT

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kforge::evolve
