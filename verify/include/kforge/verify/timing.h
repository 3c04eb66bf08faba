// Timing that can be trusted (docs/design.md, Verification 3): repetitions that adapt to a
// minimum total time, median / IQR / min, CUDA events with a device-wide sync, the L2 flush and
// the host hold of timing_gate.h.
#pragma once

#include <torch/types.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "kforge/verify/outcome.h"
#include "kforge/verify/timing_gate.h"

namespace kforge::verify {

struct TimingOptions {
  int warmups = 3;
  double min_total_ms = 100;  // timed launches add up to at least this
  int min_reps = 10, max_reps = 200;
  // Input sets with distinct seeds, cycled under the same pointers. A candidate's pool is made of
  // its correctness sets on the timed dims (VerifyOptions::timed_seeds), topped up to this many.
  int pool = 4;  // docs/design.md, Defaults
};

// Median, interquartile range (linear interpolation) and minimum of samples (ms).
TimeStats summarize(std::vector<double> samples_ms);
// How many timed repetitions reach `min_total_ms` at `estimate_ms` each, within [min, max].
int repetitions_for(double estimate_ms, const TimingOptions& options);

// CUDA events (driver API) on the legacy default stream, where LibTorch runs eager ops; the stop
// is followed by a device-wide synchronisation. With a gate, start() first holds the stream and
// flushes the L2 (timing_gate.h), and stop_ms() releases the hold once the work is enqueued. A
// hold that times out (the work synchronised inside, or the host took over 200 ms to enqueue it)
// turns the hold off for this timer's later samples: held() says whether every sample was held.
class EventTimer {
 public:
  explicit EventTimer(TimingGate* gate = nullptr);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start();
  double stop_ms();  // synchronises the device
  bool held() const { return held_; }

 private:
  TimingGate* gate_ = nullptr;
  bool hold_ = false, held_ = false;
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

// Times as docs/design.md (Verification 3) describes: `prepare(rep)` (outside the events: inputs,
// poison, flush), then `measure(rep)`, which runs the work between events and returns their
// milliseconds, then `check(rep)` (outside the events; may throw). Warm-ups first, then as many
// repetitions as the minimum total time needs.
TimeStats time_repeatedly(const std::function<void(int)>& prepare,
                          const std::function<double(int)>& measure,
                          const std::function<void(int)>& check, const TimingOptions& options);

}  // namespace kforge::verify
