#include "kforge/verify/outcome.h"

namespace kforge::verify {

const std::vector<Outcome>& all_outcomes() {
  static const std::vector<Outcome> all = {
      Outcome::CompileError,     Outcome::PlanError,       Outcome::LaunchError,      Outcome::RuntimeError,
      Outcome::Timeout,          Outcome::WrongResult,     Outcome::InputModified,    Outcome::OutOfBoundsWrite,
      Outcome::OutOfBoundsRead,  Outcome::IncompleteOutput, Outcome::Nondeterministic, Outcome::HarnessError,
      Outcome::Correct};
  return all;
}

std::string_view to_string(Outcome o) {
  switch (o) {
    case Outcome::CompileError: return "compile_error";
    case Outcome::PlanError: return "plan_error";
    case Outcome::LaunchError: return "launch_error";
    case Outcome::RuntimeError: return "runtime_error";
    case Outcome::Timeout: return "timeout";
    case Outcome::WrongResult: return "wrong_result";
    case Outcome::InputModified: return "input_modified";
    case Outcome::OutOfBoundsWrite: return "out_of_bounds_write";
    case Outcome::OutOfBoundsRead: return "out_of_bounds_read";
    case Outcome::IncompleteOutput: return "incomplete_output";
    case Outcome::Nondeterministic: return "nondeterministic";
    case Outcome::HarnessError: return "harness_error";
    case Outcome::Correct: return "correct";
  }
  return "?";
}

std::optional<Outcome> outcome_from_string(std::string_view s) {
  for (Outcome o : all_outcomes())
    if (to_string(o) == s) return o;
  return std::nullopt;
}

nlohmann::json TimeStats::to_json() const {
  return {{"median_ms", median_ms}, {"iqr_ms", iqr_ms}, {"min_ms", min_ms}, {"reps", reps}, {"held", held}};
}

nlohmann::json TimingResult::to_json() const {
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"time", time.to_json()},
          {"eager", eager.to_json()},
          {"scripted", scripted.to_json()},
          {"speedup_eager", speedup_eager},
          {"speedup_scripted", speedup_scripted},
          {"compiled", compiled ? compiled->to_json() : nlohmann::json(nullptr)},
          {"speedup_compiled", opt(speedup_compiled)},
          {"compiled_absent", compiled_absent},
          {"bytes", opt(bytes)},
          {"flops", opt(flops)},
          {"floor_ms", opt(floor_ms)},
          {"roofline_fraction", opt(roofline_fraction)},
          {"suspicious", suspicious},
          {"suspicion", suspicion},
          {"math_mode", math_mode},
          {"device", device},
          {"clocks", clocks}};
}

void assess_speed(TimingResult& t) {
  auto pct = [](double fraction) { return std::to_string(static_cast<int>(100 * fraction + 0.5)) + "%"; };
  t.suspicious = false;
  t.suspicion.clear();
  double ms = t.time.median_ms;
  if (t.floor_ms && ms < *t.floor_ms) {
    t.suspicious = true;
    t.suspicion = std::string(kSuspicionBelowFloor) + " (" + pct(*t.floor_ms / ms) +
                  " of it): impossible, so the kernel skipped work or the timing is wrong";
  } else if (t.speedup_eager > kSuspiciousSpeedup) {
    double eager_fraction = t.floor_ms && t.eager.median_ms > 0 ? *t.floor_ms / t.eager.median_ms : 1.0;
    if (t.floor_ms && eager_fraction * kSuspiciousSpeedup < 1.0) {
      t.suspicion = "explained: eager runs at " + pct(eager_fraction) + " of the roofline floor, the kernel at " +
                    pct(*t.floor_ms / ms) + ", so a large speedup over eager is expected";
    } else {
      t.suspicious = true;
      t.suspicion = "more than " + std::to_string(static_cast<int>(kSuspiciousSpeedup)) +
                    "x eager, while eager runs within " + std::to_string(static_cast<int>(kSuspiciousSpeedup)) +
                    "x of the roofline floor" + (t.floor_ms ? "" : " (no floor known)") +
                    ": awaiting review (kforge archive review)";
    }
  }
}

}  // namespace kforge::verify
