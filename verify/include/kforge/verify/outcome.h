// Verdicts: the outcome of verifying one candidate, its flags and the evidence behind them
// (docs/design.md, Outcomes). Candidate failures are data; only harness bugs throw.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/baseline.h"

namespace kforge::verify {

// Bumped by hand whenever a verdict could change for the same candidate (stored with every
// evaluation; pinned by a test). 3: eager baselines run `number - tensor` as one rsub, as PyTorch
// does (tasks/reference.cpp), and an element counts as unwritten only if it kept both runs' poison.
inline constexpr int kHarnessVersion = 3;

enum class Outcome {
  CompileError,
  PlanError,
  LaunchError,
  RuntimeError,
  Timeout,
  WrongResult,
  InputModified,
  OutOfBoundsWrite,
  OutOfBoundsRead,
  IncompleteOutput,
  Nondeterministic,
  // The task's timed sizes need more device memory than this GPU has free (memory.h): nothing was
  // learnt about the candidate; the summary names the bytes needed and free.
  DoesNotFit,
  HarnessError,
  Correct,
};

// The archive's spelling: "compile_error", ..., "correct".
std::string_view to_string(Outcome o);
std::optional<Outcome> outcome_from_string(std::string_view s);
const std::vector<Outcome>& all_outcomes();

inline constexpr const char* kFlagBitwiseUnstable = "bitwise_unstable";
inline constexpr const char* kFlagSuspicious = "suspicious";
// NVML reported a thermal, hardware or power-brake slowdown while the candidate or a baseline was
// timed.
inline constexpr const char* kFlagClockSlowdown = "clock_slowdown";

// Event times of repeated runs (verify/timing.h makes them).
struct TimeStats {
  double median_ms = 0, iqr_ms = 0, min_ms = 0;
  int reps = 0;
  bool held = true;  // every sample's work was enqueued under the host hold (timing_gate.h)
  nlohmann::json to_json() const;
};

// One kind of baseline (common/baseline.h) timed like candidates, or why it was not: the compiled
// kinds (AOTInductor packages, compiled_reference.h) are absent where they cannot be built or
// loaded.
struct BaselineTiming {
  BaselineKind kind = BaselineKind::Eager;
  std::optional<TimeStats> stats;
  std::string absent;  // why there are no stats ("" when there are)
  double build_s = 0;  // seconds spent building its package now (0: none, or from the cache)
  nlohmann::json to_json() const;
};
// The list's medians by kind, with the absent kinds' reasons.
BaselineTimes medians(const std::vector<BaselineTiming>& list);
const BaselineTiming* find_baseline(const std::vector<BaselineTiming>& list, BaselineKind kind);
// A list as TimingResult::to_json writes its "baselines" (an array of BaselineTiming::to_json),
// read back in baseline_kinds() order; kinds this kforge does not know (a newer one's) are
// skipped. Throws kforge::Error naming the field (`where`[2].median_ms) on a bad entry.
std::vector<BaselineTiming> baselines_from_json(const nlohmann::json& j,
                                                const std::string& where = "baselines");

// Timing of a correct candidate on the timed dims, with its baselines and roofline (issue 6).
struct TimingResult {
  TimeStats time;
  std::vector<BaselineTiming> baselines;  // every kind, in baseline_kinds() order
  // baseline / time for a kind with stats, and over the fastest kind measured ("x best").
  std::optional<double> speedup(BaselineKind kind) const;
  std::optional<double> best_speedup() const;
  std::optional<double> bytes, flops, floor_ms, roofline_fraction;  // fraction = floor / time
  bool suspicious = false;                                          // see assess_speed
  std::string suspicion;  // why it is suspicious, or why a large speedup stands ("" when neither)
  std::string math_mode;  // "ieee" (TF32 off) or "tf32"
  nlohmann::json device = nlohmann::json::object();  // measured facts the floor came from
  nlohmann::json clocks = nlohmann::json::object();  // SM clock while timing (clocks.h)
  nlohmann::json to_json() const;
};

inline constexpr double kSuspiciousSpeedup = 10;

// Sets t.suspicious and t.suspicion (docs/design.md, "Suspicious timings"):
// - faster than the roofline floor: impossible, suspicious (a review cannot accept it);
// - more than kSuspiciousSpeedup x eager while eager itself runs at least that far from the floor
//   (LayerNorm over a whole sample, where eager launches one block per row; a diagonal matmul that
//   eager does in full): explained, not suspicious, the reason recorded;
// - more than kSuspiciousSpeedup x eager otherwise: suspicious until `kforge archive review`.
void assess_speed(TimingResult& t);
inline constexpr const char* kSuspicionBelowFloor = "faster than the roofline floor";

struct Verdict {
  Outcome outcome = Outcome::HarnessError;
  std::vector<std::string> flags;
  std::string summary;                                 // one line for humans
  nlohmann::json evidence = nlohmann::json::object();  // what the archive stores
  std::optional<TimingResult> timing;                  // correct candidates, when timed
  std::string gpu_uuid;  // the GPU that gave it, where there are several (evolve::Gpu::devices)
  bool correct() const { return outcome == Outcome::Correct; }
};

// A verdict as JSON and back: how a GPU worker answers the parent (docs/scale.md). The from_json
// functions throw kforge::Error naming the field that is missing or of the wrong type.
nlohmann::json to_json(const Verdict& v);
Verdict verdict_from_json(const nlohmann::json& j);
TimeStats time_stats_from_json(const nlohmann::json& j);
TimingResult timing_from_json(const nlohmann::json& j);

}  // namespace kforge::verify
