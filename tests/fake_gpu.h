// The only fake in the loop's tests: a GPU that answers every screen and judgment with times that
// follow from the candidate's tunables (the same answers every time), so runs are reproducible.
// Compiles, the archive and the loop are the real ones.
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include "kforge/common/hash.h"
#include "kforge/evolve/evaluator.h"

namespace kforge::test {

class FakeGpu : public evolve::Gpu {
 public:
  // A tunables point's time: 0.5 to 1.5 ms, from a hash of the point (eager takes 1 ms).
  static double time_of(const compile::Tunables& t) {
    std::string text;
    for (const auto& [k, v] : t) text += k + "=" + std::to_string(v) + ";";
    return 0.5 + static_cast<double>(std::stoull(content_hash(text).substr(0, 8), nullptr, 16) % 1000) / 1000.0;
  }
  verify::Verdict verify(const tasks::Task&, const compile::CandidateReport& r) override {
    if (!r.ok()) return verify::verdict_from_report(r);
    busy();
    ++verified;
    return correct(time_of(r.tunables));
  }
  std::optional<verify::Baselines> baselines(const tasks::Task& task) override {
    ++baselined;
    verify::Baselines b;
    b.eager.median_ms = 1.0;
    b.scripted.median_ms = 1.1;
    b.math_mode = task.allow_tf32 ? "tf32" : "ieee";
    return b;
  }
  verify::Verdict screen(const tasks::Task&, const compile::CandidateReport& r) override {
    busy();
    ++screened;
    return correct(time_of(r.tunables) * 1.01);  // a screen reads a little slower
  }
  verify::Verdict admit(const tasks::Task&, const compile::CandidateReport&) override {
    ++admitted;
    verify::Verdict v;
    v.outcome = verify::Outcome::Correct;
    v.summary = "admitted (fake GPU)";
    return v;
  }
  // With `ncu` set, a profile per candidate: its kernels' names (from the compile report).
  nlohmann::json profile(const tasks::Task&, const compile::CandidateReport& r) override {
    ++profiled;
    nlohmann::json kernels = nlohmann::json::array();
    for (const auto& k : r.kernels)
      kernels.push_back({{"name", k.name}, {"duration_ms", time_of(r.tunables)}, {"dram_pct", 81.25},
                         {"sm_pct", 40.5}, {"occupancy_pct", 62.0}, {"registers", 18},
                         {"stalls", nlohmann::json::array({nlohmann::json::array({"long_scoreboard", 12.5}), nlohmann::json::array({"wait", 2.0})})}});
    return {{"kernels", kernels}, {"tool", ncu}};
  }
  std::string profiler() const override { return ncu; }
  verify::DeviceInfo device() const override {
    verify::DeviceInfo d;
    d.name = name;
    d.uuid = uuid;
    d.cc_major = 9, d.cc_minor = 0, d.sm_count = 132;
    return d;
  }
  std::string driver() const override { return "fake"; }

  int verified = 0, screened = 0, admitted = 0, baselined = 0, profiled = 0;
  std::string ncu;  // "" : no profiler
  std::string name = "Fake GPU", uuid = "GPU-fake-0000";  // another machine: another uuid
  int busy_ms = 0;  // each screen and judgment takes this long (for the time budgets)

 private:
  void busy() const { std::this_thread::sleep_for(std::chrono::milliseconds(busy_ms)); }
  static verify::Verdict correct(double ms) {
    verify::Verdict v;
    v.outcome = verify::Outcome::Correct;
    v.summary = "correct (fake GPU)";
    verify::TimingResult t;
    t.time.median_ms = ms;
    t.eager.median_ms = 1.0;
    t.scripted.median_ms = 1.1;
    t.speedup_eager = 1.0 / ms;
    t.speedup_scripted = 1.1 / ms;
    t.floor_ms = 0.25;
    t.roofline_fraction = 0.25 / ms;
    v.timing = t;
    v.evidence = {{"seed", 1}};
    return v;
  }
};

}  // namespace kforge::test
