// Profile feedback (judge.h, docs/evolve.md "Profile feedback"): one run of a correct candidate's
// plan at the timed dims under Nsight Compute, and the few numbers a model can act on read from
// its CSV log.
#include <algorithm>
#include <map>
#include <sstream>

#include "judge_parts.h"
#include "kforge/common/strings.h"

namespace kforge::verify {

using nlohmann::json;

namespace {

const char* const kDuration = "gpu__time_duration.sum";
const char* const kStallPrefix = "smsp__average_warps_issue_stalled_";
const char* const kStallSuffix = "_per_issue_active.ratio";
// What the prompt calls each metric (docs/evolve.md).
const std::map<std::string, std::string> kKept = {
    {"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "dram_pct"},
    {"sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm_pct"},
    {"lts__throughput.avg.pct_of_peak_sustained_elapsed", "l2_pct"},
    {"sm__warps_active.avg.pct_of_peak_sustained_active", "occupancy_pct"},
    {"launch__registers_per_thread", "registers"}};
// Stall reasons that exist on every architecture kforge targets (Volta and newer).
const char* const kStalls[] = {
    "long_scoreboard", "short_scoreboard",   "barrier",        "membar", "mio_throttle",
    "lg_throttle",     "math_pipe_throttle", "tex_throttle",   "wait",   "not_selected",
    "no_instruction",  "branch_resolving",   "dispatch_stall", "drain",  "imc_miss",
    "sleeping"};

// One CSV record: fields in double quotes (a quote inside doubled), separated by commas.
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"')
        field += '"', ++i;
      else if (ch == '"')
        quoted = false;
      else
        field += ch;
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      out.push_back(field), field.clear();
    } else {
      field += ch;
    }
  }
  out.push_back(field);
  return out;
}

// "63,904" -> 63904; "n/a" -> none.
std::optional<double> number(const std::string& text) {
  std::string digits;
  for (char ch : text)
    if (ch != ',') digits += ch;
  try {
    size_t used = 0;
    double v = std::stod(digits, &used);
    if (used == digits.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace

const std::vector<std::string>& ncu_metrics() {
  static const std::vector<std::string> metrics = [] {
    std::vector<std::string> m = {kDuration};
    for (const auto& [name, key] : kKept) m.push_back(name);
    for (const char* stall : kStalls) m.push_back(kStallPrefix + std::string(stall) + kStallSuffix);
    return m;
  }();
  return metrics;
}

json parse_ncu_log(const std::string& log) {
  std::istringstream lines(log);
  std::string line;
  std::map<std::string, size_t> column;
  std::map<int64_t, json> launches;  // by ncu's ID: launch order
  std::string errors;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("==ERROR==", 0) == 0 || line.rfind("==WARNING==", 0) == 0) errors += line + "\n";
    if (line.empty() || line[0] != '"') continue;
    std::vector<std::string> f = csv_fields(line);
    if (column.empty()) {
      for (size_t i = 0; i < f.size(); ++i) column[f[i]] = i;
      for (const char* needed : {"ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"})
        if (!column.count(needed))
          return {{"error", "ncu's CSV has no \"" + std::string(needed) + "\" column"}};
      continue;
    }
    auto at = [&](const char* name) {
      return column[name] < f.size() ? f[column[name]] : std::string();
    };
    std::optional<double> id = number(at("ID")), value = number(at("Metric Value"));
    if (!id || !value) continue;
    json& k = launches[static_cast<int64_t>(*id)];
    std::string name = at("Kernel Name");
    k["name"] = name.substr(0, std::min(name.find('('), size_t{120}));
    std::string metric = at("Metric Name"), unit = at("Metric Unit");
    if (metric == kDuration) {
      double scale = unit == "ns"                        ? 1e-6
                     : unit == "us" || unit == "usecond" ? 1e-3
                     : unit == "ms" || unit == "msecond" ? 1
                     : unit == "s" || unit == "second"   ? 1e3
                                                         : 1e-6;
      k["duration_ms"] = *value * scale;
    } else if (auto kept = kKept.find(metric); kept != kKept.end()) {
      k[kept->second] = *value;
    } else if (metric.rfind(kStallPrefix, 0) == 0 &&
               metric.size() >
                   std::string(kStallPrefix).size() + std::string(kStallSuffix).size()) {
      std::string reason = metric.substr(std::string(kStallPrefix).size());
      reason = reason.substr(0, reason.size() - std::string(kStallSuffix).size());
      k["all_stalls"][reason] = *value;
    }
  }
  if (launches.empty())
    return {{"error", errors.empty() ? "ncu profiled no kernel (its log has no metrics)"
                                     : trim(errors).substr(0, 1000)}};
  json kernels = json::array();
  for (auto& [id, k] : launches) {
    std::vector<std::pair<std::string, double>> stalls;
    const json all = k.value("all_stalls", json::object());
    for (const auto& [reason, v] : all.items()) stalls.emplace_back(reason, v.get<double>());
    std::stable_sort(stalls.begin(), stalls.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    if (stalls.size() > 3) stalls.resize(3);
    k.erase("all_stalls");
    k["stalls"] = stalls;
    kernels.push_back(k);
  }
  return {{"kernels", kernels}};
}

json Judge::profile(const tasks::Task& task, const compile::CandidateReport& report,
                    const std::string& ncu_path) {
  if (!report.ok() || report.configurations.empty())
    return {{"error", "the candidate did not compile"}};
  if (ncu_path.empty()) return {{"error", "Nsight Compute (ncu) is not installed"}};
  json out;
  Verdict v = guarded([&] {
    parts::Verification j(options_, runner_, *session_, task, report);
    size_t timed = 0;
    for (size_t i = 0; i < report.configurations.size(); ++i)
      if (report.configurations[i].first == task.dims) timed = i;
    const auto& [dims, plan] = report.configurations[timed];
    parts::Config c = parts::prepare_config(j, dims, plan, timed);
    std::vector<torch::Tensor> inputs = parts::draw_inputs(j, dims, j.seed, 0);
    std::string metrics = join(ncu_metrics(), ",");
    auto wrapper = [&](const std::string& log) -> std::vector<std::string> {
      return {ncu_path, "--csv", "--log-file", log, "--metrics", metrics};
    };
    parts::SanitizedRun run =
        parts::run_wrapped(j, wrapper, c, true, inputs, j.seed, std::chrono::seconds(300));
    out = run.result.ok()
              ? parse_ncu_log(run.log)
              : json{{"error", "the run under ncu failed: " + run.result.evidence.substr(0, 500) +
                                   (run.log.empty() ? "" : "; ncu: " + run.log.substr(0, 500))}};
    out["tool"] = ncu_path;
    out["dims"] = dims;
    out["ms"] = run.ms;
    Verdict done;
    done.outcome = Outcome::Correct;  // the profile is in `out`; guarded() only catches failures
    return done;
  });
  if (v.outcome == Outcome::HarnessError) return {{"error", v.summary}};
  return out;
}

}  // namespace kforge::verify
