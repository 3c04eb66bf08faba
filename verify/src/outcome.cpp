#include "kforge/verify/outcome.h"

#include <limits>
#include <type_traits>

#include "kforge/common/error.h"

namespace kforge::verify {

const std::vector<Outcome>& all_outcomes() {
  static const std::vector<Outcome> all = {
      Outcome::CompileError,     Outcome::PlanError,        Outcome::LaunchError,
      Outcome::RuntimeError,     Outcome::Timeout,          Outcome::WrongResult,
      Outcome::InputModified,    Outcome::OutOfBoundsWrite, Outcome::OutOfBoundsRead,
      Outcome::IncompleteOutput, Outcome::Nondeterministic, Outcome::DoesNotFit,
      Outcome::HarnessError,     Outcome::Correct};
  return all;
}

std::string_view to_string(Outcome o) {
  switch (o) {
    case Outcome::CompileError:
      return "compile_error";
    case Outcome::PlanError:
      return "plan_error";
    case Outcome::LaunchError:
      return "launch_error";
    case Outcome::RuntimeError:
      return "runtime_error";
    case Outcome::Timeout:
      return "timeout";
    case Outcome::WrongResult:
      return "wrong_result";
    case Outcome::InputModified:
      return "input_modified";
    case Outcome::OutOfBoundsWrite:
      return "out_of_bounds_write";
    case Outcome::OutOfBoundsRead:
      return "out_of_bounds_read";
    case Outcome::IncompleteOutput:
      return "incomplete_output";
    case Outcome::Nondeterministic:
      return "nondeterministic";
    case Outcome::DoesNotFit:
      return "does_not_fit";
    case Outcome::HarnessError:
      return "harness_error";
    case Outcome::Correct:
      return "correct";
  }
  return "?";
}

std::optional<Outcome> outcome_from_string(std::string_view s) {
  for (Outcome o : all_outcomes())
    if (to_string(o) == s) return o;
  return std::nullopt;
}

nlohmann::json TimeStats::to_json() const {
  return {{"median_ms", median_ms},
          {"iqr_ms", iqr_ms},
          {"min_ms", min_ms},
          {"reps", reps},
          {"held", held}};
}

nlohmann::json TimingResult::to_json() const {
  auto opt = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
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

namespace {

// j[key] as T, or kforge::Error naming `where`.key. Numbers are strict: an integer field takes an
// integer that fits, a number field a number (not true, which JSON's library would turn into 1).
template <typename T>
T field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key))
    throw Error(where + ": no field \"" + std::string(key) + "\"");
  const nlohmann::json& v = j.at(key);
  auto wrong = [&] {
    return Error(where + "." + key + ": " +
                 v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 80) +
                 " is not of the expected type");
  };
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (!v.is_number_integer() ||
        (v.is_number_unsigned()
             ? v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())
             : v.get<int64_t>() < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
                   v.get<int64_t>() > static_cast<int64_t>(std::numeric_limits<T>::max())))
      throw wrong();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) throw wrong();
  }
  try {
    return v.get<T>();
  } catch (const nlohmann::json::exception&) {
    throw wrong();
  }
}

std::optional<double> optional_number(const nlohmann::json& j, const char* key,
                                      const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return field<double>(j, key, where);
}

// The time statistics at j, `where` naming them.
TimeStats time_stats_at(const nlohmann::json& j, const std::string& where) {
  TimeStats t;
  t.median_ms = field<double>(j, "median_ms", where);
  t.iqr_ms = field<double>(j, "iqr_ms", where);
  t.min_ms = field<double>(j, "min_ms", where);
  t.reps = field<int>(j, "reps", where);
  t.held = field<bool>(j, "held", where);
  return t;
}

// The timing at j, `w` naming it.
TimingResult timing_at(const nlohmann::json& j, const std::string& w) {
  TimingResult t;
  t.time = time_stats_at(field<nlohmann::json>(j, "time", w), w + ".time");
  t.eager = time_stats_at(field<nlohmann::json>(j, "eager", w), w + ".eager");
  t.scripted = time_stats_at(field<nlohmann::json>(j, "scripted", w), w + ".scripted");
  t.speedup_eager = field<double>(j, "speedup_eager", w);
  t.speedup_scripted = field<double>(j, "speedup_scripted", w);
  if (j.contains("compiled") && !j["compiled"].is_null())
    t.compiled = time_stats_at(j["compiled"], w + ".compiled");
  t.speedup_compiled = optional_number(j, "speedup_compiled", w);
  t.compiled_absent = field<std::string>(j, "compiled_absent", w);
  t.bytes = optional_number(j, "bytes", w);
  t.flops = optional_number(j, "flops", w);
  t.floor_ms = optional_number(j, "floor_ms", w);
  t.roofline_fraction = optional_number(j, "roofline_fraction", w);
  t.suspicious = field<bool>(j, "suspicious", w);
  t.suspicion = field<std::string>(j, "suspicion", w);
  t.math_mode = field<std::string>(j, "math_mode", w);
  t.device = field<nlohmann::json>(j, "device", w);
  t.clocks = field<nlohmann::json>(j, "clocks", w);
  return t;
}

}  // namespace

TimeStats time_stats_from_json(const nlohmann::json& j) {
  return time_stats_at(j, "time");
}

TimingResult timing_from_json(const nlohmann::json& j) {
  return timing_at(j, "timing");
}

nlohmann::json to_json(const Verdict& v) {
  return {{"outcome", to_string(v.outcome)},
          {"flags", v.flags},
          {"summary", v.summary},
          {"evidence", v.evidence},
          {"timing", v.timing ? v.timing->to_json() : nlohmann::json(nullptr)}};
}

Verdict verdict_from_json(const nlohmann::json& j) {
  Verdict v;
  std::string outcome = field<std::string>(j, "outcome", "verdict");
  std::optional<Outcome> o = outcome_from_string(outcome);
  if (!o) throw Error("verdict.outcome: \"" + outcome.substr(0, 80) + "\" is not an outcome");
  v.outcome = *o;
  v.flags = field<std::vector<std::string>>(j, "flags", "verdict");
  v.summary = field<std::string>(j, "summary", "verdict");
  v.evidence = field<nlohmann::json>(j, "evidence", "verdict");
  if (j.is_object() && j.contains("timing") && !j["timing"].is_null())
    v.timing = timing_at(j["timing"], "verdict.timing");
  return v;
}

void assess_speed(TimingResult& t) {
  auto pct = [](double fraction) {
    return std::to_string(static_cast<int>(100 * fraction + 0.5)) + "%";
  };
  t.suspicious = false;
  t.suspicion.clear();
  double ms = t.time.median_ms;
  if (t.floor_ms && ms < *t.floor_ms) {
    t.suspicious = true;
    t.suspicion = std::string(kSuspicionBelowFloor) + " (" + pct(*t.floor_ms / ms) +
                  " of it): impossible, so the kernel skipped work or the timing is wrong";
  } else if (t.speedup_eager > kSuspiciousSpeedup) {
    double eager_fraction =
        t.floor_ms && t.eager.median_ms > 0 ? *t.floor_ms / t.eager.median_ms : 1.0;
    if (t.floor_ms && eager_fraction * kSuspiciousSpeedup < 1.0) {
      t.suspicion = "explained: eager runs at " + pct(eager_fraction) +
                    " of the roofline floor, the kernel at " + pct(*t.floor_ms / ms) +
                    ", so a large speedup over eager is expected";
    } else {
      t.suspicious = true;
      t.suspicion = "more than " + std::to_string(static_cast<int>(kSuspiciousSpeedup)) +
                    "x eager, while eager runs within " +
                    std::to_string(static_cast<int>(kSuspiciousSpeedup)) +
                    "x of the roofline floor" + (t.floor_ms ? "" : " (no floor known)") +
                    ": awaiting review (kforge archive review)";
    }
  }
}

}  // namespace kforge::verify
