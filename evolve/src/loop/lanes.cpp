#include "lanes.h"

#include <algorithm>
#include <chrono>

namespace kforge::evolve::loop {

Lanes::Lanes(Sizes sizes) {
  for (auto [lane, n] : {std::pair{Lane::Model, sizes.model},
                         std::pair{Lane::Compile, sizes.compile}, std::pair{Lane::Gpu, sizes.gpu}})
    for (int k = 0; k < std::max(n, 1); ++k)
      threads_.emplace_back([this, lane = lane] { serve(lane); });
}

Lanes::~Lanes() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = refusing_ = true;
    for (Queue& q : queues_) q.waiting.clear();
  }
  work_ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void Lanes::submit(Lane lane, Priority priority, Work work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (refusing_) return;
    queues_[static_cast<int>(lane)].waiting.emplace(
        std::pair{static_cast<int>(priority), submitted_++}, std::move(work));
  }
  work_ready_.notify_all();
}

void Lanes::serve(Lane lane) {
  Queue& q = queues_[static_cast<int>(lane)];
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [&] { return closing_ || !q.waiting.empty(); });
    if (q.waiting.empty()) return;  // closing
    Work work = std::move(q.waiting.begin()->second);
    q.waiting.erase(q.waiting.begin());
    ++q.running;
    lock.unlock();
    Then then;
    try {
      then = work();
    } catch (...) {
      then = [failure = std::current_exception()] { std::rethrow_exception(failure); };
    }
    lock.lock();
    --q.running;
    results_.push_back(std::move(then));
    result_ready_.notify_all();
  }
}

bool Lanes::idle() const {
  return results_.empty() &&
         std::all_of(std::begin(queues_), std::end(queues_),
                     [](const Queue& q) { return q.waiting.empty() && q.running == 0; });
}

void Lanes::drive(const std::function<bool()>& stopping, const std::function<void()>& on_stop) {
  std::exception_ptr failed;
  bool stopped = false;
  for (;;) {
    if (!stopped && (failed || stopping())) {
      stopped = true;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        refusing_ = true;
        for (Queue& q : queues_) q.waiting.clear();
      }
      on_stop();
    }
    Then next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!result_ready_.wait_for(lock, std::chrono::milliseconds(50),
                                  [&] { return !results_.empty() || idle(); }))
        continue;  // ask `stopping` again
      if (results_.empty()) break;
      next = std::move(results_.front());
      results_.pop_front();
    }
    try {
      if (next) next();
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  }
  if (failed) std::rethrow_exception(failed);
}

int Lanes::running(Lane lane) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queues_[static_cast<int>(lane)].running;
}

int Lanes::waiting(Lane lane) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(queues_[static_cast<int>(lane)].waiting.size());
}

}  // namespace kforge::evolve::loop
