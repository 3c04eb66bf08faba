#include "report_cmd.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>

#include "baseline_columns.h"
#include "commands.h"
#include "kforge/archive/field_metrics.h"
#include "kforge/archive/location.h"
#include "kforge/common/error.h"
#include "table.h"

namespace kforge::cli {
namespace {

using nlohmann::json;

// Per task, the best after each generation (x eager and x best) and the proposer of each new
// best: where the search found its speed.
std::string best_by_generation(const archive::RunReport& r) {
  if (r.progress.empty()) return "";
  std::ostringstream md;
  md << "\n## Best by generation\n\nx eager and x best (over the fastest baseline measured) of "
        "the task's best (admitted) kernel after each generation, and the proposer of each new "
        "best.\n\n| task |";
  for (int64_t g = 0; g <= r.last_generation; ++g) md << " g" << g << " |";
  md << "\n|---|";
  for (int64_t g = 0; g <= r.last_generation; ++g) md << "---|";
  md << "\n";
  for (const auto& [task, steps] : r.progress) {
    md << "| " << task << " |";
    const archive::RunProgress* now = nullptr;
    for (int64_t g = 0; g <= r.last_generation; ++g) {
      auto it = std::find_if(steps.begin(), steps.end(),
                             [&](const archive::RunProgress& p) { return p.generation == g; });
      bool improved = it != steps.end() && it->improved;
      if (improved) now = &*it;
      std::string speedups = now ? short_speedups(now->baselines, now->time_ms) : "";
      md << " "
         << (!speedups.empty() ? speedups
             : now             ? fixed(now->time_ms, 4) + " ms"
                               : "-")
         << (improved ? " (" + now->prompt_kind + ")" : "") << " |";
    }
    md << "\n";
  }
  return md.str();
}

// The field's problem results of the run's tasks from their bests (by the field's rule); a task
// without one is not correct.
std::vector<archive::ProblemResult> problem_results(
    const archive::RunReport& r, const std::vector<std::optional<archive::RunBest>>& bests) {
  std::vector<archive::ProblemResult> out;
  for (size_t i = 0; i < r.tasks.size(); ++i) {
    const std::optional<archive::RunBest>& b = bests.at(i);
    out.push_back(b ? archive::ProblemResult{r.tasks[i].task, true, b->time_ms, b->baselines}
                    : archive::ProblemResult{r.tasks[i].task, false, std::nullopt, {}});
  }
  return out;
}

// The field's metrics over the run's tasks, each by its best under their rule (winner.h,
// field_condition), and over each task's first sample: the first kernel a model wrote for it in
// this run.
archive::FieldFigures field_figures(const archive::RunReport& r) {
  std::vector<std::optional<archive::RunBest>> field_bests;
  for (const archive::RunTask& t : r.tasks) field_bests.push_back(t.field_best);
  std::vector<archive::ProblemResult> results = problem_results(r, field_bests);
  std::vector<archive::ProblemResult> first;
  archive::FieldFigures figures;
  for (const archive::FirstSample& f : r.first_samples)
    first.push_back(f.result), figures.sampled += f.candidate.has_value();
  figures.best = archive::field_metrics(results, results.size());
  figures.first_sample = archive::field_metrics(first, results.size());
  return figures;
}

// How the field's metrics moved: the best of all attempts among generations 0..g, for each g.
std::string field_by_generation(const archive::RunReport& r) {
  if (r.field_best_by_generation.size() < 2) return "";
  std::ostringstream md;
  md << "\n**By generation** (the best of all attempts among the generations up to each):\n\n"
        "| after | correct | fast_1 eager | fast_1 compile | fast_1.5 best | fast_2 best | geomean "
        "x eager | geomean x compile |\n|---|---:|---:|---:|---:|---:|---:|---:|\n";
  auto pct = [](double v) { return fixed(100 * v, 1) + " %"; };
  for (size_t g = 0; g < r.field_best_by_generation.size(); ++g) {
    archive::FieldMetrics m =
        archive::field_metrics(problem_results(r, r.field_best_by_generation[g]), r.tasks.size());
    const auto& eager = m.against.at(0);
    const auto& compile = m.against.at(1);
    const auto& best = m.against.at(2);
    md << "| g" << g << " | " << m.correct << " of " << m.problems << " | " << pct(eager.fast.at(1))
       << " | " << pct(compile.fast.at(1)) << " | " << pct(best.fast.at(1.5)) << " | "
       << pct(best.fast.at(2)) << " | " << fixed(eager.geomean_correct, 2) << " | "
       << fixed(compile.geomean_correct, 2) << " |\n";
  }
  return md.str();
}

// The task table's baseline columns: each kind's median and speedup, then x best.
std::string baseline_headings() {
  std::string out;
  for (const std::string& label : baseline_labels(false))
    out += " " + label + " ms | x " + label + " |";
  return out + " x " + std::string(kBestBaselineLabel) + " |";
}

std::string baseline_cells(const archive::RunBest& b) {
  std::vector<std::string> ms = baseline_ms_cells(b.baselines, 4),
                           x = speedup_cells(b.baselines, b.time_ms);
  std::string out;
  for (size_t i = 0; i < ms.size(); ++i) out += " " + ms[i] + " | " + x[i] + " |";
  return out + " " + x.back() + " |";
}

std::string spend(const archive::RunReport& r) {
  const json& used = r.run["budgets_used"];
  if (!used.is_object() ||
      used.value("llm_calls", int64_t{0}) + used.value("llm_failed_calls", int64_t{0}) == 0)
    return "";
  int64_t candidates = 0;
  for (const archive::RunProposer& p : r.proposers) candidates += p.candidates;
  int64_t tokens =
      used.value("llm_tokens_in", int64_t{0}) + used.value("llm_tokens_out", int64_t{0});
  std::ostringstream md;
  md << "\nLLM: " << used.value("llm_calls", int64_t{0}) << " answer(s) ("
     << used.value("llm_cached", int64_t{0}) << " from the cache), "
     << used.value("llm_failed_calls", int64_t{0}) << " failed call(s); "
     << used.value("llm_tokens_in", int64_t{0}) << " tokens in"
     << cached_share(used.value("llm_tokens_in", int64_t{0}),
                     used.value("llm_tokens_cache_read", int64_t{0}))
     << ", " << used.value("llm_tokens_out", int64_t{0}) << " out; "
     << (candidates ? tokens / candidates : 0) << " tokens per candidate of the run.\n";
  return md.str();
}

// The baselines absent, with their reasons, of the tasks' bests (absent_baselines_text).
std::string absent_baselines(const archive::RunReport& r) {
  std::vector<AbsentBaseline> absent;
  size_t timed = 0;
  for (const archive::RunTask& t : r.tasks)
    if (t.best) {
      ++timed;
      for (const std::string& why : absent_reasons(t.best->baselines))
        absent.push_back({t.task, why});
    }
  return absent_baselines_text(absent, timed);
}

}  // namespace

std::string cached_share(int64_t in, int64_t cache_read) {
  if (cache_read <= 0 || in <= 0) return "";
  double percent = 100.0 * static_cast<double>(std::min(cache_read, in)) / static_cast<double>(in);
  return " (" + (percent < 1 ? std::string("<1") : fixed(percent, 0)) + "% from the prompt cache)";
}

std::string spent_text(const nlohmann::json& used) {
  auto number = [&](const char* key) {
    const auto it = used.find(key);
    return it != used.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  std::string out = fixed(number("evaluations"), 0) + " evaluations, " + fixed(number("gpu_s"), 1) +
                    " s of GPU, " + fixed(number("wall_s"), 1) + " s wall";
  if (number("llm_calls") > 0 || number("llm_failed_calls") > 0) {
    const auto in = static_cast<int64_t>(number("llm_tokens_in"));
    out += "; LLM: " + fixed(number("llm_calls"), 0) + " answers (" +
           fixed(number("llm_cached"), 0) + " from the response cache, " +
           fixed(number("llm_failed_calls"), 0) + " failed calls), " + std::to_string(in) +
           " tokens in" + cached_share(in, static_cast<int64_t>(number("llm_tokens_cache_read"))) +
           ", " + fixed(number("llm_tokens_out"), 0) + " out";
    if (number("llm_cost_usd") > 0) out += ", $" + fixed(number("llm_cost_usd"), 4);
  }
  return out;
}

std::string report_markdown(const archive::RunReport& r) {
  std::ostringstream md;
  md << "# kforge evolve, run " << r.run["id"] << "\n\n"
     << "Started " << r.run["started_at"].get<std::string>() << ", "
     << r.run["status"].get<std::string>()
     << (r.run["finished_at"].is_null() ? "" : " " + r.run["finished_at"].get<std::string>())
     << ". Spent: " << spent_text(r.run["budgets_used"]) << ". Config:\n\n```json\n"
     << r.run["config"].dump(2) << "\n```\n\n";
  size_t columns = 2 * baseline_kinds().size() + 1;  // each kind's ms and x, then x best
  md << "| task | best ms |" << baseline_headings() << " roofline | candidates | failed |\n|";
  for (size_t i = 0; i < columns + 5; ++i) md << "---|";
  md << "\n";
  for (const archive::RunTask& t : r.tasks) {
    if (!t.best) {
      md << "| " << t.task << " |";
      for (size_t i = 0; i < columns + 2; ++i) md << " - |";
      md << " " << t.candidates << " | " << t.failed_screens << " |\n";
      continue;
    }
    const archive::RunBest& b = *t.best;
    md << "| " << t.task << " | " << fixed(b.time_ms, 4) << " |" << baseline_cells(b) << " "
       << (b.roofline_fraction ? fixed(100 * *b.roofline_fraction, 0) + "%" : "-") << " | "
       << t.candidates << " | " << t.failed_screens << " |\n";
  }
  md << "\nBaselines: " << baseline_legend() << "; roofline = floor / time.\n"
     << absent_baselines(r);
  archive::FieldFigures figures = field_figures(r);
  md << "\n## The field's metrics\n\nKernelBench's correctness rate, fast_p and geometric means "
        "over the run's tasks, for each task's best kernel and for the first kernel a model wrote "
        "for it in the run (docs/results.md):\n\n"
     << figures.to_markdown() << field_by_generation(r);
  md << "\n## Outcomes\n\n";
  for (const archive::RunOutcome& o : r.outcomes)
    md << "- " << o.outcome << ": " << o.count << "\n";
  // Who proposed what, and how much of it was correct (a screen or a judgment).
  md << "\n## Proposers\n\n| kind | model | candidates | correct | share correct "
        "|\n|---|---|---|---|---|\n";
  for (const archive::RunProposer& p : r.proposers)
    md << "| " << p.kind << " | " << p.model << " | " << p.candidates << " | " << p.correct << " | "
       << fixed(100.0 * static_cast<double>(p.correct) /
                    static_cast<double>(std::max<int64_t>(p.candidates, 1)),
                0)
       << "% |\n";
  md << spend(r) << best_by_generation(r);
  md << "\n## Winners' lineage\n\n";
  for (const auto& [task, chain] : r.lineage) {
    md << "- " << task << ": ";
    std::string line;
    for (const archive::LineageEntry& c : chain)
      line += (line.empty() ? "" : " <- ") + std::to_string(c.candidate.value) + " (" +
              c.prompt_kind + " " + c.tunables.dump() + ")";
    md << line << "\n";
  }
  return md.str();
}

// --json: the report's figures (what the markdown shows, as numbers).
nlohmann::json report_json(const archive::RunReport& r) {
  auto best_json = [](const std::optional<archive::RunBest>& b) {
    if (!b) return nlohmann::json(nullptr);
    return nlohmann::json{
        {"candidate", b->candidate.value},
        {"time_ms", b->time_ms},
        {"roofline_fraction",
         b->roofline_fraction ? nlohmann::json(*b->roofline_fraction) : nlohmann::json(nullptr)},
        {"baselines", b->baselines.to_json()},
        {"speedup", b->baselines.speedups_json(b->time_ms)}};
  };
  nlohmann::json tasks = nlohmann::json::array();
  for (const archive::RunTask& t : r.tasks) {
    tasks.push_back({{"task", t.task},
                     {"best", best_json(t.best)},
                     {"field_best", best_json(t.field_best)},
                     {"candidates", t.candidates},
                     {"failed_screens", t.failed_screens}});
  }
  nlohmann::json outcomes = nlohmann::json::object(), proposers = nlohmann::json::array(),
                 lineage = nlohmann::json::object();
  for (const archive::RunOutcome& o : r.outcomes) outcomes[o.outcome] = o.count;
  for (const archive::RunProposer& p : r.proposers)
    proposers.push_back({{"kind", p.kind},
                         {"model", p.model},
                         {"candidates", p.candidates},
                         {"correct", p.correct}});
  for (const auto& [task, chain] : r.lineage)
    for (const archive::LineageEntry& c : chain)
      lineage[task].push_back({{"candidate", c.candidate.value},
                               {"prompt_kind", c.prompt_kind},
                               {"tunables", c.tunables}});
  return {{"run", r.run},
          {"tasks", tasks},
          {"metrics", field_figures(r).to_json()},
          {"outcomes", outcomes},
          {"proposers", proposers},
          {"lineage", lineage},
          {"last_generation", r.last_generation}};
}

int run_report(int64_t run, const std::string& db_flag, const std::string& out_file, bool json) {
  std::string path = archive::database_path(db_flag).string();
  archive::Archive ar = archive::Archive::open_read_only(path);
  std::optional<archive::RunReport> r = archive::run_report(ar, archive::RunId{run});
  if (!r) throw UsageError("kforge report: no run " + std::to_string(run) + " in " + path);
  std::string md = json ? report_json(*r).dump(2) + "\n" : report_markdown(*r);
  if (out_file.empty()) {
    std::cout << md;
  } else {
    std::ofstream f(out_file);
    f << md;
    if (!f) throw UsageError("kforge report: cannot write " + out_file);
    std::cout << "wrote " << out_file << "\n";
  }
  return kExitOk;
}

}  // namespace kforge::cli
