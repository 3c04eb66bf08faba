// What the LLM client's tests share: a retry policy that does not wait, and a recorder of the
// client's waits between attempts.
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "kforge/evolve/llm.h"

namespace kforge::test {

// `attempts` tries 1 ms apart (doubling, at most 5 s), 10 s each: a test never sleeps long.
inline evolve::RetryPolicy quick_policy(int attempts) {
  evolve::RetryPolicy p;
  p.max_attempts = attempts;
  p.base_delay = std::chrono::milliseconds(1);
  p.max_delay = std::chrono::milliseconds(5000);
  p.connect_timeout = std::chrono::milliseconds(2000);
  p.total_timeout = std::chrono::milliseconds(10000);
  return p;
}

// The client's waits between attempts, recorded instead of slept (LlmClient's `sleep`).
struct Sleeps {
  std::vector<std::chrono::milliseconds> waits;
  std::function<void(std::chrono::milliseconds)> fn() {
    return [this](std::chrono::milliseconds d) { waits.push_back(d); };
  }
};

}  // namespace kforge::test
