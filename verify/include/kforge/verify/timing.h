// Timing that can be trusted (DESIGN.md, Verification 3): repetitions that adapt to a minimum
// total time, median / IQR / min, an L2 flush by reading, CUDA events with a device-wide sync.
#pragma once

#include <torch/types.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "kforge/verify/outcome.h"

namespace kforge::verify {

struct TimingOptions {
  int warmups = 3;
  double min_total_ms = 100;  // timed launches add up to at least this
  int min_reps = 10, max_reps = 1000;
  int pool = 4;               // input sets with distinct seeds, cycled under the same pointers
};

// Median, interquartile range (linear interpolation) and minimum of samples (ms).
TimeStats summarize(std::vector<double> samples_ms);
// How many timed repetitions reach `min_total_ms` at `estimate_ms` each, within [min, max].
int repetitions_for(double estimate_ms, const TimingOptions& options);

// Evicts the L2 cache by reading a buffer of twice its size (a memset would leave dirty lines to
// be written back during the timed work).
class L2Flush {
 public:
  L2Flush(int device, int64_t l2_bytes);
  void operator()();

 private:
  torch::Tensor buffer_;
};

// CUDA events (driver API) on the legacy default stream, where LibTorch runs eager ops; the stop
// is followed by a device-wide synchronisation.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start();
  double stop_ms();  // synchronises the device

 private:
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

// Times the DESIGN.md way: `prepare(rep)` (outside the events: inputs, poison, flush), then
// `measure(rep)`, which runs the work between events and returns their milliseconds, then
// `check(rep)` (outside the events; may throw). Warm-ups first, then as many repetitions as the
// minimum total time needs.
TimeStats time_repeatedly(const std::function<void(int)>& prepare, const std::function<double(int)>& measure,
                          const std::function<void(int)>& check, const TimingOptions& options);

}  // namespace kforge::verify
