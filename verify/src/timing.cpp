#include "kforge/verify/timing.h"

#include <algorithm>
#include <cmath>

#include "kforge/verify/driver.h"

namespace kforge::verify {

namespace {

double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  double pos = q * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

}  // namespace

TimeStats summarize(std::vector<double> samples) {
  TimeStats t;
  if (samples.empty()) return t;
  std::sort(samples.begin(), samples.end());
  t.reps = static_cast<int>(samples.size());
  t.median_ms = quantile(samples, 0.5);
  t.iqr_ms = quantile(samples, 0.75) - quantile(samples, 0.25);
  t.min_ms = samples.front();
  return t;
}

int repetitions_for(double estimate_ms, const TimingOptions& o) {
  if (!(estimate_ms > 0)) return o.max_reps;
  double reps = std::ceil(o.min_total_ms / estimate_ms);
  return static_cast<int>(
      std::clamp(reps, static_cast<double>(o.min_reps), static_cast<double>(o.max_reps)));
}

EventTimer::EventTimer(TimingGate* gate)
    : gate_(gate), hold_(gate != nullptr), held_(gate != nullptr) {
  const Driver& d = Driver::get();
  CUevent a, b;
  KFORGE_CU_CHECK(d, d.cuEventCreate(&a, CU_EVENT_DEFAULT));
  KFORGE_CU_CHECK(d, d.cuEventCreate(&b, CU_EVENT_DEFAULT));
  start_ = a;
  stop_ = b;
}

EventTimer::~EventTimer() {
  const Driver& d = Driver::get();
  d.cuEventDestroy(static_cast<CUevent>(start_));
  d.cuEventDestroy(static_cast<CUevent>(stop_));
}

void EventTimer::start() {
  const Driver& d = Driver::get();
  if (gate_) {
    if (hold_) gate_->hold(nullptr);
    gate_->flush(nullptr);
  }
  KFORGE_CU_CHECK(d, d.cuEventRecord(static_cast<CUevent>(start_), nullptr));
}

double EventTimer::stop_ms() {
  const Driver& d = Driver::get();
  CUresult recorded = d.cuEventRecord(static_cast<CUevent>(stop_), nullptr);
  if (gate_) gate_->release();
  KFORGE_CU_CHECK(d, recorded);
  KFORGE_CU_CHECK(d, d.cuCtxSynchronize());
  if (gate_ && gate_->timed_out()) hold_ = held_ = false;
  float ms = 0;
  KFORGE_CU_CHECK(
      d, d.cuEventElapsedTime(&ms, static_cast<CUevent>(start_), static_cast<CUevent>(stop_)));
  return ms;
}

TimeStats time_repeatedly(const std::function<void(int)>& prepare,
                          const std::function<double(int)>& measure,
                          const std::function<void(int)>& check, const TimingOptions& o) {
  std::vector<double> warm, samples;
  int rep = 0;
  for (int i = 0; i < o.warmups; ++i, ++rep) {
    prepare(rep);
    warm.push_back(measure(rep));
    check(rep);
  }
  int reps = repetitions_for(summarize(warm).median_ms, o);
  for (int i = 0; i < reps; ++i, ++rep) {
    prepare(rep);
    samples.push_back(measure(rep));
    check(rep);
  }
  return summarize(samples);
}

}  // namespace kforge::verify
