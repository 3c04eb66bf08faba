// The SM clock record (clocks.h) without a GPU: NVML's event bits by name, which of them flag a
// slowed measurement, the line `kforge verify` prints, and a monitor that cannot read says why.
#include <gtest/gtest.h>

#include "kforge/verify/clocks.h"

using namespace kforge::verify;

TEST(Clocks, EventBitsAreNamedAndUnknownBitsKept) {
  EXPECT_TRUE(clock_event_names(0).empty());
  EXPECT_EQ(clock_event_names(0x1 | 0x40 | 0x10000),
            (std::vector<std::string>{"gpu_idle", "hw_thermal_slowdown", "0x10000"}));
  EXPECT_EQ(clock_event_names(0x4), std::vector<std::string>{"sw_power_cap"});
}

TEST(Clocks, OnlyHeatHardwareAndThePowerBrakeCountAsASlowdown) {
  for (uint64_t bit : {0x8u, 0x20u, 0x40u, 0x80u}) EXPECT_TRUE(is_slowdown(bit)) << bit;
  for (uint64_t bit : {0x0u, 0x1u, 0x2u, 0x4u, 0x10u, 0x100u})
    EXPECT_FALSE(is_slowdown(bit)) << bit;
  EXPECT_TRUE(is_slowdown(0x1 | 0x8));
}

TEST(Clocks, TextSaysTheRangeTheEventsAndASlowdown) {
  nlohmann::json s = {{"sm_mhz", {{"min", 1755}, {"median", 1980}, {"max", 1980}}},
                      {"max_sm_mhz", 1980},
                      {"samples", 201},
                      {"events", nlohmann::json::array()},
                      {"slowed", false}};
  EXPECT_EQ(clock_text(s), "1980 MHz (1755-1980 over 201 readings, max 1980), events: none");
  s["events"] = {"sw_power_cap", "hw_thermal_slowdown"};
  s["slowed"] = true;
  EXPECT_EQ(
      clock_text(s),
      "1980 MHz (1755-1980 over 201 readings, max 1980), events: sw_power_cap, hw_thermal_slowdown"
      "  SLOWED: the times may be too long");
  EXPECT_EQ(clock_text({{"unavailable", "NVML (libnvidia-ml.so.1) cannot be loaded"}}),
            "not read: NVML (libnvidia-ml.so.1) cannot be loaded");
}

TEST(Clocks, AMonitorThatCannotReadSaysWhyAndRecordsNothing) {
  // No such GPU anywhere: here NVML is absent (no driver); on the GPU machine NVML does not know
  // it.
  ClockMonitor m("GPU-00000000-0000-0000-0000-000000000000");
  EXPECT_FALSE(m.available());
  EXPECT_FALSE(m.reason().empty());
  m.sample();
  EXPECT_FALSE(m.slowed());
  EXPECT_EQ(m.summary(), (nlohmann::json{{"unavailable", m.reason()}}));
}
