// The SM clock while kforge times, read through NVML (libnvidia-ml.so.1, loaded at run time like
// libcuda). The rated clock in the toolchain record cannot tell a throttled measurement from a
// good one; these readings can: a timing series records the clock range it ran at and the clock
// event reasons NVML reported, and a series slowed by power or heat is flagged.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kforge::verify {

// NVML's clock event reason bits (nvmlClocksEventReason*), by name; unknown bits as hex.
std::vector<std::string> clock_event_names(uint64_t reasons);
// The reasons that mean the clock was slowed by heat, a hardware slowdown or the power brake. The
// software power cap is normal under heavy load (it holds eager and the candidate alike), so it is
// recorded but is not one of them.
bool is_slowdown(uint64_t reasons);

// One line for people: "1980 MHz (1980-1980 over 201 readings, max 1980), events: none".
std::string clock_text(const nlohmann::json& summary);

class ClockMonitor {
 public:
  explicit ClockMonitor(const std::string& gpu_uuid);  // "GPU-..." as the CUDA driver reports it
  bool available() const { return available_; }
  const std::string& reason() const { return reason_; }  // why not, when unavailable
  // One reading of the SM clock and the event reasons, at most one per kMinInterval (NVML queries
  // cost tens of microseconds; a series of 200 short launches needs no 200 readings); no-op when
  // unavailable.
  void sample();
  static constexpr std::chrono::milliseconds kMinInterval{5};
  bool slowed() const { return is_slowdown(reasons_); }
  // {"sm_mhz": {"min","median","max"}, "max_sm_mhz", "samples", "events": [...], "slowed",
  // "read_ms" (the readings' own time)}, or {"unavailable": why}
  nlohmann::json summary() const;

 private:
  bool available_ = false;
  std::string reason_;
  void* device_ = nullptr;
  unsigned max_sm_mhz_ = 0;
  std::vector<unsigned> sm_mhz_;
  uint64_t reasons_ = 0;
  std::chrono::steady_clock::time_point last_{};
  double read_ms_ = 0;
};

// The monitor of CUDA device `device` (its UUID from the driver); needs a driver.
ClockMonitor clock_monitor(int device);

}  // namespace kforge::verify
