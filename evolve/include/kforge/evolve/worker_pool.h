// The scheduler for many GPUs (issue 23, docs/scale.md): the parent hands jobs (JSON) to worker
// processes, one per GPU, over TCP connections the workers open back to it. Workers are started by
// a command template (a local process per GPU, or srun, ssh, kubectl exec: any existing launcher),
// so kforge has no cluster manager of its own. A worker that dies, closes its connection or
// overruns a job's deadline is taken out (killed where the pool started it) and its job goes to
// another worker; every job is answered exactly once, by one worker, or with an error once
// `max_attempts` workers failed on it or none is left. Only the parent sees the answers, so only it
// writes the archive.
//
// Wire format, one JSON object per line:
//   worker -> parent  {"op":"hello","worker":I,"token":T,...}    (anything else in it is kept: its
//   GPU) parent -> worker  {"op":"job","id":N,"job":{...}} worker -> parent
//   {"op":"result","id":N,"answer":{...}}
// The token (random, per pool; the worker reads $KFORGE_WORKER_TOKEN or a {token} argument) keeps
// other processes that can reach the port from posing as a worker. Before its token is read, a
// connection can do nothing but be closed (a hello is at most 64 KiB, at most 64 levels deep). A
// worker with the token that breaks the protocol (a line over 16 MiB or nested deeper than 64, a
// field missing or of the wrong type, an id not its job's, an answer its job's check refuses) is
// taken out like one that died, the reason naming the field, and its job goes to another.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/error.h"

namespace kforge::evolve {

// The GPU workers failed: none of the pool started, or none is left. The message names each worker
// and why it was taken out. `kforge evolve` exits 1 with it (the run ends "failed"; --resume goes
// on).
class WorkerError : public Error {
 public:
  using Error::Error;
};

// A check of what a worker sent (its hello, or its answer to a job): "" when it is right, else the
// problem, naming the field. Called on the pool's scheduler thread; it must not block.
using WorkerCheck = std::function<std::string(const nlohmann::json&)>;

struct WorkerPoolOptions {
  // One worker's argv; in each argument "{address}" becomes HOST:PORT the pool listens on,
  // "{worker}" the worker's index (0..workers-1) and "{token}" the pool's token.
  std::vector<std::string> command;
  int workers = 1;
  std::string host =
      "127.0.0.1";  // the address workers connect to (loopback unless they are remote)
  std::chrono::milliseconds connect_timeout{30000};
  int max_attempts = 2;  // workers that may fail on one job before it is answered with an error
  std::vector<std::string> env;  // the workers' environment ("NAME=value"); the token is added
  WorkerCheck check_hello;  // what a hello must say beyond op, worker and token (none: anything)
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
  nlohmann::json hello;  // what it said of itself
};

class WorkerPool {
 public:
  // Starts the workers and waits (connect_timeout) for each one's hello; one that does not come, or
  // that check_hello refuses, is taken out. Throws WorkerError naming each worker when none is
  // left.
  explicit WorkerPool(WorkerPoolOptions options);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues a job (thread-safe). A worker that takes longer than `deadline` over it is hung: killed,
  // taken out, and the job given to another; so is one whose answer `check_answer` refuses.
  std::future<JobResult> submit(nlohmann::json job, std::chrono::milliseconds deadline,
                                WorkerCheck check_answer = {});
  std::vector<WorkerState> workers() const;
  int alive() const;
  std::string address() const;  // HOST:PORT

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The parent's reading of its workers' lines (the pool's own, exposed for the protocol's tests).
// Neither throws: a line is read or refused, with the problem naming the field.
struct HelloLine {
  bool has_token = false;  // it carried the pool's token (else it is an outsider's, or garbage)
  int worker = -1;         // the worker index it gives, when it is one (0 .. workers-1)
  nlohmann::json hello;    // the hello, without its token
  std::string problem;     // "" when it is a hello of one of the pool's workers
};
HelloLine read_hello(std::string_view line, const std::string& token, int workers);

struct ResultLine {
  nlohmann::json answer;
  std::string problem;  // "" when it is the result of job `id`
};
ResultLine read_result(std::string_view line, int64_t id);

}  // namespace kforge::evolve
