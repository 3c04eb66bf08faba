#include "kforge/verify/outcome.h"

#include <algorithm>
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

nlohmann::json BaselineTiming::to_json() const {
  nlohmann::json j = stats ? stats->to_json() : nlohmann::json{{"absent", absent}};
  j["kind"] = kforge::to_string(kind);
  if (build_s > 0) j["build_s"] = build_s;
  return j;
}

BaselineTimes medians(const std::vector<BaselineTiming>& list) {
  BaselineTimes out;
  for (const BaselineTiming& b : list)
    if (b.stats || !b.absent.empty())
      out.set(b.kind, b.stats ? std::optional<double>(b.stats->median_ms) : std::nullopt,
              b.stats ? "" : b.absent);
  return out;
}

const BaselineTiming* find_baseline(const std::vector<BaselineTiming>& list, BaselineKind kind) {
  for (const BaselineTiming& b : list)
    if (b.kind == kind) return &b;
  return nullptr;
}

std::optional<double> TimingResult::speedup(BaselineKind kind) const {
  return medians(baselines).speedup(kind, time.median_ms);
}

std::optional<double> TimingResult::best_speedup() const {
  return medians(baselines).best_speedup(time.median_ms);
}

nlohmann::json TimingResult::to_json() const {
  auto opt = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  nlohmann::json list = nlohmann::json::array(), speedups = nlohmann::json::object();
  for (const BaselineTiming& b : baselines) list.push_back(b.to_json());
  // Derived, for a human reading the evidence: timing_from_json recomputes them from the list.
  for (const BaselineKindInfo& info : baseline_kinds())
    if (std::optional<double> x = speedup(info.kind)) speedups[std::string(info.name)] = *x;
  if (std::optional<double> x = best_speedup()) speedups[std::string(kBestBaselineLabel)] = *x;
  return {{"time", time.to_json()},
          {"baselines", list},
          {"speedup", speedups},
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

// The baselines at j (an array of BaselineTiming::to_json), `where` naming it: each kind once,
// in baseline_kinds() order, the kinds this kforge does not know left out.
std::vector<BaselineTiming> baselines_at(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array())
    throw Error(where + ": " +
                j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 80) +
                " is not a list of baselines");
  std::vector<BaselineTiming> out;
  for (size_t i = 0; i < j.size(); ++i) {
    std::string w = where + "[" + std::to_string(i) + "]";
    std::string name = field<std::string>(j[i], "kind", w);
    std::optional<BaselineKind> kind = baseline_kind_from_string(name);
    if (!kind) continue;  // a newer kforge's kind
    if (find_baseline(out, *kind))
      throw Error(w + ".kind: \"" + name.substr(0, 80) + "\" comes twice");
    BaselineTiming b;
    b.kind = *kind;
    if (j[i].contains("median_ms"))
      b.stats = time_stats_at(j[i], w);
    else
      b.absent = field<std::string>(j[i], "absent", w);
    b.build_s = optional_number(j[i], "build_s", w).value_or(0);
    out.push_back(std::move(b));
  }
  auto order = [](BaselineKind k) {
    const auto& kinds = baseline_kinds();
    return std::find_if(kinds.begin(), kinds.end(),
                        [&](const BaselineKindInfo& info) { return info.kind == k; }) -
           kinds.begin();
  };
  std::stable_sort(out.begin(), out.end(), [&](const BaselineTiming& a, const BaselineTiming& b) {
    return order(a.kind) < order(b.kind);
  });
  return out;
}

// The timing at j, `w` naming it. Its "speedup" is derived from the baselines and not read.
TimingResult timing_at(const nlohmann::json& j, const std::string& w) {
  TimingResult t;
  t.time = time_stats_at(field<nlohmann::json>(j, "time", w), w + ".time");
  t.baselines = baselines_at(field<nlohmann::json>(j, "baselines", w), w + ".baselines");
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

std::vector<BaselineTiming> baselines_from_json(const nlohmann::json& j, const std::string& where) {
  return baselines_at(j, where);
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
  } else if (std::optional<double> over_eager = t.speedup(BaselineKind::Eager);
             over_eager && *over_eager > kSuspiciousSpeedup) {
    double eager_ms = *medians(t.baselines).ms(BaselineKind::Eager);
    double eager_fraction = t.floor_ms && eager_ms > 0 ? *t.floor_ms / eager_ms : 1.0;
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
