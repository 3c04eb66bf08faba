// The only fake in the loop's tests: a GPU that answers every screen and judgment with times that
// follow from the candidate's tunables (the same answers every time), so runs are reproducible.
// Compiles, the archive and the loop are the real ones.
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <thread>

#include "kforge/common/hash.h"
#include "kforge/evolve/evaluator.h"

namespace kforge::test {

class FakeGpu : public evolve::Gpu {
 public:
  // A tunables point's time: 0.5 to 1.5 ms, from a hash of the point (eager takes 1 ms, scripted
  // 1.1 ms, torch.compile 0.9 ms and its max-autotune 0.8 ms, unless `compiled_absent` says why
  // the compiled kinds have no time).
  static double time_of(const compile::Tunables& t) {
    std::string text;
    for (const auto& [k, v] : t) text += k + "=" + std::to_string(v) + ";";
    return 0.5 +
           static_cast<double>(std::stoull(content_hash(text).substr(0, 8), nullptr, 16) % 1000) /
               1000.0;
  }
  verify::Verdict verify(const tasks::Task& task, const evolve::Checked& c) override {
    const compile::CandidateReport& r = c.report;
    if (!r.ok()) return verify::verdict_from_report(r);
    busy();
    ++verified;
    if (is_wrong(r)) return wrong(task);
    return correct(time_of(r.tunables));
  }
  std::optional<verify::Baselines> baselines(const tasks::Task& task) override {
    ++baselined;
    verify::Baselines b;
    b.list = baselines();
    b.math_mode = task.allow_tf32 ? "tf32" : "ieee";
    return b;
  }
  verify::Verdict screen(const tasks::Task& task, const evolve::Checked& c) override {
    const compile::CandidateReport& r = c.report;
    busy();
    ++screened;
    if (is_wrong(r)) return wrong(task);
    return correct(time_of(r.tunables) * 1.01);  // a screen reads a little slower
  }
  verify::Verdict admit(const tasks::Task&, const evolve::Checked&) override {
    ++admitted;
    verify::Verdict v;
    v.outcome = verify::Outcome::Correct;
    v.summary = "admitted (fake GPU)";
    return v;
  }
  // With `ncu` set, a profile per candidate: its kernels' names (from the compile report).
  nlohmann::json profile(const tasks::Task&, const evolve::Checked& c) override {
    const compile::CandidateReport& r = c.report;
    ++profiled;
    profiled_on = std::this_thread::get_id();
    nlohmann::json kernels = nlohmann::json::array();
    for (const auto& k : r.kernels)
      kernels.push_back(
          {{"name", k.name},
           {"duration_ms", time_of(r.tunables)},
           {"dram_pct", 81.25},
           {"sm_pct", 40.5},
           {"occupancy_pct", 62.0},
           {"registers", 18},
           {"stalls", nlohmann::json::array({nlohmann::json::array({"long_scoreboard", 12.5}),
                                             nlohmann::json::array({"wait", 2.0})})}});
    return {{"kernels", kernels}, {"tool", ncu}};
  }
  std::string profiler() const override { return ncu; }
  verify::DeviceInfo device() const override {
    verify::DeviceInfo d;
    d.name = name;
    d.uuid = uuid;
    d.cc_major = 9, d.cc_minor = 0, d.sm_count = 132;
    d.memory_bytes =
        150'000'000'000;  // an H200's (a JSONL export of its rows imports: 0 would not)
    return d;
  }
  std::string driver() const override { return "fake"; }

  int verified = 0, screened = 0, admitted = 0, baselined = 0, profiled = 0;
  std::thread::id profiled_on;                            // the thread of the last profile
  std::string ncu;                                        // "" : no profiler
  std::string name = "Fake GPU", uuid = "GPU-fake-0000";  // another machine: another uuid
  int busy_ms = 0;  // each screen and judgment takes this long (for the time budgets)
  // Kernels (as plans name them) this GPU finds wrong: a candidate launching one screens and
  // judges wrong_result, with evidence shaped as the judge's (kWrongSummary in its summary).
  std::set<std::string> wrong_kernels;
  // Set: torch.compile's baselines (both modes) are absent, for this reason (as the judge says
  // where no Python with PyTorch 2 is found); empty: they take 0.9 and 0.8 ms.
  std::string compiled_absent;
  static constexpr const char* kWrongSummary = "differs from the reference (fake GPU)";

 private:
  void busy() const { std::this_thread::sleep_for(std::chrono::milliseconds(busy_ms)); }
  bool is_wrong(const compile::CandidateReport& r) const {
    for (const auto& k : r.kernels)
      if (wrong_kernels.count(k.name)) return true;
    return false;
  }
  static verify::Verdict wrong(const tasks::Task& task) {
    verify::Verdict v;
    v.outcome = verify::Outcome::WrongResult;
    std::string dims;
    for (const auto& [name, value] : task.dims)
      dims += (dims.empty() ? "" : ", ") + name + "=" + std::to_string(value);
    v.summary = "output 'out': " + std::string(kWrongSummary) +
                " at element [0, 1]: got 0.3989, expected 0 (dims " + dims + ", seed 1)";
    v.evidence = {{"output", "out"},
                  {"comparison",
                   {{"ok", false},
                    {"first_bad_position", {0, 1}},
                    {"first_bad_value", 0.3989},
                    {"first_bad_expected", 0.0}}},
                  {"unwritten_elements", 0},
                  {"seed", 1}};
    return v;
  }
  static verify::TimeStats stats(double ms) {
    verify::TimeStats t;
    t.median_ms = t.min_ms = ms;  // a positive minimum, as a JSONL import requires
    t.reps = 1;
    return t;
  }
  // Every kind, as the judge lists them.
  std::vector<verify::BaselineTiming> baselines() const {
    std::vector<verify::BaselineTiming> list;
    for (const BaselineKindInfo& info : baseline_kinds()) {
      verify::BaselineTiming b;
      b.kind = info.kind;
      switch (info.kind) {
        case BaselineKind::Eager:
          b.stats = stats(1.0);
          break;
        case BaselineKind::Scripted:
          b.stats = stats(1.1);
          break;
        case BaselineKind::Compiled:
        case BaselineKind::CompiledMaxAutotune:
          if (compiled_absent.empty())
            b.stats = stats(info.kind == BaselineKind::Compiled ? 0.9 : 0.8);
          else
            b.absent = compiled_absent;
          break;
      }
      list.push_back(b);
    }
    return list;
  }
  verify::Verdict correct(double ms) const {
    verify::Verdict v;
    v.outcome = verify::Outcome::Correct;
    v.summary = "correct (fake GPU)";
    verify::TimingResult t;
    t.time = stats(ms);
    t.baselines = baselines();
    t.floor_ms = 0.25;
    t.roofline_fraction = 0.25 / ms;
    v.timing = t;
    v.evidence = {{"seed", 1}, {"timing", t.to_json()}};  // as the judge records it
    return v;
  }
};

}  // namespace kforge::test
