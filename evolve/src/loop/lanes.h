// The loop's workers (issue 37): three lanes of threads, one for each thing the loop waits on — the
// model's requests, the compiles, the GPUs — each thread taking its lane's waiting job of highest
// priority (the oldest first among equals). A job's work runs on a lane's thread and returns what
// to do with its result; drive() runs those one at a time on the loop's thread, so the loop's state
// needs no lock and no part of the loop blocks on another. Pure mechanism: what to run, and in
// which order to take results in, is the loop's (evolve/src/run.cpp).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace kforge::evolve::loop {

enum class Lane { Model, Compile, Gpu };

// A lane's order: what finishes a round (its judgments) before what the model answered before what
// the tuner proposed, so that the GPU takes the work that unblocks the most first.
enum class Priority { Commit = 0, Answer = 1, Tuner = 2 };

using Then = std::function<void()>;  // runs on the loop's thread
using Work = std::function<Then()>;  // runs on a lane's thread

class Lanes {
 public:
  struct Sizes {
    int model = 1, compile = 1, gpu = 1;  // threads (at least one each)
  };
  explicit Lanes(Sizes sizes);
  ~Lanes();  // lets go of waiting jobs, waits for the running ones
  Lanes(const Lanes&) = delete;
  Lanes& operator=(const Lanes&) = delete;

  // Queues a job; dropped once the lanes are stopping.
  void submit(Lane lane, Priority priority, Work work);

  // Runs the jobs' results on this thread until no job waits or runs. `stopping` is asked after
  // each result and every 50 ms; once it says yes (or a result threw), the waiting jobs are dropped
  // and new ones refused for good, `on_stop` runs once, and the running ones finish (their results
  // still run). Rethrows the first exception a work or a result threw.
  void drive(const std::function<bool()>& stopping, const std::function<void()>& on_stop);

  // What each lane is doing now (for progress and the benchmark).
  int running(Lane lane) const;
  int waiting(Lane lane) const;

 private:
  struct Queue {
    std::map<std::pair<int, uint64_t>, Work> waiting;  // (priority, submission) -> work
    int running = 0;
  };
  void serve(Lane lane);
  bool idle() const;  // locked

  mutable std::mutex mutex_;
  std::condition_variable work_ready_, result_ready_;
  Queue queues_[3];
  std::deque<Then> results_;
  uint64_t submitted_ = 0;
  bool refusing_ = false, closing_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace kforge::evolve::loop
