// What a GPU can do, measured once per device (docs/design.md, Verification 5): stream bandwidth
// for reads, writes and copies, and the peak matmul rate per dtype through LibTorch (TF32 off),
// and float32's with TF32 on.
// Kept in $KFORGE_CACHE_DIR/devices/<uuid>-<driver>.json; the roofline floor is computed from them.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kforge/compile/plan.h"
#include "kforge/tasks/task.h"

namespace kforge::verify {

// peak_tflops' key for float32 matmul with TF32 on (cuBLAS on the tensor cores).
inline constexpr const char* kTf32 = "tfloat32";

struct MeasuredFacts {
  std::string uuid, name;
  int driver = 0;
  double read_gbps = 0, write_gbps = 0, copy_gbps = 0;  // bytes moved / time, GB/s (1e9)
  std::map<std::string, double> peak_tflops;  // "float32", "float16", "bfloat16", "float64", kTf32
  double best_gbps() const;
  nlohmann::json to_json() const;
  static MeasuredFacts from_json(const nlohmann::json& j);
};

// Measured now (about 2 s), or read back from the cache when this device and driver were measured.
MeasuredFacts device_facts(int device, bool remeasure = false);

// What plans may assume about GPU `device`, read from the driver (its arch, SMs, opt-in shared
// memory).
compile::DeviceFacts plan_facts(int device);

// What every measurement records: GPU name, UUID and SM clock, driver, CUDA headers, NVRTC and
// LibTorch versions, harness version.
nlohmann::json toolchain(int device);

// The fastest rate at which work of `dtype` may be done and still meet the precision rule
// (docs/design.md, "Precision"): the dtype's measured matmul peak; for float32 at least a third
// of the TF32 peak, the rate of 3xTF32 (hi*hi + hi*lo + lo*hi on the tensor cores), or all of it
// where the task allows TF32. nullopt when nothing was measured for the dtype.
std::optional<double> compute_peak_tflops(const MeasuredFacts& facts, tasks::Dtype dtype,
                                          bool allow_tf32 = false);

// The roofline floor in ms: 0.9 x max(bytes / best bandwidth, flops / compute_peak_tflops);
// nullopt when neither bytes nor flops are known.
std::optional<double> roofline_floor_ms(const MeasuredFacts& facts, std::optional<double> bytes,
                                        std::optional<double> flops, tasks::Dtype dtype,
                                        bool allow_tf32 = false);

}  // namespace kforge::verify
