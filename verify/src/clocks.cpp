#include "kforge/verify/clocks.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>

#include "kforge/verify/driver.h"

namespace kforge::verify {
namespace {

// The few NVML entry points used, declared from its documented C ABI (the toolkit here ships no
// nvml.h): nvmlReturn_t is an int (0 = success), nvmlDevice_t an opaque handle.
using NvmlDevice = void*;
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;  // NVML_CLOCK_SM

struct Nvml {
  int (*init)() = nullptr;
  int (*by_uuid)(const char*, NvmlDevice*) = nullptr;
  int (*clock)(NvmlDevice, int, unsigned*) = nullptr;
  int (*max_clock)(NvmlDevice, int, unsigned*) = nullptr;
  int (*reasons)(NvmlDevice, unsigned long long*) = nullptr;
  std::string error;  // empty when loaded and initialised

  Nvml() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      error = "NVML (libnvidia-ml.so.1) cannot be loaded";
      return;
    }
    init = reinterpret_cast<int (*)()>(dlsym(lib, "nvmlInit_v2"));
    by_uuid = reinterpret_cast<int (*)(const char*, NvmlDevice*)>(
        dlsym(lib, "nvmlDeviceGetHandleByUUID"));
    clock =
        reinterpret_cast<int (*)(NvmlDevice, int, unsigned*)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    max_clock = reinterpret_cast<int (*)(NvmlDevice, int, unsigned*)>(
        dlsym(lib, "nvmlDeviceGetMaxClockInfo"));
    void* r =
        dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons");  // newer drivers; the old name before
    if (!r) r = dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
    reasons = reinterpret_cast<int (*)(NvmlDevice, unsigned long long*)>(r);
    if (!init || !by_uuid || !clock || !max_clock || !reasons) {
      error = "NVML lacks the clock queries kforge uses";
      return;
    }
    if (int rc = init(); rc != kNvmlSuccess)
      error = "nvmlInit_v2 failed with NVML error " + std::to_string(rc);
  }
  static const Nvml& get() {
    static const Nvml nvml;
    return nvml;
  }
};

struct EventName {
  uint64_t bit;
  const char* name;
  bool slowdown;
};
constexpr EventName kEvents[] = {
    {0x1, "gpu_idle", false},
    {0x2, "applications_clocks_setting", false},
    {0x4, "sw_power_cap", false},
    {0x8, "hw_slowdown", true},
    {0x10, "sync_boost", false},
    {0x20, "sw_thermal_slowdown", true},
    {0x40, "hw_thermal_slowdown", true},
    {0x80, "hw_power_brake_slowdown", true},
    {0x100, "display_clock_setting", false},
};

}  // namespace

std::vector<std::string> clock_event_names(uint64_t reasons) {
  std::vector<std::string> names;
  for (const EventName& e : kEvents)
    if (reasons & e.bit) names.push_back(e.name), reasons &= ~e.bit;
  if (reasons) {
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(reasons));
    names.push_back(hex);
  }
  return names;
}

bool is_slowdown(uint64_t reasons) {
  for (const EventName& e : kEvents)
    if (e.slowdown && (reasons & e.bit)) return true;
  return false;
}

std::string clock_text(const nlohmann::json& s) {
  if (s.contains("unavailable")) return "not read: " + s["unavailable"].get<std::string>();
  if (!s.contains("sm_mhz")) return "not read: no timing ran";
  const nlohmann::json& mhz = s["sm_mhz"];
  std::string events;
  for (const auto& e : s.value("events", nlohmann::json::array()))
    events += (events.empty() ? "" : ", ") + e.get<std::string>();
  return std::to_string(mhz["median"].get<unsigned>()) + " MHz (" +
         std::to_string(mhz["min"].get<unsigned>()) + "-" +
         std::to_string(mhz["max"].get<unsigned>()) + " over " +
         std::to_string(s.value("samples", 0)) + " readings, max " +
         std::to_string(s.value("max_sm_mhz", 0u)) +
         "), events: " + (events.empty() ? "none" : events) +
         (s.value("slowed", false) ? "  SLOWED: the times may be too long" : "");
}

ClockMonitor::ClockMonitor(const std::string& gpu_uuid) {
  const Nvml& nvml = Nvml::get();
  if (!nvml.error.empty()) {
    reason_ = nvml.error;
    return;
  }
  if (int rc = nvml.by_uuid(gpu_uuid.c_str(), &device_); rc != kNvmlSuccess) {
    reason_ = "NVML does not know GPU " + gpu_uuid + " (NVML error " + std::to_string(rc) + ")";
    return;
  }
  if (int rc = nvml.max_clock(device_, kNvmlClockSm, &max_sm_mhz_); rc != kNvmlSuccess) {
    reason_ = "NVML cannot read the SM clock (NVML error " + std::to_string(rc) + ")";
    return;
  }
  available_ = true;
}

void ClockMonitor::sample() {
  auto now = std::chrono::steady_clock::now();
  if (!available_ || (!sm_mhz_.empty() && now - last_ < kMinInterval)) return;
  last_ = now;
  const Nvml& nvml = Nvml::get();
  unsigned mhz = 0;
  unsigned long long reasons = 0;
  if (nvml.clock(device_, kNvmlClockSm, &mhz) == kNvmlSuccess) sm_mhz_.push_back(mhz);
  if (nvml.reasons(device_, &reasons) == kNvmlSuccess) reasons_ |= reasons;
  read_ms_ +=
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - now).count();
}

nlohmann::json ClockMonitor::summary() const {
  if (!available_) return {{"unavailable", reason_}};
  nlohmann::json j = {{"max_sm_mhz", max_sm_mhz_},
                      {"samples", sm_mhz_.size()},
                      {"events", clock_event_names(reasons_)},
                      {"slowed", slowed()},
                      {"read_ms", read_ms_}};
  if (!sm_mhz_.empty()) {
    std::vector<unsigned> s = sm_mhz_;
    std::sort(s.begin(), s.end());
    j["sm_mhz"] = {{"min", s.front()}, {"median", s[s.size() / 2]}, {"max", s.back()}};
  }
  return j;
}

ClockMonitor clock_monitor(int device) {
  return ClockMonitor(list_devices().at(static_cast<size_t>(device)).uuid);
}

}  // namespace kforge::verify
