#include "baseline_columns.h"

#include <algorithm>
#include <cctype>

#include "table.h"

namespace kforge::cli {
namespace {

std::string cell(const std::optional<double>& v, int digits, const std::string& unit = "") {
  return v ? fixed(*v, digits) + unit : "-";
}

std::string times(const std::optional<double>& v, const std::string& label) {
  return v ? fixed(*v, 2) + "x " + label : "";
}

std::string joined(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const std::string& p : parts)
    if (!p.empty()) out += (out.empty() ? "" : sep) + p;
  return out;
}

}  // namespace

std::vector<std::string> baseline_labels(bool with_best) {
  std::vector<std::string> out;
  for (const BaselineKindInfo& info : baseline_kinds()) out.emplace_back(info.label);
  if (with_best) out.emplace_back(kBestBaselineLabel);
  return out;
}

std::string heading(const std::string& label) {
  std::string out = label;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string> baseline_ms_cells(const BaselineTimes& b, int digits) {
  std::vector<std::string> out;
  for (const BaselineKindInfo& info : baseline_kinds())
    out.push_back(cell(b.ms(info.kind), digits));
  return out;
}

std::vector<std::string> speedup_cells(const BaselineTimes& b, std::optional<double> time_ms,
                                       const std::string& unit) {
  std::vector<std::string> out;
  for (const BaselineKindInfo& info : baseline_kinds())
    out.push_back(cell(b.speedup(info.kind, time_ms), 2, unit));
  out.push_back(cell(b.best_speedup(time_ms), 2, unit));
  return out;
}

std::string short_speedups(const BaselineTimes& b, std::optional<double> time_ms,
                           const std::string& sep) {
  return joined({times(b.speedup(BaselineKind::Eager, time_ms),
                       std::string(baseline_info(BaselineKind::Eager).label)),
                 times(b.best_speedup(time_ms), std::string(kBestBaselineLabel))},
                sep);
}

std::string all_speedups(const BaselineTimes& b, std::optional<double> time_ms,
                         const std::string& sep) {
  std::vector<std::string> parts;
  for (const BaselineKindInfo& info : baseline_kinds())
    parts.push_back(times(b.speedup(info.kind, time_ms), std::string(info.label)));
  parts.push_back(times(b.best_speedup(time_ms), std::string(kBestBaselineLabel)));
  return joined(parts, sep);
}

std::string baseline_legend() {
  std::string out;
  for (const BaselineKindInfo& info : baseline_kinds())
    out += std::string(info.label) + " = " + std::string(info.about) + "; ";
  return out + std::string(kBestBaselineLabel) +
         " = the fastest of them measured, the figure to beat";
}

std::vector<std::string> absent_reasons(const BaselineTimes& b) {
  std::vector<std::string> out;
  for (const BaselineMs& m : b.items)
    if (!m.ms && !m.absent.empty())
      out.push_back(std::string(baseline_info(m.kind).label) + ": " + m.absent);
  return out;
}

std::string absent_baselines_text(const std::vector<AbsentBaseline>& absent, size_t timed) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // reason, its tasks
  for (const AbsentBaseline& a : absent) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == a.reason; });
    if (it == groups.end()) it = groups.insert(groups.end(), {a.reason, {}});
    it->second.push_back(a.task);
  }
  std::string out;
  for (const auto& [reason, names] : groups) {
    if (names.size() <= 2) {
      for (const std::string& task : names) out += "- " + printable(task + ": " + reason) + "\n";
    } else if (names.size() == timed) {
      out +=
          "- " + printable(reason) + ": every timed task above (" + std::to_string(timed) + ")\n";
    } else {
      out += "- " + printable(reason) + ": " + std::to_string(names.size()) +
             " tasks: " + printable(joined(names, ", ")) + "\n";
    }
  }
  return out.empty() ? "" : "\nBaselines not measured (their columns \"-\"):\n" + out;
}

}  // namespace kforge::cli
