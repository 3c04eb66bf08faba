#include "kforge/archive/field_metrics.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

namespace kforge::archive {
namespace {

// The geometric mean of `xs` (0 when empty), by logs: a product of a hundred speedups overflows.
double geomean(const std::vector<double>& xs) {
  if (xs.empty()) return 0;
  double sum = 0;
  for (double x : xs) sum += std::log(x);
  return std::exp(sum / static_cast<double>(xs.size()));
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

}  // namespace

FieldMetrics field_metrics(const std::vector<ProblemResult>& results, size_t problems) {
  FieldMetrics m;
  m.problems = std::max(problems, results.size());
  for (const ProblemResult& r : results) m.correct += r.correct && r.time_ms;
  m.correctness = m.problems ? static_cast<double>(m.correct) / m.problems : 0;
  struct Column {
    std::string label;
    std::optional<BaselineKind> kind;  // none: the best baseline
  };
  for (const Column& c :
       {Column{"eager", BaselineKind::Eager}, Column{"compile", BaselineKind::Compiled},
        Column{"best", std::nullopt}}) {
    FieldMetrics::Against a;
    a.baseline = c.label;
    std::vector<double> speedups;
    for (const ProblemResult& r : results) {
      if (!r.correct || !r.time_ms) continue;
      std::optional<double> x =
          c.kind ? r.baselines.speedup(*c.kind, r.time_ms) : r.baselines.best_speedup(r.time_ms);
      if (x && *x > 0) speedups.push_back(*x);
    }
    a.timed = speedups.size();
    for (double p : kFastThresholds)
      a.fast[p] = m.problems ? static_cast<double>(std::count_if(speedups.begin(), speedups.end(),
                                                                 [&](double x) { return x > p; })) /
                                   m.problems
                             : 0;
    std::vector<double> faster;
    std::copy_if(speedups.begin(), speedups.end(), std::back_inserter(faster),
                 [](double x) { return x > 1; });
    a.geomean_correct = geomean(speedups);
    a.geomean_correct_faster = geomean(faster);
    m.against.push_back(std::move(a));
  }
  return m;
}

nlohmann::json FieldMetrics::to_json() const {
  nlohmann::json j = {{"problems", problems}, {"correct", correct}, {"correctness", correctness}};
  for (const Against& a : against) {
    nlohmann::json fast = nlohmann::json::object();
    for (const auto& [p, v] : a.fast) fast["fast_" + fixed(p, p == std::floor(p) ? 0 : 1)] = v;
    j["against"][a.baseline] = {{"timed", a.timed},
                                {"fast_p", fast},
                                {"geomean_speedup_correct", a.geomean_correct},
                                {"geomean_speedup_correct_and_faster", a.geomean_correct_faster}};
  }
  return j;
}

std::string FieldMetrics::to_markdown() const {
  std::ostringstream out;
  out << "Correct: " << correct << " of " << problems << " problems ("
      << fixed(100 * correctness, 1) << " %).\n\n| against | timed |";
  for (double p : kFastThresholds) out << " fast_" << fixed(p, p == std::floor(p) ? 0 : 1) << " |";
  out << " geomean x (correct) | geomean x (correct, faster) |\n|---|---:|";
  for (size_t i = 0; i < kFastThresholds.size() + 2; ++i) out << "---:|";
  out << "\n";
  for (const Against& a : against) {
    out << "| " << a.baseline << " | " << a.timed << " |";
    for (double p : kFastThresholds) out << " " << fixed(100 * a.fast.at(p), 1) << " % |";
    out << " " << fixed(a.geomean_correct, 2) << " | " << fixed(a.geomean_correct_faster, 2)
        << " |\n";
  }
  return out.str();
}

nlohmann::json FieldFigures::to_json() const {
  nlohmann::json first = first_sample.to_json();
  first["sampled"] = sampled;
  return {{"best", best.to_json()}, {"first_sample", first}};
}

std::string FieldFigures::to_markdown() const {
  std::string out = "**Best of all attempts**" + best_note + "\n\n" + best.to_markdown() +
                    "\n**First sample (KernelBench's one-shot figure)**: ";
  if (sampled == 0) return out + "no problem has a kernel a model wrote here.\n";
  return out + "each problem's first kernel a model wrote (" + std::to_string(sampled) + " of " +
         std::to_string(first_sample.problems) + " problems have one)\n\n" +
         first_sample.to_markdown();
}

}  // namespace kforge::archive
