// `kforge report RUN`: a run's report in markdown, from the archive's read model
// (kforge/archive/report.h): per task the best (the winner rule) against each kind of baseline,
// the best baseline and the roofline, outcomes, proposers, spend, best by generation and lineage.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "kforge/archive/report.h"

namespace kforge::cli {

// " (63% from the prompt cache)" when a provider's prompt cache served some of `in` input tokens;
// "" when it served none (the report's and kforge evolve's closing line).
std::string cached_share(int64_t in, int64_t cache_read);

// What a run spent (its runs.budgets_used), in words: "251 evaluations, 138.7 s of GPU, 145.5 s
// wall", then the LLM's answers, tokens and price when it asked one.
std::string spent_text(const nlohmann::json& budgets_used);

// The report's markdown.
std::string report_markdown(const archive::RunReport& r);

// Writes the report of `run` in the archive `db_flag` names to `out_file` (standard output when
// empty); a UsageError when there is no such run or the file cannot be written.
int run_report(int64_t run, const std::string& db_flag, const std::string& out_file,
               bool json = false);

}  // namespace kforge::cli
