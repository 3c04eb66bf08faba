// The baselines in the commands' tables and lines: a column per kind of baseline_kinds() and one
// for the best baseline (the fastest kind measured, the figure to beat), so a kind added there
// shows up in every table without an edit here. Where space is short (one progress line, a cell per
// generation) only x eager and x best.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kforge/common/baseline.h"

namespace kforge::cli {

// "eager", "scripted", ..., then "best" (kBestBaselineLabel) where `with_best`.
std::vector<std::string> baseline_labels(bool with_best);
// Each label upper-cased, for the plain-text tables' headings ("x EAGER", "x BEST").
std::string heading(const std::string& label);

// Each kind's median with `digits` digits, "-" where the kind has none.
std::vector<std::string> baseline_ms_cells(const BaselineTimes& b, int digits);
// Each kind's speedup of a kernel of `time_ms` (2 digits, then `unit`), then the best baseline's;
// "-" where there is none.
std::vector<std::string> speedup_cells(const BaselineTimes& b, std::optional<double> time_ms,
                                       const std::string& unit = "");
// "1.71x eager, 1.20x best": x eager and x best only (where each is known), joined by `sep`.
std::string short_speedups(const BaselineTimes& b, std::optional<double> time_ms,
                           const std::string& sep = ", ");
// "1.71x eager, 1.71x scripted, 1.20x compile, 1.20x best": every kind measured and the best.
std::string all_speedups(const BaselineTimes& b, std::optional<double> time_ms,
                         const std::string& sep = ", ");
// "eager = the reference run by LibTorch op by op; ...; best = the fastest kind measured, the
// figure to beat": what each column of baselines is.
std::string baseline_legend();
// "compile: why" for each kind that is absent with a reason, "" when none is.
std::vector<std::string> absent_reasons(const BaselineTimes& b);

// One task's absent baseline: its task and absent_reasons()'s "compile: why".
struct AbsentBaseline {
  std::string task, reason;
};
// The lines under a table whose `timed` rows have a kernel time: "Baselines not measured (their
// columns "-"):", then "- task: compile: why" for a reason one or two tasks give, and one line
// for a reason more give ("- max-autotune: turned off (--no-max-autotune): every timed task
// above (49)", or "- ...: 5 tasks: a, b, ..."), so a flag that turned a kind off for the whole
// run is one line; "" when none is absent. Each text through printable().
std::string absent_baselines_text(const std::vector<AbsentBaseline>& absent, size_t timed);

}  // namespace kforge::cli
