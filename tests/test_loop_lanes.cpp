// The loop's lanes alone (evolve/src/loop/lanes.h), with real threads: results on the driving
// thread, a lane's order (priority, then submission), a lane's width, results that submit more,
// stopping (on_stop once, waiting jobs dropped, running ones' results kept, submits refused), the
// first exception rethrown, and the running/waiting figures.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "loop/lanes.h"

namespace kforge::evolve::loop {
namespace {

using namespace std::chrono_literals;

// Polls `done` until it holds (true) or a second passed (false).
bool eventually(const std::function<bool()>& done) {
  auto until = std::chrono::steady_clock::now() + 1s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

const auto kNever = [] { return false; };
const auto kNothing = [] {};

// A gate jobs wait on until the test opens it.
struct Gate {
  std::promise<void> promise;
  std::shared_future<void> future = promise.get_future().share();
  void open() { promise.set_value(); }
  // Waits at most a second, so that a broken lane fails the test rather than hanging it.
  void wait() const { future.wait_for(1s); }
};

// A record several threads append to.
struct Log {
  std::mutex mutex;
  std::vector<std::string> entries;
  void add(const std::string& s) {
    std::lock_guard<std::mutex> lock(mutex);
    entries.push_back(s);
  }
  std::vector<std::string> get() {
    std::lock_guard<std::mutex> lock(mutex);
    return entries;
  }
};

// Works run on lane threads, never the driver's; every result runs on the thread that drives.
TEST(LoopLanes, ResultsRunOnTheDrivingThread) {
  Lanes lanes({2, 2, 2});
  const std::thread::id driver = std::this_thread::get_id();
  std::atomic<int> works_off_driver{0};
  std::vector<std::thread::id> result_threads;  // written by results only, so on one thread
  for (Lane lane : {Lane::Model, Lane::Compile, Lane::Gpu})
    for (int k = 0; k < 3; ++k)
      lanes.submit(lane, Priority::Answer, [&]() -> Then {
        if (std::this_thread::get_id() != driver) ++works_off_driver;
        return [&] { result_threads.push_back(std::this_thread::get_id()); };
      });
  lanes.drive(kNever, kNothing);
  EXPECT_EQ(works_off_driver.load(), 9);
  ASSERT_EQ(result_threads.size(), 9u);
  for (const std::thread::id& id : result_threads) EXPECT_EQ(id, driver);
}

// A lane of one thread takes its waiting jobs by priority (Commit, Answer, Tuner), then oldest
// first.
TEST(LoopLanes, OneThreadTakesJobsByPriorityThenSubmission) {
  Lanes lanes({1, 1, 1});
  Gate gate;
  std::promise<void> started;
  Log order;
  lanes.submit(Lane::Gpu, Priority::Tuner, [&]() -> Then {
    started.set_value();
    gate.wait();
    order.add("first");
    return nullptr;
  });
  ASSERT_EQ(started.get_future().wait_for(1s), std::future_status::ready);
  auto job = [&](const std::string& name) -> Work {
    return [&order, name]() -> Then {
      order.add(name);
      return nullptr;
    };
  };
  lanes.submit(Lane::Gpu, Priority::Tuner, job("tuner1"));
  lanes.submit(Lane::Gpu, Priority::Commit, job("commit1"));
  lanes.submit(Lane::Gpu, Priority::Answer, job("answer1"));
  lanes.submit(Lane::Gpu, Priority::Commit, job("commit2"));
  lanes.submit(Lane::Gpu, Priority::Tuner, job("tuner2"));
  lanes.submit(Lane::Gpu, Priority::Answer, job("answer2"));
  EXPECT_EQ(lanes.waiting(Lane::Gpu), 6);
  gate.open();
  lanes.drive(kNever, kNothing);
  EXPECT_EQ(order.get(), (std::vector<std::string>{"first", "commit1", "commit2", "answer1",
                                                   "answer2", "tuner1", "tuner2"}));
}

// A lane of three threads runs three of its ten jobs at once, never more.
TEST(LoopLanes, LaneRunsAtMostItsThreadsAtOnce) {
  Lanes lanes({3, 1, 1});
  std::atomic<int> active{0}, most{0}, done{0};
  for (int k = 0; k < 10; ++k)
    lanes.submit(Lane::Model, Priority::Answer, [&]() -> Then {
      int now = ++active;
      int seen = most.load();
      while (now > seen && !most.compare_exchange_weak(seen, now)) {
      }
      eventually([&] { return most.load() >= 3; });  // the first three meet
      std::this_thread::sleep_for(5ms);
      --active;
      return [&] { ++done; };
    });
  lanes.drive(kNever, kNothing);
  EXPECT_EQ(most.load(), 3);
  EXPECT_EQ(done.load(), 10);
}

// Results may submit more jobs (to any lane); drive returns only once every one has run.
TEST(LoopLanes, ResultsSubmitMoreAndDriveWaitsForAll) {
  Lanes lanes({2, 2, 2});
  int results = 0;  // results run on this thread only
  std::atomic<int> works{0};
  // Each job of depth d < 4 has two children in the next lane: 1 + 2 + 4 + 8 + 16 = 31 jobs.
  std::function<void(Lane, int)> spawn = [&](Lane lane, int depth) {
    lanes.submit(lane, Priority::Answer, [&, lane, depth]() -> Then {
      ++works;
      std::this_thread::sleep_for(1ms);
      return [&, lane, depth] {
        ++results;
        if (depth == 4) return;
        Lane next = lane == Lane::Model     ? Lane::Compile
                    : lane == Lane::Compile ? Lane::Gpu
                                            : Lane::Model;
        spawn(next, depth + 1);
        spawn(next, depth + 1);
      };
    });
  };
  spawn(Lane::Model, 0);
  lanes.drive(kNever, kNothing);
  EXPECT_EQ(results, 31);
  EXPECT_EQ(works.load(), 31);
  for (Lane lane : {Lane::Model, Lane::Compile, Lane::Gpu}) {
    EXPECT_EQ(lanes.running(lane), 0);
    EXPECT_EQ(lanes.waiting(lane), 0);
  }
}

// Once `stopping` says yes: on_stop runs once, waiting jobs never run, the running job's result
// still runs, and submits (from a result, or after drive) are refused.
TEST(LoopLanes, StoppingDropsWaitingKeepsRunningAndRefusesSubmits) {
  Lanes lanes({1, 1, 1});
  Gate gate;
  std::promise<void> started;
  bool stop = false, running_result = false;
  int on_stops = 0;
  std::atomic<int> dropped_ran{0}, refused_ran{0};
  lanes.submit(Lane::Gpu, Priority::Commit, [&]() -> Then {
    started.set_value();
    gate.wait();
    return [&] {
      running_result = true;
      lanes.submit(Lane::Compile, Priority::Commit, [&]() -> Then {
        ++refused_ran;
        return nullptr;
      });
    };
  });
  ASSERT_EQ(started.get_future().wait_for(1s), std::future_status::ready);
  for (int k = 0; k < 3; ++k)
    lanes.submit(Lane::Gpu, Priority::Commit, [&]() -> Then {
      ++dropped_ran;
      return nullptr;
    });
  lanes.submit(Lane::Model, Priority::Answer, [&]() -> Then { return [&] { stop = true; }; });
  // Opens the gate once the stop has dropped the GPU lane's waiting jobs.
  std::thread opener([&] {
    eventually([&] { return lanes.waiting(Lane::Gpu) == 0; });
    gate.open();
  });
  lanes.drive([&] { return stop; }, [&] { ++on_stops; });
  opener.join();
  EXPECT_EQ(on_stops, 1);
  EXPECT_TRUE(running_result);
  EXPECT_EQ(dropped_ran.load(), 0);
  EXPECT_EQ(refused_ran.load(), 0);
  lanes.submit(Lane::Model, Priority::Commit, [&]() -> Then {
    ++refused_ran;
    return nullptr;
  });
  EXPECT_EQ(lanes.waiting(Lane::Model), 0);
  EXPECT_EQ(lanes.running(Lane::Model), 0);
  EXPECT_EQ(refused_ran.load(), 0);
}

// A work that throws stops the lanes; drive rethrows it, but only after the running job's result
// ran.
TEST(LoopLanes, ExceptionFromWorkIsRethrownAfterRunningJobsFinish) {
  Lanes lanes({1, 1, 1});
  Gate gate;
  std::promise<void> started;
  bool running_result = false;
  int on_stops = 0;
  std::atomic<int> dropped_ran{0};
  lanes.submit(Lane::Gpu, Priority::Commit, [&]() -> Then {
    started.set_value();
    gate.wait();
    return [&] { running_result = true; };
  });
  ASSERT_EQ(started.get_future().wait_for(1s), std::future_status::ready);
  lanes.submit(Lane::Gpu, Priority::Commit, [&]() -> Then {
    ++dropped_ran;
    return nullptr;
  });
  lanes.submit(Lane::Compile, Priority::Answer,
               []() -> Then { throw std::runtime_error("work failed"); });
  std::thread opener([&] {
    eventually([&] { return lanes.waiting(Lane::Gpu) == 0; });
    gate.open();
  });
  std::string caught;
  try {
    lanes.drive(kNever, [&] { ++on_stops; });
  } catch (const std::runtime_error& e) {
    caught = e.what();
  }
  opener.join();
  EXPECT_EQ(caught, "work failed");
  EXPECT_TRUE(running_result);
  EXPECT_EQ(on_stops, 1);
  EXPECT_EQ(dropped_ran.load(), 0);
}

// A result that throws stops the lanes too; when a later result throws as well, the first is
// rethrown.
TEST(LoopLanes, ExceptionFromResultIsRethrownFirstOneWins) {
  Lanes lanes({1, 1, 1});
  Gate gate;
  std::promise<void> started;
  bool running_result = false;
  int on_stops = 0;
  std::atomic<int> dropped_ran{0};
  lanes.submit(Lane::Gpu, Priority::Commit, [&]() -> Then {
    started.set_value();
    gate.wait();
    return [&] {
      running_result = true;
      throw std::runtime_error("second");
    };
  });
  ASSERT_EQ(started.get_future().wait_for(1s), std::future_status::ready);
  lanes.submit(Lane::Gpu, Priority::Commit, [&]() -> Then {
    ++dropped_ran;
    return nullptr;
  });
  lanes.submit(Lane::Model, Priority::Answer,
               []() -> Then { return [] { throw std::runtime_error("first"); }; });
  std::thread opener([&] {
    eventually([&] { return lanes.waiting(Lane::Gpu) == 0; });
    gate.open();
  });
  std::string caught;
  try {
    lanes.drive(kNever, [&] { ++on_stops; });
  } catch (const std::runtime_error& e) {
    caught = e.what();
  }
  opener.join();
  EXPECT_EQ(caught, "first");
  EXPECT_TRUE(running_result);
  EXPECT_EQ(on_stops, 1);
  EXPECT_EQ(dropped_ran.load(), 0);
}

// running() and waiting() count each lane's jobs on its threads and in its queue, lane by lane.
TEST(LoopLanes, RunningAndWaitingFigures) {
  Lanes lanes({2, 1, 1});
  Gate gate;
  std::atomic<int> started{0};
  auto blocked = [&]() -> Then {
    ++started;
    gate.wait();
    return nullptr;
  };
  for (Lane lane :
       {Lane::Model, Lane::Model, Lane::Model, Lane::Model, Lane::Model, Lane::Gpu, Lane::Gpu})
    lanes.submit(lane, Priority::Answer, blocked);
  ASSERT_TRUE(eventually([&] { return started.load() == 3; }));
  EXPECT_EQ(lanes.running(Lane::Model), 2);
  EXPECT_EQ(lanes.waiting(Lane::Model), 3);
  EXPECT_EQ(lanes.running(Lane::Compile), 0);
  EXPECT_EQ(lanes.waiting(Lane::Compile), 0);
  EXPECT_EQ(lanes.running(Lane::Gpu), 1);
  EXPECT_EQ(lanes.waiting(Lane::Gpu), 1);
  gate.open();
  lanes.drive(kNever, kNothing);
  EXPECT_EQ(started.load(), 7);
  for (Lane lane : {Lane::Model, Lane::Compile, Lane::Gpu}) {
    EXPECT_EQ(lanes.running(lane), 0);
    EXPECT_EQ(lanes.waiting(lane), 0);
  }
}

// Destroying the lanes without driving lets go of waiting jobs and waits for the running one.
TEST(LoopLanes, DestructorDropsWaitingAndWaitsForRunning) {
  Gate gate;
  std::promise<void> started;
  std::atomic<bool> running_finished{false};
  std::atomic<int> dropped_ran{0};
  std::thread opener;
  {
    Lanes lanes({1, 1, 1});
    lanes.submit(Lane::Gpu, Priority::Commit, [&]() -> Then {
      started.set_value();
      gate.wait();
      std::this_thread::sleep_for(10ms);
      running_finished = true;
      return nullptr;
    });
    ASSERT_EQ(started.get_future().wait_for(1s), std::future_status::ready);
    lanes.submit(Lane::Gpu, Priority::Commit, [&]() -> Then {
      ++dropped_ran;
      return nullptr;
    });
    opener = std::thread([&] {
      std::this_thread::sleep_for(20ms);
      gate.open();
    });
  }
  EXPECT_TRUE(running_finished.load());
  EXPECT_EQ(dropped_ran.load(), 0);
  opener.join();
}

}  // namespace
}  // namespace kforge::evolve::loop
