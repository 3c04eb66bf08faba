#include "kforge/verify/device_facts.h"

#include <torch/version.h>

#include <algorithm>

#include "kforge/common/files.h"
#include "kforge/common/paths.h"
#include "kforge/compile/nvrtc.h"
#include "kforge/tasks/math_mode.h"
#include "kforge/verify/driver.h"
#include "kforge/verify/outcome.h"
#include "kforge/verify/timing.h"

namespace kforge::verify {

double MeasuredFacts::best_gbps() const {
  return std::max({read_gbps, write_gbps, copy_gbps});
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MeasuredFacts, uuid, name, driver, read_gbps, write_gbps,
                                   copy_gbps, peak_tflops)

nlohmann::json MeasuredFacts::to_json() const {
  return nlohmann::json(*this);
}

MeasuredFacts MeasuredFacts::from_json(const nlohmann::json& j) {
  return j.get<MeasuredFacts>();
}

namespace {

// Median event time of `work`, after warm-ups (no L2 flush: the buffers are 4 GiB, far past L2).
double median_ms(const std::function<void()>& work, int reps = 10) {
  TimingOptions o;
  o.warmups = 2;
  o.min_reps = reps;
  o.max_reps = reps;
  EventTimer timer;
  return time_repeatedly([](int) {},
                         [&](int) {
                           timer.start();
                           work();
                           return timer.stop_ms();
                         },
                         [](int) {}, o)
      .median_ms;
}

MeasuredFacts measure(int device, const DeviceInfo& info) {
  MeasuredFacts f;
  f.uuid = info.uuid;
  f.name = info.name;
  f.driver = driver_version();
  auto on = [&](torch::ScalarType t) {
    return torch::TensorOptions().dtype(t).device(torch::Device(torch::kCUDA, device));
  };
  const int64_t n = int64_t{1} << 30;  // 4 GiB of float32
  torch::Tensor a = torch::ones({n}, on(torch::kFloat32)),
                b = torch::empty({n}, on(torch::kFloat32));
  double bytes = static_cast<double>(n) * 4;
  f.read_gbps = bytes / median_ms([&] { (void)a.sum(); }) / 1e6;
  f.write_gbps = bytes / median_ms([&] { b.fill_(1.5f); }) / 1e6;
  f.copy_gbps = 2 * bytes / median_ms([&] { b.copy_(a); }) / 1e6;
  a = torch::Tensor();
  b = torch::Tensor();
  // TF32 off but for kTf32: float32 on the tensor cores (cuBLAS's TF32 path), a third of which is
  // what 3xTF32, which meets the precision rule, does float32 work at (roofline_floor_ms).
  for (auto [name, type, size, tf32] : {std::tuple{"float32", torch::kFloat32, 8192, false},
                                        std::tuple{kTf32, torch::kFloat32, 8192, true},
                                        std::tuple{"float16", torch::kFloat16, 8192, false},
                                        std::tuple{"bfloat16", torch::kBFloat16, 8192, false},
                                        std::tuple{"float64", torch::kFloat64, 4096, false}}) {
    tasks::MathModeGuard mode(tf32);
    torch::Tensor x = torch::randn({size, size}, on(type)),
                  y = torch::randn({size, size}, on(type));
    torch::Tensor z = torch::empty({size, size}, on(type));
    double ms = median_ms([&] { torch::matmul_out(z, x, y); }, 5);
    f.peak_tflops[name] = 2.0 * size * size * static_cast<double>(size) / ms / 1e9;
  }
  return f;
}

}  // namespace

MeasuredFacts device_facts(int device, bool remeasure) {
  DeviceInfo info = list_devices().at(static_cast<size_t>(device));
  std::string file =
      (cache_dir() / "devices" / (info.uuid + "-" + std::to_string(driver_version()) + ".json"))
          .string();
  if (!remeasure)
    if (auto text = read_file(file)) {
      try {
        MeasuredFacts cached = MeasuredFacts::from_json(nlohmann::json::parse(*text));
        if (cached.peak_tflops.count(kTf32)) return cached;
        // measured before the TF32 rate was: measure again
      } catch (const std::exception&) {
        // a damaged file: measure again
      }
    }
  MeasuredFacts f = measure(device, info);
  make_directories((cache_dir() / "devices").string());
  write_file_atomic(file, f.to_json().dump(2));
  return f;
}

compile::DeviceFacts plan_facts(int device) {
  DeviceInfo d = list_devices().at(static_cast<size_t>(device));
  compile::DeviceFacts f =
      compile::DeviceFacts::for_arch(compile::arch_for(d.cc_major, d.cc_minor));
  f.num_sms = d.sm_count;
  f.max_shared_per_block = d.max_shared_per_block_optin;
  f.measured = true;
  return f;
}

nlohmann::json toolchain(int device) {
  DeviceInfo info = list_devices().at(static_cast<size_t>(device));
  compile::NvrtcVersion nv = compile::nvrtc_version();
  return {{"gpu", info.name},
          {"uuid", info.uuid},
          {"sm_clock_mhz", info.clock_khz / 1000},
          {"driver", driver_version()},
          {"cuda_headers", CUDA_VERSION},
          {"nvrtc", std::to_string(nv.major) + "." + std::to_string(nv.minor)},
          {"libtorch", TORCH_VERSION},
          {"harness_version", kHarnessVersion}};
}

std::optional<double> compute_peak_tflops(const MeasuredFacts& facts, tasks::Dtype dtype,
                                          bool allow_tf32) {
  auto peak = [&](const std::string& key) {
    auto it = facts.peak_tflops.find(key);
    return it != facts.peak_tflops.end() && it->second > 0 ? std::optional(it->second)
                                                           : std::nullopt;
  };
  std::optional<double> own = peak(std::string(tasks::dtype_name(dtype)));
  std::optional<double> tf32 = dtype == tasks::Dtype::Float32 ? peak(kTf32) : std::nullopt;
  if (!tf32) return own;
  double accepted = allow_tf32 ? *tf32 : *tf32 / 3;
  return std::max(own.value_or(0.0), accepted);
}

std::optional<double> roofline_floor_ms(const MeasuredFacts& facts, std::optional<double> bytes,
                                        std::optional<double> flops, tasks::Dtype dtype,
                                        bool allow_tf32) {
  std::optional<double> ms;
  if (bytes && facts.best_gbps() > 0) ms = *bytes / facts.best_gbps() / 1e6;
  if (std::optional<double> peak = compute_peak_tflops(facts, dtype, allow_tf32); flops && peak)
    ms = std::max(ms.value_or(0.0), *flops / *peak / 1e9);
  if (ms) *ms *= 0.9;
  return ms;
}

}  // namespace kforge::verify
