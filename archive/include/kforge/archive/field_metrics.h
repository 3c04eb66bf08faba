// The field's metrics over a suite's problems (issue 38; docs/results.md, "The field's metrics"),
// as KernelBench defines them (ScalingIntelligence/KernelBench, src/score.py):
// - correctness rate: problems with a correct kernel / problems;
// - fast_p: problems whose kernel is correct and faster than the baseline by more than p (speedup =
//   baseline time / kernel time > p) / problems. The denominator is every problem of the level: one
//   that did not convert, or has no correct kernel, counts as not fast;
// - the geometric mean speedup over the correct problems, and over the correct ones faster than the
//   baseline (speedup > 1); 0 where there are none.
// Computed against eager, torch.compile (default mode) and the best baseline. kforge may lack a
// compiled time where KernelBench always has its baseline: a correct problem without that
// baseline's time counts as not fast against it and is left out of its means (`timed` says how
// many had one).
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/baseline.h"

namespace kforge::archive {

// One problem's result: its kernel (the best, or the first attempt's) and the baselines.
struct ProblemResult {
  std::string task;
  bool correct = false;
  std::optional<double> time_ms;  // the kernel's, when correct
  BaselineTimes baselines;
};

inline const std::vector<double> kFastThresholds = {0, 1, 1.5, 2};

struct FieldMetrics {
  size_t problems = 0, correct = 0;
  double correctness = 0;  // correct / problems
  struct Against {
    std::string baseline;           // "eager", "compile", "best" (the column labels)
    size_t timed = 0;               // correct problems with this baseline's time
    std::map<double, double> fast;  // p -> fast_p
    double geomean_correct = 0, geomean_correct_faster = 0;
  };
  std::vector<Against> against;  // eager, torch.compile, best

  nlohmann::json to_json() const;
  std::string to_markdown() const;  // a table: a row per baseline
};

// `problems`: the denominator (the level's problem count); at least results.size().
FieldMetrics field_metrics(const std::vector<ProblemResult>& results, size_t problems);

// The two figures KernelBench reports (issue 38): over each problem's best kernel of all attempts,
// and over its first sample (kforge/archive/first_sample.h).
struct FieldFigures {
  FieldMetrics best, first_sample;
  size_t sampled = 0;     // problems with a model-written kernel (a first sample)
  std::string best_note;  // what "best" is here, after the heading: " (kind seed)"; may be empty

  // {"best": {...}, "first_sample": {..., "sampled": n}}
  nlohmann::json to_json() const;
  // Each table under its heading; where no problem has a model-written kernel, a line says so
  // instead of the first sample's table of zeros.
  std::string to_markdown() const;
};

}  // namespace kforge::archive
